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
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from .._errors import ConfigurationError, CoopConsumerError, KafkaError, ProtocolError
from .._protocol import errors
from .._protocol.messages import (
    JoinGroupResponseMember,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from .._types import ConsumerGroupMetadata, TopicPartition
from ..assignors._api import Assignment, ClusterMetadata, ConsumerPartitionAssignor
from ..assignors._loading import select_rebalance_protocol
from ._effects import (
    CommitBeforeRevoke,
    CommitDone,
    CommittedOffsetsDone,
    Effect,
    Fatal,
    FindCoordinator,
    InvokeListener,
    ListenerKind,
    Log,
    Observation,
    Observe,
    OffsetAndMetadata,
    Send,
    Unassign,
)
from ._error_actions import Api
from ._errors import IllegalTransition
from ._inputs import (
    CommitRequested,
    ListenerDone,
    MetadataUpdate,
    RequestFailed,
    ResponseReceived,
    Subscribe,
)
from ._metadata import MetadataRefresh, metadata_answer
from ._outcomes import (
    RESPONSE_TYPES,
    FindCoordinatorOutcome,
    HeartbeatOutcome,
    JoinGroupOutcome,
    LeaveGroupOutcome,
    OffsetCommitOutcome,
    OffsetFetchOutcome,
    Outcome,
    Pending,
    SyncGroupOutcome,
)
from ._states import (
    HEARTBEAT_STATES,
    JOIN_REQUEST_STATES,
    JOIN_STAGE_STATES,
    CoordinatorLookup,
    MemberState,
)

__all__ = [
    "COOPERATIVE_STICKY",
    "JOIN_GROUP_TIMEOUT_LAPSE_S",
    "NO_GENERATION",
    "PROTOCOL_TYPE",
    "MemberConfig",
    "MemberCore",
    "ms",
]

#: JoinGroup's protocol type for consumers.
PROTOCOL_TYPE: Final = "consumer"
#: The built-in assignor whose COOPERATIVE results the leader does not re-validate
#: (Java skips ``validateCooperativeAssignment`` for it).
COOPERATIVE_STICKY: Final = "cooperative-sticky"
#: Java's ``JOIN_GROUP_TIMEOUT_LAPSE``: JoinGroup/SyncGroup wait the rebalance timeout
#: plus this before the client gives up on them.
JOIN_GROUP_TIMEOUT_LAPSE_S: Final = 5.0
#: The generation id of a member that has none.
NO_GENERATION: Final = -1


def _positive(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value <= 0:
        raise ConfigurationError(f"{attribute.name} must be positive, got {value}")


def _check_config(config: MemberConfig) -> None:
    if not config.group_id:
        raise ConfigurationError("group.id is required for a subscribing consumer")
    if config.heartbeat_interval_ms >= config.session_timeout_ms:
        raise ConfigurationError(
            f"heartbeat.interval.ms ({config.heartbeat_interval_ms}) must be lower than "
            f"session.timeout.ms ({config.session_timeout_ms})"
        )
    if config.group_instance_id is not None and not config.group_instance_id:
        raise ConfigurationError("group.instance.id must not be empty")


@attrs.frozen(kw_only=True)
class MemberConfig:
    """The group settings a member needs, in Kafka's units (milliseconds).

    The rebalance timeout sent in JoinGroup is ``max_poll_interval_ms`` (as Java).
    ``metadata_max_age_ms`` is how often the member refreshes the metadata of the
    topics it wants (``_metadata.py``).
    ``enable_auto_commit`` only makes the member emit ``CommitBeforeRevoke`` before
    each REVOKED listener. ``require_stable`` (KIP-447; Java sets it for
    ``isolation.level=read_committed``) makes offset fetches wait out transactions
    that still hold offsets (UNSTABLE_OFFSET_COMMIT is retried).
    """

    group_id: str
    session_timeout_ms: int = attrs.field(default=45_000, validator=_positive)
    heartbeat_interval_ms: int = attrs.field(default=3_000, validator=_positive)
    max_poll_interval_ms: int = attrs.field(default=300_000, validator=_positive)
    retry_backoff_ms: int = attrs.field(default=100, validator=_positive)
    request_timeout_ms: int = attrs.field(default=30_000, validator=_positive)
    metadata_max_age_ms: int = attrs.field(default=300_000, validator=_positive)
    group_instance_id: str | None = None
    client_rack: str | None = None
    enable_auto_commit: bool = False
    require_stable: bool = False

    def __attrs_post_init__(self) -> None:
        _check_config(self)


@attrs.define(kw_only=True)
class FetchJob:
    """A committed-offsets request being served (see ``_fetch``): what was asked, by
    when, and where its OffsetFetch is (in flight, or waiting for ``retry_at``)."""

    partitions: frozenset[TopicPartition]
    token: object
    deadline: float
    retry_at: float | None = None
    request_id: int | None = None
    last_error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class WaitingCommit:
    """A commit of a manual assignment asked for before the coordinator was found:
    sent once it is, failed (retriable) at ``deadline`` (see ``_manual``)."""

    event: CommitRequested
    deadline: float


@attrs.frozen(kw_only=True)
class PendingLeave:
    """A leave asked for while a JoinGroup/SyncGroup was under way, held until the
    SyncGroup answer lets the member commit first, or until ``deadline``."""

    then: MemberState
    leave_group: bool | None
    reason: str
    asked_at: float
    deadline: float


def ms(value_ms: int) -> float:
    """Kafka's milliseconds as the core's float seconds."""
    return value_ms / 1000.0


class MemberCore:
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
        self.config = config
        self.assignors = tuple(assignors)
        self.assignor_by_name = {a.name: a for a in assignors}
        #: Fixed for the member's life: the assignors never change (docs/architecture.md).
        self.protocol = select_rebalance_protocol(self.assignors)

        self._state = MemberState.UNJOINED
        # The input being handled: its state on arrival, its type, and the states its
        # row of the transition table allows the handler to move to.
        self._input_state = MemberState.UNJOINED
        self._input_type: type = type(None)
        self._allowed: frozenset[MemberState] = frozenset()

        self.member_id = ""
        self.generation_id = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id: str | None = None

        self.coordinator_id: int | None = None
        # The coordinator node whose connection has proven live: it answered a request
        # since the last request failure or coordinator change (None: not proven).
        self.live_node: int | None = None
        self.lookup = CoordinatorLookup.IDLE
        self.lookup_retry_at: float | None = None

        self.subscription: Subscribe | None = None
        self.subscribed: frozenset[str] = frozenset()
        self.metadata_refresh = MetadataRefresh(
            max_age_s=ms(config.metadata_max_age_ms), retry_backoff_s=ms(config.retry_backoff_ms)
        )
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

        self.owned: set[TopicPartition] = set()
        # The generation whose assignment was last applied (-1: none, or reset): what
        # JoinGroup's Subscription.generation_id carries, see _join.subscription_for.
        self.assigned_generation_id = NO_GENERATION
        # invocation id -> partitions to Unassign when that (REVOKED) listener is done
        self.listeners: dict[int, frozenset[TopicPartition]] = {}
        self.next_invocation_id = 1
        self.pending: dict[int, Pending] = {}
        # Cancelled heartbeats whose answers are still timed (see cancel); each entry
        # goes when its request's ResponseReceived or RequestFailed arrives.
        self.superseded: dict[int, Pending] = {}
        self.next_request_id = 1

        # Timers (monotonic seconds).
        self.session_ok_at = 0.0
        self.last_poll = 0.0
        self.heartbeat_due: float | None = None
        self.join_retry_at: float | None = None
        self.rebalance_started_at: float | None = None

        # State data.
        self.reason = ""  # PREPARING_JOIN / JOINING: why we (re)join (KIP-800)
        self.leader_members: tuple[JoinGroupResponseMember, ...] = ()  # LEADER_AWAITING_..
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
        self.fatal_error: CoopConsumerError | None = None  # FATAL
        # Committed-offset fetches in progress, by fetch id (any live state).
        self.fetches: dict[int, FetchJob] = {}
        self.next_fetch_id = 1
        # MANUAL: commits waiting for the coordinator to be found, oldest first.
        self.waiting_commits: list[WaitingCommit] = []

        self.fx: list[Effect] = []

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> MemberState:
        """The current state; only ``enter`` changes it."""
        return self._state

    def begin(self, input_type: type, allowed: frozenset[MemberState]) -> None:
        """Start handling an input of ``input_type`` in the current state, whose row of
        the transition table allows moves to ``allowed``."""
        self._input_state = self._state
        self._input_type = input_type
        self._allowed = allowed

    def enter(self, target: MemberState) -> None:
        """Move to ``target``; ``IllegalTransition`` if the row of the input being
        handled does not allow it (staying in the current state is no move)."""
        if target is self._state:
            return
        if target not in self._allowed:
            raise IllegalTransition(self._input_state, self._input_type, target=target)
        self._state = target
        if target in (MemberState.CLOSED, MemberState.FATAL):
            self.metadata_refresh.stop()

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
        if self.session_timed():
            candidates.append(self.session_deadline())
        if self.heartbeating():
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
        pending = self.pending.pop(event.request_id, None)
        superseded = self.superseded.pop(event.request_id, None)
        sent = pending if pending is not None else superseded
        if sent is not None and sent.node_id is not None and sent.node_id == self.coordinator_id:
            self.live_node = sent.node_id if isinstance(event, ResponseReceived) else None
        if pending is None:
            if superseded is not None:
                self.observe_round_trip(superseded, event, now)
            self.log(logging.DEBUG, f"dropping the answer to superseded request {event.request_id}")
            return None
        self.observe_round_trip(pending, event, now)
        if pending.api is Api.HEARTBEAT and (
            pending.generation_id != self.generation_id or pending.member_id != self.member_id
        ):
            self.log(logging.DEBUG, "dropping a heartbeat answer of an older generation")
            return None
        error: CoopConsumerError | None = None
        response: Any = None
        if isinstance(event, RequestFailed):
            error = event.error
        elif isinstance(event.response, RESPONSE_TYPES[pending.api]):
            response = event.response
        else:
            error = ProtocolError(
                f"expected a {RESPONSE_TYPES[pending.api].__name__}, "
                f"got {type(event.response).__name__}",
                api_key=pending.api.value,
            )
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

    def observe_round_trip(
        self, pending: Pending, event: ResponseReceived | RequestFailed, now: float
    ) -> None:
        """Heartbeat and commit latency for every response that arrives, whatever its
        error code, stale or superseded ones included (Java's Heartbeat and OffsetCommit
        handlers record ``requestLatencyMs`` first thing); never for a timeout or a
        disconnect, which are not responses."""
        if not isinstance(event, ResponseReceived):
            return
        if not isinstance(event.response, RESPONSE_TYPES[pending.api]):
            return
        if pending.api is Api.HEARTBEAT:
            self.observe(Observation.HEARTBEAT_COMPLETED, now, now - pending.sent_at)
        elif pending.api is Api.OFFSET_COMMIT:
            self.observe(Observation.COMMIT_COMPLETED, now, now - pending.sent_at)

    def emit(self, effect: Effect) -> None:
        self.fx.append(effect)

    def log(self, level: int, message: str) -> None:
        self.fx.append(Log(level=level, message=message))

    def observe(self, event: Observation, now: float, latency_s: float | None = None) -> None:
        self.fx.append(Observe(event=event, now=now, latency_s=latency_s))

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

    def in_flight(self, api: Api) -> bool:
        return any(p.api is api for p in self.pending.values())

    def cancel(self, *apis: Api) -> None:
        """Forget requests in flight: their answers will be dropped by ``route``. A
        cancelled heartbeat is still timed when its answer arrives (Java never cancels
        one, so its latency is recorded)."""
        for request_id in [r for r, p in self.pending.items() if p.api in apis]:
            pending = self.pending.pop(request_id)
            if pending.api is Api.HEARTBEAT:
                self.superseded[request_id] = pending

    def track(self, api: Api, now: float, *, token: object, node_id: int | None) -> int:
        """A new request id, remembered with what the request was until its answer."""
        request_id = self.next_request_id
        self.next_request_id += 1
        self.pending[request_id] = Pending(
            api=api,
            sent_at=now,
            generation_id=self.generation_id,
            member_id=self.member_id,
            token=token,
            node_id=node_id,
        )
        return request_id

    def send(self, api: Api, request: object, now: float, *, token: object = None) -> int:
        """Send ``request`` to the coordinator; returns its request id."""
        assert self.coordinator_id is not None
        request_id = self.track(api, now, token=token, node_id=self.coordinator_id)
        timeout: float | None = None
        if api in (Api.JOIN_GROUP, Api.SYNC_GROUP):
            timeout = max(
                ms(self.config.request_timeout_ms),
                ms(self.config.max_poll_interval_ms) + JOIN_GROUP_TIMEOUT_LAPSE_S,
            )
        self.emit(
            Send(
                request_id=request_id,
                request=request,
                node_id=self.coordinator_id,
                timeout_s=timeout,
            )
        )
        return request_id

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

    def invoke(
        self,
        kind: ListenerKind,
        partitions: frozenset[TopicPartition],
        *,
        unassign_after: frozenset[TopicPartition] = frozenset(),
    ) -> None:
        invocation_id = self.next_invocation_id
        self.next_invocation_id += 1
        self.listeners[invocation_id] = unassign_after
        self.emit(InvokeListener(invocation_id=invocation_id, kind=kind, partitions=partitions))

    def revoke(self, partitions: frozenset[TopicPartition]) -> None:
        """REVOKED while still assigned (the listener may commit); Unassign when done."""
        if self.config.enable_auto_commit:
            self.emit(CommitBeforeRevoke(partitions=partitions))
        self.invoke(ListenerKind.REVOKED, partitions, unassign_after=partitions)

    def revoking(self) -> frozenset[TopicPartition]:
        """Owned partitions whose REVOKED callback is still running (Unassign follows
        its ``ListenerDone``)."""
        return frozenset().union(*self.listeners.values()) & self.owned

    def lose(self) -> None:
        """LOST for everything owned: Unassign first (someone else may own them now).

        Partitions already handed to a REVOKED callback are not reported again: to the
        application they are gone once revoked (KIP-429: LOST covers what the member
        still owns), and their own ``ListenerDone`` unassigns them. Joining waits for
        that callback, so they are never claimed in the next JoinGroup.
        """
        lost = frozenset(self.owned) - self.revoking()
        if not lost:
            return
        self.owned -= lost
        self.emit(Unassign(partitions=lost))
        self.invoke(ListenerKind.LOST, lost)

    def complete_listener(self, event: ListenerDone) -> None:
        unassign = self.listeners.pop(event.invocation_id) & self.owned
        if unassign:
            self.owned -= unassign
            self.emit(Unassign(partitions=unassign))

    def coordinator_dead(self, reason: str, now: float) -> None:
        if self.coordinator_id is not None:
            self.log(logging.INFO, f"group coordinator {self.coordinator_id} unknown: {reason}")
        self.coordinator_id = None
        self.live_node = None
        if self.lookup is CoordinatorLookup.KNOWN:
            self.lookup = CoordinatorLookup.IDLE
        self.ensure_coordinator(now)

    def ensure_coordinator(self, now: float) -> None:
        if self.lookup is CoordinatorLookup.BACKING_OFF and (
            self.lookup_retry_at is None or now >= self.lookup_retry_at
        ):
            self.lookup = CoordinatorLookup.IDLE
        if self.lookup is CoordinatorLookup.IDLE:
            self.lookup = CoordinatorLookup.LOOKING
            self.lookup_retry_at = None
            request_id = self.track(Api.FIND_COORDINATOR, now, token=None, node_id=None)
            self.emit(FindCoordinator(group_id=self.config.group_id, request_id=request_id))

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
        return errors.to_exception(code, api_key=api.value)

    def fatal(self, error: CoopConsumerError, now: float) -> None:
        self.log(logging.ERROR, f"fatal group error: {error}")
        self.lose()
        self.fail_commits(error)
        self.fail_fetches(error)
        self.pending.clear()
        self.leave_pending = None  # nothing can be committed or left any more
        self.enter(MemberState.FATAL)
        self.fatal_error = error
        self.emit(Fatal(error=error))

    def fail_commits(self, error: CoopConsumerError) -> None:
        waiting, self.waiting_commits = self.waiting_commits, []
        for commit in waiting:
            self.emit(CommitDone(token=commit.event.token, error=error))
        for request_id, pending in list(self.pending.items()):
            if pending.api is Api.OFFSET_COMMIT:
                del self.pending[request_id]
                self.emit(CommitDone(token=pending.token, error=error))

    def fail_fetches(self, error: CoopConsumerError) -> None:
        """Answer every committed-offsets request in progress with ``error``."""
        for fetch_id in list(self.fetches):
            self.finish_fetch(fetch_id, error=error)

    def finish_fetch(
        self,
        fetch_id: int,
        *,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | None] | None = None,
        error: CoopConsumerError | None = None,
    ) -> None:
        """Answer fetch ``fetch_id`` (exactly once) and forget its request in flight."""
        job = self.fetches.pop(fetch_id)
        if job.request_id is not None:
            self.pending.pop(job.request_id, None)
        self.emit(
            CommittedOffsetsDone(
                token=job.token, offsets=offsets if offsets is not None else {}, error=error
            )
        )

    def metadata_snapshot(self, topics: frozenset[str]) -> dict[str, int | None]:
        md = self.metadata
        return {t: (md.partition_count(t) if md is not None else None) for t in topics}

    def inconsistent(self, api: Api, what: str) -> KafkaError:
        return errors.to_exception(
            errors.INCONSISTENT_GROUP_PROTOCOL,
            api_key=api.value,
            message=f"the coordinator answered with {what}, which this member did not offer",
        )

    def rebalance_failed(self, now: float) -> None:
        self.observe(Observation.REBALANCE_FAILED, now)


def offset_commit_request(
    *,
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
) -> OffsetCommitRequest:
    """The OffsetCommit of ``offsets``, topics and partitions in order. Both group
    protocols send it: ``generation_id`` is the classic generation (-1 outside a group)
    or KIP-848's member epoch (the field is ``GenerationIdOrMemberEpoch`` in the spec)."""
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for tp in sorted(offsets):
        om = offsets[tp]
        by_topic.setdefault(tp.topic, []).append(
            OffsetCommitRequestPartition(
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata,
            )
        )
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        topics=tuple(
            OffsetCommitRequestTopic(name=topic, partitions=tuple(parts))
            for topic, parts in by_topic.items()
        ),
    )


def first_commit_error(response: OffsetCommitResponse) -> int:
    """The first partition error of an OffsetCommit answer (``errors.NONE`` if none)."""
    return next(
        (p.error_code for t in response.topics for p in t.partitions if p.error_code),
        errors.NONE,
    )
