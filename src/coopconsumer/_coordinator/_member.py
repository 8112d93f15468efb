"""``GroupMember``: the sans-I/O classic-group-protocol member (KIP-429 semantics).

One transition table ``(state, input type) -> handler``; every pair is handled,
explicitly ignored or explicitly rejected (``IllegalTransition``). Responses and request
failures are routed to per-API outcome inputs in one place (``_route``), which is also
the one place stale answers are dropped. Java's ``ConsumerCoordinator`` and
``AbstractCoordinator`` are the behavioural reference.

Pure: no sockets, threads, clocks, ``confluent_kafka`` or ``coopconsumer._io``. Time is
the ``now`` argument (monotonic float seconds).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from .. import consumer_protocol
from .._errors import (
    AssignorError,
    CommitFailedError,
    ConfigurationError,
    CoopConsumerError,
    KafkaError,
    ProtocolError,
    RebalanceInProgressError,
)
from .._protocol import errors
from .._protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from .._types import ConsumerGroupMetadata, TopicPartition
from ..assignors._api import (
    Assignment,
    ClusterMetadata,
    ConsumerPartitionAssignor,
    GroupSubscription,
    RebalanceProtocol,
    Subscription,
)
from ..assignors._loading import select_rebalance_protocol
from ..assignors._validation import check_assignment, validate_cooperative_assignment
from ._diff import diff_assignment, revoke_before_join
from ._effects import (
    Assign,
    CommitBeforeRevoke,
    CommitDone,
    Effect,
    Fatal,
    FindCoordinator,
    InvokeListener,
    ListenerKind,
    Log,
    MetadataNeeded,
    Observation,
    Observe,
    ReportError,
    Send,
    Unassign,
)
from ._error_actions import Api, ErrorAction, action_for
from ._inputs import (
    CloseRequested,
    CommitRequested,
    CoordinatorFound,
    CoordinatorUnavailable,
    LeaveRequested,
    ListenerDone,
    MetadataUpdate,
    PollCalled,
    RequestFailed,
    ResponseReceived,
    Subscribe,
    Tick,
)
from ._states import HEARTBEAT_STATES, JOIN_REQUEST_STATES, MemberState

__all__ = [
    "COOPERATIVE_STICKY",
    "IGNORED",
    "JOIN_GROUP_TIMEOUT_LAPSE_S",
    "PROTOCOL_TYPE",
    "REJECTED",
    "TRANSITIONS",
    "GroupMember",
    "HeartbeatOutcome",
    "IllegalTransition",
    "JoinGroupOutcome",
    "LeaveGroupOutcome",
    "MemberConfig",
    "OffsetCommitOutcome",
    "SyncGroupOutcome",
]

#: JoinGroup's protocol type for consumers.
PROTOCOL_TYPE: Final = "consumer"
#: The built-in assignor whose COOPERATIVE results the leader does not re-validate
#: (Java skips ``validateCooperativeAssignment`` for it).
COOPERATIVE_STICKY: Final = "cooperative-sticky"
#: Java's ``JOIN_GROUP_TIMEOUT_LAPSE``: JoinGroup/SyncGroup wait the rebalance timeout
#: plus this before the client gives up on them.
JOIN_GROUP_TIMEOUT_LAPSE_S: Final = 5.0

_NO_GENERATION: Final = -1


class IllegalTransition(CoopConsumerError):
    """An input arrived in a state that cannot accept it (a driver or core bug).

    The member is unchanged when this is raised.
    """

    def __init__(self, state: MemberState, input_type: type, detail: str = "") -> None:
        text = f"{input_type.__name__} is not allowed in state {state.name}"
        super().__init__(f"{text}: {detail}" if detail else text)
        self.state = state
        self.input_type = input_type


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
    ``enable_auto_commit`` only makes the member emit ``CommitBeforeRevoke`` before
    each REVOKED listener.
    """

    group_id: str
    session_timeout_ms: int = attrs.field(default=45_000, validator=_positive)
    heartbeat_interval_ms: int = attrs.field(default=3_000, validator=_positive)
    max_poll_interval_ms: int = attrs.field(default=300_000, validator=_positive)
    retry_backoff_ms: int = attrs.field(default=100, validator=_positive)
    request_timeout_ms: int = attrs.field(default=30_000, validator=_positive)
    group_instance_id: str | None = None
    client_rack: str | None = None
    enable_auto_commit: bool = False

    def __attrs_post_init__(self) -> None:
        _check_config(self)


@attrs.frozen(kw_only=True)
class _Pending:
    """A request in flight: what it was and which generation sent it."""

    api: Api
    sent_at: float
    generation_id: int
    member_id: str
    token: object = None
    node_id: int | None = None  # the coordinator it was sent to


@attrs.frozen(kw_only=True)
class JoinGroupOutcome:
    """Routed input: the answer (``response``) or failure (``error``) of our JoinGroup."""

    pending: _Pending
    response: JoinGroupResponse | None = None
    error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class SyncGroupOutcome:
    """Routed input: the answer or failure of our SyncGroup."""

    pending: _Pending
    response: SyncGroupResponse | None = None
    error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class HeartbeatOutcome:
    """Routed input: the answer or failure of a heartbeat of the current generation."""

    pending: _Pending
    response: HeartbeatResponse | None = None
    error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class LeaveGroupOutcome:
    """Routed input: the answer or failure of our LeaveGroup."""

    pending: _Pending
    response: LeaveGroupResponse | None = None
    error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class OffsetCommitOutcome:
    """Routed input: the answer or failure of a commit (``pending.token`` names it)."""

    pending: _Pending
    response: OffsetCommitResponse | None = None
    error: CoopConsumerError | None = None


_Outcome = (
    JoinGroupOutcome | SyncGroupOutcome | HeartbeatOutcome | LeaveGroupOutcome | OffsetCommitOutcome
)

_RESPONSE_TYPES: Mapping[Api, type] = {
    Api.JOIN_GROUP: JoinGroupResponse,
    Api.SYNC_GROUP: SyncGroupResponse,
    Api.HEARTBEAT: HeartbeatResponse,
    Api.LEAVE_GROUP: LeaveGroupResponse,
    Api.OFFSET_COMMIT: OffsetCommitResponse,
}


class _Lookup(enum.Enum):
    """Coordinator discovery, tracked beside the member state (Java's
    ``coordinatorUnknown()`` is orthogonal to ``MemberState``)."""

    KNOWN = "known"
    IDLE = "idle"  # unknown, no lookup yet
    LOOKING = "looking"  # FindCoordinator emitted, no answer yet
    BACKING_OFF = "backing-off"  # lookup failed, retry at _lookup_retry_at


class _AssignPhase(enum.Enum):
    """ASSIGNING's two steps (state data, not a second state machine)."""

    REVOKING = "revoking"  # waiting for the REVOKED listener of revoked partitions
    ASSIGNED = "assigned"  # on_assignment ran, waiting for the ASSIGNED listener


def _ms(value_ms: int) -> float:
    return value_ms / 1000.0


def _sorted(partitions: frozenset[TopicPartition] | set[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in sorted(partitions)) or "none"


class GroupMember:
    """One consumer's membership in a classic consumer group, as a pure state machine.

    Feed inputs with ``handle(input, now)`` and execute the returned effects in order;
    call ``handle(Tick(), now)`` at ``next_deadline``. Raises ``ConfigurationError`` at
    construction if the assignors share no rebalance protocol (or there are none) and
    ``IllegalTransition`` for an input the current state rejects (the member is then
    unchanged).
    """

    def __init__(
        self, config: MemberConfig, assignors: Sequence[ConsumerPartitionAssignor]
    ) -> None:
        if not assignors:
            raise ConfigurationError("partition.assignment.strategy names no assignor")
        names = [a.name for a in assignors]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"duplicate assignor names in {names}")
        self._config = config
        self._assignors = tuple(assignors)
        self._assignor_by_name = {a.name: a for a in assignors}
        #: Fixed for the member's life: the assignors never change (docs/architecture.md).
        self._protocol = select_rebalance_protocol(self._assignors)

        self._state = MemberState.UNJOINED
        self._member_id = ""
        self._generation_id = _NO_GENERATION
        self._protocol_name: str | None = None
        self._leader_id: str | None = None

        self._coordinator_id: int | None = None
        # The coordinator node whose connection has proven live: it answered a request
        # since the last request failure or coordinator change (None: not proven).
        self._live_node: int | None = None
        self._lookup = _Lookup.IDLE
        self._lookup_retry_at: float | None = None

        self._subscription: Subscribe | None = None
        self._subscribed: frozenset[str] = frozenset()
        self._metadata: ClusterMetadata | None = None
        self._internal_topics: frozenset[str] = frozenset()
        self._joined_subscription: frozenset[str] | None = None
        self._assignment_snapshot: dict[str, int | None] | None = None
        # Topics of a skip_assignment snapshot whose counts were unknown when it was
        # taken (not fetched yet): the first counts seen become their baseline.
        self._snapshot_unknown: frozenset[str] = frozenset()
        # Partition counts as this member first sent JoinGroup since its last completed
        # join (None: not taken yet). A static leader answered skip_assignment compares
        # against these, so a change that lands while its join is retried is noticed.
        self._join_started_counts: dict[str, int] | None = None
        self._group_topics: frozenset[str] = frozenset()  # leader: the group subscription

        self._owned: set[TopicPartition] = set()
        # The generation whose assignment was last applied (-1: none, or reset): what
        # JoinGroup's Subscription.generation_id carries, see _subscription_for.
        self._assigned_generation_id = _NO_GENERATION
        # invocation id -> partitions to Unassign when that (REVOKED) listener is done
        self._listeners: dict[int, frozenset[TopicPartition]] = {}
        self._next_invocation_id = 1
        self._pending: dict[int, _Pending] = {}
        # Cancelled heartbeats whose answers are still timed (see _cancel); each entry
        # goes when its request's ResponseReceived or RequestFailed arrives.
        self._superseded: dict[int, _Pending] = {}
        self._next_request_id = 1

        # Timers (monotonic seconds).
        self._session_ok_at = 0.0
        self._last_poll = 0.0
        self._heartbeat_due: float | None = None
        self._join_retry_at: float | None = None
        self._rebalance_started_at: float | None = None

        # State data.
        self._reason = ""  # PREPARING_JOIN / JOINING: why we (re)join (KIP-800)
        self._leader_members: tuple[JoinGroupResponseMember, ...] = ()  # LEADER_AWAITING_..
        self._assignment: Assignment | None = None  # ASSIGNING
        self._assign_phase = _AssignPhase.REVOKING  # ASSIGNING
        self._follow_up_reason: str | None = None  # ASSIGNING: rejoin owed afterwards
        self._leave_then = MemberState.CLOSED  # LEAVING: CLOSED or UNJOINED
        self._leave_group: bool | None = None  # LEAVING: CloseRequested.leave_group
        self._leave_reason = ""  # LEAVING
        self._fatal_error: CoopConsumerError | None = None  # FATAL

        self._fx: list[Effect] = []

    # ------------------------------------------------------------------ properties

    @property
    def state(self) -> MemberState:
        """The current state."""
        return self._state

    @property
    def protocol(self) -> RebalanceProtocol:
        """EAGER or COOPERATIVE: the highest protocol all assignors support."""
        return self._protocol

    @property
    def member_id(self) -> str:
        """The member id ("" before the first JoinGroup answer or after a reset)."""
        return self._member_id

    @property
    def generation_id(self) -> int:
        """The generation (-1 when none)."""
        return self._generation_id

    @property
    def is_leader(self) -> bool:
        """Whether this member led the last join."""
        return bool(self._member_id) and self._leader_id == self._member_id

    @property
    def protocol_name(self) -> str | None:
        """The assignor name the coordinator chose at the last join."""
        return self._protocol_name

    @property
    def owned_partitions(self) -> frozenset[TopicPartition]:
        """Partitions currently assigned (per the Assign/Unassign effects emitted)."""
        return frozenset(self._owned)

    @property
    def subscribed_topics(self) -> frozenset[str]:
        """The topics subscribed to now (a pattern's matches included)."""
        return self._subscribed

    @property
    def metadata_topics(self) -> frozenset[str]:
        """Topics whose metadata the driver should keep fresh: the subscription, plus
        the whole group subscription while this member is the leader (Java's leader
        watches every topic it assigned, to notice partition changes)."""
        if self.is_leader:
            return self._subscribed | self._group_topics
        return self._subscribed

    @property
    def coordinator_id(self) -> int | None:
        """The coordinator's node id, None while unknown."""
        return self._coordinator_id

    @property
    def rejoin_reason(self) -> str:
        """Why the member last (re)joined (KIP-800 reason)."""
        return self._reason

    @property
    def group_metadata(self) -> ConsumerGroupMetadata:
        """The ``ConsumerGroupMetadata`` of the current generation."""
        return ConsumerGroupMetadata(
            group_id=self._config.group_id,
            generation_id=self._generation_id,
            member_id=self._member_id,
            group_instance_id=self._config.group_instance_id,
        )

    @property
    def next_deadline(self) -> float | None:
        """When to feed the next ``Tick`` (None: no timer is armed). After a ``Tick`` at
        ``now`` it is always later than ``now`` or None, so a driver never spins."""
        candidates: list[float] = []
        if self._lookup is _Lookup.BACKING_OFF and self._lookup_retry_at is not None:
            candidates.append(self._lookup_retry_at)
        if (
            self._state is MemberState.JOINING
            and self._join_retry_at is not None
            and self._coordinator_id is not None  # else CoordinatorFound resumes it
            and not self._in_flight(Api.JOIN_GROUP)
        ):
            candidates.append(self._join_retry_at)
        if self._session_timed():
            candidates.append(self._session_deadline())
        if self._heartbeating():
            candidates.append(self._last_poll + _ms(self._config.max_poll_interval_ms))
            if (
                self._coordinator_id is not None
                and self._heartbeat_due is not None
                and not self._in_flight(Api.HEARTBEAT)
            ):
                candidates.append(self._heartbeat_due)
        return min(candidates) if candidates else None

    # ------------------------------------------------------------------ entry point

    def handle(self, event: object, now: float) -> list[Effect]:
        """Process one input at monotonic time ``now``; return the effects to execute."""
        self._fx = []
        routed: object = event
        if isinstance(event, ResponseReceived | RequestFailed):
            outcome = self._route(event, now)
            if outcome is None:
                return self._fx
            routed = outcome
        elif isinstance(event, ListenerDone) and event.invocation_id not in self._listeners:
            raise IllegalTransition(
                self._state, ListenerDone, f"no listener {event.invocation_id} outstanding"
            )
        key = (self._state, type(routed))
        handler = TRANSITIONS.get(key)
        if handler is None and key not in IGNORED:
            raise IllegalTransition(self._state, type(routed))
        # State-independent bookkeeping, done even where the state ignores the input:
        # a finished REVOKED listener always releases its partitions.
        if isinstance(routed, ListenerDone):
            self._complete_listener(routed)
        elif isinstance(routed, PollCalled):
            self._last_poll = now
        if handler is not None:
            handler(self, routed, now)
        return self._fx

    # ------------------------------------------------------------------ routing

    def _route(self, event: ResponseReceived | RequestFailed, now: float) -> _Outcome | None:
        """The one place stale answers are dropped: superseded (cancelled) requests and
        heartbeats of another generation; everything else becomes a per-API outcome."""
        pending = self._pending.pop(event.request_id, None)
        superseded = self._superseded.pop(event.request_id, None)
        sent = pending if pending is not None else superseded
        if sent is not None and sent.node_id == self._coordinator_id:
            self._live_node = sent.node_id if isinstance(event, ResponseReceived) else None
        if pending is None:
            if superseded is not None:
                self._observe_round_trip(superseded, event, now)
            self._log(
                logging.DEBUG, f"dropping the answer to superseded request {event.request_id}"
            )
            return None
        self._observe_round_trip(pending, event, now)
        if pending.api is Api.HEARTBEAT and (
            pending.generation_id != self._generation_id or pending.member_id != self._member_id
        ):
            self._log(logging.DEBUG, "dropping a heartbeat answer of an older generation")
            return None
        error: CoopConsumerError | None = None
        response: Any = None
        if isinstance(event, RequestFailed):
            error = event.error
        elif isinstance(event.response, _RESPONSE_TYPES[pending.api]):
            response = event.response
        else:
            error = ProtocolError(
                f"expected a {_RESPONSE_TYPES[pending.api].__name__}, "
                f"got {type(event.response).__name__}",
                api_key=pending.api.value,
            )
        if pending.api is Api.JOIN_GROUP:
            return JoinGroupOutcome(pending=pending, response=response, error=error)
        if pending.api is Api.SYNC_GROUP:
            return SyncGroupOutcome(pending=pending, response=response, error=error)
        if pending.api is Api.HEARTBEAT:
            return HeartbeatOutcome(pending=pending, response=response, error=error)
        if pending.api is Api.LEAVE_GROUP:
            return LeaveGroupOutcome(pending=pending, response=response, error=error)
        return OffsetCommitOutcome(pending=pending, response=response, error=error)

    def _observe_round_trip(
        self, pending: _Pending, event: ResponseReceived | RequestFailed, now: float
    ) -> None:
        """Heartbeat and commit latency for every response that arrives, whatever its
        error code, stale or superseded ones included (Java's Heartbeat and OffsetCommit
        handlers record ``requestLatencyMs`` first thing); never for a timeout or a
        disconnect, which are not responses."""
        if not isinstance(event, ResponseReceived):
            return
        if not isinstance(event.response, _RESPONSE_TYPES[pending.api]):
            return
        if pending.api is Api.HEARTBEAT:
            self._observe(Observation.HEARTBEAT_COMPLETED, now, now - pending.sent_at)
        elif pending.api is Api.OFFSET_COMMIT:
            self._observe(Observation.COMMIT_COMPLETED, now, now - pending.sent_at)

    # ------------------------------------------------------------------ small helpers

    def _emit(self, effect: Effect) -> None:
        self._fx.append(effect)

    def _log(self, level: int, message: str) -> None:
        self._fx.append(Log(level=level, message=message))

    def _observe(self, event: Observation, now: float, latency_s: float | None = None) -> None:
        self._fx.append(Observe(event=event, now=now, latency_s=latency_s))

    def _has_generation(self) -> bool:
        return self._generation_id != _NO_GENERATION and bool(self._member_id)

    def _heartbeating(self) -> bool:
        return self._state in HEARTBEAT_STATES and self._has_generation()

    def _held_by_coordinator(self) -> bool:
        """A JoinGroup/SyncGroup is in flight on a connection that has proven live.

        One sent after a request failure or a coordinator change, before any answer
        from that coordinator, may still wait in the driver for a connection: it proves
        nothing about the session.
        """
        node = self._live_node
        return node is not None and any(
            p.api in (Api.JOIN_GROUP, Api.SYNC_GROUP) and p.node_id == node
            for p in self._pending.values()
        )

    def _waiting_to_join(self) -> bool:
        """JOINING/AWAITING_SYNC in a generation with no JoinGroup/SyncGroup held by the
        coordinator (waiting for it, a lookup, a connection or a retry backoff): nothing
        keeps the session alive at the coordinator."""
        return (
            self._state in JOIN_REQUEST_STATES
            and self._has_generation()
            and not self._held_by_coordinator()
        )

    def _session_timed(self) -> bool:
        """Whether the session can lapse at the coordinator now, so the member times it.

        A cooperative member keeps its partitions while it rejoins (KIP-429). The
        broker keeps its session alive while it holds the member's JoinGroup/SyncGroup
        (up to the rebalance timeout), but not while the member cannot reach it: then
        the broker expires the member and hands its partitions to others, and without
        a local timer the member would learn so only from its next JoinGroup answer
        (UNKNOWN_MEMBER_ID), owning them twice meanwhile (issue 4).
        """
        return self._heartbeating() or self._waiting_to_join()

    def _session_deadline(self) -> float:
        return self._session_ok_at + _ms(self._config.session_timeout_ms)

    def _in_flight(self, api: Api) -> bool:
        return any(p.api is api for p in self._pending.values())

    def _cancel(self, *apis: Api) -> None:
        """Forget requests in flight: their answers will be dropped by ``_route``. A
        cancelled heartbeat is still timed when its answer arrives (Java never cancels
        one, so its latency is recorded)."""
        for request_id in [r for r, p in self._pending.items() if p.api in apis]:
            pending = self._pending.pop(request_id)
            if pending.api is Api.HEARTBEAT:
                self._superseded[request_id] = pending

    def _send(self, api: Api, request: object, now: float, *, token: object = None) -> None:
        assert self._coordinator_id is not None
        request_id = self._next_request_id
        self._next_request_id += 1
        self._pending[request_id] = _Pending(
            api=api,
            sent_at=now,
            generation_id=self._generation_id,
            member_id=self._member_id,
            token=token,
            node_id=self._coordinator_id,
        )
        timeout: float | None = None
        if api in (Api.JOIN_GROUP, Api.SYNC_GROUP):
            timeout = max(
                _ms(self._config.request_timeout_ms),
                _ms(self._config.max_poll_interval_ms) + JOIN_GROUP_TIMEOUT_LAPSE_S,
            )
        self._emit(
            Send(
                request_id=request_id,
                request=request,
                node_id=self._coordinator_id,
                timeout_s=timeout,
            )
        )

    def _invoke(
        self,
        kind: ListenerKind,
        partitions: frozenset[TopicPartition],
        *,
        unassign_after: frozenset[TopicPartition] = frozenset(),
    ) -> None:
        invocation_id = self._next_invocation_id
        self._next_invocation_id += 1
        self._listeners[invocation_id] = unassign_after
        self._emit(InvokeListener(invocation_id=invocation_id, kind=kind, partitions=partitions))

    def _revoke(self, partitions: frozenset[TopicPartition]) -> None:
        """REVOKED while still assigned (the listener may commit); Unassign when done."""
        if self._config.enable_auto_commit:
            self._emit(CommitBeforeRevoke(partitions=partitions))
        self._invoke(ListenerKind.REVOKED, partitions, unassign_after=partitions)

    def _revoking(self) -> frozenset[TopicPartition]:
        """Owned partitions whose REVOKED callback is still running (Unassign follows
        its ``ListenerDone``)."""
        return frozenset().union(*self._listeners.values()) & self._owned

    def _lose(self) -> None:
        """LOST for everything owned: Unassign first (someone else may own them now).

        Partitions already handed to a REVOKED callback are not reported again: to the
        application they are gone once revoked (KIP-429: LOST covers what the member
        still owns), and their own ``ListenerDone`` unassigns them. Joining waits for
        that callback, so they are never claimed in the next JoinGroup.
        """
        lost = frozenset(self._owned) - self._revoking()
        if not lost:
            return
        self._owned -= lost
        self._emit(Unassign(partitions=lost))
        self._invoke(ListenerKind.LOST, lost)

    def _complete_listener(self, event: ListenerDone) -> None:
        unassign = self._listeners.pop(event.invocation_id) & self._owned
        if unassign:
            self._owned -= unassign
            self._emit(Unassign(partitions=unassign))

    def _coordinator_dead(self, reason: str, now: float) -> None:
        if self._coordinator_id is not None:
            self._log(logging.INFO, f"group coordinator {self._coordinator_id} unknown: {reason}")
        self._coordinator_id = None
        self._live_node = None
        if self._lookup is _Lookup.KNOWN:
            self._lookup = _Lookup.IDLE
        self._ensure_coordinator(now)

    def _ensure_coordinator(self, now: float) -> None:
        if self._lookup is _Lookup.BACKING_OFF and (
            self._lookup_retry_at is None or now >= self._lookup_retry_at
        ):
            self._lookup = _Lookup.IDLE
        if self._lookup is _Lookup.IDLE:
            self._lookup = _Lookup.LOOKING
            self._lookup_retry_at = None
            self._emit(FindCoordinator(group_id=self._config.group_id))

    def _reset_generation(self, *, clear_member_id: bool) -> None:
        self._generation_id = _NO_GENERATION
        self._assigned_generation_id = _NO_GENERATION  # what is owned is lost
        if clear_member_id:
            self._member_id = ""
        self._leader_id = None
        # _assignment_snapshot survives: a static leader that rejoins with
        # skip_assignment compares against what the group was really assigned from.
        self._cancel(Api.HEARTBEAT)

    def _kafka_error(self, code: int, api: Api) -> KafkaError:
        return errors.to_exception(code, api_key=api.value)

    def _fatal(self, error: CoopConsumerError, now: float) -> None:
        self._log(logging.ERROR, f"fatal group error: {error}")
        self._lose()
        self._fail_commits(error)
        self._pending.clear()
        self._state = MemberState.FATAL
        self._fatal_error = error
        self._emit(Fatal(error=error))

    def _fail_commits(self, error: CoopConsumerError) -> None:
        for request_id, pending in list(self._pending.items()):
            if pending.api is Api.OFFSET_COMMIT:
                del self._pending[request_id]
                self._emit(CommitDone(token=pending.token, error=error))

    # ------------------------------------------------------------------ subscription

    def _apply_subscription(self) -> bool:
        """Recompute the subscribed topic set; True if it changed."""
        sub = self._subscription
        if sub is None:
            topics: frozenset[str] = frozenset()
        elif sub.pattern is None:
            topics = sub.topics
        elif self._metadata is None:
            topics = frozenset()
        else:
            pattern = sub.pattern
            internal = self._internal_topics
            topics = frozenset(
                t
                for t in self._metadata.partition_counts
                if t not in internal and pattern.fullmatch(t) is not None
            )
        changed = topics != self._subscribed
        self._subscribed = topics
        return changed

    def _on_subscribe(self, event: Subscribe, now: float) -> None:
        self._subscription = event
        self._apply_subscription()
        self._emit(MetadataNeeded(topics=None if event.pattern is not None else event.topics))

    def _subscribe_unjoined(self, event: Subscribe, now: float) -> None:
        self._on_subscribe(event, now)
        self._last_poll = now
        self._ensure_coordinator(now)
        self._enter_prepare(f"subscribed to {self._describe_subscription()}", now)

    def _subscribe_stable(self, event: Subscribe, now: float) -> None:
        self._on_subscribe(event, now)
        self._check_rejoin_needed(now)

    def _describe_subscription(self) -> str:
        sub = self._subscription
        if sub is not None and sub.pattern is not None:
            return f"pattern {sub.pattern.pattern!r}"
        return f"topics [{', '.join(sorted(self._subscribed))}]"

    def _on_metadata(self, event: MetadataUpdate, now: float) -> None:
        self._metadata = event.metadata
        self._internal_topics = event.internal_topics
        self._apply_subscription()

    def _metadata_stable(self, event: MetadataUpdate, now: float) -> None:
        self._on_metadata(event, now)
        self._check_rejoin_needed(now)

    def _metadata_leader(self, event: MetadataUpdate, now: float) -> None:
        self._on_metadata(event, now)
        self._leader_assign(now, metadata_refreshed=True)

    def _metadata_snapshot(self, topics: frozenset[str]) -> dict[str, int | None]:
        md = self._metadata
        return {t: (md.partition_count(t) if md is not None else None) for t in topics}

    def _check_rejoin_needed(self, now: float) -> None:
        """STABLE: rejoin if the subscription changed since the join, or (leader) the
        metadata it assigned from changed (Java's ``rejoinNeededOrPending``)."""
        if self._joined_subscription is not None and self._joined_subscription != self._subscribed:
            added = self._subscribed - self._joined_subscription
            removed = self._joined_subscription - self._subscribed
            self._enter_prepare(
                f"subscription changed since the last join (added [{', '.join(sorted(added))}], "
                f"removed [{', '.join(sorted(removed))}])",
                now,
            )
            return
        snapshot = self._assignment_snapshot
        if self.is_leader and snapshot is not None:
            for topic in self._snapshot_unknown:
                count = self._metadata.partition_count(topic) if self._metadata else None
                if count is not None:
                    snapshot[topic] = count
                    self._snapshot_unknown -= {topic}
            current = self._metadata_snapshot(frozenset(snapshot))
            if current != snapshot:
                changed = sorted(t for t in snapshot if snapshot[t] != current[t])
                self._enter_prepare(
                    f"partition metadata of topics [{', '.join(changed)}] changed since the "
                    f"leader assigned them",
                    now,
                )

    # ------------------------------------------------------------------ coordinator

    def _on_coordinator_found(self, event: CoordinatorFound, now: float) -> None:
        if event.node_id != self._live_node:
            self._live_node = None
        self._coordinator_id = event.node_id
        self._lookup = _Lookup.KNOWN
        self._lookup_retry_at = None
        if self._heartbeating():
            self._heartbeat_due = now
        self._drive(now)

    def _on_coordinator_unavailable(self, event: CoordinatorUnavailable, now: float) -> None:
        error = event.error
        if (
            isinstance(error, KafkaError)
            and action_for(Api.FIND_COORDINATOR, error.code) is ErrorAction.FATAL
        ):
            # e.g. GROUP_AUTHORIZATION_FAILED: no retry can succeed (Java raises it from
            # poll() instead of looking up again).
            self._fatal(error, now)
            return
        self._coordinator_id = None
        self._live_node = None
        self._lookup = _Lookup.BACKING_OFF
        self._lookup_retry_at = now + _ms(self._config.retry_backoff_ms)
        if event.error is not None:
            self._log(logging.DEBUG, f"coordinator lookup failed: {event.error}")

    # ------------------------------------------------------------------ timers

    def _on_tick(self, event: object, now: float) -> None:
        self._drive(now)

    def _drive(self, now: float) -> None:
        """Do whatever is due at ``now``: lookups, session/poll expiry, heartbeats and
        (re)sending JoinGroup."""
        if self._lookup is _Lookup.BACKING_OFF:
            self._ensure_coordinator(now)
        # Checked even while the coordinator is unknown (Java checks only when it is
        # known): the broker expires us either way and may hand our partitions to
        # another member, so losing them here keeps ownership exclusive.
        if self._session_timed() and now >= self._session_deadline():
            if self._heartbeating():
                reason = "the session timed out without a successful heartbeat response"
            else:
                reason = (
                    "the session timed out while rejoining with no JoinGroup or "
                    "SyncGroup held by the coordinator"
                )
            self._reset_generation(clear_member_id=True)
            self._coordinator_dead("the session timed out", now)
            self._enter_prepare(reason, now)
            return
        if self._heartbeating():
            if now >= self._last_poll + _ms(self._config.max_poll_interval_ms):
                self._poll_expired(now)
                return
            if (
                self._coordinator_id is not None
                and not self._in_flight(Api.HEARTBEAT)
                and (self._heartbeat_due is None or now >= self._heartbeat_due)
            ):
                self._send(
                    Api.HEARTBEAT,
                    HeartbeatRequest(
                        group_id=self._config.group_id,
                        generation_id=self._generation_id,
                        member_id=self._member_id,
                        group_instance_id=self._config.group_instance_id,
                    ),
                    now,
                )
                self._observe(Observation.HEARTBEAT_SENT, now)
                self._heartbeat_due = now + _ms(self._config.heartbeat_interval_ms)
        if self._state is MemberState.JOINING:
            self._maybe_send_join(now)

    def _on_poll(self, event: PollCalled, now: float) -> None:
        # _last_poll is updated by handle() before dispatch.
        return

    def _poll_expired(self, now: float) -> None:
        """max.poll.interval.ms passed: leave proactively (Java's ``maybeLeaveGroup``);
        partitions are dropped now and reported LOST."""
        reason = (
            f"consumer poll timeout has expired: no poll() within max.poll.interval.ms "
            f"({self._config.max_poll_interval_ms} ms)"
        )
        self._log(logging.WARNING, reason)
        self._cancel(Api.HEARTBEAT, Api.JOIN_GROUP, Api.SYNC_GROUP)
        self._lose()
        self._send_leave_if_dynamic(reason, now)
        self._reset_generation(clear_member_id=True)
        self._state = MemberState.POLL_EXPIRED

    def _send_leave_if_dynamic(self, reason: str, now: float, force: bool | None = None) -> bool:
        leave = force if force is not None else self._config.group_instance_id is None
        if not (leave and self._coordinator_id is not None and self._member_id):
            return False
        self._send(
            Api.LEAVE_GROUP,
            LeaveGroupRequest(
                group_id=self._config.group_id,
                member_id=self._member_id,
                members=(
                    MemberIdentity(
                        member_id=self._member_id,
                        group_instance_id=self._config.group_instance_id,
                        reason=reason,
                    ),
                ),
            ),
            now,
        )
        return True

    def _rejoin_after_poll(self, event: PollCalled, now: float) -> None:
        self._enter_prepare("rejoining after the poll timeout expired", now)

    # ------------------------------------------------------------------ preparing

    def _enter_prepare(self, reason: str, now: float) -> None:
        if self._rebalance_started_at is None:
            self._rebalance_started_at = now
            self._observe(Observation.REBALANCE_STARTED, now)
        self._cancel(Api.JOIN_GROUP, Api.SYNC_GROUP)
        self._reason = reason
        self._log(logging.INFO, f"(re)joining group {self._config.group_id!r}: {reason}")
        self._state = MemberState.PREPARING_JOIN
        self._ensure_coordinator_if_unknown(now)
        self._prepare_step(now)

    def _ensure_coordinator_if_unknown(self, now: float) -> None:
        if self._coordinator_id is None:
            self._ensure_coordinator(now)

    def _prepare_step(self, now: float) -> None:
        """Pre-join listeners (KIP-429 1.1-1.4), then JoinGroup once all are done."""
        if not self._has_generation():
            self._lose()
        if self._listeners:
            return
        if self._has_generation():
            to_revoke = revoke_before_join(self._protocol, self._owned, self._subscribed)
            if to_revoke:
                self._revoke(to_revoke)
                return
        self._cancel(Api.HEARTBEAT)
        self._state = MemberState.JOINING
        self._join_retry_at = None
        self._maybe_send_join(now)

    def _prepare_listener_done(self, event: ListenerDone, now: float) -> None:
        self._prepare_step(now)

    # ------------------------------------------------------------------ joining

    def _subscription_for(self, assignor: ConsumerPartitionAssignor) -> Subscription:
        """The member's Subscription for ``assignor``.

        ``generation_id`` is the generation of the owned partitions (of the last
        assignment applied), as librdkafka sends it (its sticky assignors' state
        generation, set in ``on_assignment``), not the generation of the last JoinGroup
        answer as Java's ``ConsumerCoordinator.metadata()`` does. The two differ only
        after a JoinGroup whose SyncGroup failed (REBALANCE_IN_PROGRESS, a lost
        connection): nothing was applied, so the member rejoins with byte-identical
        metadata, which a coordinator answers with its current generation instead of
        starting another rebalance (Kafka's GroupCoordinator ``member.matches``; Tansu
        likewise). Java's value would change the metadata and restart the rebalance on
        every failed sync. The lower value is also the truthful one for the leader's
        cooperative-sticky assignor, which ranks conflicting ownership claims by it.
        """
        topics = tuple(sorted(self._subscribed))
        return Subscription(
            topics=topics,
            user_data=assignor.subscription_user_data(self._subscribed),
            owned_partitions=tuple(sorted(self._owned)),
            generation_id=self._assigned_generation_id,
            rack_id=self._config.client_rack,
        )

    def _maybe_send_join(self, now: float) -> None:
        if self._in_flight(Api.JOIN_GROUP):
            return
        if self._coordinator_id is None:
            self._ensure_coordinator(now)
            return
        if self._join_retry_at is not None and now < self._join_retry_at:
            return
        self._join_retry_at = None
        # One protocol per assignor, in preference order; only user_data differs.
        protocols = tuple(
            JoinGroupRequestProtocol(
                name=a.name,
                metadata=consumer_protocol.encode_subscription(self._subscription_for(a)),
            )
            for a in self._assignors
        )
        self._joined_subscription = self._subscribed
        if self._join_started_counts is None and self._metadata is not None:
            self._join_started_counts = dict(self._metadata.partition_counts)
        self._send(
            Api.JOIN_GROUP,
            JoinGroupRequest(
                group_id=self._config.group_id,
                session_timeout_ms=self._config.session_timeout_ms,
                rebalance_timeout_ms=self._config.max_poll_interval_ms,
                member_id=self._member_id,
                group_instance_id=self._config.group_instance_id,
                protocol_type=PROTOCOL_TYPE,
                protocols=protocols,
                reason=self._reason or None,
            ),
            now,
        )

    def _rebalance_failed(self, now: float) -> None:
        self._observe(Observation.REBALANCE_FAILED, now)

    def _join_outcome(self, event: JoinGroupOutcome, now: float) -> None:
        if event.error is not None or event.response is None:
            self._rebalance_failed(now)
            self._coordinator_dead(f"JoinGroup failed: {event.error}", now)
            return
        response = event.response
        code = response.error_code
        if code != errors.NONE:
            self._rebalance_failed(now)
            self._join_error(code, response, now)
            return
        if response.protocol_type is not None and response.protocol_type != PROTOCOL_TYPE:
            self._fatal(self._inconsistent(Api.JOIN_GROUP, response.protocol_type), now)
            return
        # Java's JoinGroup handler records join-latency for error NONE with a consistent
        # protocol type, before anything looks at the chosen protocol.
        self._observe(Observation.JOIN_COMPLETED, now, now - event.pending.sent_at)
        name = response.protocol_name
        if name is None or name not in self._assignor_by_name:
            self._fatal(self._inconsistent(Api.JOIN_GROUP, f"protocol {name!r}"), now)
            return
        join_started_counts, self._join_started_counts = self._join_started_counts, None
        self._member_id = response.member_id
        self._generation_id = response.generation_id
        self._protocol_name = name
        self._leader_id = response.leader
        self._session_ok_at = now
        self._heartbeat_due = now + _ms(self._config.heartbeat_interval_ms)
        if response.leader == response.member_id:
            if response.skip_assignment:
                self._skip_assignment(response, join_started_counts, now)
                return
            self._leader_members = response.members
            self._leader_assign(now, metadata_refreshed=False)
            return
        self._assignment_snapshot = None
        self._snapshot_unknown = frozenset()
        self._send_sync((), now)

    def _skip_assignment(
        self,
        response: JoinGroupResponse,
        join_started_counts: dict[str, int] | None,
        now: float,
    ) -> None:
        """KIP-814: a static leader rejoining a stable group must not reassign; it syncs
        with nothing and keeps watching the group's metadata.

        Java snapshots the metadata it holds now (``assignmentSnapshot =
        metadataSnapshot``), which hides a change that landed after this member
        started joining: the group's assignment predates it, yet current and snapshot
        agree, so no leader ever assigns the new partitions (KAFKA-13435's symptom, left
        open for changes during a retried join). The snapshot is therefore, in order of
        preference: the one of the assignment this member itself made before its
        reset; else the counts as this member first sent JoinGroup in this join; else
        (no metadata then) the current ones. Any change since then makes it rejoin.
        What remains unseen, as in Java, is a change made before this process started
        (the protocol carries no record of what the standing assignment came from); the
        group's next rebalance assigns it.
        """
        # The broker sends the leader the members' metadata (GroupCoordinator's
        # updateStaticMemberAndRebalance); Java watches the whole group subscription.
        group_topics = self._subscribed
        if response.members:
            try:
                subscriptions = self._decode_members(response.members)
            except ProtocolError as exc:
                self._assignment_failed(exc, now)
                return
            group_topics = group_topics | frozenset(
                t for sub in subscriptions.values() for t in sub.topics
            )
        self._group_topics = group_topics
        if self._assignment_snapshot is None:
            if join_started_counts is None:
                md = self._metadata
                join_started_counts = dict(md.partition_counts) if md is not None else {}
            # Topics only other members subscribe to are usually not fetched yet; their
            # absence says nothing, so they are not counted as changed when they appear.
            self._snapshot_unknown = group_topics - frozenset(join_started_counts)
            self._assignment_snapshot = {
                t: join_started_counts[t] for t in group_topics if t in join_started_counts
            }
        self._send_sync((), now)

    def _inconsistent(self, api: Api, what: str) -> KafkaError:
        return errors.to_exception(
            errors.INCONSISTENT_GROUP_PROTOCOL,
            api_key=api.value,
            message=f"the coordinator answered with {what}, which this member did not offer",
        )

    def _join_error(self, code: int, response: JoinGroupResponse, now: float) -> None:
        action = action_for(Api.JOIN_GROUP, code)
        name = errors.info(code).name
        if action is ErrorAction.MEMBER_ID_REQUIRED:
            # KIP-394: the coordinator issued our id; rejoin with it right away.
            self._member_id = response.member_id
            self._reason = "the coordinator requires a member id (MEMBER_ID_REQUIRED)"
            self._maybe_send_join(now)
        elif action is ErrorAction.RESET_AND_REJOIN:
            self._reset_generation(clear_member_id=code == errors.UNKNOWN_MEMBER_ID)
            self._enter_prepare(f"encountered {name} from JoinGroup", now)
        elif action is ErrorAction.REJOIN:
            self._reason = f"encountered {name} from JoinGroup"
            self._maybe_send_join(now)
        elif action is ErrorAction.FIND_COORDINATOR:
            self._coordinator_dead(f"{name} from JoinGroup", now)
        elif action is ErrorAction.FATAL:
            self._fatal(self._kafka_error(code, Api.JOIN_GROUP), now)
        else:
            if action is ErrorAction.REPORT_AND_REJOIN:
                self._emit(ReportError(error=self._kafka_error(code, Api.JOIN_GROUP)))
                self._reason = f"rebalance failed: unexpected {name} from JoinGroup"
            # RETRY (and anything else a JoinGroup can only retry): after the backoff.
            self._join_retry_at = now + _ms(self._config.retry_backoff_ms)

    # ------------------------------------------------------------------ leader

    def _leader_assign(self, now: float, *, metadata_refreshed: bool) -> None:
        name = self._protocol_name
        assert name is not None
        assignor = self._assignor_by_name[name]
        try:
            subscriptions = self._decode_members(self._leader_members)
        except ProtocolError as exc:
            self._assignment_failed(exc, now)
            return
        group_topics = frozenset(t for s in subscriptions.values() for t in s.topics)
        self._group_topics = group_topics
        known = self._metadata.partition_counts if self._metadata is not None else {}
        missing = group_topics - frozenset(known)
        if missing and not metadata_refreshed:
            # Java refreshes metadata for the whole group subscription before assigning.
            self._state = MemberState.LEADER_AWAITING_METADATA
            self._emit(MetadataNeeded(topics=group_topics | self._subscribed))
            return
        metadata = self._metadata or ClusterMetadata(partition_counts={})
        group_subscription = GroupSubscription(subscriptions=subscriptions)
        try:
            result = assignor.assign(metadata, group_subscription)
        except Exception as exc:  # an assignor is user code: any exception is its error
            error = AssignorError(f"assignor {name!r} raised {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            self._assignment_failed(error, now)
            return
        try:
            check_assignment(metadata, group_subscription, result, assignor_name=name)
            if self._protocol is RebalanceProtocol.COOPERATIVE and name != COOPERATIVE_STICKY:
                validate_cooperative_assignment(group_subscription, result, assignor_name=name)
        except AssignorError as exc:
            self._assignment_failed(exc, now)
            return
        assignments = tuple(
            SyncGroupRequestAssignment(
                member_id=member_id,
                assignment=consumer_protocol.encode_assignment(result.assignments[member_id]),
            )
            for member_id in sorted(subscriptions)
        )
        self._assignment_snapshot = self._metadata_snapshot(group_topics)
        self._snapshot_unknown = frozenset()
        self._send_sync(assignments, now)

    def _decode_members(
        self, members: Sequence[JoinGroupResponseMember]
    ) -> dict[str, Subscription]:
        decoded: dict[str, Subscription] = {}
        for member in members:
            try:
                subscription = consumer_protocol.decode_subscription(
                    member.metadata, member_id=member.member_id
                )
            except ProtocolError:
                raise
            except Exception as exc:  # a codec bug must still name the member
                raise ProtocolError(
                    f"malformed subscription metadata: {exc}", member_id=member.member_id
                ) from exc
            decoded[member.member_id] = attrs.evolve(
                subscription, group_instance_id=member.group_instance_id
            )
        return decoded

    def _assignment_failed(self, error: CoopConsumerError, now: float) -> None:
        """The leader cannot produce a valid assignment: report it from poll() (Java
        raises it from poll()) and rejoin after a backoff; nothing owned changes."""
        self._rebalance_failed(now)
        self._emit(ReportError(error=error))
        self._cancel(Api.HEARTBEAT)
        self._state = MemberState.JOINING
        self._reason = f"the leader's assignment failed: {error}"
        self._log(logging.ERROR, self._reason)
        self._join_retry_at = now + _ms(self._config.retry_backoff_ms)
        self._maybe_send_join(now)

    # ------------------------------------------------------------------ syncing

    def _send_sync(self, assignments: tuple[SyncGroupRequestAssignment, ...], now: float) -> None:
        self._cancel(Api.HEARTBEAT)
        self._state = MemberState.AWAITING_SYNC
        if self._coordinator_id is None:
            self._state = MemberState.JOINING
            self._ensure_coordinator(now)
            return
        self._send(
            Api.SYNC_GROUP,
            SyncGroupRequest(
                group_id=self._config.group_id,
                generation_id=self._generation_id,
                member_id=self._member_id,
                group_instance_id=self._config.group_instance_id,
                protocol_type=PROTOCOL_TYPE,
                protocol_name=self._protocol_name,
                assignments=assignments,
            ),
            now,
        )

    def _rejoin_now(self, reason: str, now: float, *, backoff: bool = False) -> None:
        """Back to JoinGroup keeping generation and ownership (no pre-join listeners:
        nothing was applied since the last join), at once or after the retry backoff."""
        self._cancel(Api.JOIN_GROUP, Api.SYNC_GROUP, Api.HEARTBEAT)
        self._state = MemberState.JOINING
        self._reason = reason
        self._join_retry_at = now + _ms(self._config.retry_backoff_ms) if backoff else None
        self._maybe_send_join(now)

    def _sync_outcome(self, event: SyncGroupOutcome, now: float) -> None:
        if event.error is not None or event.response is None:
            self._rebalance_failed(now)
            self._coordinator_dead(f"SyncGroup failed: {event.error}", now)
            self._rejoin_now(f"SyncGroup failed: {event.error}", now)
            return
        response = event.response
        code = response.error_code
        if code != errors.NONE:
            self._rebalance_failed(now)
            name = errors.info(code).name
            action = action_for(Api.SYNC_GROUP, code)
            if action is ErrorAction.FATAL:
                self._fatal(self._kafka_error(code, Api.SYNC_GROUP), now)
            elif action is ErrorAction.RESET_AND_REJOIN:
                self._reset_generation(clear_member_id=code == errors.UNKNOWN_MEMBER_ID)
                self._enter_prepare(f"encountered {name} from SyncGroup", now)
            elif action is ErrorAction.FIND_COORDINATOR:
                self._coordinator_dead(f"{name} from SyncGroup", now)
                self._rejoin_now(f"encountered {name} from SyncGroup", now)
            elif action is ErrorAction.REPORT_AND_REJOIN:
                self._emit(ReportError(error=self._kafka_error(code, Api.SYNC_GROUP)))
                reason = f"rebalance failed: unexpected {name} from SyncGroup"
                self._rejoin_now(reason, now, backoff=True)
            else:  # REBALANCE_IN_PROGRESS and the like: rejoin at once
                self._rejoin_now(f"encountered {name} from SyncGroup", now)
            return
        if response.protocol_type is not None and response.protocol_type != PROTOCOL_TYPE:
            self._fatal(self._inconsistent(Api.SYNC_GROUP, response.protocol_type), now)
            return
        # As Java's SyncGroup handler: sync-latency for error NONE with a consistent
        # protocol type (error responses are not recorded, unlike heartbeats and commits).
        self._observe(Observation.SYNC_COMPLETED, now, now - event.pending.sent_at)
        if response.protocol_name is not None and response.protocol_name != self._protocol_name:
            self._fatal(
                self._inconsistent(Api.SYNC_GROUP, f"protocol {response.protocol_name!r}"), now
            )
            return
        self._session_ok_at = now
        try:
            assignment = consumer_protocol.decode_assignment(
                response.assignment, member_id=self._member_id
            )
        except Exception as exc:
            error = (
                exc
                if isinstance(exc, ProtocolError)
                else ProtocolError(f"malformed assignment: {exc}", member_id=self._member_id)
            )
            self._emit(ReportError(error=error))
            self._enter_prepare(f"could not decode the assignment: {error}", now)
            return
        assigned = frozenset(assignment.partitions)
        unsubscribed = sorted({tp.topic for tp in assigned} - self._subscribed)
        if unsubscribed:
            # Java: the subscription changed since the join; apply nothing and rejoin.
            self._enter_prepare(
                f"received an assignment with topics [{', '.join(unsubscribed)}] outside the "
                f"current subscription",
                now,
            )
            return
        self._start_assigning(assignment, now)

    # ------------------------------------------------------------------ assigning

    def _start_assigning(self, assignment: Assignment, now: float) -> None:
        self._state = MemberState.ASSIGNING
        self._assignment = assignment
        self._assigned_generation_id = self._generation_id
        self._follow_up_reason = None
        self._assign_phase = _AssignPhase.REVOKING
        diff = diff_assignment(self._owned, assignment.partitions)
        if diff.revoked:
            # KIP-429 3.3: revoke before the assignment changes, then rejoin.
            self._revoke(diff.revoked)
            if self._protocol is RebalanceProtocol.COOPERATIVE:
                self._follow_up_reason = (
                    f"need to revoke partitions [{_sorted(set(diff.revoked))}] as indicated by "
                    f"the current assignment and re-join"
                )
        self._assign_step(now)

    def _assign_step(self, now: float) -> None:
        if self._listeners:
            return
        if self._assign_phase is _AssignPhase.REVOKING:
            assignment = self._assignment
            assert assignment is not None
            assert self._protocol_name is not None
            assignor = self._assignor_by_name[self._protocol_name]
            try:
                assignor.on_assignment(assignment, self.group_metadata)
            except Exception as exc:  # user code; KIP-429: report, keep going
                error = AssignorError(
                    f"assignor {assignor.name!r} on_assignment raised {type(exc).__name__}: {exc}"
                )
                error.__cause__ = exc
                self._emit(ReportError(error=error))
            assigned = frozenset(assignment.partitions)
            added = assigned - self._owned
            self._owned = set(assigned)
            if added:
                self._emit(Assign(partitions=added))
            self._assign_phase = _AssignPhase.ASSIGNED
            self._invoke(ListenerKind.ASSIGNED, added)  # always, even empty (KIP-429)
            return
        self._assignment = None
        started = self._rebalance_started_at
        self._rebalance_started_at = None
        self._observe(
            Observation.REBALANCE_COMPLETED, now, None if started is None else now - started
        )
        follow_up = self._follow_up_reason
        self._follow_up_reason = None
        if follow_up is not None:
            self._enter_prepare(follow_up, now)
            return
        self._state = MemberState.STABLE
        self._check_rejoin_needed(now)

    def _assign_listener_done(self, event: ListenerDone, now: float) -> None:
        self._assign_step(now)

    # ------------------------------------------------------------------ heartbeats

    def _heartbeat_outcome(self, event: HeartbeatOutcome, now: float) -> None:
        if event.error is not None or event.response is None:
            self._coordinator_dead(f"heartbeat failed: {event.error}", now)
            return
        code = event.response.error_code
        if code == errors.NONE:
            self._session_ok_at = now
            return
        name = errors.info(code).name
        action = action_for(Api.HEARTBEAT, code)
        if action is ErrorAction.FIND_COORDINATOR:
            self._coordinator_dead(f"{name} from Heartbeat", now)
        elif action is ErrorAction.REJOIN:
            self._session_ok_at = now  # the coordinator answered: the session is alive
            self._request_rejoin(
                "the group is rebalancing (REBALANCE_IN_PROGRESS from Heartbeat)", now
            )
        elif action is ErrorAction.RESET_AND_REJOIN:
            self._reset_generation(clear_member_id=code == errors.UNKNOWN_MEMBER_ID)
            self._enter_prepare(f"encountered {name} from Heartbeat", now)
        elif action is ErrorAction.FATAL:
            self._fatal(self._kafka_error(code, Api.HEARTBEAT), now)
        else:  # RETRY: Java's heartbeat thread logs it and tries at the next interval
            self._log(logging.WARNING, f"heartbeat answered {name}; retrying at the next interval")

    def _request_rejoin(self, reason: str, now: float) -> None:
        """A rebalance is wanted: STABLE rejoins now, ASSIGNING after its listeners;
        states already (re)joining need nothing more."""
        if self._state is MemberState.STABLE:
            self._enter_prepare(reason, now)
        elif self._state is MemberState.ASSIGNING and self._follow_up_reason is None:
            self._follow_up_reason = reason

    # ------------------------------------------------------------------ commits

    def _commit_send(self, event: CommitRequested, now: float) -> None:
        """STABLE, ASSIGNING, PREPARING_JOIN and LEAVING (before LeaveGroup) commit with
        the current generation: the REVOKED listeners of PREPARING_JOIN (Java's
        ``onJoinPrepare`` runs while still STABLE) and LEAVING must be able to commit."""
        if not event.offsets:
            self._emit(CommitDone(token=event.token))
            return
        if not self._has_generation() or self._in_flight(Api.LEAVE_GROUP):
            self._emit(
                CommitDone(
                    token=event.token,
                    error=CommitFailedError(
                        "the commit cannot complete: the member is not in an active "
                        "generation of the group (its partitions may have been reassigned)"
                    ),
                )
            )
            return
        if self._coordinator_id is None:
            self._ensure_coordinator(now)
            self._emit(
                CommitDone(
                    token=event.token,
                    error=self._kafka_error(errors.COORDINATOR_NOT_AVAILABLE, Api.OFFSET_COMMIT),
                )
            )
            return
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp in sorted(event.offsets):
            om = event.offsets[tp]
            by_topic.setdefault(tp.topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=self._config.group_id,
            generation_id=self._generation_id,
            member_id=self._member_id,
            group_instance_id=self._config.group_instance_id,
            topics=tuple(
                OffsetCommitRequestTopic(name=topic, partitions=tuple(parts))
                for topic, parts in by_topic.items()
            ),
        )
        self._send(Api.OFFSET_COMMIT, request, now, token=event.token)

    def _commit_rebalancing(self, event: CommitRequested, now: float) -> None:
        """JoinGroup/SyncGroup in flight (Java: PREPARING_REBALANCE or
        COMPLETING_REBALANCE): no generation to commit with yet."""
        self._emit(
            CommitDone(
                token=event.token,
                error=RebalanceInProgressError(
                    "the offset commit cannot complete: the consumer is rebalancing; "
                    "call poll() to complete the rebalance, then retry the commit"
                ),
            )
        )

    def _commit_not_member(self, event: CommitRequested, now: float) -> None:
        self._emit(
            CommitDone(
                token=event.token,
                error=CommitFailedError(
                    "the commit cannot complete: the consumer is not part of an active group"
                ),
            )
        )

    def _commit_fatal(self, event: CommitRequested, now: float) -> None:
        assert self._fatal_error is not None
        self._emit(CommitDone(token=event.token, error=self._fatal_error))

    def _commit_outcome(self, event: OffsetCommitOutcome, now: float) -> None:
        token = event.pending.token
        if event.error is not None or event.response is None:
            self._coordinator_dead(f"OffsetCommit failed: {event.error}", now)
            self._emit(CommitDone(token=token, error=event.error))
            return
        code = next(
            (
                p.error_code
                for t in event.response.topics
                for p in t.partitions
                if p.error_code != errors.NONE
            ),
            errors.NONE,
        )
        if code == errors.NONE:
            self._emit(CommitDone(token=token))
            return
        name = errors.info(code).name
        action = action_for(Api.OFFSET_COMMIT, code)
        same_generation = (
            event.pending.generation_id == self._generation_id
            and event.pending.member_id == self._member_id
        )
        if action is ErrorAction.RESET_AND_REJOIN:
            self._emit(
                CommitDone(
                    token=token,
                    error=CommitFailedError(
                        f"the commit failed with {name}: the generation is gone and the "
                        f"partitions may have been reassigned"
                    ),
                )
            )
            if same_generation and self._has_generation():
                self._reset_generation(clear_member_id=code == errors.UNKNOWN_MEMBER_ID)
                if self._state is not MemberState.LEAVING:
                    self._enter_prepare(f"encountered {name} from OffsetCommit", now)
        elif action is ErrorAction.REJOIN:
            self._emit(
                CommitDone(
                    token=token,
                    error=RebalanceInProgressError(
                        "the offset commit cannot complete: the group is rebalancing; "
                        "call poll() to complete the rebalance, then retry the commit"
                    ),
                )
            )
            if same_generation:
                self._request_rejoin(f"encountered {name} from OffsetCommit", now)
        elif action is ErrorAction.FIND_COORDINATOR:
            self._emit(CommitDone(token=token, error=self._kafka_error(code, Api.OFFSET_COMMIT)))
            self._coordinator_dead(f"{name} from OffsetCommit", now)
        elif action is ErrorAction.FATAL:
            error = self._kafka_error(code, Api.OFFSET_COMMIT)
            self._emit(CommitDone(token=token, error=error))
            if self._state is not MemberState.FATAL:
                self._fatal(error, now)
        else:
            self._emit(CommitDone(token=token, error=self._kafka_error(code, Api.OFFSET_COMMIT)))

    # ------------------------------------------------------------------ leaving

    def _unsubscribe(self, event: LeaveRequested, now: float) -> None:
        self._enter_leaving(MemberState.UNJOINED, None, event.reason, now)

    def _close(self, event: CloseRequested, now: float) -> None:
        self._enter_leaving(MemberState.CLOSED, event.leave_group, event.reason, now)

    def _close_while_leaving(self, event: CloseRequested, now: float) -> None:
        self._leave_then = MemberState.CLOSED
        if event.leave_group is not None:
            self._leave_group = event.leave_group

    def _close_fatal(self, event: CloseRequested, now: float) -> None:
        self._state = MemberState.CLOSED

    def _close_unjoined(self, event: CloseRequested, now: float) -> None:
        self._fail_commits(CommitFailedError("the consumer was closed"))
        self._pending.clear()
        self._state = MemberState.CLOSED

    def _enter_leaving(
        self, then: MemberState, leave_group: bool | None, reason: str, now: float
    ) -> None:
        # Java's onLeavePrepare: LOST when the generation is gone or a rebalance is in
        # progress (JoinGroup/SyncGroup stage), REVOKED otherwise.
        lost = not self._has_generation() or self._state in (
            MemberState.JOINING,
            MemberState.AWAITING_SYNC,
            MemberState.LEADER_AWAITING_METADATA,
            MemberState.POLL_EXPIRED,
        )
        self._cancel(Api.JOIN_GROUP, Api.SYNC_GROUP, Api.HEARTBEAT)
        self._state = MemberState.LEAVING
        self._leave_then = then
        self._leave_group = leave_group
        self._leave_reason = reason
        self._assignment = None
        self._follow_up_reason = None
        if lost:
            self._lose()
        else:
            remaining = frozenset(self._owned) - self._revoking()
            if remaining:
                self._revoke(remaining)
        self._leave_step(now)

    def _leave_step(self, now: float) -> None:
        if self._listeners or self._in_flight(Api.LEAVE_GROUP):
            return
        if self._send_leave_if_dynamic(self._leave_reason, now, self._leave_group):
            return
        self._finish_leave(now)

    def _leave_listener_done(self, event: ListenerDone, now: float) -> None:
        self._leave_step(now)

    def _leave_outcome(self, event: LeaveGroupOutcome, now: float) -> None:
        if event.error is not None:
            self._log(logging.DEBUG, f"LeaveGroup failed (ignored): {event.error}")
        elif event.response is not None and event.response.error_code != errors.NONE:
            name = errors.info(event.response.error_code).name
            self._log(logging.DEBUG, f"LeaveGroup answered {name} (ignored)")
        self._finish_leave(now)

    def _finish_leave(self, now: float) -> None:
        self._reset_generation(clear_member_id=True)
        self._joined_subscription = None
        self._join_started_counts = None  # the next join starts afresh
        self._rebalance_started_at = None
        if self._leave_then is MemberState.CLOSED:
            self._fail_commits(CommitFailedError("the consumer was closed"))
            self._pending.clear()
            self._state = MemberState.CLOSED
        else:
            self._subscription = None
            self._subscribed = frozenset()
            self._state = MemberState.UNJOINED

    def _ignore_leave_outcome(self, event: LeaveGroupOutcome, now: float) -> None:
        return


Handler = Callable[[GroupMember, Any, float], None]

_S = MemberState
_ALL = tuple(MemberState)
_LIVE = tuple(s for s in MemberState if s not in (_S.CLOSED, _S.FATAL))
_IN_GROUP = (
    _S.PREPARING_JOIN,
    _S.JOINING,
    _S.LEADER_AWAITING_METADATA,
    _S.AWAITING_SYNC,
    _S.ASSIGNING,
    _S.STABLE,
    _S.POLL_EXPIRED,
)
_HEARTBEAT_OUTCOME_STATES = (
    _S.PREPARING_JOIN,
    _S.LEADER_AWAITING_METADATA,
    _S.ASSIGNING,
    _S.STABLE,
)


def _table() -> dict[tuple[MemberState, type], Handler]:
    t: dict[tuple[MemberState, type], Handler] = {}
    m = GroupMember
    t[(_S.UNJOINED, Subscribe)] = m._subscribe_unjoined
    for s in (_S.PREPARING_JOIN, _S.JOINING, _S.LEADER_AWAITING_METADATA, _S.AWAITING_SYNC):
        t[(s, Subscribe)] = m._on_subscribe
    t[(_S.ASSIGNING, Subscribe)] = m._on_subscribe
    t[(_S.POLL_EXPIRED, Subscribe)] = m._on_subscribe
    t[(_S.STABLE, Subscribe)] = m._subscribe_stable
    for s in _LIVE:
        t[(s, MetadataUpdate)] = m._on_metadata
        t[(s, CoordinatorFound)] = m._on_coordinator_found
        t[(s, CoordinatorUnavailable)] = m._on_coordinator_unavailable
        t[(s, Tick)] = m._on_tick
        t[(s, PollCalled)] = m._on_poll
        t[(s, OffsetCommitOutcome)] = m._commit_outcome
    t[(_S.STABLE, MetadataUpdate)] = m._metadata_stable
    t[(_S.LEADER_AWAITING_METADATA, MetadataUpdate)] = m._metadata_leader
    t[(_S.POLL_EXPIRED, PollCalled)] = m._rejoin_after_poll
    t[(_S.PREPARING_JOIN, ListenerDone)] = m._prepare_listener_done
    t[(_S.ASSIGNING, ListenerDone)] = m._assign_listener_done
    t[(_S.LEAVING, ListenerDone)] = m._leave_listener_done
    for s in (_S.STABLE, _S.ASSIGNING, _S.PREPARING_JOIN, _S.LEAVING):
        t[(s, CommitRequested)] = m._commit_send
    for s in (_S.JOINING, _S.LEADER_AWAITING_METADATA, _S.AWAITING_SYNC):
        t[(s, CommitRequested)] = m._commit_rebalancing
    for s in (_S.UNJOINED, _S.POLL_EXPIRED, _S.CLOSED):
        t[(s, CommitRequested)] = m._commit_not_member
    t[(_S.FATAL, CommitRequested)] = m._commit_fatal
    for s in _IN_GROUP:
        t[(s, LeaveRequested)] = m._unsubscribe
        t[(s, CloseRequested)] = m._close
    t[(_S.UNJOINED, CloseRequested)] = m._close_unjoined
    t[(_S.LEAVING, CloseRequested)] = m._close_while_leaving
    t[(_S.FATAL, CloseRequested)] = m._close_fatal
    t[(_S.JOINING, JoinGroupOutcome)] = m._join_outcome
    t[(_S.AWAITING_SYNC, SyncGroupOutcome)] = m._sync_outcome
    for s in _HEARTBEAT_OUTCOME_STATES:
        t[(s, HeartbeatOutcome)] = m._heartbeat_outcome
    t[(_S.LEAVING, LeaveGroupOutcome)] = m._leave_outcome
    for s in _LIVE:
        if s is not _S.LEAVING:
            t[(s, LeaveGroupOutcome)] = m._ignore_leave_outcome
    return t


#: The transition table: ``(state, input type) -> handler``. ``ResponseReceived`` and
#: ``RequestFailed`` are routed to the per-API outcome types before the lookup.
TRANSITIONS: Mapping[tuple[MemberState, type], Handler] = _table()

#: Pairs that are legal and do nothing.
IGNORED: frozenset[tuple[MemberState, type]] = frozenset(
    {
        *(
            (s, ListenerDone)
            for s in _ALL
            if s not in (_S.PREPARING_JOIN, _S.ASSIGNING, _S.LEAVING)
        ),
        (_S.UNJOINED, LeaveRequested),
        (_S.LEAVING, LeaveRequested),
        (_S.FATAL, LeaveRequested),
        (_S.CLOSED, LeaveRequested),
        (_S.CLOSED, CloseRequested),
        (_S.FATAL, Subscribe),
        # Heartbeats are cancelled on leaving the heartbeating states; a driver that
        # still delivers one (or a same-generation answer racing a state change) is
        # harmless: the JoinGroup/SyncGroup/LeaveGroup answer decides.
        *((s, HeartbeatOutcome) for s in _LIVE if s not in _HEARTBEAT_OUTCOME_STATES),
        *(
            (s, t)
            for s in (_S.CLOSED, _S.FATAL)
            for t in (
                MetadataUpdate,
                CoordinatorFound,
                CoordinatorUnavailable,
                Tick,
                PollCalled,
                JoinGroupOutcome,
                SyncGroupOutcome,
                HeartbeatOutcome,
                LeaveGroupOutcome,
                OffsetCommitOutcome,
            )
        ),
    }
)

#: Pairs that raise ``IllegalTransition``: they can only come from a driver bug (an
#: answer to a request this state cancelled cannot arrive: ``_route`` drops it).
REJECTED: frozenset[tuple[MemberState, type]] = frozenset(
    {
        (_S.LEAVING, Subscribe),
        (_S.CLOSED, Subscribe),
        *((s, JoinGroupOutcome) for s in _LIVE if s is not _S.JOINING),
        *((s, SyncGroupOutcome) for s in _LIVE if s is not _S.AWAITING_SYNC),
    }
)
