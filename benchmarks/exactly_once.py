"""Benchmark: records/s of the exactly-once loop vs at-least-once vs raw confluent-kafka.

    python benchmarks/exactly_once.py [--records N] [--rounds R] [--batch B]
                                      [--commit-interval-ms MS] [--broker kafka|tansu]
                                      [--results-dir DIR]

Starts one Apache Kafka KRaft node (``--broker kafka``, the default; ``--broker tansu``
the embedded Tansu broker), pre-produces ``N`` records (default 200,000 of 100 bytes
over 4 partitions) into an input topic, then runs ``R`` rounds (default 5) of the three
loops, one pass of each per round, the order rotating from round to round; each pass
in a fresh group reading the whole input and writing one output record per input record
to its own output topic:

* **exactly-once**: ``coopconsumer.TransactionalProcessor`` (``step()`` in a loop);
* **at-least-once**: ``coopconsumer.Consumer`` + an idempotent confluent-kafka
  ``Producer``; at every commit interval the producer is flushed, then the consumed
  offsets are committed synchronously (the at-least-once order: output first);
* **raw**: the same transactional loop written with a confluent-kafka ``Consumer``
  (cooperative-sticky, ``read_committed``, the ``fetch.queue.backoff.ms`` of
  coopconsumer's record fetcher) and a transactional ``Producer``, as
  confluent-kafka's own example does it: ``begin``, ``produce``,
  ``send_offsets_to_transaction(positions, consumer_group_metadata())``, ``commit``.

All three use the same batch size (``consume(B)``), the same commit interval, the same
producer settings (``linger.ms=5``) and touch every record (its value goes out).

**Timed window**: from the moment the loop owns every input partition (its assignment
callback ran; joining the group is outside) to the moment the commit covering the last
input record returned. CPU is this process's (all threads, librdkafka's included) over
the same window. A short untimed pass of each loop (20,000 records) warms the broker and
the process up first. Prints every pass, the median rate per loop, and the per-round ratios
exactly-once / raw and exactly-once / at-least-once (records/s and records per
CPU-second) with their median, smallest and largest: a round's passes run back to back
under the same background load. Issue 34's target: exactly-once / raw >= 0.95x per
CPU-second. The figures go to ``<results-dir>/exactly_once.json``, a picture of the
ratios to ``exactly_once.png``, with the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka
from _common import (
    Spread,
    add_broker_argument,
    add_results_argument,
    describe_machine,
    load_average,
    new_figure,
    print_table,
    produce,
    profiled,
    ratio_bars,
    started_broker,
    thread_cpu_since,
    thread_usage,
    write_results,
)

import coopconsumer
from coopconsumer import TransactionalOutput, TransactionalProcessor
from coopconsumer._io._fetcher import _FETCH_QUEUE_BACKOFF_MS

PARTITIONS = 4
#: Tansu holds a JoinGroup for about half the session timeout: joins (outside the
#: timed window) take seconds instead of the default 45 s session's 22.
SESSION_TIMEOUT_MS = 6000


class Pass:
    def __init__(self, loop: str, records: int, seconds: float, cpu_s: float) -> None:
        self.loop = loop
        self.records = records
        self.seconds = seconds
        self.cpu_s = cpu_s
        #: CPU seconds of the window per thread name (``thread_cpu_since``).
        self.threads: dict[str, float] = {}
        #: From the window's opening (every partition owned) to the first records.
        self.first_s = float("nan")

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def cpu_rate(self) -> float:
        return self.records / self.cpu_s if self.cpu_s > 0 else float("nan")


class Window:
    """The timed window: opened when every partition is owned, closed by the caller."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.cpu_started = 0.0
        self.threads_started: dict[int, tuple[str, int, int]] = {}
        self.first_record: float | None = None

    def saw_records(self) -> None:
        """The loop got its first records (once the window is open)."""
        if self.first_record is None and self.started is not None:
            self.first_record = time.perf_counter()

    def open(self) -> None:
        if self.started is None:
            self.threads_started = thread_usage()
            self.started = time.perf_counter()
            self.cpu_started = time.process_time()

    def close(self, loop: str, records: int) -> Pass:
        assert self.started is not None, "the loop never owned every partition"
        timed = Pass(
            loop,
            records,
            time.perf_counter() - self.started,
            time.process_time() - self.cpu_started,
        )
        timed.threads = thread_cpu_since(self.threads_started)
        if self.first_record is not None:
            timed.first_s = self.first_record - self.started
        return timed


def exactly_once(bootstrap: str, source: str, records: int, args: argparse.Namespace) -> Pass:
    sink = f"out-{uuid.uuid4().hex[:8]}"
    window = Window()

    def process(batch: list[Any], out: TransactionalOutput) -> None:
        window.saw_records()
        for record in batch:
            out.produce(sink, record.value(), record.key())

    class Opens(coopconsumer.RebalanceListener):
        def on_partitions_assigned(
            self, partitions: frozenset[coopconsumer.TopicPartition]
        ) -> None:
            if len(processor.assignment() | partitions) == PARTITIONS:
                window.open()

    processor = TransactionalProcessor(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"eos-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
        },
        {"transactional.id": f"bench-{uuid.uuid4().hex[:8]}", "linger.ms": 5},
        process,
        topics=[source],
        listener=Opens(),
        batch_size=args.batch,
        commit_interval_ms=args.commit_interval_ms,
        max_records_per_transaction=1_000_000,
    )
    with processor:
        while processor.stats().records_processed < records:
            processor.step(0.5)
        result = window.close("exactly-once", records)
    return result


def at_least_once(bootstrap: str, source: str, records: int, args: argparse.Namespace) -> Pass:
    sink = f"out-{uuid.uuid4().hex[:8]}"
    window = Window()
    consumer = coopconsumer.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"alo-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
        }
    )
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )

    class Opens(coopconsumer.RebalanceListener):
        def on_partitions_assigned(
            self, partitions: frozenset[coopconsumer.TopicPartition]
        ) -> None:
            if len(consumer.assignment() | partitions) == PARTITIONS:
                window.open()

    consumer.subscribe([source], Opens())
    committed = 0
    pending: dict[coopconsumer.TopicPartition, int] = {}
    uncommitted = 0
    last_commit = time.monotonic()
    interval = args.commit_interval_ms / 1000.0

    def commit() -> None:
        nonlocal committed, uncommitted, last_commit
        if producer.flush(60) != 0:
            raise RuntimeError("the producer did not deliver every record")
        consumer.commit(dict(pending))
        committed += uncommitted
        uncommitted = 0
        last_commit = time.monotonic()

    try:
        while committed < records:
            batch = consumer.consume(args.batch, 0.5)
            if batch:
                window.saw_records()
            for record in batch:
                _produce(producer, sink, record.value(), record.key())
                partition: Any = record.partition()
                offset: Any = record.offset()
                pending[coopconsumer.TopicPartition(source, partition)] = offset + 1
            uncommitted += len(batch)
            due = not batch or time.monotonic() - last_commit >= interval
            if uncommitted and (due or committed + uncommitted >= records):
                commit()
        return window.close("at-least-once", records)
    finally:
        consumer.close()
        producer.flush(10)


def raw(bootstrap: str, source: str, records: int, args: argparse.Namespace) -> Pass:
    sink = f"out-{uuid.uuid4().hex[:8]}"
    window = Window()
    owned: set[int] = set()
    lock = threading.Lock()

    def on_assign(consumer: Any, partitions: list[Any]) -> None:
        with lock:
            owned.update(tp.partition for tp in partitions)
            if len(owned) == PARTITIONS:
                window.open()

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            # The fetch back-off coopconsumer's record fetcher uses: with librdkafka's
            # default (1 s) this loop spent ~2/3 of its wall time waiting for fetches
            # (200,000 records: 1.8-1.9 s against 0.54-0.85 s at 50 ms, same CPU).
            "fetch.queue.backoff.ms": _FETCH_QUEUE_BACKOFF_MS,
        }
    )
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"raw-{uuid.uuid4().hex[:8]}",
            "linger.ms": 5,
        }
    )
    producer.init_transactions(30)
    consumer.subscribe([source], on_assign=on_assign)
    interval = args.commit_interval_ms / 1000.0
    committed = 0
    in_txn = 0
    started = 0.0
    offsets: dict[int, int] = {}
    try:
        while committed < records:
            batch = consumer.consume(args.batch, 0.5)
            if batch:
                window.saw_records()
            if batch:
                if not in_txn:
                    producer.begin_transaction()
                    started = time.monotonic()
                for record in batch:
                    if record.error() is not None:
                        continue
                    _produce(producer, sink, record.value(), record.key())
                    partition_no: Any = record.partition()
                    position: Any = record.offset()
                    offsets[partition_no] = position + 1
                    in_txn += 1
            if in_txn and (
                not batch or time.monotonic() - started >= interval or committed + in_txn >= records
            ):
                producer.send_offsets_to_transaction(
                    [confluent_kafka.TopicPartition(source, p, o) for p, o in offsets.items()],
                    consumer.consumer_group_metadata(),
                )
                producer.commit_transaction()
                committed += in_txn
                in_txn = 0
        return window.close("raw", records)
    finally:
        consumer.close()


def _produce(producer: confluent_kafka.Producer, topic: str, value: Any, key: Any) -> None:
    while True:
        try:
            producer.produce(topic, value, key)
            return
        except BufferError:
            producer.poll(0.05)


LOOPS: dict[str, Callable[[str, str, int, argparse.Namespace], Pass]] = {
    "exactly-once": exactly_once,
    "at-least-once": at_least_once,
    "raw": raw,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--commit-interval-ms", type=int, default=100)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the timed rounds, one more exactly-once pass under cProfile (not timed)",
    )
    add_broker_argument(parser)
    add_results_argument(parser)
    args = parser.parse_args()
    load_at_start = load_average()
    print(describe_machine())
    names = list(LOOPS)
    rounds: list[dict[str, Pass]] = []
    with started_broker(args.broker) as broker:
        source = f"in-{uuid.uuid4().hex[:8]}"
        broker.create_topic(source, PARTITIONS)
        produce(broker.bootstrap, source, args.records, partitions=PARTITIONS, with_keys=True)
        # One short untimed pass of each loop first: the broker warms up, and each loop
        # pays its one-time costs in this process (modules imported on first use).
        for name, loop in LOOPS.items():
            warmup = loop(broker.bootstrap, source, min(args.records, 20_000), args)
            print(f"{name} warm-up (not counted): {warmup.rate:,.0f} records/s", flush=True)
        for round_no in range(args.rounds):
            shift = round_no % len(names)
            passes: dict[str, Pass] = {}
            for name in names[shift:] + names[:shift]:
                result = LOOPS[name](broker.bootstrap, source, args.records, args)
                passes[name] = result
                print(
                    f"round {round_no + 1} {name:14s} {result.rate:10,.0f} records/s  "
                    f"{result.cpu_rate:10,.0f} records/CPU-s  first records after "
                    f"{result.first_s * 1000:,.0f} ms  (load {load_average()})",
                    flush=True,
                )
            rounds.append(passes)
        if args.profile:
            profiled(
                args.results_dir,
                "exactly_once",
                lambda: exactly_once(broker.bootstrap, source, args.records, args),
            )
    rate = {name: Spread([r[name].rate for r in rounds]) for name in names}
    cpu = {name: Spread([r[name].cpu_rate for r in rounds]) for name in names}
    ratios = {
        f"{a} / {b} {unit}": Spread(
            [
                (r[a].rate / r[b].rate) if unit == "records/s" else r[a].cpu_rate / r[b].cpu_rate
                for r in rounds
            ]
        )
        for a, b in (("exactly-once", "raw"), ("exactly-once", "at-least-once"))
        for unit in ("records/s", "records/CPU-s")
    }
    print()
    print(
        f"{args.records:,} records, batch {args.batch}, commit interval "
        f"{args.commit_interval_ms} ms, medians of {args.rounds} rounds (min-max):"
    )
    first = {name: Spread([r[name].first_s * 1000 for r in rounds]) for name in names}
    print_table(
        ["loop", "records/s", "records/CPU-s", "first records after ms"],
        [[name, rate[name].format(), cpu[name].format(), first[name].format()] for name in names],
    )
    print()
    for label, spread in ratios.items():
        print(f"{label:42s}: {spread.format('{:.2f}')}x")
    target = ratios["exactly-once / raw records/CPU-s"].median
    print(
        f"target exactly-once / raw >= 0.95x per CPU-second: "
        f"{'meets' if target >= 0.95 else 'behind'} ({target:.2f}x)"
    )
    print(f"load average: {load_at_start} at start, {load_average()} at end")
    print("\nCPU ms per thread in the window (median over the rounds):")
    breakdown = []
    for name in names:
        threads = sorted({t for r in rounds for t in r[name].threads})
        for thread in threads:
            spread = Spread([r[name].threads.get(thread, 0.0) * 1000 for r in rounds])
            breakdown.append([name, thread, spread.format("{:,.1f}")])
    print_table(["loop", "thread", "CPU ms"], breakdown)
    figure, axes = new_figure(1, 1, width=7.0, height=4.0)
    ratio_bars(
        axes[0][0],
        list(ratios),
        list(ratios.values()),
        target=0.95,
        title=f"exactly-once loop ratios, {args.records:,} records, {args.rounds} rounds\n"
        f"load average {load_at_start} at start",
    )
    write_results(
        args.results_dir,
        "exactly_once",
        args.broker,
        load_at_start,
        {
            "settings": {
                "records": args.records,
                "rounds": args.rounds,
                "batch": args.batch,
                "commit_interval_ms": args.commit_interval_ms,
                "partitions": PARTITIONS,
            },
            "records_per_s": {name: rate[name].as_json() for name in names},
            "records_per_cpu_s": {name: cpu[name].as_json() for name in names},
            "first_records_ms": {name: first[name].as_json() for name in names},
            "ratios": {label: spread.as_json() for label, spread in ratios.items()},
            "thread_breakdown_ms": breakdown,
            "passes": [
                {
                    "round": n + 1,
                    "loop": p.loop,
                    "records": p.records,
                    "seconds": p.seconds,
                    "cpu_s": p.cpu_s,
                    "first_records_s": p.first_s,
                    "threads_cpu_s": p.threads,
                }
                for n, r in enumerate(rounds)
                for p in r.values()
            ],
        },
        figure,
    )


if __name__ == "__main__":
    main()
