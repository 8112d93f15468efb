"""BrokerSession transcripts of TLS through ``ssl.MemoryBIO``: the handshake, frames far
larger than a TLS record, refused certificates both ways (the client refusing the
broker's, and TLS 1.3's broker refusing the client's after the client finished), a
peer that is not TLS, and hang-ups. The broker is a server-side ``ssl.SSLObject`` in
memory with trustme certificates: no sockets, threads or clocks."""

from __future__ import annotations

import ssl

import pytest
import trustme
from _session_peer import Peer, Req, client_context, new_session, server_context, state_of

from coopconsumer._errors import AuthenticationError, BrokerConnectionError
from coopconsumer._protocol.messages import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseTopic,
)
from coopconsumer._session import (
    Answered,
    BytesReceived,
    Closed,
    ConnectionState,
    Failed,
    PeerClosed,
    Tick,
    TransportFailed,
)

S = ConnectionState


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def tls_peer(
    ca: trustme.CA, server: ssl.SSLContext | None = None, *, client: ssl.SSLContext | None = None
) -> Peer:
    session = new_session(ssl_context=client or client_context(ca), server_hostname="127.0.0.1")
    return Peer(session, tls=server or server_context(ca))


def closed_event(peer: Peer) -> Closed:
    (closed,) = [e for e in peer.events if isinstance(e, Closed)]
    return closed


def test_tls_then_api_versions_then_answers_larger_than_a_record(ca: trustme.CA) -> None:
    peer = tls_peer(ca)
    waiting = Req(MetadataRequest(topics=None))
    peer.session.submit(waiting, 0.0)
    peer.connect()
    assert state_of(peer.session) is S.TLS_HANDSHAKE
    peer.pump_tls()
    assert state_of(peer.session) is S.NEGOTIATING
    assert peer.tls_error is None
    peer.answer_api_versions()
    assert state_of(peer.session) is S.READY
    ((header, request),) = peer.requests()  # decrypted by the server side
    assert isinstance(request, MetadataRequest)
    topics = tuple(MetadataResponseTopic(name=f"topic-{i:04d}-{'x' * 40}") for i in range(900))
    wire = peer.encode(header, MetadataResponse(topics=topics))
    assert len(wire) > 3 * 16384  # several TLS records
    pieces = [wire[i : i + 5000] for i in range(0, len(wire), 5000)]
    events = [e for piece in pieces for e in peer.feed(BytesReceived(piece))]
    (answered,) = events
    assert isinstance(answered, Answered)
    assert answered.ticket is waiting
    assert answered.response.topics == topics


def test_a_broker_certificate_from_an_untrusted_ca_is_refused(ca: trustme.CA) -> None:
    peer = tls_peer(ca, client=client_context(trustme.CA()))
    waiting = Req(MetadataRequest(topics=None))
    peer.session.submit(waiting, 0.0)
    peer.connect()
    peer.pump_tls()
    assert state_of(peer.session) is S.CLOSED
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert error.mechanism == "SSL"
    assert str(error).startswith("TLS failed with broker 127.0.0.1:9092 (node 1): certificate")
    assert "the broker's certificate was issued by a CA that is not trusted" in str(error)
    (failed,) = [e for e in peer.events if isinstance(e, Failed)]
    assert failed.error is error
    # The alert that says why goes to the broker as the session's farewell.
    farewell = closed_event(peer).farewell
    assert farewell
    assert peer.take_from_client(farewell) == b""
    assert peer.tls_error is not None
    assert "UNKNOWN_CA" in str(peer.tls_error.reason)


def test_a_certificate_for_another_host_is_refused(ca: trustme.CA) -> None:
    elsewhere = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("kafka.example.invalid").configure_cert(elsewhere)
    peer = tls_peer(ca, elsewhere)
    peer.connect()
    peer.pump_tls()
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert "mismatch" in str(error)
    assert "does not name this IP address" in str(error)


def test_tls_13_refusing_the_client_certificate_after_the_handshake(ca: trustme.CA) -> None:
    peer = tls_peer(ca, server_context(ca, require_client_cert=True))
    waiting = Req(MetadataRequest(topics=None))
    peer.session.submit(waiting, 0.0)
    peer.connect()
    peer.pump_tls()
    # TLS 1.3: the client's handshake is done before the broker judges its certificate.
    assert state_of(peer.session) is S.NEGOTIATING
    assert peer.requests() == []
    assert peer.tls_error is not None  # the broker refused, and says so in an alert
    peer.feed(BytesReceived(peer.server_bytes()))
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert error.mechanism == "SSL"
    assert "the broker refused the TLS session: TLSV13_ALERT_CERTIFICATE_REQUIRED" in str(error)
    assert [e.error for e in peer.events if isinstance(e, Failed)] == [error]


def test_the_refusal_is_the_same_when_the_write_meets_the_hang_up_first(ca: trustme.CA) -> None:
    peer = tls_peer(ca, server_context(ca, require_client_cert=True))
    peer.connect()
    peer.pump_tls()
    assert state_of(peer.session) is S.NEGOTIATING
    broken = BrokenPipeError(32, "Broken pipe")
    alert = peer.server_bytes()
    peer.feed(TransportFailed(error=broken, operation="send", unread=alert))
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert "TLSV13_ALERT_CERTIFICATE_REQUIRED" in str(error)
    # Without the alert it is the write's failure.
    bare = tls_peer(ca, server_context(ca, require_client_cert=True))
    bare.connect()
    bare.pump_tls()
    bare.feed(TransportFailed(error=broken, operation="send"))
    assert str(bare.session.close_error).startswith(f"send failed: {broken}")


def test_a_broker_that_does_not_speak_tls_on_the_port(ca: trustme.CA) -> None:
    peer = tls_peer(ca)
    peer.connect()
    peer.session.data_to_send()  # the ClientHello, read by something that is not TLS
    peer.feed(BytesReceived(b"HTTP/1.1 400 Bad Request\r\n\r\n"))
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert "(the broker does not speak TLS on this port?)" in str(error)


def test_a_hang_up_during_the_handshake(ca: trustme.CA) -> None:
    peer = tls_peer(ca)
    peer.connect()
    peer.session.data_to_send()
    peer.feed(PeerClosed())
    error = peer.session.close_error
    assert isinstance(error, BrokerConnectionError)
    assert str(error).startswith(
        "connection closed during the TLS handshake (SSLEOFError); is this a TLS listener?"
    )
    reset = tls_peer(ca)
    reset.connect()
    reset.feed(TransportFailed(error=ConnectionResetError(104, "reset"), operation="receive"))
    assert "during the TLS handshake (ConnectionResetError)" in str(reset.session.close_error)


def test_a_handshake_that_never_ends_hits_the_setup_timeout(ca: trustme.CA) -> None:
    peer = Peer(
        new_session(
            ssl_context=client_context(ca), server_hostname="127.0.0.1", setup_timeout_s=0.3
        )
    )
    peer.connect()
    peer.feed(Tick(), 0.3)
    assert str(peer.session.close_error).startswith("connection setup (TLS handshake) timed out")


def test_the_brokers_close_notify_ends_the_session_like_a_hang_up(ca: trustme.CA) -> None:
    peer = tls_peer(ca)
    peer.connect()
    peer.pump_tls()
    peer.answer_api_versions()
    waiting = Req(MetadataRequest(topics=None))
    peer.session.submit(waiting, 0.0)
    peer.requests()
    peer.feed(BytesReceived(peer.close_notify()))
    error = peer.session.close_error
    assert isinstance(error, BrokerConnectionError)
    assert "connection closed by the broker while waiting for Metadata" in str(error)


def test_a_context_that_cannot_make_this_client_fails_at_connect(ca: trustme.CA) -> None:
    # check_hostname without a name to check: refused before a byte is sent.
    peer = Peer(new_session(ssl_context=client_context(ca), server_hostname=None))
    waiting = Req(MetadataRequest(topics=None))
    peer.session.submit(waiting, 0.0)
    peer.connect()
    error = peer.session.close_error
    assert isinstance(error, AuthenticationError)
    assert str(error).startswith("TLS failed with broker 127.0.0.1:9092 (node 1): cannot start TLS")
    assert [e.error for e in peer.events if isinstance(e, Failed)] == [error]
    assert peer.session.data_to_send() == b""
