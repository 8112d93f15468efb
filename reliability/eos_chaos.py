"""Exactly-once chaos run: input topic -> N processor processes -> output topic, under a
seeded schedule of faults, checked by an independent read_committed reader.

    python -m reliability.eos_chaos --events 30 --seed 3401     # Kafka, 3 nodes, broker kills
    python -m reliability.eos_chaos --broker tansu --seed 2511   # classic row, both loops (~4 min)
    python -m reliability.eos_chaos --broker tansu --events 100 --gap-s 3.5  # ~12 min
    python -m reliability.eos_chaos --broker tansu --row kip848 --seed 2511  # consumer protocol
    python -m reliability.eos_chaos --broker tansu --quick --impl coop       # a CI-size look

``--broker kafka`` (the default) runs every loop (coopconsumer, raw confluent-kafka,
Java) in both rows at once on a 3-node Apache Kafka cluster through a schedule of
broker SIGKILLs aimed at group and transaction coordinators: reliability/eos_kafka.py.
What follows describes ``--broker tansu``.

Each processor process (``reliability/eos_member.py``) copies every input record to one
output record in transactions, with a ``transactional.id`` per process *slot* (a slot
restarted after a crash or a fatal error reuses it, as docs/exactly-once.md
recommends). ``--impl coop`` runs ``coopconsumer.TransactionalProcessor``, ``raw`` the
same loop written with confluent-kafka alone (librdkafka's KIP-447 example); ``both``
runs the same schedule (same seed) through each, one after the other, each on a fresh
broker, and prints them side by side.

Rows (what each can verify: reliability/README.md):

* ``classic`` (the main row): Tansu behind coopconsumer's transactions proxy
  (``embedded_broker("tansu", transactions=True)``), cooperative-sticky classic group,
  3 to 5 slots. Events: SIGKILL while transactions are open (restarted after 0.5-4 s,
  or only after the transaction timeout so that the proxy aborts what was left open),
  SIGSTOP past the session timeout (a zombie whose offsets must be fenced), short
  SIGSTOPs, scale out (a new slot joins) and in (SIGTERM, a clean close), coordinator
  moves, transaction-coordinator errors (retriable ones, abortable ones such as
  ILLEGAL_GENERATION on TxnOffsetCommit, lost EndTxn answers, fatal
  INVALID_PRODUCER_EPOCH: the process exits and its slot restarts), slow answers and
  single cut connections.
* ``kip848``: librdkafka's mock cluster (3 brokers), ``group.protocol=consumer``, one
  long-lived processor: the mock keeps no transactional offsets, so nothing may make a
  partition change hands; events are short SIGSTOPs, retriable transaction and
  heartbeat errors, group coordinator moves, brokers down for 2-6 s and cut connections.

The schedule is planned from ``random.Random(seed)`` before anything starts (``plan``),
against a model of the slots, so both loops get the very same events. At the end the
faults stop, every slot is running, the input producer stops, and the run waits until
every input record has an output (the drain); then every processor is closed and a
read_committed confluent-kafka consumer reads the whole output topic. Each output record
names its input record (partition and offset), so the check counts copies per input
record: duplicates and missing must both be 0.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from reliability.eos_lanes import (
    _ABORTABLE_TXN_OFFSET_COMMIT,
    _ADD_OFFSETS,
    _ADD_PARTITIONS,
    _CONSUMER_GROUP_HEARTBEAT,
    _DROP,
    _END_TXN,
    _FETCH,
    _HEARTBEAT,
    _INVALID_PRODUCER_EPOCH,
    _OFFSET_FETCH,
    _OUT,
    _PRODUCE,
    _PRODUCER_FENCED,
    _RETRIABLE,
    _TXN_APIS,
    _TXN_OFFSET_COMMIT,
    _UNKNOWN_TOPIC_OR_PARTITION,
    Copies,
    Planned,
    _fmt_counts,
    _Run,
    check_copies,
)

__all__ = ["Planned", "check_copies", "main", "plan"]

# ---------------------------------------------------------------------- the schedule


_CLASSIC_WEIGHTS: Mapping[str, int] = {
    "kill": 4,
    "kill-late": 1,
    "zombie": 2,
    "pause": 2,
    "scale-out": 2,
    "scale-in": 2,
    "coordinator-move": 2,
    "txn-retriable": 3,
    "txn-abortable": 3,
    "endtxn-lost": 2,
    "fatal": 2,
    "slow-answers": 1,
    "conn-cut": 1,
}
_KIP848_WEIGHTS: Mapping[str, int] = {
    "pause": 2,
    "txn-retriable": 4,
    "coordinator-move": 2,
    "broker-down": 2,
    "heartbeat-retriable": 2,
    "conn-cut": 2,
}
#: Events that take a running slot out for a while (or for good).
_TAKES_SLOT = frozenset({"kill", "kill-late", "zombie", "pause", "scale-in"})


def plan(
    seed: int,
    events: int,
    *,
    row: str = "classic",
    initial_slots: int = 3,
    max_slots: int = 5,
    min_running: int = 2,
    gap_s: float = 3.5,
    session_s: float = 6.0,
    txn_timeout_s: float = 10.0,
    settle_s: float = 12.0,
) -> list[Planned]:
    """The schedule for ``seed``: pure, the same list for the same arguments.

    Slots are simulated (running, stopped until, down until restarted, free) so that
    each event targets a slot that is running at that time in the plan; an event that
    would leave fewer than ``min_running`` slots running, or more than ``max_slots``
    slots, is replaced by scale-out/scale-in or a retriable error. Signals go to slots
    that have run for ``settle_s`` (joined the group, processing), when there are any."""
    rng = random.Random(seed)
    weights = _CLASSIC_WEIGHTS if row == "classic" else _KIP848_WEIGHTS
    kinds = list(weights)
    running: set[int] = set(range(initial_slots))
    back_at: dict[int, float] = {}  # stopped or down slots -> when they run again
    since: dict[int, float] = dict.fromkeys(running, -settle_s)  # (re)started at
    out: list[Planned] = []
    at = 0.0
    for _ in range(events):
        at += rng.uniform(gap_s / 2, gap_s * 1.5)
        for back, when in sorted(back_at.items()):
            if when <= at:
                del back_at[back]
                running.add(back)
                since.setdefault(back, when)
        kind = rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
        active = len(running) + len(back_at)
        if kind in _TAKES_SLOT and len(running) <= min_running and row == "classic":
            kind = "scale-out" if active < max_slots else "txn-retriable"
        if kind == "scale-out" and active >= max_slots:
            kind = "scale-in" if len(running) > min_running else "txn-retriable"
        settled = sorted(s for s in running if at - since[s] >= settle_s)
        target = rng.choice(settled or sorted(running)) if running else None
        if kind in _TAKES_SLOT and target is None:
            kind = "txn-retriable"  # every slot is stopped or down right now
        params: dict[str, Any] = {}
        slot: int | None = None
        if kind in ("kill", "kill-late"):
            slot = target
            late = txn_timeout_s + rng.uniform(2, 5)
            params["restart_after"] = round(rng.uniform(0.5, 4) if kind == "kill" else late, 1)
        elif kind in ("zombie", "pause"):
            slot = target
            span = (
                (1.2 * session_s, 2.0 * session_s) if kind == "zombie" else (0.5, 0.3 * session_s)
            )
            params["seconds"] = round(rng.uniform(*span), 1)
        elif kind == "scale-in":
            slot = target
        elif kind == "scale-out":
            slot = min(s for s in range(max_slots + 1) if s not in running and s not in back_at)
        elif kind == "coordinator-move":
            params["seconds"] = round(rng.uniform(1, 5), 1)
            if row == "classic":
                params["which"] = rng.choice(["both", "group", "transaction"])
            else:
                params["broker"] = rng.randrange(3)
        elif kind == "txn-retriable":
            api = rng.choice(_TXN_APIS)
            choice = rng.random()
            if choice < 0.15:
                codes = [_DROP]
            elif choice < 0.3 and api == _TXN_OFFSET_COMMIT:
                codes = [_UNKNOWN_TOPIC_OR_PARTITION]
            else:
                codes = [rng.choice(_RETRIABLE) for _ in range(rng.randint(1, 3))]
            params.update(api=api, codes=codes)
        elif kind == "txn-abortable":
            params.update(api=_TXN_OFFSET_COMMIT, codes=[rng.choice(_ABORTABLE_TXN_OFFSET_COMMIT)])
        elif kind == "endtxn-lost":
            params.update(api=_END_TXN, codes=[rng.choice([_DROP, _DROP, 15, 51])])
        elif kind == "fatal":
            if rng.random() < 0.75:
                api = rng.choice([_ADD_OFFSETS, _END_TXN, _TXN_OFFSET_COMMIT, _ADD_PARTITIONS])
                params.update(api=api, codes=[_INVALID_PRODUCER_EPOCH])
            else:
                params.update(api=rng.choice([_END_TXN, _ADD_PARTITIONS]), codes=[_PRODUCER_FENCED])
        elif kind == "slow-answers":
            params.update(
                delay=round(rng.uniform(0.2, 1.0), 2), seconds=round(rng.uniform(2, 6), 1)
            )
        elif kind == "conn-cut":
            apis = [_PRODUCE, _FETCH, _HEARTBEAT, _OFFSET_FETCH, _END_TXN, _TXN_OFFSET_COMMIT]
            if row != "classic":
                apis = [_PRODUCE, _FETCH, _CONSUMER_GROUP_HEARTBEAT, _END_TXN, _TXN_OFFSET_COMMIT]
            params.update(api=rng.choice(apis), codes=[_DROP])
        elif kind == "broker-down":
            params.update(broker=rng.randrange(3), seconds=round(rng.uniform(2, 6), 1))
        elif kind == "heartbeat-retriable":
            params.update(
                api=_CONSUMER_GROUP_HEARTBEAT,
                codes=[rng.choice([15, 16]) for _ in range(rng.randint(1, 2))],
            )
        # The model of the slots.
        if kind in ("kill", "kill-late") and slot is not None:
            running.discard(slot)
            back_at[slot] = at + params["restart_after"]
            since.pop(slot)
        elif kind in ("zombie", "pause") and slot is not None:
            running.discard(slot)
            back_at[slot] = at + params["seconds"]
        elif kind == "scale-in" and slot is not None:
            running.discard(slot)
            since.pop(slot)
        elif kind == "scale-out" and slot is not None:
            running.add(slot)
            since[slot] = at
        out.append(Planned(at=round(at, 2), kind=kind, slot=slot, params=params))
    return out


# ---------------------------------------------------------------------- reporting


def report(f: Mapping[str, Any]) -> str:
    c: Copies = f["copies"]
    s = f["stats"]
    ev = f["evidence"]
    drain = "not drained" if f["drain_s"] is None else f"{f['drain_s']:.1f} s"
    lines = [
        f"== {f['row']} row, {f['impl']} loop: seed {f['seed']}, "
        f"{sum(f['applied'].values())} events applied, {f['wall_s']:.0f} s",
        f"   events applied: {_fmt_counts(f['applied'])}",
        f"   events skipped (target not running): {_fmt_counts(f['skipped'])}",
        f"   consequences: {_fmt_counts(f['consequences'])}; SIGKILLs inside the process "
        f"step (transaction open with records sent): {f['kills_in_batch']}",
        f"   slots used {f['slots_used']}, processes started {f['processes']}; how they "
        f"ended: {_fmt_counts(s['endings'])}",
        f"   input records: {c.inputs} in the log ({f['input_acked']} acknowledged, "
        f"{f['input_failed']} failed); repeated keys {c.repeated_keys}",
        f"   output records (read_committed): {c.outputs}; duplicates {len(c.duplicated)} "
        f"({c.extra_copies} extra copies; writers: {_fmt_counts(c.duplicate_writers)}); "
        f"missing {len(c.missing)}; naming no input {c.unknown}",
        f"   output read to its end: {f['output_read_to_end']}; time to drain after the "
        f"schedule: {drain}",
        f"   transactions (processes' stats): {_fmt_counts(s['totals'])}",
        f"   aborts by reason: {_fmt_counts(s['aborts'])}",
    ]
    if f["row"] == "classic":
        lines += [
            f"   proxy: TxnOffsetCommits {ev['txn_offset_commits']} (answers: "
            f"{_fmt_counts(ev['answers'])}); fenced by the proxy: "
            f"{_fmt_counts(ev['fenced_by_proxy'])}; sent without a generation "
            f"{ev['without_generation']}, below v3 {ev['below_v3']}",
            f"   proxy: transactions timed out {ev['timed_out_transactions']}; faults "
            f"applied by API {_fmt_counts({str(k): v for k, v in ev['faults_applied'].items()})}"
            f"; FindCoordinator requests {ev['find_coordinator_requests']} of "
            f"{ev['requests']}; failures {ev['failures'] or 'none'}",
        ]
    else:
        lines.append(f"   mock: TxnOffsetCommits received {ev['txn_offset_commits_at_mock']}")
    if f["stall"]:
        lines.append(
            f"   NOT DRAINED: stall probe {f['stall']} (a fresh consumer of the same group "
            "getting nothing while one of a new group gets partitions: the broker's group "
            "is stuck)"
        )
    for title, items in (("duplicate", c.duplicated), ("missing", c.missing)):
        if items:
            lines.append(f"   {title}: " + ", ".join(f"{p}:{o}" for p, o in items[:10]))
    lines.append(f"   ledgers in {f['out']}")
    return "\n".join(lines)


def side_by_side(results: Sequence[Mapping[str, Any]]) -> str:
    head = (
        f"{'row':<8} {'loop':<5} {'seed':>6} {'events':>6} {'records in':>10} "
        f"{'outputs':>8} {'dups':>5} {'missing':>7} {'aborts':>6} {'drain s':>8}"
    )
    rows = [head]
    for f in results:
        c: Copies = f["copies"]
        drain = "-" if f["drain_s"] is None else f"{f['drain_s']:.1f}"
        rows.append(
            f"{f['row']:<8} {f['impl']:<5} {f['seed']:>6} {sum(f['applied'].values()):>6} "
            f"{c.inputs:>10} {c.outputs:>8} {len(c.duplicated):>5} {len(c.missing):>7} "
            f"{sum(f['stats']['aborts'].values()):>6} {drain:>8}"
        )
    return "\n".join(rows)


def _iter_impls(impl: str) -> Iterator[str]:
    yield from ("coop", "raw") if impl == "both" else (impl,)


def main(argv: list[str] | None = None) -> int:
    """Run the exactly-once chaos schedule through one or both loops."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--broker",
        choices=["kafka", "tansu"],
        default="kafka",
        help="kafka: a 3-node Apache Kafka cluster and broker SIGKILLs (reliability/"
        "eos_kafka.py); tansu: Tansu behind the transactions proxy (classic row) or "
        "librdkafka's mock cluster (kip848 row) and the fault schedule above",
    )
    parser.add_argument(
        "--row",
        choices=["classic", "kip848", "both"],
        default=None,
        help="default: both on kafka (at the same time), classic on tansu",
    )
    parser.add_argument(
        "--impl",
        choices=["coop", "raw", "java", "both", "all"],
        default=None,
        help="both: coop and raw; all: coop, raw and java (kafka only); default: all on "
        "kafka, both on tansu",
    )
    parser.add_argument("--slots", type=int, default=2, help="kafka: processors per lane")
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="kafka: stop the kill schedule after this long (the report says so)",
    )
    parser.add_argument("--results", default="reliability/results", help="kafka: JSON and PNG")
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    parser.add_argument("--gap-s", type=float, default=2.5, help="mean time between events")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a CI-size run: 12 events, 5 s of warm-up",
    )
    parser.add_argument("--rate", type=float, default=40.0, help="input records per second")
    parser.add_argument("--initial-slots", type=int, default=3)
    parser.add_argument("--max-slots", type=int, default=5)
    parser.add_argument("--session-timeout-ms", type=int, default=6_000)
    parser.add_argument("--txn-timeout-ms", type=int, default=10_000)
    parser.add_argument("--commit-interval-ms", type=int, default=1000)
    parser.add_argument("--process-sleep-s", type=float, default=0.05)
    parser.add_argument("--warmup-s", type=float, default=8.0)
    parser.add_argument("--drain-s", type=float, default=180.0)
    parser.add_argument("--out", default=_OUT)
    parser.add_argument("--print-schedule", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.warmup_s = min(args.events, 12), min(args.warmup_s, 5.0)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1_000_000)
    if args.broker == "kafka":
        from reliability.eos_kafka import run_kafka

        args.row = args.row or "both"
        args.impl = args.impl or "all"
        rows = ["classic", "kip848"] if args.row == "both" else [args.row]
        impls = {"all": ["coop", "raw", "java"], "both": ["coop", "raw"]}.get(
            args.impl, [args.impl]
        )
        return run_kafka(args, rows, impls)
    args.row = args.row or "classic"
    args.impl = args.impl or "both"
    if args.row == "both" or args.impl in ("java", "all"):
        parser.error("--row both and the java loop run on --broker kafka only")
    # The kip848 row runs one processor (see the module docstring): plan for one.
    one = args.row == "kip848"
    schedule = plan(
        args.seed,
        args.events,
        row=args.row,
        initial_slots=1 if one else args.initial_slots,
        max_slots=1 if one else args.max_slots,
        min_running=1 if one else 2,
        gap_s=args.gap_s,
        session_s=args.session_timeout_ms / 1000,
        txn_timeout_s=args.txn_timeout_ms / 1000,
    )
    print(
        f"exactly-once chaos, {args.row} row, seed {args.seed}: {len(schedule)} events "
        f"({_fmt_counts(Counter(e.kind for e in schedule))}); load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}",
        flush=True,
    )
    if args.print_schedule:
        for event in schedule:
            print("  " + event.describe())
    results = []
    for impl in _iter_impls(args.impl):
        figures = _Run(args, impl, schedule).run()
        print(report(figures), flush=True)
        print(f"   load average now {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
        results.append(figures)
    print()
    print(side_by_side(results))
    print(
        f"replay: python -m reliability.eos_chaos --broker tansu --row {args.row} "
        f"--seed {args.seed} "
        f"--events {args.events} --gap-s {args.gap_s}"
    )
    bad = any(f["copies"].duplicated or f["copies"].missing for f in results if f["impl"] == "coop")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
