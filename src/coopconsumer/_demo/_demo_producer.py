"""The demo's steady record stream: a background thread producing numbered records.

Every record's value is its sequence number (ASCII digits), unique within a run, so the
report can count records that were lost or processed twice. Records go round-robin over
the partitions at a fixed rate.

This is the demo's only confluent-kafka import: the library proper fetches with
confluent-kafka but never produces, and the demo needs a producer. Imports nothing of
the library's internals.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, Message, Producer

__all__ = ["SteadyProducer"]

#: How often the producer wakes up to send the records due since the last tick.
_TICK_S = 0.02


class SteadyProducer:
    """Produces ``rate`` records per second to ``topic`` until :meth:`stop`.

    ``acknowledged`` counts the records the broker confirmed; only those are expected
    to be consumed. Thread-safe reads of the counters; start and stop from one thread.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: float,
        client_config: Mapping[str, object] | None = None,
    ) -> None:
        self._producer = Producer(
            {
                **(client_config or {}),
                "bootstrap.servers": bootstrap,
                "linger.ms": 5,
                "client.id": "coopconsumer-demo",
            }
        )
        self._topic = topic
        self._partitions = partitions
        self._rate = rate
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sent = 0
        self._acknowledged: set[int] = set()
        self._failed = 0
        self._thread = threading.Thread(target=self._run, name="demo-producer", daemon=True)

    @property
    def sent(self) -> int:
        """Records handed to the producer so far."""
        with self._lock:
            return self._sent

    def acknowledged(self) -> frozenset[int]:
        """Sequence numbers of the records the broker confirmed."""
        with self._lock:
            return frozenset(self._acknowledged)

    @property
    def failed(self) -> int:
        """Records the broker did not accept."""
        with self._lock:
            return self._failed

    def start(self) -> None:
        """Start producing in the background."""
        self._thread.start()

    def stop(self, flush_timeout_s: float = 10.0) -> None:
        """Stop producing and wait (at most ``flush_timeout_s``) for acknowledgements."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(flush_timeout_s + 5.0)
        self._producer.flush(flush_timeout_s)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        value = msg.value()
        with self._lock:
            if err is None and value is not None:
                self._acknowledged.add(int(value))
            else:
                self._failed += 1

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self._rate)
            while self._sent < due and not self._stop.is_set():
                seq = self._sent
                try:
                    self._producer.produce(
                        self._topic,
                        value=str(seq).encode(),
                        partition=seq % self._partitions,
                        on_delivery=self._delivered,
                    )
                except BufferError:
                    break  # the local queue is full: retry at the next tick
                with self._lock:
                    self._sent += 1
            self._producer.poll(0)
            self._stop.wait(_TICK_S)
