"""BrokerSession transcripts without TLS or SASL: connect and ApiVersions, framing and
pipelining, a peer that hangs up mid-frame, oversize frames, timeouts and deadlines.

No sockets, threads or clocks: the test is the broker (``Peer``) and the clock."""

from __future__ import annotations

import struct

import pytest
from _session_peer import BROKER, VERSIONS, Peer, Req, frame, heartbeat, new_session, state_of

from coopconsumer._errors import (
    BrokerConnectionError,
    KafkaError,
    ProtocolError,
    RequestTimeoutError,
)
from coopconsumer._protocol import encode_response
from coopconsumer._protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseTopic,
)
from coopconsumer._session import (
    Answered,
    BytesReceived,
    Closed,
    CloseRequested,
    ConnectionState,
    Failed,
    PeerClosed,
    Tick,
    TransportFailed,
)

S = ConnectionState


def ready_peer(**kwargs: object) -> Peer:
    peer = Peer(new_session(**kwargs))
    peer.connect()
    peer.answer_api_versions()
    assert state_of(peer.session) is S.READY
    return peer


def failure(peer: Peer, ticket: Req) -> BaseException:
    """The error ``ticket`` failed with (exactly once)."""
    (error,) = [e.error for e in peer.events if isinstance(e, Failed) and e.ticket is ticket]
    return error


# --------------------------------------------------------------------------- connect


def test_connect_then_api_versions_then_queued_requests_go_out_in_order() -> None:
    session = new_session()
    peer = Peer(session)
    assert state_of(session) is S.CONNECTING
    first, second = heartbeat(1), Req(MetadataRequest(topics=None))
    assert session.submit(first, 0.0) == []
    assert session.submit(second, 0.0) == []
    assert session.queued_count == 2
    assert session.data_to_send() == b""  # nothing before the transport is up
    peer.connect()
    assert state_of(session) is S.NEGOTIATING
    header, request = peer.request()
    assert (header.api_key, header.api_version, header.client_id) == (18, 3, "coopconsumer")
    assert isinstance(request, ApiVersionsRequest)
    assert request.client_software_name == "coopconsumer"
    assert peer.answer_api_versions(header=header) == []
    assert state_of(session) is S.READY
    assert session.was_ready
    written = peer.requests()
    assert [type(r) for _h, r in written] == [HeartbeatRequest, MetadataRequest]
    assert (first.api_version, second.api_version) == (4, MetadataRequest.MAX_VERSION)
    assert [h.correlation_id for h, _r in written] == [first.correlation_id, second.correlation_id]
    events = peer.answer(written[0][0], HeartbeatResponse(error_code=27))
    assert len(events) == 1
    answered = events[0]
    assert isinstance(answered, Answered)
    assert answered.ticket is first
    assert answered.response == HeartbeatResponse(error_code=27)
    assert session.negotiated_version(HeartbeatRequest) == 4
    assert session.api_versions == VERSIONS


def test_api_versions_unsupported_falls_back_to_the_advertised_version() -> None:
    peer = Peer(new_session())
    peer.connect()
    header, _request = peer.request()
    assert header.api_version == 3
    # KIP-511: a broker that does not know v3 answers v0 with its own range.
    rejected = ApiVersionsResponse(
        error_code=35,
        api_keys=(ApiVersionsResponseApiVersion(api_key=18, min_version=0, max_version=2),),
    )
    raw = encode_response(rejected, api_version=0, correlation_id=header.correlation_id)
    peer.feed(BytesReceived(frame(raw)))
    assert state_of(peer.session) is S.NEGOTIATING
    assert peer.session.handshake_version == 2
    retry, _ = peer.request()
    assert (retry.api_key, retry.api_version) == (18, 2)


def test_an_api_versions_error_closes_and_fails_what_waits() -> None:
    peer = Peer(new_session())
    waiting = heartbeat()
    peer.session.submit(waiting, 0.0)
    peer.connect()
    header, _ = peer.request()
    events = peer.answer(header, ApiVersionsResponse(error_code=58))
    assert state_of(peer.session) is S.CLOSED
    assert isinstance(events[0], Closed)
    error = peer.session.close_error
    assert isinstance(error, BrokerConnectionError)
    assert "ApiVersions handshake failed" in str(error)
    assert "SASL_AUTHENTICATION_FAILED" in str(error)
    failed = events[1]
    assert isinstance(failed, Failed)
    assert failed.ticket is waiting
    assert failed.error.__cause__ is error
    assert not peer.session.was_ready


def test_no_common_version_fails_that_request_only() -> None:
    peer = ready_peer()
    join = Req(JoinGroupRequest(group_id="g"))
    pinned = Req(HeartbeatRequest(group_id="g", member_id="m"), version=9)
    events = peer.session.submit(join, 0.0) + peer.session.submit(pinned, 0.0)
    assert [type(e) for e in events] == [Failed, Failed]
    for event, name in zip(events, ("JoinGroup", "Heartbeat"), strict=True):
        assert isinstance(event, Failed)
        assert isinstance(event.error, KafkaError)
        assert event.error.code == 35
        assert name in str(event.error)
    assert state_of(peer.session) is S.READY
    assert peer.requests() == []  # nothing written: the stream is intact


def test_a_connect_failure_fails_every_queued_request() -> None:
    session = new_session()
    waiting = heartbeat()
    session.submit(waiting, 0.0)
    refused = ConnectionRefusedError(111, "Connection refused")
    events = session.handle(TransportFailed(error=refused, operation="connect"), 0.0)
    assert state_of(session) is S.CLOSED
    error = session.close_error
    assert isinstance(error, BrokerConnectionError)
    assert str(error).startswith(f"cannot connect: {refused}")
    assert error.broker == BROKER
    assert error.__cause__ is refused
    assert [type(e) for e in events] == [Closed, Failed]
    # A closed session answers at once, with the reason it closed.
    late = heartbeat()
    (failed,) = session.submit(late, 1.0)
    assert isinstance(failed, Failed)
    assert "cannot connect" in str(failed.error)


# --------------------------------------------------------------------------- framing


def test_an_answer_cut_into_single_bytes_is_reassembled() -> None:
    peer = ready_peer()
    ticket = heartbeat()
    peer.session.submit(ticket, 0.0)
    header, _ = peer.request()
    wire = peer.encode(header, HeartbeatResponse(error_code=27))
    for byte in wire[:-1]:
        assert peer.feed(BytesReceived(bytes([byte]))) == []
    (answered,) = peer.feed(BytesReceived(wire[-1:]))
    assert isinstance(answered, Answered)
    assert answered.response.error_code == 27


def test_pipelined_answers_are_matched_by_correlation_id_in_any_order() -> None:
    peer = ready_peer()
    tickets = [heartbeat(gen) for gen in range(4)]
    for ticket in tickets:
        peer.session.submit(ticket, 0.0)
    written = peer.requests()
    assert peer.session.in_flight_count == 4
    wire = b"".join(
        peer.encode(h, HeartbeatResponse(error_code=r.generation_id))
        for h, r in reversed(written)
        if isinstance(r, HeartbeatRequest)
    )
    events = peer.feed(BytesReceived(wire))
    assert [(e.ticket, e.response.error_code) for e in events if isinstance(e, Answered)] == [
        (tickets[3], 3),
        (tickets[2], 2),
        (tickets[1], 1),
        (tickets[0], 0),
    ]


def test_correlation_ids_wrap_and_skip_one_still_in_flight() -> None:
    peer = ready_peer()
    peer.session.next_correlation_id = 2**31 - 1
    first, second = heartbeat(1), heartbeat(2)
    peer.session.submit(first, 0.0)
    peer.session.next_correlation_id = 2**31 - 1  # as if 2**31 requests later
    peer.session.submit(second, 0.0)
    assert (first.correlation_id, second.correlation_id) == (2**31 - 1, 0)


def test_a_large_answer_arriving_in_pieces_is_one_response() -> None:
    peer = ready_peer()
    ticket = Req(MetadataRequest(topics=None))
    peer.session.submit(ticket, 0.0)
    header, _ = peer.request()
    topics = tuple(MetadataResponseTopic(name=f"topic-{i:04d}") for i in range(2000))
    wire = peer.encode(header, MetadataResponse(topics=topics))
    pieces = [wire[i : i + 7000] for i in range(0, len(wire), 7000)]
    events = [e for piece in pieces for e in peer.feed(BytesReceived(piece))]
    (answered,) = events
    assert isinstance(answered, Answered)
    assert answered.response.topics == topics


# --------------------------------------------------------------------------- broken streams


def test_a_peer_that_hangs_up_mid_frame_fails_what_is_outstanding() -> None:
    peer = ready_peer()
    first, second = heartbeat(1), heartbeat(2)
    peer.session.submit(first, 0.0)
    peer.session.submit(second, 0.0)
    (header, _), _second = peer.requests()
    wire = peer.encode(header, HeartbeatResponse())
    peer.feed(BytesReceived(wire[:-3]))
    events = peer.feed(PeerClosed())
    assert state_of(peer.session) is S.CLOSED
    error = peer.session.close_error
    assert isinstance(error, BrokerConnectionError)
    assert str(error) == (
        f"connection closed by the broker after {len(wire) - 3} bytes of a response"
        f" while waiting for Heartbeat v4 (broker {BROKER})"
    )
    assert [type(e) for e in events] == [Closed, Failed, Failed]
    for event in events[1:]:
        assert isinstance(event, Failed)
        assert isinstance(event.error, BrokerConnectionError)
        assert "Heartbeat v4" in str(event.error)
        assert event.error.__cause__ is error
    # Whatever the transport still reports is ignored once closed.
    assert peer.feed(PeerClosed()) == []
    assert peer.feed(BytesReceived(b"late")) == []


def test_a_hang_up_between_frames_names_what_was_awaited() -> None:
    peer = ready_peer()
    peer.session.submit(heartbeat(), 0.0)
    peer.requests()
    peer.feed(PeerClosed())
    error = peer.session.close_error
    assert isinstance(error, BrokerConnectionError)
    assert "connection closed by the broker while waiting for Heartbeat v4" in str(error)
    assert "bytes of a response" not in str(error)


@pytest.mark.parametrize("size", [2**31 - 1, (1 << 20) + 1, -5, 0, 3])
def test_an_oversize_or_absurd_frame_size_is_a_protocol_error_for_the_oldest(size: int) -> None:
    peer = ready_peer(max_response_bytes=1 << 20)
    first, second = heartbeat(1), heartbeat(2)
    peer.session.submit(first, 0.0)
    peer.session.submit(second, 0.0)
    peer.requests()
    events = peer.feed(BytesReceived(struct.pack(">i", size)))  # the size alone decides
    assert state_of(peer.session) is S.CLOSED
    oldest = failure(peer, first)
    assert isinstance(oldest, ProtocolError)
    assert oldest.api_key == HeartbeatRequest.API_KEY
    assert oldest.api_version == 4
    assert f"response size {size} outside 4..{1 << 20} bytes" in str(oldest)
    other = [e.error for e in events if isinstance(e, Failed) and e.ticket is second]
    assert isinstance(other[0], BrokerConnectionError)
    assert other[0].__cause__ is oldest


def test_an_unknown_correlation_id_is_a_protocol_error() -> None:
    peer = ready_peer()
    ticket = heartbeat()
    peer.session.submit(ticket, 0.0)
    header, _ = peer.request()
    bogus = frame(struct.pack(">ih", (header.correlation_id or 0) + 1000, 0))
    events = peer.feed(BytesReceived(bogus))
    error = peer.session.close_error
    assert isinstance(error, ProtocolError)
    assert "unknown correlation id" in str(error)
    (failed,) = [e for e in events if isinstance(e, Failed)]
    assert failed.error is error


def test_an_answer_that_does_not_decode_fails_its_request_with_a_protocol_error() -> None:
    peer = ready_peer()
    ticket = Req(HeartbeatRequest(group_id="g", member_id="m"), version=0)
    peer.session.submit(ticket, 0.0)
    header, _ = peer.request()
    peer.feed(BytesReceived(frame(struct.pack(">i", header.correlation_id) + b"\x01")))
    error = failure(peer, ticket)
    assert isinstance(error, ProtocolError)
    assert (error.api_key, error.api_version, error.broker) == (12, 0, BROKER)
    assert str(error).startswith("cannot decode Heartbeat v0 response")


def test_a_garbage_api_versions_answer_closes_with_a_protocol_error() -> None:
    peer = Peer(new_session())
    waiting = heartbeat()
    peer.session.submit(waiting, 0.0)
    peer.connect()
    header, _ = peer.request()
    peer.feed(BytesReceived(frame(struct.pack(">i", header.correlation_id) + b"\x00")))
    error = peer.session.close_error
    assert isinstance(error, ProtocolError)
    assert error.api_key == ApiVersionsRequest.API_KEY
    failed = failure(peer, waiting)
    assert isinstance(failed, BrokerConnectionError)
    assert failed.__cause__ is error


def test_transport_failures_name_what_failed() -> None:
    for operation, prefix in (("send", "send failed"), ("receive", "receive failed")):
        peer = ready_peer()
        peer.session.submit(heartbeat(), 0.0)
        reset = ConnectionResetError(104, "Connection reset by peer")
        peer.feed(TransportFailed(error=reset, operation=operation))  # type: ignore[arg-type]
        assert str(peer.session.close_error).startswith(f"{prefix}: {reset}")


# --------------------------------------------------------------------------- time


def test_setup_timeout_names_the_step_that_was_slow() -> None:
    session = new_session(setup_timeout_s=2.0)
    assert session.next_deadline() == 2.0
    assert session.handle(Tick(), 1.99) == []
    session.handle(Tick(), 2.0)
    assert str(session.close_error).startswith("connection setup (connect) timed out")
    peer = Peer(new_session(setup_timeout_s=2.0))
    peer.connect()
    peer.feed(Tick(), 5.0)
    assert str(peer.session.close_error).startswith(
        "connection setup (ApiVersions handshake) timed out"
    )


def test_a_queued_request_times_out_unsent_and_the_session_stays() -> None:
    peer = Peer(new_session(setup_timeout_s=10.0))
    quick, slow = heartbeat(deadline=0.5), heartbeat(deadline=60.0)
    peer.session.submit(slow, 0.0)
    peer.session.submit(quick, 0.0)  # a shorter deadline behind a longer one
    peer.connect()
    assert peer.session.next_deadline() == 0.5
    (failed,) = peer.feed(Tick(), 0.5)
    assert isinstance(failed, Failed)
    assert failed.ticket is quick
    assert isinstance(failed.error, RequestTimeoutError)
    assert "not sent (connection not ready)" in str(failed.error)
    assert failed.error.api_version is None
    assert state_of(peer.session) is S.NEGOTIATING
    assert peer.session.queued_count == 1
    assert peer.session.next_deadline() == 10.0


def test_a_written_request_that_times_out_closes_the_session() -> None:
    peer = ready_peer()
    short, long = heartbeat(1, deadline=1.0), heartbeat(2, deadline=90.0)
    peer.session.submit(short, 0.0)
    peer.session.submit(long, 0.0)
    peer.requests()
    assert peer.session.next_deadline() == 1.0
    events = peer.feed(Tick(), 1.0)
    assert state_of(peer.session) is S.CLOSED
    error = peer.session.close_error
    assert isinstance(error, RequestTimeoutError)
    assert str(error).startswith(f"Heartbeat v4 to {BROKER}: no response within the request")
    assert [type(e) for e in events] == [Closed, Failed, Failed]
    assert failure(peer, short) is error
    assert failure(peer, long).__cause__ is error
    assert peer.session.next_deadline() is None


def test_a_deliberate_close_fails_what_is_outstanding_by_the_client() -> None:
    peer = ready_peer()
    ticket = heartbeat()
    peer.session.submit(ticket, 0.0)
    events = peer.feed(CloseRequested())
    assert events[0] == Closed(None)
    assert peer.session.close_error is None
    error = failure(peer, ticket)
    assert str(error).startswith("connection closed before the Heartbeat v4 response by the")
    assert peer.feed(CloseRequested()) == []  # idempotent
