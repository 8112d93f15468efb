"""Small public value types shared by every layer.

Imports nothing from the rest of the package.
"""

from __future__ import annotations

from typing import NamedTuple

import attrs

__all__ = ["ConsumerGroupMetadata", "TopicPartition"]


class TopicPartition(NamedTuple):
    """A partition of a topic: frozen, hashable and ordered by ``(topic, partition)``.

    A named tuple rather than an attrs class: assignors build and hash millions of
    these per rebalance, and tuple construction and hashing run in C.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def _optional_str(value: str | None) -> str | None:
    return None if value is None else str(value)


@attrs.frozen(kw_only=True)
class ConsumerGroupMetadata:
    """What a member knows of its group, as Java's ``ConsumerGroupMetadata``.

    ``generation_id`` is -1 and ``member_id`` is ``""`` while the member is not in a
    generation.
    """

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = attrs.field(default=None, converter=_optional_str)
