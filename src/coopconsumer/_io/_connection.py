"""One non-blocking TCP connection to one Kafka broker.

Owns the socket, the 4-byte size framing, correlation ids, the table of in-flight
requests (pipelined, matched by correlation id), per-request timeouts and the ApiVersions
handshake that fixes which version of each API the connection speaks. It is driven by a
``selectors`` loop: either the shared one of ``KafkaClient`` (which calls ``handle_io``
and ``expire``) or, standalone, its own (``poll``).

Security, in Java's order: the TLS handshake right after TCP connect (non-blocking:
``SSLWantRead``/``SSLWantWrite`` set the selector interest; decrypted bytes still
buffered in the SSL object are drained, since the selector cannot see them), then
ApiVersions, then SASL: SaslHandshake v1 and SaslAuthenticate rounds driven by a
sans-I/O mechanism (``coopconsumer._sasl``). When SaslAuthenticate reports a session
lifetime, the connection re-authenticates at 85-95% of it (KIP-368, Java's window):
new requests queue meanwhile, answers to the ones already written are matched by
correlation id as usual, so nothing in flight is dropped. A failed TLS handshake or SASL
exchange closes the connection with ``AuthenticationError``, which every outstanding
request gets too.

Failure rules, as in Java's ``NetworkClient``: any stream-level problem (EOF, garbage,
an unknown correlation id, an absurd frame size, a request that timed out after being
written) closes the connection; the request the problem concerns gets the specific
error and every other outstanding request gets ``BrokerConnectionError`` chained to it.

Imports the standard library, ``_errors`` and ``_protocol``; nothing consumer-specific
(no group logic, no ``confluent_kafka``).
"""

from __future__ import annotations

import collections
import enum
import errno
import importlib.metadata
import logging
import os
import random
import re
import selectors
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from .._errors import (
    AuthenticationError,
    BrokerConnectionError,
    KafkaError,
    ProtocolError,
    RequestTimeoutError,
)
from .._protocol import decode_response, encode_request, errors
from .._protocol._schema import Request
from .._protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from .._sasl import OAuthBearerMechanism, SaslMechanism
from ._future import PendingRequest, api_name
from ._security import tls_failure_reason

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "BrokerConnection",
    "ConnectionState",
    "SaslSource",
    "choose_version",
]

log = logging.getLogger(__name__)

#: librdkafka's ``receive.message.max.bytes`` default. A size prefix above this is
#: treated as garbage (a TLS alert or an HTTP answer reads as a huge int32).
DEFAULT_MAX_RESPONSE_BYTES: Final = 100_000_000

#: ApiVersions version tried first (KIP-511); the fallback is the broker's advertised
#: maximum for ApiVersions when it tells us, else v0.
FIRST_API_VERSIONS_VERSION: Final = min(3, ApiVersionsRequest.MAX_VERSION)

_READ_CHUNK: Final = 256 * 1024
#: Reads per readiness event. The selector reports the socket again if more is waiting;
#: returning lets timeouts and other connections run when a peer streams without pause.
_MAX_READS_PER_EVENT: Final = 64
_CONTEXT_SUFFIX: Final = re.compile(r" \(api_key=-?\d+(?:, version=-?\d+)?\)$")
_MAX_CORRELATION_ID: Final = 2**31 - 1
#: KIP-368: re-authenticate within this share of the session lifetime (Java's
#: SaslClientAuthenticator picks a point between 85% and 95% at random).
REAUTH_WINDOW: Final = (0.85, 0.95)


def _software_version() -> str:
    try:
        raw = importlib.metadata.version("coopconsumer")
    except importlib.metadata.PackageNotFoundError:
        raw = "0"
    # KIP-511 restricts the value to [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
    cleaned = re.sub(r"[^a-zA-Z0-9.\-]", "-", raw).strip(".-")
    return cleaned or "0"


CLIENT_SOFTWARE_NAME: Final = "coopconsumer"
CLIENT_SOFTWARE_VERSION: Final = _software_version()


class ConnectionState(enum.Enum):
    """Lifecycle of a ``BrokerConnection``: it moves forward, except that READY and
    REAUTHENTICATING alternate."""

    CONNECTING = "connecting"
    """TCP connect in progress (non-blocking). Requests queue."""
    TLS_HANDSHAKE = "tls handshake"
    """Connected; TLS handshake in progress (``ssl`` and ``sasl_ssl``). Requests queue."""
    NEGOTIATING = "negotiating"
    """Connected; ApiVersions sent, answer pending. Requests queue."""
    AUTHENTICATING = "authenticating"
    """Versions known; SaslHandshake/SaslAuthenticate in progress. Requests queue."""
    READY = "ready"
    """Versions known; requests are encoded and written as they come."""
    REAUTHENTICATING = "reauthenticating"
    """READY before, re-authenticating (KIP-368): new requests queue, answers to those
    already written still arrive. Back to READY when done."""
    CLOSED = "closed"
    """Terminal. ``close_error`` says why (None for a deliberate close)."""


class SaslSource(Protocol):
    """Where a connection gets a fresh SASL mechanism for each (re-)authentication."""

    mechanism: str

    def new_mechanism(self) -> SaslMechanism:
        """A new, unstarted mechanism; raises ``AuthenticationError`` if none can be had
        (e.g. no OAUTHBEARER token)."""
        ...


def choose_version(
    request_type: type[Request],
    broker_versions: tuple[int, int] | None,
    *,
    broker: str | None = None,
) -> int:
    """The version to speak for ``request_type`` given the broker's ``(min, max)``.

    The highest version both sides support: ``min(ours.max, broker.max)``, which must be
    ``>= max(ours.min, broker.min)``. Raises ``KafkaError`` UNSUPPORTED_VERSION (35)
    naming the API when the ranges do not overlap or the broker lacks the API.
    """
    ours = (request_type.MIN_VERSION, request_type.MAX_VERSION)
    name = api_name(request_type)
    if broker_versions is None:
        raise _unsupported(
            request_type,
            f"broker does not support {name} (api_key {request_type.API_KEY}) at all;"
            f" this client speaks v{ours[0]}-{ours[1]}",
            broker,
        )
    version = min(ours[1], broker_versions[1])
    if version < max(ours[0], broker_versions[0]):
        raise _unsupported(
            request_type,
            f"no common {name} version (api_key {request_type.API_KEY}): this client"
            f" speaks v{ours[0]}-{ours[1]}, the broker v{broker_versions[0]}-"
            f"{broker_versions[1]}",
            broker,
        )
    return version


def _unsupported(request_type: type[Request], message: str, broker: str | None) -> KafkaError:
    return errors.to_exception(
        errors.UNSUPPORTED_VERSION,
        api_key=request_type.API_KEY,
        api_version=None,
        broker=broker,
        message=message,
    )


class _Queued:
    """A request accepted before the connection was READY."""

    __slots__ = ("future",)

    def __init__(self, future: PendingRequest[Any]) -> None:
        self.future = future


_OnAnswer = Callable[["_InFlight", bytes], None]


class _InFlight:
    """A request written (or being written) to the socket, awaiting its answer."""

    __slots__ = ("api_version", "future", "on_answer", "request_type")

    def __init__(
        self,
        request_type: type[Request],
        api_version: int,
        future: PendingRequest[Any] | None,
        on_answer: _OnAnswer | None = None,
    ) -> None:
        self.request_type = request_type
        self.api_version = api_version
        # None for the connection's own requests (ApiVersions, SASL), whose answers go
        # to ``on_answer`` instead.
        self.future = future
        self.on_answer = on_answer

    @property
    def api_key(self) -> int:
        return self.request_type.API_KEY


class BrokerConnection:
    """A single TCP connection to a broker, non-blocking and single-threaded.

    Construction starts a non-blocking connect; the ApiVersions handshake follows by
    itself. ``send`` may be called in any state: requests queue until versions are known
    and fail with ``BrokerConnectionError`` if the connection closes first.

    Drive it either from a shared selector loop (pass ``selector`` and call
    ``handle_io(mask)`` for its socket, ``expire()`` after each wake-up, and
    ``run_callbacks()``), or standalone by passing no selector and calling ``poll``.

    ``ssl_context`` wraps the socket in TLS (SNI and hostname checks use ``host``);
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
        on_complete: Callable[[PendingRequest[Any]], None] | None = None,
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
        self._client_id = client_id
        self._request_timeout_s = request_timeout_ms / 1000.0
        self._max_response_bytes = max_response_bytes
        self._clock = clock
        self._owns_selector = selector is None
        self._selector: selectors.BaseSelector = selector or selectors.DefaultSelector()
        self._completed: list[PendingRequest[Any]] = []
        self._on_complete = on_complete or self._completed.append
        self._ssl_context = ssl_context
        self._sasl = sasl
        self._rng = rng or random.Random()
        self._tls_wants = selectors.EVENT_READ
        self._mechanism: SaslMechanism | None = None
        self._sasl_sent_at = 0.0
        #: When to re-authenticate (KIP-368); None without a session lifetime.
        self._reauth_at: float | None = None
        #: SASL exchanges completed on this connection (1 + re-authentications).
        self.authentications = 0

        self.state = ConnectionState.CONNECTING
        #: Why the connection closed; None while open or after a deliberate close.
        self.close_error: BaseException | None = None
        #: Whether the handshake ever completed (used for reconnect backoff resets).
        self.was_ready = False
        #: The broker's session lifetime from the last SaslAuthenticate (0: none).
        self.session_lifetime_ms = 0
        self._api_versions: dict[int, tuple[int, int]] = {}
        self._handshake_version = FIRST_API_VERSIONS_VERSION
        self._setup_deadline: float | None = self._clock() + connection_setup_timeout_ms / 1000
        self._last_activity = self._clock()

        self._next_correlation_id = 0
        self._queued: collections.deque[_Queued] = collections.deque()
        self._in_flight: dict[int, _InFlight] = {}  # insertion order == send order
        self._out = bytearray()
        self._in = bytearray()
        self._last_chunk = b""
        self._registered_events = 0

        self._sock: socket.socket | None = None
        self._addresses: list[tuple[int, Any]] = []
        try:
            self._start_connect()
        except Exception as exc:  # resolution or socket setup; not KeyboardInterrupt
            self._fail_connect(exc)

    # ------------------------------------------------------------------ public API

    @property
    def in_flight_count(self) -> int:
        """Requests written and not yet answered (the handshake included)."""
        return len(self._in_flight)

    @property
    def queued_count(self) -> int:
        """Requests waiting for the connection to become READY."""
        return len(self._queued)

    @property
    def last_activity(self) -> float:
        """Monotonic time of the last byte sent or received."""
        return self._last_activity

    @property
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's ``{api_key: (min, max)}`` once READY (a copy)."""
        return dict(self._api_versions)

    @property
    def handshake_version(self) -> int:
        """The ApiVersions version the handshake used (or is trying)."""
        return self._handshake_version

    def fileno(self) -> int:
        """The socket's file descriptor, -1 when closed."""
        return self._sock.fileno() if self._sock is not None else -1

    def negotiated_version(self, request_type: type[Request]) -> int:
        """The version this connection speaks for ``request_type``.

        Raises ``RuntimeError`` before READY and ``KafkaError`` UNSUPPORTED_VERSION when
        the two sides share no version of the API.
        """
        if self.state is not ConnectionState.READY:
            raise RuntimeError(f"connection to {self.broker} is {self.state.value}, not ready")
        return choose_version(
            request_type, self._api_versions.get(request_type.API_KEY), broker=self.broker
        )

    def send(
        self,
        request: Request,
        *,
        timeout_ms: float | None = None,
        api_version: int | None = None,
    ) -> PendingRequest[Any]:
        """Queue ``request``; returns its ``PendingRequest`` (never raises for I/O).

        ``api_version`` pins the version (it must be within the negotiated range);
        by default the highest common version is used. The timeout (default: the
        connection's request timeout) runs from this call, queueing included.
        """
        timeout_s = self._request_timeout_s if timeout_ms is None else timeout_ms / 1000.0
        future: PendingRequest[Any] = PendingRequest(
            request,
            node_id=self.node_id,
            broker=self.broker,
            deadline=self._clock() + timeout_s,
            api_version=api_version,
        )
        self.enqueue(future)
        return future

    def enqueue(self, future: PendingRequest[Any]) -> None:
        """Take over an already created ``PendingRequest`` (used by ``KafkaClient``)."""
        if self.state is ConnectionState.CLOSED:
            self._complete_error(future, self._closed_error(future))
        elif self.state is ConnectionState.READY:
            self._write_request(future)
            self._update_interest()
        else:
            self._queued.append(_Queued(future))

    def next_deadline(self) -> float | None:
        """The earliest monotonic time at which ``expire`` has something to do."""
        deadlines = [q.future.deadline for q in self._queued]
        deadlines.extend(e.future.deadline for e in self._in_flight.values() if e.future)
        if self._setup_deadline is not None and self.state is not ConnectionState.CLOSED:
            deadlines.append(self._setup_deadline)
        if self._reauth_at is not None and self.state is ConnectionState.READY:
            deadlines.append(self._reauth_at)
        return min(deadlines) if deadlines else None

    @property
    def reauthenticate_at(self) -> float | None:
        """Monotonic time of the next KIP-368 re-authentication, None if none is due."""
        return self._reauth_at

    def handle_io(self, mask: int) -> None:
        """React to selector readiness ``mask`` (``EVENT_READ``/``EVENT_WRITE``)."""
        if self.state is ConnectionState.CLOSED:
            return
        try:
            if mask & selectors.EVENT_WRITE:
                if self.state is ConnectionState.CONNECTING:
                    self._finish_connect()
                elif self.state is ConnectionState.TLS_HANDSHAKE:
                    self._tls_handshake()
                if self._streaming() and self._out:
                    self._flush()
            if mask & selectors.EVENT_READ and self._open():
                if self.state is ConnectionState.TLS_HANDSHAKE:
                    self._tls_handshake()
                if self._streaming():
                    self._read()
                    if self._streaming() and self._out and self._ssl_context is not None:
                        # A TLS write that wanted to read (renegotiation, key update)
                        # can go on now.
                        self._flush()
        except _StreamFailure as failure:
            self._close_with(failure.error, failure.victim)
        except OSError as exc:
            self._close_with(
                BrokerConnectionError(f"socket error: {exc}", broker=self.broker), None
            )
        except Exception as exc:
            # A bug here must not wedge the caller's loop: the connection goes, every
            # outstanding request learns why, and the traceback is logged.
            log.exception("unexpected error on the connection to %s", self.broker)
            error = BrokerConnectionError(f"internal error: {exc!r}", broker=self.broker)
            error.__cause__ = exc
            self._close_with(error, None)
        if self._open():
            self._update_interest()

    def expire(self, now: float | None = None) -> None:
        """Fail requests whose deadline passed; close on a written one (Java does)."""
        if self.state is ConnectionState.CLOSED:
            return
        now = self._clock() if now is None else now
        if self._setup_deadline is not None and now >= self._setup_deadline:
            what = {
                ConnectionState.CONNECTING: "connection setup (connect)",
                ConnectionState.TLS_HANDSHAKE: "connection setup (TLS handshake)",
                ConnectionState.NEGOTIATING: "connection setup (ApiVersions handshake)",
                ConnectionState.AUTHENTICATING: "connection setup (SASL authentication)",
                ConnectionState.REAUTHENTICATING: "SASL re-authentication",
            }.get(self.state, "connection setup")
            self._close_with(BrokerConnectionError(f"{what} timed out", broker=self.broker), None)
            return
        if (
            self._reauth_at is not None
            and self.state is ConnectionState.READY
            and now >= self._reauth_at
        ):
            self._start_reauthentication(now)
        while self._queued and self._queued[0].future.deadline <= now:
            future = self._queued.popleft().future
            self._complete_error(future, self._timeout_error(future, sent=False))
        # Queued deadlines are not monotonic in queue order when callers pass different
        # timeouts; sweep the rest too.
        if any(q.future.deadline <= now for q in self._queued):
            keep: collections.deque[_Queued] = collections.deque()
            for queued in self._queued:
                if queued.future.deadline <= now:
                    self._complete_error(
                        queued.future, self._timeout_error(queued.future, sent=False)
                    )
                else:
                    keep.append(queued)
            self._queued = keep
        for entry in self._in_flight.values():
            if entry.future is not None and entry.future.deadline <= now:
                # As Java's NetworkClient.handleTimedOutRequests: a broker that sat on
                # a written request is presumed stuck, so the connection goes and the
                # caller reconnects, rather than waiting behind it.
                self._close_with(self._timeout_error(entry.future, sent=True), entry)
                return

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
            self._close_with(None, None)
        if self._owns_selector:
            self.run_callbacks()
            self._selector.close()

    def _open(self) -> bool:
        # A method, not an inline comparison: mypy would narrow ``state`` across the
        # calls that close the connection.
        return self.state is not ConnectionState.CLOSED

    def _streaming(self) -> bool:
        """Whether Kafka frames flow: connected, past the TLS handshake, not closed."""
        return self.state not in (
            ConnectionState.CONNECTING,
            ConnectionState.TLS_HANDSHAKE,
            ConnectionState.CLOSED,
        )

    def __repr__(self) -> str:
        return f"<BrokerConnection {self.broker} {self.state.value}>"

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

    def _fail_connect(self, exc: BaseException) -> None:
        error = BrokerConnectionError(f"cannot connect: {exc}", broker=self.broker)
        error.__cause__ = exc
        self._close_with(error, None)

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
                raise _StreamFailure(
                    BrokerConnectionError(f"cannot connect: {exc}", broker=self.broker), None
                ) from exc
            return
        self._addresses.clear()
        if self._ssl_context is not None:
            self._start_tls()
            return
        self.state = ConnectionState.NEGOTIATING
        self._send_handshake()

    # ------------------------------------------------------------------ TLS

    def _start_tls(self) -> None:
        assert self._sock is not None
        assert self._ssl_context is not None
        raw = self._sock
        # Re-register the wrapped socket: wrap_socket detaches the plain one.
        self._selector.unregister(raw)
        self._registered_events = 0
        self._sock = None
        try:
            wrapped = self._ssl_context.wrap_socket(
                raw, server_hostname=self.host, do_handshake_on_connect=False
            )
        except (ssl.SSLError, ValueError) as exc:
            raw.close()
            raise _StreamFailure(
                AuthenticationError(
                    f"cannot start TLS: {tls_failure_reason(exc)}",
                    broker=self.broker,
                    mechanism="SSL",
                ),
                None,
            ) from exc
        self._sock = wrapped
        self._selector.register(wrapped, selectors.EVENT_READ, self)
        self._registered_events = selectors.EVENT_READ
        self.state = ConnectionState.TLS_HANDSHAKE
        self._tls_handshake()

    def _tls_handshake(self) -> None:
        sock = self._sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._tls_wants = selectors.EVENT_READ
            return
        except ssl.SSLWantWriteError:
            self._tls_wants = selectors.EVENT_WRITE
            return
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionError) as exc:
            raise _StreamFailure(
                BrokerConnectionError(
                    f"connection closed during the TLS handshake ({exc.__class__.__name__});"
                    " is this a TLS listener?",
                    broker=self.broker,
                ),
                None,
            ) from exc
        except ssl.SSLError as exc:
            reason = tls_failure_reason(exc)
            if getattr(exc, "reason", None) == "WRONG_VERSION_NUMBER":
                reason += " (the broker does not speak TLS on this port?)"
            raise _StreamFailure(
                AuthenticationError(reason, broker=self.broker, mechanism="SSL"), None
            ) from exc
        log.debug("TLS with %s: %s %s", self.broker, sock.version(), (sock.cipher() or ("?",))[0])
        self.state = ConnectionState.NEGOTIATING
        self._send_handshake()

    def _send_handshake(self) -> None:
        version = self._handshake_version
        request = ApiVersionsRequest(
            client_software_name=CLIENT_SOFTWARE_NAME,
            client_software_version=CLIENT_SOFTWARE_VERSION,
        )
        self._write_frame(request, version, None, self._on_handshake)

    def _on_handshake(self, entry: _InFlight, frame: bytes) -> None:
        response = self._decode_api_versions(entry, frame)
        code = response.error_code
        if code == errors.UNSUPPORTED_VERSION and entry.api_version > 0:
            # KIP-511: the broker answers a too-new ApiVersions with a v0 body carrying
            # its own ApiVersions range (if it knows how); retry at that, else v0.
            advertised = {k.api_key: k.max_version for k in response.api_keys}
            fallback = min(advertised.get(ApiVersionsRequest.API_KEY, 0), entry.api_version - 1)
            self._handshake_version = max(0, fallback)
            log.debug(
                "%s rejected ApiVersions v%d; retrying with v%d",
                self.broker,
                entry.api_version,
                self._handshake_version,
            )
            self._send_handshake()
            return
        if code != 0:
            raise _StreamFailure(
                BrokerConnectionError(
                    "ApiVersions handshake failed: "
                    + str(
                        errors.to_exception(
                            code,
                            api_key=ApiVersionsRequest.API_KEY,
                            api_version=entry.api_version,
                            broker=self.broker,
                            message=None,
                        )
                    ),
                    broker=self.broker,
                ),
                None,
            )
        self._api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        if self._sasl is not None:
            self.state = ConnectionState.AUTHENTICATING
            self._send_sasl_handshake()
            return
        self._become_ready()

    def _become_ready(self) -> None:
        self.state = ConnectionState.READY
        self.was_ready = True
        self._setup_deadline = None
        queued, self._queued = self._queued, collections.deque()
        for item in queued:
            self._write_request(item.future)

    # ------------------------------------------------------------------ SASL

    def _sasl_failure(
        self,
        message: str,
        *,
        broker_message: str | None = None,
        error_code: int | None = None,
        enabled: tuple[str, ...] = (),
    ) -> _StreamFailure:
        assert self._sasl is not None
        return _StreamFailure(
            AuthenticationError(
                message,
                broker=self.broker,
                mechanism=self._sasl.mechanism,
                broker_message=broker_message,
                error_code=error_code,
                enabled_mechanisms=enabled,
            ),
            None,
        )

    def _send_sasl_handshake(self) -> None:
        assert self._sasl is not None
        handshake = self._api_versions.get(SaslHandshakeRequest.API_KEY)
        authenticate = self._api_versions.get(SaslAuthenticateRequest.API_KEY)
        if handshake is None or handshake[1] < 1 or authenticate is None:
            raise self._sasl_failure(
                "the broker does not offer SaslHandshake v1 and SaslAuthenticate"
                " (a Kafka broker older than 1.0, or a listener without SASL)"
            )
        self._mechanism = None
        self._write_frame(
            SaslHandshakeRequest(mechanism=self._sasl.mechanism), 1, None, self._on_sasl_handshake
        )

    def _on_sasl_handshake(self, entry: _InFlight, frame: bytes) -> None:
        assert self._sasl is not None
        _cid, response = decode_response(SaslHandshakeRequest, frame, api_version=entry.api_version)
        assert isinstance(response, SaslHandshakeResponse)
        enabled = tuple(response.mechanisms)
        if response.error_code == errors.UNSUPPORTED_SASL_MECHANISM:
            raise self._sasl_failure(
                f"the broker does not enable {self._sasl.mechanism}; it enables: "
                + (", ".join(enabled) if enabled else "(none listed)"),
                error_code=response.error_code,
                enabled=enabled,
            )
        if response.error_code != 0:
            info = errors.info(response.error_code)
            raise self._sasl_failure(
                f"SaslHandshake refused with {info.name} ({response.error_code})",
                error_code=response.error_code,
                enabled=enabled,
            )
        try:
            self._mechanism = self._sasl.new_mechanism()
        except AuthenticationError as exc:
            raise self._sasl_failure(
                _strip_prefix(str(exc)), broker_message=exc.broker_message
            ) from exc
        self._send_sasl_authenticate(self._mechanism.start())

    def _send_sasl_authenticate(self, payload: bytes) -> None:
        version = choose_version(
            SaslAuthenticateRequest,
            self._api_versions.get(SaslAuthenticateRequest.API_KEY),
            broker=self.broker,
        )
        self._sasl_sent_at = self._clock()
        self._write_frame(
            SaslAuthenticateRequest(auth_bytes=payload),
            version,
            None,
            self._on_sasl_authenticate,
        )

    def _on_sasl_authenticate(self, entry: _InFlight, frame: bytes) -> None:
        mechanism = self._mechanism
        assert mechanism is not None
        _cid, response = decode_response(
            SaslAuthenticateRequest, frame, api_version=entry.api_version
        )
        assert isinstance(response, SaslAuthenticateResponse)
        if response.error_code != 0:
            info = errors.info(response.error_code)
            detail = mechanism.server_error if isinstance(mechanism, OAuthBearerMechanism) else None
            message = f"the broker refused the credentials ({info.name}, {response.error_code})"
            if detail:
                message += f"; token error: {detail}"
            raise self._sasl_failure(
                message, broker_message=response.error_message, error_code=response.error_code
            )
        try:
            reply = mechanism.step(response.auth_bytes)
        except AuthenticationError as exc:
            raise self._sasl_failure(
                _strip_prefix(str(exc), exc.broker_message), broker_message=exc.broker_message
            ) from exc
        if reply is not None:
            self._send_sasl_authenticate(reply)
            return
        if not mechanism.complete:
            raise self._sasl_failure("the exchange ended before the mechanism completed")
        self._mechanism = None
        self.authentications += 1
        lifetime_ms = response.session_lifetime_ms if entry.api_version >= 1 else 0
        self.session_lifetime_ms = max(0, lifetime_ms)
        if lifetime_ms > 0:
            share = self._rng.uniform(*REAUTH_WINDOW)
            self._reauth_at = self._sasl_sent_at + lifetime_ms / 1000.0 * share
        else:
            self._reauth_at = None
        log.debug(
            "%s authenticated with %s%s",
            self.broker,
            mechanism.name,
            f"; session lifetime {lifetime_ms} ms" if lifetime_ms > 0 else "",
        )
        self._become_ready()

    def _start_reauthentication(self, now: float) -> None:
        """KIP-368: a new SaslHandshake + SaslAuthenticate on the live connection."""
        self.state = ConnectionState.REAUTHENTICATING
        self._reauth_at = None
        # A request written before (a JoinGroup the coordinator holds) is answered
        # first: do not time the re-authentication out before it can be.
        written = [e.future.deadline for e in self._in_flight.values() if e.future]
        self._setup_deadline = max([now + self._request_timeout_s, *written])
        log.debug("%s: re-authenticating (KIP-368)", self.broker)
        try:
            self._send_sasl_handshake()
        except _StreamFailure as failure:
            self._close_with(self._reauth_failure(failure.error), None)
        else:
            self._update_interest()

    def _reauth_failure(self, error: BaseException) -> BaseException:
        # A refused re-authentication closes the connection as a retriable failure:
        # the reconnect authenticates from scratch, and only if that fails too is the
        # failure fatal (some brokers mishandle KIP-368 but accept a new connection).
        failure = BrokerConnectionError(f"re-authentication failed: {error}", broker=None)
        failure.__cause__ = error
        return failure

    def _decode_api_versions(self, entry: _InFlight, frame: bytes) -> ApiVersionsResponse:
        # decode_response itself re-reads an answer that does not parse at our version
        # as v0 (Java's ApiVersionsResponse.parse): a broker that does not know our
        # ApiVersions version answers in v0.
        _cid, response = decode_response(ApiVersionsRequest, frame, api_version=entry.api_version)
        assert isinstance(response, ApiVersionsResponse)
        return response

    # ------------------------------------------------------------------ writing

    def _write_request(self, future: PendingRequest[Any]) -> None:
        request_type = type(future.request)
        try:
            negotiated = choose_version(
                request_type, self._api_versions.get(request_type.API_KEY), broker=self.broker
            )
            if future.api_version is None:
                version = negotiated
            else:
                version = future.api_version
                low = max(
                    request_type.MIN_VERSION,
                    self._api_versions[request_type.API_KEY][0],
                )
                if not low <= version <= negotiated:
                    raise _unsupported(
                        request_type,
                        f"{api_name(request_type)} v{version} requested, but only"
                        f" v{low}-{negotiated} is common to client and broker",
                        self.broker,
                    )
            future.api_version = version
            self._write_frame(future.request, version, future)
        except (KafkaError, ProtocolError, ValueError, TypeError) as exc:
            # Version mismatch or a request the codec refuses at this version: only
            # this request fails; nothing was written, so the stream is intact.
            if isinstance(exc, KafkaError | ProtocolError):
                error: BaseException = exc
            else:
                error = ProtocolError(
                    f"cannot encode {api_name(request_type)} v{future.api_version}: {exc}",
                    api_key=request_type.API_KEY,
                    api_version=future.api_version,
                    broker=self.broker,
                )
                error.__cause__ = exc
            self._complete_error(future, error)

    def _write_frame(
        self,
        request: Request,
        version: int,
        future: PendingRequest[Any] | None,
        on_answer: _OnAnswer | None = None,
    ) -> None:
        correlation_id = self._next_correlation_id
        # After 2**31 requests the ids wrap; never reuse one still awaiting its answer.
        while correlation_id in self._in_flight:
            correlation_id = (correlation_id + 1) % (_MAX_CORRELATION_ID + 1)
        self._next_correlation_id = (correlation_id + 1) % (_MAX_CORRELATION_ID + 1)
        payload = encode_request(
            request, api_version=version, correlation_id=correlation_id, client_id=self._client_id
        )
        if future is not None:
            future.correlation_id = correlation_id
        self._in_flight[correlation_id] = _InFlight(type(request), version, future, on_answer)
        self._out += len(payload).to_bytes(4, "big", signed=True)
        self._out += payload
        self._update_interest()

    def _flush(self) -> None:
        assert self._sock is not None
        while self._out:
            try:
                sent = self._sock.send(self._out)
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                return
            except OSError as exc:
                self._read_tls_alert()
                raise _StreamFailure(
                    BrokerConnectionError(f"send failed: {exc}", broker=self.broker), None
                ) from exc
            if sent == 0:
                return
            del self._out[:sent]
            self._last_activity = self._clock()

    def _read_tls_alert(self) -> None:
        """After a failed send on a new TLS connection, read what the broker sent first.

        TLS 1.3: the server judges the client's certificate after the client finished its
        handshake, so a refusal is an alert followed by a hang-up; whether our first
        write or our first read meets it first is a race. Reading the alert turns it into
        the same ``AuthenticationError`` either way (``_receive`` raises it)."""
        sock = self._sock
        if isinstance(sock, ssl.SSLSocket) and self.state is ConnectionState.NEGOTIATING:
            try:
                self._receive(sock, _READ_CHUNK)
            except _StreamFailure as failure:
                if isinstance(failure.error, AuthenticationError):
                    raise
            except OSError:
                pass

    # ------------------------------------------------------------------ reading

    def _read(self) -> None:
        sock = self._sock
        assert sock is not None
        tls = isinstance(sock, ssl.SSLSocket)
        for _ in range(_MAX_READS_PER_EVENT):
            if not self._receive(sock, _READ_CHUNK):
                return
            # A TLS record holds at most 16 KiB: keep reading until the SSL object says
            # it wants more from the socket.
            if not tls and len(self._last_chunk) < _READ_CHUNK:
                return
        # The selector sees the socket, not bytes OpenSSL already decrypted: take those
        # before returning, or they would wait for the next packet.
        while isinstance(sock, ssl.SSLSocket) and self._streaming() and sock.pending():
            if not self._receive(sock, sock.pending()):
                return

    def _receive(self, sock: socket.socket, size: int) -> bool:
        """One recv into the frame buffer; False when the socket has nothing now."""
        try:
            chunk = sock.recv(size)
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return False
        except ssl.SSLError as exc:
            if self.state is ConnectionState.NEGOTIATING and not isinstance(
                exc, ssl.SSLEOFError | ssl.SSLZeroReturnError
            ):
                # TLS 1.3: the server judges the client's certificate after the client
                # finished its handshake, so a refusal (certificate required, unknown
                # CA) arrives as an alert on the first read.
                raise _StreamFailure(
                    AuthenticationError(
                        f"the broker refused the TLS session: {tls_failure_reason(exc)}",
                        broker=self.broker,
                        mechanism="SSL",
                    ),
                    None,
                ) from exc
            raise _StreamFailure(
                BrokerConnectionError(f"receive failed: {exc}", broker=self.broker), None
            ) from exc
        except OSError as exc:
            raise _StreamFailure(
                BrokerConnectionError(f"receive failed: {exc}", broker=self.broker), None
            ) from exc
        if not chunk:
            self._process_frames()  # complete frames that arrived with the EOF
            raise _StreamFailure(self._eof_error(), None)
        self._last_chunk = chunk
        self._in += chunk
        self._last_activity = self._clock()
        # Frame by frame as bytes arrive: an absurd size prefix is caught after the
        # first chunk, and the buffer never holds more than one frame plus a chunk.
        self._process_frames()
        return self._streaming()

    def _process_frames(self) -> None:
        buf = self._in
        offset = 0
        try:
            while len(buf) - offset >= 4 and self.state is not ConnectionState.CLOSED:
                size = int.from_bytes(buf[offset : offset + 4], "big", signed=True)
                if size < 4 or size > self._max_response_bytes:
                    oldest = self._oldest()
                    raise _StreamFailure(
                        self._protocol_error(
                            f"response size {size} outside 4..{self._max_response_bytes}"
                            " bytes: not a Kafka frame",
                            oldest,
                        ),
                        oldest,
                    )
                if len(buf) - offset - 4 < size:
                    break
                frame = bytes(buf[offset + 4 : offset + 4 + size])
                offset += 4 + size
                self._on_frame(frame)
        finally:
            if offset:
                del buf[:offset]

    def _on_frame(self, frame: bytes) -> None:
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        entry = self._in_flight.pop(correlation_id, None)
        if entry is None:
            oldest = self._oldest()
            expected = list(self._in_flight)[:5]
            raise _StreamFailure(
                self._protocol_error(
                    f"response with unknown correlation id {correlation_id}"
                    f" (outstanding: {expected})",
                    oldest,
                ),
                oldest,
            )
        if entry.on_answer is not None:
            try:
                entry.on_answer(entry, frame)
            except _StreamFailure as failure:
                if self.state is ConnectionState.REAUTHENTICATING:
                    raise _StreamFailure(self._reauth_failure(failure.error), None) from None
                raise
            except Exception as exc:
                raise _StreamFailure(self._wrap_decode_error(entry, exc), None) from exc
            return
        assert entry.future is not None
        try:
            _cid, response = decode_response(
                entry.request_type, frame, api_version=entry.api_version
            )
        except Exception as exc:
            # Put the entry back so that the close reports this request as the victim.
            self._in_flight[correlation_id] = entry
            raise _StreamFailure(self._wrap_decode_error(entry, exc), entry) from exc
        if entry.future._set_result(response):
            self._on_complete(entry.future)

    # ------------------------------------------------------------------ closing

    def _close_with(self, error: BaseException | None, victim: _InFlight | None) -> None:
        """Close the socket and fail everything outstanding.

        ``victim`` (if any) gets ``error`` itself; the others get a
        ``BrokerConnectionError`` chained to it.
        """
        if self.state is ConnectionState.CLOSED:
            return
        self.state = ConnectionState.CLOSED
        self.close_error = error
        sock, self._sock = self._sock, None
        try:
            if sock is not None:
                try:
                    if self._registered_events:
                        self._selector.unregister(sock)
                except (KeyError, ValueError, OSError):
                    pass
        finally:
            self._registered_events = 0
            if sock is not None:
                sock.close()
            self._out.clear()
            self._in.clear()
        if error is not None:
            log.info("connection to %s closed: %s", self.broker, error)
        in_flight, self._in_flight = self._in_flight, {}
        queued, self._queued = self._queued, collections.deque()
        for entry in in_flight.values():
            if entry.future is None:
                continue
            if entry is victim and error is not None:
                self._complete_error(entry.future, error)
            else:
                self._complete_error(entry.future, self._closed_error(entry.future))
        for item in queued:
            self._complete_error(item.future, self._closed_error(item.future))

    def _complete_error(self, future: PendingRequest[Any], error: BaseException) -> None:
        if future._set_exception(error):
            self._on_complete(future)

    # ------------------------------------------------------------------ errors

    def _oldest(self) -> _InFlight | None:
        for entry in self._in_flight.values():
            return entry
        return None

    def _closed_error(self, future: PendingRequest[Any]) -> BaseException:
        cause = self.close_error
        if isinstance(cause, AuthenticationError):
            # Every request waiting on a connection that could not authenticate gets
            # the authentication error itself: it is what the caller must act on.
            return cause
        version = "?" if future.api_version is None else str(future.api_version)
        reason = f": {cause}" if cause is not None else " by the client"
        error = BrokerConnectionError(
            f"connection closed before the {future.api_name} v{version} response{reason}",
            broker=self.broker,
        )
        error.__cause__ = cause
        return error

    def _eof_error(self) -> BaseException:
        oldest = self._oldest()
        if (
            oldest is not None
            and oldest.request_type is SaslHandshakeRequest
            and self._sasl is not None
            and self.state is ConnectionState.AUTHENTICATING
        ):
            # Kafka answers an unknown mechanism with UNSUPPORTED_SASL_MECHANISM and
            # its list; some brokers (Tansu) hang up instead. Reconnecting would only
            # repeat it.
            return AuthenticationError(
                f"the broker closed the connection instead of answering SaslHandshake"
                f" for {self._sasl.mechanism}: it does not enable that mechanism on this"
                f" listener (or the listener is not a SASL one)",
                broker=self.broker,
                mechanism=self._sasl.mechanism,
            )
        pending = "" if not self._in else f" after {len(self._in)} bytes of a response"
        if oldest is None:
            return BrokerConnectionError(
                f"connection closed by the broker{pending}", broker=self.broker
            )
        return BrokerConnectionError(
            f"connection closed by the broker{pending} while waiting for"
            f" {api_name(oldest.request_type)} v{oldest.api_version}",
            broker=self.broker,
        )

    def _timeout_error(self, future: PendingRequest[Any], *, sent: bool) -> RequestTimeoutError:
        where = "no response" if sent else "not sent (connection not ready)"
        version = "?" if future.api_version is None else str(future.api_version)
        return RequestTimeoutError(
            f"{future.api_name} v{version} to {self.broker}: {where} within the request timeout",
            api_key=future.api_key,
            api_version=future.api_version,
            broker=self.broker,
        )

    def _protocol_error(self, message: str, entry: _InFlight | None) -> ProtocolError:
        return ProtocolError(
            message,
            api_key=entry.api_key if entry else None,
            api_version=entry.api_version if entry else None,
            broker=self.broker,
        )

    def _wrap_decode_error(self, entry: _InFlight, exc: BaseException) -> ProtocolError:
        # The codec's own message already names api_key/version; keep it once.
        detail = _CONTEXT_SUFFIX.sub("", str(exc))
        error = ProtocolError(
            f"cannot decode {api_name(entry.request_type)} v{entry.api_version} response: {detail}",
            api_key=entry.api_key,
            api_version=entry.api_version,
            broker=self.broker,
        )
        error.__cause__ = exc
        return error

    def _update_interest(self) -> None:
        if self._sock is None:
            return
        if self.state is ConnectionState.CONNECTING:
            wanted = selectors.EVENT_WRITE
        elif self.state is ConnectionState.TLS_HANDSHAKE:
            wanted = self._tls_wants
        else:
            wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if self._out else 0)
        if wanted != self._registered_events:
            self._selector.modify(self._sock, wanted, self)
            self._registered_events = wanted


class _StreamFailure(Exception):
    """Internal: the stream is unusable; ``victim`` is the request the error concerns."""

    def __init__(self, error: BaseException, victim: _InFlight | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.victim = victim


def _strip_prefix(text: str, broker_message: str | None = None) -> str:
    """The reason part of an ``AuthenticationError`` message built without a broker."""
    _head, sep, rest = text.partition(" failed: ")
    reason = rest if sep else text
    if broker_message:
        reason = reason.removesuffix(f" (broker says: {broker_message})")
    return reason
