"""The broker session's transition table: complete, checked, and every pair exercised.

Every ``(ConnectionState, input type)`` pair is handled, ignored or rejected, exactly one
of them. For each pair a session (TLS, SASL PLAIN, a session lifetime) is brought to
that state through a transcript, fed a canonical input of that type, and the outcome is
checked: a state the row allows (handled), nothing at all (ignored), or
``IllegalTransition`` with the session unchanged (rejected).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

import pytest
import trustme
from _session_peer import SASL_VERSIONS, Peer, Req, client_context, heartbeat, new_session, state_of
from _session_peer import server_context as tls_server

from coopconsumer._errors import BrokerConnectionError
from coopconsumer._protocol.messages import (
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from coopconsumer._security._sasl import PlainMechanism, SaslMechanism
from coopconsumer._session import (
    DRIVER_INPUTS,
    BrokerSession,
    BytesReceived,
    CloseRequested,
    Connected,
    ConnectionState,
    PeerClosed,
    RequestSubmitted,
    Tick,
    TransportFailed,
)
from coopconsumer._session._session_inputs import (
    ApiVersionsAnswer,
    ReauthenticationDue,
    SaslAuthenticateAnswer,
    SaslHandshakeAnswer,
    SetupExpired,
    StreamBroken,
    TlsEstablished,
    TlsFailed,
)
from coopconsumer._session._session_table import (
    IGNORED,
    INITIAL_STATE,
    INPUT_TYPES,
    REJECTED,
    TRANSITIONS,
    predecessors,
)
from coopconsumer._transition_table import IllegalTransition, Transition

S = ConnectionState
PAIRS = [(state, input_type) for state in S for input_type in INPUT_TYPES]


class Plain:
    mechanism = "PLAIN"

    def new_mechanism(self) -> SaslMechanism:
        return PlainMechanism("alice", "pw")


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _answer_sasl(peer: Peer, lifetime_ms: int, now: float) -> None:
    header, request = peer.request()
    assert isinstance(request, SaslHandshakeRequest)
    peer.answer(header, SaslHandshakeResponse(error_code=0, mechanisms=("PLAIN",)), now)
    header, request = peer.request()
    assert isinstance(request, SaslAuthenticateRequest)
    peer.answer(header, SaslAuthenticateResponse(session_lifetime_ms=lifetime_ms), now)


def in_state(ca: trustme.CA, state: ConnectionState) -> Peer:
    """A TLS + PLAIN session with a 10 s SASL lifetime, brought to ``state``.

    AUTHENTICATING and REAUTHENTICATING are left with their SaslAuthenticate written,
    so every SASL answer has a mechanism to go to."""
    session: BrokerSession[Req] = new_session(
        ssl_context=client_context(ca), server_hostname="127.0.0.1", sasl=Plain()
    )
    peer = Peer(session, tls=tls_server(ca))
    if state is S.CONNECTING:
        return peer
    if state is S.CLOSED:
        peer.feed(CloseRequested())
        return peer
    peer.connect()
    if state is S.TLS_HANDSHAKE:
        return peer
    peer.pump_tls()
    if state is S.NEGOTIATING:
        return peer
    peer.answer_api_versions(SASL_VERSIONS)
    if state is S.AUTHENTICATING:
        header, _ = peer.request()
        peer.answer(header, SaslHandshakeResponse(error_code=0, mechanisms=("PLAIN",)))
        return peer
    _answer_sasl(peer, 10_000, 0.0)
    if state is S.READY:
        return peer
    due = session.reauthenticate_at
    assert due is not None
    peer.feed(Tick(), due)
    header, _ = peer.request()
    peer.answer(header, SaslHandshakeResponse(error_code=0, mechanisms=("PLAIN",)), due)
    assert state is S.REAUTHENTICATING
    return peer


def canonical(input_type: type) -> object:
    """An input of ``input_type`` as a transcript would produce it."""
    versions = tuple(
        ApiVersionsResponseApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(SASL_VERSIONS.items())
    )
    made: dict[type, Callable[[], object]] = {
        Connected: Connected,
        BytesReceived: lambda: BytesReceived(b""),
        PeerClosed: PeerClosed,
        TransportFailed: lambda: TransportFailed(
            error=ConnectionResetError(104, "reset"), operation="receive"
        ),
        Tick: Tick,
        RequestSubmitted: lambda: RequestSubmitted(heartbeat()),
        CloseRequested: CloseRequested,
        TlsEstablished: TlsEstablished,
        TlsFailed: lambda: TlsFailed(ssl.SSLError(1, "bad record")),
        ApiVersionsAnswer: lambda: ApiVersionsAnswer(
            response=ApiVersionsResponse(api_keys=versions), api_version=3
        ),
        SaslHandshakeAnswer: lambda: SaslHandshakeAnswer(
            response=SaslHandshakeResponse(error_code=0, mechanisms=("PLAIN",))
        ),
        SaslAuthenticateAnswer: lambda: SaslAuthenticateAnswer(
            response=SaslAuthenticateResponse(session_lifetime_ms=10_000), api_version=2
        ),
        StreamBroken: lambda: StreamBroken(error=BrokerConnectionError("broken"), victim=None),
        SetupExpired: SetupExpired,
        ReauthenticationDue: ReauthenticationDue,
    }
    return made[input_type]()


def test_every_pair_is_handled_ignored_or_rejected_exactly_once() -> None:
    handled = set(TRANSITIONS)
    ignored = set(IGNORED)
    rejected = set(REJECTED)
    assert not handled & ignored
    assert not handled & rejected
    assert not ignored & rejected
    assert handled | ignored | rejected == set(PAIRS)
    assert set(DRIVER_INPUTS) <= set(INPUT_TYPES)


@pytest.mark.parametrize(
    ("state", "input_type"), PAIRS, ids=lambda v: getattr(v, "name", None) or v.__name__
)
def test_each_pair_behaves_as_the_table_says(
    ca: trustme.CA, state: ConnectionState, input_type: type
) -> None:
    peer = in_state(ca, state)
    session = peer.session
    assert state_of(session) is state
    event = canonical(input_type)
    row = TRANSITIONS.get((state, input_type))
    if (state, input_type) in REJECTED:
        with pytest.raises(IllegalTransition) as info:
            session.dispatch(event, 1.0)
        assert info.value.target is None
        assert state_of(session) is state
        return
    session.dispatch(event, 1.0)
    if row is None:
        assert session.take_events() == []
        assert state_of(session) is state
        return
    assert state_of(session) is state or session.state in row.next_states


def test_a_driver_may_hand_only_its_own_inputs() -> None:
    session = new_session()
    with pytest.raises(TypeError, match="not an input a driver may hand a session"):
        session.handle(SetupExpired(), 0.0)
    with pytest.raises(IllegalTransition, match="BytesReceived is not allowed in state CONNECTING"):
        session.handle(BytesReceived(b"\x00"), 0.0)
    assert state_of(session) is S.CONNECTING


def test_a_handler_may_not_move_outside_its_row() -> None:
    crippled = dict(TRANSITIONS)
    row = crippled[(S.CONNECTING, CloseRequested)]
    crippled[(S.CONNECTING, CloseRequested)] = Transition(
        handler=row.handler, next_states=frozenset()
    )

    class Crippled(BrokerSession[Req]):
        transitions = crippled

    session = Crippled(broker="b:1 (node 1)", now=0.0)
    with pytest.raises(IllegalTransition) as info:
        session.handle(CloseRequested(), 0.0)
    assert info.value.target is S.CLOSED
    assert str(info.value) == (
        "CloseRequested in state CONNECTING may not move the connection to CLOSED"
    )


def test_predecessors_are_derived_from_the_rows() -> None:
    assert INITIAL_STATE is S.CONNECTING
    assert predecessors(S.CONNECTING) == frozenset()
    assert predecessors(S.TLS_HANDSHAKE) == {S.CONNECTING}
    assert predecessors(S.NEGOTIATING) == {S.CONNECTING, S.TLS_HANDSHAKE}
    assert predecessors(S.AUTHENTICATING) == {S.NEGOTIATING}
    assert predecessors(S.READY) == {S.NEGOTIATING, S.AUTHENTICATING, S.REAUTHENTICATING}
    assert predecessors(S.REAUTHENTICATING) == {S.READY}
    assert predecessors(S.CLOSED) == {s for s in S if s is not S.CLOSED}
