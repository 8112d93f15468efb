"""Print the figures in a results directory as Markdown tables, for docs/benchmarks.md.

    python benchmarks/results_md.py [--results-dir benchmarks/results]

Reads the JSON files the broker benchmarks write (``rebalance.json``, ``throughput.json``,
``exactly_once.json``, ``idle_cpu.json``, ``aio_throughput.json``) and prints, for each
one present, its command, load averages and a table of medians with their smallest and
largest (``median (min-max)``). Measures nothing itself; every number comes from a file.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import RESULTS_DIR


def _fmt(spread: dict[str, Any], spec: str = "{:,.0f}") -> str:
    if not spread or not spread.get("n"):
        return "n/a"
    if spread["n"] == 1:
        return spec.format(spread["median"])
    return (
        f"{spec.format(spread['median'])} "
        f"({spec.format(spread['min'])}-{spec.format(spread['max'])})"
    )


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _header(data: dict[str, Any]) -> str:
    m = data["machine"]
    return (
        f"Command: `{data['command']}` (finished {data['finished_utc']}). Load average "
        f"{data['load_average_start']} at start, {data['load_average_end']} at end; "
        f"{m['nproc']} CPUs, {m['ram_gib']} GiB RAM, Kafka {m['kafka']}, Python "
        f"{m['python']}, confluent-kafka {m['confluent_kafka']} (librdkafka "
        f"{m['librdkafka']})."
    )


def rebalance(data: dict[str, Any]) -> str:
    metrics = [
        ("join_owned_s", "join: all owned"),
        ("leave_owned_s", "leave: all owned"),
        ("join_moved_s", "join: moved pause"),
        ("join_kept_s", "join: kept pause"),
        ("leave_moved_s", "leave: moved pause"),
    ]
    rows = []
    for row in data["rows"]:
        verdict = row.get("verdict") or {}
        behind = [label for m, label in metrics if str(verdict.get(m, "")).startswith("behind")]
        if not verdict:
            status = "baseline"
        elif behind:
            status = "behind on " + ", ".join(
                f"{label} ({verdict[m].split(' ', 2)[1]} ms"
                + (", under one record interval)" if "interval" in verdict[m] else ")")
                for m, label in metrics
                if label in behind
            )
        else:
            status = "meets every column"
        rows.append(
            [
                row["protocol"],
                str(row["N"]),
                row["implementation"],
                str(row["join_owned_s"]["n"]),
                *(_fmt(row[m]) for m, _label in metrics),
                status,
            ]
        )
    return _table(
        [
            "protocol",
            "N",
            "implementation",
            "rounds",
            *(f"{lbl} ms" for _m, lbl in metrics),
            "target",
        ],
        rows,
    )


def throughput(data: dict[str, Any]) -> str:
    return _table(
        ["side", "records/s", "records/CPU-s"],
        [
            [
                "raw confluent-kafka",
                _fmt(data["raw_records_per_s"]),
                _fmt(data["raw_records_per_cpu_s"]),
            ],
            [
                "coopconsumer",
                _fmt(data["coop_records_per_s"]),
                _fmt(data["coop_records_per_cpu_s"]),
            ],
            [
                "**ratio per round**",
                _fmt(data["ratio_records_per_s"], "{:.2f}x"),
                _fmt(data["ratio_records_per_cpu_s"], "{:.2f}x"),
            ],
        ],
    )


def exactly_once(data: dict[str, Any]) -> str:
    loops = list(data["records_per_s"])
    table = _table(
        ["loop", "records/s", "records/CPU-s"],
        [[n, _fmt(data["records_per_s"][n]), _fmt(data["records_per_cpu_s"][n])] for n in loops],
    )
    ratios = _table(
        ["ratio (per round)", "median (min-max)"],
        [[label, _fmt(s, "{:.2f}x")] for label, s in data["ratios"].items()],
    )
    return table + "\n\n" + ratios


def idle_cpu(data: dict[str, Any]) -> str:
    shares = data["percent_of_a_core"]
    return _table(
        ["member", "% of a core while idle"],
        [[side, _fmt(s, "{:.3f}")] for side, s in shares.items()]
        + [["**coopconsumer / confluent-kafka**", _fmt(data["ratio"], "{:.2f}x")]],
    )


def aio_throughput(data: dict[str, Any]) -> str:
    sides = list(data["records_per_s"])
    table = _table(
        ["side", "records/s", "records/CPU-s", "idle % of a core"],
        [
            [
                s,
                _fmt(data["records_per_s"][s]),
                _fmt(data["records_per_cpu_s"][s]),
                f"{data['idle_percent_of_a_core'][s]:.2f}",
            ]
            for s in sides
        ],
    )
    ratios = _table(
        ["ratio (per round)", "median (min-max)"],
        [[label, _fmt(s, "{:.2f}x")] for label, s in data["ratios"].items()],
    )
    return table + "\n\n" + ratios


RENDERERS = {
    "rebalance": rebalance,
    "throughput": throughput,
    "exactly_once": exactly_once,
    "idle_cpu": idle_cpu,
    "aio_throughput": aio_throughput,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    for name, render in RENDERERS.items():
        path = args.results_dir / f"{name}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        print(f"### {name}\n\n{_header(data)}\n\n{render(data)}\n")


if __name__ == "__main__":
    main()
