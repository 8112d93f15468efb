"""Benchmark: CPU of an idle group member, coopconsumer vs a confluent-kafka consumer.

    python benchmarks/idle_cpu.py [--seconds 30] [--heartbeat-ms 3000]

Starts an embedded Tansu broker and a topic with 4 partitions and no records. Each side
runs in its own process, confluent-kafka first, then coopconsumer, one after the other:
one group member (coopconsumer with cooperative-sticky, or a confluent-kafka consumer
with librdkafka's cooperative-sticky) subscribes, polls until it owns all 4 partitions,
then makes three more ``poll(1.0)`` calls to settle (first heartbeats, librdkafka's
start-up fetches).

The timed window starts after those three calls and ends when the first ``poll(1.0)``
returns after ``--seconds`` of wall time (``time.monotonic``); inside it the member
only calls ``poll(1.0)`` in a loop while nothing is produced. Start-up, the group join,
the settling calls and ``close()`` are all outside it. The worker process's CPU time
over the window (``time.process_time``: user + system, every thread, librdkafka's
included) is printed as a share of one core of the window's wall time, for both sides,
and their ratio. Issue 15 asks for coopconsumer <= 2x confluent-kafka.

Measures; asserts nothing. The load average when each side started is printed beside
its figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid

from _common import add_broker_argument, describe_machine, print_table, started_broker

PARTITIONS = 4


def worker(side: str, bootstrap: str, topic: str, seconds: float, heartbeat_ms: int) -> None:
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
        cpu0, wall0 = time.process_time(), time.monotonic()
        polls = 0
        while time.monotonic() - wall0 < seconds:
            consumer.poll(1.0)
            polls += 1
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    finally:
        consumer.close()
    print(json.dumps({"cpu_s": cpu, "wall_s": wall, "polls": polls}))


def measure(side: str, bootstrap: str, topic: str, seconds: float, heartbeat_ms: int) -> dict:
    out = subprocess.run(
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
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    figures: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="idle window (30)")
    parser.add_argument("--heartbeat-ms", type=int, default=3000, help="heartbeat (3000)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    add_broker_argument(parser)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.bootstrap, args.topic, args.seconds, args.heartbeat_ms)
        return
    print(describe_machine())
    with started_broker(args.broker) as broker:
        topic = f"idle-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic, partitions=PARTITIONS)
        rows = []
        share: dict[str, float] = {}
        for side in ("confluent-kafka", "coopconsumer"):
            load = os.getloadavg()[0]
            fig = measure(side, broker.bootstrap, topic, args.seconds, args.heartbeat_ms)
            share[side] = 100.0 * fig["cpu_s"] / fig["wall_s"]
            rows.append(
                [
                    side,
                    f"{fig['wall_s']:.1f}",
                    f"{fig['cpu_s']:.3f}",
                    f"{share[side]:.3f}",
                    str(fig["polls"]),
                    f"{load:.2f}",
                ]
            )
    print(f"idle members, poll(1.0) loop, heartbeat {args.heartbeat_ms} ms, one process each")
    print_table(["member", "idle s", "CPU s", "% of a core", "polls", "load avg"], rows)
    ratio = share["coopconsumer"] / share["confluent-kafka"]
    print(f"coopconsumer / confluent-kafka CPU: {ratio:.2f}x (issue 15 asks <= 2x)")


if __name__ == "__main__":
    main()
