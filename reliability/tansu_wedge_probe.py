"""Is a stalled chaos group stuck in its members or in the broker?

    python -m reliability.tansu_wedge_probe --seed 2611 --events 45

Runs the first ``--events`` events of a chaos schedule on Tansu (``reliability/chaos.py``,
same seed, same generator), kills every member, then starts two confluent-kafka members
in the same group and two in a new group on the same topic, and prints how many of each
got partitions within ``--wait-s``. With seed 2611 the group stops rebalancing about
90 s into the schedule; if the fresh members of the old group get nothing while those
of the new group do, the broker's group state is stuck, not a member.
See reliability/README.md.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from reliability.chaos import _PARTITIONS, _Proc, _Producer, _read_ledger, _Runner

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the probe and print what it saw."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=2611)
    parser.add_argument("--events", type=int, default=45)
    parser.add_argument("--gap-s", type=float, default=4.0)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--wait-s", type=float, default=75.0)
    parser.add_argument("--out", default="/tmp/coopconsumer-wedge-probe")
    args = parser.parse_args(argv)

    from coopconsumer.testing import embedded_broker, unique_name

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*"):
        old.unlink()
    with embedded_broker("tansu") as broker:
        runner = _Runner(args, broker, out)
        broker.create_topic(runner.topic, partitions=_PARTITIONS)
        producer = _Producer(broker.bootstrap, runner.topic, 40.0)
        for kind in ("coop", "coop", "rdkafka"):
            runner.start_member(kind)
        producer.start()
        time.sleep(5)
        started = time.monotonic()
        for _ in range(args.events):
            runner.apply_random_event()
            until = time.monotonic() + runner.rng.uniform(args.gap_s / 2, args.gap_s * 1.5)
            while time.monotonic() < until:
                runner.tick()
                time.sleep(0.05)
        last = max(
            (
                e["t"]
                for m in runner.members.values()
                for e in _read_ledger(m.ledger)
                if e["ev"] == "assigned" and e["tps"]
            ),
            default=started,
        )
        print(f"last partitions handed out {last - started:.0f} s into the schedule")
        for member in runner.members.values():
            if member.proc.poll() is None:
                member.proc.send_signal(signal.SIGCONT)
                member.proc.kill()
                member.proc.wait()
        probe_started = time.monotonic()
        same = [runner.start_member("rdkafka") for _ in range(2)]
        group, runner.group = runner.group, unique_name("fresh")
        fresh = [runner.start_member("rdkafka") for _ in range(2)]
        runner.group = group
        time.sleep(args.wait_s)

        def got_partitions(members: list[_Proc]) -> int:
            return sum(
                any(
                    e["ev"] == "assigned" and e["tps"] and e["t"] > probe_started
                    for e in _read_ledger(member.ledger)
                )
                for member in members
            )

        print(
            f"after killing every member: {got_partitions(same)} of 2 fresh members of"
            f" the same group and {got_partitions(fresh)} of 2 of a new group got"
            f" partitions within {args.wait_s:.0f} s"
        )
        for member in same + fresh:
            member.proc.kill()
            member.proc.wait()
        producer.stopped.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
