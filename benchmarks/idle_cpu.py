"""Benchmark: CPU of an idle group member, coopconsumer vs a confluent-kafka consumer.

    python benchmarks/idle_cpu.py [--seconds 20] [--rounds 3] [--heartbeat-ms 3000]
                                  [--broker kafka|tansu] [--results-dir DIR]

Starts one Apache Kafka KRaft node (``--broker kafka``, the default; ``--broker tansu``
the embedded Tansu broker) and a topic with 4 partitions and no records. Each round runs
both sides at the same time, each in its own process (so that both windows see the same
background load on a shared machine): one group member (coopconsumer with
cooperative-sticky, or a confluent-kafka consumer with librdkafka's cooperative-sticky)
subscribes, polls until it owns all 4 partitions, then makes three more ``poll(1.0)``
calls to settle (first heartbeats, librdkafka's start-up fetches). The two members are
in different groups.

The timed window starts after those three calls and ends when the first ``poll(1.0)``
returns after ``--seconds`` of wall time (``time.monotonic``); inside it the member
only calls ``poll(1.0)`` in a loop while nothing is produced. Start-up, the group join,
the settling calls and ``close()`` are all outside it. The worker process's CPU time
over the window (``time.process_time``: user + system, every thread, librdkafka's
included) is printed as a share of one core of the window's wall time, for both sides,
and their ratio per round, with the median, smallest and largest over the rounds.
Issue 34's target: coopconsumer <= 1.5x confluent-kafka.

Measures; asserts nothing. The load average when each round started is printed beside
its figures; the figures go to ``<results-dir>/idle_cpu.json``, a picture to
``idle_cpu.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from _common import (
    Spread,
    add_broker_argument,
    add_results_argument,
    describe_machine,
    load_average,
    new_figure,
    print_table,
    profiled,
    started_broker,
    thread_usage,
    write_results,
)

PARTITIONS = 4


def worker(
    side: str, bootstrap: str, topic: str, seconds: float, heartbeat_ms: int, profile: str
) -> None:
    """Run one idle member and print its CPU figures as JSON on stdout."""
    group = f"idle-{side}-{uuid.uuid4().hex[:8]}"
    common = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": max(6000, 3 * heartbeat_ms),
        "heartbeat.interval.ms": heartbeat_ms,
        "enable.auto.commit": False,
    }
    consumer: Any
    if side == "coopconsumer":
        import coopconsumer

        consumer = coopconsumer.Consumer(common)
        consumer.subscribe([topic])

        def owned() -> int:
            return len(consumer.assignment())
    else:
        import confluent_kafka

        consumer = confluent_kafka.Consumer(common)
        consumer.subscribe([topic])

        def owned() -> int:
            return len(consumer.assignment())

    try:
        deadline = time.monotonic() + 30
        while owned() < PARTITIONS and time.monotonic() < deadline:
            consumer.poll(0.2)
        if owned() < PARTITIONS:
            raise SystemExit(f"{side}: did not get the partitions within 30 s")
        for _ in range(3):  # settle: first heartbeats, librdkafka's start-up fetches
            consumer.poll(1.0)
        threads0 = thread_usage()
        cpu0, wall0 = time.process_time(), time.monotonic()
        polls = 0
        while time.monotonic() - wall0 < seconds:
            consumer.poll(1.0)
            polls += 1
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        threads1 = thread_usage()
        if profile:
            # A second window of the same length under cProfile (the polling thread
            # only), after the timed one: where the poll loop's own CPU goes.
            def idle() -> None:
                started = time.monotonic()
                while time.monotonic() - started < seconds:
                    consumer.poll(1.0)

            with contextlib.redirect_stdout(sys.stderr):
                profiled(Path(profile), f"idle_cpu.{side}", idle, top=20)
    finally:
        consumer.close()
    per_thread: dict[str, list[float]] = {}
    for tid, (name, cpu_ns, switches) in threads1.items():
        _name0, cpu0_ns, switches0 = threads0.get(tid, (name, 0, 0))
        entry = per_thread.setdefault(name, [0.0, 0.0, 0.0])
        entry[0] += (cpu_ns - cpu0_ns) / 1e9
        entry[1] += switches - switches0
        entry[2] += 1
    print(json.dumps({"cpu_s": cpu, "wall_s": wall, "polls": polls, "threads": per_thread}))


def start(
    side: str, bootstrap: str, topic: str, seconds: float, heartbeat_ms: int, profile: str
) -> subprocess.Popen[str]:
    """Start one worker process (``worker``) for ``side``."""
    return subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--worker",
            side,
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--seconds",
            str(seconds),
            "--heartbeat-ms",
            str(heartbeat_ms),
            *(["--profile-dir", profile] if profile else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def collect(proc: subprocess.Popen[str], side: str) -> dict[str, Any]:
    """The worker's figures (its last stdout line)."""
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{side} worker failed ({proc.returncode}): {err[-2000:]}")
    figures: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return figures


SIDES = ("confluent-kafka", "coopconsumer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="idle window (20)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (3)")
    parser.add_argument("--heartbeat-ms", type=int, default=3000, help="heartbeat (3000)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="in round 1, after the timed window, a second one under cProfile (not timed); "
        "writes <results-dir>/idle_cpu.<side>.profile.txt",
    )
    parser.add_argument("--profile-dir", default="", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    add_broker_argument(parser)
    add_results_argument(parser)
    args = parser.parse_args()
    if args.worker:
        worker(
            args.worker,
            args.bootstrap,
            args.topic,
            args.seconds,
            args.heartbeat_ms,
            args.profile_dir,
        )
        return
    load_at_start = load_average()
    print(describe_machine())
    rows = []
    rounds: list[dict[str, float]] = []
    threads: dict[str, list[dict[str, list[float]]]] = {}
    with started_broker(args.broker) as broker:
        topic = f"idle-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic, partitions=PARTITIONS)
        for round_no in range(1, args.rounds + 1):
            load = load_average()
            procs = {
                side: start(
                    side,
                    broker.bootstrap,
                    topic,
                    args.seconds,
                    args.heartbeat_ms,
                    str(args.results_dir) if args.profile and round_no == 1 else "",
                )
                for side in SIDES
            }
            share: dict[str, float] = {}
            for side, proc in procs.items():
                fig = collect(proc, side)
                share[side] = 100.0 * fig["cpu_s"] / fig["wall_s"]
                threads.setdefault(side, []).append(fig.get("threads", {}))
                rows.append(
                    [
                        str(round_no),
                        side,
                        f"{fig['wall_s']:.1f}",
                        f"{fig['cpu_s']:.3f}",
                        f"{share[side]:.3f}",
                        str(fig["polls"]),
                        load,
                    ]
                )
            rounds.append(share)
            print(
                f"round {round_no}: " + ", ".join(f"{s} {share[s]:.3f}%" for s in SIDES),
                flush=True,
            )
    print(
        f"idle members, poll(1.0) loop, heartbeat {args.heartbeat_ms} ms, one process each, "
        f"both sides at once"
    )
    print_table(
        ["round", "member", "idle s", "CPU s", "% of a core", "polls", "load avg at start"], rows
    )
    ratio = Spread([r["coopconsumer"] / r["confluent-kafka"] for r in rounds])
    shares = {side: Spread([r[side] for r in rounds]) for side in SIDES}
    for side in SIDES:
        print(f"{side:16s}: {shares[side].format('{:.3f}')} % of a core (median, min-max)")
    print(
        f"coopconsumer / confluent-kafka CPU: {ratio.format('{:.2f}')}x (target <= 1.5x: "
        f"{'meets' if ratio.median <= 1.5 else 'behind'})"
    )
    print(f"load average: {load_at_start} at start, {load_average()} at end")
    print("\nwhere the idle CPU goes, per thread (median over the rounds):")
    breakdown = []
    for side in SIDES:
        names = sorted({n for r in threads.get(side, []) for n in r})
        for name in names:
            cpu_ms = Spread([r[name][0] * 1000 for r in threads[side] if name in r])
            wakeups = Spread([r[name][1] / args.seconds for r in threads[side] if name in r])
            count = Spread([r[name][2] for r in threads[side] if name in r])
            breakdown.append(
                [
                    side,
                    name,
                    count.format("{:.0f}"),
                    cpu_ms.format("{:.1f}"),
                    wakeups.format("{:.1f}"),
                ]
            )
    print_table(["member", "thread", "threads", "CPU ms in window", "wake-ups/s"], breakdown)
    figure, axes = new_figure(1, 1, width=6.0, height=4.0)
    ax = axes[0][0]
    for k, side in enumerate(SIDES):
        spread = shares[side]
        ax.bar(
            [k],
            [spread.median],
            yerr=[[spread.median - spread.low], [spread.high - spread.median]],
            capsize=4,
        )
    ax.set_xticks(range(len(SIDES)))
    ax.set_xticklabels(SIDES)
    ax.set_ylabel("% of one core while idle (median, min-max)")
    ax.set_title(
        f"idle member CPU, heartbeat {args.heartbeat_ms} ms, {args.rounds} rounds of "
        f"{args.seconds:g} s\nratio {ratio.format('{:.2f}')}x; load average {load_at_start}",
        fontsize=9,
    )
    write_results(
        args.results_dir,
        "idle_cpu",
        args.broker,
        load_at_start,
        {
            "settings": {
                "seconds": args.seconds,
                "rounds": args.rounds,
                "heartbeat_ms": args.heartbeat_ms,
            },
            "percent_of_a_core": {side: shares[side].as_json() for side in SIDES},
            "ratio": ratio.as_json(),
            "rows": rows,
            "threads": threads,
            "thread_breakdown": breakdown,
        },
        figure,
    )


if __name__ == "__main__":
    main()
