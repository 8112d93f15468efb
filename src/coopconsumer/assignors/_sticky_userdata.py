"""User data of the eager ``sticky`` and the ``cooperative-sticky`` assignors.

``StickyAssignorUserData`` (Java's ``StickyAssignor`` schema), written by V1, read as
V1 and then V0, the way Java does (trailing bytes ignored, as Java's ``Schema.read``)::

    V0: previous_assignment: [ {topic: string(int16 length), partitions: [int32]} ]
    V1: V0 + generation: int32

``cooperative-sticky`` user data is a bare big-endian int32 generation.

Decoders raise ``ValueError`` on malformed bytes; callers decide what a peer's bad
bytes mean (the assignors log and treat the member as owning nothing).

Imports only the standard library and ``TopicPartition``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from itertools import groupby, repeat
from operator import itemgetter

from .._types import TopicPartition

__all__ = [
    "decode_cooperative_generation",
    "decode_sticky_user_data",
    "encode_cooperative_generation",
    "encode_sticky_user_data",
]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_tuple_new = tuple.__new__


def _check_int32(value: int, what: str) -> None:
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"{what} {value} does not fit in an int32")


def encode_sticky_user_data(
    partitions: Iterable[TopicPartition], generation: int | None = None
) -> bytes:
    """StickyAssignorUserData: V1 when ``generation`` is given, V0 otherwise.

    Topics and partitions are written sorted, so equal assignments encode equally.
    """
    out = bytearray()
    by_topic = [
        (topic, [p for _, p in group])
        for topic, group in groupby(sorted(partitions), key=itemgetter(0))
    ]
    out += _INT32.pack(len(by_topic))
    for topic, numbers in by_topic:
        raw = topic.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise ValueError(f"topic name of {len(raw)} bytes does not fit an int16 length")
        out += _INT16.pack(len(raw))
        out += raw
        for p in numbers:
            _check_int32(p, "partition")
        out += _INT32.pack(len(numbers))
        out += struct.pack(f">{len(numbers)}i", *numbers)
    if generation is not None:
        _check_int32(generation, "generation")
        out += _INT32.pack(generation)
    return bytes(out)


def _read_assignment(data: bytes) -> tuple[list[TopicPartition], int]:
    """Read the ``previous_assignment`` array; return the partitions and the offset after."""
    size = len(data)
    if size < 4:
        raise ValueError("truncated: no topic count")
    (n_topics,) = _INT32.unpack_from(data, 0)
    pos = 4
    # Each topic takes at least 6 bytes (int16 name length, int32 count): bounds the
    # count before anything is allocated for it.
    if n_topics < 0 or n_topics * 6 > size - pos:
        raise ValueError(f"invalid topic count {n_topics}")
    partitions: list[TopicPartition] = []
    for _ in range(n_topics):
        if pos + 2 > size:
            raise ValueError("truncated topic name length")
        (name_len,) = _INT16.unpack_from(data, pos)
        pos += 2
        if name_len < 0 or pos + name_len > size:
            raise ValueError(f"invalid topic name length {name_len}")
        topic = data[pos : pos + name_len].decode("utf-8")
        pos += name_len
        if pos + 4 > size:
            raise ValueError("truncated partition count")
        (n_parts,) = _INT32.unpack_from(data, pos)
        pos += 4
        if n_parts < 0 or n_parts * 4 > size - pos:
            raise ValueError(f"invalid partition count {n_parts}")
        numbers = struct.unpack_from(f">{n_parts}i", data, pos)
        pos += 4 * n_parts
        partitions.extend(map(_tuple_new, repeat(TopicPartition), zip(repeat(topic), numbers)))
    return partitions, pos


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int | None]:
    """Decode StickyAssignorUserData: ``(partitions, generation)``.

    Tries V1 first, then V0 (generation None), as Java's
    ``deserializeTopicPartitionAssignment``. Raises ``ValueError`` when neither parses.
    """
    try:
        partitions, pos = _read_assignment(data)
    except (UnicodeDecodeError, struct.error) as exc:
        raise ValueError(str(exc)) from exc
    if pos + 4 <= len(data):
        (generation,) = _INT32.unpack_from(data, pos)
        return partitions, generation
    return partitions, None


def encode_cooperative_generation(generation: int) -> bytes:
    """cooperative-sticky user data: the generation as a big-endian int32."""
    _check_int32(generation, "generation")
    return _INT32.pack(generation)


def decode_cooperative_generation(data: bytes) -> int | None:
    """The generation in cooperative-sticky user data; None when there is none.

    Reads the first four bytes, ignoring any after (Java's ``ByteBuffer.getInt``).
    Fewer than four bytes carry no generation.
    """
    if len(data) < 4:
        return None
    (generation,) = _INT32.unpack_from(data, 0)
    return int(generation)
