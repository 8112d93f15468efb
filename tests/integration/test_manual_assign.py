"""Manual partition assignment end to end on both embedded brokers.

``assign``/``unassign``/``incremental_assign``/``incremental_unassign`` (confluent-kafka's
names and semantics): records from given and committed offsets, commits without a
generation (Kafka's "simple consumer" commit) that a second consumer resumes from,
auto-commit at close, the two modes refusing each other, and a commit without a
generation refused while the group has members (both brokers refuse it, as Kafka).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from coopconsumer import CommitFailedError, Consumer, IllegalStateError, TopicPartition
from coopconsumer.testing import EmbeddedBroker
from integration.test_consumer import PARTITIONS, PATIENCE_S, config

pytestmark = pytest.mark.integration


def _values(consumer: Consumer, count: int) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + PATIENCE_S
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(100, 0.2):
            value = message.value()
            assert isinstance(value, bytes)
            got.append(value)
    return got


def _manual(broker: EmbeddedBroker, group: str, **extra: object) -> dict[str, object]:
    settings = config(broker, group, **extra)
    del settings["partition.assignment.strategy"]
    return settings


def _produce_one_per_batch(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Round-robin over the partitions, one record per batch (a flush after each):
    Tansu answers ListOffsets "latest" with the last batch's base offset + 1
    (docs/testing.md, "Quirks of the embedded brokers"), so OFFSET_END and lag() are
    exact there only with one-record batches."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    failures: list[object] = []
    for i, value in enumerate(values):
        producer.produce(
            topic,
            value=value,
            partition=i % PARTITIONS,
            on_delivery=lambda err, _m: failures.append(err) if err is not None else None,
        )
        assert producer.flush(PATIENCE_S) == 0
    assert failures == []


def _setup(broker: EmbeddedBroker, topic: str) -> list[TopicPartition]:
    broker.create_topic(topic, partitions=PARTITIONS)
    # Partition p holds b"v{p}", b"v{p+4}", ... (5 records each, offsets 0..4).
    _produce_one_per_batch(broker.bootstrap, topic, [f"v{i}".encode() for i in range(20)])
    return [TopicPartition(topic, p) for p in range(PARTITIONS)]


def test_assign_consume_commit_and_a_second_consumer_resumes(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    tp0, tp1, _, _ = _setup(broker, unique_topic)
    with Consumer(_manual(broker, unique_group)) as first:
        first.assign([tp0, tp1])
        assert first.assignment() == {tp0, tp1}
        got = _values(first, 10)
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(20) if i % 4 in (0, 1))
        first.commit({tp0: 3})
        first.commit({tp1: 2}, asynchronous=True).result(PATIENCE_S)
        assert first.committed([tp0, tp1]) == {tp0: 3, tp1: 2}
        assert first.group_metadata().generation_id == -1  # never joined
    with Consumer(_manual(broker, unique_group)) as second:
        second.assign([tp0, tp1])
        got = _values(second, 5)
        assert sorted(got) == sorted([b"v12", b"v16", b"v9", b"v13", b"v17"])


def test_assign_with_offsets_beginning_and_end(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    tp0, tp1, tp2, _ = _setup(broker, unique_topic)
    with Consumer(_manual(broker, unique_group, **{"auto.offset.reset": "latest"})) as consumer:
        consumer.assign(
            [
                CkTopicPartition(unique_topic, 0, 3),
                CkTopicPartition(unique_topic, 1, OFFSET_BEGINNING),
                CkTopicPartition(unique_topic, 2, OFFSET_END),
            ]
        )
        got = _values(consumer, 2 + 5)
        assert sorted(got) == sorted([b"v12", b"v16", b"v1", b"v5", b"v9", b"v13", b"v17"])
        _produce_one_per_batch(broker.bootstrap, unique_topic, [b"late-0", b"late-1", b"late-2"])
        late = _values(consumer, 3)
        assert sorted(late) == [b"late-0", b"late-1", b"late-2"]
        assert consumer.position([tp0, tp1, tp2]) == {tp0: 6, tp1: 6, tp2: 6}
        assert consumer.lag(tp2) == 0


def test_incremental_assign_unassign_and_auto_commit_at_close(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    tp0, tp1, _, _ = _setup(broker, unique_topic)
    settings = _manual(broker, unique_group, **{"enable.auto.commit": True})
    with Consumer(settings) as consumer:
        consumer.incremental_assign([tp0])
        assert len(_values(consumer, 5)) == 5
        consumer.incremental_assign([tp1])
        assert consumer.assignment() == {tp0, tp1}
        assert len(_values(consumer, 5)) == 5
        consumer.incremental_unassign([tp0])
        assert consumer.assignment() == {tp1}
        consumer.pause([tp1])
        assert consumer.consume(10, 0.3) == []
        consumer.resume([tp1])
    # close() committed tp1's position; the unassign committed tp0's.
    with Consumer(_manual(broker, unique_group)) as checker:
        assert checker.committed([tp0, tp1]) == {tp0: 5, tp1: 5}


def test_unassign_returns_to_neither_mode_and_the_modes_refuse_each_other(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    tp0, *_ = _setup(broker, unique_topic)
    with Consumer(_manual(broker, unique_group)) as consumer:
        _assign_subscribe_assign(consumer, unique_topic, tp0)


def _assign_subscribe_assign(consumer: Consumer, topic: str, tp0: TopicPartition) -> None:
    """assign(), the subscription refused; unassign(), subscribe(), assign() refused;
    unsubscribe(), assign() again."""
    consumer.assign([tp0])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.subscribe([topic])
    assert len(_values(consumer, 5)) == 5
    consumer.unassign()
    assert consumer.assignment() == frozenset()
    consumer.subscribe([topic])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.assign([tp0])
    deadline = time.monotonic() + PATIENCE_S
    while len(consumer.assignment()) < PARTITIONS:
        assert time.monotonic() < deadline, "the subscription never got its partitions"
        consumer.poll(0.1)
    consumer.unsubscribe()
    consumer.assign([tp0])
    assert consumer.assignment() == {tp0}


def test_a_manual_commit_to_a_group_with_members_fails(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    tp0, *_ = _setup(broker, unique_topic)
    with Consumer(config(broker, unique_group)) as member:
        member.subscribe([unique_topic])
        deadline = time.monotonic() + PATIENCE_S
        while len(member.assignment()) < PARTITIONS:
            assert time.monotonic() < deadline, "the member never got its partitions"
            member.poll(0.1)
        with Consumer(_manual(broker, unique_group)) as outsider:
            outsider.assign([tp0])
            with pytest.raises(CommitFailedError, match="active members"):
                outsider.commit({tp0: 1})
            assert outsider.committed([tp0]) == {tp0: None}


def _manual_kip848(broker: EmbeddedBroker, group: str, **extra: object) -> dict[str, object]:
    settings = _manual(broker, group, **extra)
    for key in ("session.timeout.ms", "heartbeat.interval.ms"):
        settings.pop(key, None)
    settings["group.protocol"] = "consumer"
    return settings


def test_manual_assignment_with_the_consumer_group_protocol(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    """``assign()`` needs no group protocol at all (Java's ``AsyncKafkaConsumer`` allows
    it too): the same "simple consumer" commits, so it works on Tansu, which has no
    KIP-848, and a classic consumer resumes from them."""
    tp0, tp1, _, _ = _setup(broker, unique_topic)
    settings = _manual_kip848(broker, unique_group, **{"enable.auto.commit": True})
    with Consumer(settings) as first:
        first.assign([tp0, tp1])
        assert sorted(_values(first, 10)) == sorted(
            f"v{i}".encode() for i in range(20) if i % 4 in (0, 1)
        )
        first.commit({tp0: 3})
        assert first.committed([tp0]) == {tp0: 3}
        assert first.group_metadata().generation_id == -1
        first.incremental_unassign([tp1])  # commits tp1's position (5)
        assert first.assignment() == {tp0}
    with Consumer(_manual(broker, unique_group)) as second:
        # close() committed tp0's position over the explicit 3.
        assert second.committed([tp0, tp1]) == {tp0: 5, tp1: 5}


def test_consumer_protocol_switches_between_assign_and_subscribe(
    mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    tp0, *_ = _setup(mock_broker, unique_topic)
    with Consumer(_manual_kip848(mock_broker, unique_group)) as consumer:
        _assign_subscribe_assign(consumer, unique_topic, tp0)
