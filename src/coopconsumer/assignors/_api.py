"""The assignor contract: ``ConsumerPartitionAssignor`` and the values it trades in.

Mirrors Java's ``ConsumerPartitionAssignor`` (KIP-429). Pure: no I/O, no clock.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

import attrs

from .._types import ConsumerGroupMetadata, TopicPartition
from ._compact import CompactPartitions

__all__ = [
    "DEFAULT_GENERATION_ID",
    "Assignment",
    "ClusterMetadata",
    "ConsumerPartitionAssignor",
    "GroupAssignment",
    "GroupSubscription",
    "RebalanceProtocol",
    "Subscription",
]

#: The generation a member reports when it has none (Java's ``DEFAULT_GENERATION``).
DEFAULT_GENERATION_ID = -1


class RebalanceProtocol(enum.IntEnum):
    """How partitions change hands in a rebalance (Java's ``RebalanceProtocol``)."""

    EAGER = 0
    """Every member revokes everything before it joins; one rebalance moves everything."""

    COOPERATIVE = 1
    """Members keep what they own; moved partitions are revoked, then assigned in a
    follow-up rebalance (KIP-429)."""


def _str_tuple(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _tp_tuple(values: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    # tuple() of a tuple is the same object: free for callers that already pass tuples,
    # which the assignors do for millions of partitions.
    return tuple(values)


def _tp_sequence(values: Iterable[TopicPartition]) -> Sequence[TopicPartition]:
    # A built-in sticky assignor's CompactPartitions stays compact (it is immutable and
    # behaves as the tuple it equals); anything else becomes a tuple.
    if isinstance(values, CompactPartitions):
        return values
    return tuple(values)


def _to_bytes(value: bytes | bytearray | memoryview | None) -> bytes:
    return b"" if value is None else bytes(value)


def _optional_str(value: str | None) -> str | None:
    return None if value is None else str(value)


def _subscription_map(values: Mapping[str, Subscription]) -> Mapping[str, Subscription]:
    return MappingProxyType(dict(values))


def _assignment_map(values: Mapping[str, Assignment]) -> Mapping[str, Assignment]:
    return MappingProxyType(dict(values))


def _int_map(values: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(values))


def _rack_map(
    values: Mapping[TopicPartition, Iterable[str]],
) -> Mapping[TopicPartition, frozenset[str]]:
    return MappingProxyType({tp: frozenset(racks) for tp, racks in values.items()})


@attrs.frozen(kw_only=True)
class Subscription:
    """What one member sends in its JoinGroup metadata (ConsumerProtocolSubscription).

    ``topics`` keeps the member's order; the codec sorts on the wire.
    ``owned_partitions`` and ``generation_id`` exist on the wire from v1/v2; a v0 member
    reports none and generation -1. ``rack_id`` (v3) is the member's ``client.rack``.
    ``group_instance_id`` is not on the wire in the subscription: the coordinator copies
    it from the JoinGroup member list.
    """

    topics: tuple[str, ...] = attrs.field(converter=_str_tuple)
    user_data: bytes = attrs.field(default=b"", converter=_to_bytes)
    owned_partitions: tuple[TopicPartition, ...] = attrs.field(default=(), converter=_tp_tuple)
    generation_id: int = DEFAULT_GENERATION_ID
    rack_id: str | None = attrs.field(default=None, converter=_optional_str)
    group_instance_id: str | None = attrs.field(default=None, converter=_optional_str)


@attrs.frozen(kw_only=True)
class Assignment:
    """What one member gets in its SyncGroup answer (ConsumerProtocolAssignment).

    ``partitions`` is a tuple, except in the leader's results of the built-in sticky
    assignors, which give a ``CompactPartitions``: an immutable sequence equal to (and
    hashing like) the tuple of the same partitions, that makes ``TopicPartition``
    objects only when iterated (docs/assignors.md, "Compact assignments").
    """

    partitions: Sequence[TopicPartition] = attrs.field(converter=_tp_sequence)
    user_data: bytes = attrs.field(default=b"", converter=_to_bytes)


@attrs.frozen(kw_only=True)
class GroupSubscription:
    """Every member's subscription, keyed by member id (what the leader assigns from)."""

    subscriptions: Mapping[str, Subscription] = attrs.field(converter=_subscription_map)


@attrs.frozen(kw_only=True)
class GroupAssignment:
    """The leader's result, keyed by member id. Every member id of the
    ``GroupSubscription`` must have an entry (possibly empty)."""

    assignments: Mapping[str, Assignment] = attrs.field(converter=_assignment_map)


@attrs.frozen(kw_only=True)
class ClusterMetadata:
    """The topics the leader may assign, with partition counts and optional replica racks.

    ``partition_counts`` maps topic -> number of partitions (partitions are 0..n-1).
    ``partition_racks`` maps a partition to the racks of its replicas (KIP-881); it is
    empty when the cluster reports no racks, and rack-aware assignment is then off.
    """

    partition_counts: Mapping[str, int] = attrs.field(converter=_int_map)
    partition_racks: Mapping[TopicPartition, frozenset[str]] = attrs.field(
        factory=dict, converter=_rack_map
    )

    @classmethod
    def from_partition_counts(
        cls,
        counts: Mapping[str, int],
        *,
        replica_racks: Mapping[TopicPartition, Iterable[str]] | None = None,
    ) -> ClusterMetadata:
        """Build metadata from ``{"topic": partition_count}`` and optional replica racks."""
        return cls(partition_counts=counts, partition_racks=replica_racks or {})

    def partition_count(self, topic: str) -> int | None:
        """The topic's partition count, or None when the topic is unknown."""
        return self.partition_counts.get(topic)

    def partitions_for_topic(self, topic: str) -> tuple[TopicPartition, ...]:
        """The topic's partitions in order; empty when the topic is unknown."""
        return tuple(TopicPartition(topic, p) for p in range(self.partition_counts.get(topic, 0)))

    def racks_for_partition(self, tp: TopicPartition) -> frozenset[str]:
        """The racks holding replicas of ``tp``; empty when unknown."""
        return self.partition_racks.get(tp, frozenset())

    @property
    def has_rack_info(self) -> bool:
        """Whether any partition reports replica racks."""
        return bool(self.partition_racks)


class ConsumerPartitionAssignor(abc.ABC):
    """A partition assignment strategy, as Java's ``ConsumerPartitionAssignor``.

    Subclasses set ``name`` (the protocol name in JoinGroup; equal to Java's for the
    built-ins so mixed groups interoperate) and implement ``assign``. An assignor that
    lists ``RebalanceProtocol.COOPERATIVE`` in ``supported_protocols()`` promises never to
    move a partition from one member to another in a single rebalance: it must leave a
    moving partition unassigned for one round (see ``validate_cooperative_assignment``).

    One instance belongs to one consumer; it may keep state between ``on_assignment`` and
    the next ``subscription_user_data``.
    """

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The protocol name sent in JoinGroup, e.g. ``"cooperative-sticky"``."""

    def supported_protocols(self) -> list[RebalanceProtocol]:
        """The rebalance protocols this assignor supports. Defaults to EAGER only."""
        return [RebalanceProtocol.EAGER]

    def version(self) -> int:
        """The assignor's own version, for assignors that evolve their user data."""
        return 0

    def subscription_user_data(self, topics: frozenset[str]) -> bytes:
        """Bytes sent to the leader in this member's ``Subscription.user_data``."""
        return b""

    @abc.abstractmethod
    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        """Assign partitions to every member of ``group_subscription`` (leader only)."""

    def on_assignment(  # noqa: B027 - optional hook, deliberately a no-op
        self, assignment: Assignment, group_metadata: ConsumerGroupMetadata
    ) -> None:
        """Called on every member with its new assignment, after SyncGroup."""
