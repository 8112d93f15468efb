"""Subprocess entry point that runs one command and kills it when stdin closes.

Used for native brokers (Tansu) that know nothing about the test process: the test
process keeps this supervisor's stdin open, so if it dies for any reason (even SIGKILL)
the pipe closes, the supervisor stops the broker, and nothing is orphaned.

On stop the broker gets SIGTERM, then SIGKILL after ``--grace-s`` seconds (default
0.2): Tansu's graceful shutdown waits seconds for clients to hang up, and a memory-only
test broker has nothing worth saving.

Protocol: the first stdout line is ``{"pid": <broker pid>}``; the broker's own stdout and
stderr go to this process's stderr. The supervisor exits with the broker's exit status
when the broker exits on its own. Standard library only: it is run by path, without
coopconsumer on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

__all__ = ["main"]

_DEFAULT_GRACE_S = 0.2


def _exit_with_child(child: subprocess.Popen[bytes], stopping: threading.Event) -> None:
    code = child.wait()
    sys.stderr.flush()
    if stopping.is_set():
        os._exit(0)
    # The broker died on its own: leave at once so the parent notices (os._exit
    # because the main thread is blocked reading stdin).
    os._exit(code if code >= 0 else 128 - code)


def main(argv: list[str] | None = None) -> int:
    """Run ``[--grace-s S] CMD [ARGS...]`` until stdin closes."""
    command = sys.argv[1:] if argv is None else list(argv)
    grace_s = _DEFAULT_GRACE_S
    if command[:1] == ["--grace-s"] and len(command) >= 2:
        grace_s = float(command[1])
        command = command[2:]
    if not command:
        sys.stderr.write(
            "usage: python -m coopconsumer.testing._supervisor [--grace-s S] CMD [ARGS...]\n"
        )
        return 2
    child = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), stderr=sys.stderr.fileno()
    )
    sys.stdout.write(json.dumps({"pid": child.pid}) + "\n")
    sys.stdout.flush()
    stopping = threading.Event()
    threading.Thread(target=_exit_with_child, args=(child, stopping), daemon=True).start()
    # Block until the parent closes the pipe (normal stop) or dies (pipe closed by the
    # kernel); anything it writes is ignored.
    while sys.stdin.buffer.read(4096):
        pass
    stopping.set()
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(grace_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
