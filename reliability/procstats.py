"""Resource figures of a process from /proc (Linux): RSS, CPU time, threads, open fds.
See reliability/README.md."""

from __future__ import annotations

import os

import attrs

__all__ = ["ProcSample", "sample"]

_TICKS = os.sysconf("SC_CLK_TCK")


@attrs.frozen(kw_only=True)
class ProcSample:
    """One reading of a process; ``cpu_s`` is user + system time since it started."""

    pid: int
    rss_mb: float
    cpu_s: float
    threads: int
    fds: int


def sample(pid: int) -> ProcSample | None:
    """Read ``pid``'s figures; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # Fields after the parenthesized command name; utime and stime are 14 and 15.
            fields = f.read().rsplit(")", 1)[1].split()
        cpu_s = (int(fields[11]) + int(fields[12])) / _TICKS
        rss_kb = threads = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss_kb = int(line.split()[1])
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None
    return ProcSample(pid=pid, rss_mb=rss_kb / 1024, cpu_s=cpu_s, threads=threads, fds=fds)
