"""Typed inputs and results of the admin client: frozen attrs value types and enums.

Pure: imports the standard library, attrs and ``coopconsumer._errors``/``_types``.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from .._errors import ConfigurationError, CoopConsumerError, KafkaError

__all__ = [
    "AdminOperationError",
    "AlterConfigOp",
    "AlterConfigOpType",
    "BrokerDescription",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "ElectionResult",
    "ElectionType",
    "LogDirDescription",
    "NewTopic",
    "PartitionDescription",
    "PartitionReassignment",
    "ReplicaLogInfo",
    "TopicDescription",
    "TopicPartitionReplica",
]


class AdminOperationError(CoopConsumerError):
    """Some items of a batch operation failed.

    ``errors`` maps each failed item (a topic name, a ``TopicPartition``, a
    ``ConfigResource``, a broker id) to its error: the broker's ``KafkaError``, or a
    ``BrokerConnectionError``/``RequestTimeoutError`` for a broker that could not be
    asked (``describe_log_dirs``); ``completed`` holds the
    results of the items that succeeded (what the method would have returned for
    them). Kafka applies items one by one: the successful ones are done, nothing is
    rolled back.
    """

    def __init__(
        self, what: str, errors: Mapping[Any, CoopConsumerError], completed: Any = None
    ) -> None:
        first = next(iter(errors.items()), None)
        detail = f"; first: {first[0]}: {first[1]}" if first else ""
        super().__init__(f"{what}: {len(errors)} item(s) failed{detail}")
        self.errors: Mapping[Any, CoopConsumerError] = MappingProxyType(dict(errors))
        self.completed = completed


def _ints(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


def _configs(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _assignment(
    value: Mapping[int, Iterable[int]] | None,
) -> Mapping[int, tuple[int, ...]] | None:
    if value is None:
        return None
    return MappingProxyType({int(p): tuple(r) for p, r in value.items()})


@attrs.frozen(kw_only=True)
class BrokerDescription:
    """A broker: a live one, or (``is_fenced``, only when asked for) one that is
    registered but fenced."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    is_fenced: bool = False


@attrs.frozen
class TopicPartitionReplica:
    """The replica of ``topic``-``partition`` on broker ``broker_id``."""

    topic: str
    partition: int
    broker_id: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}@{self.broker_id}"


@attrs.frozen(kw_only=True)
class ClusterDescription:
    """DescribeCluster's answer (Metadata's on brokers before Kafka 2.8)."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerDescription, ...]


@attrs.frozen(kw_only=True)
class PartitionDescription:
    """One partition: leader (-1 when offline), epoch, replicas, ISR."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    #: LEADER_NOT_AVAILABLE and friends; the partition is still described.
    error: KafkaError | None = None


@attrs.frozen(kw_only=True)
class TopicDescription:
    """A topic and its partitions, by partition id."""

    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: tuple[PartitionDescription, ...]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


def _positive(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{attribute.name} must be an int >= 1, not {value!r}")


def _topic_name(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"a topic name must be a non-empty str, not {value!r}")


def _assignment_shape(
    instance: object,
    attribute: attrs.Attribute[Mapping[int, tuple[int, ...]] | None],
    value: Mapping[int, tuple[int, ...]] | None,
) -> None:
    if value is None:
        return
    if sorted(value) != list(range(len(value))) or not value:
        raise ConfigurationError(
            f"an assignment must place partitions 0..n-1 (n >= 1), not {sorted(value)}"
        )
    if any(not replicas for replicas in value.values()):
        raise ConfigurationError("every partition of an assignment needs a replica")


@attrs.frozen
class NewTopic:
    """A topic to create. Without ``assignment`` the configured replica assignor
    places ``num_partitions`` x ``replication_factor`` replicas; with it (``{partition:
    replicas}``, partitions 0..n-1) the counts are taken from it.

    Raises ``ConfigurationError`` for an empty name, a count below 1, or an assignment
    that does not place partitions 0..n-1 on at least one broker each.
    """

    name: str = attrs.field(validator=_topic_name)
    num_partitions: int = attrs.field(default=1, kw_only=True, validator=_positive)
    replication_factor: int = attrs.field(default=1, kw_only=True, validator=_positive)
    configs: Mapping[str, str] = attrs.field(factory=dict, converter=_configs, kw_only=True)
    assignment: Mapping[int, tuple[int, ...]] | None = attrs.field(
        default=None, converter=_assignment, kw_only=True, validator=_assignment_shape
    )


class Reassigning:
    """What a partition's ``replicas``, ``adding`` and ``removing`` say (KIP-455: during
    a reassignment the replicas are the target plus the removing ones)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        """Where a reassignment in flight goes (the replicas when none is)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        """Where it was before the reassignment in flight (the replicas when none is;
        KIP-455 keeps their set, not their order)."""
        return tuple(r for r in self.replicas if r not in self.adding)


@attrs.frozen(kw_only=True)
class PartitionReassignment(Reassigning):
    """An ongoing reassignment (KIP-455): the current replicas, which are being added
    and which removed."""

    replicas: tuple[int, ...] = attrs.field(converter=_ints)
    adding: tuple[int, ...] = attrs.field(converter=_ints)
    removing: tuple[int, ...] = attrs.field(converter=_ints)


class ConfigResourceType(enum.IntEnum):
    """Resource types of DescribeConfigs/IncrementalAlterConfigs."""

    TOPIC = 2
    BROKER = 4


@attrs.frozen
class ConfigResource:
    """A topic or broker whose configuration is read or changed (broker name "" is the
    cluster-wide default)."""

    type: ConfigResourceType
    name: str


class ConfigSource(enum.IntEnum):
    """Where a configuration value comes from (DescribeConfigs v1+)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    @classmethod
    def of(cls, value: int) -> ConfigSource:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@attrs.frozen(kw_only=True)
class ConfigEntry:
    """One configuration value."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool = False
    is_sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


class AlterConfigOpType(enum.IntEnum):
    """IncrementalAlterConfigs operations (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@attrs.frozen
class AlterConfigOp:
    """One change: ``AlterConfigOp("retention.ms", AlterConfigOpType.SET, "1000")``."""

    name: str
    op: AlterConfigOpType = AlterConfigOpType.SET
    value: str | None = None


@attrs.frozen(kw_only=True)
class ReplicaLogInfo:
    """A replica in a log directory: bytes on disk and how far behind its leader."""

    topic: str
    partition: int
    size_bytes: int
    offset_lag: int
    is_future: bool = False


@attrs.frozen(kw_only=True)
class LogDirDescription:
    """One log directory of a broker; ``total_bytes``/``usable_bytes`` are None before
    Kafka 3.3 (DescribeLogDirs v4, KIP-827)."""

    path: str
    error: KafkaError | None
    replicas: tuple[ReplicaLogInfo, ...]
    total_bytes: int | None = None
    usable_bytes: int | None = None


class ElectionType(enum.IntEnum):
    """ElectLeaders election types (KIP-460)."""

    PREFERRED = 0
    UNCLEAN = 1


class ElectionResult(enum.Enum):
    """What an election did for one partition."""

    #: A new leader was elected.
    ELECTED = "elected"
    #: The partition already had the leader asked for (ELECTION_NOT_NEEDED).
    NOT_NEEDED = "not_needed"
