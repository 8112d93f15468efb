"""BrokerConnection against the in-process fake broker: framing, pipelining, timeouts,
stream failures and the ApiVersions handshake."""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from _fake_broker import FakeBroker, FakeConn, ManualClock, frame

from coopconsumer._errors import (
    BrokerConnectionError,
    KafkaError,
    ProtocolError,
    RequestTimeoutError,
)
from coopconsumer._io import (
    BrokerConnection,
    ConnectionState,
    PendingRequest,
    _connection,
    choose_version,
)
from coopconsumer._protocol import RequestHeader
from coopconsumer._protocol._schema import Request
from coopconsumer._protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseTopic,
)

HEARTBEAT = HeartbeatRequest.API_KEY
WAIT_S = 10.0  # upper bound for a test step; outcomes, not durations, are asserted


@pytest.fixture
def fake() -> Iterator[FakeBroker]:
    with FakeBroker() as broker:
        yield broker


def connect(fake: FakeBroker, **kwargs: Any) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", fake.port, node_id=fake.node_id, **kwargs)


@contextlib.contextmanager
def connected(fake: FakeBroker, **kwargs: Any) -> Iterator[BrokerConnection]:
    """A connection to ``fake``, closed when the block ends however it ends."""
    conn = connect(fake, **kwargs)
    try:
        yield conn
    finally:
        conn.close()


def drive(conn: BrokerConnection, *futures: PendingRequest[Any]) -> None:
    """Poll until every future is done (bounded by WAIT_S worth of polls)."""
    for _ in range(int(WAIT_S / 0.01)):
        if all(f.done() for f in futures):
            return
        conn.poll(0.01)
    raise AssertionError(f"not done: {[f for f in futures if not f.done()]}")


def drive_until_ready(conn: BrokerConnection) -> None:
    for _ in range(int(WAIT_S / 0.01)):
        if conn.state in (ConnectionState.READY, ConnectionState.CLOSED):
            return
        conn.poll(0.01)
    raise AssertionError(f"{conn} never became ready")


def state_of(conn: BrokerConnection) -> ConnectionState:
    """Read the state through a call, so mypy does not keep an earlier narrowing."""
    return conn.state


def heartbeat(generation_id: int = 0) -> HeartbeatRequest:
    return HeartbeatRequest(group_id="g", generation_id=generation_id, member_id="m")


# --------------------------------------------------------------------------- basics


def test_handshake_then_request_round_trip(fake: FakeBroker) -> None:
    with connected(fake) as conn:
        future = conn.send(heartbeat())
        assert not future.done()
        drive(conn, future)
        assert isinstance(future.result(), HeartbeatResponse)
        assert future.result().error_code == 0
        assert conn.state is ConnectionState.READY
        assert future.api_version == 4  # highest common: ours 0-4, fake 0-4
        assert conn.handshake_version == 3
        assert fake.received_keys()[:2] == [(ApiVersionsRequest.API_KEY, 3), (HEARTBEAT, 4)]
    assert conn.fileno() == -1


def test_response_written_one_byte_at_a_time_is_reassembled(fake: FakeBroker) -> None:
    def dribble(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        payload = conn.encode(header, HeartbeatResponse(error_code=27))
        conn.send_raw(frame(payload), chunk=1)

    fake.on(HEARTBEAT, dribble)
    with connected(fake) as conn:
        future = conn.send(heartbeat())
        drive(conn, future)
        assert future.result().error_code == 27


def test_a_response_spread_over_several_read_bursts_is_reassembled(
    fake: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One small read per readiness event: a frame larger than a burst must survive
    # being assembled across many handle_io calls.
    monkeypatch.setattr(_connection, "_READ_CHUNK", 16)
    monkeypatch.setattr(_connection, "_MAX_READS_PER_EVENT", 1)
    topics = tuple(MetadataResponseTopic(name=f"topic-{i}") for i in range(50))

    def big(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        conn.reply(header, MetadataResponse(topics=topics))

    fake.on(MetadataRequest.API_KEY, big)
    with connected(fake) as conn:
        future = conn.send(MetadataRequest(topics=None))
        drive(conn, future)
        assert future.result().topics == topics


def test_interrupt_during_name_resolution_is_not_swallowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> list[Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(socket, "getaddrinfo", interrupted)
    with pytest.raises(KeyboardInterrupt):
        BrokerConnection("kafka.example", 9092)


def test_several_responses_in_one_write_all_complete(fake: FakeBroker) -> None:
    def batch(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        conn.held.append((header, request))
        if len(conn.held) == 3:
            data = b"".join(
                frame(conn.encode(h, HeartbeatResponse(error_code=r.generation_id)))
                for h, r in conn.held
                if isinstance(r, HeartbeatRequest)
            )
            conn.send_raw(data)

    fake.on(HEARTBEAT, batch)
    with connected(fake) as conn:
        futures = [conn.send(heartbeat(gen)) for gen in (3, 4, 5)]
        drive(conn, *futures)
        assert [f.result().error_code for f in futures] == [3, 4, 5]


def test_pipelined_requests_are_matched_by_correlation_id_even_out_of_order(
    fake: FakeBroker,
) -> None:
    # Kafka answers in order per connection; matching must not rely on it anyway.
    def reverse(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        conn.held.append((header, request))
        if len(conn.held) == 5:
            for h, r in reversed(conn.held):
                assert isinstance(r, HeartbeatRequest)
                conn.reply(h, HeartbeatResponse(error_code=r.generation_id))

    fake.on(HEARTBEAT, reverse)
    with connected(fake) as conn:
        futures = [conn.send(heartbeat(gen)) for gen in range(5)]
        drive_until_ready(conn)
        conn.poll(0)
        assert conn.in_flight_count == 5  # all written before any answer came back
        drive(conn, *futures)
        assert [f.result().error_code for f in futures] == [0, 1, 2, 3, 4]
        assert len({f.correlation_id for f in futures}) == 5


def test_wrapped_correlation_ids_skip_one_still_in_flight(fake: FakeBroker) -> None:
    def answer_both(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        conn.held.append((header, request))
        if len(conn.held) == 2:
            for h, r in conn.held:
                assert isinstance(r, HeartbeatRequest)
                conn.reply(h, HeartbeatResponse(error_code=r.generation_id))

    fake.on(HEARTBEAT, answer_both)
    with connected(fake) as conn:
        drive_until_ready(conn)
        conn._next_correlation_id = 5
        first = conn.send(heartbeat(1))
        conn._next_correlation_id = 5  # as if 2**31 requests later the ids came round
        second = conn.send(heartbeat(2))
        assert (first.correlation_id, second.correlation_id) == (5, 6)
        drive(conn, first, second)
        assert [first.result().error_code, second.result().error_code] == [1, 2]


def test_done_callbacks_run_inside_poll(fake: FakeBroker) -> None:
    conn = connect(fake)
    seen: list[PendingRequest[Any]] = []
    try:
        future = conn.send(heartbeat())
        future.add_done_callback(seen.append)
        drive(conn, future)
        assert seen == [future]
        later: list[PendingRequest[Any]] = []
        future.add_done_callback(later.append)  # already done: runs at once
        assert later == [future]
    finally:
        conn.close()


# --------------------------------------------------------------------------- timeouts


def test_timeout_fails_the_request_closes_the_connection_and_fails_the_others(
    fake: FakeBroker,
) -> None:
    fake.on(HEARTBEAT, lambda conn, header, request: None)  # never answers
    with connected(fake) as conn:
        drive_until_ready(conn)
        short = conn.send(heartbeat(1), timeout_ms=50)
        long = conn.send(heartbeat(2), timeout_ms=60_000)
        drive(conn, short, long)
        error = short.exception()
        assert isinstance(error, RequestTimeoutError)
        assert error.api_key == HEARTBEAT
        assert error.api_version == 4
        assert error.broker == conn.broker
        other = long.exception()
        assert isinstance(other, BrokerConnectionError)
        assert "Heartbeat" in str(other)
        assert other.__cause__ is error
        assert conn.state is ConnectionState.CLOSED
        assert conn.fileno() == -1


def test_request_queued_behind_a_stuck_handshake_times_out_then_setup_timeout_closes(
    fake: FakeBroker,
) -> None:
    fake.on(ApiVersionsRequest.API_KEY, lambda conn, header, request: None)
    # The clock moves by hand, so the request's deadline passes before the setup one
    # however slowly the machine runs.
    clock = ManualClock()
    with connected(fake, connection_setup_timeout_ms=1500, clock=clock) as conn:
        quick = conn.send(heartbeat(), timeout_ms=20)
        slow = conn.send(heartbeat(), timeout_ms=60_000)
        for _ in range(int(WAIT_S / 0.01)):
            if conn.state is not ConnectionState.CONNECTING:
                break
            conn.poll(0.01)
        assert conn.state is ConnectionState.NEGOTIATING
        clock.now += 0.05
        conn.poll(0)
        assert quick.done()
        error = quick.exception()
        assert isinstance(error, RequestTimeoutError)
        assert error.api_version is None  # never negotiated, never written
        assert state_of(conn) is ConnectionState.NEGOTIATING
        assert not slow.done()
        clock.now += 1.5
        conn.poll(0)
        assert slow.done()
        failure = slow.exception()
        assert isinstance(failure, BrokerConnectionError)
        assert "setup" in str(failure)
        assert state_of(conn) is ConnectionState.CLOSED


# --------------------------------------------------------------------------- stream failures


def test_broker_closing_mid_response_is_a_connection_error_naming_broker_and_api(
    fake: FakeBroker,
) -> None:
    def half(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        data = frame(conn.encode(header, HeartbeatResponse(error_code=0)))
        conn.send_raw(data[: len(data) - 2])
        conn.close()

    fake.on(HEARTBEAT, half)
    with connected(fake) as conn:
        future = conn.send(heartbeat())
        drive(conn, future)
        error = future.exception()
        assert isinstance(error, BrokerConnectionError)
        assert error.broker == conn.broker
        assert "Heartbeat" in str(error)
        assert conn.state is ConnectionState.CLOSED


def test_garbage_body_is_a_protocol_error_with_api_version_and_broker(fake: FakeBroker) -> None:
    def garbage(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        # A v0 Heartbeat response is an int16; one byte cannot be one.
        conn.send_raw(frame(struct.pack(">i", header.correlation_id) + b"\x01"))

    fake.on(HEARTBEAT, garbage)
    with connected(fake) as conn:
        first = conn.send(heartbeat(), api_version=0)
        drive(conn, first)
        error = first.exception()
        assert isinstance(error, ProtocolError)
        assert (error.api_key, error.api_version, error.broker) == (HEARTBEAT, 0, conn.broker)
        assert conn.state is ConnectionState.CLOSED


@pytest.mark.parametrize("size", [2**31 - 1, -5, 0])
def test_absurd_frame_size_is_a_protocol_error_and_closes(fake: FakeBroker, size: int) -> None:
    fake.on(HEARTBEAT, lambda conn, header, request: conn.send_raw(struct.pack(">i", size)))
    with connected(fake, max_response_bytes=1 << 20) as conn:
        first = conn.send(heartbeat(1))
        second = conn.send(heartbeat(2))
        drive(conn, first, second)
        error = first.exception()
        assert isinstance(error, ProtocolError)
        assert error.api_key == HEARTBEAT
        assert str(size) in str(error)
        assert isinstance(second.exception(), BrokerConnectionError)
        assert conn.state is ConnectionState.CLOSED


def test_unknown_correlation_id_is_a_protocol_error_and_closes(fake: FakeBroker) -> None:
    def wrong_id(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        bogus = RequestHeader(
            api_key=header.api_key,
            api_version=header.api_version,
            correlation_id=header.correlation_id + 1000,
            client_id=None,
        )
        conn.reply(bogus, HeartbeatResponse())

    fake.on(HEARTBEAT, wrong_id)
    with connected(fake) as conn:
        future = conn.send(heartbeat())
        drive(conn, future)
        error = future.exception()
        assert isinstance(error, ProtocolError)
        assert "correlation id" in str(error)
        assert error.broker == conn.broker
        assert conn.state is ConnectionState.CLOSED


def test_connect_refused_fails_queued_requests() -> None:
    with FakeBroker() as fake:
        port = fake.port
    conn = BrokerConnection("127.0.0.1", port)
    try:
        future = conn.send(heartbeat())
        drive(conn, future)
        error = future.exception()
        assert isinstance(error, BrokerConnectionError)
        assert f"127.0.0.1:{port}" in str(error)
        assert conn.state is ConnectionState.CLOSED
        assert not conn.was_ready
    finally:
        conn.close()


def test_send_after_close_fails_immediately(fake: FakeBroker) -> None:
    conn = connect(fake)
    conn.close()
    future = conn.send(heartbeat())
    assert future.done()
    assert isinstance(future.exception(), BrokerConnectionError)


def test_deliberate_close_fails_outstanding_requests(fake: FakeBroker) -> None:
    fake.on(HEARTBEAT, lambda conn, header, request: None)
    conn = connect(fake)
    drive_until_ready(conn)
    future = conn.send(heartbeat())
    conn.poll(0)
    conn.close()
    error = future.exception()
    assert isinstance(error, BrokerConnectionError)
    assert "closed" in str(error)


# --------------------------------------------------------------------------- negotiation


def test_api_versions_unsupported_falls_back_to_v0() -> None:
    with FakeBroker(api_versions_max=0) as fake:
        conn = connect(fake)
        try:
            drive_until_ready(conn)
            assert conn.state is ConnectionState.READY
            assert conn.handshake_version == 0
            keys = [k for k in fake.received_keys() if k[0] == ApiVersionsRequest.API_KEY]
            assert keys == [(18, 3), (18, 0)]
        finally:
            conn.close()


def test_api_versions_fallback_uses_the_version_the_broker_advertises() -> None:
    with FakeBroker(api_versions_max=2, advertise_api_versions_on_error=True) as fake:
        conn = connect(fake)
        try:
            drive_until_ready(conn)
            assert conn.state is ConnectionState.READY
            assert conn.handshake_version == 2
        finally:
            conn.close()


def test_negotiated_version_is_the_highest_common_one() -> None:
    versions = {18: (0, 3), 12: (1, 2), 3: (0, 20), 11: (0, 5)}
    with FakeBroker(versions=versions) as fake:
        conn = connect(fake)
        try:
            drive_until_ready(conn)
            assert conn.negotiated_version(HeartbeatRequest) == 2
            assert conn.negotiated_version(MetadataRequest) == MetadataRequest.MAX_VERSION
            assert conn.negotiated_version(JoinGroupRequest) == 5
        finally:
            conn.close()


def test_no_common_version_is_an_unsupported_version_error_naming_the_api() -> None:
    with FakeBroker(versions={18: (0, 3), 12: (5, 7)}) as fake:
        conn = connect(fake)
        try:
            no_overlap = conn.send(heartbeat())
            missing = conn.send(JoinGroupRequest(group_id="g"))
            drive(conn, no_overlap, missing)
            for future, name in ((no_overlap, "Heartbeat"), (missing, "JoinGroup")):
                error = future.exception()
                assert isinstance(error, KafkaError)
                assert error.code == 35
                assert name in str(error)
            # Only those requests failed: the connection is still good.
            assert conn.state is ConnectionState.READY
        finally:
            conn.close()


def test_pinned_version_outside_the_common_range_fails_that_request(fake: FakeBroker) -> None:
    with connected(fake) as conn:
        future = conn.send(heartbeat(), api_version=9)
        drive(conn, future)
        error = future.exception()
        assert isinstance(error, KafkaError)
        assert error.code == 35


@pytest.mark.parametrize(
    ("broker_range", "expected"),
    [((0, 9), 4), ((0, 2), 2), ((3, 3), 3), ((4, 9), 4)],
)
def test_choose_version(broker_range: tuple[int, int], expected: int) -> None:
    assert choose_version(HeartbeatRequest, broker_range) == expected


@pytest.mark.parametrize("broker_range", [(5, 9), None])
def test_choose_version_without_overlap(broker_range: tuple[int, int] | None) -> None:
    with pytest.raises(KafkaError, match="Heartbeat") as info:
        choose_version(HeartbeatRequest, broker_range, broker="b:1 (node 1)")
    assert info.value.code == 35
    assert info.value.broker == "b:1 (node 1)"


def test_connect_falls_through_to_the_next_resolved_address(
    fake: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeBroker() as dead:
        dead_port = dead.port

    def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        assert host == "kafka.example"
        # Like "localhost" resolving to ::1 (nobody listening) and then 127.0.0.1.
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", dead_port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", fake.port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    conn = BrokerConnection("kafka.example", fake.port)
    try:
        future = conn.send(heartbeat())
        drive(conn, future)
        assert future.result().error_code == 0
    finally:
        conn.close()


def test_unresolvable_host_fails_requests_with_a_connection_error() -> None:
    conn = BrokerConnection("no-such-host.invalid", 9092)
    try:
        future = conn.send(heartbeat())
        assert future.done()
        error = future.exception()
        assert isinstance(error, BrokerConnectionError)
        assert "no-such-host.invalid:9092" in str(error)
    finally:
        conn.close()


def test_handshake_error_code_closes_and_fails_queued_requests(fake: FakeBroker) -> None:
    fake.on(
        ApiVersionsRequest.API_KEY,
        lambda conn, header, request: conn.reply(header, ApiVersionsResponse(error_code=58)),
    )
    with connected(fake) as conn:
        future = conn.send(heartbeat())
        drive(conn, future)
        error = future.exception()
        assert isinstance(error, BrokerConnectionError)
        assert "ApiVersions" in str(error)
        assert "SASL_AUTHENTICATION_FAILED" in str(error)
        assert conn.state is ConnectionState.CLOSED
        assert not conn.was_ready


def test_garbage_handshake_answer_is_reported_as_a_protocol_error(fake: FakeBroker) -> None:
    fake.on(
        ApiVersionsRequest.API_KEY,
        lambda conn, header, request: conn.send_raw(
            frame(struct.pack(">i", header.correlation_id) + b"\x00")
        ),
    )
    with connected(fake) as conn:
        future = conn.send(heartbeat())
        drive(conn, future)
        error = future.exception()
        assert isinstance(error, BrokerConnectionError)
        assert isinstance(error.__cause__, ProtocolError)
        assert error.__cause__.api_key == ApiVersionsRequest.API_KEY
