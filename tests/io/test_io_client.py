"""KafkaClient against the in-process fake broker: bootstrap, metadata, coordinator
lookup with retries, reconnect backoff, wakeup and file-descriptor hygiene."""

from __future__ import annotations

import contextlib
import gc
import os
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _fake_broker import FakeBroker, FakeConn, ManualClock

from coopconsumer._errors import (
    BrokerConnectionError,
    ConfigurationError,
    KafkaError,
    ProtocolError,
    RequestTimeoutError,
)
from coopconsumer._io import (
    ClientConfig,
    KafkaClient,
    PendingRequest,
    coordinator_answer,
    find_coordinator_request,
    raise_for_error,
)
from coopconsumer._io._member_driver import Driver
from coopconsumer._member import GroupMember, MemberConfig, MemberState, Subscribe
from coopconsumer._metrics import CoordinatorMetrics
from coopconsumer._protocol import RequestHeader, encode
from coopconsumer._protocol._schema import Request
from coopconsumer._protocol.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    MetadataRequest,
)
from coopconsumer.assignors import load_assignors

WAIT_S = 10.0
HEARTBEAT = HeartbeatRequest.API_KEY
FIND_COORDINATOR = FindCoordinatorRequest.API_KEY


@pytest.fixture
def fake() -> Iterator[FakeBroker]:
    with FakeBroker(node_id=7) as broker:
        broker.topics = {"orders": 3, "payments": 1}
        yield broker


def make_client(bootstrap: str, **kwargs: Any) -> KafkaClient:
    kwargs.setdefault("request_timeout_ms", 5_000)
    return KafkaClient(ClientConfig.from_bootstrap(bootstrap, **kwargs), rng=random.Random(7))


def drive(client: KafkaClient, *futures: PendingRequest[Any]) -> None:
    for _ in range(int(WAIT_S / 0.01)):
        if all(f.done() for f in futures):
            return
        client.poll(0.01)
    raise AssertionError("requests did not complete")


def heartbeat() -> HeartbeatRequest:
    return HeartbeatRequest(group_id="g", generation_id=1, member_id="m")


def open_fds() -> set[str]:
    """This process's open descriptors, after a garbage collection: an earlier test's
    librdkafka client kept alive by a reference cycle would otherwise still be opening
    and closing sockets in its own threads (and close them when collected)."""
    gc.collect()
    return set(os.listdir("/proc/self/fd"))


# --------------------------------------------------------------------------- metadata


def test_metadata_bootstraps_and_learns_brokers_and_partition_counts(fake: FakeBroker) -> None:
    with make_client(f"localhost:1,{fake.bootstrap}", reconnect_backoff_ms=1) as client:
        # The first bootstrap server refuses connections; the second answers.
        snapshot = client.metadata()
        assert snapshot.partition_counts() == {"orders": 3, "payments": 1}
        assert set(snapshot.brokers) == {7}
        assert client.brokers()[7].port == fake.port
        assert client.cluster is snapshot
        only = client.metadata(["orders"])
        assert set(only.topics) == {"orders"}
        assert only.topics["orders"].partitions[2].leader_id == 7
        # After bootstrap, requests go to the learned node id.
        response = client.request(7, heartbeat())
        assert isinstance(response, HeartbeatResponse)


def test_request_any_uses_bootstrap_before_metadata(fake: FakeBroker) -> None:
    with make_client(fake.bootstrap) as client:
        response = client.request_any(heartbeat())
        assert response.error_code == 0
        assert client.least_loaded_node() == -1  # the bootstrap entry


def test_metadata_with_all_bootstrap_servers_down_raises_connection_error() -> None:
    with FakeBroker() as dead:
        port = dead.port
    with (
        make_client(f"127.0.0.1:{port}") as client,
        pytest.raises(BrokerConnectionError, match=str(port)),
    ):
        client.metadata()


def test_send_to_unknown_node_fails_the_request(fake: FakeBroker) -> None:
    with make_client(fake.bootstrap) as client:
        future = client.send(99, heartbeat())
        assert future.done()
        assert isinstance(future.exception(), BrokerConnectionError)
        with pytest.raises(BrokerConnectionError, match="99"):
            client.request(99, heartbeat())


def test_negotiated_version_connects_first(fake: FakeBroker) -> None:
    fake.versions[HEARTBEAT] = (0, 2)
    with make_client(fake.bootstrap) as client:
        assert client.try_negotiated_version(-1, HEARTBEAT) is None  # starts connecting
        assert client.negotiated_version(-1, HEARTBEAT) == 2
        assert client.negotiated_version(-1, MetadataRequest) == MetadataRequest.MAX_VERSION
        assert client.try_negotiated_version(-1, HeartbeatRequest) == 2
        assert client.api_versions(-1)[HEARTBEAT] == (0, 2)


# --------------------------------------------------------------------------- coordinator


# The group member looks its coordinator up itself (_member/_discovery.py): these
# run that lookup through the driver and this client against the fake broker.


@contextlib.contextmanager
def member_lookup(fake: FakeBroker) -> Iterator[tuple[Driver, GroupMember, threading.Event]]:
    """A subscribed member on a driver thread; the event is set by its first JoinGroup,
    sent to the coordinator it found (and left unanswered)."""
    joined = threading.Event()
    fake.versions[JoinGroupRequest.API_KEY] = (0, 9)
    fake.on(JoinGroupRequest.API_KEY, lambda conn, header, request: joined.set())
    client = make_client(fake.bootstrap, retry_backoff_ms=1, retry_backoff_max_ms=5)
    member = GroupMember(
        MemberConfig(group_id="grp", retry_backoff_ms=1), load_assignors(["range"])
    )
    driver = Driver(member, client, CoordinatorMetrics(), request_timeout_ms=5_000)
    driver.start()
    try:
        driver.request(Subscribe(topics=frozenset({"orders"})), WAIT_S)
        yield driver, member, joined
    finally:
        driver.stop(WAIT_S)


@pytest.mark.parametrize("max_version", [3, 6])
def test_the_member_lookup_retries_retriable_codes(fake: FakeBroker, max_version: int) -> None:
    fake.versions[FIND_COORDINATOR] = (0, max_version)
    answers = [15, 14, 16, 0]  # not available, loading, not coordinator, found

    def flaky(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        assert isinstance(request, FindCoordinatorRequest)
        if header.api_version >= 4:
            assert request.coordinator_keys == ("grp",)
        else:
            assert request.key == "grp"
        conn.reply(header, fake.coordinator_response(header, request, error_code=answers.pop(0)))

    fake.on(FIND_COORDINATOR, flaky)
    with member_lookup(fake) as (driver, member, joined):
        assert joined.wait(WAIT_S), driver.failure
        # Node 7's coordinator connection (Java's Integer.MAX_VALUE - node id).
        assert member.coordinator_id == 2**31 - 1 - 7
        assert answers == []
        versions = {v for k, v in fake.received_keys() if k == FIND_COORDINATOR}
        assert versions == {max_version}


def test_the_member_lookup_is_fatal_for_an_authorization_error(fake: FakeBroker) -> None:
    calls: list[int] = []

    def denied(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        assert isinstance(request, FindCoordinatorRequest)
        calls.append(1)
        conn.reply(header, fake.coordinator_response(header, request, error_code=30))

    fake.on(FIND_COORDINATOR, denied)
    with member_lookup(fake) as (driver, _, joined):
        assert driver.wait_for(lambda: driver.state is MemberState.FATAL, WAIT_S)
        assert not joined.is_set()
    assert len(calls) == 1


def test_coordinator_gets_a_connection_of_its_own(fake: FakeBroker) -> None:
    # Kafka answers one request per connection at a time (it mutes the channel), and
    # the coordinator parks JoinGroup; this fake does the same on the connection that
    # holds a parked request. Metadata must not queue behind it.
    parked: list[tuple[FakeConn, RequestHeader]] = []

    def park(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        parked.append((conn, header))  # stands in for a JoinGroup held by the broker

    def muted_while_parked(conn: FakeConn, header: RequestHeader, request: Request) -> None:
        if not any(held is conn for held, _h in parked):
            fake.default_handle(conn, header, request)

    fake.on(HEARTBEAT, park)
    fake.on(MetadataRequest.API_KEY, muted_while_parked)
    with make_client(fake.bootstrap) as client:
        client.metadata()
        assert client.brokers().keys() == {7}
        client.request(7, MetadataRequest(topics=()))  # node 7 has a connection now
        coordinator = client.add_coordinator(7, "127.0.0.1", fake.port)
        assert coordinator not in (7, -1)
        assert coordinator not in client.brokers()
        assert client.broker_name(coordinator).endswith("(coordinator, node 7)")
        held = client.send(coordinator, heartbeat())
        for _ in range(int(WAIT_S / 0.01)):
            if parked:
                break
            client.poll(0.01)
        assert parked
        assert client.least_loaded_node() == 7  # never the coordinator's connection
        assert set(client.metadata(timeout_ms=2_000).brokers) == {7}
        assert not held.done()
        conn, header = parked[0]
        conn.reply(header, HeartbeatResponse(error_code=0))
        drive(client, held)
        assert held.result().error_code == 0
        assert client.add_coordinator(7, "127.0.0.1", fake.port) == coordinator


# --------------------------------------------------------------------------- errors


def test_response_error_codes_are_returned_not_raised(fake: FakeBroker) -> None:
    fake.on(HEARTBEAT, lambda c, h, r: c.reply(h, HeartbeatResponse(error_code=27)))
    with make_client(fake.bootstrap) as client:
        future = client.send(-1, heartbeat())
        drive(client, future)
        response = future.result()
        assert response.error_code == 27
        with pytest.raises(KafkaError) as info:
            raise_for_error(response, version=future.api_version, broker=client.broker_name(-1))
        assert info.value.code == 27
        assert info.value.name == "REBALANCE_IN_PROGRESS"
        assert info.value.api_key == HEARTBEAT
        raise_for_error(HeartbeatResponse(error_code=0))
        raise_for_error(JoinGroupResponse())


def test_request_timeout_through_the_client_names_api_and_broker(fake: FakeBroker) -> None:
    fake.on(HEARTBEAT, lambda c, h, r: None)
    with make_client(fake.bootstrap) as client:
        # Negotiate first: a request that times out while still queued behind a slow
        # handshake leaves the connection open, and this test is about a written one.
        client.negotiated_version(-1, HeartbeatRequest)
        with pytest.raises(RequestTimeoutError) as info:
            client.request(-1, heartbeat(), timeout_ms=50)
        assert info.value.api_key == HEARTBEAT
        assert info.value.broker == client.broker_name(-1)
        # The connection was replaced: the next request works again.
        fake.on(HEARTBEAT, lambda c, h, r: c.reply(h, HeartbeatResponse()))
        assert client.request(-1, heartbeat()).error_code == 0
        assert fake.connections == 2


def test_callbacks_run_on_poll_and_a_raising_callback_does_not_break_the_loop(
    fake: FakeBroker,
) -> None:
    seen: list[str] = []

    def bad(_: PendingRequest[Any]) -> None:
        raise RuntimeError("callback bug")

    with make_client(fake.bootstrap) as client:
        first = client.send(-1, heartbeat())
        second = client.send(-1, heartbeat())
        first.add_done_callback(bad)
        second.add_done_callback(lambda f: seen.append("second"))
        drive(client, first, second)
        client.poll(0)
        assert seen == ["second"]
        with pytest.raises(RuntimeError, match="not done"):
            client.send(-1, heartbeat()).result()


def test_close_fails_outstanding_requests_and_later_sends(fake: FakeBroker) -> None:
    fake.on(HEARTBEAT, lambda c, h, r: None)
    client = make_client(fake.bootstrap)
    future = client.send(-1, heartbeat())
    client.poll(0.05)
    client.close()
    assert isinstance(future.exception(), BrokerConnectionError)
    late = client.send(-1, heartbeat())
    assert isinstance(late.exception(), BrokerConnectionError)
    client.close()  # idempotent


# --------------------------------------------------------------------------- reconnect


def test_reconnect_backoff_grows_then_resets_after_a_good_connection() -> None:
    with FakeBroker() as probe:
        port = probe.port  # free once the probe stops
    base, cap = 10, 80
    clock = ManualClock()
    config = ClientConfig.from_bootstrap(
        f"127.0.0.1:{port}", reconnect_backoff_ms=base, reconnect_backoff_max_ms=cap
    )
    client = KafkaClient(config, rng=random.Random(3), clock=clock)
    try:
        chosen: list[float] = []
        for attempt in range(6):
            future = client.send(-1, heartbeat(), timeout_ms=60_000)
            drive(client, future)
            assert isinstance(future.exception(), BrokerConnectionError)
            assert client.connection_failures(-1) == attempt + 1
            delay = client.last_reconnect_backoff_ms(-1)
            chosen.append(delay)
            # While backing off, no connection is attempted and requests wait.
            assert client.reconnect_delay_ms(-1) == pytest.approx(delay)
            assert not client.ready(-1)
            assert client.connection_failures(-1) == attempt + 1
            clock.now += delay / 1000.0
        for attempt, delay in enumerate(chosen):
            expected = min(base * 2**attempt, cap)
            assert expected * 0.8 <= delay <= expected * 1.2, (attempt, chosen)
        # A broker appears on that port: the next connection succeeds and resets.
        with FakeBroker(port=port) as fake:
            future = client.send(-1, heartbeat(), timeout_ms=60_000)
            drive(client, future)
            assert future.result().error_code == 0
            assert client.connection_failures(-1) == 0
            fake.drop_connections()
            for _ in range(int(WAIT_S / 0.01)):
                client.poll(0.01)
                if not client.ready_now(-1):
                    break
            # Losing a good connection waits only the first backoff step again.
            assert client.last_reconnect_backoff_ms(-1) <= base * 1.2
            assert client.connection_failures(-1) == 0
    finally:
        client.close()


def test_requests_sent_during_backoff_wait_and_then_go_out() -> None:
    with FakeBroker() as probe:
        port = probe.port
    clock = ManualClock()
    config = ClientConfig.from_bootstrap(f"127.0.0.1:{port}", reconnect_backoff_ms=200)
    client = KafkaClient(config, rng=random.Random(5), clock=clock)
    try:
        failed = client.send(-1, heartbeat())
        drive(client, failed)
        assert isinstance(failed.exception(), BrokerConnectionError)
        with FakeBroker(port=port) as fake:
            waiting = client.send(-1, heartbeat())
            for _ in range(20):
                client.poll(0.01)
            # Still in backoff: parked, not sent, no connection attempted.
            assert not waiting.done()
            assert client.in_flight_count(-1) == 1
            assert fake.connections == 0
            clock.now += client.reconnect_delay_ms(-1) / 1000.0
            drive(client, waiting)
            assert waiting.result().error_code == 0
            assert fake.connections == 1
    finally:
        client.close()


def test_request_waiting_out_a_backoff_still_times_out() -> None:
    with FakeBroker() as probe:
        port = probe.port
    client = make_client(
        f"127.0.0.1:{port}", reconnect_backoff_ms=60_000, reconnect_backoff_max_ms=60_000
    )
    try:
        drive(client, client.send(-1, heartbeat()))
        parked = client.send(-1, heartbeat(), timeout_ms=30)
        drive(client, parked)
        error = parked.exception()
        assert isinstance(error, RequestTimeoutError)
        assert error.api_key == HEARTBEAT
    finally:
        client.close()


def test_idle_connections_are_closed_and_reopened_on_demand(fake: FakeBroker) -> None:
    with make_client(fake.bootstrap, connections_max_idle_ms=30) as client:
        assert client.request(-1, heartbeat()).error_code == 0
        for _ in range(int(WAIT_S / 0.01)):
            client.poll(0.01)
            if client.in_flight_count(-1) == 0 and not client.ready_now(-1):
                break
        assert not client.ready_now(-1)
        # An idle close is not a failure: no backoff, and the next request reconnects.
        assert client.connection_failures(-1) == 0
        assert client.reconnect_delay_ms(-1) == 0
        assert client.request(-1, heartbeat()).error_code == 0
        assert fake.connections == 2


# --------------------------------------------------------------------------- threads, fds


def test_wakeup_from_another_thread_ends_a_long_poll(fake: FakeBroker) -> None:
    client = make_client(fake.bootstrap)
    returned = threading.Event()

    def long_poll() -> None:
        client.poll(60.0)
        returned.set()

    try:
        worker = threading.Thread(target=long_poll, daemon=True)
        worker.start()
        while not returned.is_set():
            client.wakeup()
            returned.wait(0.01)
        worker.join(WAIT_S)
        assert not worker.is_alive()
    finally:
        client.close()
    client.wakeup()  # harmless after close


def test_no_file_descriptor_leaks_on_any_path() -> None:
    before = open_fds()
    with FakeBroker() as probe:
        dead_port = probe.port
    with FakeBroker(node_id=3) as fake:
        fake.topics = {"t": 2}

        def misbehave(conn: FakeConn, header: RequestHeader, request: Request) -> None:
            assert isinstance(request, HeartbeatRequest)
            if request.generation_id == 1:
                conn.send_raw(b"\x7f\xff\xff\xff")  # absurd size
            elif request.generation_id == 2:
                conn.close()  # hang up mid-request
            elif request.generation_id == 3:
                return  # never answer: timeout
            else:
                conn.reply(header, HeartbeatResponse())

        fake.on(HEARTBEAT, misbehave)
        for _ in range(3):
            client = make_client(f"127.0.0.1:{dead_port},{fake.bootstrap}", reconnect_backoff_ms=1)
            try:
                with pytest.raises(BrokerConnectionError):
                    client.request(-1, heartbeat())
                client.metadata()
                for generation, error in (
                    (1, ProtocolError),
                    (2, BrokerConnectionError),
                    (3, RequestTimeoutError),
                ):
                    # Only the unanswered request gets a short timeout: the others must
                    # fail for their own reason even when a loaded machine stalls the
                    # reconnect after the previous failure.
                    with pytest.raises(error):
                        client.request(
                            3,
                            HeartbeatRequest(group_id="g", generation_id=generation),
                            timeout_ms=100 if error is RequestTimeoutError else None,
                        )
                fine = HeartbeatRequest(group_id="g", generation_id=0)
                assert client.request(3, fine).error_code == 0
            finally:
                client.close()
    assert open_fds() == before


# --------------------------------------------------------------------------- config


def test_config_from_bootstrap_parses_and_validates() -> None:
    config = ClientConfig.from_bootstrap(
        " h1:9092, PLAINTEXT://h2:9093,[::1]:9094 ", client_id="x", request_timeout_ms=5
    )
    assert config.bootstrap_servers == (("h1", 9092), ("h2", 9093), ("::1", 9094))
    assert config.client_id == "x"
    assert ClientConfig.from_bootstrap(["a:1"]).bootstrap_servers == (("a", 1),)
    assert ClientConfig(bootstrap_servers=(("a", 1),)).bootstrap_servers == (("a", 1),)


@pytest.mark.parametrize(
    ("servers", "settings"),
    [
        ("", {}),
        ("nohost", {}),
        ("h:0", {}),
        ("h:70000", {}),
        ("h:x", {}),
        ("https://h:1", {}),
        ("h:1", {"request_timeout_ms": 0}),
        ("h:1", {"reconnect_backoff_ms": -1}),
        ("h:1", {"request_timeout_ms": 1.5}),
        ("h:1", {"retry_backoff_ms": True}),
        ("h:1", {"no_such_setting": 1}),
        ("h:1", {"receive_message_max_bytes": 3}),
    ],
)
def test_config_rejects_bad_values(servers: str, settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        ClientConfig.from_bootstrap(servers, **settings)


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize("version", range(FindCoordinatorRequest.MAX_VERSION + 1))
def test_find_coordinator_request_encodes_at_every_version(version: int) -> None:
    request = find_coordinator_request("grp", version)
    encode(request, version)  # raises if a field does not exist at that version
    if version >= 4:
        assert request.coordinator_keys == ("grp",)
    else:
        assert request.key == "grp"


def test_find_coordinator_request_v0_cannot_look_up_transactions() -> None:
    with pytest.raises(ConfigurationError):
        find_coordinator_request("txn", 0, key_type=1)


def test_coordinator_answer_reads_both_layouts() -> None:
    single = FindCoordinatorResponse(error_code=0, node_id=4, host="h", port=9)
    assert coordinator_answer(single, "g", 3).node_id == 4
    batched = FindCoordinatorResponse(
        coordinators=(
            FindCoordinatorResponseCoordinator(key="other", node_id=1, host="a", port=1),
            FindCoordinatorResponseCoordinator(key="g", node_id=2, host="b", port=2, error_code=0),
        )
    )
    answer = coordinator_answer(batched, "g", 4)
    assert (answer.node_id, answer.host, answer.port, answer.error_code) == (2, "b", 2, 0)
    missing = coordinator_answer(batched, "nope", 4)
    assert missing.error_code == -1  # UNKNOWN_SERVER_ERROR
