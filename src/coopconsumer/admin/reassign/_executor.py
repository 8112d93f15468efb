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
from ..._transition_table import IllegalTransition, Outside, build_moves, check_move
from ..._types import TopicPartition
from .._admin_types import Reassigning
from ._plan import PartitionMove, PlanError, ReassignmentPlan

__all__ = [
    "Action",
    "AlterLogDirs",
    "Cancel",
    "CancelRequested",
    "CancelSent",
    "ClusterObserved",
    "ConfigChanged",
    "ElectPreferred",
    "ExecutorConfig",
    "ExecutorCore",
    "IllegalMoveTransition",
    "Input",
    "LeadersElected",
    "LogDirsAltered",
    "MoveState",
    "ObservedPartition",
    "Phase",
    "Progress",
    "ReadThrottles",
    "ReassignmentError",
    "RemoveThrottles",
    "SetThrottles",
    "Submit",
    "Submitted",
    "TargetChangeRequested",
    "ThrottlesRead",
    "ThrottlesRemoved",
    "ThrottlesSet",
    "replicas_to_keep",
]

STATE_VERSION = 1


class ReassignmentError(CoopConsumerError):
    """A request the executor refuses (a target change it cannot make safely, a
    cancel of an unknown partition, a state file of another plan). Nothing changed."""


#: A bug: a move was asked to go to a state its row does not allow (the table kit's
#: one ``IllegalTransition``, machine "move"; the old name is kept for importers).
IllegalMoveTransition = IllegalTransition


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
    #: Another tool is moving the partition: not touched (``override`` takes it over).
    CONFLICT = "conflict"


ACTIVE: Final = frozenset({MoveState.SUBMITTING, MoveState.IN_FLIGHT, MoveState.CANCELLING})
TERMINAL: Final = frozenset(
    {MoveState.DONE, MoveState.CANCELLED, MoveState.FAILED, MoveState.CONFLICT}
)


class Phase(enum.Enum):
    """Where the whole reassignment is."""

    #: Replication throttles are being read (to restore them exactly afterwards) and
    #: set; nothing is submitted before they are.
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


def _flag(instance: object, attribute: attrs.Attribute[Any], value: bool) -> None:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{attribute.name} must be True or False, not {value!r}")


@attrs.frozen(kw_only=True)
class ExecutorConfig:
    """The window: at most ``max_partitions`` moves and ``max_bytes`` bytes to copy in
    flight (a move larger than ``max_bytes`` starts alone), and at most
    ``max_moves_per_broker`` moves into or out of any one broker (Cruise Control's
    per-broker cap; None: no cap); replication throttled to ``throttle_bytes_per_s``
    per broker while it runs (None: no throttle). ``elect_preferred_leaders`` asks for
    a preferred-leader election for each move that ends with another leader.
    ``override`` takes over partitions another tool is moving; by default they are
    left alone (``MoveState.CONFLICT``)."""

    max_partitions: int = attrs.field(default=50, validator=_positive_int)
    max_bytes: int | None = attrs.field(default=None, validator=_positive_int)
    throttle_bytes_per_s: int | None = attrs.field(default=None, validator=_positive_int)
    max_moves_per_broker: int | None = attrs.field(default=None, validator=_positive_int)
    elect_preferred_leaders: bool = attrs.field(default=False, validator=_flag)
    override: bool = attrs.field(default=False, validator=_flag)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _ids(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class ObservedPartition(Reassigning):
    """A partition as Metadata and ListPartitionReassignments show it."""

    replicas: tuple[int, ...] = attrs.field(converter=_ids)
    isr: tuple[int, ...] = attrs.field(converter=_ids)
    leader: int
    adding: tuple[int, ...] = attrs.field(default=(), converter=_ids)
    removing: tuple[int, ...] = attrs.field(default=(), converter=_ids)
    #: The topic's ``min.insync.replicas``.
    min_insync_replicas: int = 1
    #: Broker -> log directory of its replica, and of a future replica being moved to
    #: another directory (DescribeLogDirs); None when not looked at.
    log_dirs: Mapping[int, str] | None = None
    future_dirs: Mapping[int, str] = attrs.field(factory=dict)

    def describe(self) -> str:
        if not self.reassigning:
            return f"replicas {list(self.replicas)}"
        return (
            f"replicas {list(self.replicas)}, adding {list(self.adding)}, "
            f"removing {list(self.removing)}"
        )


# ---------------------------------------------------------------------- inputs


@attrs.frozen
class ClusterObserved:
    """The plan's partitions as the cluster shows them now (a missing one was deleted)."""

    partitions: Mapping[TopicPartition, ObservedPartition]
    #: The throttle rates the throttled brokers hold now (broker -> rate key -> value,
    #: None when not set on the broker itself), when the driver looked (see
    #: :meth:`ExecutorCore.throttled_brokers`); None when it did not look this time.
    throttle_rates: Mapping[int, Mapping[str, str | None]] | None = None


@attrs.frozen
class ThrottlesRead:
    """The answer to ReadThrottles: the brokers' own (dynamic, per-broker) throttle
    rates, None for a rate not set on the broker itself, and the topics' throttled
    replica lists as they are."""

    rates: Mapping[int, Mapping[str, str | None]]
    replicas: Mapping[str, Mapping[str, tuple[str, ...]]]
    #: Brokers that could not be asked (down): no throttle is set on them.
    unreachable: frozenset[int] = frozenset()


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
    """A user changes the target of one partition (the rule for an in-flight one)."""

    tp: TopicPartition
    replicas: tuple[int, ...]


@attrs.frozen
class ConfigChanged:
    """A user changes the window, the throttle or the flags of a running (or resumed)
    executor."""

    config: ExecutorConfig


@attrs.frozen
class LogDirsAltered:
    """The answer to AlterLogDirs: the replicas asked for, and the refusals
    (REPLICA_NOT_AVAILABLE is none: the broker keeps the directory for the replica a
    reassignment is about to add)."""

    replicas: frozenset[tuple[TopicPartition, int]]
    refused: Mapping[tuple[TopicPartition, int], str] = attrs.field(factory=dict)


@attrs.frozen
class LeadersElected:
    """The answer to ElectPreferred: per partition ``elected``, ``not needed`` or the
    error."""

    results: Mapping[TopicPartition, str]


Input = (
    ClusterObserved
    | ThrottlesRead
    | ThrottlesSet
    | ThrottlesRemoved
    | Submitted
    | CancelSent
    | CancelRequested
    | TargetChangeRequested
    | ConfigChanged
    | LeadersElected
    | LogDirsAltered
)

# ---------------------------------------------------------------------- actions


@attrs.frozen(kw_only=True)
class ReadThrottles:
    """DescribeConfigs: the throttle rates set on ``brokers`` themselves and the
    throttled replica lists of ``topics``, to be restored exactly afterwards."""

    topics: tuple[str, ...]
    brokers: tuple[int, ...]


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
    """SUBTRACT the entries SetThrottles appended (only those: entries that were
    there before stay), and put each broker's rates back: SET to what the operator had
    set, or DELETE when nothing was set on the broker itself."""

    leader_replicas: Mapping[str, tuple[str, ...]]
    follower_replicas: Mapping[str, tuple[str, ...]]
    #: Broker -> rate key -> the value to restore (None: delete).
    rates: Mapping[int, Mapping[str, str | None]]
    #: Topic -> the list keys that held no entries before this run. Kafka keeps a
    #: list it was asked to SUBTRACT down to nothing as an empty value, so once the
    #: entries are gone such a key is DELETEd, leaving the topic as it was.
    absent_before: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)

    @property
    def brokers(self) -> tuple[int, ...]:
        return tuple(sorted(self.rates))


@attrs.frozen
class AlterLogDirs:
    """AlterReplicaLogDirs: move each ``(partition, broker)`` replica to a directory."""

    dirs: Mapping[tuple[TopicPartition, int], str]


@attrs.frozen
class ElectPreferred:
    """ElectLeaders (preferred) for moves that ended with another leader."""

    partitions: tuple[TopicPartition, ...]


@attrs.frozen
class Submit:
    """AlterPartitionReassignments with these targets."""

    targets: Mapping[TopicPartition, tuple[int, ...]]


@attrs.frozen
class Cancel:
    """AlterPartitionReassignments with a null target for these partitions."""

    partitions: tuple[TopicPartition, ...]


Action = (
    ReadThrottles | SetThrottles | RemoveThrottles | Submit | Cancel | ElectPreferred | AlterLogDirs
)

#: The broker rates a throttle sets (and restores).
RATE_KEYS: Final = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
#: The topic lists a throttle appends to (and subtracts from).
LIST_KEYS: Final = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


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
    """The rule for a reassignment that changes in flight: of the assigned
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
    #: The plan's original replicas when the cluster showed others at submission
    #: (the move then records what was really there, for cancel and rollback).
    planned_original: tuple[int, ...] | None = None
    #: The preferred-leader election after the move: "elected", "not needed", an error.
    election: str | None = None
    #: Brokers whose log directory could not be set (the error): not waited for.
    dir_errors: dict[int, str] = attrs.Factory(dict)

    @property
    def end_target(self) -> tuple[int, ...]:
        return self.final_target or self.target

    @property
    def brokers(self) -> frozenset[int]:
        """The brokers the move copies into or out of (disk moves included)."""
        moved = frozenset(self.end_target).symmetric_difference(self.move.original_replicas)
        return moved | frozenset(self.wanted_dirs)

    @property
    def wanted_dirs(self) -> dict[int, str]:
        """Broker -> directory still required (not given up on)."""
        return {b: d for b, d in self.move.target_dirs.items() if b not in self.dir_errors}

    @property
    def changes_brokers(self) -> bool:
        return set(self.target) != set(self.move.original_replicas) or bool(self.final_target)


@attrs.define
class _Throttles:
    """The throttles of this run: what to set, and what was there before."""

    leader: dict[str, tuple[str, ...]]
    follower: dict[str, tuple[str, ...]]
    brokers: tuple[int, ...]
    #: Broker -> rate key -> the value set on the broker itself before (None: none).
    saved_rates: dict[int, dict[str, str | None]] | None = None
    #: Topic -> list key -> entries that were there before (they stay after).
    saved_lists: dict[str, dict[str, tuple[str, ...]]] | None = None

    def added(self, key: str) -> dict[str, tuple[str, ...]]:
        """The entries this run adds under ``key`` (not those that were there)."""
        mine = self.leader if key == LIST_KEYS[0] else self.follower
        before = self.saved_lists or {}
        out = {}
        for topic, entries in mine.items():
            had = before.get(topic, {}).get(key, ())
            if "*" in had:
                continue  # every replica of the topic is throttled already
            extra = tuple(e for e in entries if e not in had)
            if extra:
                out[topic] = extra
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "leader": {t: list(v) for t, v in self.leader.items()},
            "follower": {t: list(v) for t, v in self.follower.items()},
            "brokers": list(self.brokers),
            "saved_rates": None
            if self.saved_rates is None
            else {str(b): dict(v) for b, v in self.saved_rates.items()},
            "saved_lists": None
            if self.saved_lists is None
            else {t: {k: list(v) for k, v in keys.items()} for t, keys in self.saved_lists.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> _Throttles:
        rates = data.get("saved_rates")
        lists = data.get("saved_lists")
        return cls(
            leader={t: tuple(v) for t, v in data["leader"].items()},
            follower={t: tuple(v) for t, v in data["follower"].items()},
            brokers=tuple(int(b) for b in data["brokers"]),
            saved_rates=None if rates is None else {int(b): dict(v) for b, v in rates.items()},
            saved_lists=None
            if lists is None
            else {t: {k: tuple(v) for k, v in keys.items()} for t, keys in lists.items()},
        )


class ExecutorCore:
    """One plan's progress and the window's decisions.

    Call :meth:`start` once per run (a resumed one too), then :meth:`handle` with each
    input; both return the actions to carry out in order. Nothing is submitted before
    the first :class:`ClusterObserved` of a run, so a resumed executor first learns
    what the broker already has. Larger moves go first (bytes to copy, descending;
    then topic and partition): a long move started last would end last, after
    everything else.

    A partition another tool is moving (the cluster shows a reassignment this executor
    did not submit) is left alone and reported (``MoveState.CONFLICT``), unless
    ``config.override``. Each move's original replicas are re-read from the cluster
    when it is submitted, so a cancel or a rollback goes back to what was really there.
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
        self._reading_throttles = False
        self._throttles: _Throttles | None = None
        #: Directory moves decided in this input, sent as one AlterLogDirs.
        self._dirs_batch: dict[tuple[TopicPartition, int], str] = {}
        # The type of the input being handled: the row ``_to`` checks a move against.
        self._input: type = Outside
        self.started_at: float | None = None
        self.finished_at: float | None = None

    # ------------------------------------------------------------------ reading

    def state_of(self, tp: TopicPartition) -> MoveState:
        return self._moves[tp].state

    def target_of(self, tp: TopicPartition) -> tuple[int, ...]:
        return self._moves[tp].end_target

    def original_of(self, tp: TopicPartition) -> tuple[int, ...]:
        """The original replicas: as the cluster showed them at submission (the plan's
        until then)."""
        return self._moves[tp].move.original_replicas

    def submissions_of(self, tp: TopicPartition) -> int:
        return self._moves[tp].submissions

    def election_of(self, tp: TopicPartition) -> str | None:
        return self._moves[tp].election

    def moves(self) -> list[tuple[PartitionMove, MoveState, str | None]]:
        return [(m.move, m.state, m.error) for m in self._moves.values()]

    @property
    def finished(self) -> bool:
        return self.phase is Phase.FINISHED

    @property
    def saved_throttles(self) -> Mapping[int, Mapping[str, str | None]] | None:
        """The brokers' own throttle rates before this run (None: not read yet)."""
        if self._throttles is None or self._throttles.saved_rates is None:
            return None
        return MappingProxyType(self._throttles.saved_rates)

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
        self._reading_throttles = False
        if self.started_at is None:
            self.started_at = now
        throttles = self._throttles
        if (
            self.phase is Phase.THROTTLING
            and throttles is not None
            and throttles.saved_rates is not None
        ):
            return [self._set_throttles()]  # read before: set (again, idempotent)
        if self.phase is Phase.UNTHROTTLING:
            return [self._remove_throttles()]
        return []

    def handle(self, event: Input, now: float) -> list[Action]:
        """Apply one input; the actions it leads to. ``ReassignmentError`` for a
        request refused (state unchanged); ``TypeError`` for an unknown input."""
        handler = _HANDLERS.get(type(event))
        if handler is None:
            raise TypeError(f"not an executor input: {event!r}")
        self._dirs_batch = {}
        self._input = type(event)
        try:
            actions = handler(self, event, now)
        finally:
            self._input = Outside
        if self._dirs_batch:
            actions.append(AlterLogDirs(MappingProxyType(self._dirs_batch)))
            self._dirs_batch = {}
        return actions

    def _on_throttles_read(self, event: ThrottlesRead, now: float) -> list[Action]:
        self._reading_throttles = False
        if self.phase is not Phase.THROTTLING or self._throttles is None:
            return []
        # A broker that is down copies nothing: its rates are neither set nor restored.
        self._throttles.brokers = tuple(
            b for b in self._throttles.brokers if b not in event.unreachable
        )
        self._throttles.saved_rates = {
            b: {k: event.rates.get(b, {}).get(k) for k in RATE_KEYS}
            for b in self._throttles.brokers
        }
        self._throttles.saved_lists = {
            t: {k: tuple(event.replicas.get(t, {}).get(k, ())) for k in LIST_KEYS}
            for t in sorted(set(self._throttles.leader) | set(self._throttles.follower))
        }
        return [self._set_throttles()]

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
        finished: list[TopicPartition] = []
        for tp, m in self._moves.items():
            if m.state in TERMINAL:
                continue
            seen = event.partitions.get(tp)
            if seen is None:
                self._to(m, MoveState.FAILED, now, error="the partition no longer exists")
                continue
            self._reconcile(m, seen, now, resubmit)
            if m.state is MoveState.DONE and m.submissions and seen.leader != m.end_target[0]:
                finished.append(tp)
        if resubmit:
            actions.append(Submit(resubmit))
        if event.throttle_rates is not None and self._throttles_lost(event.throttle_rates):
            # Another tool changed or removed our rates while moves still copy (Kafka's
            # kafka-reassign-partitions --verify deletes every broker's rates once its
            # own moves end): set them, and our replica entries, again.
            actions.append(self._set_throttles())
        if finished and self.config.elect_preferred_leaders:
            actions.append(ElectPreferred(tuple(finished)))
        if self.phase is Phase.THROTTLING and self._throttles is None:
            self._throttles = self._throttle_entries()
            if not self._throttles.brokers:
                self._throttles = None  # nothing is copied: nothing to throttle
                self.phase = Phase.RUNNING
        if (
            self.phase is Phase.THROTTLING
            and self._throttles is not None
            and self._throttles.saved_rates is None
            and not self._reading_throttles
        ):
            self._reading_throttles = True
            topics = sorted(set(self._throttles.leader) | set(self._throttles.follower))
            actions.append(ReadThrottles(topics=tuple(topics), brokers=self._throttles.brokers))
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
            if not seen.reassigning and on == set(m.target) and self._dirs_done(m, seen):
                self._to(m, MoveState.DONE, now)  # nothing to move
            elif seen.reassigning and not self.config.override:
                self._conflict(m, seen, now)
            return
        if seen.reassigning:
            ours = set(seen.target) == set(m.target)
            if m.state is MoveState.SUBMITTING:
                if ours or self.config.override:
                    self._to(m, MoveState.IN_FLIGHT, now)
                else:
                    self._conflict(m, seen, now)  # never reached the broker: another tool's
            elif m.state is MoveState.IN_FLIGHT and not ours and not m.reverting:
                # Someone replaced this move's target: not ours to fight over.
                self._conflict(m, seen, now)
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
                # drop the old ones the interim kept (the in-flight change's second step).
                m.target, m.final_target = m.final_target, None
                self._submit_one(m, now, resubmit)
            elif self._dirs_done(m, seen):
                self._to(m, MoveState.DONE, now)
            elif m.state is MoveState.SUBMITTING and not seen.future_dirs:
                self._to(m, MoveState.QUEUED, now)  # the disk move never reached a broker
            else:
                if m.state is MoveState.SUBMITTING:
                    self._to(m, MoveState.IN_FLIGHT, now)
                # A replica in the wrong directory with no copy under way (created
                # before its broker learnt the directory): ask again.
                for b, d in m.wanted_dirs.items():
                    if (seen.log_dirs or {}).get(b) != d and b not in seen.future_dirs:
                        self._dirs_batch[(m.move.tp, b)] = d
            return
        if m.state is MoveState.SUBMITTING:
            # Decided but never seen by the broker (the executor stopped in between).
            self._to(m, MoveState.QUEUED, now)
            return
        if on > set(m.target) and on != set(m.move.original_replicas):
            return  # finished, but Metadata still lists the removed replicas: look again
        self._to(m, MoveState.CANCELLED, now, error="reverted outside this executor")

    @staticmethod
    def _dirs_done(m: _Move, seen: ObservedPartition) -> bool:
        wanted = m.wanted_dirs
        if not wanted:
            return True
        if seen.log_dirs is None:
            return False
        return all(
            seen.log_dirs.get(b) == d and b not in seen.future_dirs for b, d in wanted.items()
        )

    def _on_log_dirs_altered(self, event: LogDirsAltered, now: float) -> list[Action]:
        for tp, broker in event.replicas:
            m = self._moves.get(tp)
            if m is None or m.state in TERMINAL:
                continue
            reason = event.refused.get((tp, broker))
            if reason is not None:
                m.dir_errors[broker] = reason
                if not m.changes_brokers and not m.wanted_dirs:
                    self._to(m, MoveState.FAILED, now, error=reason)
                    continue
            if m.state is MoveState.SUBMITTING and not m.changes_brokers:
                self._to(m, MoveState.IN_FLIGHT, now)
        return self._fill(now)

    def _conflict(self, m: _Move, seen: ObservedPartition, now: float) -> None:
        self._to(
            m,
            MoveState.CONFLICT,
            now,
            error=f"another tool is moving it ({seen.describe()}); left alone "
            "(override takes it over)",
        )

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

    def _on_leaders_elected(self, event: LeadersElected, now: float) -> list[Action]:
        for tp, result in event.results.items():
            m = self._moves.get(tp)
            if m is not None:
                m.election = result
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

    def _on_config_changed(self, event: ConfigChanged, now: float) -> list[Action]:
        old, new = self.config, event.config
        self.config = new
        actions: list[Action] = []
        running = self.phase in (Phase.THROTTLING, Phase.RUNNING)
        if running and old.throttle_bytes_per_s != new.throttle_bytes_per_s:
            if new.throttle_bytes_per_s is None:
                if self._throttles is not None and self._throttles.saved_rates is not None:
                    actions.append(self._remove_throttles())
                self._throttles = None
                self.phase = Phase.RUNNING
            elif self._throttles is not None and self._throttles.saved_rates is not None:
                actions.append(self._set_throttles())  # the same entries, the new rate
            else:
                self.phase = Phase.THROTTLING  # read first, then set, then go on
                self._observed_this_run = False  # the next observation reads them
        return actions + self._fill(now)

    # ------------------------------------------------------------------ window

    def _fill(self, now: float) -> list[Action]:
        if self.phase is not Phase.RUNNING or not self._observed_this_run:
            return []
        active = [m for m in self._moves.values() if m.state in ACTIVE]
        count = len(active)
        in_bytes = sum(m.move.bytes_to_move for m in active)
        cap = self.config.max_moves_per_broker
        per_broker: dict[int, int] = {}
        for m in active:
            for b in m.brokers:
                per_broker[b] = per_broker.get(b, 0) + 1
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
            involved = self._would_involve(m)
            if cap is not None and any(per_broker.get(b, 0) >= cap for b in involved):
                # A busy broker holds this move only: moves on other brokers go on, and
                # the first one waiting for that broker gets its next free slot.
                continue
            self._submit_one(m, now, batch)
            for b in involved:
                per_broker[b] = per_broker.get(b, 0) + 1
            count += 1
            in_bytes += size
        if batch:
            return [Submit(batch)]
        if count == 0 and all(m.state in TERMINAL for m in self._moves.values()):
            if self._throttles is not None and self._throttles.saved_rates is not None:
                self.phase = Phase.UNTHROTTLING
                return [self._remove_throttles()]
            self.phase = Phase.FINISHED
            self.finished_at = now
        return []

    def _would_involve(self, m: _Move) -> frozenset[int]:
        seen = self._observed.get(m.move.tp)
        original = seen.original if seen is not None else m.move.original_replicas
        return frozenset(m.end_target).symmetric_difference(original) | frozenset(m.wanted_dirs)

    def _submit_one(
        self, m: _Move, now: float, into: dict[TopicPartition, tuple[int, ...]]
    ) -> None:
        if m.state is MoveState.QUEUED:
            # Re-read the original replicas at submission: a cancel (Kafka reverts to
            # what was there) and a rollback must agree with the cluster, not the plan.
            seen = self._observed.get(m.move.tp)
            if seen is not None and seen.original != m.move.original_replicas:
                if m.planned_original is None:
                    m.planned_original = m.move.original_replicas
                m.move = attrs.evolve(m.move, original_replicas=seen.original)
        if m.state is not MoveState.SUBMITTING:
            self._to(m, MoveState.SUBMITTING, now)
        if m.started_at is None:
            m.started_at = now
        m.submissions += 1
        if m.changes_brokers or m.reverting:
            into[m.move.tp] = m.target
        if not m.reverting:
            # Disks: a kept replica moves now; an added one's broker keeps the
            # directory until the reassignment creates the replica.
            for b, d in m.wanted_dirs.items():
                self._dirs_batch[(m.move.tp, b)] = d

    def _to(self, m: _Move, state: MoveState, now: float, *, error: str | None = None) -> None:
        check_move(
            MOVES,
            m.state,
            self._input,
            state,
            machine="move",
            detail=f"{m.move.topic}-{m.move.partition}",
        )
        m.state = state
        if error is not None:
            m.error = error
        if state in TERMINAL:
            m.finished_at = now
            m.reverting = False

    def _throttle_entries(self) -> _Throttles:
        """Leaders throttle the original replicas (as the cluster shows them now), the
        added replicas follow; every broker involved gets the rates."""
        leader: dict[str, list[str]] = {}
        follower: dict[str, list[str]] = {}
        brokers: set[int] = set()
        for m in self._moves.values():
            if m.state in TERMINAL:
                continue
            seen = self._observed.get(m.move.tp)
            original = seen.original if seen is not None else m.move.original_replicas
            adding = [r for r in m.end_target if r not in original]
            if not adding:
                continue
            leader.setdefault(m.move.topic, []).extend(f"{m.move.partition}:{b}" for b in original)
            follower.setdefault(m.move.topic, []).extend(f"{m.move.partition}:{b}" for b in adding)
            brokers.update(original)
            brokers.update(m.end_target)
        return _Throttles(
            leader={t: tuple(v) for t, v in leader.items()},
            follower={t: tuple(v) for t, v in follower.items()},
            brokers=tuple(sorted(brokers)),
        )

    def throttled_brokers(self) -> tuple[int, ...]:
        """The brokers whose rates this run has set and still needs (empty when it
        throttles nothing now): the driver reads their rates now and then and reports
        them in :class:`ClusterObserved`, so rates another tool removed are set again."""
        if (
            self.phase is not Phase.RUNNING
            or self.config.throttle_bytes_per_s is None
            or self._throttles is None
            or self._throttles.saved_rates is None
            or not any(m.state in ACTIVE for m in self._moves.values())
        ):
            return ()
        return tuple(sorted(self._throttles.saved_rates))

    def _throttles_lost(self, rates: Mapping[int, Mapping[str, str | None]]) -> bool:
        wanted = str(self.config.throttle_bytes_per_s)
        return any(
            rates[b].get(key) != wanted
            for b in self.throttled_brokers()
            if b in rates
            for key in RATE_KEYS
        )

    def _set_throttles(self) -> SetThrottles:
        assert self._throttles is not None
        rate = self.config.throttle_bytes_per_s
        assert rate is not None
        return SetThrottles(
            rate=rate,
            leader_replicas=MappingProxyType(self._throttles.added(LIST_KEYS[0])),
            follower_replicas=MappingProxyType(self._throttles.added(LIST_KEYS[1])),
            brokers=self._throttles.brokers,
        )

    def _remove_throttles(self) -> RemoveThrottles:
        assert self._throttles is not None
        assert self._throttles.saved_rates is not None
        leader = self._throttles.added(LIST_KEYS[0])
        follower = self._throttles.added(LIST_KEYS[1])
        saved = self._throttles.saved_lists or {}
        absent: dict[str, tuple[str, ...]] = {}
        for key, added in zip(LIST_KEYS, (leader, follower), strict=True):
            for topic in added:
                if not saved.get(topic, {}).get(key, ()):
                    absent[topic] = (*absent.get(topic, ()), key)
        return RemoveThrottles(
            leader_replicas=MappingProxyType(leader),
            follower_replicas=MappingProxyType(follower),
            rates=MappingProxyType(
                {b: MappingProxyType(dict(v)) for b, v in self._throttles.saved_rates.items()}
            ),
            absent_before=MappingProxyType(absent),
        )

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """Everything a restarted executor needs, as JSON-ready data."""
        return {
            "version": STATE_VERSION,
            "plan": self.plan.to_dict(),
            "config": self.config.to_dict(),
            "phase": self.phase.value,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "throttles": None if self._throttles is None else self._throttles.to_dict(),
            "moves": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "state": m.state.value,
                    "replicas": list(m.move.replicas),
                    "original_replicas": list(m.move.original_replicas),
                    "planned_original": None
                    if m.planned_original is None
                    else list(m.planned_original),
                    "target": list(m.target),
                    "final_target": None if m.final_target is None else list(m.final_target),
                    "reverting": m.reverting,
                    "error": m.error,
                    "election": m.election,
                    "dir_errors": {str(b): e for b, e in m.dir_errors.items()},
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
            throttles = data.get("throttles")
            core._throttles = None if throttles is None else _Throttles.from_dict(throttles)
            for entry in data["moves"]:
                m = core._moves[TopicPartition(entry["topic"], int(entry["partition"]))]
                m.state = MoveState(entry["state"])
                m.target = tuple(entry["target"])
                final = entry.get("final_target")
                m.final_target = None if final is None else tuple(final)
                m.reverting = bool(entry.get("reverting", False))
                m.error = entry.get("error")
                m.election = entry.get("election")
                m.dir_errors = {int(b): e for b, e in entry.get("dir_errors", {}).items()}
                m.started_at = entry.get("started_at")
                m.finished_at = entry.get("finished_at")
                m.submissions = int(entry.get("submissions", 0))
                planned = entry.get("planned_original")
                m.planned_original = None if planned is None else tuple(planned)
                m.move = attrs.evolve(
                    m.move,
                    replicas=tuple(entry["replicas"]),
                    original_replicas=tuple(
                        entry.get("original_replicas", m.move.original_replicas)
                    ),
                )
        except (KeyError, TypeError, ValueError, PlanError, ConfigurationError) as exc:
            raise ReassignmentError(f"malformed executor state: {exc!r}") from exc
        return core

    def rollback_plan(self) -> ReassignmentPlan:
        """The moves that finished, taken back to their original replicas (as the
        cluster showed them when each move was submitted)."""
        done = [m.move.reversed() for m in self._moves.values() if m.state is MoveState.DONE]
        return ReassignmentPlan(moves=done, description=f"rollback of: {self.plan.description}")


Handler = Callable[[ExecutorCore, Any, float], list[Action]]

#: Every input type and its handler.
_HANDLERS: Final[Mapping[type, Handler]] = MappingProxyType(
    {
        ClusterObserved: ExecutorCore._on_observed,
        ThrottlesRead: ExecutorCore._on_throttles_read,
        ThrottlesSet: ExecutorCore._on_throttles_set,
        ThrottlesRemoved: ExecutorCore._on_throttles_removed,
        Submitted: ExecutorCore._on_submitted,
        CancelSent: ExecutorCore._on_cancel_sent,
        CancelRequested: ExecutorCore._on_cancel_requested,
        TargetChangeRequested: ExecutorCore._on_target_change,
        ConfigChanged: ExecutorCore._on_config_changed,
        LeadersElected: ExecutorCore._on_leaders_elected,
        LogDirsAltered: ExecutorCore._on_log_dirs_altered,
    }
)

#: Every input type, for the test that checks the table is complete.
INPUT_TYPES: Final = tuple(_HANDLERS)

_Q, _S, _I, _C = MoveState.QUEUED, MoveState.SUBMITTING, MoveState.IN_FLIGHT, MoveState.CANCELLING
_D, _X, _F, _K = MoveState.DONE, MoveState.CANCELLED, MoveState.FAILED, MoveState.CONFLICT

#: Where one input may move one partition's move (``ExecutorCore._to`` checks every
#: move against it; the predecessors of a state are derived from it, never written).
#: Every input that leaves room in the window may submit queued moves (``_fill``).
MOVES: Final = build_moves(
    [
        ((_Q,), ThrottlesSet, (_S,)),
        ((_Q,), ConfigChanged, (_S,)),
        # What the cluster shows settles every live move (``_reconcile``); a
        # partition that is gone fails, another tool's reassignment is a conflict.
        ((_Q,), ClusterObserved, (_S, _D, _F, _K)),
        ((_S,), ClusterObserved, (_Q, _I, _D, _X, _F, _K)),
        ((_I,), ClusterObserved, (_S, _D, _X, _F, _K)),
        ((_C,), ClusterObserved, (_S, _D, _X, _F)),
        ((_Q,), Submitted, (_S,)),
        ((_S,), Submitted, (_I, _F)),
        ((_Q,), LogDirsAltered, (_S, _F)),
        ((_S,), LogDirsAltered, (_I, _F)),
        ((_I, _C), LogDirsAltered, (_F,)),
        ((_Q,), CancelRequested, (_S, _X)),
        ((_S, _I), CancelRequested, (_C,)),
        ((_Q, _I), TargetChangeRequested, (_S,)),
    ]
)
