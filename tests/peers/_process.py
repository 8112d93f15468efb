"""A reference peer (Java or franz-go, tests/peers/) as a member of a ledger-checked group.

``PeerProcess`` starts the peer's process and reads its JSON lines on a thread, feeding
the same ``OwnershipLedger`` and ``RecordAccounting`` as the in-process members of
``integration._ledger``: assigned / revoked / lost go to the ledger and are then
acknowledged on the peer's stdin (the peer's listener returns only after that, so the
ledger sees a revocation before the coordinator can give the partitions to anyone
else), records to the ledger's ownership check and the accounting, commits to the
accounting's monotonic check. It has the interface ``LedgerGroup`` and ``wait_for``
expect of a member (``name``, ``error``, ``start``, ``stop``, ``commit_failures``).

Test helper only.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any

from coopconsumer import TopicPartition
from integration._ledger import OwnershipLedger, RecordAccounting

__all__ = ["PeerProcess", "run_referee"]


def _tps(items: Sequence[Sequence[Any]]) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(str(t), int(p)) for t, p, *_ in items)


class PeerProcess:
    """One peer process in a group; ``kind`` is ``"java"`` or ``"go"`` (for reports)."""

    def __init__(
        self,
        name: str,
        kind: str,
        argv: Sequence[str],
        ledger: OwnershipLedger,
        accounting: RecordAccounting | None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.argv = list(argv)
        self.ledger = ledger
        self.accounting = accounting
        self.error: BaseException | None = None
        self.commit_failures: list[str] = []
        self.member_ids: set[str] = set()
        self.generations: list[int] = []
        #: Every Assignment the Java peer's PeerAssignor decoded: (generation,
        #: partitions, user data bytes).
        self.decoded: list[tuple[int, frozenset[TopicPartition], bytes]] = []
        self.events: list[dict[str, Any]] = []
        #: The group's member ids at each of this peer's leader turns.
        self.led_groups: list[tuple[str, ...]] = []
        self.last_record_at: dict[TopicPartition, float] = {}
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=300)
        self._lock = threading.Lock()
        self._paused = threading.Event()
        self._started = threading.Event()
        self._expected_exit = False
        #: What the ledger forgot when this peer stalled (``forget_stalled``): the
        #: coordinator gave it away; the peer's later lost/revoked call for it is kept
        #: in ``events`` but not fed to the ledger.
        self._stalled: frozenset[TopicPartition] = frozenset()
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._err_reader: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        self._proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, name=f"{self.name}-out", daemon=True)
        self._err_reader = threading.Thread(
            target=self._read_err, name=f"{self.name}-err", daemon=True
        )
        self._reader.start()
        self._err_reader.start()

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout_s: float = 60.0) -> None:
        """Leave the group gracefully (the peer commits, revokes, leaves) and exit."""
        if not self.alive:
            self._drain()
            return
        self._expected_exit = True
        self._send("leave")
        self._wait_exit(timeout_s, "leave the group and exit")

    def kill(self) -> frozenset[TopicPartition]:
        """SIGKILL the peer; once its last lines are read, the ledger forgets what it
        owned (returned): the coordinator gives it away after the session timeout."""
        assert self._proc is not None
        self._expected_exit = True
        self._proc.kill()
        self._proc.wait(30)
        self._drain()
        return self.ledger.forget(self.name)

    def pause_polling(self, timeout_s: float = 30.0) -> None:
        """Make the peer stop polling after its current batch, and wait until it has."""
        self._paused.clear()
        self._send("pause")
        if not self._paused.wait(timeout_s):
            raise AssertionError(f"{self.name} did not pause within {timeout_s} s")

    def resume_polling(self) -> None:
        self._send("resume")

    def freeze(self) -> None:
        """SIGSTOP: the whole process stops, heartbeats included."""
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def forget_stalled(self) -> frozenset[TopicPartition]:
        """The peer is frozen past its session timeout: the ledger forgets what it owned
        (the coordinator hands it on); returns it."""
        self._stalled = self.ledger.forget(self.name)
        return self._stalled

    def wait_event(self, kind: str, after: int, timeout_s: float = 60.0) -> dict[str, Any]:
        """The first event of ``kind`` at index ``after`` or later of ``events``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for event in self.events[after:]:
                if event["event"] == kind:
                    return event
            if self.error is not None:
                raise AssertionError(f"{self.name} failed: {self.error}")
            time.sleep(0.05)
        raise AssertionError(f"{self.name}: no {kind} event within {timeout_s} s")

    def _wait_exit(self, timeout_s: float, what: str) -> None:
        assert self._proc is not None
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(30)
            self._set_error(f"did not {what} within {timeout_s} s")
        self._drain()
        if self._proc.returncode != 0:
            self._set_error(f"exited with {self._proc.returncode}")

    def _drain(self) -> None:
        for thread in (self._reader, self._err_reader):
            if thread is not None:
                thread.join(30)

    def _send(self, line: str) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            return
        try:
            with self._lock:
                proc.stdin.write(line + "\n")
                proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the process is gone; its reader reports why

    def _set_error(self, message: str) -> None:
        if self.error is None:
            tail = "\n".join(list(self.stderr_tail)[-40:])
            self.error = AssertionError(f"{self.name} ({self.kind}): {message}\nstderr:\n{tail}")

    def led(self) -> list[tuple[str, ...]]:
        """The group's member ids each time this peer ran the assignment."""
        return list(self.led_groups)

    # --- reading ------------------------------------------------------------------

    def _read_err(self) -> None:
        assert self._proc is not None
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self.stderr_tail.append(line.rstrip())

    def _read(self) -> None:
        assert self._proc is not None
        assert self._proc.stdout is not None
        try:
            for line in self._proc.stdout:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                self._handle(json.loads(line))
        except BaseException as exc:  # kept for the test to assert on
            if self.error is None:
                self.error = exc
        finally:
            code = self._proc.wait()
            if not self._expected_exit:
                self._set_error(f"exited unexpectedly with {code}")

    def _handle(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind != "record":
            self.events.append(event)
        if kind == "record":
            tp = TopicPartition(event["topic"], event["partition"])
            self.ledger.record_received(self.name, tp)
            if self.accounting is not None:
                self.accounting.consumed(self.name, event["key"].encode(), tp, int(event["offset"]))
            self.last_record_at[tp] = time.monotonic()
        elif kind in ("assigned", "revoked", "lost"):
            tps = _tps(event["partitions"])
            if kind != "assigned" and self._stalled:
                gone = self._stalled - self.ledger.owned_by(self.name)
                self._stalled -= tps
                tps -= gone
            if kind == "assigned":
                self.ledger.assigned(self.name, tps)
            elif kind == "revoked":
                self.ledger.revoked(self.name, tps)
            else:
                self.ledger.lost(self.name, tps)
            self._send(f"ack {event['seq']}")
        elif kind == "committed":
            if self.accounting is not None:
                self.accounting.committed(
                    self.name, {TopicPartition(t, p): o for t, p, o in event["offsets"]}
                )
        elif kind == "commit_failed":
            self.commit_failures.append(f"{event['why']}: {event['message']}")
        elif kind == "group":
            if event["member_id"]:
                self.member_ids.add(event["member_id"])
            self.generations.append(int(event["generation"]))
        elif kind == "assignor_assignment":
            self.decoded.append(
                (
                    int(event["generation"]),
                    _tps(event["partitions"]),
                    bytes.fromhex(event["user_data"]),
                )
            )
        elif kind == "led":
            self.led_groups.append(tuple(sorted(event["members"])))
        elif kind == "paused":
            self._paused.set()
        elif kind == "started":
            self._started.set()
        elif kind == "error":
            self._set_error(str(event["message"]))


def run_referee(argv: Sequence[str], timeout_s: float = 120.0) -> dict[str, Any]:
    """Run the Java peer's ``referee`` (a ``read_committed`` reader of whole topics) and
    return its summary: ``records``, ``distinct``, ``duplicates``, ``duplicate_keys``,
    ``gaps``, ``missing`` (numbered keys absent), ``ends`` (last stable offsets)."""
    done = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
    )
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            summary: dict[str, Any] = json.loads(line)
            if summary.get("event") == "referee":
                return summary
    raise AssertionError(
        f"the referee printed no summary (exit {done.returncode}):\n{done.stdout[-2000:]}\n"
        f"{done.stderr[-4000:]}"
    )
