"""The reassignment executor's decisions, sans-I/O: a sliding window of moves.

:class:`ExecutorCore` holds the progress of one plan and answers inputs (facts: the
cluster as observed, the answers to its requests, a user's cancel) with actions
(imperatives: set throttles, submit moves, cancel moves). Time is an argument. The
driver (``_driver``) does the admin calls and persists :meth:`ExecutorCore.to_dict`
after every step. See docs/admin.md, "Reassigning partitions".

Pure: imports the standard library, attrs and the plan types; never ``socket``,
``threading``, ``time`` or the admin client.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import attrs

from ..._errors import ConfigurationError, CoopConsumerError
from ..._types import TopicPartition
from ._plan import PartitionMove, PlanError, ReassignmentPlan

__all__ = [
    "Action",
    "Cancel",
    "CancelRequested",
    "CancelSent",
    "ClusterObserved",
    "ExecutorConfig",
    "ExecutorCore",
    "IllegalMoveTransition",
    "Input",
    "MoveState",
    "ObservedPartition",
    "Phase",
    "Progress",
    "ReassignmentError",
    "RemoveThrottles",
    "SetThrottles",
    "Submit",
    "Submitted",
    "TargetChangeRequested",
    "ThrottlesRemoved",
    "ThrottlesSet",
    "replicas_to_keep",
]

STATE_VERSION = 1


class ReassignmentError(CoopConsumerError):
    """A request the executor refuses (a target change it cannot make safely, a
    cancel of an unknown partition, a state file of another plan). Nothing changed."""


class IllegalMoveTransition(ReassignmentError):
    """A bug: a move was asked to go to a state its current state cannot reach."""


class MoveState(enum.Enum):
    """Where one partition's move is."""

    #: Not submitted yet; waits for room in the window.
    QUEUED = "queued"
    #: Its submission is decided and persisted; the broker may or may not have it yet
    #: (the next observation tells, so a restarted executor neither repeats nor loses it).
    SUBMITTING = "submitting"
    #: The broker is moving it (KIP-455: target replicas being added).
    IN_FLIGHT = "in_flight"
    #: Its cancellation is decided and persisted; Kafka reverts it to the original replicas.
    CANCELLING = "cancelling"
    #: On its target replicas.
    DONE = "done"
    #: Dropped before it started, or reverted to its original replicas.
    CANCELLED = "cancelled"
    #: The broker refused it (unknown broker, partition deleted...).
    FAILED = "failed"


#: Valid predecessors of each state (the one place illegal moves fail).
_PREDECESSORS: Final[Mapping[MoveState, frozenset[MoveState]]] = MappingProxyType(
    {
        MoveState.QUEUED: frozenset({MoveState.SUBMITTING}),
        MoveState.SUBMITTING: frozenset(
            {MoveState.QUEUED, MoveState.IN_FLIGHT, MoveState.CANCELLING}
        ),
        MoveState.IN_FLIGHT: frozenset({MoveState.SUBMITTING}),
        MoveState.CANCELLING: frozenset({MoveState.SUBMITTING, MoveState.IN_FLIGHT}),
        MoveState.DONE: frozenset(
            {MoveState.QUEUED, MoveState.SUBMITTING, MoveState.IN_FLIGHT, MoveState.CANCELLING}
        ),
        MoveState.CANCELLED: frozenset(
            {MoveState.QUEUED, MoveState.SUBMITTING, MoveState.IN_FLIGHT, MoveState.CANCELLING}
        ),
        MoveState.FAILED: frozenset(
            {MoveState.QUEUED, MoveState.SUBMITTING, MoveState.IN_FLIGHT, MoveState.CANCELLING}
        ),
    }
)

ACTIVE: Final = frozenset({MoveState.SUBMITTING, MoveState.IN_FLIGHT, MoveState.CANCELLING})
TERMINAL: Final = frozenset({MoveState.DONE, MoveState.CANCELLED, MoveState.FAILED})


class Phase(enum.Enum):
    """Where the whole reassignment is."""

    #: Replication throttles are being set; nothing is submitted before they are.
    THROTTLING = "throttling"
    #: Moves are submitted as the window allows.
    RUNNING = "running"
    #: Every move ended; the throttles are being removed.
    UNTHROTTLING = "unthrottling"
    #: Nothing left to do.
    FINISHED = "finished"


def _positive_int(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is None and attribute.name != "max_partitions":
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{attribute.name} must be an int >= 1, not {value!r}")


@attrs.frozen(kw_only=True)
class ExecutorConfig:
    """The window: at most ``max_partitions`` moves and ``max_bytes`` bytes to copy in
    flight (a move larger than ``max_bytes`` starts alone); replication throttled to
    ``throttle_bytes_per_s`` per broker while it runs (None: no throttle)."""

    max_partitions: int = attrs.field(default=50, validator=_positive_int)
    max_bytes: int | None = attrs.field(default=None, validator=_positive_int)
    throttle_bytes_per_s: int | None = attrs.field(default=None, validator=_positive_int)


def _ids(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class ObservedPartition:
    """A partition as Metadata and ListPartitionReassignments show it."""

    replicas: tuple[int, ...] = attrs.field(converter=_ids)
    isr: tuple[int, ...] = attrs.field(converter=_ids)
    leader: int
    adding: tuple[int, ...] = attrs.field(default=(), converter=_ids)
    removing: tuple[int, ...] = attrs.field(default=(), converter=_ids)
    #: The topic's ``min.insync.replicas``.
    min_insync_replicas: int = 1

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)


# ---------------------------------------------------------------------- inputs


@attrs.frozen
class ClusterObserved:
    """The plan's partitions as the cluster shows them now (a missing one was deleted)."""

    partitions: Mapping[TopicPartition, ObservedPartition]


@attrs.frozen
class ThrottlesSet:
    """The SetThrottles action succeeded."""


@attrs.frozen
class ThrottlesRemoved:
    """The RemoveThrottles action succeeded."""


@attrs.frozen
class Submitted:
    """The answer to a Submit: the broker refused ``refused`` (partition -> reason)
    and accepted the rest of ``partitions``."""

    partitions: frozenset[TopicPartition]
    refused: Mapping[TopicPartition, str] = attrs.field(factory=dict)


@attrs.frozen
class CancelSent:
    """The answer to a Cancel; a refusal (usually NO_REASSIGNMENT_IN_PROGRESS: it had
    finished, or never reached the broker) is settled by the next observation."""

    partitions: frozenset[TopicPartition]
    refused: Mapping[TopicPartition, str] = attrs.field(factory=dict)


@attrs.frozen
class CancelRequested:
    """A user cancels these partitions (None: everything not finished)."""

    partitions: frozenset[TopicPartition] | None = None


@attrs.frozen
class TargetChangeRequested:
    """A user changes the target of one partition (seed 000's rule for an in-flight one)."""

    tp: TopicPartition
    replicas: tuple[int, ...]


Input = (
    ClusterObserved
    | ThrottlesSet
    | ThrottlesRemoved
    | Submitted
    | CancelSent
    | CancelRequested
    | TargetChangeRequested
)

# ---------------------------------------------------------------------- actions


@attrs.frozen(kw_only=True)
class SetThrottles:
    """Throttle replication at ``rate`` on ``brokers``: APPEND the ``partition:broker``
    entries to each topic's ``leader``/``follower.replication.throttled.replicas``
    (the original replicas lead; the added ones follow), SET the brokers' rates."""

    rate: int
    leader_replicas: Mapping[str, tuple[str, ...]]
    follower_replicas: Mapping[str, tuple[str, ...]]
    brokers: tuple[int, ...]


@attrs.frozen(kw_only=True)
class RemoveThrottles:
    """SUBTRACT the entries SetThrottles appended and DELETE the brokers' rates."""

    leader_replicas: Mapping[str, tuple[str, ...]]
    follower_replicas: Mapping[str, tuple[str, ...]]
    brokers: tuple[int, ...]


@attrs.frozen
class Submit:
    """AlterPartitionReassignments with these targets."""

    targets: Mapping[TopicPartition, tuple[int, ...]]


@attrs.frozen
class Cancel:
    """AlterPartitionReassignments with a null target for these partitions."""

    partitions: tuple[TopicPartition, ...]


Action = SetThrottles | RemoveThrottles | Submit | Cancel


@attrs.frozen(kw_only=True)
class Progress:
    """Counts and bytes for the status table and the progress bar."""

    phase: Phase
    counts: Mapping[MoveState, int]
    total: int
    bytes_total: int
    bytes_done: int
    bytes_in_flight: int

    @property
    def done(self) -> int:
        return self.counts.get(MoveState.DONE, 0)

    @property
    def in_flight(self) -> int:
        return sum(self.counts.get(s, 0) for s in ACTIVE)

    @property
    def queued(self) -> int:
        return self.counts.get(MoveState.QUEUED, 0)

    @property
    def finished(self) -> int:
        return sum(self.counts.get(s, 0) for s in TERMINAL)


def replicas_to_keep(
    original_count: int, assigned: Sequence[int], isr: Sequence[int], leader: int
) -> tuple[int, ...]:
    """Seed 000's rule for a reassignment that changes in flight: of the assigned
    replicas, keep the leader, then in-sync ones, then out-of-sync ones (sorted), up
    to as many as the partition had originally; the rest may be dropped now."""
    ordered = ([leader] if leader in assigned else []) + [r for r in isr if r in assigned]
    ordered += sorted(r for r in assigned if r not in isr)
    existing = list(dict.fromkeys(ordered))
    return tuple(existing[:original_count])


@attrs.define
class _Move:
    move: PartitionMove
    state: MoveState
    #: What the broker is (or will be) asked for: the plan's target, an interim one
    #: while a target change keeps old replicas, or the original when reverting.
    target: tuple[int, ...]
    #: After a target change through an interim target: the end target.
    final_target: tuple[int, ...] | None = None
    #: The move is being taken back to its original replicas after a cancel.
    reverting: bool = False
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    submissions: int = 0

    @property
    def end_target(self) -> tuple[int, ...]:
        return self.final_target or self.target


class ExecutorCore:
    """One plan's progress and the window's decisions.

    Call :meth:`start` once per run (a resumed one too), then :meth:`handle` with each
    input; both return the actions to carry out in order. Nothing is submitted before
    the first :class:`ClusterObserved` of a run, so a resumed executor first learns
    what the broker already has. Larger moves go first (bytes to copy, descending;
    then topic and partition): a long move started last would end last, after
    everything else.
    """

    def __init__(self, plan: ReassignmentPlan, config: ExecutorConfig | None = None) -> None:
        self.plan = plan
        self.config = config or ExecutorConfig()
        self.phase = Phase.THROTTLING if self.config.throttle_bytes_per_s else Phase.RUNNING
        self._moves: dict[TopicPartition, _Move] = {
            m.tp: _Move(move=m, state=MoveState.QUEUED, target=m.replicas) for m in plan.moves
        }
        self._order: list[TopicPartition] = [
            m.tp for m in sorted(plan.moves, key=lambda m: (-m.bytes_to_move, m.topic, m.partition))
        ]
        self._observed: dict[TopicPartition, ObservedPartition] = {}
        self._observed_this_run = False
        self._throttles = _throttle_entries(plan)
        self.started_at: float | None = None
        self.finished_at: float | None = None

    # ------------------------------------------------------------------ reading

    def state_of(self, tp: TopicPartition) -> MoveState:
        return self._moves[tp].state

    def target_of(self, tp: TopicPartition) -> tuple[int, ...]:
        return self._moves[tp].end_target

    def submissions_of(self, tp: TopicPartition) -> int:
        return self._moves[tp].submissions

    def moves(self) -> list[tuple[PartitionMove, MoveState, str | None]]:
        return [(m.move, m.state, m.error) for m in self._moves.values()]

    @property
    def finished(self) -> bool:
        return self.phase is Phase.FINISHED

    def progress(self) -> Progress:
        counts = dict.fromkeys(MoveState, 0)
        done = in_flight = 0
        for m in self._moves.values():
            counts[m.state] += 1
            if m.state is MoveState.DONE:
                done += m.move.bytes_to_move
            elif m.state in ACTIVE:
                in_flight += m.move.bytes_to_move
        return Progress(
            phase=self.phase,
            counts=MappingProxyType(counts),
            total=len(self._moves),
            bytes_total=self.plan.total_bytes,
            bytes_done=done,
            bytes_in_flight=in_flight,
        )

    def partitions_in(self, *states: MoveState) -> list[TopicPartition]:
        return [tp for tp, m in self._moves.items() if m.state in states]

    # ------------------------------------------------------------------ inputs

    def start(self, now: float) -> list[Action]:
        """Begin (or resume) a run."""
        self._observed_this_run = False
        if self.started_at is None:
            self.started_at = now
        if self.phase is Phase.THROTTLING:
            return [self._set_throttles()]
        if self.phase is Phase.UNTHROTTLING:
            return [self._remove_throttles()]
        return []

    def handle(self, event: Input, now: float) -> list[Action]:
        """Apply one input; the actions it leads to. ``ReassignmentError`` for a
        request refused (state unchanged); ``TypeError`` for an unknown input."""
        handler = _HANDLERS.get(type(event))
        if handler is None:
            raise TypeError(f"not an executor input: {event!r}")
        return handler(self, event, now)

    def _on_throttles_set(self, event: ThrottlesSet, now: float) -> list[Action]:
        if self.phase is Phase.THROTTLING:
            self.phase = Phase.RUNNING
        return self._fill(now)

    def _on_throttles_removed(self, event: ThrottlesRemoved, now: float) -> list[Action]:
        if self.phase is Phase.UNTHROTTLING:
            self.phase = Phase.FINISHED
            self.finished_at = now
        return []

    def _on_observed(self, event: ClusterObserved, now: float) -> list[Action]:
        self._observed.update(event.partitions)
        self._observed_this_run = True
        actions: list[Action] = []
        resubmit: dict[TopicPartition, tuple[int, ...]] = {}
        for tp, m in self._moves.items():
            if m.state in TERMINAL:
                continue
            seen = event.partitions.get(tp)
            if seen is None:
                self._to(m, MoveState.FAILED, now, error="the partition no longer exists")
                continue
            self._reconcile(m, seen, now, resubmit)
        if resubmit:
            actions.append(Submit(resubmit))
        actions.extend(self._fill(now))
        return actions

    def _reconcile(
        self,
        m: _Move,
        seen: ObservedPartition,
        now: float,
        resubmit: dict[TopicPartition, tuple[int, ...]],
    ) -> None:
        on = set(seen.replicas)
        if m.state is MoveState.QUEUED:
            if not seen.reassigning and on == set(m.target):
                self._to(m, MoveState.DONE, now)  # nothing to move
            return
        if seen.reassigning:
            if m.state is MoveState.SUBMITTING:
                self._to(m, MoveState.IN_FLIGHT, now)
            return
        # No reassignment at the broker: it ended, or never reached it.
        if m.state is MoveState.CANCELLING or m.reverting:
            if on == set(m.move.original_replicas):
                self._to(m, MoveState.CANCELLED, now)
            elif on == set(m.end_target) and not m.reverting:
                self._to(m, MoveState.DONE, now)  # it finished before the cancel
            else:
                # Reverted to an interim placement (a changed target's): go back.
                m.reverting = True
                m.target, m.final_target = m.move.original_replicas, None
                self._submit_one(m, now, resubmit)
            return
        if on == set(m.target):
            if m.final_target is not None:
                # The interim target is reached: the new replicas are in sync, now
                # drop the old ones the interim kept (seed 000's second step).
                m.target, m.final_target = m.final_target, None
                self._submit_one(m, now, resubmit)
            else:
                self._to(m, MoveState.DONE, now)
            return
        if m.state is MoveState.SUBMITTING:
            # Decided but never seen by the broker (the executor stopped in between).
            self._to(m, MoveState.QUEUED, now)
            return
        self._to(m, MoveState.CANCELLED, now, error="reverted outside this executor")

    def _on_submitted(self, event: Submitted, now: float) -> list[Action]:
        for tp in event.partitions:
            m = self._moves[tp]
            if m.state is not MoveState.SUBMITTING:
                continue
            if tp in event.refused:
                self._to(m, MoveState.FAILED, now, error=event.refused[tp])
            else:
                self._to(m, MoveState.IN_FLIGHT, now)
        return self._fill(now)

    def _on_cancel_sent(self, event: CancelSent, now: float) -> list[Action]:
        # Settled by the next observation either way: the reverted replicas show.
        return []

    def _on_cancel_requested(self, event: CancelRequested, now: float) -> list[Action]:
        wanted = set(self._moves) if event.partitions is None else set(event.partitions)
        unknown = wanted - set(self._moves)
        if unknown:
            raise ReassignmentError(f"not in the plan: {sorted(map(str, unknown))}")
        cancel: list[TopicPartition] = []
        for tp in sorted(wanted):
            m = self._moves[tp]
            if m.state is MoveState.QUEUED:
                self._to(m, MoveState.CANCELLED, now)
            elif m.state in (MoveState.SUBMITTING, MoveState.IN_FLIGHT):
                self._to(m, MoveState.CANCELLING, now)
                cancel.append(tp)
        actions: list[Action] = [Cancel(tuple(cancel))] if cancel else []
        return actions + self._fill(now)

    def _on_target_change(self, event: TargetChangeRequested, now: float) -> list[Action]:
        m = self._moves.get(event.tp)
        if m is None:
            raise ReassignmentError(f"{event.tp} is not in the plan")
        new = tuple(event.replicas)
        if not new or len(set(new)) != len(new):
            raise ReassignmentError(f"{event.tp}: a target needs distinct brokers: {list(new)}")
        if m.state is MoveState.QUEUED:
            m.target, m.final_target = new, None
            m.move = attrs.evolve(m.move, replicas=new)
            return self._fill(now)
        if m.state is not MoveState.IN_FLIGHT or m.reverting or m.final_target is not None:
            raise ReassignmentError(
                f"{event.tp} is {m.state.value}: only a queued or an in-flight move can change"
            )
        seen = self._observed.get(event.tp)
        if seen is None:
            raise ReassignmentError(f"{event.tp}: not observed yet, try after the next step")
        top = len(m.move.original_replicas)
        if top < seen.min_insync_replicas:
            raise ReassignmentError(
                f"{event.tp}: {top} original replicas < min.insync.replicas "
                f"{seen.min_insync_replicas}; the change is refused"
            )
        keep = replicas_to_keep(top, seen.replicas, seen.isr, seen.leader)
        interim = new + tuple(r for r in keep if r not in new)
        m.move = attrs.evolve(m.move, replicas=new)
        if interim == new:
            m.target, m.final_target = new, None
        else:
            m.target, m.final_target = interim, new
        resubmit: dict[TopicPartition, tuple[int, ...]] = {}
        self._submit_one(m, now, resubmit)
        return [Submit(resubmit)]

    # ------------------------------------------------------------------ window

    def _fill(self, now: float) -> list[Action]:
        if self.phase is not Phase.RUNNING or not self._observed_this_run:
            return []
        active = [m for m in self._moves.values() if m.state in ACTIVE]
        count = len(active)
        in_bytes = sum(m.move.bytes_to_move for m in active)
        batch: dict[TopicPartition, tuple[int, ...]] = {}
        for tp in self._order:
            m = self._moves[tp]
            if m.state is not MoveState.QUEUED:
                continue
            if count >= self.config.max_partitions:
                break
            size = m.move.bytes_to_move
            limit = self.config.max_bytes
            if limit is not None and count and in_bytes + size > limit:
                break  # strict order: the head waits for room, nothing overtakes it
            self._submit_one(m, now, batch)
            count += 1
            in_bytes += size
        if batch:
            return [Submit(batch)]
        if count == 0 and all(m.state in TERMINAL for m in self._moves.values()):
            if self.config.throttle_bytes_per_s:
                self.phase = Phase.UNTHROTTLING
                return [self._remove_throttles()]
            self.phase = Phase.FINISHED
            self.finished_at = now
        return []

    def _submit_one(
        self, m: _Move, now: float, into: dict[TopicPartition, tuple[int, ...]]
    ) -> None:
        if m.state is not MoveState.SUBMITTING:
            self._to(m, MoveState.SUBMITTING, now)
        if m.started_at is None:
            m.started_at = now
        m.submissions += 1
        into[m.move.tp] = m.target

    def _to(self, m: _Move, state: MoveState, now: float, *, error: str | None = None) -> None:
        if m.state not in _PREDECESSORS[state]:
            raise IllegalMoveTransition(
                f"{m.move.topic}-{m.move.partition}: {m.state.value} -> {state.value}"
            )
        m.state = state
        if error is not None:
            m.error = error
        if state in TERMINAL:
            m.finished_at = now
            m.reverting = False

    def _set_throttles(self) -> SetThrottles:
        leader, follower, brokers = self._throttles
        rate = self.config.throttle_bytes_per_s
        assert rate is not None
        return SetThrottles(
            rate=rate, leader_replicas=leader, follower_replicas=follower, brokers=brokers
        )

    def _remove_throttles(self) -> RemoveThrottles:
        leader, follower, brokers = self._throttles
        return RemoveThrottles(leader_replicas=leader, follower_replicas=follower, brokers=brokers)

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """Everything a restarted executor needs, as JSON-ready data."""
        return {
            "version": STATE_VERSION,
            "plan": self.plan.to_dict(),
            "config": {
                "max_partitions": self.config.max_partitions,
                "max_bytes": self.config.max_bytes,
                "throttle_bytes_per_s": self.config.throttle_bytes_per_s,
            },
            "phase": self.phase.value,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "moves": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "state": m.state.value,
                    "replicas": list(m.move.replicas),
                    "target": list(m.target),
                    "final_target": None if m.final_target is None else list(m.final_target),
                    "reverting": m.reverting,
                    "error": m.error,
                    "started_at": m.started_at,
                    "finished_at": m.finished_at,
                    "submissions": m.submissions,
                }
                for tp, m in self._moves.items()
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExecutorCore:
        """Restore a persisted executor; ``ReassignmentError`` for another format."""
        if data.get("version") != STATE_VERSION:
            raise ReassignmentError(f"not a version-{STATE_VERSION} executor state")
        try:
            plan = ReassignmentPlan.from_dict(data["plan"])
            config = ExecutorConfig(**data["config"])
            core = cls(plan, config)
            core.phase = Phase(data["phase"])
            core.started_at = data.get("started_at")
            core.finished_at = data.get("finished_at")
            for entry in data["moves"]:
                m = core._moves[TopicPartition(entry["topic"], int(entry["partition"]))]
                m.state = MoveState(entry["state"])
                m.target = tuple(entry["target"])
                final = entry.get("final_target")
                m.final_target = None if final is None else tuple(final)
                m.reverting = bool(entry.get("reverting", False))
                m.error = entry.get("error")
                m.started_at = entry.get("started_at")
                m.finished_at = entry.get("finished_at")
                m.submissions = int(entry.get("submissions", 0))
                m.move = attrs.evolve(m.move, replicas=tuple(entry["replicas"]))
        except (KeyError, TypeError, ValueError, PlanError, ConfigurationError) as exc:
            raise ReassignmentError(f"malformed executor state: {exc!r}") from exc
        return core

    def rollback_plan(self) -> ReassignmentPlan:
        """The moves that finished, taken back to their original replicas."""
        done = [m.move.reversed() for m in self._moves.values() if m.state is MoveState.DONE]
        return ReassignmentPlan(moves=done, description=f"rollback of: {self.plan.description}")


def _throttle_entries(
    plan: ReassignmentPlan,
) -> tuple[Mapping[str, tuple[str, ...]], Mapping[str, tuple[str, ...]], tuple[int, ...]]:
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for m in plan.moves:
        if not m.adding:
            continue
        leader.setdefault(m.topic, []).extend(f"{m.partition}:{b}" for b in m.original_replicas)
        follower.setdefault(m.topic, []).extend(f"{m.partition}:{b}" for b in m.adding)
        brokers.update(m.original_replicas)
        brokers.update(m.replicas)
    return (
        MappingProxyType({t: tuple(v) for t, v in leader.items()}),
        MappingProxyType({t: tuple(v) for t, v in follower.items()}),
        tuple(sorted(brokers)),
    )


Handler = Callable[[ExecutorCore, Any, float], list[Action]]

#: Every input type and its handler.
_HANDLERS: Final[Mapping[type, Handler]] = MappingProxyType(
    {
        ClusterObserved: ExecutorCore._on_observed,
        ThrottlesSet: ExecutorCore._on_throttles_set,
        ThrottlesRemoved: ExecutorCore._on_throttles_removed,
        Submitted: ExecutorCore._on_submitted,
        CancelSent: ExecutorCore._on_cancel_sent,
        CancelRequested: ExecutorCore._on_cancel_requested,
        TargetChangeRequested: ExecutorCore._on_target_change,
    }
)

#: Every input type, for the test that checks the table is complete.
INPUT_TYPES: Final = tuple(_HANDLERS)
