"""What a rejoin after a failed SyncGroup costs on Tansu, which the member relies on.

Tansu holds a follower's SyncGroup that arrives before the leader's and, if another
round starts meanwhile, answers it REBALANCE_IN_PROGRESS about session.timeout.ms
later, after that round has completed without the follower (benchmarks/rebalance.py
explains the stall this caused). The member's answer (``GroupMember._subscription_for``)
is to rejoin with byte-identical metadata, which the coordinator answers with its
current generation instead of starting another round. These tests pin that coordinator
behaviour on Tansu, by hand-driven members: identical metadata -> current generation,
changed metadata (the generation field Java's client would bump) -> a new generation.
Kafka's GroupCoordinator behaves the same (``member.matches``); the second half is
Tansu-specific only in not waiting for the leader to rejoin.

Bounded waits only (``drive``, ``join_all``); nothing is timed.
"""

from __future__ import annotations

from typing import Any

import pytest

from coopconsumer import consumer_protocol
from coopconsumer._io import ClientConfig, KafkaClient, PendingRequest
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from coopconsumer._types import TopicPartition
from coopconsumer.assignors import Assignment, Subscription
from coopconsumer.testing import EmbeddedBroker
from integration._lookup import find_coordinator

pytestmark = [pytest.mark.integration]

PATIENCE_S = 30.0
SESSION_TIMEOUT_MS = 6_000
REBALANCE_TIMEOUT_MS = 3_000
PROTOCOL = "range"


def drive(clients: list[KafkaClient], futures: list[PendingRequest[Any]]) -> None:
    """Poll the clients from this one thread until every future completes (bounded)."""
    for _ in range(int(PATIENCE_S / 0.02)):
        if all(f.done() for f in futures):
            return
        for c in clients:
            c.poll(0.01)
    raise AssertionError(f"requests did not complete: {futures}")


class Member:
    """A hand-driven group member (its own client and connection) whose JoinGroup
    metadata the test chooses."""

    def __init__(self, broker: EmbeddedBroker, group: str, topic: str) -> None:
        self.client = KafkaClient(
            ClientConfig.from_bootstrap(
                broker.bootstrap, request_timeout_ms=20_000, client_id="tansu-sync"
            )
        )
        self.group = group
        self.topic = topic
        self.coordinator = find_coordinator(self.client, group)
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.metadata = self.subscription(generation_id=-1)

    def subscription(self, *, generation_id: int) -> bytes:
        return consumer_protocol.encode_subscription(
            Subscription(topics=(self.topic,), generation_id=generation_id)
        )

    def send_join(self) -> PendingRequest[Any]:
        return self.client.send(
            self.coordinator,
            JoinGroupRequest(
                group_id=self.group,
                session_timeout_ms=SESSION_TIMEOUT_MS,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                member_id=self.member_id,
                protocol_type="consumer",
                protocols=(JoinGroupRequestProtocol(name=PROTOCOL, metadata=self.metadata),),
            ),
        )

    def send_sync(self, assignments: dict[str, list[int]]) -> PendingRequest[Any]:
        return self.client.send(
            self.coordinator,
            SyncGroupRequest(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                protocol_type="consumer",
                protocol_name=PROTOCOL,
                assignments=tuple(
                    SyncGroupRequestAssignment(
                        member_id=member_id,
                        assignment=consumer_protocol.encode_assignment(
                            Assignment(
                                partitions=tuple(TopicPartition(self.topic, p) for p in parts)
                            )
                        ),
                    )
                    for member_id, parts in sorted(assignments.items())
                ),
            ),
        )

    def send_heartbeat(self) -> PendingRequest[Any]:
        return self.client.send(
            self.coordinator,
            HeartbeatRequest(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id
            ),
        )


def join_all(members: list[Member]) -> None:
    """JoinGroup for every member until all share one generation: MEMBER_ID_REQUIRED
    and REBALANCE_IN_PROGRESS are rejoined, a joined member heartbeats and rejoins when
    told the group is rebalancing (bounded by PATIENCE_S)."""
    clients = [m.client for m in members]
    joins = {id(m): m.send_join() for m in members}
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
                if response.error_code in (
                    error_codes.MEMBER_ID_REQUIRED,
                    error_codes.REBALANCE_IN_PROGRESS,
                ):
                    member.member_id = response.member_id or member.member_id
                    joins[key] = member.send_join()
                else:
                    assert response.error_code == error_codes.NONE, response
                    member.member_id = response.member_id
                    member.generation = response.generation_id
                    member.leader = response.leader
            beat = beats.get(key)
            if beat is not None and beat.done():
                del beats[key]
                heartbeat: HeartbeatResponse = beat.result()
                if heartbeat.error_code == error_codes.REBALANCE_IN_PROGRESS and key not in joins:
                    joins[key] = member.send_join()
            if key not in joins and key not in beats and member.generation >= 0:
                beats[key] = member.send_heartbeat()
        generations = {m.generation for m in members}
        if not joins and len(generations) == 1 and -1 not in generations:
            drive(clients, list(beats.values()))
            return
    raise AssertionError("members never agreed on a generation")


def _formed_pair(broker: EmbeddedBroker, group: str, topic: str) -> tuple[Member, Member]:
    """Two members in one generation, both synced: (leader, follower)."""
    broker.create_topic(topic, partitions=2)
    members = [Member(broker, group, topic) for _ in range(2)]
    join_all(members)
    leader = next(m for m in members if m.leader == m.member_id)
    follower = next(m for m in members if m is not leader)
    assignments = {leader.member_id: [0], follower.member_id: [1]}
    syncs = [leader.send_sync(assignments), follower.send_sync({})]
    drive([m.client for m in members], syncs)
    for sync in syncs:
        response: SyncGroupResponse = sync.result()
        assert response.error_code == error_codes.NONE, response
    return leader, follower


def _rejoin(member: Member, others: list[Member]) -> JoinGroupResponse:
    join = member.send_join()
    drive([member.client, *(o.client for o in others)], [join])
    response: JoinGroupResponse = join.result()
    assert response.error_code == error_codes.NONE, response
    return response


def test_a_follower_rejoining_with_identical_metadata_gets_the_current_generation(
    tansu_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    leader, follower = _formed_pair(tansu_broker, unique_group, unique_topic)
    try:
        generation = follower.generation
        response = _rejoin(follower, [leader])
        assert response.generation_id == generation  # no new round
        assert response.leader == leader.member_id
    finally:
        for m in (leader, follower):
            m.client.close()


def test_a_follower_rejoining_with_changed_metadata_starts_a_new_generation(
    tansu_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    leader, follower = _formed_pair(tansu_broker, unique_group, unique_topic)
    try:
        generation = follower.generation
        # What Java's client sends after a failed SyncGroup: the generation of the
        # JoinGroup it was answered, although it applied nothing.
        follower.metadata = follower.subscription(generation_id=generation)
        response = _rejoin(follower, [leader])
        assert response.generation_id > generation
    finally:
        for m in (leader, follower):
            m.client.close()
