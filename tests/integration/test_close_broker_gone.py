"""``close()`` with the brokers gone (issue 35, case 6): it says at once what it waits
for and for how long, says once more when the wait is long, and the commit it retries
meanwhile is logged once per distinct failure, not every ``retry.backoff.ms``."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Producer

from coopconsumer import Consumer
from coopconsumer.testing import embedded_broker, unique_name

pytestmark = pytest.mark.integration

_CLOSE_TIMEOUT_S = 12.0


def test_close_with_the_broker_gone_says_what_it_waits_for_and_logs_each_failure_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with embedded_broker("tansu") as broker:
        topic = unique_name("t-close-gone")
        broker.create_topic(topic, partitions=1)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(3):
            producer.produce(topic, b"%d" % i)
        assert producer.flush(30) == 0
        del producer  # its own reconnect lines once the broker is gone are not ours
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": unique_name("g-close-gone"),
                "session.timeout.ms": 3000,
                "heartbeat.interval.ms": 500,
                "auto.offset.reset": "earliest",
                "retry.backoff.ms": 100,
            }
        )
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 3 and time.monotonic() < deadline:
            got += consumer.poll(0.2) is not None
        assert got == 3
        broker.stop()
    with caplog.at_level(logging.INFO, logger="coopconsumer"):
        began = time.monotonic()
        consumer.close(timeout=_CLOSE_TIMEOUT_S)
        took = time.monotonic() - began
    # Bounded by what was asked (generously: the machine is shared), not the default 30 s.
    assert took < _CLOSE_TIMEOUT_S + 10
    ours = [
        r
        for r in caplog.records
        if r.name.startswith("coopconsumer.") and "librdkafka" not in r.name
    ]
    starts = [r for r in ours if r.getMessage().startswith("close: committing")]
    assert len(starts) == 1
    assert "at most 12 s (close(timeout=12))" in starts[0].getMessage()
    waiting = [r for r in ours if r.getMessage().startswith("close: still waiting")]
    assert len(waiting) == 1
    assert waiting[0].levelno == logging.WARNING
    assert "close(timeout=...)" in waiting[0].getMessage()
    # The commit before leaving is retried every 100 ms for seconds; each distinct
    # failure is logged once (before: one INFO line per retry, ~100 here).
    retries = [r for r in ours if "failed, retrying" in r.getMessage()]
    assert 1 <= len(retries) <= 3, [r.getMessage() for r in retries]
    assert sum("did not complete" in r.getMessage() for r in ours) == 1
