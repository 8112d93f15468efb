"""Benchmark: records/s through ``coopconsumer.Consumer.consume`` vs raw confluent-kafka.

    python benchmarks/throughput.py [--records N] [--value-size BYTES] [--partitions P]
                                    [--rounds R] [--broker kafka|tansu] [--results-dir DIR]

Starts one Apache Kafka KRaft node (``--broker kafka``, the default; ``--broker tansu``
the embedded Tansu broker), pre-produces ``N`` records (default 1,000,000 of 100
bytes over 4 partitions), then reads the whole topic ``R`` times (default 5) with each
side, one pass of each per round, the side that goes first alternating between rounds:

* **raw**: a ``confluent_kafka.Consumer`` that first fetches the topic's metadata
  (``list_topics``: connected and knowing the partition leaders, as a member after a
  group join), then gets every partition assigned manually from the beginning, and
  ``consume(1000)`` in a loop. Its librdkafka configuration is exactly
  the one coopconsumer's record fetcher gets from the same settings
  (``ConsumerConfig.fetcher_config()`` plus the fetcher's ``fetch.queue.backoff.ms``):
  same fetch sizes, same queue limits (``queued.max.messages.kbytes``,
  ``queued.min.messages``: librdkafka's defaults on both), same isolation level, no
  offset store, so the comparison measures what coopconsumer adds and nothing else;
* **coopconsumer**: ``coopconsumer.Consumer`` subscribed as the only member of a fresh
  group (``cooperative-sticky``, ``auto.offset.reset=earliest``), ``consume(1000)`` in
  a loop.

What each pass times, the same way on both sides:

* **read time** (wall): from the moment the partitions are assigned to the consumer
  until its last record has been returned. Raw: just before ``assign()``.
  coopconsumer: when the group hands it the partitions (its ``on_partitions_assigned``
  callback, which runs inside ``consume()`` right after the assignment is applied);
  from there coopconsumer still looks up the committed offsets (an OffsetFetch round
  trip) before librdkafka starts fetching, which is part of its cost, while the group
  join before it is not (printed apart as "join"). librdkafka starts fetching at
  assignment on both sides, so neither side can read ahead of its window.
* **CPU** (``time.process_time``: every thread of this process, librdkafka's
  included): the whole pass, from just before the consumer is constructed until its
  last record (for coopconsumer the group join's CPU is inside too). Closing the
  consumer is outside both windows.

Each pass touches every record (``len(value())``) so neither side can skip work, and
each side's loop does what its API requires, no more: confluent-kafka returns errors
in-band as messages, so the raw loop checks ``error()`` on every message;
coopconsumer returns records only (it drops or raises librdkafka's error messages
itself, and that check is inside its ``consume``), so its loop does not check again.
An untimed raw pass warms the broker up first, and an untimed coopconsumer pass the
process (modules coopconsumer imports on first use). Printed: every pass, the
median rate of each side, the per-round ratios coopconsumer / raw of records/s and of
records per CPU-second with their median, smallest and largest (a round's two passes
run back to back under the same background load; issue 34's target is >= 1.0x per
CPU-second: other processes on a shared machine disturb CPU time much less than wall
time), and the load average at the start and the end. The figures go to
``<results-dir>/throughput.json``, a picture of the per-round ratios to
``throughput.png``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable

import confluent_kafka
from _common import (
    Spread,
    add_broker_argument,
    add_results_argument,
    describe_machine,
    filled_topic,
    load_average,
    new_figure,
    print_table,
    profiled,
    ratio_bars,
    started_broker,
    thread_cpu_since,
    thread_usage,
    write_results,
)

import coopconsumer
from coopconsumer._config import ConsumerConfig
from coopconsumer._io._fetcher import _FETCH_QUEUE_BACKOFF_MS

BATCH = 1000


class Pass:
    """One read of the whole topic."""

    def __init__(
        self,
        side: str,
        records: int,
        *,
        join_s: float,
        first_s: float,
        read_s: float,
        cpu_s: float,
    ) -> None:
        self.side = side
        self.records = records
        self.join_s = join_s  # construction -> assignment
        self.first_s = first_s  # assignment -> first record
        self.read_s = read_s  # assignment -> last record
        self.cpu_s = cpu_s  # construction -> last record, every thread
        #: CPU seconds of the same window per thread name (``thread_cpu_since``).
        self.threads: dict[str, float] = {}

    @property
    def rate(self) -> float:
        return self.records / self.read_s if self.read_s > 0 else float("nan")

    @property
    def cpu_rate(self) -> float:
        return self.records / self.cpu_s if self.cpu_s > 0 else float("nan")


def _settings(bootstrap: str, group: str) -> dict[str, object]:
    """coopconsumer's settings; the raw side's librdkafka configuration derives from
    them."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "partition.assignment.strategy": "cooperative-sticky",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
    }


def _drain(
    consume: Callable[[], list[confluent_kafka.Message]],
    total: int,
    side: str,
    *,
    in_band_errors: bool,
    created: float,
    cpu_start: float,
    assigned_at: Callable[[], float | None],
    threads_before: dict[int, tuple[str, int, int]],
) -> Pass:
    """Consume until ``total`` records arrived; time the pass (see the module docstring)."""
    deadline = time.perf_counter() + 600
    first = 0.0
    seen = 0
    touched = 0
    while seen < total:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{side}: only {seen}/{total} records within 600 s")
        for message in consume():
            if in_band_errors and message.error() is not None:
                continue
            if seen == 0:
                first = time.perf_counter()
            seen += 1
            value = message.value()
            touched += len(value) if value is not None else 0
    ended = time.perf_counter()
    cpu = time.process_time() - cpu_start
    threads = thread_cpu_since(threads_before)
    if touched == 0:
        raise RuntimeError(f"{side}: records carried no bytes")
    assigned = assigned_at()
    if assigned is None:
        raise RuntimeError(f"{side}: records arrived before the assignment was seen")
    timed = Pass(
        side,
        seen,
        join_s=assigned - created,
        first_s=first - assigned,
        read_s=ended - assigned,
        cpu_s=cpu,
    )
    timed.threads = threads
    return timed


def raw_pass(bootstrap: str, topic: str, partitions: int, total: int) -> Pass:
    config = ConsumerConfig.from_mapping(_settings(bootstrap, "unused")).fetcher_config()
    config["group.id"] = f"raw-{uuid.uuid4().hex}"  # never joined: manual assignment
    config.setdefault("fetch.queue.backoff.ms", _FETCH_QUEUE_BACKOFF_MS)  # as Fetcher
    threads_before = thread_usage()
    cpu_start = time.process_time()
    created = time.perf_counter()
    consumer = confluent_kafka.Consumer(config)
    try:
        # Connected, and knowing the topic's partition leaders, as a consumer that has
        # just been through a group join is; a cold start would charge the raw side a
        # connection and a metadata round trip that coopconsumer's join has behind it.
        consumer.list_topics(topic, timeout=30)
        assigned = time.perf_counter()
        consumer.assign(
            [
                confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                for p in range(partitions)
            ]
        )
        return _drain(
            lambda: consumer.consume(BATCH, 1.0),
            total,
            "raw",
            in_band_errors=True,
            created=created,
            cpu_start=cpu_start,
            assigned_at=lambda: assigned,
            threads_before=threads_before,
        )
    finally:
        consumer.close()


class _AssignedAt(coopconsumer.RebalanceListener):
    """Notes when the group first hands this consumer some partitions."""

    def __init__(self) -> None:
        self.at: float | None = None

    def on_partitions_assigned(self, partitions: frozenset[coopconsumer.TopicPartition]) -> None:
        if partitions and self.at is None:
            self.at = time.perf_counter()


def coop_pass(bootstrap: str, topic: str, total: int) -> Pass:
    listener = _AssignedAt()
    threads_before = thread_usage()
    cpu_start = time.process_time()
    created = time.perf_counter()
    consumer = coopconsumer.Consumer(_settings(bootstrap, f"coop-{uuid.uuid4().hex}"))
    try:
        consumer.subscribe([topic], listener)
        return _drain(
            lambda: consumer.consume(BATCH, 1.0),
            total,
            "coopconsumer",
            in_band_errors=False,
            created=created,
            cpu_start=cpu_start,
            assigned_at=lambda: listener.at,
            threads_before=threads_before,
        )
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the timed rounds, one more coopconsumer pass under cProfile (not timed)",
    )
    add_broker_argument(parser)
    add_results_argument(parser)
    args = parser.parse_args()

    load_at_start = load_average()
    print(describe_machine())
    with started_broker(args.broker) as broker:
        topic = filled_topic(
            broker,
            "throughput",
            args.records,
            value_size=args.value_size,
            partitions=args.partitions,
        )
        # The first read of a fresh topic is slower on both sides (the broker warms up):
        # one untimed raw pass first, so neither side gets the cold read.
        warmup = raw_pass(broker.bootstrap, topic, args.partitions, args.records)
        print(f"warm-up read (not counted): {warmup.rate:,.0f} records/s")
        # And one untimed coopconsumer pass: its first Consumer in a process pays
        # one-time costs (modules imported on first use) that no later round pays.
        warmup = coop_pass(broker.bootstrap, topic, args.records)
        print(f"coopconsumer warm-up read (not counted): {warmup.rate:,.0f} records/s")
        rounds: list[tuple[Pass, Pass]] = []
        for n in range(args.rounds):
            if n % 2 == 0:
                raw = raw_pass(broker.bootstrap, topic, args.partitions, args.records)
                coop = coop_pass(broker.bootstrap, topic, args.records)
            else:
                coop = coop_pass(broker.bootstrap, topic, args.records)
                raw = raw_pass(broker.bootstrap, topic, args.partitions, args.records)
            rounds.append((raw, coop))
        if args.profile:
            profiled(
                args.results_dir,
                "throughput",
                lambda: coop_pass(broker.bootstrap, topic, args.records),
            )

    print()
    print_table(
        [
            "round",
            "side",
            "records",
            "join",
            "to first record",
            "read time",
            "records/s",
            "CPU",
            "records/CPU-s",
        ],
        [
            [
                str(n + 1),
                p.side,
                f"{p.records:,}",
                f"{p.join_s:.2f} s",
                f"{p.first_s:.3f} s",
                f"{p.read_s:.2f} s",
                f"{p.rate:,.0f}",
                f"{p.cpu_s:.2f} s",
                f"{p.cpu_rate:,.0f}",
            ]
            for n, pair in enumerate(rounds)
            for p in pair
        ],
    )
    report(rounds, args, load_at_start)


def report(rounds: list[tuple[Pass, Pass]], args: argparse.Namespace, load_at_start: str) -> None:
    """Print the medians and per-round ratios; write the JSON and the picture."""
    wall = Spread([c.rate / r.rate for r, c in rounds])
    cpu = Spread([c.cpu_rate / r.cpu_rate for r, c in rounds])
    raw_rate = Spread([r.rate for r, _ in rounds])
    coop_rate = Spread([c.rate for _, c in rounds])
    raw_cpu = Spread([r.cpu_rate for r, _ in rounds])
    coop_cpu = Spread([c.cpu_rate for _, c in rounds])
    print()
    print(f"medians of {len(rounds)} rounds (min-max):")
    print_table(
        ["side", "records/s", "records/CPU-s"],
        [
            ["raw confluent-kafka", raw_rate.format(), raw_cpu.format()],
            ["coopconsumer", coop_rate.format(), coop_cpu.format()],
        ],
    )
    print(f"coopconsumer / raw, records/s      : {wall.format('{:.2f}')}x")
    print(
        f"coopconsumer / raw, records/CPU-s  : {cpu.format('{:.2f}')}x (target >= 1.0x: "
        f"{'meets' if cpu.median >= 1.0 else 'behind'})"
    )
    print(
        f"assignment -> first record: raw {statistics.median(r.first_s for r, _ in rounds):.3f} s,"
        f" coopconsumer {statistics.median(c.first_s for _, c in rounds):.3f} s (medians)"
    )
    print(f"load average: {load_at_start} at start, {load_average()} at end")
    print("\nCPU ms per thread in the pass's CPU window (median over the rounds):")
    breakdown = []
    for index, side in ((0, "raw"), (1, "coopconsumer")):
        names = sorted({n for pair in rounds for n in pair[index].threads})
        for name in names:
            spread = Spread([pair[index].threads.get(name, 0.0) * 1000 for pair in rounds])
            breakdown.append([side, name, spread.format("{:,.1f}")])
    print_table(["side", "thread", "CPU ms"], breakdown)
    figure, axes = new_figure(1, 1, width=6.0, height=4.0)
    ratio_bars(
        axes[0][0],
        ["records/s", "records/CPU-s"],
        [wall, cpu],
        target=1.0,
        title=f"coopconsumer / raw confluent-kafka, {args.records:,} records, "
        f"{len(rounds)} rounds\nload average {load_at_start} at start",
    )
    write_results(
        args.results_dir,
        "throughput",
        args.broker,
        load_at_start,
        {
            "settings": {
                "records": args.records,
                "value_size": args.value_size,
                "partitions": args.partitions,
                "rounds": args.rounds,
                "batch": BATCH,
            },
            "raw_records_per_s": raw_rate.as_json(),
            "coop_records_per_s": coop_rate.as_json(),
            "raw_records_per_cpu_s": raw_cpu.as_json(),
            "coop_records_per_cpu_s": coop_cpu.as_json(),
            "ratio_records_per_s": wall.as_json(),
            "ratio_records_per_cpu_s": cpu.as_json(),
            "thread_breakdown_ms": breakdown,
            "passes": [
                {
                    "round": n + 1,
                    "side": p.side,
                    "records": p.records,
                    "join_s": p.join_s,
                    "first_s": p.first_s,
                    "read_s": p.read_s,
                    "cpu_s": p.cpu_s,
                    "threads_cpu_s": p.threads,
                }
                for n, pair in enumerate(rounds)
                for p in pair
            ],
        },
        figure,
    )


if __name__ == "__main__":
    main()
