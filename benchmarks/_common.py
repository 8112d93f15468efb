"""Shared plumbing of the broker benchmarks: rebalance, throughput and idle CPU.

Starts an embedded broker through ``coopconsumer.testing`` (``--broker tansu``, the
default, or ``--broker kafka``: one Apache Kafka KRaft node), produces records
fast with confluent-kafka, and prints aligned tables. Benchmarks print figures; they
assert nothing about speed (speed is never asserted in tests either).

Imports coopconsumer's public API and its ``testing`` module, and confluent-kafka.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import confluent_kafka

from coopconsumer.testing import EmbeddedBroker, embedded_broker

__all__ = [
    "add_broker_argument",
    "describe_machine",
    "filled_topic",
    "print_table",
    "produce",
    "started_broker",
]


def add_broker_argument(parser: argparse.ArgumentParser) -> None:
    """``--broker tansu|kafka``: the embedded broker a benchmark runs against."""
    parser.add_argument(
        "--broker",
        choices=("tansu", "kafka"),
        default="tansu",
        help="embedded broker: tansu (memory storage) or kafka (one Apache Kafka KRaft node)",
    )


@contextmanager
def started_broker(kind: str) -> Iterator[EmbeddedBroker]:
    """An embedded broker of ``kind`` ("tansu" or "kafka") for the duration of the block."""
    if kind not in ("tansu", "kafka"):
        raise ValueError(f"unknown broker {kind!r}")
    with embedded_broker("kafka" if kind == "kafka" else "tansu") as broker:
        yield broker


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    value_size: int = 100,
    partitions: int = 1,
    with_keys: bool = False,
) -> float:
    """Write ``count`` records of ``value_size`` bytes round-robin over ``partitions``;
    return the seconds it took (all delivered). Raises ``RuntimeError`` on a failed
    delivery."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "none",
        }
    )
    failures: list[str] = []

    def report(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    value = b"x" * value_size
    started = time.perf_counter()
    for n in range(count):
        key = str(n).encode() if with_keys else None
        while True:
            try:
                producer.produce(
                    topic, value=value, key=key, partition=n % partitions, on_delivery=report
                )
                break
            except BufferError:
                producer.poll(0.05)
        if n % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(f"{remaining} undelivered, failures: {failures[:3]}")
    return elapsed


def filled_topic(
    broker: EmbeddedBroker, prefix: str, records: int, *, value_size: int, partitions: int
) -> str:
    """A fresh topic of ``partitions`` partitions holding ``records`` records of
    ``value_size`` bytes (``produce``); prints how long producing took. Returns its name."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions)
    produce_s = produce(
        broker.bootstrap, topic, records, value_size=value_size, partitions=partitions
    )
    print(
        f"produced {records:,} records of {value_size} B over "
        f"{partitions} partitions in {produce_s:.1f} s (embedded Tansu, memory)"
    )
    return topic


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` under ``headers`` as an aligned plain-text table."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def describe_machine() -> str:
    """One line about where the figures come from."""
    return (
        f"python {platform.python_version()}, confluent-kafka {confluent_kafka.version()}, "
        f"librdkafka {confluent_kafka.libversion()[0]}, {os.cpu_count()} CPU(s), "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
