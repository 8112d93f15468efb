"""Benchmark: start-up cost of importing coopconsumer, in fresh processes.

    python benchmarks/import_time.py [--runs 5]

Each statement runs ``--runs`` times, each time in a new interpreter
(``python -c``), which times only the statement (wall: ``time.perf_counter``; CPU:
``time.process_time``, steadier on a loaded machine) and counts the modules it loaded.
Printed: min, median and max wall milliseconds, the median CPU milliseconds, and the
modules added, beside the load average. The statements are ``import coopconsumer``
(issue 31's figure), ``from coopconsumer import Consumer`` (what a process that builds
a consumer pays), and ``import confluent_kafka`` as the yardstick.

With ``PYTHONDONTWRITEBYTECODE`` set no ``.pyc`` is kept, so every run also compiles
the sources (a third of the consumer's import here); an installed wheel pays that once.
The first line says which case was measured.

Measures; asserts nothing (``tests/test_import_cost.py`` checks *which* modules the
import pulls in, never how long it takes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

STATEMENTS = (
    "import coopconsumer",
    "from coopconsumer import Consumer",
    "import confluent_kafka",
)

_PROBE = (
    "import sys, time\n"
    "before = len(sys.modules)\n"
    "t, c = time.perf_counter(), time.process_time()\n"
    "{statement}\n"
    "wall, cpu = time.perf_counter() - t, time.process_time() - c\n"
    "print(wall * 1000, cpu * 1000, len(sys.modules) - before)\n"
)


def measure(statement: str, runs: int) -> tuple[list[float], list[float], int]:
    """Wall and CPU milliseconds of ``runs`` fresh imports, and how many modules the
    last one added."""
    times: list[float] = []
    cpus: list[float] = []
    added = 0
    for run in range(runs + 1):  # the first is a warm-up (it may write the .pyc files)
        out = subprocess.run(
            [sys.executable, "-c", _PROBE.format(statement=statement)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        if run:
            times.append(float(out[0]))
            cpus.append(float(out[1]))
        added = int(out[2])
    return times, cpus, added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cache = "off: every run compiles" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    print(
        f"{args.runs} fresh processes each; bytecode cache {cache}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'statement':<36} {'min ms':>8} {'median':>8} {'max ms':>8} {'cpu ms':>8} {'modules':>8}"
    )
    for statement in STATEMENTS:
        times, cpus, added = measure(statement, args.runs)
        print(
            f"{statement:<36} {min(times):8.0f} {statistics.median(times):8.0f} "
            f"{max(times):8.0f} {statistics.median(cpus):8.0f} {added:8d}"
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
