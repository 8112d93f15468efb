"""The healer's decisions, sans-I/O: failure discovery and mitigation in
chunks through the reassignment executor's core.

:class:`HealerCore` takes what the cluster shows (:class:`ClusterSeen`) and the
results of the executor actions it asked for, and returns actions: executor actions
for the running chunk, and :class:`Store` records for the state topic (one key per
failure and per chunk; None deletes). Time is an argument: wall-clock seconds, since
first-seen times outlive the process. See docs/admin.md, "Healing after a broker
failure".

Pure: imports the standard library, attrs, the assignor contract and the
reassignment plan/executor cores; never ``socket``, ``threading``, ``time`` or the
admin client.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs

from ..._errors import ConfigurationError, CoopConsumerError
from ..._transition_table import Outside, build_moves, check_move
from ..._types import TopicPartition
from .._replica_assignor import BrokerLoad, ClusterView, ReplicaAssignor
from ..reassign._executor import (
    Action as ExecutorAction,
)
from ..reassign._executor import (
    ClusterObserved,
    ExecutorConfig,
    ExecutorCore,
    MoveState,
    ObservedPartition,
    ReassignmentError,
)
from ..reassign._executor import (
    Input as ExecutorInput,
)
from ..reassign._plan import PlanError, plan_move_off

__all__ = [
    "Alert",
    "ChunkAction",
    "ChunkResult",
    "ChunkState",
    "ClusterSeen",
    "HealConfig",
    "HealerCore",
    "HealerError",
    "Store",
    "parse_heal_config",
]

#: ``heal.failure.interval.ms`` default: 30 minutes, the design's suggestion.
DEFAULT_FAILURE_INTERVAL_MS: Final = 30 * 60 * 1000
#: ``heal.chunk.size`` default.
DEFAULT_CHUNK_SIZE: Final = 10
#: ``heal.retry.backoff.ms`` and ``heal.retry.backoff.max.ms`` defaults.
DEFAULT_RETRY_BACKOFF_MS: Final = 30_000
DEFAULT_RETRY_BACKOFF_MAX_MS: Final = 10 * 60 * 1000


class HealerError(CoopConsumerError):
    """Stored healer state that cannot be read, or an input that makes no sense."""


def _positive(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is None and attribute.name == "throttle_bytes_per_s":
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{attribute.name} must be an int >= 1, not {value!r}")


def _flag(instance: object, attribute: attrs.Attribute[Any], value: bool) -> None:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{attribute.name} must be True or False, not {value!r}")


@attrs.frozen(kw_only=True)
class HealConfig:
    """``heal.failure.interval.ms``: absent longer than this = failed;
    ``heal.chunk.size``: partitions per chunk; ``heal.throttle.bytes.per.s``: the
    executor's replication throttle per chunk (None: none);
    ``heal.retry.backoff.ms`` / ``heal.retry.backoff.max.ms``: how long a chunk's
    unhealed partitions wait before they are tried again (doubling per attempt, up to
    the maximum); ``heal.elect.preferred.leaders``: a preferred-leader election after
    moves that end with another leader."""

    failure_interval_ms: int = attrs.field(default=DEFAULT_FAILURE_INTERVAL_MS, validator=_positive)
    chunk_size: int = attrs.field(default=DEFAULT_CHUNK_SIZE, validator=_positive)
    throttle_bytes_per_s: int | None = attrs.field(default=None, validator=_positive)
    retry_backoff_ms: int = attrs.field(default=DEFAULT_RETRY_BACKOFF_MS, validator=_positive)
    retry_backoff_max_ms: int = attrs.field(
        default=DEFAULT_RETRY_BACKOFF_MAX_MS, validator=_positive
    )
    elect_preferred_leaders: bool = attrs.field(default=False, validator=_flag)

    def backoff_s(self, attempt: int) -> float:
        """Seconds before attempt ``attempt + 1`` (attempt 1 is the first)."""
        ms = min(self.retry_backoff_max_ms, self.retry_backoff_ms * (1 << max(0, attempt - 1)))
        return ms / 1000.0


_KEYS: Final = {
    "heal.failure.interval.ms": "failure_interval_ms",
    "heal.chunk.size": "chunk_size",
    "heal.throttle.bytes.per.s": "throttle_bytes_per_s",
    "heal.retry.backoff.ms": "retry_backoff_ms",
    "heal.retry.backoff.max.ms": "retry_backoff_max_ms",
    "heal.elect.preferred.leaders": "elect_preferred_leaders",
}
_BOOL_KEYS: Final = frozenset({"heal.elect.preferred.leaders"})


def parse_heal_config(settings: Mapping[str, object]) -> HealConfig:
    """The ``heal.*`` keys of ``settings`` (others are ignored: they are the
    client's). ``ConfigurationError`` names a bad value or an unknown ``heal.`` key."""
    values: dict[str, int | bool] = {}
    for key, value in settings.items():
        if not key.startswith("heal."):
            continue
        if key not in _KEYS:
            raise ConfigurationError(f"unknown healer key {key!r}; known: {sorted(_KEYS)}")
        if key in _BOOL_KEYS:
            text = str(value).strip().lower()
            if text not in ("true", "false"):
                raise ConfigurationError(f"{key} must be true or false, not {value!r}")
            values[_KEYS[key]] = text == "true"
            continue
        try:
            values[_KEYS[key]] = int(str(value))
        except ValueError:
            raise ConfigurationError(f"{key} must be an integer, not {value!r}") from None
    return HealConfig(**values)  # type: ignore[arg-type]


class ChunkState(enum.Enum):
    """Where one chunk of a failed broker's partitions is."""

    #: Waits for the chunk before it.
    QUEUED = "queued"
    #: Its moves run through its executor.
    RUNNING = "running"
    #: Every move's new replicas joined the ISR (the reassignments completed).
    DONE = "done"
    #: Nothing left to move when its turn came (already at full replication).
    SKIPPED = "skipped"
    #: The failed broker returned before it started.
    CANCELLED = "cancelled"


_FINISHED: Final = frozenset({ChunkState.DONE, ChunkState.SKIPPED, ChunkState.CANCELLED})


@attrs.frozen
class ClusterSeen:
    """Live brokers (id -> rack) and every partition as the cluster shows them now;
    ``sizes`` (bytes per partition) and ``storage`` (each live broker's storage and
    disks, from DescribeLogDirs) when known. The assignor gets the storage figures."""

    live: Mapping[int, str | None]
    partitions: Mapping[TopicPartition, ObservedPartition]
    sizes: Mapping[TopicPartition, int] = attrs.field(factory=dict)
    storage: Mapping[int, BrokerLoad] = attrs.field(factory=dict)


@attrs.frozen
class ChunkResult:
    """The result of a :class:`ChunkAction`, for that chunk's executor."""

    chunk_id: str
    event: ExecutorInput


HealerInput = ClusterSeen | ChunkResult

#: Where one input may move a chunk (``HealerCore._chunk_to`` checks every move against
#: it; the predecessors of a state are derived from it, never written). An observation
#: starts, skips or cancels the next queued chunk and may finish the running one; an
#: executor's answer may finish it too.
CHUNK_MOVES: Final = build_moves(
    [
        (
            (ChunkState.QUEUED,),
            ClusterSeen,
            (ChunkState.RUNNING, ChunkState.SKIPPED, ChunkState.CANCELLED),
        ),
        ((ChunkState.RUNNING,), ClusterSeen, (ChunkState.DONE,)),
        ((ChunkState.RUNNING,), ChunkResult, (ChunkState.DONE,)),
    ]
)


@attrs.frozen
class ChunkAction:
    """Carry out an executor action for a chunk, then feed its result back as a
    :class:`ChunkResult`."""

    chunk_id: str
    action: ExecutorAction


@attrs.frozen
class Store:
    """Write ``value`` under ``key`` in the state topic (None: a tombstone)."""

    key: str
    value: Mapping[str, Any] | None


@attrs.frozen
class Alert:
    """Something an operator must hear about (partitions left under-replicated); the
    driver logs it at ERROR level, and the state records keep it for ``heal status``."""

    message: str


HealerAction = ChunkAction | Store | Alert


@attrs.define
class _Chunk:
    chunk_id: str
    broker: int
    partitions: tuple[TopicPartition, ...]
    state: ChunkState = ChunkState.QUEUED
    executor: ExecutorCore | None = None
    error: str | None = None
    #: 1 for a first try; a retry chunk of the unhealed partitions counts on.
    attempt: int = 1
    #: Not started before (a retry's backoff), wall-clock seconds.
    not_before: float | None = None
    #: When done: the partitions it did not heal, and why.
    unhealed: dict[str, str] = attrs.Factory(dict)
    #: Partitions another tool was moving when the chunk started (left alone).
    left_alone: dict[str, str] = attrs.Factory(dict)

    def record(self) -> dict[str, Any]:
        return {
            "broker": self.broker,
            "partitions": [[tp.topic, tp.partition] for tp in self.partitions],
            "state": self.state.value,
            "executor": None if self.executor is None else self.executor.to_dict(),
            "error": self.error,
            "attempt": self.attempt,
            "not_before": self.not_before,
            "unhealed": dict(self.unhealed),
            "left_alone": dict(self.left_alone),
        }


class HealerCore:
    """Failure discovery and chunked mitigation.

    A broker absent from the cluster (not live, yet named by a replica or already
    tracked) gets a first-seen time; absent ``failure_interval_ms`` later it is
    failed, its partitions are split into chunks of ``chunk_size`` (by topic and
    partition), and the chunks run one after another. When a chunk starts, its
    targets are computed from the cluster at that moment with ``assignor``, which
    sees the brokers' replica counts and storage (never on a dead broker, never two
    replicas on one broker); partitions with no replica left on a failed broker are
    skipped, a chunk with none is SKIPPED, and partitions another tool is moving are
    left alone. When a chunk ends, the partitions it did not heal (a move refused,
    reverted, taken over, or left alone) go into a retry chunk that waits
    ``retry_backoff_ms`` (doubling per attempt up to ``retry_backoff_max_ms``), with
    an :class:`Alert`. A failed broker that returns cancels its queued chunks; a
    running chunk finishes. A broker that returns within the interval triggers nothing.
    """

    def __init__(self, config: HealConfig, assignor: ReplicaAssignor) -> None:
        self.config = config
        self.assignor = assignor
        #: Broker -> when it was first seen absent.
        self._absent: dict[int, float] = {}
        self._failed: set[int] = set()
        self._chunks: dict[str, _Chunk] = {}
        self._stored: dict[str, Mapping[str, Any]] = {}
        self._last: ClusterSeen | None = None
        self._resumed: set[str] = set()
        #: The latest partition sizes and broker storage seen (observations bring
        #: them only when a chunk is about to start).
        self._sizes: dict[TopicPartition, int] = {}
        self._storage: dict[int, BrokerLoad] = {}
        self.chunks_done_total = 0
        # The type of the input being handled: the row ``_chunk_to`` checks a move against.
        self._input: type = Outside

    # ------------------------------------------------------------------ reading

    @property
    def failed_brokers(self) -> frozenset[int]:
        return frozenset(self._failed)

    @property
    def absent_since(self) -> Mapping[int, float]:
        return MappingProxyType(dict(self._absent))

    def chunks(self) -> list[tuple[str, int, ChunkState, tuple[TopicPartition, ...]]]:
        return [(c.chunk_id, c.broker, c.state, c.partitions) for c in self._chunks.values()]

    def chunk_state(self, chunk_id: str) -> ChunkState:
        return self._chunks[chunk_id].state

    def retries(self) -> list[tuple[str, int, float | None, dict[str, str]]]:
        """Queued retry chunks: id, attempt, when they may start, why they exist."""
        return [
            (c.chunk_id, c.attempt, c.not_before, dict(c.unhealed or c.left_alone))
            for c in self._chunks.values()
            if c.attempt > 1 and c.state is ChunkState.QUEUED
        ]

    def focus(self, now: float) -> tuple[TopicPartition, ...]:
        """The partitions to look at closely now: the running chunk's, or those of the
        chunk that may start next (the driver describes only these between full
        views)."""
        running = self._running()
        if running is not None:
            return running.partitions
        ready = self._next_ready(now)
        return () if ready is None else ready.partitions

    def wants_storage(self, now: float) -> bool:
        """Whether a chunk may start now: it needs the brokers' storage and the sizes
        of its partitions (DescribeLogDirs) to be placed."""
        return self._running() is None and self._next_ready(now) is not None

    def due_brokers(self, now: float) -> frozenset[int]:
        """Absent brokers whose interval has passed but that are not failed yet:
        failing one needs every partition it hosts (a full view) and, for its first
        chunk, their sizes."""
        interval_s = self.config.failure_interval_ms / 1000.0
        return frozenset(
            b
            for b, since in self._absent.items()
            if b not in self._failed and now - since >= interval_s
        )

    def wants_full_view(self, now: float) -> bool:
        return bool(self.due_brokers(now))

    def metrics(self) -> dict[str, float]:
        """Gauges and totals for the exporters (``coopconsumer.metrics_export``)."""
        counts = dict.fromkeys(ChunkState, 0)
        moved = 0
        retried = 0
        for c in self._chunks.values():
            counts[c.state] += 1
            retried += c.attempt > 1
            if c.executor is not None:
                moved += c.executor.progress().bytes_done
        under = 0
        if self._last is not None:
            live = self._last.live
            under = sum(
                1
                for p in self._last.partitions.values()
                if len(p.isr) < len(p.replicas) or any(r not in live for r in p.replicas)
            )
        waiting = sum(
            len(c.partitions)
            for c in self._chunks.values()
            if c.attempt > 1 and c.state is ChunkState.QUEUED
        )
        return {
            "failed-brokers": float(len(self._failed)),
            "absent-brokers": float(len(self._absent)),
            "under-replicated-partitions": float(under),
            "chunks-queued": float(counts[ChunkState.QUEUED]),
            "chunks-running": float(counts[ChunkState.RUNNING]),
            "chunks-done-total": float(counts[ChunkState.DONE]),
            "chunks-skipped-total": float(counts[ChunkState.SKIPPED]),
            "chunks-cancelled-total": float(counts[ChunkState.CANCELLED]),
            "chunks-retried-total": float(retried),
            "partitions-awaiting-retry": float(waiting),
            "bytes-moved-total": float(moved),
        }

    # ------------------------------------------------------------------ inputs

    def handle(self, event: HealerInput, now: float) -> list[HealerAction]:
        """Apply one input; the actions, state-topic writes first: they must be
        durable before anything they record as decided is carried out."""
        self._input = type(event)
        try:
            if isinstance(event, ClusterSeen):
                actions = self._on_seen(event, now)
            elif isinstance(event, ChunkResult):
                actions = self._on_chunk_result(event, now)
            else:
                raise TypeError(f"not a healer input: {event!r}")
        finally:
            self._input = Outside
        stores = self._store_changes()
        alerts = [a for a in actions if isinstance(a, Alert)]
        return stores + alerts + [a for a in actions if not isinstance(a, Alert)]

    def _on_seen(self, seen: ClusterSeen, now: float) -> list[HealerAction]:
        self._last = seen
        self._sizes.update(seen.sizes)
        self._storage.update(seen.storage)
        self._discover(seen, now)
        actions: list[HealerAction] = []
        running = self._running()
        if running is not None:
            if running.chunk_id in self._resumed:
                # Restored from the state topic: the executor begins a new run.
                self._resumed.discard(running.chunk_id)
                assert running.executor is not None
                actions += [ChunkAction(running.chunk_id, a) for a in running.executor.start(now)]
            actions += self._feed(running, ClusterObserved(self._observed_for(running, seen)), now)
            if running.state is ChunkState.RUNNING:
                return actions
        return actions + self._start_next(seen, now)

    def _discover(self, seen: ClusterSeen, now: float) -> None:
        named = {r for p in seen.partitions.values() for r in p.replicas}
        for broker in sorted((named | set(self._absent) | self._failed) - set(seen.live)):
            self._absent.setdefault(broker, now)
        for broker in sorted(set(self._absent) & set(seen.live)):
            del self._absent[broker]
            if broker in self._failed:
                self._failed.discard(broker)
                for c in self._chunks.values():
                    if c.broker == broker and c.state is ChunkState.QUEUED:
                        self._chunk_to(c, ChunkState.CANCELLED)
        interval_s = self.config.failure_interval_ms / 1000.0
        for broker, since in sorted(self._absent.items()):
            if broker not in self._failed and now - since >= interval_s:
                self._failed.add(broker)
                self._queue_chunks(broker, seen, now)

    def _queue_chunks(self, broker: int, seen: ClusterSeen, now: float) -> None:
        hosted = sorted(tp for tp, p in seen.partitions.items() if broker in p.replicas)
        size = self.config.chunk_size
        stamp = int(now * 1000)
        for i in range(0, len(hosted), size):
            chunk_id = f"{broker}-{stamp}-{i // size:05d}"
            self._chunks[chunk_id] = _Chunk(
                chunk_id=chunk_id, broker=broker, partitions=tuple(hosted[i : i + size])
            )

    def _running(self) -> _Chunk | None:
        return next((c for c in self._chunks.values() if c.state is ChunkState.RUNNING), None)

    def _next_ready(self, now: float) -> _Chunk | None:
        for c in self._chunks.values():
            if c.state is ChunkState.QUEUED and (c.not_before is None or now >= c.not_before):
                return c
        return None

    def _view(self, seen: ClusterSeen) -> ClusterView:
        """What the assignor sees: live brokers with their replica and leader counts
        (from the partitions) and, when known, their storage and disks."""
        replicas = dict.fromkeys(seen.live, 0)
        leaders = dict.fromkeys(seen.live, 0)
        for p in seen.partitions.values():
            for r in p.replicas:
                if r in replicas:
                    replicas[r] += 1
            if p.leader in leaders:
                leaders[p.leader] += 1
        brokers = []
        for b, rack in seen.live.items():
            stored = self._storage.get(b)
            load = BrokerLoad(node_id=b, rack=rack) if stored is None else stored
            brokers.append(attrs.evolve(load, rack=rack, replicas=replicas[b], leaders=leaders[b]))
        return ClusterView(
            brokers=brokers,
            assignments={tp: p.replicas for tp, p in seen.partitions.items()},
        )

    def _start_next(self, seen: ClusterSeen, now: float) -> list[HealerAction]:
        actions: list[HealerAction] = []
        while True:
            c = self._next_ready(now)
            if c is None:
                return actions
            # Another tool's reassignment in flight: not ours to touch.
            others = {
                tp: seen.partitions[tp]
                for tp in c.partitions
                if tp in seen.partitions and seen.partitions[tp].reassigning
            }
            c.left_alone = {
                f"{tp.topic}:{tp.partition}": f"another tool is moving it ({p.describe()})"
                for tp, p in others.items()
            }
            view = self._view(seen)
            try:
                plan = plan_move_off(
                    view,
                    self._failed,
                    self.assignor,
                    sizes=self._sizes,
                    partitions=c.partitions,
                    skip=others,
                )
            except PlanError as exc:
                # Too few live brokers now; retried at the next observation.
                if c.error != str(exc):
                    actions.append(
                        Alert(f"cannot place chunk {c.chunk_id} of broker {c.broker}: {exc}")
                    )
                c.error = str(exc)
                return actions
            if not plan.moves:
                if others:
                    # Only partitions others are moving: try again later.
                    self._chunk_to(c, ChunkState.SKIPPED)
                    actions += self._retry(c, dict(c.left_alone), now)
                    continue
                self._chunk_to(c, ChunkState.SKIPPED)
                continue
            c.error = None
            c.executor = ExecutorCore(
                plan,
                ExecutorConfig(
                    max_partitions=self.config.chunk_size,
                    throttle_bytes_per_s=self.config.throttle_bytes_per_s,
                    elect_preferred_leaders=self.config.elect_preferred_leaders,
                ),
            )
            self._chunk_to(c, ChunkState.RUNNING)
            actions += [ChunkAction(c.chunk_id, a) for a in c.executor.start(now)]
            return actions + self._feed(c, ClusterObserved(self._observed_for(c, seen)), now)

    def _on_chunk_result(self, event: ChunkResult, now: float) -> list[HealerAction]:
        c = self._chunks.get(event.chunk_id)
        if c is None or c.state is not ChunkState.RUNNING:
            return []  # a late answer for a chunk that is over
        return self._feed(c, event.event, now)

    def _feed(self, c: _Chunk, event: ExecutorInput, now: float) -> list[HealerAction]:
        assert c.executor is not None
        try:
            actions = c.executor.handle(event, now)
        except ReassignmentError as exc:
            c.error = str(exc)
            return []
        out: list[HealerAction] = [ChunkAction(c.chunk_id, a) for a in actions]
        if c.executor.finished:
            self._chunk_to(c, ChunkState.DONE)
            out += self._finish(c, now)
        return out

    def _finish(self, c: _Chunk, now: float) -> list[HealerAction]:
        """A chunk ended: the partitions it did not heal are tried again later."""
        assert c.executor is not None
        unhealed = dict(c.left_alone)
        for move, state, error in c.executor.moves():
            if state is not MoveState.DONE:
                unhealed[f"{move.topic}:{move.partition}"] = f"{state.value}: {error or '-'}"
        seen = self._last
        if seen is not None:
            for tp in c.partitions:
                p = seen.partitions.get(tp)
                key = f"{tp.topic}:{tp.partition}"
                if p is not None and set(p.replicas) & self._failed and key not in unhealed:
                    unhealed[key] = "still has a replica on a failed broker"
        c.unhealed = unhealed
        return self._retry(c, unhealed, now) if unhealed else []

    def _retry(self, c: _Chunk, unhealed: Mapping[str, str], now: float) -> list[HealerAction]:
        partitions = tuple(
            TopicPartition(t, int(p)) for t, _, p in (key.rpartition(":") for key in unhealed)
        )
        attempt = c.attempt + 1
        wait = self.config.backoff_s(c.attempt)
        base = c.chunk_id.split(".r", 1)[0]
        retry = _Chunk(
            chunk_id=f"{base}.r{attempt}",
            broker=c.broker,
            partitions=tuple(sorted(partitions)),
            attempt=attempt,
            not_before=now + wait,
            left_alone=dict(unhealed),
        )
        self._chunks[retry.chunk_id] = retry
        first = next(iter(unhealed.items()))
        return [
            Alert(
                f"{len(unhealed)} partition(s) of failed broker {c.broker} not healed by "
                f"chunk {c.chunk_id} (attempt {c.attempt}), e.g. {first[0]}: {first[1]}; "
                f"retry {retry.chunk_id} in {wait:g} s"
            )
        ]

    @staticmethod
    def _observed_for(c: _Chunk, seen: ClusterSeen) -> dict[TopicPartition, ObservedPartition]:
        assert c.executor is not None
        wanted = c.executor.plan.by_partition()
        return {tp: p for tp, p in seen.partitions.items() if tp in wanted}

    def _chunk_to(self, c: _Chunk, state: ChunkState) -> None:
        check_move(
            CHUNK_MOVES, c.state, self._input, state, machine="chunk", detail=f"chunk {c.chunk_id}"
        )
        c.state = state
        if state is ChunkState.DONE:
            self.chunks_done_total += 1

    # ------------------------------------------------------------------ state topic

    def records(self) -> dict[str, Mapping[str, Any]]:
        """The whole state as state-topic records: ``failure/<broker>`` and
        ``chunk/<id>``."""
        out: dict[str, Mapping[str, Any]] = {}
        for broker, since in self._absent.items():
            out[f"failure/{broker}"] = {"first_seen": since, "failed": broker in self._failed}
        for c in self._chunks.values():
            out[f"chunk/{c.chunk_id}"] = c.record()
        return out

    def _store_changes(self) -> list[HealerAction]:
        now = self.records()
        writes: list[HealerAction] = [
            Store(key, value) for key, value in now.items() if self._stored.get(key) != value
        ]
        writes += [Store(key, None) for key in self._stored if key not in now]
        self._stored = now
        return writes

    @classmethod
    def from_records(
        cls,
        records: Mapping[str, Mapping[str, Any]],
        config: HealConfig,
        assignor: ReplicaAssignor,
    ) -> HealerCore:
        """A healer resuming from the state topic (the latest value per key)."""
        core = cls(config, assignor)
        try:
            for key, value in sorted(records.items()):
                kind, _, name = key.partition("/")
                if kind == "failure":
                    broker = int(name)
                    core._absent[broker] = float(value["first_seen"])
                    if value["failed"]:
                        core._failed.add(broker)
                elif kind == "chunk":
                    executor = value.get("executor")
                    core._chunks[name] = _Chunk(
                        chunk_id=name,
                        broker=int(value["broker"]),
                        partitions=tuple(TopicPartition(t, int(p)) for t, p in value["partitions"]),
                        state=ChunkState(value["state"]),
                        executor=None if executor is None else ExecutorCore.from_dict(executor),
                        error=value.get("error"),
                        attempt=int(value.get("attempt", 1)),
                        not_before=value.get("not_before"),
                        unhealed=dict(value.get("unhealed", {})),
                        left_alone=dict(value.get("left_alone", {})),
                    )
                else:
                    raise HealerError(f"unknown state key {key!r}")
        except (KeyError, TypeError, ValueError, ReassignmentError) as exc:
            raise HealerError(f"unreadable healer state: {exc!r}") from exc
        core._stored = core.records()
        core._resumed = {c.chunk_id for c in core._chunks.values() if c.state is ChunkState.RUNNING}
        return core
