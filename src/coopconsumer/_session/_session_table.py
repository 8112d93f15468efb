"""The broker session's transition table: ``(state, input type) -> (handler, next states)``.

Every ``(ConnectionState, input type)`` pair is in exactly one of ``TRANSITIONS`` (a
handler, and the states it may move the session to), ``IGNORED`` (legal, nothing to
do) or ``REJECTED`` (only a driver or session bug can produce it:
``IllegalTransition``). ``SessionCore.dispatch`` looks the pair up and
``SessionCore.enter`` refuses any move the row does not list; predecessors are derived
(``predecessors``) and docs/architecture.md draws the table
(``docs/gen_architecture.py``).

``BytesReceived`` and ``Tick`` never move the session themselves: what they carry (the
TLS handshake finishing, an answer to the session's own request, a broken stream, a
timer that is due) is dispatched as an input of its own, so each move in the table is
named by the fact that causes it.

Pure: imports the phase modules and the input types; never I/O, threads or clocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from .._transition_table import Transition, build
from .._transition_table import moves as table_moves
from .._transition_table import predecessors as table_predecessors
from . import _authentication, _negotiation, _traffic
from ._connection_states import ConnectionState
from ._session_inputs import (
    ApiVersionsAnswer,
    BytesReceived,
    CloseRequested,
    Connected,
    PeerClosed,
    ReauthenticationDue,
    RequestSubmitted,
    SaslAuthenticateAnswer,
    SaslHandshakeAnswer,
    SetupExpired,
    StreamBroken,
    Tick,
    TlsEstablished,
    TlsFailed,
    TransportFailed,
)

__all__ = [
    "IGNORED",
    "INITIAL_STATE",
    "INPUT_TYPES",
    "REJECTED",
    "TRANSITIONS",
    "moves",
    "predecessors",
]

#: A handler: ``handler(session, input, now)``.
Handler = Callable[[Any, Any, float], None]

#: The state of a new session.
INITIAL_STATE: Final = ConnectionState.CONNECTING

#: Every input type the table dispatches on: the driver's, then the derived ones.
INPUT_TYPES: tuple[type, ...] = (
    Connected,
    BytesReceived,
    PeerClosed,
    TransportFailed,
    Tick,
    RequestSubmitted,
    CloseRequested,
    TlsEstablished,
    TlsFailed,
    ApiVersionsAnswer,
    SaslHandshakeAnswer,
    SaslAuthenticateAnswer,
    StreamBroken,
    SetupExpired,
    ReauthenticationDue,
)

CONNECTING = ConnectionState.CONNECTING
TLS_HANDSHAKE = ConnectionState.TLS_HANDSHAKE
NEGOTIATING = ConnectionState.NEGOTIATING
AUTHENTICATING = ConnectionState.AUTHENTICATING
READY = ConnectionState.READY
REAUTHENTICATING = ConnectionState.REAUTHENTICATING
CLOSED = ConnectionState.CLOSED

_LIVE = (CONNECTING, TLS_HANDSHAKE, NEGOTIATING, AUTHENTICATING, READY, REAUTHENTICATING)
#: Frames flow: connected, past any TLS handshake.
_STREAMING = (NEGOTIATING, AUTHENTICATING, READY, REAUTHENTICATING)
#: States whose setup deadline runs (REAUTHENTICATING: the re-authentication's bound).
_TIMED_SETUP = (CONNECTING, TLS_HANDSHAKE, NEGOTIATING, AUTHENTICATING, REAUTHENTICATING)
_NOT_READY = _TIMED_SETUP

#: (states, input type, handler, next states).
_ROWS: tuple[tuple[Iterable[ConnectionState], type, Handler, Iterable[ConnectionState]], ...] = (
    # The transport.
    ((CONNECTING,), Connected, _negotiation.on_connected, (TLS_HANDSHAKE, NEGOTIATING, CLOSED)),
    ((TLS_HANDSHAKE,), BytesReceived, _negotiation.tls_bytes, ()),
    (_STREAMING, BytesReceived, _traffic.on_bytes, ()),
    ((TLS_HANDSHAKE,), PeerClosed, _negotiation.closed_during_tls, (CLOSED,)),
    ((NEGOTIATING, READY, REAUTHENTICATING), PeerClosed, _traffic.closed_by_peer, (CLOSED,)),
    ((AUTHENTICATING,), PeerClosed, _authentication.closed_while_authenticating, (CLOSED,)),
    (
        (CONNECTING, AUTHENTICATING, READY, REAUTHENTICATING),
        TransportFailed,
        _traffic.transport_failed,
        (CLOSED,),
    ),
    ((TLS_HANDSHAKE,), TransportFailed, _negotiation.tls_transport_failed, (CLOSED,)),
    ((NEGOTIATING,), TransportFailed, _negotiation.transport_failed_negotiating, (CLOSED,)),
    # Time, requests, closing.
    (_LIVE, Tick, _traffic.on_tick, ()),
    (_NOT_READY, RequestSubmitted, _traffic.queue_request, ()),
    ((READY,), RequestSubmitted, _traffic.write_request, ()),
    ((CLOSED,), RequestSubmitted, _traffic.refuse_request, ()),
    (_LIVE, CloseRequested, _traffic.close, (CLOSED,)),
    # TLS.
    ((TLS_HANDSHAKE,), TlsEstablished, _negotiation.tls_established, (NEGOTIATING,)),
    ((TLS_HANDSHAKE,), TlsFailed, _negotiation.tls_handshake_failed, (CLOSED,)),
    ((NEGOTIATING,), TlsFailed, _negotiation.tls_session_refused, (CLOSED,)),
    ((AUTHENTICATING, READY, REAUTHENTICATING), TlsFailed, _traffic.tls_receive_failed, (CLOSED,)),
    # ApiVersions, SASL, KIP-368.
    (
        (NEGOTIATING,),
        ApiVersionsAnswer,
        _negotiation.api_versions_answer,
        (AUTHENTICATING, READY, CLOSED),
    ),
    ((AUTHENTICATING,), SaslHandshakeAnswer, _authentication.handshake_answer, (CLOSED,)),
    (
        (AUTHENTICATING,),
        SaslAuthenticateAnswer,
        _authentication.authenticate_answer,
        (READY, CLOSED),
    ),
    ((READY,), ReauthenticationDue, _authentication.reauthenticate, (REAUTHENTICATING, CLOSED)),
    ((REAUTHENTICATING,), SaslHandshakeAnswer, _authentication.rehandshake_answer, (CLOSED,)),
    (
        (REAUTHENTICATING,),
        SaslAuthenticateAnswer,
        _authentication.reauthenticate_answer,
        (READY, CLOSED),
    ),
    # Failures.
    (_STREAMING, StreamBroken, _traffic.stream_broken, (CLOSED,)),
    (_TIMED_SETUP, SetupExpired, _traffic.setup_expired, (CLOSED,)),
)

#: The transition table (see the module docstring).
TRANSITIONS: Mapping[tuple[ConnectionState, type], Transition[ConnectionState]] = build(_ROWS)

#: Pairs that are legal and do nothing: whatever reaches a closed session (a transport
#: may still report what happened while it was being closed).
IGNORED: frozenset[tuple[ConnectionState, type]] = frozenset(
    (CLOSED, t)
    for t in (Connected, BytesReceived, PeerClosed, TransportFailed, Tick, CloseRequested)
)

#: Pairs only a bug can produce: a driver reporting bytes or an end of stream before
#: the connection is up, or a connect twice; a derived input in a state that never
#: derives it. They raise ``IllegalTransition`` and change nothing.
REJECTED: frozenset[tuple[ConnectionState, type]] = frozenset(
    {
        *((s, Connected) for s in _LIVE if s is not CONNECTING),
        (CONNECTING, BytesReceived),
        (CONNECTING, PeerClosed),
        *((s, TlsEstablished) for s in ConnectionState if s is not TLS_HANDSHAKE),
        (CONNECTING, TlsFailed),
        (CLOSED, TlsFailed),
        *((s, ApiVersionsAnswer) for s in ConnectionState if s is not NEGOTIATING),
        *(
            (s, answer)
            for s in ConnectionState
            if s not in (AUTHENTICATING, REAUTHENTICATING)
            for answer in (SaslHandshakeAnswer, SaslAuthenticateAnswer)
        ),
        (CONNECTING, StreamBroken),
        (TLS_HANDSHAKE, StreamBroken),
        (CLOSED, StreamBroken),
        (READY, SetupExpired),
        (CLOSED, SetupExpired),
        *((s, ReauthenticationDue) for s in ConnectionState if s is not READY),
    }
)


def moves() -> dict[tuple[ConnectionState, ConnectionState], tuple[type, ...]]:
    """Every move the table allows, ``(from, to) -> input types`` that may cause it,
    in ``ConnectionState`` and ``INPUT_TYPES`` order."""
    return table_moves(TRANSITIONS, ConnectionState, INPUT_TYPES)


def predecessors(state: ConnectionState) -> frozenset[ConnectionState]:
    """The states from which one input may move a session to ``state``."""
    return table_predecessors(TRANSITIONS, ConnectionState, INPUT_TYPES, state)
