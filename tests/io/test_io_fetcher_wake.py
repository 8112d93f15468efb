"""``Fetcher.wake`` cuts short a ``consume()`` another thread waits in, through
librdkafka's ``rd_kafka_queue_yield`` on the real consumer queue (no broker needed: the
consumer waits on an empty queue); a handle that fails validation leaves the fetcher
working, only without the wake (docs/architecture.md, "Threads and what crosses
between them")."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from coopconsumer._io import _librdkafka
from coopconsumer._io._fetcher import OFFSET_BEGINNING, Fetcher
from coopconsumer._types import TopicPartition
from coopconsumer.testing import free_port

#: The consume() timeout: far longer than any wake takes to arrive, even on a loaded
#: machine, so a consume() that returns well before it was woken.
CONSUME_S = 30.0


def _fetcher() -> Fetcher:
    """A fetcher with a partition assigned on a broker nobody runs: its queue stays
    empty, so consume() waits its whole timeout unless woken."""
    fetcher = Fetcher({"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    fetcher.assign({TopicPartition("nowhere", 0): OFFSET_BEGINNING})
    return fetcher


def test_wake_returns_a_consume_that_another_thread_waits_in() -> None:
    fetcher = _fetcher()
    returned: list[float] = []
    inside = threading.Event()

    def wait() -> None:
        inside.set()
        start = time.monotonic()
        assert fetcher.consume(10, CONSUME_S) == []
        returned.append(time.monotonic() - start)

    waiter = threading.Thread(target=wait, name="waiter")
    try:
        waiter.start()
        inside.wait(CONSUME_S)
        # Woken before or after the waiter is inside consume(): a wake nobody waited for
        # ends the next consume() at once, so either way it returns now.
        time.sleep(0.2)
        fetcher.wake()
        waiter.join(CONSUME_S)
        assert not waiter.is_alive()
        assert returned
        assert returned[0] < CONSUME_S / 2
    finally:
        waiter.join(CONSUME_S)
        fetcher.close()
    fetcher.wake()  # closed: a no-op, not a call into a destroyed queue


def test_a_handle_that_fails_validation_leaves_the_fetcher_without_wake(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A confluent-kafka whose Handle keeps something else after the object header.
    monkeypatch.setattr(_librdkafka, "_RK_OFFSET", _librdkafka._RK_OFFSET + 8)
    with caplog.at_level(logging.INFO, "coopconsumer"):
        fetcher = _fetcher()
    try:
        assert any("not woken early" in r.getMessage() for r in caplog.records)
        fetcher.wake()  # nothing to wake with: a no-op
        start = time.monotonic()
        assert fetcher.consume(10, 0.3) == []
        assert time.monotonic() - start >= 0.25  # the wake did not cut it short
    finally:
        fetcher.close()
