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
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from ..._errors import BrokerConnectionError, DeliveryError, KafkaError, RequestTimeoutError
from .._assignor import ReplicaAssignor
from .._types import AdminOperationError, ClusterDescription, LogDirDescription, TopicDescription
from ..reassign._driver import ReassignmentAdmin, observed_partitions, partition_sizes, perform
from ._core import (
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

    def describe_cluster(self, *, timeout_ms: float | None = None) -> ClusterDescription: ...

    def describe_log_dirs(
        self, brokers: Iterable[int] | None = None, *, timeout_ms: float | None = None
    ) -> dict[int, tuple[LogDirDescription, ...]]: ...


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
    ) -> None:
        self.admin = admin
        self.assignor = assignor
        self.config = config or HealConfig()
        self.store: HealStateStore = store if store is not None else MemoryStateStore()
        self.election: HealerElection = election if election is not None else AlwaysActive()
        self._clock = clock
        self._sleep = sleep
        self.poll_interval_s = poll_interval_s
        self.core: HealerCore | None = None

    def step(self) -> bool:
        """One round; whether this instance was active."""
        if not self.election.is_active():
            self.core = None  # a standby keeps nothing: the store is the truth
            return False
        if self.core is None:
            self.core = HealerCore.from_records(self.store.load(), self.config, self.assignor)
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
        cluster = self.admin.describe_cluster()
        described: dict[str, TopicDescription] = self.admin.describe_topics()
        moving = self.admin.list_partition_reassignments()
        return ClusterSeen(
            live={b.node_id: b.rack for b in cluster.brokers},
            partitions=observed_partitions(described, moving),
            sizes=partition_sizes(self.admin),
        )

    def _run(self, actions: list[HealerAction]) -> None:
        assert self.core is not None
        for action in actions:
            if isinstance(action, Store):
                self.store.write(action.key, action.value)
            elif isinstance(action, ChunkAction):
                result = perform(self.admin, action.action)
                if result is not None:
                    self._run(self.core.handle(ChunkResult(action.chunk_id, result), self._clock()))
            else:  # pragma: no cover - the core returns nothing else
                raise TypeError(f"not a healer action: {action!r}")
