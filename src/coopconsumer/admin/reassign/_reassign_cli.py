"""``coopconsumer reassign plan|execute|status|verify|list|cancel|rollback``
(docs/admin.md, "Reassigning partitions").

Thin: parses options, calls the plan generators and the executor, prints tables and
a progress bar. Errors print one line to stderr and exit 1; bad options exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs

from ..._errors import CoopConsumerError
from ..._types import TopicPartition
from .._admin_cli import _bytes, _client, _common, format_table
from .._admin_client import AdminClient
from .._admin_types import AdminOperationError, PartitionReassignment
from ._executor import ExecutorConfig, ExecutorCore, MoveState, Progress
from ._plan import (
    PlanError,
    ReassignmentPlan,
    check_brokers_known,
    plan_add_brokers,
    plan_balance_disks,
    plan_move_off,
    plan_rebalance,
)
from ._reassign_driver import (
    ReassignmentExecutor,
    executor_running,
    load_state,
    partition_sizes,
    request_cancel,
)

__all__ = ["format_progress", "run_reassign"]

_BAR = 30


def format_progress(progress: Progress) -> str:
    """``[#####.....] 1000/2000 done, 50 in flight, 950 queued; 1.9 GiB of 3.7 GiB``."""
    share = progress.finished / progress.total if progress.total else 1.0
    filled = int(share * _BAR)
    bar = "#" * filled + "." * (_BAR - filled)
    extra = []
    for state in (MoveState.CANCELLED, MoveState.FAILED, MoveState.CONFLICT):
        if progress.counts.get(state):
            extra.append(f", {progress.counts[state]} {state.value}")
    return (
        f"[{bar}] {progress.done}/{progress.total} done, {progress.in_flight} in flight, "
        f"{progress.queued} queued{''.join(extra)}; "
        f"{_bytes(progress.bytes_done)} of {_bytes(progress.bytes_total)} moved"
        f" ({progress.phase.value})"
    )


def _status_table(core: ExecutorCore, detail: bool) -> str:
    progress = core.progress()
    rows: list[Sequence[object]] = [
        (state.value, progress.counts.get(state, 0)) for state in MoveState
    ]
    text = format_table(("STATE", "PARTITIONS"), rows)
    if detail:
        moves = [
            (
                m.topic,
                m.partition,
                state.value,
                m.original_replicas,
                core.target_of(m.tp),
                _bytes(m.bytes_to_move),
                core.election_of(m.tp),
                error,
            )
            for m, state, error in core.moves()
            if state is not MoveState.DONE
        ]
        text += "\n\n" + format_table(
            ("TOPIC", "PARTITION", "STATE", "ORIGINAL", "TARGET", "TO COPY", "ELECTION", "ERROR"),
            moves,
        )
    return text


def _partitions(items: Sequence[str]) -> list[TopicPartition]:
    out = []
    for item in items:
        topic, sep, partition = item.rpartition(":")
        if not sep or not topic or not partition.isdigit():
            raise CoopConsumerError(f"--partition expects topic:partition, got {item!r}")
        out.append(TopicPartition(topic, int(partition)))
    return out


def _brokers(text: str) -> list[int]:
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise CoopConsumerError(f"expected broker ids like 1,2,3, got {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coopconsumer reassign", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)

    plan = sub.add_parser("plan", help="write a plan from a goal")
    _common(plan)
    goal = plan.add_mutually_exclusive_group(required=True)
    goal.add_argument("--move-off", metavar="IDS", help="move every replica off these brokers")
    goal.add_argument("--add-brokers", metavar="IDS", help="fill these (new) brokers")
    goal.add_argument("--rebalance", action="store_true", help="place afresh with the assignor")
    goal.add_argument(
        "--balance-disks", action="store_true", help="even out each broker's log dirs (JBOD)"
    )
    plan.add_argument("--topic", action="append", default=[], help="only this topic (repeat)")
    plan.add_argument("--replica-assignor", help="kraft, zookeeper, balanced, or module:Class")
    plan.add_argument("--output", metavar="FILE", help="write the plan here (default: stdout)")

    execute = sub.add_parser("execute", help="run a plan (or resume one)")
    _common(execute)
    execute.add_argument("--plan", metavar="FILE", help="the plan; omit to resume --state")
    execute.add_argument("--state", metavar="FILE", required=True, help="progress file")
    execute.add_argument("--max-partitions", type=int, help="window (default 50)")
    execute.add_argument("--max-bytes", type=int, help="bytes to copy in flight at most")
    execute.add_argument(
        "--max-moves-per-broker", type=int, metavar="N", help="moves into or out of one broker"
    )
    throttle = execute.add_mutually_exclusive_group()
    throttle.add_argument("--throttle", type=int, metavar="BYTES_PER_S", help="per broker")
    throttle.add_argument(
        "--no-throttle", action="store_true", help="on resume: remove the throttle"
    )
    execute.add_argument(
        "--elect-preferred-leaders",
        action="store_true",
        default=None,
        help="elect the preferred leader of each moved partition that has another one",
    )
    execute.add_argument(
        "--override",
        action="store_true",
        default=None,
        help="take over partitions another tool is moving (default: leave them alone)",
    )
    execute.add_argument("--poll-interval", type=float, default=1.0, metavar="SECONDS")

    status = sub.add_parser("status", help="progress of a plan (reads --state only)")
    status.add_argument("--state", metavar="FILE", required=True)
    status.add_argument("--partitions", action="store_true", help="list unfinished partitions")

    verify = sub.add_parser(
        "verify", help="compare what the cluster shows with what a plan or state expects"
    )
    _common(verify)
    source = verify.add_mutually_exclusive_group(required=True)
    source.add_argument("--plan", metavar="FILE")
    source.add_argument("--state", metavar="FILE")

    listing = sub.add_parser("list", help="the reassignments in flight on the cluster")
    _common(listing)
    listing.add_argument("--state", metavar="FILE", help="mark the ones this executor runs")
    listing.add_argument("--topic", action="append", default=[], help="only this topic (repeat)")

    cancel = sub.add_parser("cancel", help="cancel some or all moves")
    cancel.add_argument("--state", metavar="FILE", required=True)
    cancel.add_argument(
        "--partition", action="append", default=[], metavar="TOPIC:P", help="(repeat; none: all)"
    )
    cancel.add_argument("--bootstrap-server", help="needed when no executor is running")
    cancel.add_argument("--command-config", metavar="FILE")

    rollback = sub.add_parser("rollback", help="write the plan that takes finished moves back")
    rollback.add_argument("--state", metavar="FILE", required=True)
    rollback.add_argument("--output", metavar="FILE", help="default: stdout")
    return parser


def run_reassign(argv: Sequence[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``coopconsumer reassign ...``; returns the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    args = _parser().parse_args(list(argv))
    try:
        return _ACTIONS[args.action](args, out)
    except AdminOperationError as exc:
        for item, error in exc.errors.items():
            print(f"error: {item}: {error}", file=err)
        return 1
    except CoopConsumerError as exc:
        print(f"error: {exc}", file=err)
        return 1


def _write(text: str, output: str | None, out: TextIO) -> None:
    if output:
        Path(output).write_text(text)
    else:
        out.write(text)


def _moving(
    admin: AdminClient, topics: Sequence[str] | None = None
) -> dict[TopicPartition, PartitionReassignment]:
    moving = admin.list_partition_reassignments()
    return {tp: r for tp, r in moving.items() if not topics or tp.topic in topics}


def _plan(args: argparse.Namespace, out: TextIO) -> int:
    topics = args.topic or None
    with _client(args) as admin:
        view = admin.cluster_view()
        sizes = partition_sizes(admin)
        moving = _moving(admin, topics)
        if args.move_off:
            leaving = _brokers(args.move_off)
            check_brokers_known(view, leaving)
            plan = plan_move_off(
                view,
                leaving,
                admin.replica_assignor,
                sizes=sizes,
                topics=topics,
                skip=moving,
                principal=admin.principal,
            )
        elif args.add_brokers:
            plan = plan_add_brokers(
                view, _brokers(args.add_brokers), sizes=sizes, topics=topics, skip=moving
            )
        elif args.balance_disks:
            plan = plan_balance_disks(view, admin.describe_log_dirs(), topics=topics, skip=moving)
        else:
            plan = plan_rebalance(
                view,
                admin.replica_assignor,
                sizes=sizes,
                topics=topics,
                skip=moving,
                principal=admin.principal,
            )
    _write(plan.to_json(), args.output, out)
    if moving:
        named = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(moving)[:10])
        more = f" and {len(moving) - 10} more" if len(moving) > 10 else ""
        print(
            f"left out {len(moving)} partition(s) another tool is moving: {named}{more}",
            file=out if args.output else sys.stderr,
        )
    if args.output:
        print(
            f"{len(plan)} partition(s) to move, {_bytes(plan.total_bytes)} to copy "
            f"({plan.description}); written to {args.output}",
            file=out,
        )
    return 0


def _config_from(args: argparse.Namespace, base: ExecutorConfig) -> ExecutorConfig:
    """``base`` with the options given on the command line."""
    changes: dict[str, Any] = {}
    for option, field in (
        ("max_partitions", "max_partitions"),
        ("max_bytes", "max_bytes"),
        ("max_moves_per_broker", "max_moves_per_broker"),
        ("throttle", "throttle_bytes_per_s"),
        ("elect_preferred_leaders", "elect_preferred_leaders"),
        ("override", "override"),
    ):
        value = getattr(args, option)
        if value is not None:
            changes[field] = value
    if args.no_throttle:
        changes["throttle_bytes_per_s"] = None
    return attrs.evolve(base, **changes)


def _describe_change(old: ExecutorConfig, new: ExecutorConfig) -> str:
    parts = []
    for field in attrs.fields(ExecutorConfig):
        before, after = getattr(old, field.name), getattr(new, field.name)
        if before != after:
            parts.append(f"{field.name} {before} -> {after}")
    return ", ".join(parts)


def _execute(args: argparse.Namespace, out: TextIO) -> int:
    state = Path(args.state)
    with _client(args) as admin:
        poll = float(args.poll_interval)
        if args.plan:
            try:
                plan = ReassignmentPlan.from_json(Path(args.plan).read_text())
            except OSError as exc:
                raise PlanError(f"cannot read --plan {args.plan}: {exc}") from None
            if state.exists():
                if load_state(state).plan != plan:
                    raise CoopConsumerError(
                        f"{state} holds another plan; omit --plan to resume it, or pick "
                        "another --state"
                    )
                executor = ReassignmentExecutor.resume(admin, state, poll_interval_s=poll)
            else:
                config = _config_from(args, ExecutorConfig())
                executor = ReassignmentExecutor.create(
                    admin, plan, config, state_path=state, poll_interval_s=poll
                )
        else:
            executor = ReassignmentExecutor.resume(admin, state, poll_interval_s=poll)
        wanted = _config_from(args, executor.core.config)
        if wanted != executor.core.config:
            print(f"resuming with {_describe_change(executor.core.config, wanted)}", file=out)
            executor.change_config(wanted)
        last: list[str] = []

        def show(p: Progress) -> None:
            line = format_progress(p)
            if line not in last[-1:]:  # only when something changed
                last.append(line)
                print(line, file=out, flush=True)

        progress = executor.run(on_progress=show)
        print(_status_table(executor.core, detail=False), file=out)
        for move, state_of, error in executor.core.moves():
            if state_of in (MoveState.CONFLICT, MoveState.FAILED):
                print(f"{state_of.value}: {move.topic}-{move.partition}: {error}", file=out)
    unfinished = progress.counts.get(MoveState.FAILED, 0) + progress.counts.get(
        MoveState.CONFLICT, 0
    )
    return 1 if unfinished else 0


def _status(args: argparse.Namespace, out: TextIO) -> int:
    core = load_state(args.state)
    running = executor_running(args.state)
    print(format_progress(core.progress()), file=out)
    print(f"executor: {'running' if running else 'not running'}", file=out)
    print(_status_table(core, detail=args.partitions), file=out)
    return 0


def _expectations(
    args: argparse.Namespace,
) -> tuple[ReassignmentPlan, ExecutorCore | None]:
    if args.plan:
        try:
            return ReassignmentPlan.from_json(Path(args.plan).read_text()), None
        except OSError as exc:
            raise PlanError(f"cannot read --plan {args.plan}: {exc}") from None
    core = load_state(args.state)
    return core.plan, core


def verify_rows(
    plan: ReassignmentPlan,
    core: ExecutorCore | None,
    current: Mapping[TopicPartition, tuple[int, ...]],
    moving: Mapping[TopicPartition, PartitionReassignment],
) -> list[tuple[object, ...]]:
    """One row per planned partition: what the plan (or the executor) expects, what
    the cluster shows, and the verdict."""
    rows: list[tuple[object, ...]] = []
    for m in plan.moves:
        target = core.target_of(m.tp) if core is not None else m.replicas
        original = core.original_of(m.tp) if core is not None else m.original_replicas
        replicas = current.get(m.tp)
        move = moving.get(m.tp)
        if replicas is None:
            verdict = "missing"
        elif move is not None:
            same = set(move.target) == set(target)
            verdict = "in flight" if same else f"moved by another tool to {list(move.target)}"
        elif set(replicas) == set(target):
            verdict = "done"
        elif set(replicas) == set(original):
            verdict = "not started"
        else:
            verdict = "elsewhere"
        row: tuple[object, ...] = (
            m.topic,
            m.partition,
            target,
            move.replicas if move else replicas,
            move.adding if move else None,
            move.removing if move else None,
            verdict,
        )
        if core is not None:
            row += (core.state_of(m.tp).value,)
        rows.append(row)
    return rows


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    plan, core = _expectations(args)
    with _client(args) as admin:
        moving = admin.list_partition_reassignments()  # before Metadata: see observe()
        topics = sorted({m.topic for m in plan.moves})
        try:
            described = admin.describe_topics(topics)
        except AdminOperationError as exc:
            described = dict(exc.completed or {})
    current = {
        TopicPartition(name, p.partition): p.replicas
        for name, t in described.items()
        for p in t.partitions
    }
    rows = verify_rows(plan, core, current, moving)
    headers: tuple[str, ...] = (
        "TOPIC",
        "PARTITION",
        "EXPECTED",
        "CLUSTER",
        "ADDING",
        "REMOVING",
        "STATUS",
    )
    if core is not None:
        headers += ("EXECUTOR",)
    print(format_table(headers, rows), file=out)
    verdicts: dict[str, int] = {}
    for row in rows:
        key = str(row[6]).split(" to ")[0]
        verdicts[key] = verdicts.get(key, 0) + 1
    print(", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())), file=out)
    return 0 if set(verdicts) <= {"done"} else 1


def _list(args: argparse.Namespace, out: TextIO) -> int:
    core = load_state(args.state) if args.state else None
    with _client(args) as admin:
        if args.topic:
            # A mistyped --topic would list nothing and look like "nothing moving".
            admin.describe_topics(args.topic)
        moving = _moving(admin, args.topic or None)
    rows = []
    ours = 0
    for tp, r in sorted(moving.items()):
        row: tuple[object, ...] = (tp.topic, tp.partition, r.replicas, r.adding, r.removing)
        if core is not None:
            mine = (
                tp in core.plan.by_partition()
                and core.state_of(tp) in (MoveState.SUBMITTING, MoveState.IN_FLIGHT)
                and set(r.target) == set(core.target_of(tp))
            ) or (tp in core.plan.by_partition() and core.state_of(tp) is MoveState.CANCELLING)
            ours += mine
            row += ("this executor" if mine else "another tool",)
        rows.append(row)
    headers: tuple[str, ...] = ("TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING")
    if core is not None:
        headers += ("BY",)
    print(format_table(headers, rows), file=out)
    summary = f"{len(rows)} reassignment(s) in flight"
    if core is not None:
        summary += f": {ours} by this executor, {len(rows) - ours} by another tool"
    print(summary, file=out)
    return 0


def _cancel(args: argparse.Namespace, out: TextIO) -> int:
    partitions = _partitions(args.partition) or None
    if partitions is not None:
        planned = load_state(args.state).plan.by_partition()
        foreign = sorted(tp for tp in partitions if tp not in planned)
        if foreign:
            raise CoopConsumerError(
                f"not in the plan of {args.state}: "
                f"{', '.join(f'{tp.topic}:{tp.partition}' for tp in foreign)}; nothing cancelled"
            )
    what = "every unfinished move" if partitions is None else f"{len(partitions)} partition(s)"
    if executor_running(args.state):
        request_cancel(args.state, partitions)
        print(f"asked the running executor to cancel {what}", file=out)
        return 0
    if not args.bootstrap_server:
        raise CoopConsumerError("no executor is running: give --bootstrap-server to cancel")
    with _client(args) as admin:
        executor = ReassignmentExecutor.resume(admin, args.state)
        executor.cancel(partitions)
        if partitions is None:
            # Nothing queued is left: run to the end (reverts confirmed, throttles removed).
            executor.run()
        print(f"cancelled {what}", file=out)
        print(format_progress(executor.core.progress()), file=out)
    return 0


def _rollback(args: argparse.Namespace, out: TextIO) -> int:
    plan = load_state(args.state).rollback_plan()
    _write(plan.to_json(), args.output, out)
    if args.output:
        print(f"{len(plan)} finished move(s) to take back; written to {args.output}", file=out)
    return 0


_ACTIONS = {
    "plan": _plan,
    "execute": _execute,
    "status": _status,
    "verify": _verify,
    "list": _list,
    "cancel": _cancel,
    "rollback": _rollback,
}
