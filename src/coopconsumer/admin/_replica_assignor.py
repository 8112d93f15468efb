"""The ``ReplicaAssignor`` contract (pluggable replica placement) and the cluster view it reads.

An assignor computes where the new partitions of one topic go, from a snapshot of the
cluster (:class:`ClusterView`: brokers, racks, current replicas, bytes per broker), or
refuses with :class:`ReplicaAssignorError`. It runs on the client, before
CreateTopics/CreatePartitions, whose requests then carry the explicit assignment
(docs/admin.md).

Pure: imports the standard library, attrs and ``coopconsumer._errors``/``_types``.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import ClassVar

import attrs

from .._errors import CoopConsumerError
from .._types import TopicPartition
from ._admin_types import LogDirDescription

__all__ = [
    "BrokerLoad",
    "ClusterView",
    "LogDirLoad",
    "NewPartitions",
    "ReplicaAssignor",
    "ReplicaAssignorError",
    "check_assignment",
    "with_log_dirs",
]


class ReplicaAssignorError(CoopConsumerError):
    """An assignor could not place the partitions (too few eligible brokers, a rule
    that matches none...). Raised before anything is sent: no topic or partition is
    created. Not retriable with the same cluster state."""


def _mapping(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _ids(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class NewPartitions:
    """The partitions to place: ids ``partition_ids`` of ``topic`` (new ones only),
    each with ``replication_factor`` replicas.

    ``principal`` is who asks, as the brokers name it (``"User:alice"``, Kafka's
    ``KafkaPrincipal``), so a per-tenant rule can decide by it; None when the client
    cannot tell (see ``AdminClient``'s ``principal``).
    """

    topic: str
    partition_ids: tuple[int, ...] = attrs.field(converter=_ids)
    replication_factor: int
    configs: Mapping[str, str] = attrs.field(factory=dict, converter=_mapping)
    principal: str | None = None


@attrs.frozen(kw_only=True)
class LogDirLoad:
    """One log directory (disk) of a broker, from DescribeLogDirs: its replicas
    (future ones not counted), bytes used (future ones included) and capacity (None
    before Kafka 3.3)."""

    path: str
    replicas: int = 0
    used_bytes: int = 0
    total_bytes: int | None = None

    @property
    def storage_ratio(self) -> float | None:
        if not self.total_bytes:
            return None
        return self.used_bytes / self.total_bytes


def _dirs(value: Iterable[LogDirLoad]) -> tuple[LogDirLoad, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class BrokerLoad:
    """One broker as an assignor sees it.

    ``replicas``/``leaders`` count what it hosts now (from Metadata).
    ``used_bytes``/``total_bytes`` come from DescribeLogDirs; None when unknown (an
    older broker, or not authorised). ``log_dirs`` has the same per disk (JBOD); empty
    when unknown.
    """

    node_id: int
    rack: str | None = None
    replicas: int = 0
    leaders: int = 0
    used_bytes: int | None = None
    total_bytes: int | None = None
    log_dirs: tuple[LogDirLoad, ...] = attrs.field(default=(), converter=_dirs)

    @property
    def next_log_dir(self) -> LogDirLoad | None:
        """The directory Kafka puts a new replica in: the one with the fewest
        replicas (``LogManager.nextLogDirs``; the first listed on a tie)."""
        if not self.log_dirs:
            return None
        return min(self.log_dirs, key=lambda d: d.replicas)

    @property
    def storage_ratio(self) -> float | None:
        """Used / total storage, None when unknown."""
        if self.used_bytes is None or not self.total_bytes:
            return None
        return self.used_bytes / self.total_bytes


def _brokers(value: Iterable[BrokerLoad] | Mapping[int, BrokerLoad]) -> Mapping[int, BrokerLoad]:
    items = value.values() if isinstance(value, Mapping) else value
    return MappingProxyType({b.node_id: b for b in sorted(items, key=lambda b: b.node_id)})


def _assignments(
    value: Mapping[TopicPartition, Iterable[int]],
) -> Mapping[TopicPartition, tuple[int, ...]]:
    if isinstance(value, MappingProxyType) and id(value) in _BY_TOPIC:
        return value  # made by this converter already (views share it, unchanged)
    frozen = MappingProxyType({tp: tuple(r) for tp, r in value.items()})
    by_topic: dict[str, dict[int, tuple[int, ...]]] = {}
    for tp, r in frozen.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = r
    # Views made from one another share the mapping and its per-topic index, so
    # placing thousands of partitions one view at a time stays linear.
    _BY_TOPIC[id(frozen)] = (frozen, by_topic)
    while len(_BY_TOPIC) > 16:
        del _BY_TOPIC[next(iter(_BY_TOPIC))]
    return frozen


#: id(assignments mapping) -> (the mapping, its per-topic index); the mapping is kept
#: so its id is not reused while the entry lives.
_BY_TOPIC: dict[
    int, tuple[Mapping[TopicPartition, tuple[int, ...]], dict[str, dict[int, tuple[int, ...]]]]
] = {}


@attrs.frozen(kw_only=True)
class ClusterView:
    """A snapshot of the cluster for one placement: live brokers with their load, and
    the current replicas of every partition. Immutable.

    ``fenced_brokers`` are registered but fenced (KRaft: down, or not caught up with
    the metadata log; DescribeCluster v2 lists them). They may take followers when the
    live brokers run out (Kafka's ``StripedReplicaPlacer`` does that), never a leader.
    """

    brokers: Mapping[int, BrokerLoad] = attrs.field(converter=_brokers)
    assignments: Mapping[TopicPartition, tuple[int, ...]] = attrs.field(
        factory=dict, converter=_assignments
    )
    fenced_brokers: Mapping[int, BrokerLoad] = attrs.field(factory=dict, converter=_brokers)

    def topic_assignment(self, topic: str) -> dict[int, tuple[int, ...]]:
        """``{partition: replicas}`` of ``topic`` (empty for a new topic)."""
        entry = _BY_TOPIC.get(id(self.assignments))
        if entry is not None and entry[0] is self.assignments:
            return dict(entry[1].get(topic, {}))
        return {tp.partition: r for tp, r in self.assignments.items() if tp.topic == topic}

    @property
    def racks(self) -> frozenset[str]:
        return frozenset(b.rack for b in self.brokers.values() if b.rack is not None)


class ReplicaAssignor(abc.ABC):
    """Places the new partitions of one topic (the pluggable ``ReplicaAssignor``).

    Subclass it and implement :meth:`assign`; load it by name or ``module:Class``
    (``replica.assignor`` in the admin configuration). Instances must not keep state
    between calls that changes their answers: the same input gives the same output.
    """

    #: The name it is configured by.
    name: ClassVar[str] = ""

    @abc.abstractmethod
    def assign(
        self, partitions: NewPartitions, cluster: ClusterView
    ) -> Mapping[int, tuple[int, ...]]:
        """``{partition id: replicas}`` for every id in ``partitions.partition_ids``;
        the first replica is the preferred leader. Raise :class:`ReplicaAssignorError`
        when no valid placement exists."""


def check_assignment(
    assignor: ReplicaAssignor,
    partitions: NewPartitions,
    cluster: ClusterView,
    assignment: Mapping[int, tuple[int, ...]],
) -> dict[int, tuple[int, ...]]:
    """Validate an assignor's answer (every id once, the right replica count, distinct
    registered brokers, a live leader); ``ReplicaAssignorError`` naming the assignor
    otherwise."""
    who = type(assignor).__name__
    if not isinstance(assignment, Mapping):
        raise ReplicaAssignorError(f"{who} returned {type(assignment).__name__}, not a mapping")
    if set(assignment) != set(partitions.partition_ids):
        raise ReplicaAssignorError(
            f"{who} placed partitions {sorted(assignment)} of {partitions.topic!r}; "
            f"expected {sorted(partitions.partition_ids)}"
        )
    checked: dict[int, tuple[int, ...]] = {}
    for partition in partitions.partition_ids:
        replicas = tuple(assignment[partition])
        if len(replicas) != partitions.replication_factor:
            raise ReplicaAssignorError(
                f"{who} gave {partitions.topic}-{partition} {len(replicas)} replicas; "
                f"the replication factor is {partitions.replication_factor}"
            )
        if len(set(replicas)) != len(replicas):
            raise ReplicaAssignorError(
                f"{who} put two replicas of {partitions.topic}-{partition} on one broker: "
                f"{list(replicas)}"
            )
        unknown = [
            r for r in replicas if r not in cluster.brokers and r not in cluster.fenced_brokers
        ]
        if unknown:
            raise ReplicaAssignorError(
                f"{who} placed {partitions.topic}-{partition} on unknown brokers {unknown}"
            )
        if replicas[0] not in cluster.brokers:
            raise ReplicaAssignorError(
                f"{who} made fenced broker {replicas[0]} the leader of "
                f"{partitions.topic}-{partition}"
            )
        checked[partition] = replicas
    return checked


def with_log_dirs(load: BrokerLoad, dirs: Sequence[LogDirDescription]) -> BrokerLoad:
    """``load`` with the storage DescribeLogDirs reported: per directory and in total
    (the total is None when a directory's capacity is unknown)."""
    per_dir = [
        LogDirLoad(
            path=d.path,
            replicas=sum(1 for r in d.replicas if not r.is_future),
            used_bytes=sum(r.size_bytes for r in d.replicas),
            total_bytes=d.total_bytes,
        )
        for d in dirs
        if d.error is None
    ]
    used = sum(r.size_bytes for d in dirs for r in d.replicas if not r.is_future)
    totals = [d.total_bytes for d in per_dir]
    total = None if not totals or None in totals else sum(t for t in totals if t)
    return attrs.evolve(load, used_bytes=used, total_bytes=total, log_dirs=per_dir)
