"""Waking the event loop when librdkafka has records, without polling for them.

confluent-kafka's ``consume()`` can only wait by blocking its caller, and its Python
binding does not expose librdkafka's ``rd_kafka_queue_io_event_enable``. librdkafka
itself offers exactly what an event loop needs: it writes a byte to a file descriptor
of ours whenever an element (a record, an error, a log line) is put on the consumer
queue while that queue was empty, once until the queue is served again. So:

* a non-blocking socket pair; librdkafka's own fetch threads write to one end, the
  event loop watches the other (``add_reader``). That one byte is all that crosses
  threads (docs/asyncio.md);
* the librdkafka handle and its consumer queue are reached and validated by
  ``_io._librdkafka`` (shared with the sync fetcher's wake); a layout that fails is
  ``HandleLayoutError``: ``create`` logs it once and returns None, and the consumer
  polls for records instead (docs/asyncio.md).

The contract for the reader: after a wake-up, ``consume(n, 0)`` until it returns fewer
than ``n`` (the queue is then empty and served, and the next record writes again).

Linux only for now (the mapped library is found in ``/proc/self/maps``); elsewhere
``RecordsWakeup.create`` returns None and the consumer falls back to short timed
polls (``AsyncConsumer`` documents the cost).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import socket
from collections.abc import Callable
from typing import Final

from .._io._librdkafka import HandleLayoutError, consumer_queue

__all__ = ["RecordsWakeup"]

log = logging.getLogger("coopconsumer.aio.wakeup")

_PAYLOAD: Final = b"r"
_layout_warned = False


class RecordsWakeup:
    """Calls ``on_ready`` on the loop when librdkafka queues something for ``consume``.

    Build it with :meth:`create`; :meth:`close` before the confluent-kafka consumer is
    closed (it detaches the descriptor from librdkafka's queue first).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        lib: ctypes.CDLL,
        queue: int,
        reader: socket.socket,
        writer: socket.socket,
        on_ready: Callable[[], None],
    ) -> None:
        self._loop = loop
        self._lib = lib
        self._queue: int | None = queue
        self._reader = reader
        self._writer = writer
        self._on_ready = on_ready
        #: How many times librdkafka woke the loop (benchmarks and tests read it).
        self.wakeups = 0
        lib.rd_kafka_queue_io_event_enable(queue, writer.fileno(), _PAYLOAD, len(_PAYLOAD))
        loop.add_reader(reader.fileno(), self._readable)

    @classmethod
    def create(
        cls,
        loop: asyncio.AbstractEventLoop,
        rdkafka_client: object,
        on_ready: Callable[[], None],
    ) -> RecordsWakeup | None:
        """Attach to ``rdkafka_client`` (a ``confluent_kafka.Consumer``), or None when
        this platform's librdkafka cannot be reached."""
        global _layout_warned
        try:
            reached = consumer_queue(rdkafka_client)
        except HandleLayoutError as exc:
            if not _layout_warned:
                _layout_warned = True
                log.warning("%s; AsyncConsumer polls for records every 50 ms instead", exc)
            return None
        if reached is None:
            log.info("librdkafka's queue events are not reachable here; polling records")
            return None
        lib, queue = reached
        reader, writer = socket.socketpair()
        try:
            reader.setblocking(False)
            writer.setblocking(False)
            return cls(loop, lib, queue, reader, writer, on_ready)
        except BaseException:
            lib.rd_kafka_queue_destroy(queue)
            reader.close()
            writer.close()
            raise

    def _readable(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while self._reader.recv(4096):
                pass
        self.wakeups += 1
        self._on_ready()

    def close(self) -> None:
        """Detach from librdkafka's queue and close the sockets. Idempotent."""
        queue, self._queue = self._queue, None
        if queue is None:
            return
        self._lib.rd_kafka_queue_io_event_enable(queue, -1, None, 0)
        self._lib.rd_kafka_queue_destroy(queue)
        with contextlib.suppress(ValueError, RuntimeError):
            self._loop.remove_reader(self._reader.fileno())
        self._reader.close()
        self._writer.close()
