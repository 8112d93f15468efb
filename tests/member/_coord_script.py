"""``Script``: drive one ``GroupMember`` by hand (no fake broker) for transcript tests.

Keeps the requests and listener invocations the member has outstanding so a test can
answer them by type, and builds members in every ``MemberState``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from _coord_assignors import CooperativeTestAssignor, EagerTestAssignor

from coopconsumer import consumer_protocol
from coopconsumer._errors import CoopConsumerError
from coopconsumer._member import (
    AssignRequested,
    CloseRequested,
    CoordinatorFound,
    Effect,
    GroupMember,
    InvokeListener,
    ListenerDone,
    MemberConfig,
    MemberState,
    MetadataNeeded,
    MetadataUpdate,
    RequestFailed,
    ResponseReceived,
    Send,
    Subscribe,
    Tick,
)
from coopconsumer._member.classic._core import LEADER_SYNC_DELAY_S
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coopconsumer._types import TopicPartition
from coopconsumer.assignors import (
    Assignment,
    ClusterMetadata,
    ConsumerPartitionAssignor,
    Subscription,
)

TOPICS = {"t": 4}
SESSION_S = 30.0
HEARTBEAT_S = 3.0
MAX_POLL_S = 10.0


def tps(*names: str) -> frozenset[TopicPartition]:
    """``tps("t-0", "t-1")`` -> the partitions."""
    out = set()
    for name in names:
        topic, _, part = name.rpartition("-")
        out.add(TopicPartition(topic, int(part)))
    return frozenset(out)


def config(**overrides: object) -> MemberConfig:
    values: dict[str, object] = {
        "group_id": "g",
        "session_timeout_ms": int(SESSION_S * 1000),
        "heartbeat_interval_ms": int(HEARTBEAT_S * 1000),
        "max_poll_interval_ms": int(MAX_POLL_S * 1000),
    }
    values.update(overrides)
    return MemberConfig(**values)  # type: ignore[arg-type]


class Script:
    """One member, a clock, and its outstanding requests and listener calls."""

    def __init__(
        self,
        assignors: Sequence[ConsumerPartitionAssignor] | None = None,
        *,
        cooperative: bool = False,
        **config_overrides: object,
    ) -> None:
        if assignors is None:
            assignors = [CooperativeTestAssignor() if cooperative else EagerTestAssignor()]
        self.assignors = list(assignors)
        self.member = GroupMember(config(**config_overrides), self.assignors)
        self.now = 0.0
        self.sends: dict[int, Send] = {}
        self.listeners: list[InvokeListener] = []
        self.history: list[Effect] = []

    def state(self) -> MemberState:
        return self.member.state

    def feed(self, event: object, *, at: float | None = None) -> list[Effect]:
        if at is not None:
            self.now = at
        effects = self.member.handle(event, self.now)
        self.history.extend(effects)
        for effect in effects:
            if isinstance(effect, Send):
                self.sends[effect.request_id] = effect
            elif isinstance(effect, InvokeListener):
                self.listeners.append(effect)
        return effects

    def sent(self, request_type: type) -> list[Send]:
        return [s for s in self.sends.values() if isinstance(s.request, request_type)]

    def request(self, request_type: type) -> Send:
        found = self.sent(request_type)
        assert len(found) == 1, f"expected one outstanding {request_type.__name__}, got {found}"
        return found[0]

    def answer(self, request_type: type, response: object) -> list[Effect]:
        send = self.request(request_type)
        del self.sends[send.request_id]
        return self.feed(ResponseReceived(request_id=send.request_id, response=response))

    def fail(self, request_type: type, error: CoopConsumerError) -> list[Effect]:
        send = self.request(request_type)
        del self.sends[send.request_id]
        return self.feed(RequestFailed(request_id=send.request_id, error=error))

    def finish_listener(self) -> list[Effect]:
        call = self.listeners.pop(0)
        return self.feed(ListenerDone(invocation_id=call.invocation_id, kind=call.kind))

    def finish_listeners(self) -> list[Effect]:
        effects: list[Effect] = []
        while self.listeners:
            effects.extend(self.finish_listener())
        return effects

    # ------------------------------------------------------------------ journeys

    def subscribe(
        self, topics: Iterable[str] = ("t",), metadata: dict[str, int] | None = None
    ) -> None:
        self.feed(Subscribe(topics=frozenset(topics)))
        self.feed(
            MetadataUpdate(metadata=ClusterMetadata.from_partition_counts(metadata or TOPICS))
        )
        self.feed(CoordinatorFound(node_id=1))

    def join_response(
        self,
        *,
        member_id: str = "m1",
        generation_id: int = 1,
        leader: str = "leader",
        members: Sequence[JoinGroupResponseMember] = (),
        protocol_name: str | None = None,
        error_code: int = error_codes.NONE,
    ) -> JoinGroupResponse:
        return JoinGroupResponse(
            error_code=error_code,
            generation_id=generation_id,
            protocol_type="consumer",
            protocol_name=protocol_name or self.assignors[0].name,
            leader=leader,
            member_id=member_id,
            members=tuple(members),
        )

    def sync_response(self, partitions: Iterable[TopicPartition]) -> SyncGroupResponse:
        return SyncGroupResponse(
            protocol_type="consumer",
            protocol_name=self.assignors[0].name,
            assignment=consumer_protocol.encode_assignment(
                Assignment(partitions=tuple(sorted(partitions)))
            ),
        )

    def to_stable(
        self, owned: Iterable[TopicPartition] = tps("t-0", "t-1"), *, generation_id: int = 1
    ) -> None:
        """Subscribe to "t" and complete a join as a follower owning ``owned``."""
        if self.state() is MemberState.UNJOINED:
            self.subscribe()
        self.answer(JoinGroupRequest, self.join_response(generation_id=generation_id))
        self.answer(SyncGroupRequest, self.sync_response(owned))
        self.finish_listeners()
        assert self.state() is MemberState.STABLE, self.state()

    def heartbeat(self, code: int = error_codes.NONE) -> list[Effect]:
        """Let a heartbeat fall due, then answer it with ``code``."""
        self.feed(Tick(), at=self.now + HEARTBEAT_S)
        return self.answer(HeartbeatRequest, HeartbeatResponse(error_code=code))

    def lead(
        self,
        members: Sequence[JoinGroupResponseMember],
        *,
        metadata: dict[str, int] | None = None,
        generation_id: int = 1,
    ) -> list[Effect]:
        """Answer the JoinGroup electing this member ("m1") leader of ``members``, then
        the fresh metadata it asks for, then let ``LEADER_SYNC_DELAY_S`` pass: the
        effects after the JoinGroup answer (the SyncGroup among them)."""
        effects = self.answer(
            JoinGroupRequest,
            self.join_response(leader="m1", generation_id=generation_id, members=members),
        )
        assert any(isinstance(e, MetadataNeeded) for e in effects), effects
        joined_at = self.now
        out = self.feed(
            MetadataUpdate(metadata=ClusterMetadata.from_partition_counts(metadata or TOPICS))
        )
        out.extend(self.feed(Tick(), at=joined_at + LEADER_SYNC_DELAY_S))
        return out

    def leader_members(self, *extra: tuple[str, Iterable[str]]) -> list[JoinGroupResponseMember]:
        """The JoinGroup member list of a leader ("m1" = this member, on "t")."""
        members = [("m1", ("t",)), *extra]
        return [
            JoinGroupResponseMember(
                member_id=mid,
                metadata=consumer_protocol.encode_subscription(Subscription(topics=tuple(topics))),
            )
            for mid, topics in members
        ]


def in_state(state: MemberState, *, cooperative: bool = False) -> Script:
    """A member in ``state`` (EAGER unless ``cooperative``), owning t-0 and t-1 where the
    state allows ownership."""
    s = Script(cooperative=cooperative)
    if state is MemberState.UNJOINED:
        pass
    elif state is MemberState.MANUAL:
        s.feed(AssignRequested(partitions=tps("t-0", "t-1")))
        s.feed(CoordinatorFound(node_id=1))
    elif state is MemberState.JOINING:
        s.subscribe()
    elif state is MemberState.LEADER_AWAITING_METADATA:
        s.subscribe()
        s.answer(
            JoinGroupRequest,
            s.join_response(leader="m1", members=s.leader_members(("m2", ("t", "other")))),
        )
    elif state is MemberState.AWAITING_SYNC:
        s.subscribe()
        s.answer(JoinGroupRequest, s.join_response())
    elif state is MemberState.ASSIGNING:
        s.subscribe()
        s.answer(JoinGroupRequest, s.join_response())
        s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1")))
    elif state is MemberState.STABLE:
        s.to_stable()
    elif state is MemberState.PREPARING_JOIN:
        s.to_stable()
        s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)  # EAGER: REVOKED outstanding
    elif state is MemberState.POLL_EXPIRED:
        s.to_stable()
        s.feed(Tick(), at=MAX_POLL_S + 0.5)
    elif state is MemberState.LEAVING:
        s.to_stable()
        s.feed(CloseRequested())
    elif state is MemberState.CLOSED:
        s.feed(CloseRequested())
    elif state is MemberState.FATAL:
        s.subscribe()
        s.answer(
            JoinGroupRequest, s.join_response(error_code=error_codes.GROUP_AUTHORIZATION_FAILED)
        )
    assert s.state() is state, (state, s.state())
    return s
