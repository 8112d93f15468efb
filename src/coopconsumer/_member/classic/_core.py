"""The group member's data and the helpers every phase shares.

``MemberCore`` holds what a ``GroupMember`` knows (generation, coordinator, ownership,
requests and listeners in flight, timers, the current state's data) and the small
operations the phase modules (``_join``, ``_sync``, ``_stable``, ``_commit``,
``_leave``) build on: sending a request, invoking a listener, losing partitions,
forgetting the coordinator, failing for good. It never decides a transition: the
phases do, through ``enter``, which the transition table checks
(docs/architecture.md, "The group member's state machine").

Pure: no sockets, threads, clocks, ``confluent_kafka`` or ``coopconsumer._io``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import ClassVar, Final

import attrs

from ..._errors import ConfigurationError, KafkaError
from ..._protocol import error_codes
from ..._protocol.messages import (
    JoinGroupResponseMember,
    SyncGroupRequestAssignment,
)
from ..._types import ConsumerGroupMetadata
from ...assignors._api import Assignment, ClusterMetadata, ConsumerPartitionAssignor
from ...assignors._loading import select_rebalance_protocol
from .._base import (
    NO_GENERATION,
    CoordinatorLookup,
    MemberBase,
    check_group_identity,
    ms,
    offset_commit_request,
    positive,
)
from .._effects import (
    Observation,
)
from .._error_actions import Api
from .._inputs import (
    CommitRequested,
    MetadataUpdate,
    RequestFailed,
    ResponseReceived,
    Subscribe,
)
from .._metadata import MetadataRefresh, metadata_answer
from .._outcomes import (
    RESPONSE_TYPES,
    FindCoordinatorOutcome,
    HeartbeatOutcome,
    JoinGroupOutcome,
    LeaveGroupOutcome,
    OffsetCommitOutcome,
    OffsetFetchOutcome,
    Outcome,
    SyncGroupOutcome,
)
from ._states import (
    HEARTBEAT_STATES,
    JOIN_REQUEST_STATES,
    JOIN_STAGE_STATES,
    MemberState,
)

__all__ = [
    "COOPERATIVE_STICKY",
    "JOIN_GROUP_TIMEOUT_LAPSE_S",
    "LEADER_SYNC_DELAY_S",
    "PROTOCOL_TYPE",
    "MemberConfig",
    "MemberCore",
]

#: JoinGroup's protocol type for consumers.
PROTOCOL_TYPE: Final = "consumer"
#: The built-in assignor whose COOPERATIVE results the leader does not re-validate
#: (Java skips ``validateCooperativeAssignment`` for it).
COOPERATIVE_STICKY: Final = "cooperative-sticky"
#: Java's ``JOIN_GROUP_TIMEOUT_LAPSE``: JoinGroup/SyncGroup wait the rebalance timeout
#: plus this before the client gives up on them.
JOIN_GROUP_TIMEOUT_LAPSE_S: Final = 5.0
#: The elected leader sends its SyncGroup no sooner than this after its JoinGroup
#: answer, so that the followers, answered at the same moment, sync first: a
#: coordinator that completes the round on the leader's SyncGroup and refuses later
#: ones (librdkafka's mock cluster) otherwise restarts the rebalance round after round
#: (docs/testing.md, "Quirks of the embedded brokers"). Kafka answers a follower's
#: SyncGroup in either order; there this costs 20 ms per round.
LEADER_SYNC_DELAY_S: Final = 0.02


def _check_config(config: MemberConfig) -> None:
    check_group_identity(config.group_id, config.group_instance_id)
    if config.heartbeat_interval_ms >= config.session_timeout_ms:
        raise ConfigurationError(
            f"heartbeat.interval.ms ({config.heartbeat_interval_ms}) must be lower than "
            f"session.timeout.ms ({config.session_timeout_ms})"
        )


@attrs.frozen(kw_only=True)
class MemberConfig:
    """The group settings a member needs, in Kafka's units (milliseconds).

    The rebalance timeout sent in JoinGroup is ``max_poll_interval_ms`` (as Java).
    ``metadata_max_age_ms`` is how often the member refreshes the metadata of the
    topics it wants (``_metadata.py``).
    ``enable_auto_commit`` makes the member emit ``CommitBeforeRevoke`` before each
    REVOKED listener; ``auto_commit_interval_ms`` (None: no timer) makes it emit
    ``AutoCommitDue`` at that interval (``_own_commits.py``). ``require_stable``
    (KIP-447; Java sets it for ``isolation.level=read_committed``) makes offset fetches
    wait out transactions that still hold offsets (UNSTABLE_OFFSET_COMMIT is retried).
    """

    group_id: str
    session_timeout_ms: int = attrs.field(default=45_000, validator=positive)
    heartbeat_interval_ms: int = attrs.field(default=3_000, validator=positive)
    max_poll_interval_ms: int = attrs.field(default=300_000, validator=positive)
    retry_backoff_ms: int = attrs.field(default=100, validator=positive)
    request_timeout_ms: int = attrs.field(default=30_000, validator=positive)
    metadata_max_age_ms: int = attrs.field(default=300_000, validator=positive)
    group_instance_id: str | None = None
    client_rack: str | None = None
    enable_auto_commit: bool = False
    auto_commit_interval_ms: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(positive)
    )
    require_stable: bool = False

    def __attrs_post_init__(self) -> None:
        _check_config(self)


@attrs.frozen(kw_only=True)
class PendingLeave:
    """A leave asked for while a JoinGroup/SyncGroup was under way, held until the
    SyncGroup answer lets the member commit first, or until ``deadline``."""

    then: MemberState
    leave_group: bool | None
    reason: str
    asked_at: float
    deadline: float


class MemberCore(MemberBase[MemberState]):
    """The mutable data of one group member and the operations all phases share.

    Only ``GroupMember`` creates one; only the phase handlers the transition table
    names change it, one input at a time.
    """

    def __init__(
        self, config: MemberConfig, assignors: Sequence[ConsumerPartitionAssignor]
    ) -> None:
        if not assignors:
            raise ConfigurationError("partition.assignment.strategy names no assignor")
        names = [a.name for a in assignors]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"duplicate assignor names in {names}")
        super().__init__(
            MemberState.UNJOINED,
            MemberState.CLOSED,
            MemberState.FATAL,
            MetadataRefresh(
                max_age_s=ms(config.metadata_max_age_ms),
                retry_backoff_s=ms(config.retry_backoff_ms),
            ),
        )
        self.config = config
        self.assignors = tuple(assignors)
        self.assignor_by_name = {a.name: a for a in assignors}
        #: Fixed for the member's life: the assignors never change (docs/architecture.md).
        self.protocol = select_rebalance_protocol(self.assignors)

        self.generation_id = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id: str | None = None

        self.subscription: Subscribe | None = None
        self.subscribed: frozenset[str] = frozenset()
        self.metadata: ClusterMetadata | None = None
        self.internal_topics: frozenset[str] = frozenset()
        self.joined_subscription: frozenset[str] | None = None
        self.assignment_snapshot: dict[str, int | None] | None = None
        # Topics of a skip_assignment snapshot whose counts were unknown when it was
        # taken (not fetched yet): the first counts seen become their baseline.
        self.snapshot_unknown: frozenset[str] = frozenset()
        # Partition counts as this member first sent JoinGroup since its last completed
        # join (None: not taken yet). A static leader answered skip_assignment compares
        # against these, so a change that lands while its join is retried is noticed.
        self.join_started_counts: dict[str, int] | None = None
        self.group_topics: frozenset[str] = frozenset()  # leader: the group subscription

        # The generation whose assignment was last applied (-1: none, or reset): what
        # JoinGroup's Subscription.generation_id carries, see _join.subscription_for.
        self.assigned_generation_id = NO_GENERATION
        # Timers (monotonic seconds).
        self.session_ok_at = 0.0
        self.heartbeat_due: float | None = None
        self.join_retry_at: float | None = None
        self.rebalance_started_at: float | None = None

        # State data.
        self.reason = ""  # PREPARING_JOIN / JOINING: why we (re)join (KIP-800)
        self.leader_members: tuple[JoinGroupResponseMember, ...] = ()  # LEADER_AWAITING_..
        # LEADER_AWAITING_METADATA: the SyncGroup is not sent before leader_sync_at; the
        # assignment, once computed from fresh metadata, waits here until then.
        self.leader_sync_at = 0.0
        self.leader_assignments: tuple[SyncGroupRequestAssignment, ...] | None = None
        # ASSIGNING: the assignment still to apply (None once applied: the member then
        # waits for the ASSIGNED listener; see docs/architecture.md).
        self.assignment_to_apply: Assignment | None = None
        self.follow_up_reason: str | None = None  # ASSIGNING: rejoin owed afterwards
        self.leave_then = MemberState.CLOSED  # LEAVING: CLOSED or UNJOINED
        self.leave_group: bool | None = None  # LEAVING: CloseRequested.leave_group
        self.leave_reason = ""  # LEAVING
        # JOINING/LEADER_AWAITING_METADATA/AWAITING_SYNC: a leave waiting for the
        # SyncGroup answer (see _leave.defer_leave).
        self.leave_pending: PendingLeave | None = None

    config: MemberConfig
    HEARTBEAT_API: ClassVar[Api] = Api.HEARTBEAT

    @property
    def request_generation(self) -> int:
        return self.generation_id

    def response_type(self, api: Api) -> type:
        return RESPONSE_TYPES[api]

    # ------------------------------------------------------------------ state

    @property
    def is_leader(self) -> bool:
        """Whether this member led the last join."""
        return bool(self.member_id) and self.leader_id == self.member_id

    @property
    def group_metadata(self) -> ConsumerGroupMetadata:
        """The ``ConsumerGroupMetadata`` of the current generation."""
        return ConsumerGroupMetadata(
            group_id=self.config.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.config.group_instance_id,
        )

    @property
    def next_deadline(self) -> float | None:
        """When to feed the next ``Tick`` (None: no timer is armed). After a ``Tick`` at
        ``now`` it is always later than ``now`` or None, so a driver never spins."""
        candidates: list[float] = []
        if (refresh := self.metadata_refresh.deadline) is not None:
            candidates.append(refresh)
        if self.lookup is CoordinatorLookup.BACKING_OFF and self.lookup_retry_at is not None:
            candidates.append(self.lookup_retry_at)
        if self.leave_pending is not None:
            # Due at its deadline, or at once when there is nothing left to commit.
            leave = self.leave_pending
            candidates.append(leave.deadline if self.leave_worth_waiting() else leave.asked_at)
        candidates.extend(w.deadline for w in self.waiting_commits)
        for job in self.fetches.values():
            candidates.append(job.deadline)
            if (
                job.request_id is None
                and job.retry_at is not None
                and self.coordinator_id is not None
            ):
                candidates.append(job.retry_at)
        if (
            self.state is MemberState.JOINING
            and self.join_retry_at is not None
            and self.coordinator_id is not None  # else CoordinatorFound resumes it
            and not self.in_flight(Api.JOIN_GROUP)
        ):
            candidates.append(self.join_retry_at)
        if (
            self.state is MemberState.LEADER_AWAITING_METADATA
            and self.leader_assignments is not None
        ):
            candidates.append(self.leader_sync_at)
        if self.session_timed():
            candidates.append(self.session_deadline())
        if self.heartbeating():
            if self.leave_pending is None:
                candidates.append(self.last_poll + ms(self.config.max_poll_interval_ms))
            if (
                self.coordinator_id is not None
                and self.heartbeat_due is not None
                and not self.in_flight(Api.HEARTBEAT)
            ):
                candidates.append(self.heartbeat_due)
        return min(candidates) if candidates else None

    def route(
        self, event: ResponseReceived | RequestFailed, now: float
    ) -> Outcome | MetadataUpdate | None:
        """The one place stale answers are dropped: superseded (cancelled) requests and
        heartbeats of another generation; everything else becomes a per-API outcome
        (a Metadata answer: the ``MetadataUpdate`` it carries, see ``_metadata``)."""
        pending = self.take_answer(event, now)
        if pending is None:
            return None
        if pending.api is Api.HEARTBEAT and (
            pending.generation_id != self.generation_id or pending.member_id != self.member_id
        ):
            self.log(logging.DEBUG, "dropping a heartbeat answer of an older generation")
            return None
        response, error = self.answer_parts(pending, event)
        if pending.api is Api.METADATA:
            return metadata_answer(self, response, error, now)
        if pending.api is Api.JOIN_GROUP:
            return JoinGroupOutcome(pending=pending, response=response, error=error)
        if pending.api is Api.SYNC_GROUP:
            return SyncGroupOutcome(pending=pending, response=response, error=error)
        if pending.api is Api.HEARTBEAT:
            return HeartbeatOutcome(pending=pending, response=response, error=error)
        if pending.api is Api.LEAVE_GROUP:
            return LeaveGroupOutcome(pending=pending, response=response, error=error)
        version = event.api_version if isinstance(event, ResponseReceived) else None
        if pending.api is Api.FIND_COORDINATOR:
            return FindCoordinatorOutcome(
                pending=pending, response=response, error=error, api_version=version
            )
        if pending.api is Api.OFFSET_FETCH:
            return OffsetFetchOutcome(
                pending=pending, response=response, error=error, api_version=version
            )
        return OffsetCommitOutcome(pending=pending, response=response, error=error)

    def leave_worth_waiting(self) -> bool:
        """Whether a pending leave still has something to commit by waiting: a join
        under way, a generation, and partitions not yet handed to a listener."""
        return (
            self.state in JOIN_STAGE_STATES
            and self.has_generation()
            and bool(frozenset(self.owned) - self.revoking())
        )

    def has_generation(self) -> bool:
        return self.generation_id != NO_GENERATION and bool(self.member_id)

    def heartbeating(self) -> bool:
        return self.state in HEARTBEAT_STATES and self.has_generation()

    def held_by_coordinator(self) -> bool:
        """A JoinGroup/SyncGroup is in flight on a connection that has proven live.

        One sent after a request failure or a coordinator change, before any answer
        from that coordinator, may still wait in the driver for a connection: it proves
        nothing about the session.
        """
        node = self.live_node
        return node is not None and any(
            p.api in (Api.JOIN_GROUP, Api.SYNC_GROUP) and p.node_id == node
            for p in self.pending.values()
        )

    def waiting_to_join(self) -> bool:
        """JOINING/AWAITING_SYNC in a generation with no JoinGroup/SyncGroup held by the
        coordinator (waiting for it, a lookup, a connection or a retry backoff): nothing
        keeps the session alive at the coordinator."""
        return (
            self.state in JOIN_REQUEST_STATES
            and self.has_generation()
            and not self.held_by_coordinator()
        )

    def session_timed(self) -> bool:
        """Whether the session can lapse at the coordinator now, so the member times it.

        A cooperative member keeps its partitions while it rejoins (KIP-429). The
        broker keeps its session alive while it holds the member's JoinGroup/SyncGroup
        (up to the rebalance timeout), but not while the member cannot reach it: then
        the broker expires the member and hands its partitions to others, and without
        a local timer the member would learn so only from its next JoinGroup answer
        (UNKNOWN_MEMBER_ID), owning them twice meanwhile (issue 4).
        """
        return self.heartbeating() or self.waiting_to_join()

    def session_deadline(self) -> float:
        return self.session_ok_at + ms(self.config.session_timeout_ms)

    def request_timeout_s(self, api: Api) -> float | None:
        """JoinGroup and SyncGroup wait the rebalance timeout plus a lapse (Java)."""
        if api in (Api.JOIN_GROUP, Api.SYNC_GROUP):
            return max(
                ms(self.config.request_timeout_ms),
                ms(self.config.max_poll_interval_ms) + JOIN_GROUP_TIMEOUT_LAPSE_S,
            )
        return None

    def send_commit(
        self, event: CommitRequested, now: float, *, generation_id: int, member_id: str
    ) -> None:
        """Send ``event``'s OffsetCommit to the coordinator as ``generation_id`` and
        ``member_id`` (-1 and "" for a consumer outside the group)."""
        request = offset_commit_request(
            group_id=self.config.group_id,
            generation_id=generation_id,
            member_id=member_id,
            # Committing as nobody (no member id) carries no static identity either.
            group_instance_id=self.config.group_instance_id if member_id else None,
            offsets=event.offsets,
        )
        self.send(Api.OFFSET_COMMIT, request, now, token=event.token)

    def drop_state_data(self) -> None:
        self.leave_pending = None  # nothing can be committed or left any more

    def ensure_coordinator_if_unknown(self, now: float) -> None:
        if self.coordinator_id is None:
            self.ensure_coordinator(now)

    def reset_generation(self, *, clear_member_id: bool) -> None:
        self.generation_id = NO_GENERATION
        self.assigned_generation_id = NO_GENERATION  # what is owned is lost
        if clear_member_id:
            self.member_id = ""
        self.leader_id = None
        # _assignment_snapshot survives: a static leader that rejoins with
        # skip_assignment compares against what the group was really assigned from.
        self.cancel(Api.HEARTBEAT)

    def kafka_error(self, code: int, api: Api) -> KafkaError:
        return error_codes.to_exception(code, api_key=api.value)

    def metadata_snapshot(self, topics: frozenset[str]) -> dict[str, int | None]:
        md = self.metadata
        return {t: (md.partition_count(t) if md is not None else None) for t in topics}

    def inconsistent(self, api: Api, what: str) -> KafkaError:
        return error_codes.to_exception(
            error_codes.INCONSISTENT_GROUP_PROTOCOL,
            api_key=api.value,
            message=f"the coordinator answered with {what}, which this member did not offer",
        )

    def rebalance_failed(self, now: float) -> None:
        self.observe(Observation.REBALANCE_FAILED, now)
