"""``SessionCore``: a broker session's data and the operations every phase shares.

The state and the one place it changes (``enter``, checked against the row of the
input being handled), dispatching an input through the table (``dispatch``; derived
inputs are dispatched from inside a handler, so rows nest), the events for the driver,
correlation ids and the table of written requests, writing frames, closing, and the
errors every phase builds the same way. The handlers live in ``_traffic``,
``_authentication`` and ``_negotiation``; the table in ``_session_table``;
``BrokerSession`` (``_broker_session``) adds the table and the driver's entry point.

Pure: no sockets, threads or clocks; ``ssl`` only for the context a ``TlsPipe`` is made
from.
"""

from __future__ import annotations

import collections
import logging
import random
import re
import ssl
from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar, Final, Generic, Protocol

from .._errors import (
    AuthenticationError,
    BrokerConnectionError,
    KafkaError,
    ProtocolError,
    RequestTimeoutError,
)
from .._protocol import encode_request
from .._protocol._schema import Request
from .._security._sasl import SaslMechanism
from .._transition_table import IllegalTransition, Transition
from ._connection_states import ConnectionState
from ._session_events import Answered, Closed, Failed, SessionEvent
from ._tickets import InFlight, TicketT
from ._tls_pipe import TlsPipe
from ._versions import FIRST_API_VERSIONS_VERSION, api_name, choose_version, unsupported_version

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "SaslSource", "SessionCore"]

log = logging.getLogger(__name__)

#: librdkafka's ``receive.message.max.bytes`` default. A size prefix above this is
#: treated as garbage (a TLS alert or an HTTP answer reads as a huge int32).
DEFAULT_MAX_RESPONSE_BYTES: Final = 100_000_000

_MAX_CORRELATION_ID: Final = 2**31 - 1
_CONTEXT_SUFFIX: Final = re.compile(r" \(api_key=-?\d+(?:, version=-?\d+)?\)$")

#: What happens to the state while a row's handler runs: the arrival state, the input
#: type and the states the row allows.
_Frame = tuple[ConnectionState, type, frozenset[ConnectionState]]


class SaslSource(Protocol):
    """Where a session gets a fresh SASL mechanism for each (re-)authentication."""

    mechanism: str

    def new_mechanism(self) -> SaslMechanism:
        """A new, unstarted mechanism; raises ``AuthenticationError`` if none can be had
        (e.g. no OAUTHBEARER token)."""
        ...


class SessionCore(Generic[TicketT]):
    """The data of one broker session and what its handlers share (see the module
    docstring). Single-threaded; every method takes the time it acts at as ``now``."""

    #: The table (``_session_table``), set by ``BrokerSession``.
    transitions: ClassVar[Mapping[tuple[ConnectionState, type], Transition[ConnectionState]]]
    ignored: ClassVar[Collection[tuple[ConnectionState, type]]]

    def __init__(
        self,
        *,
        broker: str,
        now: float,
        client_id: str = "coopconsumer",
        request_timeout_s: float = 30.0,
        setup_timeout_s: float = 10.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        sasl: SaslSource | None = None,
        rng: random.Random | None = None,
    ) -> None:
        #: Human-readable name used in every error: ``host:port (node N)``.
        self.broker = broker
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.max_response_bytes = max_response_bytes
        self.ssl_context = ssl_context
        self.server_hostname = server_hostname
        self.sasl = sasl
        self.rng = rng or random.Random()

        self._state = ConnectionState.CONNECTING
        self._frames: list[_Frame] = []
        self._events: list[SessionEvent[TicketT]] = []
        #: Why the session closed; None while open or after a deliberate close.
        self.close_error: BaseException | None = None
        #: Whether the session ever became READY (the driver's reconnect backoff).
        self.was_ready = False
        #: The broker's ``{api_key: (min, max)}`` once versions are known.
        self.api_versions: dict[int, tuple[int, int]] = {}
        #: The ApiVersions version the handshake used (or is trying).
        self.handshake_version = FIRST_API_VERSIONS_VERSION
        #: Connection setup (or re-authentication) must be done by then.
        self.setup_deadline: float | None = now + setup_timeout_s
        #: When to re-authenticate (KIP-368); None without a session lifetime.
        self.reauth_at: float | None = None
        #: The broker's session lifetime from the last SaslAuthenticate (0: none).
        self.session_lifetime_ms = 0
        #: SASL exchanges completed (1 + re-authentications).
        self.authentications = 0
        self.mechanism: SaslMechanism | None = None
        self.sasl_sent_at = 0.0
        self.tls: TlsPipe | None = None

        self.next_correlation_id = 0
        self.queued: collections.deque[TicketT] = collections.deque()
        self.in_flight: dict[int, InFlight[TicketT]] = {}  # insertion order == send order
        #: Plaintext frames not yet handed to the driver.
        self.outgoing = bytearray()
        #: Plaintext received and not yet a whole frame.
        self.incoming = bytearray()

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> ConnectionState:
        """The current state; only ``enter`` changes it."""
        return self._state

    def open(self) -> bool:
        """Whether the session is not CLOSED (a call: mypy keeps no narrowing)."""
        return self._state is not ConnectionState.CLOSED

    def dispatch(self, event: object, now: float) -> None:
        """Handle ``event`` through the table in the current state.

        ``IllegalTransition`` for a pair the table rejects (nothing changes) or for a
        move its row does not allow (the session must be discarded).
        """
        key = (self._state, type(event))
        row = self.transitions.get(key)
        if row is None:
            if key in self.ignored:
                return
            raise IllegalTransition(self._state, type(event), machine="connection")
        assert row.handler is not None  # the session's rows all name one
        self._frames.append((self._state, type(event), row.next_states))
        try:
            row.handler(self, event, now)
        finally:
            self._frames.pop()

    def enter(self, target: ConnectionState) -> None:
        """Move to ``target``; ``IllegalTransition`` unless the row of the input being
        handled allows it (staying is no move)."""
        if target is self._state:
            return
        arrival, input_type, allowed = self._frames[-1]
        if target not in allowed:
            raise IllegalTransition(arrival, input_type, target=target, machine="connection")
        self._state = target

    def emit(self, event: SessionEvent[TicketT]) -> None:
        self._events.append(event)

    def take_events(self) -> list[SessionEvent[TicketT]]:
        events, self._events = self._events, []
        return events

    # ------------------------------------------------------------------ writing

    def write_frame(
        self,
        request: Request,
        version: int,
        ticket: TicketT | None,
        own_answer: Callable[[bytes], object] | None = None,
    ) -> None:
        """Encode ``request`` at ``version`` with the next free correlation id.

        Raises what the codec raises (nothing is written then)."""
        correlation_id = self.next_correlation_id
        # After 2**31 requests the ids wrap; never reuse one still awaiting its answer.
        while correlation_id in self.in_flight:
            correlation_id = (correlation_id + 1) % (_MAX_CORRELATION_ID + 1)
        self.next_correlation_id = (correlation_id + 1) % (_MAX_CORRELATION_ID + 1)
        payload = encode_request(
            request, api_version=version, correlation_id=correlation_id, client_id=self.client_id
        )
        if ticket is not None:
            ticket.correlation_id = correlation_id
        self.in_flight[correlation_id] = InFlight(type(request), version, ticket, own_answer)
        self.outgoing += len(payload).to_bytes(4, "big", signed=True)
        self.outgoing += payload

    def write_request(self, ticket: TicketT) -> None:
        """Write a caller's request at the negotiated (or its pinned) version; a version
        or encoding problem fails that request alone (``Failed``)."""
        request_type = type(ticket.request)
        try:
            negotiated = choose_version(
                request_type, self.api_versions.get(request_type.API_KEY), broker=self.broker
            )
            if ticket.api_version is None:
                version = negotiated
            else:
                version = ticket.api_version
                low = max(request_type.MIN_VERSION, self.api_versions[request_type.API_KEY][0])
                if not low <= version <= negotiated:
                    raise unsupported_version(
                        request_type,
                        f"{api_name(request_type)} v{version} requested, but only"
                        f" v{low}-{negotiated} is common to client and broker",
                        self.broker,
                    )
            ticket.api_version = version
            self.write_frame(ticket.request, version, ticket)
        except (KafkaError, ProtocolError, ValueError, TypeError) as exc:
            # Nothing was written, so the stream is intact.
            if isinstance(exc, KafkaError | ProtocolError):
                error: BaseException = exc
            else:
                error = ProtocolError(
                    f"cannot encode {api_name(request_type)} v{ticket.api_version}: {exc}",
                    api_key=request_type.API_KEY,
                    api_version=ticket.api_version,
                    broker=self.broker,
                )
                error.__cause__ = exc
            self.emit(Failed(ticket, error))

    def data_to_send(self) -> bytes:
        """The bytes the driver must write next, in order (ciphertext under TLS); none
        once CLOSED (``Closed.farewell`` carries a last TLS alert)."""
        if not self.open():
            return b""
        if self.tls is None:
            data = bytes(self.outgoing)
            self.outgoing.clear()
            return data
        if self.outgoing:
            self.tls.write(bytes(self.outgoing))
            self.outgoing.clear()
        return self.tls.take_ciphertext()

    # ------------------------------------------------------------------ answers

    def answered(self, entry: InFlight[TicketT], response: object) -> None:
        assert entry.ticket is not None
        self.emit(Answered(entry.ticket, response))

    # ------------------------------------------------------------------ closing

    def close_with(
        self,
        error: BaseException | None,
        victim: InFlight[TicketT] | None,
        *,
        tls_alert: bool = False,
    ) -> None:
        """Close: ``victim`` (if any) gets ``error`` itself, every other outstanding
        request a ``BrokerConnectionError`` chained to it. ``tls_alert``: hand the
        driver what the TLS layer wrote on failing (its alert) as the farewell."""
        self.enter(ConnectionState.CLOSED)
        self.close_error = error
        farewell = self.tls.take_ciphertext() if tls_alert and self.tls is not None else b""
        self.outgoing.clear()
        self.incoming.clear()
        if error is not None:
            log.info("connection to %s closed: %s", self.broker, error)
        self.emit(Closed(error, farewell))
        in_flight, self.in_flight = self.in_flight, {}
        queued, self.queued = self.queued, collections.deque()
        for entry in in_flight.values():
            if entry.ticket is None:
                continue
            if entry is victim and error is not None:
                self.emit(Failed(entry.ticket, error))
            else:
                self.emit(Failed(entry.ticket, self.closed_error(entry.ticket)))
        for ticket in queued:
            self.emit(Failed(ticket, self.closed_error(ticket)))

    # ------------------------------------------------------------------ errors

    def oldest(self) -> InFlight[TicketT] | None:
        for entry in self.in_flight.values():
            return entry
        return None

    def closed_error(self, ticket: TicketT) -> BaseException:
        """What a request gets when the session closes before its answer."""
        cause = self.close_error
        if isinstance(cause, AuthenticationError):
            # Every request waiting on a session that could not authenticate gets the
            # authentication error itself: it is what the caller must act on.
            return cause
        if isinstance(cause, BrokerConnectionError) and cause.broker == self.broker:
            detail = f": {cause.reason}"  # the broker is named once, by this error
        else:
            detail = f": {cause}" if cause is not None else " by the client"
        name = api_name(type(ticket.request))
        if ticket.api_version is None:
            # Never written: the connection did not get as far as negotiating versions.
            text = f"{name} request not sent{detail}"
        else:
            text = f"connection closed before the {name} v{ticket.api_version} response{detail}"
        error = BrokerConnectionError(text, broker=self.broker)
        error.__cause__ = cause
        return error

    def timeout_error(self, ticket: TicketT, *, sent: bool) -> RequestTimeoutError:
        where = "no response" if sent else "not sent (connection not ready)"
        version = "?" if ticket.api_version is None else str(ticket.api_version)
        request_type = type(ticket.request)
        return RequestTimeoutError(
            f"{api_name(request_type)} v{version} to {self.broker}: {where} within the"
            " request timeout",
            api_key=request_type.API_KEY,
            api_version=ticket.api_version,
            broker=self.broker,
        )

    def protocol_error(self, message: str, entry: InFlight[Any] | None) -> ProtocolError:
        return ProtocolError(
            message,
            api_key=entry.api_key if entry else None,
            api_version=entry.api_version if entry else None,
            broker=self.broker,
        )

    def decode_error(self, entry: InFlight[Any], exc: BaseException) -> ProtocolError:
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
