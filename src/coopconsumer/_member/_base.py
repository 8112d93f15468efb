"""``MemberBase``: what both member cores are made of, written once.

The classic member (``_core.MemberCore``) and KIP-848's (``kip848.MemberCore``) keep
the same books and follow the same rules outside their group protocol
(docs/architecture.md, "Two group protocols, one set of shared rules"):

- the state, moved only through ``enter``, which the transition table checks;
- the request ledger: a request id per request, what it was and which generation (or
  member epoch) sent it, cancelled requests whose answers are dropped (a cancelled
  heartbeat is still timed), and the one place an answer is matched to its request
  (``take_answer``, the top half of each member's ``route``);
- the effects a handler emits, logs and metric observations included;
- listeners: REVOKED keeps partitions assigned until its ``ListenerDone``, LOST
  unassigns first;
- the coordinator lookup (``CoordinatorLookup``), committed-offset fetches and the
  metadata refresh;
- what the shared phase handlers take (``GroupHost``: a member core of either
  protocol) and the commit answers both give without looking at their group state
  (``commit_not_member``, ``commit_fatal``);
- the small helpers both protocols' phases use: ``ms`` (Kafka's milliseconds as the
  core's seconds), the config checks (``positive``, ``check_group_identity``) and the
  OffsetCommit both send (``offset_commit_request``, ``first_commit_error``).

Each core adds its protocol's data and the generation its requests carry
(``request_generation``).

Pure: no sockets, threads or clocks.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Generic, Protocol, TypeVar

import attrs

from .._errors import CommitFailedError, ConfigurationError, CoopConsumerError, ProtocolError
from .._protocol import error_codes
from .._protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from .._transition_table import IllegalTransition
from .._types import TopicPartition
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
from ._inputs import (
    CommitRequested,
    ListenerDone,
    RequestFailed,
    ResponseReceived,
    Subscribe,
)
from ._metadata import MetadataRefresh
from ._offset_jobs import FetchJob, WaitingCommit
from ._outcomes import Pending

__all__ = [
    "NO_GENERATION",
    "BaseConfig",
    "CoordinatorLookup",
    "GroupHost",
    "MemberBase",
    "check_group_identity",
    "commit_fatal",
    "commit_not_member",
    "first_commit_error",
    "ms",
    "offset_commit_request",
    "positive",
]

StateT = TypeVar("StateT", bound=enum.Enum)


class CoordinatorLookup(enum.Enum):
    """Where the member is in finding its group coordinator.

    Not a ``MemberState``: a member in any live state can lose its coordinator and
    look it up again without its group state changing (Java's ``coordinatorUnknown()``
    sits beside ``MemberState`` likewise). Folding the two would multiply every live
    state by these four (docs/architecture.md, "Why two small enums and a pending
    leave are not states").
    """

    KNOWN = "known"
    """The coordinator's node id is known (``coordinator_id`` is set)."""

    IDLE = "idle"
    """Unknown, and no lookup asked for yet."""

    LOOKING = "looking"
    """A ``FindCoordinator`` effect was emitted and has no answer yet."""

    BACKING_OFF = "backing-off"
    """The last lookup failed; the next one is due ``retry.backoff.ms`` after it."""


class BaseConfig(Protocol):
    """The settings ``MemberBase`` and the shared handlers read."""

    @property
    def group_id(self) -> str: ...

    @property
    def enable_auto_commit(self) -> bool: ...

    @property
    def retry_backoff_ms(self) -> int: ...

    @property
    def require_stable(self) -> bool: ...

    @property
    def request_timeout_ms(self) -> int: ...


class MemberBase(Generic[StateT]):
    """The shared books of a member core; see the module docstring."""

    #: The heartbeat API: a cancelled heartbeat is still timed when it is answered.
    HEARTBEAT_API: ClassVar[Api]

    config: BaseConfig
    #: What the application subscribed to (None: not subscribed); set by each core.
    subscription: Subscribe | None

    def __init__(
        self, initial: StateT, closed: StateT, failed: StateT, metadata_refresh: MetadataRefresh
    ) -> None:
        self._state = initial
        # The closed and failed states (nothing is refreshed in either).
        self._closed_state = closed
        self._fatal_state = failed
        # The input being handled: its state on arrival, its type, and the states its
        # row of the transition table allows the handler to move to.
        self._input_state = initial
        self._input_type: type = type(None)
        self._allowed: frozenset[StateT] = frozenset()

        self.member_id = ""
        self.coordinator_id: int | None = None
        # The coordinator node whose connection has proven live: it answered a request
        # since the last request failure or coordinator change (None: not proven).
        self.live_node: int | None = None
        self.lookup = CoordinatorLookup.IDLE
        self.lookup_retry_at: float | None = None
        #: No heartbeat before this (``heartbeat_failed``), whatever else wants one.
        self.heartbeat_retry_at = 0.0
        self.metadata_refresh = metadata_refresh

        self.owned: set[TopicPartition] = set()
        # invocation id -> partitions to Unassign when that (REVOKED) listener is done
        self.listeners: dict[int, frozenset[TopicPartition]] = {}
        self.next_invocation_id = 1
        self.pending: dict[int, Pending] = {}
        # Cancelled heartbeats whose answers are still timed (see cancel); each entry
        # goes when its request's ResponseReceived or RequestFailed arrives.
        self.superseded: dict[int, Pending] = {}
        self.next_request_id = 1
        self.last_poll = 0.0
        self.fatal_error: CoopConsumerError | None = None
        # Committed-offset fetches in progress, by fetch id (any live state).
        self.fetches: dict[int, FetchJob] = {}
        self.next_fetch_id = 1
        # MANUAL: commits waiting for the coordinator to be found, oldest first.
        self.waiting_commits: list[WaitingCommit] = []
        self.fx: list[Effect] = []

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> StateT:
        """The current state; only ``enter`` changes it."""
        return self._state

    def begin(self, input_type: type, allowed: frozenset[StateT]) -> None:
        """Start handling an input of ``input_type`` in the current state, whose row of
        the transition table allows moves to ``allowed``."""
        self._input_state = self._state
        self._input_type = input_type
        self._allowed = allowed

    def enter(self, target: StateT) -> None:
        """Move to ``target``; ``IllegalTransition`` if the row of the input being
        handled does not allow it (staying in the current state is no move)."""
        if target is self._state:
            return
        if target not in self._allowed:
            raise IllegalTransition(
                self._input_state, self._input_type, target=target, machine="member"
            )
        self._state = target
        if target is self._closed_state or target is self._fatal_state:
            self.metadata_refresh.stop()

    # ------------------------------------------------------------------ requests

    @property
    def request_generation(self) -> int:
        """The generation (classic) or member epoch (KIP-848) a request is sent with."""
        raise NotImplementedError

    def request_timeout_s(self, api: Api) -> float | None:
        """How long a request to ``api`` may take (None: ``request.timeout.ms``)."""
        return None

    def track(
        self,
        api: Api,
        now: float,
        *,
        token: object,
        node_id: int | None,
        generation: int | None = None,
    ) -> int:
        """A new request id, remembered with what the request was until its answer;
        ``generation`` is what the request carries (default ``request_generation``)."""
        request_id = self.next_request_id
        self.next_request_id += 1
        self.pending[request_id] = Pending(
            api=api,
            sent_at=now,
            generation_id=self.request_generation if generation is None else generation,
            member_id=self.member_id,
            token=token,
            node_id=node_id,
        )
        return request_id

    def send(
        self,
        api: Api,
        request: object,
        now: float,
        *,
        token: object = None,
        generation: int | None = None,
    ) -> int:
        """Send ``request`` to the coordinator; returns its request id."""
        assert self.coordinator_id is not None
        node = self.coordinator_id
        request_id = self.track(api, now, token=token, node_id=node, generation=generation)
        self.emit(
            Send(
                request_id=request_id,
                request=request,
                node_id=node,
                timeout_s=self.request_timeout_s(api),
            )
        )
        return request_id

    def in_flight(self, api: Api) -> bool:
        return any(p.api is api for p in self.pending.values())

    def cancel(self, *apis: Api) -> None:
        """Forget requests in flight: their answers will be dropped by ``route``. A
        cancelled heartbeat is still timed when its answer arrives (Java never cancels
        one, so its latency is recorded)."""
        for request_id in [r for r, p in self.pending.items() if p.api in apis]:
            pending = self.pending.pop(request_id)
            if pending.api is self.HEARTBEAT_API:
                self.superseded[request_id] = pending

    def route(self, event: ResponseReceived | RequestFailed, now: float) -> object | None:
        """The input an answer becomes (a per-API outcome), None to drop it."""
        raise NotImplementedError

    def take_answer(self, event: ResponseReceived | RequestFailed, now: float) -> Pending | None:
        """The request ``event`` answers, forgotten now; None for an answer to a
        cancelled request (dropped here, timed if it was a heartbeat). An answer from
        the coordinator proves its connection; a failure of a request sent to it
        un-proves it."""
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
        return pending

    def response_type(self, api: Api) -> type:
        """The response type an answer to ``api`` must have."""
        raise NotImplementedError

    def answer_parts(
        self, pending: Pending, event: ResponseReceived | RequestFailed
    ) -> tuple[Any, CoopConsumerError | None]:
        """``(response, error)`` of an answer: the failure, the response if it has the
        type its request expects, else a ``ProtocolError``."""
        if isinstance(event, RequestFailed):
            return None, event.error
        expected = self.response_type(pending.api)
        if isinstance(event.response, expected):
            return event.response, None
        return None, ProtocolError(
            f"expected a {expected.__name__}, got {type(event.response).__name__}",
            api_key=pending.api.value,
        )

    def observe_round_trip(
        self, pending: Pending, event: ResponseReceived | RequestFailed, now: float
    ) -> None:
        """Heartbeat and commit latency for every response that arrives, whatever its
        error code, stale or superseded ones included (Java's Heartbeat and OffsetCommit
        handlers record ``requestLatencyMs`` first thing); never for a timeout or a
        disconnect, which are not responses."""
        if not isinstance(event, ResponseReceived):
            return
        if not isinstance(event.response, self.response_type(pending.api)):
            return
        if pending.api is self.HEARTBEAT_API:
            self.observe(Observation.HEARTBEAT_COMPLETED, now, now - pending.sent_at)
        elif pending.api is Api.OFFSET_COMMIT:
            self.observe(Observation.COMMIT_COMPLETED, now, now - pending.sent_at)

    # ------------------------------------------------------------------ effects

    def emit(self, effect: Effect) -> None:
        self.fx.append(effect)

    def log(self, level: int, message: str) -> None:
        self.fx.append(Log(level=level, message=message))

    def observe(self, event: Observation, now: float, latency_s: float | None = None) -> None:
        self.fx.append(Observe(event=event, now=now, latency_s=latency_s))

    # ------------------------------------------------------------------ listeners

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
        that callback, so they are never claimed in the next join.
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

    # ------------------------------------------------------------------ coordinator

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

    def connection_lost(self, node_id: int) -> None:
        """Node ``node_id``'s connection closed on an error (``ConnectionLost``): if it
        was the coordinator's, the connection is unproven until the next answer."""
        if node_id == self.coordinator_id:
            self.live_node = None

    def heartbeat_failed(self, now: float) -> float:
        """A heartbeat failed (no answer, or a coordinator error): the next one waits
        ``retry.backoff.ms``, also when a lookup names the coordinator again at once, as
        Java's ``Heartbeat.failHeartbeat``. Without it a coordinator that is moving (it
        answers NOT_COORDINATOR while lookups still name it) was looked up and
        heartbeated again as fast as the answers came. Returns when it is due."""
        self.heartbeat_retry_at = now + self.config.retry_backoff_ms / 1000.0
        return self.heartbeat_retry_at

    def coordinator_found(self, node_id: int, now: float) -> None:
        """A lookup named the coordinator (``CoordinatorFound``)."""
        self.cancel(Api.FIND_COORDINATOR)  # a harness may answer before our lookup does
        self.coordinator_id = node_id
        self.lookup = CoordinatorLookup.KNOWN
        self.lookup_retry_at = None

    def coordinator_dead(self, reason: str, now: float) -> None:
        """The coordinator is unknown now: forget it and look it up again."""
        if self.coordinator_id is not None:
            self.log(logging.INFO, f"group coordinator {self.coordinator_id} unknown: {reason}")
        self.coordinator_id = None
        self.live_node = None
        if self.lookup is CoordinatorLookup.KNOWN:
            self.lookup = CoordinatorLookup.IDLE
        self.ensure_coordinator(now)

    # ------------------------------------------------------------------ failure

    def fatal(self, error: CoopConsumerError, now: float) -> None:
        """Fail for good: LOST for what is owned, every commit and fetch answered with
        ``error``, nothing in flight remembered, FATAL, and the ``Fatal`` effect."""
        self.log(logging.ERROR, f"fatal group error: {error}")
        self.lose()
        self.fail_commits(error)
        self.fail_fetches(error)
        self.pending.clear()
        self.drop_state_data()
        self.enter(self._fatal_state)
        self.fatal_error = error
        self.emit(Fatal(error=error))

    def drop_state_data(self) -> None:
        """What a member keeps for later besides requests, dropped on failing."""

    def fail_commits(self, error: CoopConsumerError) -> None:
        """Answer every commit, waiting or in flight, with ``error``."""
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

    # ------------------------------------------------------------------ fetches

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


#: The generation id of a member that has none.
NO_GENERATION: Final = -1


def ms(value_ms: int) -> float:
    """Kafka's milliseconds as the core's float seconds."""
    return value_ms / 1000.0


def positive(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    """attrs validator of a setting in milliseconds that must be above zero."""
    if value <= 0:
        raise ConfigurationError(f"{attribute.name} must be positive, got {value}")


def check_group_identity(group_id: str, group_instance_id: str | None) -> None:
    """A subscribing member needs a group id; a static one a non-empty instance id."""
    if not group_id:
        raise ConfigurationError("group.id is required for a subscribing consumer")
    if group_instance_id is not None and not group_instance_id:
        raise ConfigurationError("group.instance.id must not be empty")


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
    """The first partition error of an OffsetCommit answer (``error_codes.NONE`` if none)."""
    return next(
        (p.error_code for t in response.topics for p in t.partitions if p.error_code),
        error_codes.NONE,
    )


#: A member core of either group protocol, as the shared handlers see it.
GroupHost = MemberBase[Any]


def commit_not_member(m: GroupHost, event: CommitRequested, now: float) -> None:
    """Not in a group (never joined, left, closed): the commit cannot be made."""
    m.emit(
        CommitDone(
            token=event.token,
            error=CommitFailedError(
                "the commit cannot complete: the consumer is not part of an active group"
            ),
        )
    )


def commit_fatal(m: GroupHost, event: CommitRequested, now: float) -> None:
    """FATAL: every commit fails with the error that stopped the member."""
    assert m.fatal_error is not None
    m.emit(CommitDone(token=event.token, error=m.fatal_error))
