"""Consumer protocol schemas (the bytes inside JoinGroup/SyncGroup) and assignor user data.

``ConsumerProtocolSubscription``/``ConsumerProtocolAssignment`` mirror the apache/kafka
JSON specs of the same names (versions 0-3, never flexible). On the wire each is
preceded by an int16 version, which is *not* part of these schemas: write it with
:data:`VERSION_PREFIX` (``coopconsumer.consumer_protocol`` does this).

The sticky assignors' user data is older than the JSON specs and has no version prefix:

- ``StickyAssignorUserData`` (eager ``sticky``, Java's ``StickyAssignor``): version 0
  is ``[ {topic: string, partitions: [int32]} ]`` (the previous assignment); version 1
  appends ``generation: int32``. A reader that finds only the V0 bytes falls back to
  V0 (Java decodes V1 and, when that fails, V0).
- ``CooperativeStickyAssignorUserData``: a bare int32 generation (Java's
  ``CooperativeStickyAssignor``).

Both are plain schemas for :func:`~coopconsumer._protocol.encode` /
:func:`~coopconsumer._protocol.decode`; :func:`decode_sticky_assignor_user_data` does
Java's V1-then-V0 fallback.

Imports only the standard library, attrs, ``coopconsumer._errors`` and siblings.
"""

from __future__ import annotations

import struct
from typing import Final

import attrs

from .._errors import ProtocolError
from ._codec import decode
from ._schema import Struct, kf

__all__ = [
    "VERSION_PREFIX",
    "ConsumerProtocolAssignment",
    "ConsumerProtocolAssignmentTopicPartition",
    "ConsumerProtocolSubscription",
    "ConsumerProtocolSubscriptionTopicPartition",
    "CooperativeStickyAssignorUserData",
    "StickyAssignorTopicPartitions",
    "StickyAssignorUserData",
    "decode_sticky_assignor_user_data",
]

#: The int16 version that precedes a consumer protocol subscription or assignment.
VERSION_PREFIX: Final = struct.Struct(">h")


@attrs.frozen(kw_only=True)
class ConsumerProtocolSubscriptionTopicPartition(Struct):
    """Partitions of one topic the member owns (spec type ``TopicPartition``, v1+)."""

    topic: str = attrs.field(default="", metadata=kf("1+", "string"))
    partitions: tuple[int, ...] = attrs.field(default=(), metadata=kf("1+", "[]int32"))


@attrs.frozen(kw_only=True)
class ConsumerProtocolSubscription(Struct):
    """A member's JoinGroup metadata for the ``consumer`` protocol type.

    v1 adds owned partitions (KIP-429), v2 the generation (KIP-792), v3 the rack
    (KIP-881). ``user_data`` is nullable on the wire.
    """

    MIN_VERSION = 0
    MAX_VERSION = 3
    FLEXIBLE_VERSION = None

    topics: tuple[str, ...] = attrs.field(default=(), metadata=kf("0+", "[]string"))
    user_data: bytes | None = attrs.field(default=None, metadata=kf("0+", "bytes", nullable="0+"))
    owned_partitions: tuple[ConsumerProtocolSubscriptionTopicPartition, ...] = attrs.field(
        default=(),
        metadata=kf("1+", ConsumerProtocolSubscriptionTopicPartition, array=True, ignorable=True),
    )
    generation_id: int = attrs.field(default=-1, metadata=kf("2+", "int32", ignorable=True))
    rack_id: str | None = attrs.field(
        default=None, metadata=kf("3+", "string", nullable="3+", ignorable=True)
    )


@attrs.frozen(kw_only=True)
class ConsumerProtocolAssignmentTopicPartition(Struct):
    """Partitions of one topic assigned to the member (spec type ``TopicPartition``)."""

    topic: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class ConsumerProtocolAssignment(Struct):
    """The leader's SyncGroup assignment for one member. Versions 1-3 equal v0 (they
    exist to match the subscription's version)."""

    MIN_VERSION = 0
    MAX_VERSION = 3
    FLEXIBLE_VERSION = None

    assigned_partitions: tuple[ConsumerProtocolAssignmentTopicPartition, ...] = attrs.field(
        default=(), metadata=kf("0+", ConsumerProtocolAssignmentTopicPartition, array=True)
    )
    user_data: bytes | None = attrs.field(default=None, metadata=kf("0+", "bytes", nullable="0+"))


@attrs.frozen(kw_only=True)
class StickyAssignorTopicPartitions(Struct):
    """Partitions of one topic in the previous assignment."""

    topic: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class StickyAssignorUserData(Struct):
    """Eager ``sticky`` user data. No version prefix on the wire: V1 = V0 + generation.

    Write V1; read V1 and, when the bytes end after the partitions, V0 (generation
    then stays -1). ``decode(StickyAssignorUserData, data, 1)`` raises ProtocolError
    on V0 bytes, ``decode(..., 0)`` ignores a trailing generation.
    """

    MIN_VERSION = 0
    MAX_VERSION = 1
    FLEXIBLE_VERSION = None

    previous_assignment: tuple[StickyAssignorTopicPartitions, ...] = attrs.field(
        default=(), metadata=kf("0+", StickyAssignorTopicPartitions, array=True)
    )
    generation: int = attrs.field(default=-1, metadata=kf("1+", "int32", ignorable=True))


@attrs.frozen(kw_only=True)
class CooperativeStickyAssignorUserData(Struct):
    """``cooperative-sticky`` user data: the generation as a bare int32, no prefix."""

    MIN_VERSION = 0
    MAX_VERSION = 0
    FLEXIBLE_VERSION = None

    generation: int = attrs.field(default=-1, metadata=kf("0+", "int32"))


def decode_sticky_assignor_user_data(data: bytes) -> StickyAssignorUserData:
    """Read eager ``sticky`` user data as V1, falling back to V0 (generation -1).

    Java's ``StickyAssignor`` does the same: V0 bytes are a strict prefix of V1, so
    reading them as V1 runs out of bytes. Raises ProtocolError when neither parses.
    """
    try:
        return decode(StickyAssignorUserData, data, 1)
    except ProtocolError:
        return decode(StickyAssignorUserData, data, 0)
