"""The demo's report: the side-by-side table, the ASCII timeline and the PNG picture.

Pure functions of a ``ScenarioResult`` (no clock, no I/O except writing the PNG file
asked for). matplotlib is optional and imported only by :func:`write_png`.
"""

from __future__ import annotations

import importlib
import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from ._run import ScenarioResult

__all__ = ["ROWS", "Summary", "ascii_timeline", "format_table", "summarize", "write_png"]


@attrs.frozen(kw_only=True)
class Summary:
    """The figures of one run, as shown in the table."""

    label: str
    strategy: str
    #: Distinct group generations the members were assigned in.
    rebalances: int
    #: Mean over every member's rebalances (``rebalance-latency-total / rebalance-total``).
    rebalance_latency_avg_ms: float
    #: Largest ``rebalance-latency-max`` any member reported.
    rebalance_latency_max_ms: float
    #: Partitions passed to ``on_partitions_revoked``/``lost`` before the final shutdown.
    partitions_revoked: int
    #: Longest gap between two records of one partition processed by the same member.
    longest_kept_pause_s: float
    #: Where that gap was: (member, partition).
    longest_kept_pause_at: tuple[str, int] | None
    records_processed: int
    duplicates: int
    lost: int
    failed_rebalances: int
    duration_s: float


def summarize(result: ScenarioResult) -> Summary:
    """Compute the table's figures from what the run recorded."""
    recorder = result.recorder
    before_teardown = [e for e in recorder.events if e.at < result.teardown_at]
    generations = {e.generation for e in before_teardown if e.kind == "assigned"}
    revoked = sum(len(e.partitions) for e in before_teardown if e.kind in ("revoked", "lost"))

    by_partition: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for at, member, partition, _seq in recorder.processed:
        if at <= result.teardown_at:
            by_partition[partition].append((at, member))
    longest = 0.0
    longest_at: tuple[str, int] | None = None
    for partition, seen in by_partition.items():
        seen.sort()
        for (t1, m1), (t2, m2) in itertools.pairwise(seen):
            if m1 == m2 and t2 - t1 > longest:
                longest = t2 - t1
                longest_at = (m1, partition)

    total = sum(m.rebalance_total for m in result.members)
    latency_total = sum(m.rebalance_latency_total_ms for m in result.members)
    maxima = [m.rebalance_latency_max_ms for m in result.members]
    maxima = [x for x in maxima if not math.isnan(x)]
    seqs = [seq for _at, _member, _partition, seq in recorder.processed]
    return Summary(
        label=result.label,
        strategy=result.strategy,
        rebalances=len(generations),
        rebalance_latency_avg_ms=latency_total / total if total else math.nan,
        rebalance_latency_max_ms=max(maxima) if maxima else math.nan,
        partitions_revoked=revoked,
        longest_kept_pause_s=longest,
        longest_kept_pause_at=longest_at,
        records_processed=len(seqs),
        duplicates=len(seqs) - len(set(seqs)),
        lost=len(result.produced - set(seqs)),
        failed_rebalances=int(sum(m.failed_rebalance_total for m in result.members)),
        duration_s=result.duration_s,
    )


#: Table rows: label and how to read the value from a Summary.
ROWS: tuple[tuple[str, str], ...] = (
    ("rebalances (group generations)", "rebalances"),
    ("rebalance latency avg (ms)", "rebalance_latency_avg_ms"),
    ("rebalance latency max (ms)", "rebalance_latency_max_ms"),
    ("partitions revoked", "partitions_revoked"),
    ("longest pause of kept partitions (s)", "longest_kept_pause_s"),
    ("records processed", "records_processed"),
    ("duplicates", "duplicates"),
    ("records lost", "lost"),
)


def _show(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:.2f}" if value < 100 else f"{value:.0f}"
    return str(value)


def format_table(summaries: Sequence[Summary]) -> str:
    """The side-by-side table, one column per run."""
    width = max(len(label) for label, _ in ROWS)
    heads = [f"{s.strategy} ({s.label})" for s in summaries]
    cols = [max(len(h), 12) for h in heads]
    lines = [" " * width + "  " + "  ".join(h.rjust(c) for h, c in zip(heads, cols, strict=True))]
    lines.append("-" * len(lines[0]))
    for label, attr in ROWS:
        cells = [_show(getattr(s, attr)).rjust(c) for s, c in zip(summaries, cols, strict=True)]
        lines.append(label.ljust(width) + "  " + "  ".join(cells))
    return "\n".join(lines)


_GAP = "."
_HANDOVER = "*"


def ascii_timeline(result: ScenarioResult, columns: int = 64) -> str:
    """One row per partition, one column per time slice: the number of the member that
    processed its records in that slice, ``.`` when nobody did (a pause), ``*`` when two
    members did (a hand-over). Phase changes are marked above."""
    recorder = result.recorder
    start, end = recorder.start, result.teardown_at
    span = max(end - start, 1e-6)
    step = span / columns

    def column(at: float) -> int:
        return min(columns - 1, max(0, int((at - start) / step)))

    cells: dict[tuple[int, int], set[str]] = defaultdict(set)
    for at, member, partition, _seq in recorder.processed:
        if at <= end:
            cells[(partition, column(at))].add(member.rsplit("-", 1)[-1])
    marks = [" "] * columns
    legend = []
    for index, (at, label) in enumerate(recorder.phases):
        marks[column(at)] = chr(ord("A") + index)
        legend.append(f"{chr(ord('A') + index)}={label}")
    lines = [
        f"{result.strategy}: partition ownership over {span:.1f} s "
        f"(digit = member processing it, '{_GAP}' = paused, '{_HANDOVER}' = hand-over)",
        "      " + "".join(marks) + "   " + ", ".join(legend),
    ]
    for partition in range(recorder.partitions):
        row = []
        for col in range(columns):
            who = cells.get((partition, col))
            row.append(_GAP if not who else (next(iter(who)) if len(who) == 1 else _HANDOVER))
        lines.append(f"  p{partition:<2} " + "".join(row))
    return "\n".join(lines)


#: Records closer than this are drawn as one bar (librdkafka delivers in fetch batches).
_MERGE_GAP_S = 0.6


def write_png(results: Sequence[ScenarioResult], path: Path) -> bool:
    """Draw partition ownership over time for each run into ``path``.

    Returns False (and writes nothing) when matplotlib is not installed.
    """
    try:
        # Optional and untyped here: imported by name so that the demo runs without it.
        matplotlib: Any = importlib.import_module("matplotlib")
        matplotlib.use("Agg")  # no display needed
        plt: Any = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        return False
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    figure, axes = plt.subplots(len(results), 1, figsize=(12, 3.2 * len(results)), squeeze=False)
    for ax, result in zip(axes[:, 0], results, strict=True):
        recorder = result.recorder
        members = sorted({member for _at, member, _p, _s in recorder.processed})
        intervals: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
        for at, member, partition, _seq in sorted(recorder.processed):
            if at > result.teardown_at:
                continue
            t = at - recorder.start
            spans = intervals[(partition, member)]
            if spans and t - spans[-1][1] <= _MERGE_GAP_S:
                spans[-1] = (spans[-1][0], t)
            else:
                spans.append((t, t))
        for (partition, member), spans in intervals.items():
            color = colors[members.index(member) % len(colors)]
            ax.broken_barh(
                [(a, max(b - a, 0.05)) for a, b in spans], (partition - 0.4, 0.8), color=color
            )
        for at, label in recorder.phases:
            x = at - recorder.start
            ax.axvline(x, color="grey", linestyle="--", linewidth=0.8)
            ax.text(x, recorder.partitions - 0.3, f" {label}", fontsize=8, va="bottom")
        ax.set_title(f"{result.strategy} ({result.label}): partition ownership; gaps are pauses")
        ax.set_ylabel("partition")
        ax.set_yticks(range(recorder.partitions))
        ax.set_ylim(-0.6, recorder.partitions + 0.6)
        handles = [
            plt.Rectangle((0, 0), 1, 1, color=colors[i % len(colors)]) for i in range(len(members))
        ]
        ax.legend(handles, members, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    axes[-1, 0].set_xlabel("seconds")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True
