"""One non-blocking TCP connection to one Kafka broker: a selector pump around a
``BrokerSession``.

The protocol (TLS, ApiVersions, SASL, KIP-368 re-authentication, framing, correlation
ids, pipelining, timeouts) is the sans-I/O session's (``coopconsumer._session``). This
module owns only the socket: name resolution and a non-blocking connect that tries
each resolved address, the selector interest, reading and writing without blocking,
and handing what the session decides back to ``PendingRequest`` futures. It is driven
by a ``selectors`` loop: either the shared one of ``KafkaClient`` (which calls
``handle_io`` and ``expire``) or, standalone, its own (``poll``).

Imports the standard library, ``_errors``, ``_protocol`` and ``_session``; nothing
consumer-specific (no group logic, no ``confluent_kafka``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import selectors
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any, Final

from .._errors import BrokerConnectionError
from .._protocol._schema import Request
from .._session import (
    DEFAULT_MAX_RESPONSE_BYTES,
    Answered,
    BrokerSession,
    BytesReceived,
    Closed,
    CloseRequested,
    Connected,
    ConnectionState,
    Failed,
    PeerClosed,
    SaslSource,
    SessionEvent,
    Tick,
    TransportFailed,
    choose_version,
)
from ._future import PendingRequest

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "BrokerConnection",
    "ConnectionState",
    "SaslSource",
    "choose_version",
]

log = logging.getLogger(__name__)

_READ_CHUNK: Final = 256 * 1024
#: Reads per readiness event. The selector reports the socket again if more is waiting;
#: returning lets timeouts and other connections run when a peer streams without pause.
_MAX_READS_PER_EVENT: Final = 64

_Future = PendingRequest[Any]


class BrokerConnection:
    """A single TCP connection to a broker, non-blocking and single-threaded.

    Construction starts a non-blocking connect; TLS, the ApiVersions handshake and
    SASL follow by themselves. ``send`` may be called in any state: requests queue until
    versions are known and fail with ``BrokerConnectionError`` if the connection closes
    first.

    Drive it either from a shared selector loop (pass ``selector`` and call
    ``handle_io(mask)`` for its socket, ``expire()`` after each wake-up, and
    ``run_callbacks()``), or standalone by passing no selector and calling ``poll``.

    ``ssl_context`` wraps the stream in TLS (SNI and hostname checks use ``host``);
    ``sasl`` authenticates after ApiVersions. ``connection_setup_timeout_ms`` covers all
    of it: TCP, TLS, ApiVersions and SASL.

    ``on_complete`` is told about every request that completes; the default (standalone)
    collects them and runs their callbacks at the end of ``poll``.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str = "coopconsumer",
        request_timeout_ms: float = 30_000,
        connection_setup_timeout_ms: float = 10_000,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        selector: selectors.BaseSelector | None = None,
        on_complete: Callable[[_Future], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        label: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslSource | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        #: Human-readable name used in every error: ``host:port (node N)``.
        self.broker = f"{host}:{port} ({label or f'node {node_id}'})"
        self._request_timeout_s = request_timeout_ms / 1000.0
        self._clock = clock
        self._owns_selector = selector is None
        self._selector: selectors.BaseSelector = selector or selectors.DefaultSelector()
        self._completed: list[_Future] = []
        self._on_complete = on_complete or self._completed.append
        now = self._clock()
        self._session: BrokerSession[_Future] = BrokerSession(
            broker=self.broker,
            now=now,
            client_id=client_id,
            request_timeout_s=self._request_timeout_s,
            setup_timeout_s=connection_setup_timeout_ms / 1000.0,
            max_response_bytes=max_response_bytes,
            ssl_context=ssl_context,
            server_hostname=host,
            sasl=sasl,
            rng=rng,
        )
        self._last_activity = now
        self._out = bytearray()
        self._registered_events = 0
        self._sock: socket.socket | None = None
        self._addresses: list[tuple[int, Any]] = []
        try:
            self._start_connect()
        except Exception as exc:  # resolution or socket setup; not KeyboardInterrupt
            self._feed(TransportFailed(error=exc, operation="connect"))

    # ------------------------------------------------------------------ the session's view

    @property
    def state(self) -> ConnectionState:
        """Where the connection is (``ConnectionState``)."""
        return self._session.state

    @property
    def close_error(self) -> BaseException | None:
        """Why the connection closed; None while open or after a deliberate close."""
        return self._session.close_error

    @property
    def was_ready(self) -> bool:
        """Whether the handshake ever completed (used for reconnect backoff resets)."""
        return self._session.was_ready

    @property
    def authentications(self) -> int:
        """SASL exchanges completed on this connection (1 + re-authentications)."""
        return self._session.authentications

    @property
    def session_lifetime_ms(self) -> int:
        """The broker's session lifetime from the last SaslAuthenticate (0: none)."""
        return self._session.session_lifetime_ms

    @property
    def in_flight_count(self) -> int:
        """Requests written and not yet answered (the handshake included)."""
        return self._session.in_flight_count

    @property
    def queued_count(self) -> int:
        """Requests waiting for the connection to become READY."""
        return self._session.queued_count

    @property
    def last_activity(self) -> float:
        """Monotonic time of the last byte sent or received."""
        return self._last_activity

    @property
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's ``{api_key: (min, max)}`` once READY (a copy)."""
        return dict(self._session.api_versions)

    @property
    def handshake_version(self) -> int:
        """The ApiVersions version the handshake used (or is trying)."""
        return self._session.handshake_version

    @property
    def reauthenticate_at(self) -> float | None:
        """Monotonic time of the next KIP-368 re-authentication, None if none is due."""
        return self._session.reauthenticate_at

    @property
    def _next_correlation_id(self) -> int:
        # The session's; a test winds it round to check the wrap-around.
        return self._session.next_correlation_id

    @_next_correlation_id.setter
    def _next_correlation_id(self, value: int) -> None:
        self._session.next_correlation_id = value

    def fileno(self) -> int:
        """The socket's file descriptor, -1 when closed."""
        return self._sock.fileno() if self._sock is not None else -1

    def negotiated_version(self, request_type: type[Request]) -> int:
        """The version this connection speaks for ``request_type``.

        Raises ``RuntimeError`` before READY and ``KafkaError`` UNSUPPORTED_VERSION when
        the two sides share no version of the API.
        """
        return self._session.negotiated_version(request_type)

    def next_deadline(self) -> float | None:
        """The earliest monotonic time at which ``expire`` has something to do."""
        return self._session.next_deadline()

    # ------------------------------------------------------------------ requests

    def send(
        self,
        request: Request,
        *,
        timeout_ms: float | None = None,
        api_version: int | None = None,
    ) -> _Future:
        """Queue ``request``; returns its ``PendingRequest`` (never raises for I/O).

        ``api_version`` pins the version (it must be within the negotiated range);
        by default the highest common version is used. The timeout (default: the
        connection's request timeout) runs from this call, queueing included.
        """
        timeout_s = self._request_timeout_s if timeout_ms is None else timeout_ms / 1000.0
        future: _Future = PendingRequest(
            request,
            node_id=self.node_id,
            broker=self.broker,
            deadline=self._clock() + timeout_s,
            api_version=api_version,
        )
        self.enqueue(future)
        return future

    def enqueue(self, future: _Future) -> None:
        """Take over an already created ``PendingRequest`` (used by ``KafkaClient``)."""
        self._apply(self._session.submit(future, self._clock()))
        self._update_interest()

    # ------------------------------------------------------------------ driving

    def handle_io(self, mask: int) -> None:
        """React to selector readiness ``mask`` (``EVENT_READ``/``EVENT_WRITE``)."""
        if self.state is ConnectionState.CLOSED:
            return
        try:
            if mask & selectors.EVENT_WRITE:
                if self.state is ConnectionState.CONNECTING:
                    self._finish_connect()
                self._flush()
            if mask & selectors.EVENT_READ and self._reading():
                # What the session wrote meanwhile goes out when the socket is writable.
                self._read()
        except OSError as exc:
            self._feed(TransportFailed(error=exc, operation="socket"))
        except Exception as exc:
            # A bug here must not wedge the caller's loop: the connection goes, every
            # outstanding request learns why, and the traceback is logged.
            log.exception("unexpected error on the connection to %s", self.broker)
            error = BrokerConnectionError(f"internal error: {exc!r}", broker=self.broker)
            error.__cause__ = exc
            self._abandon(error)
        self._update_interest()

    def expire(self, now: float | None = None) -> None:
        """Fail requests whose deadline passed (closing on a written one, as Java does),
        start a due re-authentication, enforce the setup timeout."""
        if self.state is ConnectionState.CLOSED:
            return
        self._feed(Tick(), self._clock() if now is None else now)
        self._update_interest()

    def poll(self, timeout_s: float) -> None:
        """Standalone driving: wait up to ``timeout_s`` for I/O, then expire and run
        callbacks. Only for a connection constructed without a shared selector."""
        if not self._owns_selector:
            raise RuntimeError("this connection is driven by its owner's selector loop")
        now = self._clock()
        deadline = self.next_deadline()
        wait = max(0.0, timeout_s)
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - now))
        if self._sock is not None and self._registered_events:
            for _key, mask in self._selector.select(wait):
                self.handle_io(mask)
        elif wait > 0 and self.state is not ConnectionState.CLOSED:
            time.sleep(wait)
        self.expire()
        self.run_callbacks()

    def run_callbacks(self) -> None:
        """Run done-callbacks of requests completed since the last call (standalone)."""
        while self._completed:
            batch = list(self._completed)
            self._completed.clear()
            for future in batch:
                future._run_callbacks()

    def close(self) -> None:
        """Close the socket; outstanding requests fail with ``BrokerConnectionError``.

        Idempotent. A standalone connection also closes its selector.
        """
        if self.state is not ConnectionState.CLOSED:
            self._feed(CloseRequested())
        if self._owns_selector:
            self.run_callbacks()
            self._selector.close()

    def __repr__(self) -> str:
        return f"<BrokerConnection {self.broker} {self.state.value}>"

    # ------------------------------------------------------------------ the session

    def _feed(self, event: object, now: float | None = None) -> None:
        """Hand ``event`` to the session and carry out what it decides."""
        self._apply(self._session.handle(event, self._clock() if now is None else now))

    def _apply(self, events: list[SessionEvent[_Future]]) -> None:
        for event in events:
            if isinstance(event, Answered):
                if event.ticket._set_result(event.response):
                    self._on_complete(event.ticket)
            elif isinstance(event, Failed):
                if event.ticket._set_exception(event.error):
                    self._on_complete(event.ticket)
            else:
                self._teardown(event)
        if self._sock is not None:
            self._out += self._session.data_to_send()

    def _abandon(self, error: BaseException) -> None:
        """Close with ``error`` after a bug, whatever state the session was left in."""
        try:
            self._feed(CloseRequested(error=error))
        except Exception:
            log.exception("the session of %s could not close cleanly", self.broker)
            self._teardown(Closed(error))

    def _teardown(self, closed: Closed) -> None:
        sock, self._sock = self._sock, None
        self._out.clear()
        if sock is None:
            return
        try:
            if self._registered_events:
                self._selector.unregister(sock)
        except (KeyError, ValueError, OSError):
            pass
        finally:
            self._registered_events = 0
            if closed.farewell:
                with contextlib.suppress(OSError):
                    sock.send(closed.farewell)
            sock.close()

    def _reading(self) -> bool:
        """Whether bytes may be read: connected and not closed."""
        return self.state not in (ConnectionState.CONNECTING, ConnectionState.CLOSED)

    # ------------------------------------------------------------------ connect

    def _start_connect(self) -> None:
        # Name resolution blocks (as in Java's client); everything after does not.
        infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        if not infos:
            raise OSError(f"cannot resolve {self.host}")
        self._addresses = [(family, address) for family, _t, _p, _c, address in infos]
        self._connect_next(None)

    def _connect_next(self, previous_error: OSError | None) -> None:
        """Try the next resolved address (``localhost`` may be ::1 and 127.0.0.1)."""
        while self._addresses:
            family, address = self._addresses.pop(0)
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                code = sock.connect_ex(address)
                if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
                    raise OSError(code, f"{os.strerror(code)} ({address[0]})")
                self._selector.register(sock, selectors.EVENT_WRITE, self)
            except OSError as exc:
                sock.close()
                previous_error = exc
                continue
            except BaseException:
                sock.close()
                raise
            self._sock = sock
            self._registered_events = selectors.EVENT_WRITE
            return
        raise previous_error or OSError(f"no address to connect to for {self.host}")

    def _finish_connect(self) -> None:
        assert self._sock is not None
        code = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code != 0:
            failed = OSError(code, os.strerror(code))
            sock, self._sock = self._sock, None
            self._registered_events = 0
            try:
                self._selector.unregister(sock)
            finally:
                sock.close()
            try:
                self._connect_next(failed)
            except OSError as exc:
                self._feed(TransportFailed(error=exc, operation="connect"))
            return
        self._addresses.clear()
        self._last_activity = self._clock()
        self._feed(Connected())

    # ------------------------------------------------------------------ bytes

    def _flush(self) -> None:
        sock = self._sock
        while self._out and sock is not None:
            try:
                sent = sock.send(self._out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._feed(TransportFailed(error=exc, operation="send", unread=self._unread()))
                return
            if sent == 0:
                return
            del self._out[:sent]
            self._last_activity = self._clock()

    def _unread(self) -> bytes:
        """What can still be read after a failed send (see ``TransportFailed``)."""
        assert self._sock is not None
        try:
            return self._sock.recv(_READ_CHUNK)
        except OSError:
            return b""

    def _read(self) -> None:
        for _ in range(_MAX_READS_PER_EVENT):
            sock = self._sock
            if sock is None:
                return
            try:
                chunk = sock.recv(_READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._feed(TransportFailed(error=exc, operation="receive"))
                return
            if not chunk:
                self._feed(PeerClosed())
                return
            self._last_activity = self._clock()
            self._feed(BytesReceived(chunk))
            if len(chunk) < _READ_CHUNK:
                return

    def _update_interest(self) -> None:
        if self._sock is None:
            return
        if self.state is ConnectionState.CONNECTING:
            wanted = selectors.EVENT_WRITE
        else:
            wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if self._out else 0)
        if wanted != self._registered_events:
            self._selector.modify(self._sock, wanted, self)
            self._registered_events = wanted
