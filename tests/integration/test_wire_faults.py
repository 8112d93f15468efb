"""Our wire client under faults injected into librdkafka's mock cluster (mock only).

Coordinator moves, brokers going down mid-request, injected error codes and dropped
connections, and version caps: each must surface as a typed error or a response error
code, never as a hang past the request timeout.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coopconsumer._errors import (
    BrokerConnectionError,
    KafkaError,
    RequestTimeoutError,
)
from coopconsumer._io import ClientConfig, KafkaClient, raise_for_error
from coopconsumer._member import MemberState
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import (
    FindCoordinatorRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    MetadataRequest,
)
from coopconsumer.testing import EmbeddedBroker
from integration._lookup import find_coordinator, member_lookup, wait_until

pytestmark = pytest.mark.integration

FIND_COORDINATOR = FindCoordinatorRequest.API_KEY
HEARTBEAT = HeartbeatRequest.API_KEY
#: librdkafka's RD_KAFKA_RESP_ERR__TRANSPORT: the mock drops the connection instead.
DROP_CONNECTION = -195


@pytest.fixture
def client(mock_broker: EmbeddedBroker) -> Iterator[KafkaClient]:
    with new_client(mock_broker) as kafka:
        yield kafka


def new_client(broker: EmbeddedBroker, **settings: int) -> KafkaClient:
    settings.setdefault("request_timeout_ms", 10_000)
    settings.setdefault("retry_backoff_ms", 10)
    settings.setdefault("reconnect_backoff_ms", 10)
    settings.setdefault("reconnect_backoff_max_ms", 100)
    return KafkaClient(ClientConfig.from_bootstrap(broker.bootstrap, **settings))


def join_request(group: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=6_000,
        rebalance_timeout_ms=3_000,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00"),),
    )


def heartbeat(group: str) -> HeartbeatRequest:
    return HeartbeatRequest(group_id=group, generation_id=1, member_id="nobody")


def other_broker(client: KafkaClient, node_id: int) -> int:
    return next(n for n in sorted(client.brokers()) if n != node_id)


# --------------------------------------------------------------------------- coordinator


def test_moved_coordinator_answers_not_coordinator_and_lookup_finds_the_new_one(
    mock_broker: EmbeddedBroker, client: KafkaClient, unique_group: str
) -> None:
    first = find_coordinator(client, unique_group)
    target = other_broker(client, first)
    mock_broker.set_coordinator(unique_group, target)
    stale: HeartbeatResponse = client.request(first, heartbeat(unique_group))
    assert stale.error_code == error_codes.NOT_COORDINATOR  # an answer, not an exception
    # The mock writes null into the non-nullable strings of error answers; the codec
    # reads those as empty, so the code still comes through.
    stale_join: JoinGroupResponse = client.request(first, join_request(unique_group))
    assert stale_join.error_code == error_codes.NOT_COORDINATOR
    with pytest.raises(KafkaError) as info:
        raise_for_error(stale, broker=client.broker_name(first))
    assert info.value.code == error_codes.NOT_COORDINATOR
    assert info.value.retriable
    assert find_coordinator(client, unique_group) == target
    moved: JoinGroupResponse = client.request(target, join_request(unique_group))
    assert moved.error_code in (0, error_codes.MEMBER_ID_REQUIRED)


def test_the_member_lookup_retries_injected_retriable_errors(
    mock_broker: EmbeddedBroker, unique_group: str
) -> None:
    mock_broker.push_request_errors(
        FIND_COORDINATOR,
        [
            error_codes.COORDINATOR_NOT_AVAILABLE,
            error_codes.COORDINATOR_LOAD_IN_PROGRESS,
            error_codes.NOT_COORDINATOR,
        ],
    )
    mock_broker.clear_requests()
    mock_broker.start_request_tracking()
    try:
        with member_lookup(mock_broker.bootstrap, unique_group) as (driver, member):
            assert wait_until(lambda: member.coordinator_id is not None), driver.failure
            lookups = [r for r in mock_broker.requests() if r.api_key == FIND_COORDINATOR]
    finally:
        mock_broker.stop_request_tracking()
    assert len(lookups) == 4  # three injected failures, then the answer


def test_the_member_lookup_is_fatal_for_a_non_retriable_injected_error(
    mock_broker: EmbeddedBroker, unique_group: str
) -> None:
    mock_broker.push_request_errors(FIND_COORDINATOR, [error_codes.GROUP_AUTHORIZATION_FAILED])
    with member_lookup(mock_broker.bootstrap, unique_group) as (driver, _):
        assert driver.wait_for(lambda: driver.state is MemberState.FATAL, 15.0)
        assert driver.take_app_work()  # the Fatal for poll()


def test_the_member_lookup_single_key_form_below_v4(
    mock_broker: EmbeddedBroker, unique_group: str
) -> None:
    mock_broker.set_api_version(FIND_COORDINATOR, 0, 3)
    with member_lookup(mock_broker.bootstrap, unique_group) as (driver, member):
        assert wait_until(lambda: member.coordinator_id is not None), driver.failure
    with new_client(mock_broker) as kafka:
        node = find_coordinator(kafka, unique_group)
        assert kafka.negotiated_version(node, FindCoordinatorRequest) == 3


# --------------------------------------------------------------------------- error codes


def test_injected_error_codes_come_back_in_responses(
    mock_broker: EmbeddedBroker, client: KafkaClient, unique_group: str
) -> None:
    node = find_coordinator(client, unique_group)
    mock_broker.push_request_errors(
        HEARTBEAT, [error_codes.REBALANCE_IN_PROGRESS, error_codes.ILLEGAL_GENERATION]
    )
    first: HeartbeatResponse = client.request(node, heartbeat(unique_group))
    second: HeartbeatResponse = client.request(node, heartbeat(unique_group))
    third: HeartbeatResponse = client.request(node, heartbeat(unique_group))
    assert first.error_code == error_codes.REBALANCE_IN_PROGRESS
    assert second.error_code == error_codes.ILLEGAL_GENERATION
    # Past the injected ones, the mock's own answer for a member it does not know.
    assert third.error_code not in (
        0,
        error_codes.REBALANCE_IN_PROGRESS,
        error_codes.ILLEGAL_GENERATION,
    )


def test_dropped_connection_fails_the_request_then_the_client_reconnects(
    mock_broker: EmbeddedBroker, client: KafkaClient, unique_group: str
) -> None:
    node = find_coordinator(client, unique_group)
    mock_broker.push_request_errors(HEARTBEAT, [DROP_CONNECTION])
    with pytest.raises(BrokerConnectionError) as info:
        client.request(node, heartbeat(unique_group))
    assert "Heartbeat" in str(info.value)
    assert info.value.broker == client.broker_name(node)
    after: HeartbeatResponse = client.request(node, heartbeat(unique_group))
    assert after.error_code != 0  # answered again (UNKNOWN_MEMBER_ID or similar)


def test_removed_api_is_an_unsupported_version_error(
    mock_broker: EmbeddedBroker, unique_group: str
) -> None:
    mock_broker.set_api_version(HEARTBEAT, -1, -1)
    with new_client(mock_broker) as kafka:
        node = find_coordinator(kafka, unique_group)
        with pytest.raises(KafkaError) as info:
            kafka.request(node, heartbeat(unique_group))
        assert info.value.code == error_codes.UNSUPPORTED_VERSION
        assert "Heartbeat" in str(info.value)
        # Other APIs on the same connection are unaffected.
        kafka.request(node, MetadataRequest(topics=()), api_version=1)


# --------------------------------------------------------------------------- brokers down


def test_broker_down_during_a_request_is_a_typed_error_not_a_hang(
    mock_broker: EmbeddedBroker, client: KafkaClient
) -> None:
    client.metadata(topics=())
    node = min(client.brokers())
    # Hold every answer of that broker so the request is surely in flight.
    mock_broker.set_broker_rtt(node, 60_000)
    future = client.send(node, MetadataRequest(topics=()), timeout_ms=20_000)
    for _ in range(50):
        client.poll(0.01)
    assert not future.done()
    mock_broker.set_broker_down(node)
    for _ in range(3000):
        if future.done():
            break
        client.poll(0.01)
    error = future.exception()
    assert isinstance(error, (BrokerConnectionError, RequestTimeoutError))
    assert error.broker == client.broker_name(node)
    # While it is down, requests fail (refused or timed out) within their timeout.
    with pytest.raises((BrokerConnectionError, RequestTimeoutError)):
        client.request(node, MetadataRequest(topics=()), timeout_ms=1_000)
    mock_broker.set_broker_rtt(node, 0)
    mock_broker.set_broker_up(node)
    for _ in range(100):
        try:
            client.request(node, MetadataRequest(topics=()), timeout_ms=2_000)
            break
        except BrokerConnectionError:
            client.poll(0.05)  # wait out the reconnect backoff
    else:
        raise AssertionError("the broker never came back")
    assert client.connection_failures(node) == 0


def test_all_brokers_down_metadata_raises_within_its_timeout(
    mock_broker: EmbeddedBroker,
) -> None:
    mock_broker.set_broker_down(-1)
    with (
        new_client(mock_broker) as kafka,
        pytest.raises((BrokerConnectionError, RequestTimeoutError)),
    ):
        kafka.metadata(timeout_ms=2_000)
