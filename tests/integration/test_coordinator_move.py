"""A coordinator that is moving is asked again at the retry backoff, not in a loop.

The transactions proxy in front of Tansu (``embedded_broker("tansu", transactions=True)``)
answers NOT_COORDINATOR to every group request for a while, as a broker does while its
group coordinator moves, while FindCoordinator keeps naming the same broker. A member
used to look the coordinator up and heartbeat again as fast as the answers came (764
Heartbeats in one second, where librdkafka sent 2); Java waits ``retry.backoff.ms``
after a failed heartbeat, and so does coopconsumer now.
"""

from __future__ import annotations

import time

import pytest

from coopconsumer import Consumer
from coopconsumer.testing import TransactionalBroker, unique_name

pytestmark = pytest.mark.slow

HEARTBEAT = 12
FIND_COORDINATOR = 10
MOVE_S = 2.0
RETRY_BACKOFF_MS = 100


def test_a_moving_coordinator_is_asked_at_the_retry_backoff(proxied: TransactionalBroker) -> None:
    topic = unique_name("move")
    proxied.create_topic(topic, 2)
    consumer = Consumer(
        {
            "bootstrap.servers": proxied.bootstrap,
            "group.id": unique_name("g-move"),
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "retry.backoff.ms": RETRY_BACKOFF_MS,
        }
    )
    with consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2:
            assert time.monotonic() < deadline, "the member never got its partitions"
            consumer.poll(0.1)
        before = proxied.proxy.stats.requests
        proxied.proxy.move_coordinators(MOVE_S, transaction=False)
        until = time.monotonic() + MOVE_S + 1.0
        while time.monotonic() < until:
            consumer.poll(0.1)
        after = proxied.proxy.stats.requests
        assert len(consumer.assignment()) == 2  # it stayed in its generation
    heartbeats = after.get(HEARTBEAT, 0) - before.get(HEARTBEAT, 0)
    lookups = after.get(FIND_COORDINATOR, 0) - before.get(FIND_COORDINATOR, 0)
    # At most one heartbeat (and one lookup) per retry.backoff.ms while it moves, plus
    # the ordinary heartbeats of the rest of the window; generous for a loaded machine.
    bound = (MOVE_S + 1.0) / (RETRY_BACKOFF_MS / 1000) + 10
    assert heartbeats <= bound, f"{heartbeats} heartbeats in {MOVE_S + 1.0:.0f} s"
    assert lookups <= bound, f"{lookups} lookups in {MOVE_S + 1.0:.0f} s"
