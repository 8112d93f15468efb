"""poll() keeps its deadline against a real broker in every state (issue 15, item 1).

On librdkafka's mock cluster (3 brokers; partition leaders on broker 1, the group
coordinator on broker 2), one member polls with ``poll(0.1)`` in a loop through:

* the first polls after ``subscribe()``: joining, syncing, looking up positions;
* a coordinator that does not answer (a 30 s round-trip time on broker 2, so heartbeats
  and commits hang while records keep coming from broker 1);
* every broker gone (all three down).

Each ``poll(0.1)`` must return within its timeout plus a small bound. The bound asserted
is generous (``OVERRUN_BOUND_S``) because the machine is shared; the worst overrun of
each phase is printed (``-s``) for the record.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from coopconsumer import Consumer, TopicPartition
from coopconsumer.testing import EmbeddedBroker

PARTITIONS = 4
POLL_S = 0.1
#: What the test fails on; the issue's target is 50 ms, printed beside it.
OVERRUN_BOUND_S = 0.5
PHASE_S = 3.0
LEADER, COORDINATOR = 1, 2


def _overruns(
    consumer: Consumer, seconds: float, until: Callable[[], bool] | None = None
) -> list[float]:
    overruns: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        consumer.poll(POLL_S)
        overruns.append(max(0.0, time.monotonic() - started - POLL_S))
        if until is not None and until():
            break
    return overruns


def _report(phase: str, overruns: list[float]) -> None:
    worst = max(overruns) * 1000
    print(f"\n[poll deadline] {phase}: {len(overruns)} polls, worst overrun {worst:.1f} ms")
    assert max(overruns) < OVERRUN_BOUND_S, f"{phase}: poll(0.1) overran by {worst:.0f} ms"


def test_poll_keeps_its_deadline_while_joining_without_coordinator_and_without_brokers(
    mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    broker = mock_broker
    broker.create_topic(unique_topic, partitions=PARTITIONS)
    for p in range(PARTITIONS):
        broker.set_partition_leader(unique_topic, p, LEADER)
    broker.set_coordinator(unique_group, COORDINATOR)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(200):
        producer.produce(unique_topic, value=b"v", partition=i % PARTITIONS)
    assert producer.flush(10) == 0
    del producer  # its librdkafka threads would log every refused connection below
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_group,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "request.timeout.ms": 30000,
        }
    )
    try:
        consumer.subscribe([unique_topic])
        everything = frozenset(TopicPartition(unique_topic, p) for p in range(PARTITIONS))
        first = _overruns(consumer, 20.0, until=lambda: consumer.assignment() == everything)
        assert consumer.assignment() == everything
        first += _overruns(consumer, 1.0)
        _report("joining, then the first polls after the assignment", first)

        broker.set_broker_rtt(COORDINATOR, 30_000)
        silent = _overruns(consumer, PHASE_S)
        _report("coordinator not answering", silent)
        broker.set_broker_rtt(COORDINATOR, 0)

        for broker_id in broker.broker_ids:
            broker.set_broker_down(broker_id)
        gone = _overruns(consumer, PHASE_S)
        _report("every broker down", gone)
        for broker_id in broker.broker_ids:
            broker.set_broker_up(broker_id)
    finally:
        consumer.close(timeout=5)


@pytest.mark.parametrize("phase", ["coordinator not answering"])
def test_commit_keeps_default_api_timeout_when_the_coordinator_does_not_answer(
    mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str, phase: str
) -> None:
    """A synchronous commit the coordinator never answers fails after
    ``default.api.timeout.ms`` (plus the bound), as a typed error, not later."""
    broker = mock_broker
    broker.create_topic(unique_topic, partitions=1)
    broker.set_partition_leader(unique_topic, 0, LEADER)
    broker.set_coordinator(unique_group, COORDINATOR)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_group,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "default.api.timeout.ms": 1500,
        }
    )
    try:
        consumer.subscribe([unique_topic])
        tp = TopicPartition(unique_topic, 0)
        _overruns(consumer, 20.0, until=lambda: consumer.assignment() == {tp})
        assert consumer.assignment() == {tp}
        broker.set_broker_rtt(COORDINATOR, 30_000)
        started = time.monotonic()
        with pytest.raises(Exception) as info:  # noqa: PT011 - the type is checked below
            consumer.commit({tp: 0})
        elapsed = time.monotonic() - started
        print(f"\n[poll deadline] {phase}: commit() failed after {elapsed:.2f} s: {info.value!r}")
        assert elapsed < 1.5 + OVERRUN_BOUND_S
        assert type(info.value).__module__.startswith("coopconsumer")
        broker.set_broker_rtt(COORDINATOR, 0)
    finally:
        consumer.close(timeout=5)
