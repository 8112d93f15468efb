"""Shared plumbing of the broker benchmarks: rebalance, throughput, exactly-once, idle CPU
and asyncio.

Starts a broker through ``coopconsumer.testing``: ``--broker kafka`` (the default: one
Apache Kafka KRaft node from the Maven Central jars) or ``--broker tansu`` (the embedded
Tansu broker, memory storage), produces records fast with confluent-kafka, prints
aligned tables, and writes each benchmark's figures as JSON plus a PNG picture into a
results directory (``benchmarks/results/`` by default). Benchmarks print figures; they
assert nothing about speed (speed is never asserted in tests either).

Every figure comes with the machine it was measured on (``machine()``: CPUs, RAM,
Python, confluent-kafka, librdkafka, the Kafka release) and the load average when the
run started and ended: the machine may be shared.

Imports coopconsumer's public API and its ``testing`` module, confluent-kafka and
matplotlib (for the pictures only).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import confluent_kafka

from coopconsumer.testing import EmbeddedBroker, embedded_broker, kafka_cluster

__all__ = [
    "RESULTS_DIR",
    "Spread",
    "add_broker_argument",
    "add_results_argument",
    "describe_machine",
    "filled_topic",
    "load_average",
    "machine",
    "new_figure",
    "print_table",
    "produce",
    "profiled",
    "ratio_bars",
    "started_broker",
    "thread_cpu_since",
    "thread_usage",
    "write_results",
]

_T = TypeVar("_T")

#: Where the figures go unless ``--results-dir`` says otherwise.
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def add_broker_argument(parser: argparse.ArgumentParser) -> None:
    """``--broker kafka|tansu``: the broker a benchmark runs against (default kafka)."""
    parser.add_argument(
        "--broker",
        choices=("kafka", "tansu"),
        default="kafka",
        help="kafka (default: one Apache Kafka KRaft node) or tansu (embedded, memory)",
    )


def add_results_argument(parser: argparse.ArgumentParser) -> None:
    """``--results-dir DIR``: where the JSON and PNG of the run go."""
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=RESULTS_DIR,
        help=f"directory for <benchmark>.json and <benchmark>.png (default {RESULTS_DIR})",
    )


@contextmanager
def started_broker(
    kind: str, broker_config: Mapping[str, str] | None = None
) -> Iterator[EmbeddedBroker]:
    """A broker of ``kind`` ("kafka" or "tansu") for the duration of the block.

    Kafka: one KRaft node with the test-broker settings (docs/testing.md) plus
    ``broker_config``; Tansu ignores ``broker_config``."""
    if kind == "kafka":
        with kafka_cluster(brokers=1, broker_config=broker_config) as cluster:
            print(f"broker: Apache Kafka {_kafka_version()}, one KRaft node (test settings)")
            yield cluster
        return
    if kind == "tansu":
        with embedded_broker("tansu") as broker:
            print("broker: embedded Tansu (memory storage)")
            yield broker
        return
    raise ValueError(f"unknown broker {kind!r}")


def _kafka_version() -> str:
    from coopconsumer.testing import kafka_distribution

    return kafka_distribution().version


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
        f"{partitions} partitions in {produce_s:.1f} s"
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


class Spread:
    """The median of some samples with their smallest and largest, for tables and JSON."""

    def __init__(self, samples: Sequence[float]) -> None:
        self.samples = [float(s) for s in samples]

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def low(self) -> float:
        return min(self.samples) if self.samples else float("nan")

    @property
    def high(self) -> float:
        return max(self.samples) if self.samples else float("nan")

    def format(self, spec: str = "{:,.0f}") -> str:
        """``median (low-high)``, e.g. ``1,234 (1,100-1,400)``."""
        if not self.samples:
            return "n/a"
        if len(self.samples) == 1:
            return spec.format(self.median)
        return f"{spec.format(self.median)} ({spec.format(self.low)}-{spec.format(self.high)})"

    def as_json(self) -> dict[str, Any]:
        return {
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "n": len(self.samples),
            "samples": self.samples,
        }


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, e.g. ``1.84, 3.00, 5.04``."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _confluent_kafka_version() -> str:
    version: Any = confluent_kafka.version()
    return str(version[0] if isinstance(version, tuple) else version)


def _ram_gib() -> float:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def machine(broker: str) -> dict[str, Any]:
    """Where the figures come from: CPUs, RAM, software versions, the broker."""
    return {
        "nproc": os.cpu_count(),
        "ram_gib": round(_ram_gib(), 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "confluent_kafka": _confluent_kafka_version(),
        "librdkafka": confluent_kafka.libversion()[0],
        "broker": broker,
        "kafka": _kafka_version() if broker == "kafka" else None,
    }


def describe_machine() -> str:
    """One line about where the figures come from (the load average included)."""
    return (
        f"python {platform.python_version()}, confluent-kafka {_confluent_kafka_version()}, "
        f"librdkafka {confluent_kafka.libversion()[0]}, {os.cpu_count()} CPU(s), "
        f"{_ram_gib():.0f} GiB RAM, load average {load_average()}"
    )


def write_results(
    results_dir: Path,
    name: str,
    broker: str,
    load_at_start: str,
    figures: Mapping[str, Any],
    figure: Any | None,
) -> None:
    """Write ``<name>.json`` (the command, the machine, the load averages at start and
    end, ``figures``) and, given a matplotlib ``figure``, ``<name>.png``."""
    results_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "command": shlex.join(["python", *sys.argv]),
        "finished_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(broker),
        "load_average_start": load_at_start,
        "load_average_end": load_average(),
        **figures,
    }
    json_path = results_dir / f"{name}.json"
    json_path.write_text(json.dumps(payload, indent=1, sort_keys=False) + "\n")
    print(f"wrote {json_path}")
    if figure is not None:
        png_path = results_dir / f"{name}.png"
        figure.savefig(png_path, dpi=100, bbox_inches="tight")
        print(f"wrote {png_path}")
        import matplotlib.pyplot as plt

        plt.close(figure)


def profiled(results_dir: Path, name: str, call: Callable[[], _T], top: int = 25) -> _T:
    """Run ``call`` under cProfile (the calling thread only: the thread that consumes;
    librdkafka's C threads and coopconsumer's driver thread are not in it), print the
    ``top`` functions by own time and write them to ``<results_dir>/<name>.profile.txt``.
    For the cause of a row behind its target; never inside a timed window."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        result = call()
    finally:
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    text = out.getvalue()
    print(text)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / f"{name}.profile.txt").write_text(text)
    return result


def thread_usage() -> dict[int, tuple[str, int, int]]:
    """Each thread of this process: its name (Python's, or the OS's: librdkafka names
    its threads ``rdk:main``, ``rdk:broker1``...), CPU nanoseconds
    (``/proc/self/task/<tid>/schedstat``) and voluntary context switches (its
    wake-ups after sleeping). Linux only; empty elsewhere."""
    import threading

    python_names = {t.native_id: t.name for t in threading.enumerate()}
    usage: dict[int, tuple[str, int, int]] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return usage
    for entry in tids:
        tid = int(entry)
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                cpu_ns = int(f.read().split()[0])
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/self/task/{tid}/status") as f:
                switches = next(
                    int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt")
                )
        except (OSError, StopIteration, ValueError):
            continue
        name = python_names.get(tid, comm)
        # Group librdkafka's broker threads ("rdk:broker1", "rdk:broker-1"...) by kind.
        name = name.rstrip("0123456789-") if name.startswith("rdk:") else name
        usage[tid] = (name, cpu_ns, switches)
    return usage


def thread_cpu_since(before: dict[int, tuple[str, int, int]]) -> dict[str, float]:
    """CPU seconds per thread name since ``before`` (a ``thread_usage()``), threads
    started since then counted from zero (threads that ended since are missing)."""
    spent: dict[str, float] = {}
    for tid, (name, cpu_ns, _switches) in thread_usage().items():
        _name, cpu0_ns, _s = before.get(tid, (name, 0, 0))
        spent[name] = spent.get(name, 0.0) + (cpu_ns - cpu0_ns) / 1e9
    return spent


def new_figure(rows: int = 1, cols: int = 1, *, width: float = 10.0, height: float = 4.5) -> Any:
    """A matplotlib figure and its axes, drawn off-screen (Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(rows, cols, figsize=(width, height), squeeze=False)


def ratio_bars(
    axes: Any,
    labels: Sequence[str],
    spreads: Sequence[Spread],
    *,
    target: float | None,
    title: str,
    ylabel: str = "ratio (ours / baseline)",
) -> None:
    """Draw one bar per ``spreads`` entry at its median with a min-max whisker, and a
    dashed line at ``target``."""
    medians = [s.median for s in spreads]
    lower = [s.median - s.low for s in spreads]
    upper = [s.high - s.median for s in spreads]
    axes.bar(range(len(labels)), medians, yerr=[lower, upper], capsize=4, color="tab:blue")
    axes.set_xticks(range(len(labels)))
    axes.set_xticklabels(labels, rotation=15, ha="right", fontsize=8)
    if target is not None:
        axes.axhline(target, color="tab:red", linestyle="--", linewidth=1)
    axes.set_title(title, fontsize=9)
    axes.set_ylabel(ylabel, fontsize=8)
