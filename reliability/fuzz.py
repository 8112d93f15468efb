"""Coverage-guided fuzzing of every decoder a broker or a group peer can reach (atheris).

    python -m reliability.fuzz                      # every family, 1,000,000 inputs each
    python -m reliability.fuzz --runs 20000 sasl    # one family, a quick look

Each family runs in its own process under libFuzzer (atheris instruments coopconsumer's
modules for edge coverage), starting from a seed corpus of valid encodings. A fault is
an exception outside the family's typed errors or a broken invariant (see
``reliability/fuzz_targets.py``); the first input of each distinct fault is written to
``--out`` with its traceback and the run goes on, so the table counts them. A hang
(one input over ``--timeout`` seconds) or a memory blow-up (RSS over ``--rss-limit-mb``)
ends the family's run and is counted too. Before fuzzing, every seed is replayed with
each 16/32-bit window set to a 2 GiB length and every position given a 5-byte varint;
the largest allocation one such input causes (tracemalloc) is printed.

Needs the ``reliability`` extra (``pip install -e '.[reliability]'``). See
reliability/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["main"]

_ROOT = Path(__file__).resolve().parent.parent


def _signature(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "coopconsumer" in f.filename or "reliability" in f.filename]
    where = ours[-1] if ours else (frames[-1] if frames else None)
    place = f"{Path(where.filename).name}:{where.lineno}" if where is not None else "?"
    return f"{type(exc).__name__}@{place}"


def _child(family_name: str, runs: int, out: Path, args: argparse.Namespace) -> None:
    import atheris

    with atheris.instrument_imports(include=["coopconsumer", "reliability"]):
        from reliability import fuzz_targets

    import logging
    import tracemalloc

    # The assignors log a peer's malformed user data; millions of inputs would flood.
    logging.getLogger("coopconsumer").setLevel(logging.CRITICAL)
    family = fuzz_targets.FAMILIES[family_name]
    allowed = family.allowed
    faults: dict[str, int] = {}
    stats_path = out / f"{family_name}.json"

    # Memory: the inputs that declare gigantic lengths, one by one under tracemalloc.
    seeds = family.seeds()
    tracemalloc.start()
    worst, worst_input, probes = 0, b"", 0
    for seed in seeds:
        for data in fuzz_targets.giant_length_inputs(seed):
            probes += 1
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            try:
                family.run(data)
            except allowed:
                pass
            except Exception as exc:
                _record(family_name, out, faults, exc, data)
            peak = tracemalloc.get_traced_memory()[1] - base
            if peak > worst:
                worst, worst_input = peak, data
    tracemalloc.stop()

    def write_stats() -> None:
        stats_path.write_text(
            json.dumps(
                {
                    "giant_probes": probes,
                    "giant_peak_bytes": worst,
                    "giant_worst_input": worst_input[:64].hex(),
                    "faults": faults,
                }
            )
        )

    write_stats()
    corpus = Path(tempfile.mkdtemp(prefix=f"fuzz-{family_name}-"))
    for index, seed in enumerate(seeds):
        (corpus / f"seed-{index:04d}").write_bytes(seed)

    def one_input(data: bytes) -> None:
        try:
            family.run(data)
        except allowed:
            pass
        except Exception as exc:
            if _record(family_name, out, faults, exc, data):
                write_stats()

    argv = [
        sys.argv[0],
        f"-runs={runs}",
        f"-timeout={args.timeout}",
        f"-rss_limit_mb={args.rss_limit_mb}",
        f"-max_len={args.max_len}",
        f"-seed={args.seed}",
        "-print_final_stats=1",
        f"-artifact_prefix={out}/{family_name}-",
        str(corpus),
    ]
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


def _record(
    family: str, out: Path, faults: dict[str, int], exc: BaseException, data: bytes
) -> bool:
    """Count a fault; write its first input and traceback. True when it is new."""
    signature = _signature(exc)
    faults[signature] = faults.get(signature, 0) + 1
    if faults[signature] > 1:
        return False
    stem = out / f"{family}-fault-{len(faults)}"
    stem.with_suffix(".bin").write_bytes(data)
    stem.with_suffix(".txt").write_text(
        f"{signature}\n{data[:200]!r}\n\n" + "".join(traceback.format_exception(exc))
    )
    print(f"FAULT {family}: {signature} -> {stem}.bin", file=sys.stderr, flush=True)
    return True


def _run_family(name: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    log_path = out / f"{name}.log"
    cmd = [sys.executable, "-m", "reliability.fuzz", "--child", name, "--out", str(out)]
    cmd += ["--runs", str(args.runs), "--timeout", str(args.timeout)]
    cmd += ["--rss-limit-mb", str(args.rss_limit_mb), "--max-len", str(args.max_len)]
    cmd += ["--seed", str(args.seed)]
    started = time.monotonic()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=_ROOT)
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    stats_file = out / f"{name}.json"
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}

    def last(pattern: str) -> int:
        found = re.findall(pattern, text)
        return int(found[-1]) if found else -1

    executed = last(r"stat::number_of_executed_units:\s+(\d+)")
    if executed < 0:
        executed = last(r"#(\d+)\s")
    crashes = []
    if "ERROR: libFuzzer: timeout" in text:
        crashes.append("hang")
    if "ERROR: libFuzzer: out-of-memory" in text:
        crashes.append("out-of-memory")
    if proc.returncode not in (0,) and not crashes:
        crashes.append(f"exit {proc.returncode}")
    return {
        "family": name,
        "inputs": executed,
        "seconds": elapsed,
        "exec_per_s": last(r"stat::average_exec_per_sec:\s+(\d+)"),
        "edges": last(r"cov: (\d+)"),
        "features": last(r"ft: (\d+)"),
        "corpus": last(r"corp: (\d+)"),
        "faults": sum(1 for _ in stats.get("faults", {})),
        "fault_inputs": sum(stats.get("faults", {}).values()),
        "fault_kinds": sorted(stats.get("faults", {})),
        "crashes": crashes,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "giant_probes": stats.get("giant_probes", 0),
        "giant_peak_kib": stats.get("giant_peak_bytes", 0) / 1024,
        "log": str(log_path),
    }


def _table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    head = (
        f"{'family':<18} {'inputs':>10} {'exec/s':>7} {'edges':>6} {'ft':>6} {'corp':>5} "
        f"{'faults':>6} {'hang/oom':>8} {'RSS MB':>7} {'2GiB-len probes':>15} {'max alloc KiB':>13}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['family']:<18} {r['inputs']:>10,} {r['exec_per_s']:>7,} {r['edges']:>6} "
            f"{r['features']:>6} {r['corpus']:>5} {r['faults']:>6} "
            f"{','.join(r['crashes']) or '0':>8} {r['peak_rss_mb']:>7.0f} "
            f"{r['giant_probes']:>15,} {r['giant_peak_kib']:>13.1f}"
        )
    lines.append(
        f"libFuzzer seed {args.seed}, -timeout={args.timeout}s, -rss_limit_mb="
        f"{args.rss_limit_mb}, -max_len={args.max_len}; artifacts in {args.out}"
    )
    for r in rows:
        for kind in r["fault_kinds"]:
            lines.append(f"  fault in {r['family']}: {kind}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the campaign (or, with ``--child``, one family under atheris)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("families", nargs="*", default=[], help="default: every family")
    parser.add_argument("--runs", type=int, default=1_000_000, help="inputs per family")
    parser.add_argument("--timeout", type=int, default=20, help="seconds one input may take")
    parser.add_argument("--rss-limit-mb", type=int, default=1024)
    parser.add_argument("--max-len", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1, help="libFuzzer's -seed, to replay")
    parser.add_argument("--out", default=str(_ROOT / "reliability" / "fuzz-out"))
    parser.add_argument(
        "--replay",
        metavar="FILE",
        help="run FAMILY's target on one saved input and show what it raises (no atheris needed)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.child:
        # Before anything imports coopconsumer: atheris instruments it on import.
        _child(args.child, args.runs, out, args)
        return 0
    from reliability.fuzz_targets import FAMILIES

    unknown = set(args.families) - set(FAMILIES)
    if unknown:
        parser.error(f"unknown families {sorted(unknown)}; known: {', '.join(FAMILIES)}")
    if args.replay:
        if len(args.families) != 1:
            parser.error("--replay needs exactly one family")
        family = FAMILIES[args.families[0]]
        try:
            family.run(Path(args.replay).read_bytes())
        except family.allowed as exc:
            print(f"typed error, as allowed: {type(exc).__name__}: {exc}")
            return 0
        print("no error")
        return 0
    rows = []
    for name in args.families or list(FAMILIES):
        print(f"fuzzing {name}: {FAMILIES[name].what} ...", flush=True)
        rows.append(_run_family(name, args, out))
        print(_table(rows[-1:], args).splitlines()[2], flush=True)
    print()
    print(_table(rows, args))
    return 1 if any(r["faults"] or r["crashes"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
