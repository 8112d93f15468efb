"""Manual assignment through the facade, on in-process fakes (no sockets).

``assign``/``unassign``/``incremental_assign``/``incremental_unassign`` with
confluent-kafka's semantics: no group requests at all, start offsets given or
committed, commits with generation -1 and no member id, auto-commit of dropped
partitions and at close, and the two modes refusing each other.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from _consumer_fakes import FakeClient, FakeCluster

from coopconsumer import (
    ConfigurationError,
    Consumer,
    IllegalStateError,
    TopicPartition,
)
from coopconsumer._protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)

GROUP = "g"
TOPIC = "t"
PATIENCE_S = 10.0
TP0, TP1, TP2, TP3 = (TopicPartition(TOPIC, p) for p in range(4))


class OffsetTP:
    """confluent-kafka's ``TopicPartition(topic, partition, offset)`` shape."""

    def __init__(self, topic: str, partition: int, offset: int = -1001) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset


def settings(**extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "group.id": GROUP,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "default.api.timeout.ms": 5000,
    }
    base.update(extra)
    return base


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    c = FakeCluster(GROUP, {TOPIC: 4})
    for tp in (TP0, TP1, TP2, TP3):
        c.produce(tp, [f"{tp.partition}-{i}".encode() for i in range(10)])
    yield c
    c.close_all()


def values(consumer: Consumer, count: int) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + PATIENCE_S
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(100, 0.05):
            value = message.value()
            assert isinstance(value, bytes)
            got.append(value.decode())
    return got


def group_requests(client: FakeClient) -> list[object]:
    kinds = (JoinGroupRequest, SyncGroupRequest, HeartbeatRequest, LeaveGroupRequest)
    return [r for r in client.sent if isinstance(r, kinds)]


def test_assign_consumes_from_given_and_committed_offsets_without_joining(
    cluster: FakeCluster,
) -> None:
    cluster.coordinator.committed[TP1] = 7
    consumer, client = cluster.consumer(settings())
    consumer.assign([OffsetTP(TOPIC, 0, 8), TP1, OffsetTP(TOPIC, 2)])
    assert consumer.assignment() == {TP0, TP1, TP2}
    got = values(consumer, 2 + 3 + 10)
    assert sorted(got) == sorted(
        ["0-8", "0-9", "1-7", "1-8", "1-9", *(f"2-{i}" for i in range(10))]
    )
    assert consumer.position([TP0, TP1]) == {TP0: 10, TP1: 10}
    consumer.close()
    assert group_requests(client) == []


def test_commit_uses_no_generation_and_a_successor_resumes(cluster: FakeCluster) -> None:
    first, client = cluster.consumer(settings())
    first.assign([TP0])
    assert len(values(first, 10)) == 10
    first.commit({TP0: 4})
    (request,) = [r for r in client.sent if isinstance(r, OffsetCommitRequest)]
    assert (request.generation_id, request.member_id, request.group_instance_id) == (-1, "", None)
    assert first.committed([TP0]) == {TP0: 4}
    first.close()
    second, _ = cluster.consumer(settings())
    second.assign([TP0])
    assert values(second, 6) == [f"0-{i}" for i in range(4, 10)]
    second.close()


def test_incremental_assign_and_unassign(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings())
    consumer.incremental_assign([OffsetTP(TOPIC, 0, 9)])
    consumer.incremental_assign([OffsetTP(TOPIC, 1, -1)])  # OFFSET_END: nothing yet
    assert consumer.assignment() == {TP0, TP1}
    assert values(consumer, 1) == ["0-9"]
    with pytest.raises(ConfigurationError, match="already assigned"):
        consumer.incremental_assign([TP0])
    with pytest.raises(ConfigurationError, match="not assigned"):
        consumer.incremental_unassign([TP3])
    assert consumer.assignment() == {TP0, TP1}
    cluster.produce(TP1, [b"1-new"])
    assert values(consumer, 1) == ["1-new"]
    consumer.incremental_unassign([TP0])
    assert consumer.assignment() == {TP1}
    consumer.incremental_unassign([TP1])
    assert consumer.assignment() == frozenset()
    consumer.subscribe([TOPIC])  # nothing assigned any more: neither mode
    consumer.close()


def test_the_two_modes_refuse_each_other(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings())
    consumer.assign([TP0])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.subscribe([TOPIC])
    assert consumer.assignment() == {TP0}
    consumer.unassign()
    assert consumer.assignment() == frozenset()
    consumer.subscribe([TOPIC])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.assign([TP1])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.incremental_assign([TP1])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.incremental_unassign([TP1])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.unassign()
    consumer.unsubscribe()
    consumer.assign([TP1])
    consumer.unsubscribe()  # drops a manual assignment too
    assert consumer.assignment() == frozenset()
    consumer.subscribe([TOPIC])
    consumer.close()


def test_assign_replaces_and_restarts_from_committed(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings())
    consumer.assign([TP0, TP1])
    assert len(values(consumer, 20)) == 20
    consumer.assign([TP1, TP2])  # TP1 restarts from its committed offset (none: earliest)
    assert consumer.assignment() == {TP1, TP2}
    assert len(values(consumer, 20)) == 20
    consumer.assign([])
    assert consumer.assignment() == frozenset()
    consumer.close()


def test_auto_commit_commits_dropped_partitions_and_at_close(cluster: FakeCluster) -> None:
    consumer, client = cluster.consumer(settings(**{"enable.auto.commit": True}))
    consumer.assign([TP0, TP1])
    assert len(values(consumer, 20)) == 20
    consumer.incremental_unassign([TP0])
    deadline = time.monotonic() + PATIENCE_S
    while cluster.coordinator.committed.get(TP0) != 10:
        assert time.monotonic() < deadline
        consumer.poll(0.05)
    consumer.close()
    assert cluster.coordinator.committed.get(TP1) == 10
    assert group_requests(client) == []


@pytest.mark.parametrize(
    "argument",
    ["t", [OffsetTP(TOPIC, 0, -5)], [TP0, TP0], [OffsetTP(TOPIC, 0, True)]],
    ids=["string", "tail-offset", "twice", "bool-offset"],
)
def test_invalid_arguments_change_nothing(cluster: FakeCluster, argument: object) -> None:
    consumer, _ = cluster.consumer(settings())
    consumer.assign([TP3])
    with pytest.raises(ConfigurationError):
        consumer.assign(argument)  # type: ignore[arg-type]
    assert consumer.assignment() == {TP3}
    consumer.close()
