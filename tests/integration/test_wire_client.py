"""Our wire client against real Kafka-protocol brokers (Tansu and librdkafka's mock).

Everything the group member will need, done by hand with the raw client: version
negotiation, metadata, coordinator lookup, a two-member JoinGroup/SyncGroup/Heartbeat/
LeaveGroup round, OffsetCommit/OffsetFetch and ListOffsets after producing records.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError as CKafkaError
from confluent_kafka import Producer

from coopconsumer._io import ClientConfig, KafkaClient, PendingRequest
from coopconsumer._protocol import error_codes
from coopconsumer._protocol._schema import Request
from coopconsumer._protocol.messages import (
    FindCoordinatorRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    MemberIdentity,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from coopconsumer.testing import EmbeddedBroker
from integration._lookup import find_coordinator

pytestmark = pytest.mark.integration

#: Bound for eventually-true steps on a shared machine; reaching it means "broken".
PATIENCE_S = 30.0
SESSION_TIMEOUT_MS = 6_000
REBALANCE_TIMEOUT_MS = 3_000
PROTOCOL = "range"

#: What real Kafka 3.9/4.x brokers (and Tansu) advertise, and what the mock is capped at.
TANSU_EXPECTED: dict[type[Request], int] = {
    JoinGroupRequest: 9,
    SyncGroupRequest: 5,
    HeartbeatRequest: 4,
    LeaveGroupRequest: 5,
    OffsetCommitRequest: 9,
    OffsetFetchRequest: 9,
    FindCoordinatorRequest: 6,
}
MOCK_CAPS: dict[type[Request], int] = {
    JoinGroupRequest: 5,
    SyncGroupRequest: 3,
    LeaveGroupRequest: 2,
}


@pytest.fixture
def client(broker: EmbeddedBroker) -> Iterator[KafkaClient]:
    with new_client(broker) as kafka:
        yield kafka


def new_client(broker: EmbeddedBroker) -> KafkaClient:
    return KafkaClient(
        ClientConfig.from_bootstrap(broker.bootstrap, request_timeout_ms=20_000, client_id="wire")
    )


def drive(clients: list[KafkaClient], futures: list[PendingRequest[Any]]) -> None:
    """Poll several clients from this one thread until every future completes."""
    for _ in range(int(PATIENCE_S / 0.02)):
        if all(f.done() for f in futures):
            return
        for c in clients:
            c.poll(0.01)
    raise AssertionError(f"requests did not complete: {futures}")


def string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def subscription_v0(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0 (topics, empty user data), hand-written."""
    return struct.pack(">hi", 0, 1) + string(topic) + struct.pack(">i", 0)


def assignment_v0(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0 (one topic), hand-written."""
    body = struct.pack(">hi", 0, 1) + string(topic) + struct.pack(">i", len(partitions))
    body += b"".join(struct.pack(">i", p) for p in partitions)
    return body + struct.pack(">i", 0)


# --------------------------------------------------------------------------- negotiation


def test_negotiated_versions_match_what_the_broker_advertises(
    broker: EmbeddedBroker, client: KafkaClient, unique_group: str
) -> None:
    coordinator = find_coordinator(client, unique_group)
    advertised = client.api_versions(coordinator)
    # The harness probed ApiVersions v0 independently of our client.
    for key, (low, high) in broker.api_versions.items():
        assert advertised[key] == (low, high)
    checked: list[type[Request]] = [*TANSU_EXPECTED, MetadataRequest, ListOffsetsRequest]
    for request_type in checked:
        version = client.negotiated_version(coordinator, request_type)
        low, high = advertised[request_type.API_KEY]
        assert version == min(request_type.MAX_VERSION, high)
        assert max(request_type.MIN_VERSION, low) <= version
    if broker.kind == "tansu":
        for request_type, expected in TANSU_EXPECTED.items():
            assert client.negotiated_version(coordinator, request_type) == expected
    elif broker.kind == "mock":
        for request_type, cap in MOCK_CAPS.items():
            assert client.negotiated_version(coordinator, request_type) == cap


# --------------------------------------------------------------------------- metadata


def test_metadata_for_a_created_topic(
    broker: EmbeddedBroker, client: KafkaClient, unique_topic: str
) -> None:
    broker.create_topic(unique_topic, partitions=3)
    snapshot = client.metadata([unique_topic])
    assert snapshot.partition_counts() == {unique_topic: 3}
    topic = snapshot.topics[unique_topic]
    assert sorted(topic.partitions) == [0, 1, 2]
    assert snapshot.brokers
    for partition in topic.partitions.values():
        assert partition.leader_id in snapshot.brokers
    assert client.brokers().keys() >= snapshot.brokers.keys()
    everything = client.metadata()
    assert everything.partition_counts()[unique_topic] == 3


def test_metadata_for_an_unknown_topic_reports_its_error_code(
    client: KafkaClient, unique_topic: str
) -> None:
    snapshot = client.metadata([unique_topic])
    info = snapshot.topics.get(unique_topic)
    # Without auto-creation the topic must not appear as usable.
    assert info is None or info.error_code == error_codes.UNKNOWN_TOPIC_OR_PARTITION
    assert unique_topic not in snapshot.partition_counts()


# --------------------------------------------------------------------------- group round


_COORDINATOR_MOVING = frozenset(
    {error_codes.NOT_COORDINATOR, error_codes.COORDINATOR_LOAD_IN_PROGRESS}
)


class Member:
    """One hand-driven group member with its own client (its own connection)."""

    def __init__(self, broker: EmbeddedBroker, group: str, topic: str) -> None:
        self.client = new_client(broker)
        self.group = group
        self.topic = topic
        self.coordinator = find_coordinator(self.client, group)
        self.member_id = ""
        self.generation = -1
        self.join: JoinGroupResponse | None = None
        self.v_join = self.client.negotiated_version(self.coordinator, JoinGroupRequest)
        self.v_sync = self.client.negotiated_version(self.coordinator, SyncGroupRequest)
        self.v_leave = self.client.negotiated_version(self.coordinator, LeaveGroupRequest)

    def send(self, request: Request) -> PendingRequest[Any]:
        return self.client.send(self.coordinator, request)

    def rediscover(self) -> None:
        """Look the coordinator up again after a short pause."""
        time.sleep(0.1)
        self.coordinator = find_coordinator(self.client, self.group)

    def send_join(self) -> PendingRequest[Any]:
        return self.send(
            JoinGroupRequest(
                group_id=self.group,
                session_timeout_ms=SESSION_TIMEOUT_MS,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                member_id=self.member_id,
                protocol_type="consumer",
                protocols=(
                    JoinGroupRequestProtocol(name=PROTOCOL, metadata=subscription_v0(self.topic)),
                ),
            )
        )

    def send_sync(self, assignments: dict[str, bytes]) -> PendingRequest[Any]:
        extra: dict[str, Any] = {}
        if self.v_sync >= 5:
            extra = {"protocol_type": "consumer", "protocol_name": PROTOCOL}
        return self.send(
            SyncGroupRequest(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                assignments=tuple(
                    SyncGroupRequestAssignment(member_id=m, assignment=a)
                    for m, a in sorted(assignments.items())
                ),
                **extra,
            )
        )

    def send_leave(self) -> PendingRequest[Any]:
        if self.v_leave >= 3:
            return self.send(
                LeaveGroupRequest(
                    group_id=self.group, members=(MemberIdentity(member_id=self.member_id),)
                )
            )
        return self.send(LeaveGroupRequest(group_id=self.group, member_id=self.member_id))


def join_all(members: list[Member]) -> None:
    """JoinGroup for every member concurrently until all share one generation.

    Event-driven like a real member: a JoinGroup answer is handled as soon as it
    arrives; a member that joined heartbeats, and rejoins when the heartbeat says
    REBALANCE_IN_PROGRESS (another member joined after its round completed).
    """
    clients = [m.client for m in members]
    joins: dict[int, PendingRequest[Any]] = {id(m): m.send_join() for m in members}
    beats: dict[int, PendingRequest[Any]] = {}
    for _ in range(int(PATIENCE_S / 0.02)):
        for c in clients:
            c.poll(0.01)
        for member in members:
            key = id(member)
            join = joins.get(key)
            if join is not None and join.done():
                del joins[key]
                response: JoinGroupResponse = join.result()
                if response.error_code == error_codes.MEMBER_ID_REQUIRED:
                    # KIP-394: the broker hands out the id and expects a rejoin with it.
                    assert member.v_join >= 4
                    assert response.member_id
                    member.member_id = response.member_id
                    joins[key] = member.send_join()
                elif response.error_code == error_codes.REBALANCE_IN_PROGRESS:
                    joins[key] = member.send_join()
                elif response.error_code in _COORDINATOR_MOVING:
                    # A coordinator that has just taken the group's offsets partition
                    # turns JoinGroups away for a moment (seen on a fresh Kafka 3.9.2):
                    # a client looks the coordinator up again and rejoins, as ours does.
                    member.rediscover()
                    joins[key] = member.send_join()
                else:
                    assert response.error_code == 0, response
                    member.member_id = response.member_id
                    member.generation = response.generation_id
                    member.join = response
            beat = beats.get(key)
            if beat is not None and beat.done():
                del beats[key]
                code = beat.result().error_code
                if code == error_codes.REBALANCE_IN_PROGRESS and key not in joins:
                    joins[key] = member.send_join()
                else:
                    assert code == 0, code
            if key not in joins and key not in beats and member.join is not None:
                beats[key] = member.send(
                    HeartbeatRequest(
                        group_id=member.group,
                        generation_id=member.generation,
                        member_id=member.member_id,
                    )
                )
        generations = {m.generation for m in members}
        if not joins and len(generations) == 1 and -1 not in generations:
            drive(clients, list(beats.values()))
            return
    raise AssertionError("members never agreed on a generation")


def send_and_wait_until_received(
    broker: EmbeddedBroker,
    clients: list[KafkaClient],
    api_key: int,
    send: Callable[[], PendingRequest[Any]],
) -> PendingRequest[Any]:
    """``send()``, then on the mock poll until the cluster has received the request.

    librdkafka mock quirk: a follower SyncGroup that reaches it after the leader's is
    answered INVALID_REQUEST (42) with a null assignment (the group is already "up"),
    where Kafka would hand out the follower's assignment. So the follower's request
    must be there first. Elsewhere the order does not matter.
    """
    if broker.kind != "mock":
        return send()
    broker.clear_requests()
    broker.start_request_tracking()
    try:
        future = send()
        for _ in range(int(PATIENCE_S / 0.02)):
            if any(r.api_key == api_key for r in broker.requests()):
                return future
            for c in clients:
                c.poll(0.01)
        raise AssertionError(f"the mock never received api_key {api_key}")
    finally:
        broker.stop_request_tracking()
        broker.clear_requests()


def test_two_members_join_sync_heartbeat_and_leave_by_hand(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    broker.create_topic(unique_topic, partitions=4)
    members = [Member(broker, unique_group, unique_topic) for _ in range(2)]
    clients = [m.client for m in members]
    try:
        join_all(members)
        ids = {m.member_id for m in members}
        assert len(ids) == 2
        joins = [m.join for m in members]
        assert all(j is not None for j in joins)
        leader_ids = {j.leader for j in joins if j is not None}
        assert len(leader_ids) == 1
        (leader_id,) = leader_ids
        assert leader_id in ids
        leader = next(m for m in members if m.member_id == leader_id)
        follower = next(m for m in members if m.member_id != leader_id)
        assert leader.join is not None
        assert follower.join is not None
        assert {x.member_id for x in leader.join.members} == ids
        assert all(x.metadata == subscription_v0(unique_topic) for x in leader.join.members)
        assert follower.join.members == ()
        assert leader.join.protocol_name == PROTOCOL
        generation = leader.generation
        if broker.kind == "tansu":
            assert generation >= 0  # Tansu counts generations from 0 (docs/testing.md)
        else:
            assert generation >= 1

        plan = {
            leader.member_id: assignment_v0(unique_topic, [0, 1]),
            follower.member_id: assignment_v0(unique_topic, [2, 3]),
        }
        # The follower's SyncGroup is held by the broker until the leader's arrives.
        follower_sync = send_and_wait_until_received(
            broker, clients, SyncGroupRequest.API_KEY, lambda: follower.send_sync({})
        )
        leader_sync = leader.send_sync(plan)
        drive(clients, [follower_sync, leader_sync])
        for member, future in ((leader, leader_sync), (follower, follower_sync)):
            sync: SyncGroupResponse = future.result()
            assert sync.error_code == 0, sync
            assert sync.assignment == plan[member.member_id]

        beats = [
            m.send(
                HeartbeatRequest(
                    group_id=unique_group, generation_id=m.generation, member_id=m.member_id
                )
            )
            for m in members
        ]
        drive(clients, beats)
        for beat in beats:
            response: HeartbeatResponse = beat.result()
            assert response.error_code == 0

        # A member commits for its own partitions inside its generation.
        v_commit = leader.client.negotiated_version(leader.coordinator, OffsetCommitRequest)
        v_fetch = leader.client.negotiated_version(leader.coordinator, OffsetFetchRequest)
        commit: OffsetCommitResponse = leader.client.request(
            leader.coordinator,
            commit_request(
                v_commit,
                unique_group,
                unique_topic,
                {0: 11, 1: 12},
                generation_id=generation,
                member_id=leader.member_id,
            ),
        )
        assert [p.error_code for t in commit.topics for p in t.partitions] == [0, 0]
        fetched: OffsetFetchResponse = follower.client.request(
            follower.coordinator, fetch_request(v_fetch, unique_group, unique_topic, [0, 1])
        )
        assert fetched_offsets(fetched, v_fetch) == {0: (11, 0), 1: (12, 0)}

        leaves = [m.send_leave() for m in members]
        drive(clients, leaves)
        for member, leave in zip(members, leaves, strict=True):
            answer: LeaveGroupResponse = leave.result()
            assert answer.error_code == 0
            if member.v_leave >= 3:
                assert [(r.member_id, r.error_code) for r in answer.members] == [
                    (member.member_id, 0)
                ]
    finally:
        for c in clients:
            c.close()


# --------------------------------------------------------------------------- offsets


def commit_request(
    version: int,
    group: str,
    topic: str,
    offsets: dict[int, int],
    *,
    generation_id: int = -1,
    member_id: str = "",
) -> OffsetCommitRequest:
    # By default a "simple" commit outside any generation: generation -1, no member id
    # (allowed for a group with no members, as admin tools do).
    return OffsetCommitRequest(
        group_id=group,
        generation_id=generation_id,
        member_id=member_id,
        topics=(
            OffsetCommitRequestTopic(
                name=topic,
                partitions=tuple(
                    OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata=f"m{p}"
                    )
                    for p, o in sorted(offsets.items())
                ),
            ),
        ),
    )


def fetch_request(
    version: int, group: str, topic: str, partitions: list[int]
) -> OffsetFetchRequest:
    if version >= 8:
        return OffsetFetchRequest(
            groups=(
                OffsetFetchRequestGroup(
                    group_id=group,
                    topics=(
                        OffsetFetchRequestTopics(name=topic, partition_indexes=tuple(partitions)),
                    ),
                ),
            )
        )
    return OffsetFetchRequest(
        group_id=group,
        topics=(OffsetFetchRequestTopic(name=topic, partition_indexes=tuple(partitions)),),
    )


def fetched_offsets(response: OffsetFetchResponse, version: int) -> dict[int, tuple[int, int]]:
    """``{partition: (offset, error_code)}`` from either response layout."""
    if version >= 8:
        (group,) = response.groups
        assert group.error_code == 0
        return {
            p.partition_index: (p.committed_offset, p.error_code)
            for t in group.topics
            for p in t.partitions
        }
    assert response.error_code == 0
    return {
        p.partition_index: (p.committed_offset, p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def test_offset_commit_then_fetch_returns_the_committed_offsets(
    broker: EmbeddedBroker, client: KafkaClient, unique_topic: str, unique_group: str
) -> None:
    broker.create_topic(unique_topic, partitions=3)
    offsets = {0: 5, 1: 0, 2: 42}
    # A coordinator that has just taken the group's offsets partition answers
    # NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS for a moment (seen on Kafka 3.9.2
    # on a fresh broker): a client looks it up again and retries, as ours does.
    deadline = time.monotonic() + 30.0
    while True:
        coordinator = find_coordinator(client, unique_group)
        v_commit = client.negotiated_version(coordinator, OffsetCommitRequest)
        v_fetch = client.negotiated_version(coordinator, OffsetFetchRequest)
        committed: OffsetCommitResponse = client.request(
            coordinator, commit_request(v_commit, unique_group, unique_topic, offsets)
        )
        codes = {p.error_code for t in committed.topics for p in t.partitions}
        if not codes & _COORDINATOR_MOVING or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    assert [
        (t.name, sorted((p.partition_index, p.error_code) for p in t.partitions))
        for t in committed.topics
    ] == [(unique_topic, [(0, 0), (1, 0), (2, 0)])]
    fetched: OffsetFetchResponse = client.request(
        coordinator, fetch_request(v_fetch, unique_group, unique_topic, [0, 1, 2])
    )
    assert fetched_offsets(fetched, v_fetch) == {p: (o, 0) for p, o in offsets.items()}


def test_list_offsets_gives_end_offsets_after_producing(
    broker: EmbeddedBroker, client: KafkaClient, unique_topic: str
) -> None:
    broker.create_topic(unique_topic, partitions=2)
    counts = {0: 7, 1: 3}
    failures: list[CKafkaError] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(
                unique_topic,
                value=f"{partition}-{i}".encode(),
                partition=partition,
                on_delivery=lambda err, _msg: failures.append(err) if err is not None else None,
            )
            # One record per produce request. Tansu quirk: it reports the high watermark
            # as the base offset of the last batch + 1, so a multi-record batch would
            # read as end offset 1 (seen with librdkafka's watermarks too).
            assert producer.flush(PATIENCE_S) == 0
    assert failures == []

    snapshot = client.metadata([unique_topic])
    ends: dict[int, int] = {}
    for partition, info in snapshot.topics[unique_topic].partitions.items():
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=(
                ListOffsetsTopic(
                    name=unique_topic,
                    # -1 = LATEST: the log end offset, i.e. the next offset to be written.
                    partitions=(ListOffsetsPartition(partition_index=partition, timestamp=-1),),
                ),
            ),
        )
        response: ListOffsetsResponse = client.request(info.leader_id, request)
        (topic,) = response.topics
        (answer,) = topic.partitions
        assert answer.error_code == 0
        ends[answer.partition_index] = answer.offset
    assert ends == counts
