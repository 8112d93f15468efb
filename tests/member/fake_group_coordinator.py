"""An in-process broker-side group coordinator (the classic protocol) for tests.

Speaks the same ``coopconsumer._protocol.messages`` objects as a real broker and follows
Kafka's classic ``GroupCoordinator``: MEMBER_ID_REQUIRED on a dynamic member's first
join (JoinGroup v4+ behaviour), generations, leader election, protocol selection by
vote among the members' common protocols, joins held until every known member rejoined
or the rebalance timeout passed, SyncGroup distribution, heartbeats answered
REBALANCE_IN_PROGRESS during a rebalance, session expiry, LeaveGroup, static membership
(fencing, rejoin without rebalance), and OffsetCommit/OffsetFetch with generation
checks. Faults are injected through its public API (``fail_next``, ``drop_next``,
``move_coordinator``, ``set_available``), never by patching.

Time is an argument; nothing here reads a clock. Answers are queued in ``outbox`` as
``Delivery`` values for a harness to route (JoinGroup and SyncGroup may be answered
long after they were received).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping

import attrs

from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coopconsumer._types import TopicPartition

__all__ = [
    "Delivery",
    "FakeGroupCoordinator",
    "GroupPhase",
    "MockGroupState",
    "MockTimingCoordinator",
]


class GroupPhase(enum.Enum):
    """The broker-side group states (Kafka's ``GroupState``)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


@attrs.frozen
class Delivery:
    """An answer for ``client``'s request ``request_id``."""

    client: str
    request_id: int
    response: object


@attrs.define
class _Member:
    member_id: str
    group_instance_id: str | None
    client: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_s: float
    rebalance_timeout_s: float
    last_heartbeat: float
    awaiting_join: int | None = None  # request id of a parked JoinGroup
    awaiting_sync: int | None = None  # request id of a parked SyncGroup
    assignment: bytes = b""
    joined_generation: int = -1

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)


def _new_member(
    member_id: str,
    client: str,
    request: JoinGroupRequest,
    protocols: tuple[tuple[str, bytes], ...],
    now: float,
) -> _Member:
    return _Member(
        member_id=member_id,
        group_instance_id=request.group_instance_id,
        client=client,
        protocols=protocols,
        session_timeout_s=request.session_timeout_ms / 1000.0,
        rebalance_timeout_s=max(request.rebalance_timeout_ms, 0) / 1000.0,
        last_heartbeat=now,
    )


@attrs.define
class _Fault:
    error_code: int | None  # None: drop the answer
    remaining: int


_API_KEYS = {
    JoinGroupRequest: 11,
    SyncGroupRequest: 14,
    HeartbeatRequest: 12,
    LeaveGroupRequest: 13,
    OffsetCommitRequest: 8,
    OffsetFetchRequest: 9,
}


class FakeGroupCoordinator:
    """One consumer group's coordinator. ``submit`` a request, ``advance`` the clock,
    and take answers from ``outbox``.

    ``require_member_id`` mimics JoinGroup v4+ (KIP-394). Generations start at 0 and the
    first completed rebalance makes generation 1, as Kafka.
    """

    def __init__(
        self,
        group_id: str,
        *,
        node_id: int = 1,
        require_member_id: bool = True,
        protocol_type: str = "consumer",
    ) -> None:
        self.group_id = group_id
        self.node_id = node_id
        self.available = True
        self.require_member_id = require_member_id
        self.protocol_type = protocol_type
        self.phase = GroupPhase.EMPTY
        self.generation_id = 0
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, _Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, float] = {}  # MEMBER_ID_REQUIRED issued -> expiry
        self.rebalance_deadline: float | None = None
        self.committed: dict[TopicPartition, int] = {}
        self.outbox: list[Delivery] = []
        self.rebalances = 0
        #: SyncGroups in which a leader distributed an assignment it computed.
        self.leader_assignments = 0
        #: Clients answered skip_assignment as a returning static leader (KIP-814).
        self.skipped_leaders: list[str] = []
        self._faults: dict[int, _Fault] = {}
        self._next_member = 0

    # ------------------------------------------------------------------ fault API

    def fail_next(self, api_key: int, error_code: int, count: int = 1) -> None:
        """Answer the next ``count`` requests of ``api_key`` with ``error_code`` (the
        request is not processed)."""
        self._faults[api_key] = _Fault(error_code, count)

    def faults_left(self, api_key: int) -> int:
        """How many of the ``fail_next``/``drop_next`` requests of ``api_key`` are still
        to come."""
        fault = self._faults.get(api_key)
        return 0 if fault is None else fault.remaining

    def drop_next(self, api_key: int, count: int = 1) -> None:
        """Process the next ``count`` requests of ``api_key`` but never answer them."""
        self._faults[api_key] = _Fault(None, count)

    def move_coordinator(self, node_id: int) -> None:
        """The group moves to broker ``node_id``: requests to the old node get
        NOT_COORDINATOR, parked joins and syncs are answered NOT_COORDINATOR."""
        self.node_id = node_id
        for member in self.members.values():
            if member.awaiting_join is not None:
                self._answer(
                    member.client,
                    member.awaiting_join,
                    self._join_error(error_codes.NOT_COORDINATOR),
                )
                member.awaiting_join = None
            if member.awaiting_sync is not None:
                self._answer(
                    member.client,
                    member.awaiting_sync,
                    SyncGroupResponse(error_code=error_codes.NOT_COORDINATOR),
                )
                member.awaiting_sync = None

    def set_available(self, available: bool) -> None:
        """FindCoordinator fails (COORDINATOR_NOT_AVAILABLE) while False."""
        self.available = available

    # ------------------------------------------------------------------ queries

    def member_for_client(self, client: str) -> str | None:
        for member in self.members.values():
            if member.client == client:
                return member.member_id
        return None

    def next_deadline(self) -> float | None:
        """When ``advance`` has something to do (session expiry, rebalance timeout)."""
        candidates = [
            m.last_heartbeat + m.session_timeout_s
            for m in self.members.values()
            if m.awaiting_join is None and m.awaiting_sync is None
        ]
        candidates.extend(self.pending_members.values())
        if self.rebalance_deadline is not None:
            candidates.append(self.rebalance_deadline)
        return min(candidates) if candidates else None

    # ------------------------------------------------------------------ clock

    def advance(self, now: float) -> None:
        """Expire sessions and pending members; complete a timed-out join."""
        for member_id, expiry in list(self.pending_members.items()):
            if now >= expiry:
                del self.pending_members[member_id]
        if self.rebalance_deadline is not None and now >= self.rebalance_deadline:
            self._complete_join(now, force=True)
        for member in list(self.members.values()):
            if member.awaiting_join is not None or member.awaiting_sync is not None:
                continue  # Kafka: parked members have a satisfied heartbeat
            if now >= member.last_heartbeat + member.session_timeout_s:
                self._remove_member(member.member_id, now)

    # ------------------------------------------------------------------ requests

    def submit(
        self, client: str, node_id: int, request_id: int, request: object, now: float
    ) -> None:
        """Receive ``request`` from ``client`` sent to broker ``node_id``."""
        api_key = _API_KEYS[type(request)]
        if node_id != self.node_id:
            self._answer(client, request_id, _error_response(request, error_codes.NOT_COORDINATOR))
            return
        fault = self._faults.get(api_key)
        if fault is not None and fault.remaining > 0:
            fault.remaining -= 1
            if fault.error_code is not None:
                self._answer(client, request_id, _error_response(request, fault.error_code))
                return
            self._dispatch(client, -request_id - 1, request, now)  # processed, answer dropped
            return
        self._dispatch(client, request_id, request, now)

    def _dispatch(self, client: str, request_id: int, request: object, now: float) -> None:
        if isinstance(request, JoinGroupRequest):
            self._join(client, request_id, request, now)
        elif isinstance(request, SyncGroupRequest):
            self._sync(client, request_id, request, now)
        elif isinstance(request, HeartbeatRequest):
            self._answer(
                client, request_id, HeartbeatResponse(error_code=self._heartbeat(request, now))
            )
        elif isinstance(request, LeaveGroupRequest):
            self._answer(client, request_id, self._leave(request, now))
        elif isinstance(request, OffsetCommitRequest):
            self._answer(client, request_id, self._commit(request))
        elif isinstance(request, OffsetFetchRequest):
            self._answer(client, request_id, self._fetch(request))
        else:  # pragma: no cover - _API_KEYS guards this
            raise TypeError(type(request))

    def _answer(self, client: str, request_id: int, response: object) -> None:
        if request_id < 0:
            return  # a dropped answer (drop_next)
        self.outbox.append(Delivery(client, request_id, response))

    # ------------------------------------------------------------------ JoinGroup

    def _join_error(self, code: int, member_id: str = "") -> JoinGroupResponse:
        return JoinGroupResponse(error_code=code, member_id=member_id, generation_id=-1)

    def _new_member_id(self, client: str, instance: str | None) -> str:
        self._next_member += 1
        return f"{instance or client}-{self._next_member}"

    def _join(self, client: str, request_id: int, request: JoinGroupRequest, now: float) -> None:
        if request.protocol_type != self.protocol_type or not request.protocols:
            self._answer(
                client, request_id, self._join_error(error_codes.INCONSISTENT_GROUP_PROTOCOL)
            )
            return
        protocols = tuple((p.name, p.metadata) for p in request.protocols)
        if self.members and not self._supports_common_protocol(protocols, request.member_id):
            self._answer(
                client, request_id, self._join_error(error_codes.INCONSISTENT_GROUP_PROTOCOL)
            )
            return
        instance = request.group_instance_id
        member_id = request.member_id
        if instance is not None:
            known = self.static_members.get(instance)
            if member_id and known is not None and known != member_id:
                self._answer(client, request_id, self._join_error(error_codes.FENCED_INSTANCE_ID))
                return
            if not member_id:
                member_id = self._new_member_id(client, instance)
                if known is not None and known in self.members:
                    self._replace_static(
                        known, member_id, client, request, protocols, request_id, now
                    )
                    return
                self.static_members[instance] = member_id
                self._add_member(member_id, client, request, protocols, request_id, now)
                return
        elif not member_id:
            if self.require_member_id:
                member_id = self._new_member_id(client, None)
                self.pending_members[member_id] = now + request.session_timeout_ms / 1000.0
                self._answer(
                    client, request_id, self._join_error(error_codes.MEMBER_ID_REQUIRED, member_id)
                )
                return
            member_id = self._new_member_id(client, None)
            self._add_member(member_id, client, request, protocols, request_id, now)
            return
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            self._add_member(member_id, client, request, protocols, request_id, now)
            return
        member = self.members.get(member_id)
        if member is None:
            self._answer(
                client, request_id, self._join_error(error_codes.UNKNOWN_MEMBER_ID, member_id)
            )
            return
        if member.awaiting_join is not None and member.awaiting_join != request_id:
            # A newer join supersedes a parked one (the client gave up on it).
            member.awaiting_join = None
        changed = member.protocols != protocols
        member.protocols = protocols
        member.client = client
        member.last_heartbeat = now
        if self.phase is GroupPhase.PREPARING_REBALANCE:
            member.awaiting_join = request_id
            self._complete_join(now)
        elif (
            not changed
            and member_id != self.leader_id
            and self.phase
            in (
                GroupPhase.STABLE,
                GroupPhase.COMPLETING_REBALANCE,
            )
        ):
            # Kafka: a follower rejoining with unchanged metadata gets the current state.
            self._answer(client, request_id, self._join_response(member, skip=False))
        else:
            member.awaiting_join = request_id
            self._prepare_rebalance(now, f"member {member_id} rejoined")

    def _supports_common_protocol(
        self, protocols: tuple[tuple[str, bytes], ...], member_id: str
    ) -> bool:
        others = [m for m in self.members.values() if m.member_id != member_id]
        if not others:
            return True
        common = {name for name, _ in protocols}
        for other in others:
            common &= {name for name, _ in other.protocols}
        return bool(common)

    def _add_member(
        self,
        member_id: str,
        client: str,
        request: JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
        request_id: int,
        now: float,
    ) -> None:
        self.members[member_id] = _new_member(member_id, client, request, protocols, now)
        self.members[member_id].awaiting_join = request_id
        if self.phase is GroupPhase.PREPARING_REBALANCE:
            self._complete_join(now)
        else:
            self._prepare_rebalance(now, f"member {member_id} joined")

    def _replace_static(
        self,
        old_id: str,
        new_id: str,
        client: str,
        request: JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
        request_id: int,
        now: float,
    ) -> None:
        """A static member rejoined with an unknown member id: it takes over its old
        identity (the old id is fenced). In a stable group with unchanged protocols the
        current assignment stands (KIP-345); a leader gets skip_assignment (KIP-814)."""
        old = self.members.pop(old_id)
        assert request.group_instance_id is not None
        self.static_members[request.group_instance_id] = new_id
        if old.awaiting_join is not None:
            self._answer(
                old.client, old.awaiting_join, self._join_error(error_codes.FENCED_INSTANCE_ID)
            )
        if old.awaiting_sync is not None:
            self._answer(
                old.client,
                old.awaiting_sync,
                SyncGroupResponse(error_code=error_codes.FENCED_INSTANCE_ID),
            )
        member = attrs.evolve(
            old,
            member_id=new_id,
            client=client,
            last_heartbeat=now,
            awaiting_join=None,
            awaiting_sync=None,
            session_timeout_s=request.session_timeout_ms / 1000.0,
        )
        self.members[new_id] = member
        was_leader = self.leader_id == old_id
        if was_leader:
            self.leader_id = new_id
        if self.phase is GroupPhase.STABLE and old.protocols == protocols:
            member.protocols = protocols
            if was_leader:
                self.skipped_leaders.append(client)
            self._answer(client, request_id, self._join_response(member, skip=was_leader))
            return
        member.protocols = protocols
        member.awaiting_join = request_id
        if self.phase is GroupPhase.PREPARING_REBALANCE:
            self._complete_join(now)
        else:
            self._prepare_rebalance(now, f"static member {request.group_instance_id} rejoined")

    def _prepare_rebalance(self, now: float, reason: str) -> None:
        if self.phase is GroupPhase.COMPLETING_REBALANCE:
            for member in self.members.values():
                if member.awaiting_sync is not None:
                    self._answer(
                        member.client,
                        member.awaiting_sync,
                        SyncGroupResponse(error_code=error_codes.REBALANCE_IN_PROGRESS),
                    )
                    member.awaiting_sync = None
        self.phase = GroupPhase.PREPARING_REBALANCE
        timeout = max((m.rebalance_timeout_s for m in self.members.values()), default=0.0)
        self.rebalance_deadline = now + timeout
        self._complete_join(now)

    def _complete_join(self, now: float, *, force: bool = False) -> None:
        if self.phase is not GroupPhase.PREPARING_REBALANCE:
            return
        waiting = [m for m in self.members.values() if m.awaiting_join is None]
        if waiting and not force:
            return
        for member in waiting:  # did not rejoin within the rebalance timeout
            self._drop(member.member_id)
        self.rebalance_deadline = None
        self.generation_id += 1
        self.rebalances += 1
        if not self.members:
            self.phase = GroupPhase.EMPTY
            self.protocol_name = None
            self.leader_id = None
            return
        self.phase = GroupPhase.COMPLETING_REBALANCE
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self.protocol_name = self._vote()
        for member in self.members.values():
            member.last_heartbeat = now
            member.joined_generation = self.generation_id
            request_id = member.awaiting_join
            member.awaiting_join = None
            assert request_id is not None
            self._answer(member.client, request_id, self._join_response(member, skip=False))

    def _vote(self) -> str:
        """Kafka's ``selectProtocol``: candidates every member supports; each member
        votes for its most preferred candidate; most votes wins (ties: the leader's
        preference order, for determinism)."""
        members = list(self.members.values())
        candidates = {name for name, _ in members[0].protocols}
        for member in members[1:]:
            candidates &= {name for name, _ in member.protocols}
        votes = Counter(
            next(name for name, _ in member.protocols if name in candidates) for member in members
        )
        best = max(votes.values())
        leader = self.members[self.leader_id] if self.leader_id else members[0]
        return next(name for name, _ in leader.protocols if votes.get(name) == best)

    def _join_response(self, member: _Member, *, skip: bool) -> JoinGroupResponse:
        assert self.protocol_name is not None
        assert self.leader_id is not None
        is_leader = member.member_id == self.leader_id
        members: tuple[JoinGroupResponseMember, ...] = ()
        # Kafka sends the leader the members' metadata even with skip_assignment
        # (updateStaticMemberAndRebalance), so it can watch the group's topics.
        if is_leader:
            members = tuple(
                JoinGroupResponseMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    metadata=m.metadata_for(self.protocol_name),
                )
                for m in self.members.values()
            )
        return JoinGroupResponse(
            error_code=error_codes.NONE,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id,
            skip_assignment=skip,
            member_id=member.member_id,
            members=members,
        )

    # ------------------------------------------------------------------ SyncGroup

    def _check_member(self, member_id: str, instance: str | None, generation_id: int | None) -> int:
        if instance is not None:
            known = self.static_members.get(instance)
            if known is not None and known != member_id:
                return error_codes.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return error_codes.UNKNOWN_MEMBER_ID
        if generation_id is not None and generation_id != self.generation_id:
            return error_codes.ILLEGAL_GENERATION
        return error_codes.NONE

    def _sync(self, client: str, request_id: int, request: SyncGroupRequest, now: float) -> None:
        code = self._check_member(
            request.member_id, request.group_instance_id, request.generation_id
        )
        if code == error_codes.NONE and (
            (request.protocol_type is not None and request.protocol_type != self.protocol_type)
            or (request.protocol_name is not None and request.protocol_name != self.protocol_name)
        ):
            code = error_codes.INCONSISTENT_GROUP_PROTOCOL
        if code == error_codes.NONE and self.phase is GroupPhase.PREPARING_REBALANCE:
            code = error_codes.REBALANCE_IN_PROGRESS
        if code != error_codes.NONE:
            self._answer(client, request_id, SyncGroupResponse(error_code=code))
            return
        member = self.members[request.member_id]
        member.last_heartbeat = now
        if self.phase is GroupPhase.STABLE:
            self._answer(client, request_id, self._sync_response(member))
            return
        member.awaiting_sync = request_id
        if request.member_id == self.leader_id:
            self.leader_assignments += 1
            given = {a.member_id: a.assignment for a in request.assignments}
            for m in self.members.values():
                m.assignment = given.get(m.member_id, b"")
            self.phase = GroupPhase.STABLE
            for m in self.members.values():
                if m.awaiting_sync is not None:
                    self._answer(m.client, m.awaiting_sync, self._sync_response(m))
                    m.awaiting_sync = None

    def _sync_response(self, member: _Member) -> SyncGroupResponse:
        return SyncGroupResponse(
            error_code=error_codes.NONE,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            assignment=member.assignment,
        )

    # ------------------------------------------------------------------ Heartbeat

    def _heartbeat(self, request: HeartbeatRequest, now: float) -> int:
        code = self._check_member(
            request.member_id, request.group_instance_id, request.generation_id
        )
        if code != error_codes.NONE:
            return code
        self.members[request.member_id].last_heartbeat = now
        if self.phase is GroupPhase.PREPARING_REBALANCE:
            return error_codes.REBALANCE_IN_PROGRESS
        return error_codes.NONE

    # ------------------------------------------------------------------ LeaveGroup

    def _leave(self, request: LeaveGroupRequest, now: float) -> LeaveGroupResponse:
        identities: Iterable[tuple[str, str | None]]
        if request.members:
            identities = [(m.member_id, m.group_instance_id) for m in request.members]
        else:
            identities = [(request.member_id, None)]
        results = []
        for member_id, instance in identities:
            code = self._check_member(member_id, instance, None)
            if code == error_codes.NONE:
                self._remove_member(member_id, now)
            results.append(
                MemberResponse(member_id=member_id, group_instance_id=instance, error_code=code)
            )
        if not request.members:
            return LeaveGroupResponse(error_code=results[0].error_code)
        return LeaveGroupResponse(error_code=error_codes.NONE, members=tuple(results))

    def _drop(self, member_id: str) -> None:
        member = self.members.pop(member_id)
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if member.awaiting_sync is not None:
            self._answer(
                member.client,
                member.awaiting_sync,
                SyncGroupResponse(error_code=error_codes.UNKNOWN_MEMBER_ID),
            )
        if member.awaiting_join is not None:
            self._answer(
                member.client, member.awaiting_join, self._join_error(error_codes.UNKNOWN_MEMBER_ID)
            )

    def _remove_member(self, member_id: str, now: float) -> None:
        self._drop(member_id)
        if self.leader_id == member_id:
            self.leader_id = None
        if self.phase is GroupPhase.PREPARING_REBALANCE:
            self._complete_join(now)
        elif self.phase in (GroupPhase.STABLE, GroupPhase.COMPLETING_REBALANCE):
            self._prepare_rebalance(now, f"member {member_id} left")

    # ------------------------------------------------------------------ offsets

    def _commit(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        if request.generation_id < 0 and not request.member_id:
            code = (
                error_codes.NONE
                if self.phase is GroupPhase.EMPTY
                else error_codes.ILLEGAL_GENERATION
            )
        else:
            code = self._check_member(
                request.member_id, request.group_instance_id, request.generation_id
            )
            if code == error_codes.NONE and self.phase is GroupPhase.COMPLETING_REBALANCE:
                code = error_codes.REBALANCE_IN_PROGRESS
        if code == error_codes.NONE:
            for topic in request.topics:
                for p in topic.partitions:
                    self.committed[TopicPartition(topic.name, p.partition_index)] = (
                        p.committed_offset
                    )
        return _commit_response(request, code)

    def _fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        """The single-group (v1-7) form; every partition the request names."""
        topics = request.topics or ()
        return OffsetFetchResponse(
            topics=tuple(
                OffsetFetchResponseTopic(
                    name=t.name,
                    partitions=tuple(
                        OffsetFetchResponsePartition(
                            partition_index=p,
                            committed_offset=self.committed.get(TopicPartition(t.name, p), -1),
                        )
                        for p in t.partition_indexes
                    ),
                )
                for t in topics
            )
        )

    def committed_offsets(self) -> Mapping[TopicPartition, int]:
        """Every committed offset."""
        return dict(self.committed)


def _commit_response(request: OffsetCommitRequest, code: int) -> OffsetCommitResponse:
    """``code`` for every partition of ``request``."""
    return OffsetCommitResponse(
        topics=tuple(
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=tuple(
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        )
    )


def _error_response(request: object, code: int) -> object:
    if isinstance(request, JoinGroupRequest):
        return JoinGroupResponse(error_code=code, generation_id=-1, member_id=request.member_id)
    if isinstance(request, SyncGroupRequest):
        return SyncGroupResponse(error_code=code)
    if isinstance(request, HeartbeatRequest):
        return HeartbeatResponse(error_code=code)
    if isinstance(request, LeaveGroupRequest):
        return LeaveGroupResponse(error_code=code)
    if isinstance(request, OffsetCommitRequest):
        return _commit_response(request, code)
    if isinstance(request, OffsetFetchRequest):
        return OffsetFetchResponse(error_code=code)
    raise TypeError(type(request))


class MockGroupState(enum.Enum):
    """The states of librdkafka's mock classic group (``rdkafka_mock_cgrp.c``)."""

    EMPTY = "Empty"
    JOINING = "Joining"
    SYNCING = "Syncing"
    REBALANCING = "Rebalancing"
    UP = "Up"


#: Which Kafka phase each mock state stands for (``FakeGroupCoordinator.phase``).
_MOCK_PHASES = {
    MockGroupState.EMPTY: GroupPhase.EMPTY,
    MockGroupState.JOINING: GroupPhase.PREPARING_REBALANCE,
    MockGroupState.SYNCING: GroupPhase.COMPLETING_REBALANCE,
    MockGroupState.REBALANCING: GroupPhase.PREPARING_REBALANCE,
    MockGroupState.UP: GroupPhase.STABLE,
}

_JOIN, _HEARTBEAT, _LEAVE, _SYNC, _COMMIT = 11, 12, 13, 14, 8
#: Which requests each mock state accepts (``rd_kafka_mock_cgrp_classic_check_state``);
#: any other is REBALANCE_IN_PROGRESS, except in EMPTY and UP where it is INVALID_REQUEST.
_MOCK_ACCEPTS = {
    MockGroupState.EMPTY: frozenset({_JOIN}),
    MockGroupState.JOINING: frozenset({_JOIN, _LEAVE}),
    MockGroupState.SYNCING: frozenset({_SYNC, _JOIN, _LEAVE}),
    MockGroupState.REBALANCING: frozenset({_JOIN, _LEAVE, _COMMIT}),
    MockGroupState.UP: frozenset({_JOIN, _LEAVE, _HEARTBEAT, _COMMIT}),
}


class MockTimingCoordinator(FakeGroupCoordinator):
    """librdkafka's mock cluster's classic group coordinator, timing included
    (``rdkafka_mock_cgrp.c`` and ``rdkafka_mock_handlers.c``, librdkafka 2.16), where it
    differs from Kafka's (docs/testing.md, "Quirks of the embedded brokers"):

    * every JoinGroup outside the join phase starts a rebalance, even an unchanged one
      from a member of the current generation;
    * the join phase always lasts a fixed time, never ending early when every member
      has rejoined: ``initial_rebalance_delay_s`` for an empty group, 0.1 s after a
      timed-out sync when the member count is unchanged, else the group's session
      timeout minus one second;
    * the election answers the members whose JoinGroup it holds, but lists every
      member to the leader, with the metadata of its last JoinGroup;
    * the leader's SyncGroup completes the round at once: followers whose SyncGroup
      arrives later get INVALID_REQUEST (no generation is ever served twice);
    * OffsetCommit and Heartbeat get REBALANCE_IN_PROGRESS from the first JoinGroup of a
      rebalance until the round completes, whatever their generation;
    * no MEMBER_ID_REQUIRED (the first JoinGroup gets its member id and joins), and a
      JoinGroup with an unknown member id joins under that id;
    * sessions are checked once a second, and only successful heartbeats, joins and
      syncs count as activity.

    Generations start at 1, so the first completed rebalance makes generation 2.
    """

    def __init__(
        self, group_id: str, *, node_id: int = 1, initial_rebalance_delay_s: float = 0.0
    ) -> None:
        super().__init__(group_id, node_id=node_id, require_member_id=False)
        self.initial_rebalance_delay_s = initial_rebalance_delay_s
        self.state = MockGroupState.EMPTY
        self.generation_id = 1
        #: The group's session timeout: the last JoinGroup's (the mock keeps one).
        self.session_timeout_s = 0.0
        self.timer_at: float | None = None
        self.session_check_at: float | None = None
        self.last_member_count = 0
        #: Assignments the leader's SyncGroup set for this round, by member id.
        self.pending_assignments: dict[str, bytes] = {}
        #: Members whose SyncGroup of the current generation came after the round
        #: completed (INVALID_REQUEST) or restarted (REBALANCE_IN_PROGRESS): (client, code).
        self.late_syncs: list[tuple[str, int]] = []

    def _set_state(self, state: MockGroupState) -> None:
        self.state = state
        self.phase = _MOCK_PHASES[state]

    def next_deadline(self) -> float | None:
        candidates = [t for t in (self.timer_at, self.session_check_at) if t is not None]
        return min(candidates) if candidates else None

    def advance(self, now: float) -> None:
        while True:
            due = self.next_deadline()
            if due is None or due > now:
                return
            if self.session_check_at is not None and self.session_check_at <= due:
                self.session_check_at += 1.0
                self._expire_sessions(due)
            else:
                self.timer_at = None
                self._timer_fired(due)

    def _expire_sessions(self, now: float) -> None:
        expired = [
            m.member_id
            for m in self.members.values()
            if m.last_heartbeat + self.session_timeout_s <= now
        ]
        for member_id in expired:
            self._destroy(member_id)
        if expired:
            self._rebalance(now)

    def _timer_fired(self, now: float) -> None:
        if self.state is MockGroupState.JOINING:
            if self.members:
                self._elect(now)
            else:
                self._set_state(MockGroupState.EMPTY)
        elif self.state is MockGroupState.SYNCING:
            self._sync_done(error_codes.REBALANCE_IN_PROGRESS)
            self._set_state(MockGroupState.REBALANCING)

    def _rebalance(self, now: float) -> None:
        if self.state is MockGroupState.JOINING:
            return
        if self.state is MockGroupState.EMPTY:
            delay = self.initial_rebalance_delay_s
        elif (
            self.state is MockGroupState.REBALANCING and len(self.members) == self.last_member_count
        ):
            delay = 0.1
        elif self.session_timeout_s > 1.0:
            delay = self.session_timeout_s - 1.0
        else:
            delay = self.session_timeout_s
        if self.state is MockGroupState.SYNCING:
            self._sync_done(error_codes.REBALANCE_IN_PROGRESS)
        self._set_state(MockGroupState.JOINING)
        self.timer_at = now + delay

    def _elect(self, now: float) -> None:
        self.generation_id += 1
        self.rebalances += 1
        leader = next(iter(self.members.values()))
        self.leader_id = leader.member_id
        protocol = leader.protocols[0][0]
        self.protocol_name = protocol
        listed = tuple(
            JoinGroupResponseMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.protocols[0][1],
            )
            for m in self.members.values()
        )
        if any(m.protocols[0][0] != protocol for m in self.members.values()):
            raise AssertionError("the mock aborts when members' first protocols differ")
        for member in self.members.values():
            if member.awaiting_join is None:
                continue  # not rejoined: still a member, listed with its old metadata
            request_id, member.awaiting_join = member.awaiting_join, None
            member.last_heartbeat = now
            member.joined_generation = self.generation_id
            self._answer(
                member.client,
                request_id,
                JoinGroupResponse(
                    error_code=error_codes.NONE,
                    generation_id=self.generation_id,
                    protocol_name=protocol,
                    leader=leader.member_id,
                    member_id=member.member_id,
                    members=listed if member is leader else (),
                ),
            )
        self.last_member_count = len(self.members)
        self._set_state(MockGroupState.SYNCING)
        self.timer_at = now + self.session_timeout_s

    def _sync_done(self, code: int) -> None:
        for member in self.members.values():
            given = self.pending_assignments.get(member.member_id)
            if code == error_codes.NONE and given is not None:
                member.assignment = given
            if member.awaiting_sync is not None:
                request_id, member.awaiting_sync = member.awaiting_sync, None
                self._answer(
                    member.client,
                    request_id,
                    SyncGroupResponse(
                        error_code=code,
                        assignment=given if code == error_codes.NONE and given is not None else b"",
                    ),
                )
        self.pending_assignments.clear()

    def _destroy(self, member_id: str) -> None:
        """Forget a member; a request it has parked is never answered (the mock frees it)."""
        del self.members[member_id]
        self.pending_assignments.pop(member_id, None)

    def _check_state(self, api_key: int, generation_id: int | None) -> int:
        if generation_id is not None and generation_id != self.generation_id:
            return error_codes.ILLEGAL_GENERATION
        if api_key in _MOCK_ACCEPTS[self.state]:
            return error_codes.NONE
        if self.state in (MockGroupState.EMPTY, MockGroupState.UP):
            return error_codes.INVALID_REQUEST
        return error_codes.REBALANCE_IN_PROGRESS

    def _dispatch(self, client: str, request_id: int, request: object, now: float) -> None:
        if self.session_check_at is None:
            self.session_check_at = now + 1.0  # the group's session timer starts
        if isinstance(request, JoinGroupRequest):
            self._mock_join(client, request_id, request, now)
        elif isinstance(request, SyncGroupRequest):
            self._mock_sync(client, request_id, request, now)
        elif isinstance(request, HeartbeatRequest):
            code = self._mock_member_check(request.member_id, _HEARTBEAT, request.generation_id)
            if code == error_codes.NONE:
                self.members[request.member_id].last_heartbeat = now
            self._answer(client, request_id, HeartbeatResponse(error_code=code))
        elif isinstance(request, LeaveGroupRequest):
            self._answer(client, request_id, self._mock_leave(request, now))
        elif isinstance(request, OffsetCommitRequest):
            self._answer(client, request_id, self._mock_commit(request))
        else:
            super()._dispatch(client, request_id, request, now)

    def _mock_member_check(self, member_id: str, api_key: int, generation_id: int | None) -> int:
        if member_id not in self.members:
            return error_codes.UNKNOWN_MEMBER_ID
        return self._check_state(api_key, generation_id)

    def _mock_join(
        self, client: str, request_id: int, request: JoinGroupRequest, now: float
    ) -> None:
        protocols = tuple((p.name, p.metadata) for p in request.protocols)
        member = self.members.get(request.member_id) if request.member_id else None
        if member is None:
            member_id = request.member_id or self._new_member_id(client, None)
            member = _new_member(member_id, client, request, protocols, now)
            self.members[member_id] = member
        self._rebalance(now)  # a no-op while joining
        self.session_timeout_s = request.session_timeout_ms / 1000.0
        member.protocols = protocols
        member.client = client
        member.awaiting_join = request_id
        member.last_heartbeat = now

    def _mock_sync(
        self, client: str, request_id: int, request: SyncGroupRequest, now: float
    ) -> None:
        code = self._mock_member_check(request.member_id, _SYNC, request.generation_id)
        if code == error_codes.NONE:
            member = self.members[request.member_id]
            member.last_heartbeat = now
            is_leader = request.member_id == self.leader_id
            if request.assignments and not is_leader:
                code = error_codes.NOT_LEADER_OR_FOLLOWER
            elif not request.assignments and is_leader:
                code = error_codes.INVALID_PARTITIONS
        if code != error_codes.NONE:
            if code in (error_codes.INVALID_REQUEST, error_codes.REBALANCE_IN_PROGRESS):
                self.late_syncs.append((client, code))
            self._answer(client, request_id, SyncGroupResponse(error_code=code))
            return
        if request.assignments:
            self.leader_assignments += 1
        for given in request.assignments:
            if given.member_id in self.members:
                self.pending_assignments[given.member_id] = given.assignment
        member.awaiting_sync = request_id
        if len(self.pending_assignments) >= len(self.members):
            self._sync_done(error_codes.NONE)
            self._set_state(MockGroupState.UP)
            self.timer_at = None  # the mock's sync timer then fires in UP and does nothing

    def _mock_leave(self, request: LeaveGroupRequest, now: float) -> LeaveGroupResponse:
        code = self._mock_member_check(request.member_id, _LEAVE, None)
        if code == error_codes.NONE:
            self._destroy(request.member_id)
            self._rebalance(now)
        return LeaveGroupResponse(error_code=code)

    def _mock_commit(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        code = self._mock_member_check(request.member_id, _COMMIT, request.generation_id)
        if code == error_codes.NONE:
            for topic in request.topics:
                for p in topic.partitions:
                    self.committed[TopicPartition(topic.name, p.partition_index)] = (
                        p.committed_offset
                    )
        return _commit_response(request, code)
