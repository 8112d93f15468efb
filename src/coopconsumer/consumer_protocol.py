"""Encode and decode the consumer protocol: the bytes a member puts in JoinGroup
(its :class:`~coopconsumer.assignors.Subscription`) and the leader puts in SyncGroup
(each member's :class:`~coopconsumer.assignors.Assignment`).

Compatible with Java's ``ConsumerProtocol`` so that Python, Java and librdkafka members
can share a group:

- Always **writes version 3** (owned partitions, generation id, rack id), topics
  sorted, partitions grouped by topic with topics and partitions sorted, and user data
  as empty bytes, never null.
- **Reads versions 0 to 3**, and any higher version as version 3: fields are only
  ever appended, so the bytes after the v3 fields are ignored. A v0 subscription has
  no owned partitions and generation -1; a v1 one has generation -1; v0-v2 have no
  rack. Null user data reads as ``b""``.
- ``group_instance_id`` is not part of the wire format: it is never written, and reads
  as None (the coordinator copies it from the JoinGroup member list).

Malformed bytes raise :class:`~coopconsumer.ProtocolError`, naming the member when
``member_id`` is given.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable
from functools import lru_cache
from itertools import repeat
from typing import Final, TypeVar

from ._errors import ProtocolError
from ._protocol import decode, encode
from ._protocol.consumer_protocol_schemas import (
    VERSION_PREFIX,
    ConsumerProtocolAssignment,
    ConsumerProtocolAssignmentTopicPartition,
    ConsumerProtocolSubscription,
    ConsumerProtocolSubscriptionTopicPartition,
)
from ._types import TopicPartition
from .assignors._api import Assignment, Subscription
from .assignors._compact import CompactPartitions

__all__ = [
    "CONSUMER_PROTOCOL_VERSION",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

#: The version this library writes (the highest Kafka defines, KIP-881).
CONSUMER_PROTOCOL_VERSION: Final = 3

_M = TypeVar("_M", ConsumerProtocolSubscription, ConsumerProtocolAssignment)

_PREFIX_V3: Final = VERSION_PREFIX.pack(CONSUMER_PROTOCOL_VERSION)
# tuple.__new__(TopicPartition, (topic, partition)) builds the named tuple entirely in
# C; decoding 2000 members x 500 owned partitions spends most of its time here.
_tuple_new = tuple.__new__


def _group_by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        found = by_topic.get(topic)
        if found is None:
            by_topic[topic] = [partition]
        else:
            found.append(partition)
    return [(topic, sorted(by_topic[topic])) for topic in sorted(by_topic)]


_INT32: Final = struct.Struct(">i")
_INT16: Final = struct.Struct(">h")
# The compact writer below writes partition numbers as a C int array, byte-swapped to
# big-endian on little-endian machines; it needs C ints of 4 bytes.
_ARRAY_INT32: Final = array("i").itemsize == 4


@lru_cache(maxsize=4096)
def _string(value: str) -> bytes:
    """A protocol ``string``: int16 length, then UTF-8 (``struct.error`` when too long)."""
    data = value.encode()
    return _INT16.pack(len(data)) + data


def _encode_compact_assignment(partitions: CompactPartitions, user_data: bytes) -> bytes | None:
    """``encode_assignment`` of a built-in sticky assignor's compact result, written
    straight from its partition numbers: the same bytes as the generic codec writes for
    the tuple of the same partitions (tests/protocol checks), without making a
    ``TopicPartition`` or a message object per partition. None when the compact form
    cannot say it without objects (``CompactPartitions.sorted_numbers``)."""
    layout = partitions.sorted_numbers() if _ARRAY_INT32 else None
    if layout is None:
        return None
    topic_counts, numbers = layout
    if sys.byteorder == "little":
        numbers.byteswap()
    raw = memoryview(numbers.tobytes())
    parts: list[bytes | memoryview] = [_PREFIX_V3, _INT32.pack(len(topic_counts))]
    append = parts.append
    pos = 0
    try:
        for topic, count in topic_counts:
            append(_string(topic))
            append(_INT32.pack(count))
            end = pos + 4 * count
            append(raw[pos:end])
            pos = end
    except struct.error:
        return None  # a topic name too long for the wire: the generic codec says so
    append(_INT32.pack(len(user_data)))
    append(user_data)
    return b"".join(parts)


def _flatten(groups: Iterable[tuple[str, tuple[int, ...]]]) -> tuple[TopicPartition, ...]:
    out: list[TopicPartition] = []
    extend = out.extend
    for topic, partitions in groups:
        extend(map(_tuple_new, repeat(TopicPartition), zip(repeat(topic), partitions)))
    return tuple(out)


def _decode_versioned(data: bytes, cls: type[_M], what: str, member_id: str | None) -> _M:
    """Read the int16 version prefix, then the body at that version (capped at ours)."""
    raw = bytes(data)
    if len(raw) < VERSION_PREFIX.size:
        raise ProtocolError(
            f"consumer protocol {what} of {len(raw)} bytes has no version", member_id=member_id
        )
    version: int = VERSION_PREFIX.unpack_from(raw, 0)[0]
    if version < 0:
        raise ProtocolError(
            f"consumer protocol {what} has negative version {version}", member_id=member_id
        )
    # Newer versions only append fields: read what we know (Java does the same).
    version = min(version, CONSUMER_PROTOCOL_VERSION)
    try:
        return decode(cls, raw[VERSION_PREFIX.size :], version)
    except ProtocolError as exc:
        raise ProtocolError(
            f"malformed consumer protocol {what} v{version}: {exc}", member_id=member_id
        ) from None


def encode_subscription(subscription: Subscription) -> bytes:
    """The JoinGroup protocol metadata for ``subscription``, as version 3.

    Topics are sorted; owned partitions are grouped by topic, sorted; user data is
    written as bytes (empty when none). Raises :class:`~coopconsumer.ProtocolError`
    (an ``EncodeError``) when a value does not fit its wire type (e.g. a partition
    number beyond int32).
    """
    message = ConsumerProtocolSubscription(
        topics=tuple(sorted(subscription.topics)),
        user_data=subscription.user_data,
        owned_partitions=tuple(
            ConsumerProtocolSubscriptionTopicPartition(topic=topic, partitions=tuple(parts))
            for topic, parts in _group_by_topic(subscription.owned_partitions)
        ),
        generation_id=subscription.generation_id,
        rack_id=subscription.rack_id,
    )
    return _PREFIX_V3 + encode(message, CONSUMER_PROTOCOL_VERSION)


def decode_subscription(data: bytes, *, member_id: str | None = None) -> Subscription:
    """Parse a member's JoinGroup protocol metadata (versions 0 and up).

    Raises :class:`~coopconsumer.ProtocolError` naming ``member_id`` when the bytes are
    truncated or malformed.
    """
    message = _decode_versioned(data, ConsumerProtocolSubscription, "subscription", member_id)
    return Subscription(
        topics=message.topics,
        user_data=message.user_data or b"",
        owned_partitions=_flatten((tp.topic, tp.partitions) for tp in message.owned_partitions),
        generation_id=message.generation_id,
        rack_id=message.rack_id,
    )


def encode_assignment(assignment: Assignment) -> bytes:
    """The SyncGroup assignment bytes for ``assignment``, as version 3.

    Partitions are grouped by topic, topics and partitions sorted; user data is
    written as bytes (empty when none). A ``CompactPartitions`` (the built-in sticky
    assignors' result) is written from its partition numbers.
    """
    if isinstance(assignment.partitions, CompactPartitions):
        data = _encode_compact_assignment(assignment.partitions, assignment.user_data)
        if data is not None:
            return data
    message = ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            ConsumerProtocolAssignmentTopicPartition(topic=topic, partitions=tuple(parts))
            for topic, parts in _group_by_topic(assignment.partitions)
        ),
        user_data=assignment.user_data,
    )
    return _PREFIX_V3 + encode(message, CONSUMER_PROTOCOL_VERSION)


def decode_assignment(data: bytes, *, member_id: str | None = None) -> Assignment:
    """Parse a member's SyncGroup assignment (versions 0 and up).

    Raises :class:`~coopconsumer.ProtocolError` naming ``member_id`` when the bytes are
    truncated or malformed.
    """
    message = _decode_versioned(data, ConsumerProtocolAssignment, "assignment", member_id)
    return Assignment(
        partitions=_flatten((tp.topic, tp.partitions) for tp in message.assigned_partitions),
        user_data=message.user_data or b"",
    )
