"""Issue 35's probe extended to what it did not reach, on real brokers: a corrupted
committed offset, an assignor that returns a partition twice or one nobody subscribed
to, records larger than the fetch limits, and a producer failure inside the
exactly-once loop. Each fails loudly with a typed error, or goes on as Kafka's clients
do, and loses nothing. (TLS and SASL failures: tests/integration/test_security.py and
test_log_flood.py; Spark: tests/integration/spark/test_source_failures.py.)"""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
import pytest

from coopconsumer import (
    Consumer,
    InvalidAssignmentError,
    TopicPartition,
    TransactionAbortedError,
    TransactionalOutput,
    TransactionalProcessor,
)
from coopconsumer.assignors import (
    Assignment,
    ClusterMetadata,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupSubscription,
    RebalanceProtocol,
)
from coopconsumer.testing import EmbeddedBroker
from integration.test_consumer import PATIENCE_S, config, produce

pytestmark = pytest.mark.integration


def _offsets(consumer: Consumer, count: int) -> list[int]:
    got: list[int] = []
    deadline = time.monotonic() + PATIENCE_S
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(count - len(got), 0.2):
            offset = message.offset()
            assert isinstance(offset, int)
            got.append(offset)
    return got


def test_a_committed_offset_past_the_end_restarts_from_auto_offset_reset(
    mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    """A committed offset the log does not have (a restored backup, a recreated topic):
    the fetch answers OFFSET_OUT_OF_RANGE and the consumer restarts from
    ``auto.offset.reset``, as Java and librdkafka do. On the mock; Tansu answers such a
    fetch with no records and no error, so every client (raw confluent-kafka too)
    waits there (docs/troubleshooting.md)."""
    mock_broker.create_topic(unique_topic, partitions=1)
    produce(mock_broker.bootstrap, unique_topic, [b"a", b"b", b"c"], partition=0)
    raw = confluent_kafka.Consumer(
        {"bootstrap.servers": mock_broker.bootstrap, "group.id": unique_group}
    )
    raw.commit(
        offsets=[confluent_kafka.TopicPartition(unique_topic, 0, 1_000_000)], asynchronous=False
    )
    raw.close()
    consumer = Consumer(config(mock_broker, unique_group))
    try:
        consumer.subscribe([unique_topic])
        assert _offsets(consumer, 3) == [0, 1, 2]
        consumer.commit()
        assert consumer.committed([TopicPartition(unique_topic, 0)]) == {
            TopicPartition(unique_topic, 0): 3
        }
    finally:
        consumer.close()


class _Broken(ConsumerPartitionAssignor):
    """Returns an assignment that breaks a rule; ``mode`` says which."""

    mode = "twice"

    @property
    def name(self) -> str:
        return "broken"

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.EAGER]

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        members = sorted(group_subscription.subscriptions)
        topic = sorted(group_subscription.subscriptions[members[0]].topics)[0]
        if self.mode == "twice":
            partitions = [TopicPartition(topic, 0), TopicPartition(topic, 0)]
        else:
            partitions = [TopicPartition("nobody-subscribed", 0)]
        return GroupAssignment(assignments={m: Assignment(partitions=partitions) for m in members})


class _Twice(_Broken):
    mode = "twice"


class _Foreign(_Broken):
    mode = "foreign"


@pytest.mark.parametrize(("assignor", "problem"), [(_Twice, "twice"), (_Foreign, "subscribed")])
def test_an_assignor_that_breaks_the_rules_fails_poll_naming_the_partition(
    broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    assignor: type[_Broken],
    problem: str,
) -> None:
    broker.create_topic(unique_topic, partitions=2)
    strategy = {"partition.assignment.strategy": f"{__name__}:{assignor.__name__}"}
    consumer = Consumer(config(broker, unique_group, **strategy))
    try:
        consumer.subscribe([unique_topic])
        deadline = time.monotonic() + PATIENCE_S
        with pytest.raises(InvalidAssignmentError) as failure:  # noqa: PT012
            while time.monotonic() < deadline:
                consumer.poll(0.2)
        assert problem in str(failure.value)
        assert "broken" in str(failure.value)  # the assignor is named
        assert consumer.assignment() == frozenset()  # nothing was applied
    finally:
        consumer.close()


def test_records_larger_than_the_fetch_limits_are_still_delivered(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    """KIP-74: a fetch returns at least one record batch, however small the limits, so
    a record larger than ``fetch.max.bytes``/``max.partition.fetch.bytes`` is not a
    partition that silently stops (librdkafka grows its buffer)."""
    broker.create_topic(unique_topic, partitions=1)
    big = b"x" * 900_000
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(2):
        producer.produce(unique_topic, big, partition=0)
    assert producer.flush(PATIENCE_S) == 0
    limits = {"fetch.max.bytes": 1_000_000, "max.partition.fetch.bytes": 1024}
    consumer = Consumer(config(broker, unique_group, **limits))
    try:
        consumer.subscribe([unique_topic])
        assert _offsets(consumer, 2) == [0, 1]
    finally:
        consumer.close()


def test_a_producer_failure_inside_the_exactly_once_loop_aborts_and_loses_nothing(
    tansu_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    """A record the producer cannot send (larger than its ``message.max.bytes``): the
    transaction is aborted, ``step()`` raises a permanent ``TransactionAbortedError``
    naming the cause, and the input's committed offset does not move."""
    tansu_broker.create_topic(unique_topic, partitions=1)
    produce(tansu_broker.bootstrap, unique_topic, [b"in"], partition=0)

    def process(records: list[Any], out: TransactionalOutput) -> None:
        for _ in records:
            out.produce(unique_topic + "-out", b"y" * 50_000)

    processor = TransactionalProcessor(
        config(tansu_broker, unique_group),
        {
            "transactional.id": f"tx-{unique_group}",
            "transaction.timeout.ms": 10_000,
            "message.max.bytes": 10_000,
        },
        process,
        topics=[unique_topic],
    )
    try:
        deadline = time.monotonic() + PATIENCE_S
        with pytest.raises(TransactionAbortedError) as failure:  # noqa: PT012
            while time.monotonic() < deadline:
                processor.step(0.2)
        assert failure.value.permanent
        assert processor.stats().transactions_committed == 0
    finally:
        processor.close()
    check = Consumer(config(tansu_broker, unique_group))
    try:
        tp = TopicPartition(unique_topic, 0)
        assert check.committed([tp]) == {tp: None}
    finally:
        check.close()
