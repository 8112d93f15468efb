"""The consume job's control channel: members report to the driver, the driver says stop.

A consume job's members run inside Spark tasks; Spark itself gives a running task no
way to talk to the driver (accumulators arrive only when a task ends). So the driver
listens on a TCP port (:class:`ControlServer`, one thread per member connection) and
every member connects to it (:class:`ControlClient`): it says hello, then sends its
statistics every few seconds between batches, and the driver answers hello, and later
pushes, ``{"stop": true}`` once the job is asked to stop. Messages are JSON lines;
the first line of a connection carries a secret token that only the job's tasks know.

:class:`ReportBoard` (the driver's view of every member attempt) and the line codec
are pure; the server and the client are the thin I/O around them. Imports nothing from
pyspark; see docs/spark.md ("The long-running job").
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import select
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

__all__ = [
    "ControlAddress",
    "ControlClient",
    "ControlServer",
    "MemberState",
    "ReportBoard",
    "decode_line",
    "encode_line",
]

log = logging.getLogger("coopconsumer.spark")

#: Where a member attempt stands, as the driver sees it: sending reports, finished
#: (its last report said so), or gone (its connection closed without a last report:
#: the task failed or its executor was lost).
MemberState = Literal["running", "finished", "gone"]

#: Longest line accepted; a report is a few hundred bytes.
_MAX_LINE: Final = 1 << 20
#: How long a member waits between attempts to reach an unreachable driver.
_RECONNECT_S: Final = 5.0
_CONNECT_TIMEOUT_S: Final = 5.0


def encode_line(message: Mapping[str, Any]) -> bytes:
    """One message as a JSON line."""
    return json.dumps(message, separators=(",", ":"), allow_nan=True).encode() + b"\n"


def decode_line(line: bytes) -> dict[str, Any]:
    """A JSON line as a message; ``ValueError`` for anything but a JSON object."""
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError(f"not a message: {line[:80]!r}")
    return message


@attrs.frozen(kw_only=True)
class ControlAddress:
    """What a member needs to reach the driver; pickled into the tasks."""

    host: str
    port: int
    token: str


@attrs.frozen(kw_only=True)
class MemberReport:
    """The last statistics of one member attempt, with its state and arrival time
    (``time.time()`` on the driver)."""

    member: int
    attempt: int
    state: MemberState
    stats: dict[str, Any]
    received_at: float


class ReportBoard:
    """The driver's view of every member attempt of one job: the last report of each
    and whether it is running, finished or gone. Thread-safe; pure otherwise."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reports: dict[tuple[int, int], MemberReport] = {}

    def hello(self, member: int, attempt: int, now: float) -> None:
        with self._lock:
            self._reports.setdefault(
                (member, attempt),
                MemberReport(
                    member=member, attempt=attempt, state="running", stats={}, received_at=now
                ),
            )

    def report(
        self, member: int, attempt: int, stats: dict[str, Any], *, final: bool, now: float
    ) -> None:
        with self._lock:
            self._reports[(member, attempt)] = MemberReport(
                member=member,
                attempt=attempt,
                state="finished" if final else "running",
                stats=dict(stats),
                received_at=now,
            )

    def gone(self, member: int, attempt: int) -> None:
        """The connection of ``(member, attempt)`` closed: gone unless it finished."""
        with self._lock:
            report = self._reports.get((member, attempt))
            if report is not None and report.state == "running":
                self._reports[(member, attempt)] = attrs.evolve(report, state="gone")

    def reports(self) -> list[MemberReport]:
        """Every member attempt seen, by member and attempt."""
        with self._lock:
            return [self._reports[key] for key in sorted(self._reports)]


class ControlServer:
    """The driver's end: accepts member connections on ``host`` (port 0: any free
    one; members connect to ``advertised_host``, default ``host``), records their
    reports on :attr:`board` and tells them to stop after :meth:`request_stop`.
    :meth:`close` stops listening and hangs up."""

    def __init__(
        self, host: str, port: int, token: str, *, advertised_host: str | None = None
    ) -> None:
        self.board = ReportBoard()
        self._token = token
        self._stop = threading.Event()
        self._closed = threading.Event()
        self._listener = socket.create_server((host, port))
        self._listener.settimeout(0.2)
        self.address = ControlAddress(
            host=advertised_host or host, port=int(self._listener.getsockname()[1]), token=token
        )
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._accept, name="coopconsumer-spark-control", daemon=True
        )
        self._thread.start()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def request_stop(self) -> None:
        """Tell every member, connected now or later, to stop."""
        self._stop.set()

    def close(self) -> None:
        """Stop accepting, close every connection; idempotent."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.close()
        self._thread.join(2.0)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            with self._lock:
                self._connections.add(connection)
            threading.Thread(
                target=self._serve,
                args=(connection,),
                name="coopconsumer-spark-member",
                daemon=True,
            ).start()

    def _serve(self, connection: socket.socket) -> None:
        who: tuple[int, int] | None = None
        stop_sent = False
        try:
            connection.settimeout(0.2)
            reader = _LineReader(connection)
            while not self._closed.is_set():
                if who is not None and not stop_sent and self._stop.is_set():
                    connection.sendall(encode_line({"stop": True}))
                    stop_sent = True
                try:
                    line = reader.next_line()
                except TimeoutError:
                    continue
                if line is None:
                    return
                message = decode_line(line)
                if who is None:
                    who = self._hello(message)
                    if who is None:
                        return
                    stop_sent = self._stop.is_set()
                    connection.sendall(encode_line({"stop": stop_sent}))
                elif "report" in message:
                    self.board.report(
                        who[0],
                        who[1],
                        dict(message["report"]),
                        final=bool(message.get("final")),
                        now=time.time(),
                    )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.debug("consume job control: connection of member %s ended: %s", who, exc)
        finally:
            if who is not None:
                self.board.gone(*who)
            with self._lock:
                self._connections.discard(connection)
            with contextlib.suppress(OSError):
                connection.close()

    def _hello(self, message: Mapping[str, Any]) -> tuple[int, int] | None:
        hello = message.get("hello")
        if not isinstance(hello, dict) or not hmac.compare_digest(
            str(hello.get("token", "")), self._token
        ):
            log.warning("consume job control: refused a connection without the job's token")
            return None
        member, attempt = int(hello["member"]), int(hello["attempt"])
        self.board.hello(member, attempt, time.time())
        return member, attempt


class _LineReader:
    """Lines from a socket with a timeout (``TimeoutError`` when none is complete)."""

    def __init__(self, connection: socket.socket) -> None:
        self._connection = connection
        self._buffer = b""

    def next_line(self) -> bytes | None:
        """The next line, ``None`` at EOF."""
        while b"\n" not in self._buffer:
            chunk = self._connection.recv(65536)
            if not chunk:
                return None
            self._buffer += chunk
            if len(self._buffer) > _MAX_LINE:
                raise ValueError("line too long")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def has_line(self) -> bool:
        return b"\n" in self._buffer

    def feed_available(self) -> bool:
        """Read what has arrived without blocking; False at EOF."""
        while select.select([self._connection], [], [], 0)[0]:
            chunk = self._connection.recv(65536)
            if not chunk:
                return False
            self._buffer += chunk
            if len(self._buffer) > _MAX_LINE:
                raise ValueError("line too long")
        return True


class ControlClient:
    """A member's end. Never blocks the member for long and never fails it: while the
    driver cannot be reached the member keeps consuming and retries every few seconds.

    :attr:`stop_requested` turns true when the driver says stop, or when an
    established connection is closed by the driver (the job is over or the driver is
    gone)."""

    def __init__(self, address: ControlAddress, member: int, attempt: int) -> None:
        self._address = address
        self._member = member
        self._attempt = attempt
        self._socket: socket.socket | None = None
        self._reader: _LineReader | None = None
        self._next_attempt = 0.0
        self.stop_requested = False

    def _connect(self) -> bool:
        now = time.monotonic()
        if self._socket is not None:
            return True
        if now < self._next_attempt:
            return False
        self._next_attempt = now + _RECONNECT_S
        try:
            sock = socket.create_connection(
                (self._address.host, self._address.port), timeout=_CONNECT_TIMEOUT_S
            )
            hello = {
                "token": self._address.token,
                "member": self._member,
                "attempt": self._attempt,
            }
            sock.sendall(encode_line({"hello": hello}))
            reader = _LineReader(sock)
            answer = reader.next_line()
            if answer is None:
                raise ConnectionError("the driver hung up")
        except OSError as exc:
            log.warning(
                "member %d: cannot reach the job's driver at %s:%d (%s); consuming on",
                self._member,
                self._address.host,
                self._address.port,
                exc,
            )
            return False
        sock.settimeout(_CONNECT_TIMEOUT_S)
        self._socket, self._reader = sock, reader
        self._handle(decode_line(answer))
        return True

    def _handle(self, message: Mapping[str, Any]) -> None:
        if message.get("stop"):
            self.stop_requested = True

    def poll(self) -> bool:
        """Read what the driver sent; return :attr:`stop_requested`."""
        if not self._connect():
            return self.stop_requested
        assert self._reader is not None
        try:
            alive = self._reader.feed_available()
            while self._reader.has_line():
                line = self._reader.next_line()
                if line is not None:
                    self._handle(decode_line(line))
        except (OSError, ValueError) as exc:
            log.warning("member %d: control connection failed: %s", self._member, exc)
            self._drop()
            return self.stop_requested
        if not alive:
            self.stop_requested = True  # the driver closed the connection
            self._drop()
        return self.stop_requested

    def report(self, stats: Mapping[str, Any], *, final: bool = False) -> None:
        """Send ``stats``; a failure is logged and the connection retried later."""
        if not self._connect():
            return
        assert self._socket is not None
        try:
            self._socket.sendall(encode_line({"report": dict(stats), "final": final}))
        except OSError as exc:
            log.warning("member %d: report to the driver failed: %s", self._member, exc)
            self._drop()

    def _drop(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.close()
        self._socket = self._reader = None

    def close(self) -> None:
        self._drop()
