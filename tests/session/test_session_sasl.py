"""BrokerSession transcripts of SASL: PLAIN, SCRAM-SHA-256/512 (against scramp, an
independent server implementation, and a server that cannot prove the password),
OAUTHBEARER with extensions and a refused token, and KIP-368 re-authentication with
requests in flight. No sockets, threads or clocks."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest
import scramp
from _session_peer import SASL_VERSIONS, VERSIONS, Peer, Req, heartbeat, new_session, state_of

from coopconsumer._errors import AuthenticationError, BrokerConnectionError
from coopconsumer._protocol import RequestHeader
from coopconsumer._protocol.messages import (
    HeartbeatResponse,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from coopconsumer._security._sasl import (
    OAuthBearerMechanism,
    PlainMechanism,
    SaslMechanism,
    ScramMechanism,
)
from coopconsumer._session import (
    Answered,
    ConnectionState,
    Failed,
    PeerClosed,
    Tick,
)

S = ConnectionState


class Source:
    """A SASL source that makes a fresh mechanism per exchange and counts them."""

    def __init__(self, mechanism: str, factory: Callable[[], SaslMechanism]) -> None:
        self.mechanism = mechanism
        self._factory = factory
        self.made = 0

    def new_mechanism(self) -> SaslMechanism:
        self.made += 1
        return self._factory()


def plain(password: str = "pw") -> Source:
    return Source("PLAIN", lambda: PlainMechanism("alice", password))


def authenticating(source: Source, **kwargs: object) -> Peer:
    """A session past ApiVersions, its SaslHandshake written."""
    peer = Peer(new_session(sasl=source, **kwargs))
    peer.connect()
    peer.answer_api_versions(SASL_VERSIONS)
    assert state_of(peer.session) is S.AUTHENTICATING
    return peer


def handshake(peer: Peer, now: float = 0.0) -> tuple[RequestHeader, bytes]:
    """Accept the SaslHandshake; the first SaslAuthenticate's header and bytes."""
    header, request = peer.request()
    assert isinstance(request, SaslHandshakeRequest)
    assert header.api_version == 1
    mechanism = request.mechanism
    peer.answer(header, SaslHandshakeResponse(error_code=0, mechanisms=(mechanism,)), now)
    return authenticate_request(peer)


def authenticate_request(peer: Peer) -> tuple[RequestHeader, bytes]:
    header, request = peer.request()
    assert isinstance(request, SaslAuthenticateRequest)
    assert header.api_version == 2
    return header, request.auth_bytes


def failed_with(peer: Peer, ticket: Req) -> BaseException:
    (error,) = [e.error for e in peer.events if isinstance(e, Failed) and e.ticket is ticket]
    return error


# --------------------------------------------------------------------------- PLAIN


def test_plain_authenticates_after_api_versions_and_releases_queued_requests() -> None:
    source = plain()
    peer = Peer(new_session(sasl=source))
    waiting = Req(MetadataRequest(topics=None))
    peer.session.submit(waiting, 0.0)
    peer.connect()
    peer.answer_api_versions(SASL_VERSIONS)
    header, message = handshake(peer)
    assert message == b"\0alice\0pw"
    assert peer.session.queued_count == 1  # still waiting
    peer.answer(header, SaslAuthenticateResponse(session_lifetime_ms=0))
    assert state_of(peer.session) is S.READY
    assert peer.session.authentications == 1
    assert peer.session.reauthenticate_at is None  # no session lifetime: no re-auth
    ((written, request),) = peer.requests()
    assert isinstance(request, MetadataRequest)
    assert written.correlation_id == waiting.correlation_id


def test_refused_credentials_fail_every_waiting_request_with_the_brokers_message() -> None:
    peer = Peer(new_session(sasl=plain("wrong")))
    tickets = [Req(MetadataRequest(topics=None)) for _ in range(3)]
    for ticket in tickets:
        peer.session.submit(ticket, 0.0)
    peer.connect()
    peer.answer_api_versions(SASL_VERSIONS)
    header, _ = handshake(peer)
    refusal = SaslAuthenticateResponse(
        error_code=58, error_message="Authentication failed: Invalid username or password"
    )
    peer.answer(header, refusal)
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert (error.error_code, error.mechanism) == (58, "PLAIN")
    assert error.broker_message == "Authentication failed: Invalid username or password"
    assert str(error).startswith("PLAIN authentication failed with broker 127.0.0.1:9092")
    assert "wrong" not in str(error)
    # Every waiting request gets the authentication error itself.
    assert all(failed_with(peer, ticket) is error for ticket in tickets)


def test_an_unsupported_mechanism_lists_what_the_broker_enables() -> None:
    peer = authenticating(plain())
    header, _ = peer.request()
    peer.answer(header, SaslHandshakeResponse(error_code=33, mechanisms=("SCRAM-SHA-512",)))
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert error.enabled_mechanisms == ("SCRAM-SHA-512",)
    assert "the broker does not enable PLAIN; it enables: SCRAM-SHA-512" in str(error)


def test_a_broker_without_the_sasl_apis_is_refused_before_anything_is_sent() -> None:
    peer = Peer(new_session(sasl=plain()))
    peer.connect()
    peer.answer_api_versions(VERSIONS)
    assert state_of(peer.session) is S.CLOSED
    assert isinstance(peer.session.close_error, AuthenticationError)
    assert "SaslHandshake v1" in str(peer.session.close_error)
    assert peer.requests() == []


def test_a_hang_up_instead_of_a_handshake_answer_is_an_authentication_error() -> None:
    peer = authenticating(plain())
    peer.request()
    peer.feed(PeerClosed())
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert "closed the connection instead of answering SaslHandshake for PLAIN" in str(error)


def test_a_mechanism_source_without_credentials_fails_the_exchange() -> None:
    def no_token() -> SaslMechanism:
        raise AuthenticationError("oauth_cb returned no token string", mechanism="OAUTHBEARER")

    peer = authenticating(Source("OAUTHBEARER", no_token))
    header, _ = peer.request()
    peer.answer(header, SaslHandshakeResponse(error_code=0, mechanisms=("OAUTHBEARER",)))
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert str(error) == (
        "OAUTHBEARER authentication failed with broker 127.0.0.1:9092 (node 1):"
        " oauth_cb returned no token string"
    )


# --------------------------------------------------------------------------- SCRAM


def _scram_server(name: str, password: str) -> scramp.ScramServer:
    mechanism = scramp.ScramMechanism(name)
    info = mechanism.make_auth_info(password, iteration_count=4096)
    return mechanism.make_server(lambda _user: info)


@pytest.mark.parametrize("name", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_an_independent_server(name: str) -> None:
    peer = authenticating(Source(name, lambda: ScramMechanism(name, "alice", "s3cret")))
    server = _scram_server(name, "s3cret")
    header, client_first = handshake(peer)
    assert client_first.startswith(b"n,,n=alice,r=")
    server.set_client_first(client_first.decode())
    peer.answer(header, SaslAuthenticateResponse(auth_bytes=server.get_server_first().encode()))
    header, client_final = authenticate_request(peer)
    server.set_client_final(client_final.decode())  # raises unless the proof is right
    final = server.get_server_final().encode()
    peer.answer(header, SaslAuthenticateResponse(auth_bytes=final, session_lifetime_ms=0))
    assert state_of(peer.session) is S.READY
    assert peer.session.authentications == 1


def test_scram_refuses_a_server_that_cannot_prove_it_knows_the_password() -> None:
    name = "SCRAM-SHA-512"
    peer = authenticating(Source(name, lambda: ScramMechanism(name, "alice", "s3cret")))
    waiting = heartbeat()
    peer.session.submit(waiting, 0.0)
    # An impostor: it accepts any proof and signs with a key of its own.
    impostor = _scram_server(name, "another-password")
    header, client_first = handshake(peer)
    impostor.set_client_first(client_first.decode())
    server_first = impostor.get_server_first().encode()
    peer.answer(header, SaslAuthenticateResponse(auth_bytes=server_first))
    header, _client_final = authenticate_request(peer)
    forged = b"v=" + base64.b64encode(b"\x00" * 64)
    peer.answer(header, SaslAuthenticateResponse(auth_bytes=forged))
    assert state_of(peer.session) is S.CLOSED
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert error.mechanism == name
    assert "the server's signature does not match" in str(error)
    assert failed_with(peer, waiting) is error
    assert not peer.session.was_ready


def test_scram_reports_the_servers_refusal_of_the_proof() -> None:
    name = "SCRAM-SHA-256"
    peer = authenticating(Source(name, lambda: ScramMechanism(name, "alice", "wrong")))
    server = _scram_server(name, "s3cret")
    header, client_first = handshake(peer)
    server.set_client_first(client_first.decode())
    peer.answer(header, SaslAuthenticateResponse(auth_bytes=server.get_server_first().encode()))
    header, client_final = authenticate_request(peer)
    with pytest.raises(scramp.ScramException):
        server.set_client_final(client_final.decode())
    peer.answer(header, SaslAuthenticateResponse(auth_bytes=b"e=invalid-proof"))
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert error.broker_message == "invalid-proof"
    assert "the server refused the credentials" in str(error)


# --------------------------------------------------------------------------- OAUTHBEARER


def test_oauthbearer_sends_the_token_and_its_extensions() -> None:
    extensions = (("traceId", "abc"), ("logicalCluster", "lkc-1"))
    source = Source("OAUTHBEARER", lambda: OAuthBearerMechanism("t0k3n", extensions))
    peer = authenticating(source)
    header, message = handshake(peer)
    assert message == (b"n,,\x01auth=Bearer t0k3n\x01traceId=abc\x01logicalCluster=lkc-1\x01\x01")
    peer.answer(header, SaslAuthenticateResponse(auth_bytes=b""))
    assert state_of(peer.session) is S.READY


def test_a_refused_token_is_acknowledged_then_reported_with_the_servers_reason() -> None:
    source = Source("OAUTHBEARER", lambda: OAuthBearerMechanism("expired-token"))
    peer = authenticating(source)
    header, _ = handshake(peer)
    challenge = json.dumps({"status": "invalid_token"}).encode()
    peer.answer(header, SaslAuthenticateResponse(auth_bytes=challenge))
    # RFC 7628: the client answers the error challenge with a single 0x01.
    header, acknowledgement = authenticate_request(peer)
    assert acknowledgement == b"\x01"
    refusal = SaslAuthenticateResponse(
        error_code=58, error_message="Authentication failed: invalid_token"
    )
    peer.answer(header, refusal)
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert str(error) == (
        "OAUTHBEARER authentication failed with broker 127.0.0.1:9092 (node 1): the broker"
        " refused the credentials (SASL_AUTHENTICATION_FAILED, 58); token error:"
        " status=invalid_token (broker says: Authentication failed: invalid_token)"
    )


# --------------------------------------------------------------------------- KIP-368


def _ready_with_lifetime(source: Source, lifetime_ms: int, now: float = 1.0) -> Peer:
    peer = authenticating(source, request_timeout_s=30.0)
    header, _ = handshake(peer, now)
    peer.answer(header, SaslAuthenticateResponse(session_lifetime_ms=lifetime_ms), now)
    assert state_of(peer.session) is S.READY
    return peer


def test_reauthentication_keeps_requests_in_flight_and_queues_new_ones() -> None:
    source = plain()
    peer = _ready_with_lifetime(source, 10_000, now=1.0)
    due = peer.session.reauthenticate_at
    assert due is not None
    # Java's window: 85-95% of the lifetime after the SaslAuthenticate was sent.
    assert 1.0 + 8.5 <= due <= 1.0 + 9.5
    assert peer.session.session_lifetime_ms == 10_000
    assert peer.session.next_deadline() == due
    parked = heartbeat(deadline=due + 50.0)  # a request the broker holds, like a JoinGroup
    peer.session.submit(parked, 2.0)
    ((parked_header, _),) = peer.requests()
    assert peer.feed(Tick(), due) == []
    assert state_of(peer.session) is S.REAUTHENTICATING
    assert peer.session.reauthenticate_at is None
    # The re-authentication's bound waits for the parked request's own deadline.
    assert peer.session.setup_deadline == due + 50.0
    later = Req(MetadataRequest(topics=None))
    assert peer.session.submit(later, due) == []
    assert peer.session.queued_count == 1
    handshake_header, request = peer.request()
    assert isinstance(request, SaslHandshakeRequest)
    # The parked request is answered in the middle of re-authenticating.
    (answered,) = peer.answer(parked_header, HeartbeatResponse(error_code=0), due + 0.1)
    assert isinstance(answered, Answered)
    assert answered.ticket is parked
    enabled = SaslHandshakeResponse(error_code=0, mechanisms=("PLAIN",))
    peer.answer(handshake_header, enabled, due + 0.1)  # SaslAuthenticate goes out now
    header, message = authenticate_request(peer)
    assert message == b"\0alice\0pw"
    assert peer.session.queued_count == 1  # still waiting for the new session
    peer.answer(header, SaslAuthenticateResponse(session_lifetime_ms=10_000), due + 0.2)
    assert state_of(peer.session) is S.READY
    assert peer.session.authentications == 2
    assert source.made == 2  # a fresh mechanism per exchange
    next_due = peer.session.reauthenticate_at
    assert next_due is not None
    assert due + 0.1 + 8.5 <= next_due <= due + 0.1 + 9.5
    ((_, written),) = peer.requests()
    assert isinstance(written, MetadataRequest)
    assert later.correlation_id is not None


def test_a_refused_reauthentication_closes_as_a_retriable_failure() -> None:
    peer = _ready_with_lifetime(plain(), 1_000)
    parked = heartbeat(deadline=60.0)
    peer.session.submit(parked, 1.5)
    peer.requests()
    due = peer.session.reauthenticate_at
    assert due is not None
    peer.feed(Tick(), due)
    header, _ = handshake(peer, due)
    peer.answer(header, SaslAuthenticateResponse(error_code=58), due)
    error = peer.session.close_error
    assert isinstance(error, BrokerConnectionError)
    assert error.retriable
    assert str(error).startswith("re-authentication failed: PLAIN authentication failed")
    assert isinstance(error.__cause__, AuthenticationError)
    lost = failed_with(peer, parked)
    assert isinstance(lost, BrokerConnectionError)
    assert lost.__cause__ is error


def test_a_reauthentication_the_broker_never_answers_times_out() -> None:
    peer = _ready_with_lifetime(plain(), 1_000)
    due = peer.session.reauthenticate_at
    assert due is not None
    peer.feed(Tick(), due)
    assert peer.session.next_deadline() == due + 30.0  # the request timeout bounds it
    peer.feed(Tick(), due + 30.0)
    assert str(peer.session.close_error).startswith("SASL re-authentication timed out")


def test_the_reauthentication_handshake_is_checked_like_the_first() -> None:
    peer = _ready_with_lifetime(plain(), 1_000)
    due = peer.session.reauthenticate_at
    assert due is not None
    peer.feed(Tick(), due)
    header, request = peer.request()
    assert isinstance(request, SaslHandshakeRequest)
    peer.answer(header, SaslHandshakeResponse(error_code=33, mechanisms=("SCRAM-SHA-256",)))
    error = peer.session.close_error
    assert isinstance(error, BrokerConnectionError)
    assert "re-authentication failed" in str(error)
    assert "it enables: SCRAM-SHA-256" in str(error)
    assert state_of(peer.session) is S.CLOSED
