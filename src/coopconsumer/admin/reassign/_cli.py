"""``coopconsumer reassign plan|execute|status|cancel|rollback`` (docs/admin.md,
"Reassigning partitions").

Thin: parses options, calls the plan generators and the executor, prints tables and
a progress bar. Errors print one line to stderr and exit 1; bad options exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ..._errors import CoopConsumerError
from ..._types import TopicPartition
from .._cli import _bytes, _client, _common, format_table
from ._driver import (
    ReassignmentExecutor,
    executor_running,
    load_state,
    partition_sizes,
    request_cancel,
)
from ._executor import ExecutorConfig, ExecutorCore, MoveState, Progress
from ._plan import (
    PlanError,
    ReassignmentPlan,
    plan_add_brokers,
    plan_move_off,
    plan_rebalance,
)

__all__ = ["format_progress", "run_reassign"]

_BAR = 30


def format_progress(progress: Progress) -> str:
    """``[#####.....] 1000/2000 done, 50 in flight, 950 queued; 1.9 GiB of 3.7 GiB``."""
    share = progress.finished / progress.total if progress.total else 1.0
    filled = int(share * _BAR)
    bar = "#" * filled + "." * (_BAR - filled)
    extra = []
    for state in (MoveState.CANCELLED, MoveState.FAILED):
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
                m.replicas,
                _bytes(m.bytes_to_move),
                error,
            )
            for m, state, error in core.moves()
            if state is not MoveState.DONE
        ]
        text += "\n\n" + format_table(
            ("TOPIC", "PARTITION", "STATE", "ORIGINAL", "TARGET", "TO COPY", "ERROR"), moves
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
    plan.add_argument("--topic", action="append", default=[], help="only this topic (repeat)")
    plan.add_argument("--replica-assignor", help="default, balanced, or module:Class")
    plan.add_argument("--output", metavar="FILE", help="write the plan here (default: stdout)")

    execute = sub.add_parser("execute", help="run a plan (or resume one)")
    _common(execute)
    execute.add_argument("--plan", metavar="FILE", help="the plan; omit to resume --state")
    execute.add_argument("--state", metavar="FILE", required=True, help="progress file")
    execute.add_argument("--max-partitions", type=int, default=50, help="window (default 50)")
    execute.add_argument("--max-bytes", type=int, help="bytes to copy in flight at most")
    execute.add_argument("--throttle", type=int, metavar="BYTES_PER_S", help="per broker")
    execute.add_argument("--poll-interval", type=float, default=1.0, metavar="SECONDS")

    status = sub.add_parser("status", help="progress of a plan (reads --state only)")
    status.add_argument("--state", metavar="FILE", required=True)
    status.add_argument("--partitions", action="store_true", help="list unfinished partitions")

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
    except CoopConsumerError as exc:
        print(f"error: {exc}", file=err)
        return 1


def _write(text: str, output: str | None, out: TextIO) -> None:
    if output:
        Path(output).write_text(text)
    else:
        out.write(text)


def _plan(args: argparse.Namespace, out: TextIO) -> int:
    topics = args.topic or None
    with _client(args) as admin:
        view = admin.cluster_view()
        sizes = partition_sizes(admin)
        if args.move_off:
            plan = plan_move_off(
                view, _brokers(args.move_off), admin.replica_assignor, sizes=sizes, topics=topics
            )
        elif args.add_brokers:
            plan = plan_add_brokers(view, _brokers(args.add_brokers), sizes=sizes, topics=topics)
        else:
            plan = plan_rebalance(view, admin.replica_assignor, sizes=sizes, topics=topics)
    _write(plan.to_json(), args.output, out)
    if args.output:
        print(
            f"{len(plan)} partition(s) to move, {_bytes(plan.total_bytes)} to copy "
            f"({plan.description}); written to {args.output}",
            file=out,
        )
    return 0


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
                config = ExecutorConfig(
                    max_partitions=args.max_partitions,
                    max_bytes=args.max_bytes,
                    throttle_bytes_per_s=args.throttle,
                )
                executor = ReassignmentExecutor.create(
                    admin, plan, config, state_path=state, poll_interval_s=poll
                )
        else:
            executor = ReassignmentExecutor.resume(admin, state, poll_interval_s=poll)
        last: list[str] = []

        def show(p: Progress) -> None:
            line = format_progress(p)
            if line not in last[-1:]:  # only when something changed
                last.append(line)
                print(line, file=out, flush=True)

        progress = executor.run(on_progress=show)
        print(_status_table(executor.core, detail=False), file=out)
    failed = progress.counts.get(MoveState.FAILED, 0)
    return 1 if failed else 0


def _status(args: argparse.Namespace, out: TextIO) -> int:
    core = load_state(args.state)
    running = executor_running(args.state)
    print(format_progress(core.progress()), file=out)
    print(f"executor: {'running' if running else 'not running'}", file=out)
    print(_status_table(core, detail=args.partitions), file=out)
    return 0


def _cancel(args: argparse.Namespace, out: TextIO) -> int:
    partitions = _partitions(args.partition) or None
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
    "cancel": _cancel,
    "rollback": _rollback,
}
