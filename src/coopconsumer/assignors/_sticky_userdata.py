"""User data of the eager ``sticky`` and the ``cooperative-sticky`` assignors.

Adapters between the assignors' ``TopicPartition`` lists and the schemas declared in
``coopconsumer._protocol.consumer_protocol_schemas``:

* ``StickyAssignorUserData`` (Java's ``StickyAssignor``): V1 = previous assignment +
  generation, written always; read as V1, then V0 (no generation), as Java does.
* ``CooperativeStickyAssignorUserData``: a bare big-endian int32 generation; Java reads
  the first four bytes and ignores the rest.

Decoders raise ``ProtocolError`` on malformed bytes; the assignors decide what a peer's
bad bytes mean (they log and treat the member as owning nothing).

Imports the protocol schemas and codec, the public errors and ``TopicPartition``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from itertools import groupby, repeat
from operator import itemgetter

from .._protocol import decode, encode
from .._protocol.consumer_protocol_schemas import (
    CooperativeStickyAssignorUserData,
    StickyAssignorTopicPartitions,
    StickyAssignorUserData,
    decode_sticky_assignor_user_data,
)
from .._types import TopicPartition

__all__ = [
    "decode_cooperative_generation",
    "decode_sticky_user_data",
    "encode_cooperative_generation",
    "encode_sticky_user_data",
]

_tuple_new = tuple.__new__
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _by_topic(partitions: Iterable[TopicPartition]) -> tuple[StickyAssignorTopicPartitions, ...]:
    """Topics and partitions sorted, so equal assignments encode equally."""
    return tuple(
        StickyAssignorTopicPartitions(topic=topic, partitions=tuple(p for _, p in group))
        for topic, group in groupby(sorted(partitions), key=itemgetter(0))
    )


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """StickyAssignorUserData V1, topics and partitions sorted. Raises ``EncodeError``
    when a value does not fit its wire type."""
    data = StickyAssignorUserData(previous_assignment=_by_topic(partitions), generation=generation)
    return encode(data, 1)


def encode_sticky_user_data_v0(partitions: Iterable[TopicPartition]) -> bytes:
    """StickyAssignorUserData V0 (no generation), as pre-KIP-341 members send it."""
    return encode(StickyAssignorUserData(previous_assignment=_by_topic(partitions)), 0)


def decode_sticky_user_data(
    data: bytes, topic_names: dict[bytes, str] | None = None
) -> tuple[list[TopicPartition], int]:
    """``(partitions, generation)`` from StickyAssignorUserData; generation -1 for V0.

    ``topic_names`` caches decoded topic names across calls (a leader decodes every
    member's data; the names repeat). Raises ``ProtocolError`` when neither V1 nor V0
    parses.
    """
    fast = _read_well_formed(data, {} if topic_names is None else topic_names)
    if fast is not None:
        return fast
    decoded = decode_sticky_assignor_user_data(data)
    partitions: list[TopicPartition] = []
    for entry in decoded.previous_assignment:
        partitions.extend(
            map(_tuple_new, repeat(TopicPartition), zip(repeat(entry.topic), entry.partitions))
        )
    return partitions, decoded.generation


def _read_well_formed(
    data: bytes, names: dict[bytes, str]
) -> tuple[list[TopicPartition], int] | None:
    """The same answer as the schema decoder for well-formed bytes, else None.

    The generic codec builds one attrs object per topic entry; a leader reading 1800
    members x 500 topics spent 5 s there. This reads the two fixed layouts straight
    into ``TopicPartition``s and leaves anything unusual (negative lengths, truncation,
    bad UTF-8) to the schema decoder, which decides and reports. A property test pins
    the two together.
    """
    size = len(data)
    if size < 4:
        return None
    unpack16 = _INT16.unpack_from
    unpack32 = _INT32.unpack_from
    (n_topics,) = unpack32(data, 0)
    pos = 4
    if n_topics < 0 or n_topics * 6 > size - pos:
        return None
    partitions: list[TopicPartition] = []
    append = partitions.append
    for _ in range(n_topics):
        if pos + 2 > size:
            return None
        (name_len,) = unpack16(data, pos)
        pos += 2
        end = pos + name_len
        if name_len < 0 or end + 4 > size:
            return None
        raw = data[pos:end]
        topic = names.get(raw)
        if topic is None:
            try:
                topic = names[raw] = raw.decode("utf-8")
            except UnicodeDecodeError:
                return None
        (n_parts,) = unpack32(data, end)
        pos = end + 4
        if n_parts == 1 and pos + 4 <= size:
            append(_tuple_new(TopicPartition, (topic, unpack32(data, pos)[0])))
            pos += 4
            continue
        if n_parts < 0 or n_parts * 4 > size - pos:
            return None
        numbers = struct.unpack_from(f">{n_parts}i", data, pos)
        pos += 4 * n_parts
        partitions.extend(map(_tuple_new, repeat(TopicPartition), zip(repeat(topic), numbers)))
    if pos + 4 <= size:
        return partitions, unpack32(data, pos)[0]
    return partitions, -1


def encode_cooperative_generation(generation: int) -> bytes:
    """cooperative-sticky user data: the generation as a big-endian int32."""
    return encode(CooperativeStickyAssignorUserData(generation=generation), 0)


def decode_cooperative_generation(data: bytes) -> int:
    """The generation in cooperative-sticky user data (trailing bytes ignored).

    Raises ``ProtocolError`` when there are fewer than four bytes.
    """
    return decode(CooperativeStickyAssignorUserData, data, 0).generation
