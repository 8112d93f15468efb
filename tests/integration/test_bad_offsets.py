"""Offsets Kafka cannot hold, given to every method that takes one (issue 35, case 1).

Each is refused with ``ConfigurationError`` before anything changes, and the partition
goes on delivering from where it was. Before, ``seek(tp, -99)`` returned normally and
the partition never delivered again (librdkafka took the offset, then reported
"_ALL_BROKERS_DOWN" every second), and the same seek inside ``on_partitions_assigned``
raised librdkafka's ``_INVALID_ARG`` after the partition had been restarted, leaving
it stopped.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import pytest
from confluent_kafka import TopicPartition as CkTopicPartition

from coopconsumer import (
    ConfigurationError,
    Consumer,
    OffsetAndMetadata,
    RebalanceListener,
    TopicPartition,
)
from coopconsumer.testing import EmbeddedBroker
from integration.test_consumer import PATIENCE_S, config, produce

pytestmark = pytest.mark.integration

#: Offsets no method may take: negative ones other than OFFSET_BEGINNING (-2) and
#: OFFSET_END (-1), and one past Kafka's int64.
_BAD_SEEKS = (-99, -3, -1000, 2**63)


def _manual(broker: EmbeddedBroker, group: str) -> dict[str, object]:
    settings = config(broker, group)
    del settings["partition.assignment.strategy"]
    return settings


def _take(consumer: Consumer, count: int) -> list[int]:
    """Offsets of the next ``count`` records (fewer if patience runs out)."""
    got: list[int] = []
    deadline = time.monotonic() + PATIENCE_S
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(count - len(got), 0.2):
            offset = message.offset()
            assert isinstance(offset, int)
            got.append(offset)
    return got


def _one_partition(broker: EmbeddedBroker, topic: str, records: int) -> TopicPartition:
    broker.create_topic(topic, partitions=1)
    produce(broker.bootstrap, topic, [b"r%d" % i for i in range(records)], partition=0)
    return TopicPartition(topic, 0)


def test_seek_to_an_invalid_offset_is_refused_and_the_partition_keeps_delivering(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    tp = _one_partition(broker, unique_topic, 6)
    consumer = Consumer(_manual(broker, unique_group))
    try:
        consumer.assign([tp])
        assert _take(consumer, 2) == [0, 1]
        for bad in _BAD_SEEKS:
            with pytest.raises(ConfigurationError, match=f"invalid seek offset {bad} for"):
                consumer.seek(tp, bad)
        assert consumer.position([tp]) == {tp: 2}
        assert _take(consumer, 4) == [2, 3, 4, 5]
        # The logical offsets stay accepted.
        consumer.seek(tp, -2)  # OFFSET_BEGINNING
        assert _take(consumer, 1) == [0]
    finally:
        consumer.close()


class _SeekOnAssign(RebalanceListener):
    def __init__(self, consumer: Consumer, offset: int) -> None:
        self.consumer = consumer
        self.offset = offset
        self.refused: list[BaseException] = []

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        for tp in partitions:
            try:
                self.consumer.seek(tp, self.offset)
            except ConfigurationError as exc:
                self.refused.append(exc)


def test_seek_to_an_invalid_offset_inside_on_partitions_assigned_changes_nothing(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    """The docstring's promise, "nothing changes", held inside the callback too: the
    partition starts where it would have without the seek (auto.offset.reset)."""
    tp = _one_partition(broker, unique_topic, 3)
    consumer = Consumer(config(broker, unique_group))
    listener = _SeekOnAssign(consumer, -99)
    try:
        consumer.subscribe([unique_topic], listener)
        assert _take(consumer, 3) == [0, 1, 2]
        assert len(listener.refused) == 1
        assert consumer.assignment() == {tp}
    finally:
        consumer.close()


class _Start(NamedTuple):
    """A partition with a start offset, as ``assign()`` reads confluent-kafka's
    ``TopicPartition`` (which cannot hold an offset past int64 at all)."""

    topic: str
    partition: int
    offset: int


def test_assign_with_an_invalid_start_offset_is_refused_before_anything_changes(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    tp = _one_partition(broker, unique_topic, 3)
    consumer = Consumer(_manual(broker, unique_group))
    try:
        for bad in (-99, 2**63):
            with pytest.raises(ConfigurationError, match="invalid start offset"):
                consumer.assign([_Start(tp.topic, tp.partition, bad)])
            assert consumer.assignment() == frozenset()
        consumer.assign([CkTopicPartition(tp.topic, tp.partition, 1)])
        assert _take(consumer, 2) == [1, 2]
    finally:
        consumer.close()


def test_commit_of_an_offset_kafka_cannot_store_is_refused_and_loses_nothing(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    tp = _one_partition(broker, unique_topic, 3)
    consumer = Consumer(_manual(broker, unique_group))
    try:
        consumer.assign([tp])
        assert _take(consumer, 3) == [0, 1, 2]
        consumer.commit({tp: 3})
        for bad in (-5, 2**63):
            with pytest.raises(ConfigurationError, match="invalid offset to commit"):
                consumer.commit({tp: bad})
            with pytest.raises(ConfigurationError, match="invalid offset to commit"):
                consumer.commit({tp: OffsetAndMetadata(offset=bad)})
        # confluent-kafka's TopicPartition holds int64 only.
        with pytest.raises(ConfigurationError, match="no valid offset to commit"):
            consumer.commit([CkTopicPartition(tp.topic, tp.partition, -5)])
        # The consumer is still usable and the committed offset is the last good one.
        assert consumer.committed([tp]) == {tp: 3}
        consumer.commit({tp: 2})
        assert consumer.committed([tp]) == {tp: 2}
    finally:
        consumer.close()


def test_offsets_for_times_refuses_a_timestamp_kafka_cannot_hold(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    tp = _one_partition(broker, unique_topic, 1)
    consumer = Consumer(_manual(broker, unique_group))
    try:
        for bad in (-1, 2**63):
            with pytest.raises(ConfigurationError, match="offsets_for_times"):
                consumer.offsets_for_times({tp: bad}, timeout=PATIENCE_S)
        # Still usable (the mock answers None here: it keeps no timestamp index).
        assert consumer.offsets_for_times({tp: 0}, timeout=PATIENCE_S)[tp] in (0, None)
    finally:
        consumer.close()
