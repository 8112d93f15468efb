"""Benchmark: records/s and idle CPU of ``coopconsumer.aio.AsyncConsumer`` vs the sync
``coopconsumer.Consumer`` vs aiokafka's ``AIOKafkaConsumer``, same broker, same topic,
one run.

    python benchmarks/aio_throughput.py [--records N] [--value-size BYTES]
                                        [--partitions P] [--rounds R] [--idle-s S]
                                        [--broker kafka|tansu] [--results-dir DIR]

Starts one Apache Kafka KRaft node (``--broker kafka``, the default; ``--broker tansu``
the embedded Tansu broker), pre-produces ``N`` records (default 500,000 of 100
bytes over 4 partitions) and reads the whole topic ``R`` times (default 3) with each
of the three consumers, one pass of each per round, the order rotating between
rounds. Every pass is the only member of a fresh group (``auto.offset.reset``
earliest, auto-commit off, each library's default fetch settings; coopconsumer's
strategy ``cooperative-sticky``, aiokafka's its default ``range``, the only one it
has that gives one member every partition) and touches every record
(``len(value())``).

* **sync**: ``Consumer.consume(1000, 1.0)`` in a loop (``benchmarks/throughput.py``'s
  pass, imported from there);
* **async**: ``await AsyncConsumer.consume(1000, 1.0)`` in a loop, in ``asyncio.run``;
* **aiokafka**: ``await AIOKafkaConsumer.getmany(max_records=1000, timeout_ms=1000)``
  in a loop, in ``asyncio.run``.

What each pass times, the same way for all three:

* **read time** (wall): from the group handing the consumer its partitions (its
  ``on_partitions_assigned`` callback) until its last record has been returned; the
  committed-offset lookup after the assignment is inside, the join before it is not
  (printed apart as "join": construction -> assignment);
* **CPU** (``time.process_time``: every thread of this process, librdkafka's
  included): from just before the consumer is constructed until its last record.
  Closing is outside both windows.

Then **idle CPU**: each consumer joins a group on an empty topic, waits until it owns
every partition, and then its application loop waits for records for ``--idle-s``
seconds (default 10; sync: ``consume(1000, 1.0)`` in a loop, async:
``consume(1000, 1.0)``, aiokafka: ``getmany(timeout_ms=1000)``); printed: the process
CPU time during that window divided by its length. An untimed pass of each side warms the
broker and the process up first. Printed: every pass, each side's median rate, the per-round ratios
async / sync and async / aiokafka (records/s and records per CPU-second) with their
median, smallest and largest (issue 34's targets: >= 0.9x the sync consumer, ahead of
aiokafka), and the machine's load average before and after. The figures go to
``<results-dir>/aio_throughput.json``, a picture of the ratios to ``aio_throughput.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

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
    write_results,
)
from throughput import Pass, _settings, coop_pass

import coopconsumer
from coopconsumer.aio import AsyncConsumer

BATCH = 1000


class _AssignedAt:
    """Notes when the group first hands the consumer some partitions (any library)."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.owned: set[Any] = set()

    def on_partitions_assigned(self, partitions: Any) -> None:
        if partitions and self.at is None:
            self.at = time.perf_counter()
        self.owned |= set(partitions)

    def on_partitions_revoked(self, partitions: Any) -> None:
        self.owned -= set(partitions)


async def _drain(
    consume: Callable[[], Awaitable[list[Any]]],
    total: int,
    side: str,
    *,
    created: float,
    cpu_start: float,
    listener: _AssignedAt,
) -> Pass:
    deadline = time.perf_counter() + 600
    first = 0.0
    seen = 0
    touched = 0
    while seen < total:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{side}: only {seen}/{total} records within 600 s")
        for message in await consume():
            if seen == 0:
                first = time.perf_counter()
            seen += 1
            value = message.value if side == "aiokafka" else message.value()
            touched += len(value) if value is not None else 0
    ended = time.perf_counter()
    cpu = time.process_time() - cpu_start
    if touched == 0:
        raise RuntimeError(f"{side}: records carried no bytes")
    if listener.at is None:
        raise RuntimeError(f"{side}: records arrived before the assignment was seen")
    return Pass(
        side,
        seen,
        join_s=listener.at - created,
        first_s=first - listener.at,
        read_s=ended - listener.at,
        cpu_s=cpu,
    )


def async_pass(bootstrap: str, topic: str, total: int) -> Pass:
    async def main() -> Pass:
        listener = _AssignedAt()
        cpu_start = time.process_time()
        created = time.perf_counter()
        consumer = AsyncConsumer(_settings(bootstrap, f"aio-{uuid.uuid4().hex}"))
        try:
            consumer.subscribe([topic], listener)
            return await _drain(
                lambda: consumer.consume(BATCH, 1.0),
                total,
                "async",
                created=created,
                cpu_start=cpu_start,
                listener=listener,
            )
        finally:
            await consumer.close()

    return asyncio.run(main())


def _aiokafka(bootstrap: str, topic: str, listener: _AssignedAt) -> Any:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener  # type: ignore[import-untyped]

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_assigned(self, assigned: Any) -> None:
            listener.on_partitions_assigned(assigned)

        async def on_partitions_revoked(self, revoked: Any) -> None:
            listener.on_partitions_revoked(revoked)

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"aiokafka-{uuid.uuid4().hex}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
    )
    consumer.subscribe([topic], listener=Listener())
    return consumer


async def _getmany(consumer: Any, timeout_ms: int) -> list[Any]:
    batches = await consumer.getmany(max_records=BATCH, timeout_ms=timeout_ms)
    return [record for records in batches.values() for record in records]


def aiokafka_pass(bootstrap: str, topic: str, total: int) -> Pass:
    async def main() -> Pass:
        listener = _AssignedAt()
        cpu_start = time.process_time()
        created = time.perf_counter()
        consumer = _aiokafka(bootstrap, topic, listener)
        await consumer.start()
        try:
            return await _drain(
                lambda: _getmany(consumer, 1000),
                total,
                "aiokafka",
                created=created,
                cpu_start=cpu_start,
                listener=listener,
            )
        finally:
            await consumer.stop()

    return asyncio.run(main())


# ---------------------------------------------------------------------------- idle CPU


def _idle_window(idle_s: float, step: Callable[[], object]) -> float:
    cpu = time.process_time()
    start = time.perf_counter()
    while time.perf_counter() - start < idle_s:
        step()
    return (time.process_time() - cpu) / (time.perf_counter() - start)


async def _aidle_window(idle_s: float, step: Callable[[], Awaitable[object]]) -> float:
    cpu = time.process_time()
    start = time.perf_counter()
    while time.perf_counter() - start < idle_s:
        await step()
    return (time.process_time() - cpu) / (time.perf_counter() - start)


def _wait_owned(listener: _AssignedAt, partitions: int, what: str) -> None:
    if len(listener.owned) != partitions:
        raise RuntimeError(f"{what}: owns {len(listener.owned)}/{partitions} partitions")


def idle_sync(bootstrap: str, topic: str, partitions: int, idle_s: float) -> float:
    listener = _AssignedAt()
    consumer = coopconsumer.Consumer(_settings(bootstrap, f"idle-{uuid.uuid4().hex}"))
    try:
        consumer.subscribe([topic], listener)
        deadline = time.perf_counter() + 60
        while len(listener.owned) < partitions and time.perf_counter() < deadline:
            consumer.consume(BATCH, 0.2)
        _wait_owned(listener, partitions, "sync")
        return _idle_window(idle_s, lambda: consumer.consume(BATCH, 1.0))
    finally:
        consumer.close()


def idle_async(bootstrap: str, topic: str, partitions: int, idle_s: float) -> float:
    async def main() -> float:
        listener = _AssignedAt()
        consumer = AsyncConsumer(_settings(bootstrap, f"idle-{uuid.uuid4().hex}"))
        try:
            consumer.subscribe([topic], listener)
            deadline = time.perf_counter() + 60
            while len(listener.owned) < partitions and time.perf_counter() < deadline:
                await consumer.consume(BATCH, 0.2)
            _wait_owned(listener, partitions, "async")
            return await _aidle_window(idle_s, lambda: consumer.consume(BATCH, 1.0))
        finally:
            await consumer.close()

    return asyncio.run(main())


def idle_aiokafka(bootstrap: str, topic: str, partitions: int, idle_s: float) -> float:
    async def main() -> float:
        listener = _AssignedAt()
        consumer = _aiokafka(bootstrap, topic, listener)
        await consumer.start()
        try:
            deadline = time.perf_counter() + 60
            while len(listener.owned) < partitions and time.perf_counter() < deadline:
                await _getmany(consumer, 200)
            _wait_owned(listener, partitions, "aiokafka")
            return await _aidle_window(idle_s, lambda: _getmany(consumer, 1000))
        finally:
            await consumer.stop()

    return asyncio.run(main())


# ---------------------------------------------------------------------------- main


def sync_pass(bootstrap: str, topic: str, total: int) -> Pass:
    timed = coop_pass(bootstrap, topic, total)
    timed.side = "sync"
    return timed


_PASSES: dict[str, Callable[[str, str, int], Pass]] = {
    "sync": sync_pass,
    "async": async_pass,
    "aiokafka": aiokafka_pass,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the timed rounds, one more async pass under cProfile (not timed)",
    )
    add_broker_argument(parser)
    add_results_argument(parser)
    args = parser.parse_args()

    load_at_start = load_average()
    print(describe_machine())
    order = list(_PASSES)
    with started_broker(args.broker) as broker:
        topic = filled_topic(
            broker,
            "aio-throughput",
            args.records,
            value_size=args.value_size,
            partitions=args.partitions,
        )
        # One untimed pass of each side first: the broker warms up, and each library
        # pays its one-time costs in this process (modules imported on first use).
        for side, run in _PASSES.items():
            warmup = run(broker.bootstrap, topic, args.records)
            print(f"{side} warm-up read (not counted): {warmup.rate:,.0f} records/s")
        rounds: list[dict[str, Pass]] = []
        for n in range(args.rounds):
            rotated = order[n % len(order) :] + order[: n % len(order)]
            rounds.append(
                {side: _PASSES[side](broker.bootstrap, topic, args.records) for side in rotated}
            )
        if args.profile:
            profiled(
                args.results_dir,
                "aio_throughput",
                lambda: async_pass(broker.bootstrap, topic, args.records),
            )
        empty = f"aio-idle-{uuid.uuid4().hex[:8]}"
        broker.create_topic(empty, args.partitions)
        idle = {
            "sync": idle_sync(broker.bootstrap, empty, args.partitions, args.idle_s),
            "async": idle_async(broker.bootstrap, empty, args.partitions, args.idle_s),
            "aiokafka": idle_aiokafka(broker.bootstrap, empty, args.partitions, args.idle_s),
        }

    print()
    print_table(
        ["round", "side", "records", "join", "to first", "read time", "records/s", "CPU"],
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
            ]
            for n, passes in enumerate(rounds)
            for p in passes.values()
        ],
    )
    print()
    for side in order:
        rate = Spread([r[side].rate for r in rounds])
        cpu = Spread([r[side].cpu_rate for r in rounds])
        join = statistics.median(r[side].join_s for r in rounds)
        print(
            f"{side:9}: {rate.format()} records/s, {cpu.format()} records/CPU-s, "
            f"join {join:.2f} s (medians of {len(rounds)}, min-max), "
            f"idle CPU {idle[side] * 100:.2f}% of a core over {args.idle_s:g} s"
        )
    ratios: dict[str, Spread] = {}
    for other in ("sync", "aiokafka"):
        ratios[f"async / {other} records/s"] = Spread(
            [r["async"].rate / r[other].rate for r in rounds]
        )
        ratios[f"async / {other} records/CPU-s"] = Spread(
            [r["async"].cpu_rate / r[other].cpu_rate for r in rounds]
        )
    for label, spread in ratios.items():
        print(f"{label:30s}: {spread.format('{:.2f}')}x")
    vs_sync = ratios["async / sync records/s"].median
    vs_aiokafka = ratios["async / aiokafka records/s"].median
    print(
        f"targets: async / sync >= 0.9x: {'meets' if vs_sync >= 0.9 else 'behind'}; "
        f"async ahead of aiokafka: {'meets' if vs_aiokafka > 1.0 else 'behind'}"
    )
    print(f"load average: {load_at_start} at start, {load_average()} at end")
    figure, axes = new_figure(1, 1, width=8.0, height=4.0)
    ratio_bars(
        axes[0][0],
        list(ratios),
        list(ratios.values()),
        target=None,
        title=f"AsyncConsumer ratios, {args.records:,} records, {len(rounds)} rounds "
        f"(targets: 0.9x sync, 1.0x aiokafka)\nload average {load_at_start} at start",
    )
    axes[0][0].axhline(0.9, color="tab:red", linestyle="--", linewidth=1)
    axes[0][0].axhline(1.0, color="tab:gray", linestyle=":", linewidth=1)
    write_results(
        args.results_dir,
        "aio_throughput",
        args.broker,
        load_at_start,
        {
            "settings": {
                "records": args.records,
                "value_size": args.value_size,
                "partitions": args.partitions,
                "rounds": args.rounds,
                "idle_s": args.idle_s,
            },
            "records_per_s": {s: Spread([r[s].rate for r in rounds]).as_json() for s in order},
            "records_per_cpu_s": {
                s: Spread([r[s].cpu_rate for r in rounds]).as_json() for s in order
            },
            "idle_percent_of_a_core": {s: idle[s] * 100 for s in order},
            "ratios": {label: spread.as_json() for label, spread in ratios.items()},
            "passes": [
                {
                    "round": n + 1,
                    "side": p.side,
                    "records": p.records,
                    "join_s": p.join_s,
                    "first_s": p.first_s,
                    "read_s": p.read_s,
                    "cpu_s": p.cpu_s,
                }
                for n, passes in enumerate(rounds)
                for p in passes.values()
            ],
        },
        figure,
    )


if __name__ == "__main__":
    main()
