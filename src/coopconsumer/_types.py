"""Small public value types shared by every layer.

Imports only the package's exception hierarchy (a leaf) and attrs.
"""

from __future__ import annotations

import struct
from typing import Any, Final, NamedTuple, Self

import attrs

from ._errors import ConfigurationError

__all__ = ["ConsumerGroupMetadata", "OffsetAndMetadata", "TopicPartition"]


class TopicPartition(NamedTuple):
    """A partition of a topic: frozen, hashable and ordered by ``(topic, partition)``.

    A named tuple rather than an attrs class: assignors build and hash millions of
    these per rebalance, and tuple construction and hashing run in C.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


#: The largest offset Kafka can store (its offsets are int64).
MAX_OFFSET: Final = 2**63 - 1


def _check_offset(instance: OffsetAndMetadata, attribute: object, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_OFFSET:
        raise ConfigurationError(
            f"invalid offset to commit: {value!r} (an int from 0 to {MAX_OFFSET}, the next "
            f"record to read)"
        )


@attrs.frozen(kw_only=True)
class OffsetAndMetadata:
    """An offset to commit (the next record to read), with optional metadata and the
    leader epoch of the last consumed record (-1 when unknown)."""

    offset: int = attrs.field(validator=_check_offset)
    metadata: str = ""
    leader_epoch: int = -1


#: librdkafka's serialized consumer group metadata, "CGMDv2" (``rdkafka_cgrp.c``,
#: ``rd_kafka_consumer_group_metadata_write``, unchanged since librdkafka 1.6): this
#: magic, the generation as a native-order int32, the group id and the member id each
#: followed by a NUL, then 1 (no instance id) or 0 followed by the instance id and a NUL.
_CGMD_MAGIC: Final = b"CGMDv2:"
_CGMD_GENERATION = struct.Struct("=i")


class ConsumerGroupMetadata(bytes):
    """What a member knows of its group, as Java's ``ConsumerGroupMetadata``: the group
    id, the generation (with ``group.protocol=consumer``, the member epoch), the member
    id and the static instance id.

    ``generation_id`` is -1 and ``member_id`` is ``""`` while the member is not in a
    generation.

    The value *is* the bytes confluent-kafka's
    ``Consumer.consumer_group_metadata()`` returns for the same state (librdkafka's
    serialized form), so it can be given to confluent-kafka's
    ``Producer.send_offsets_to_transaction`` as it is; docs/exactly-once.md says when
    that is safe. Immutable and hashable; equal when the four fields are equal.
    """

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None

    def __new__(
        cls,
        *,
        group_id: str,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> Self:
        instance = None if group_instance_id is None else str(group_instance_id)
        blob = b"".join(
            (
                _CGMD_MAGIC,
                _CGMD_GENERATION.pack(generation_id),
                str(group_id).encode(),
                b"\0",
                str(member_id).encode(),
                b"\0",
                b"\x01" if instance is None else b"\x00" + instance.encode() + b"\0",
            )
        )
        self = super().__new__(cls, blob)
        fields = self.__dict__
        fields["group_id"] = str(group_id)
        fields["generation_id"] = generation_id
        fields["member_id"] = str(member_id)
        fields["group_instance_id"] = instance
        return self

    @classmethod
    def from_bytes(cls, data: bytes) -> ConsumerGroupMetadata:
        """Read librdkafka's serialized form (what confluent-kafka's
        ``consumer_group_metadata()`` returns). Raises ``ValueError`` for anything else."""
        data = bytes(data)
        if not data.startswith(_CGMD_MAGIC):
            raise ValueError("not serialized consumer group metadata (no CGMDv2 magic)")
        rest = data[len(_CGMD_MAGIC) :]
        if len(rest) < _CGMD_GENERATION.size + 3:
            raise ValueError("serialized consumer group metadata is too short")
        (generation,) = _CGMD_GENERATION.unpack_from(rest)
        parts = rest[_CGMD_GENERATION.size :].split(b"\0", 2)
        if len(parts) != 3 or not parts[2]:
            raise ValueError("serialized consumer group metadata is truncated")
        group_id, member_id, tail = parts
        if tail == b"\x01":
            instance: str | None = None
        elif tail[:1] == b"\x00" and tail.endswith(b"\0") and b"\0" not in tail[1:-1]:
            instance = tail[1:-1].decode()
        else:
            raise ValueError("serialized consumer group metadata has a bad instance id field")
        return cls(
            group_id=group_id.decode(),
            generation_id=generation,
            member_id=member_id.decode(),
            group_instance_id=instance,
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ConsumerGroupMetadata is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ConsumerGroupMetadata is immutable (cannot delete {name!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _group_metadata,
            (self.group_id, self.generation_id, self.member_id, self.group_instance_id),
        )

    def __repr__(self) -> str:
        return (
            f"ConsumerGroupMetadata(group_id={self.group_id!r}, "
            f"generation_id={self.generation_id!r}, member_id={self.member_id!r}, "
            f"group_instance_id={self.group_instance_id!r})"
        )

    __str__ = __repr__


def _group_metadata(
    group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
) -> ConsumerGroupMetadata:
    """Unpickling helper (``__new__`` takes keywords only)."""
    return ConsumerGroupMetadata(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
    )
