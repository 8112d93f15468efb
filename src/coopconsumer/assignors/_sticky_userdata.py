"""User data of the eager ``sticky`` and the ``cooperative-sticky`` assignors.

Adapters between the assignors' ``TopicPartition`` lists and the schemas declared in
``coopconsumer._protocol.consumer``:

* ``StickyAssignorUserData`` (Java's ``StickyAssignor``): V1 = previous assignment +
  generation, written always; read as V1, then V0 (no generation), as Java does.
* ``CooperativeStickyAssignorUserData``: a bare big-endian int32 generation; Java reads
  the first four bytes and ignores the rest.

Decoders raise ``ProtocolError`` on malformed bytes; the assignors decide what a peer's
bad bytes mean (they log and treat the member as owning nothing).

Imports the protocol schemas and codec, the public errors and ``TopicPartition``.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby, repeat
from operator import itemgetter

from .._protocol import decode, encode
from .._protocol.consumer import (
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


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """StickyAssignorUserData V1, topics and partitions sorted (equal assignments encode
    equally). Raises ``EncodeError`` when a value does not fit its wire type."""
    by_topic = tuple(
        StickyAssignorTopicPartitions(topic=topic, partitions=tuple(p for _, p in group))
        for topic, group in groupby(sorted(partitions), key=itemgetter(0))
    )
    return encode(StickyAssignorUserData(previous_assignment=by_topic, generation=generation), 1)


def encode_sticky_user_data_v0(partitions: Iterable[TopicPartition]) -> bytes:
    """StickyAssignorUserData V0 (no generation), as pre-KIP-341 members send it."""
    by_topic = tuple(
        StickyAssignorTopicPartitions(topic=topic, partitions=tuple(p for _, p in group))
        for topic, group in groupby(sorted(partitions), key=itemgetter(0))
    )
    return encode(StickyAssignorUserData(previous_assignment=by_topic), 0)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int]:
    """``(partitions, generation)`` from StickyAssignorUserData; generation -1 for V0.

    Raises ``ProtocolError`` when neither V1 nor V0 parses.
    """
    decoded = decode_sticky_assignor_user_data(data)
    partitions: list[TopicPartition] = []
    for entry in decoded.previous_assignment:
        partitions.extend(
            map(_tuple_new, repeat(TopicPartition), zip(repeat(entry.topic), entry.partitions))
        )
    return partitions, decoded.generation


def encode_cooperative_generation(generation: int) -> bytes:
    """cooperative-sticky user data: the generation as a big-endian int32."""
    return encode(CooperativeStickyAssignorUserData(generation=generation), 0)


def decode_cooperative_generation(data: bytes) -> int:
    """The generation in cooperative-sticky user data (trailing bytes ignored).

    Raises ``ProtocolError`` when there are fewer than four bytes.
    """
    return decode(CooperativeStickyAssignorUserData, data, 0).generation
