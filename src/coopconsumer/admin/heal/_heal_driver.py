"""The healer service's thin driver: election, state store, observation, executor
actions (docs/admin.md, "Healing after a broker failure").

The decisions are in ``_core``. Two small interfaces keep the parts that need a
group coordinator apart from the parts that need a cluster that moves replicas:
:class:`HealerElection` (is this instance the active healer?) and
:class:`HealStateStore` (the latest record per key, and writes). The Kafka
implementation of both lives in ``_kafka``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..._errors import BrokerConnectionError, DeliveryError, KafkaError, RequestTimeoutError
from ..._types import TopicPartition
from .._admin_types import AdminOperationError, ClusterDescription
from .._replica_assignor import BrokerLoad, ReplicaAssignor, with_log_dirs
from ..reassign._executor import ObservedPartition
from ..reassign._reassign_driver import ReassignmentAdmin, observed_partitions, perform
from ._heal_core import (
    Alert,
    ChunkAction,
    ChunkResult,
    ClusterSeen,
    HealConfig,
    HealerAction,
    HealerCore,
    Store,
)

__all__ = [
    "AlwaysActive",
    "HealStateStore",
    "Healer",
    "HealerAdmin",
    "HealerElection",
    "MemoryStateStore",
]

log = logging.getLogger("coopconsumer.admin.heal")


class HealerAdmin(ReassignmentAdmin, Protocol):
    """The admin calls the healer makes (:class:`~coopconsumer.admin.AdminClient`
    has them)."""

    def describe_cluster(
        self, *, include_fenced_brokers: bool = False, timeout_ms: float | None = None
    ) -> ClusterDescription: ...


class HealStateStore(Protocol):
    """Where the healer keeps its state: the latest value per key (a compacted topic)."""

    def load(self) -> dict[str, Mapping[str, Any]]:
        """Every key's latest value (deleted keys absent)."""
        ...

    def write(self, key: str, value: Mapping[str, Any] | None) -> None:
        """Store ``value`` under ``key`` (None deletes); durable when it returns."""
        ...


class HealerElection(Protocol):
    """Chooses the one active healer among several instances."""

    def is_active(self) -> bool:
        """Whether this instance is the active one now (may do a little I/O)."""
        ...

    def close(self) -> None:
        """Leave the election (another instance takes over)."""
        ...


class MemoryStateStore:
    """A state store in memory: for tests, and for one healer that may forget."""

    def __init__(self) -> None:
        self.records: dict[str, Mapping[str, Any]] = {}
        self.writes = 0

    def load(self) -> dict[str, Mapping[str, Any]]:
        return dict(self.records)

    def write(self, key: str, value: Mapping[str, Any] | None) -> None:
        self.writes += 1
        if value is None:
            self.records.pop(key, None)
        else:
            self.records[key] = value


class AlwaysActive:
    """The election of a healer that runs alone."""

    def is_active(self) -> bool:
        return True

    def close(self) -> None:
        return None


class Healer:
    """The healer service: each :meth:`step`, if this instance is the active one,
    observes the cluster, feeds :class:`~coopconsumer.admin.heal.HealerCore` and
    carries out what it decides, writing its state to ``store`` before acting.

    On becoming active it rebuilds its state from ``store``, so a standby resumes
    where the previous active instance stopped (first-seen times, chunks, the
    running chunk's executor). ``clock`` gives wall-clock seconds.

    Observation is cheap on big clusters: each step asks DescribeCluster; Metadata
    and ListPartitionReassignments for every partition only on the first step, when
    the live brokers change, when an absent broker's interval ends, and every
    ``full_view_interval_s``; otherwise only for the topics and partitions of the
    running chunk (or the one about to start). DescribeLogDirs (the sizes and storage
    a placement needs, one request per broker) only when a broker fails, and before a
    chunk starts when the figures are older than ``storage_interval_s``. Alerts
    (partitions left unhealed) are logged at ERROR level.
    """

    def __init__(
        self,
        admin: HealerAdmin,
        assignor: ReplicaAssignor,
        *,
        config: HealConfig | None = None,
        store: HealStateStore | None = None,
        election: HealerElection | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        poll_interval_s: float = 5.0,
        full_view_interval_s: float = 60.0,
        storage_interval_s: float = 300.0,
    ) -> None:
        self.admin = admin
        self.assignor = assignor
        self.config = config or HealConfig()
        self.store: HealStateStore = store if store is not None else MemoryStateStore()
        self.election: HealerElection = election if election is not None else AlwaysActive()
        self._clock = clock
        self._sleep = sleep
        self.poll_interval_s = poll_interval_s
        self.full_view_interval_s = full_view_interval_s
        self.storage_interval_s = storage_interval_s
        self._storage_at: float | None = None
        self.core: HealerCore | None = None
        self._view: dict[TopicPartition, ObservedPartition] | None = None
        self._view_live: frozenset[int] = frozenset()
        self._view_at = 0.0
        #: Alerts so far (also logged), newest last.
        self.alerts: list[str] = []

    def step(self) -> bool:
        """One round; whether this instance was active."""
        if not self.election.is_active():
            self.core = None  # a standby keeps nothing: the store is the truth
            return False
        if self.core is None:
            self.core = HealerCore.from_records(self.store.load(), self.config, self.assignor)
            self._view = None  # a new active instance starts from a full view
            log.info("active healer; resumed %d stored record(s)", len(self.core.records()))
        self._run(self.core.handle(self.observe(), self._clock()))
        return True

    def run(self, stop: threading.Event | None = None, *, max_steps: int | None = None) -> None:
        """Step every ``poll_interval_s`` until ``stop`` is set (or ``max_steps``).

        A step that fails on a connection, a timeout, a broker error or a state write
        is logged and the state is rebuilt from the store at the next step; what was
        recorded as decided is reconciled with the cluster then, so nothing is
        submitted twice."""
        steps = 0
        while stop is None or not stop.is_set():
            try:
                self.step()
            except (
                AdminOperationError,
                BrokerConnectionError,
                DeliveryError,
                KafkaError,
                RequestTimeoutError,
            ) as exc:
                # The service outlives a broken connection or a refused request: drop
                # the in-memory state and rebuild it from the store, as a restart does.
                log.warning("healer step failed, retrying from the stored state: %s", exc)
                self.core = None
            steps += 1
            if max_steps is not None and steps >= max_steps:
                return
            self._sleep(self.poll_interval_s)

    def close(self) -> None:
        self.election.close()
        self.core = None

    def metrics(self) -> dict[str, float]:
        """The healer's metrics, a source for ``coopconsumer.metrics_export``
        (zeros on a standby)."""
        if self.core is None:
            return dict.fromkeys(HealerCore(self.config, self.assignor).metrics(), 0.0)
        return self.core.metrics()

    def observe(self) -> ClusterSeen:
        """What the cluster shows now, asking as little as it can (see the class
        docstring)."""
        now = self._clock()
        core = self.core or HealerCore(self.config, self.assignor)
        cluster = self.admin.describe_cluster()
        live = {b.node_id: b.rack for b in cluster.brokers}
        full = (
            self._view is None
            or frozenset(live) != self._view_live
            or now - self._view_at >= self.full_view_interval_s
            or core.wants_full_view(now)
        )
        if full:
            # Reassignments first, Metadata second (see ReassignmentExecutor.observe).
            moving = self.admin.list_partition_reassignments()
            self._view = observed_partitions(self.admin.describe_topics(), moving)
            self._view_live = frozenset(live)
            self._view_at = now
        else:
            assert self._view is not None
            focus = core.focus(now)
            if focus:
                moving = self.admin.list_partition_reassignments(focus)
                try:
                    described = self.admin.describe_topics(sorted({tp.topic for tp in focus}))
                except AdminOperationError as exc:
                    described = dict(exc.completed or {})  # a deleted topic: its moves fail
                fresh = observed_partitions(described, moving)
                for tp in focus:
                    if tp.topic in described:
                        self._view.pop(tp, None)
                self._view.update(fresh)
        sizes: dict[TopicPartition, int] = {}
        storage: dict[int, BrokerLoad] = {}
        stale = self._storage_at is None or now - self._storage_at >= self.storage_interval_s
        if core.due_brokers(now) or (core.wants_storage(now) and stale):
            # A broker fails now (its first chunk starts in this step), or a chunk is
            # about to start and the figures are old: every broker's disks, once.
            sizes, storage = self._storage(list(live))
            self._storage_at = now
        return ClusterSeen(live=live, partitions=dict(self._view), sizes=sizes, storage=storage)

    def _storage(
        self, brokers: Sequence[int]
    ) -> tuple[dict[TopicPartition, int], dict[int, BrokerLoad]]:
        """Every partition's size and each broker's storage (per disk too)."""
        try:
            dirs = self.admin.describe_log_dirs(brokers)
        except AdminOperationError as exc:
            dirs = dict(exc.completed or {})
        sizes: dict[TopicPartition, int] = {}
        storage: dict[int, BrokerLoad] = {}
        for broker, per_dir in dirs.items():
            storage[broker] = with_log_dirs(BrokerLoad(node_id=broker), per_dir)
            for d in per_dir:
                for r in d.replicas:
                    if not r.is_future:
                        tp = TopicPartition(r.topic, r.partition)
                        sizes[tp] = max(sizes.get(tp, 0), r.size_bytes)
        return sizes, storage

    def _run(self, actions: list[HealerAction]) -> None:
        assert self.core is not None
        for action in actions:
            if isinstance(action, Store):
                self.store.write(action.key, action.value)
            elif isinstance(action, Alert):
                self.alerts.append(action.message)
                log.error("ALERT: %s", action.message)
            elif isinstance(action, ChunkAction):
                result = perform(self.admin, action.action)
                if result is not None:
                    self._run(self.core.handle(ChunkResult(action.chunk_id, result), self._clock()))
            else:  # pragma: no cover - the core returns nothing else
                raise TypeError(f"not a healer action: {action!r}")
