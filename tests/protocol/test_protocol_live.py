"""Every declared request, at every version both sides support, against real
Kafka-protocol brokers (Apache Kafka, Tansu and librdkafka's mock cluster): the broker
must accept our bytes and its answer must parse exactly, with no bytes left over.

This checks the declarations against Kafka itself, whose generated message classes the
specs are, and two independent implementations of the specs,
which the golden bytes (written from the specs by hand) cannot do on their own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any, TypeVar

import attrs
import pytest

from coopconsumer import TopicPartition
from coopconsumer._protocol import (
    Request,
    Response,
    decode,
    decode_response,
    encode_request,
    errors,
    response_header_version,
)
from coopconsumer._protocol._codec import read_uvarint
from coopconsumer._protocol._schema import field_meta
from coopconsumer._protocol.messages import (
    ALL_REQUESTS,
    ApiVersionsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
    MemberIdentity,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from coopconsumer.assignors import Assignment, Subscription
from coopconsumer.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from coopconsumer.testing import BOOTSTRAP_ENV, EmbeddedBroker, embedded_broker

pytestmark = pytest.mark.integration

TOPIC = "protocol-live"
GROUP = "protocol-live-group"


def _requests() -> list[Request]:
    partition = ListOffsetsPartition(partition_index=0, timestamp=-1)
    commit = OffsetCommitRequestPartition(partition_index=0, committed_offset=1)
    return [
        ApiVersionsRequest(client_software_name="coopconsumer", client_software_version="0"),
        MetadataRequest(topics=(MetadataRequestTopic(name=TOPIC),)),
        FindCoordinatorRequest(key=GROUP, coordinator_keys=(GROUP,)),
        DescribeGroupsRequest(groups=(GROUP,)),
        ListGroupsRequest(),
        ListOffsetsRequest(topics=(ListOffsetsTopic(name=TOPIC, partitions=(partition,)),)),
        OffsetFetchRequest(
            group_id=GROUP,
            topics=(OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),),
            groups=(
                OffsetFetchRequestGroup(
                    group_id=GROUP,
                    topics=(OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0,)),),
                ),
            ),
        ),
        HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="nobody"),
        LeaveGroupRequest(
            group_id=GROUP, member_id="nobody", members=(MemberIdentity(member_id="nobody"),)
        ),
        SyncGroupRequest(group_id=GROUP, generation_id=1, member_id="nobody"),
        OffsetCommitRequest(
            group_id=GROUP,
            topics=(OffsetCommitRequestTopic(name=TOPIC, partitions=(commit,)),),
        ),
    ]


def _at_version(request: Request, version: int) -> Any:
    """``request`` with the fields that do not exist at ``version`` reset to defaults."""
    reset = {
        field.name: field.default
        for field in attrs.fields(type(request))  # type: ignore[arg-type]
        if (meta := field_meta(field)) is not None and version not in meta.versions
    }
    return attrs.evolve(request, **reset)  # type: ignore[misc]


class _Wire:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation_id = 0

    def call(self, request: Request, version: int) -> bytes:
        self.correlation_id += 1
        frame = encode_request(
            request, api_version=version, correlation_id=self.correlation_id, client_id="live"
        )
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", self._read(4))
        return self._read(size)

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return buf


@pytest.fixture(scope="module", params=["kafka", "tansu", "mock"])
def live(request: pytest.FixtureRequest) -> Iterator[tuple[str, EmbeddedBroker, _Wire]]:
    if os.environ.get(BOOTSTRAP_ENV, "").strip():
        pytest.skip(f"{BOOTSTRAP_ENV} is set: only the external cluster is used")
    kind: str = request.param
    with contextlib.ExitStack() as stack:
        if kind == "kafka":  # the session's (tests/conftest.py)
            broker: EmbeddedBroker = request.getfixturevalue("kafka_broker")
        else:
            broker = stack.enter_context(embedded_broker(kind))  # type: ignore[arg-type]
        broker.create_topic(TOPIC, 1)  # once per worker: the fixture is the module's
        wire = _Wire(broker.bootstrap)
        try:
            yield kind, broker, wire
        finally:
            wire.sock.close()


def _body(frame: bytes, request: Request, version: int) -> bytes:
    pos = 4
    if response_header_version(type(request).RESPONSE_TYPE, version) == 1:
        count, pos = read_uvarint(frame, pos)
        assert count == 0
    return frame[pos:]


@pytest.mark.parametrize("request_", _requests(), ids=lambda r: type(r).__name__)
def test_broker_accepts_our_requests_and_its_answers_parse_exactly(
    live: tuple[str, EmbeddedBroker, _Wire], request_: Request
) -> None:
    kind, broker, wire = live
    cls = type(request_)
    assert ALL_REQUESTS[cls.API_KEY] is cls
    if cls.API_KEY not in broker.api_versions:
        pytest.skip(f"{kind} does not implement API key {cls.API_KEY}")
    low, high = broker.api_versions[cls.API_KEY]
    versions = range(max(low, cls.MIN_VERSION), min(high, cls.MAX_VERSION) + 1)
    assert versions, f"{kind} shares no version of {cls.__name__}"
    for version in versions:
        message = _at_version(request_, version)
        frame = wire.call(message, version)
        correlation_id, response = decode_response(cls, frame, api_version=version)
        assert correlation_id == wire.correlation_id
        assert isinstance(response, cls.RESPONSE_TYPE)
        body = _body(frame, message, version)
        if kind == "mock" and cls.RESPONSE_TYPE is MetadataResponse and version >= 9:
            # librdkafka's mock cluster appends one stray byte to flexible Metadata
            # responses (Tansu does not); decode_response ignores trailing bytes.
            body = body[:-1]
        assert decode(cls.RESPONSE_TYPE, body, version, exact=True) == response


def _common_versions(broker: EmbeddedBroker, cls: type[Request]) -> range:
    low, high = broker.api_versions[cls.API_KEY]
    return range(max(low, cls.MIN_VERSION), min(high, cls.MAX_VERSION) + 1)


@pytest.mark.slow  # Tansu holds each JoinGroup for about a second
def test_a_member_joins_syncs_heartbeats_and_leaves_at_every_join_group_version(
    live: tuple[str, EmbeddedBroker, _Wire],
) -> None:
    kind, broker, wire = live
    if kind == "mock":
        broker.set_group_initial_rebalance_delay_ms(0)
    sync_version = _common_versions(broker, SyncGroupRequest)[-1]
    heartbeat_version = _common_versions(broker, HeartbeatRequest)[-1]
    leave_version = _common_versions(broker, LeaveGroupRequest)[-1]
    subscription = encode_subscription(Subscription(topics=[TOPIC]))
    assignment = encode_assignment(Assignment(partitions=[TopicPartition(TOPIC, 0)]))
    for version in _common_versions(broker, JoinGroupRequest):
        group = f"{GROUP}-join-v{version}"
        _wait_for_coordinator(wire, broker, group)
        join = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=2000,
            rebalance_timeout_ms=2000,
            protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=subscription),),
            reason="protocol test",
        )
        joined = _join(wire, join, version)
        if joined.error_code == errors.MEMBER_ID_REQUIRED:
            # KIP-394 (v4+); Tansu asks for it at every version, the mock never does.
            join = attrs.evolve(join, member_id=joined.member_id)
            joined = _join(wire, join, version)
        assert joined.error_code == errors.NONE, (version, joined)
        assert joined.leader == joined.member_id
        assert joined.protocol_name == "range"
        assert [m.member_id for m in joined.members] == [joined.member_id]
        assert decode_subscription(joined.members[0].metadata).topics == (TOPIC,)
        synced = _call(
            wire,
            SyncGroupRequest(
                group_id=group,
                generation_id=joined.generation_id,
                member_id=joined.member_id,
                protocol_type="consumer",
                protocol_name="range",
                assignments=(
                    SyncGroupRequestAssignment(member_id=joined.member_id, assignment=assignment),
                ),
            ),
            sync_version,
            SyncGroupResponse,
        )
        assert synced.error_code == errors.NONE, (version, synced)
        assert decode_assignment(synced.assignment).partitions == (TopicPartition(TOPIC, 0),)
        beat = _call(
            wire,
            HeartbeatRequest(
                group_id=group, generation_id=joined.generation_id, member_id=joined.member_id
            ),
            heartbeat_version,
            HeartbeatResponse,
        )
        assert beat.error_code == errors.NONE, (version, beat)
        left = _call(
            wire,
            _at_version(
                LeaveGroupRequest(
                    group_id=group,
                    member_id=joined.member_id,
                    members=(MemberIdentity(member_id=joined.member_id),),
                ),
                leave_version,
            ),
            leave_version,
            LeaveGroupResponse,
        )
        assert left.error_code == errors.NONE, (version, left)


R = TypeVar("R", bound=Response)


#: Retried as a client retries them: the coordinator is not (yet) serving the group.
_NOT_YET = frozenset(
    {errors.COORDINATOR_LOAD_IN_PROGRESS, errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR}
)


def _join(wire: _Wire, join: JoinGroupRequest, version: int) -> JoinGroupResponse:
    """JoinGroup, again while the coordinator is not serving the group yet: Kafka names
    itself in FindCoordinator as soon as ``__consumer_offsets`` exists and answers the
    first JoinGroup NOT_COORDINATOR until the group's partition is loaded (measured on
    Kafka 4.4; the stand-ins coordinate at once)."""
    deadline = time.monotonic() + 30
    while True:
        joined = _call(wire, _at_version(join, version), version, JoinGroupResponse)
        if joined.error_code not in _NOT_YET:
            return joined
        assert time.monotonic() < deadline, (version, joined)
        time.sleep(0.1)


def _wait_for_coordinator(wire: _Wire, broker: EmbeddedBroker, group: str) -> None:
    """Ask FindCoordinator for ``group`` until it names one, as a client does before
    its JoinGroup: Kafka creates ``__consumer_offsets`` on the first such request (the
    stand-ins coordinate at once; the bootstrap broker is Kafka's one node)."""
    version = _common_versions(broker, FindCoordinatorRequest)[-1]
    find = FindCoordinatorRequest(key=group, coordinator_keys=(group,))
    deadline = time.monotonic() + 30
    while True:
        found = _call(wire, _at_version(find, version), version, FindCoordinatorResponse)
        code = found.coordinators[0].error_code if version >= 4 else found.error_code
        if code == errors.NONE:
            return
        assert time.monotonic() < deadline, (group, found)
        time.sleep(0.1)


def _call(wire: _Wire, request: Request, version: int, response_type: type[R]) -> R:
    frame = wire.call(request, version)
    correlation_id, response = decode_response(response_type, frame, api_version=version)
    assert correlation_id == wire.correlation_id
    return response
