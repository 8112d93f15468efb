"""Compact assignments: partitions held as numbers, ``TopicPartition`` objects made on demand.

A large first assignment (a million partitions) would otherwise create and keep a
million ``TopicPartition`` tuples, and with the cyclic garbage collector running, the
collections that a million new container objects trigger cost more than the
assignment itself (docs/assignors.md, "Compact assignments"). The sticky assignors
instead number every partition of the subscribed topics (``PartitionSpace``) and give
each member a ``CompactPartitions``: the partitions it keeps (a tuple of
``TopicPartition``) followed by index runs (``range`` objects or lists of ints, which
the collector never walks) into that numbering.

``CompactPartitions`` behaves as the tuple of the same partitions in the same order:
equal to it (and hashing like it), iterable, sized, indexable, ``in``, ``+``, ordering.
The leader's checks (``_validation``) and the SyncGroup encoder
(``consumer_protocol.encode_assignment``) read the numbers directly.

Imports only the standard library and ``_types``; no I/O, no clock.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, repeat
from operator import add, itemgetter, lt
from typing import Any, cast, overload

from .._types import TopicPartition

__all__ = ["CompactPartitions", "PartitionSpace", "as_partition_number"]

# tuple.__new__(TopicPartition, (topic, p)) through map() builds named tuples in C.
_tuple_new = tuple.__new__
_topic_of = itemgetter(0)
_number_of = itemgetter(1)


def as_partition_number(value: object) -> int | None:
    """``value`` as an int when it is a number equal to one (``True``, ``1.0``), else None.

    Such a number matches the int's partition in sets and comparisons (equal numbers
    hash alike), so claims made with it must mark the same partition.
    """
    if isinstance(value, int):
        return int(value)
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number == value else None


class PartitionSpace:
    """Every partition of some topics, numbered ``0 .. total - 1``: topic by topic in
    the order given, each topic's partitions in numeric order.

    ``tables()`` builds, on first use, the topic and partition number of every index
    (two lists of ``total`` references to shared objects), which turn index runs into
    ``TopicPartition`` objects at C speed.
    """

    __slots__ = (
        "_number_at",
        "_topic_at",
        "count_of",
        "sorted",
        "start_of",
        "starts",
        "topics",
        "total",
    )

    def __init__(self, counts: Mapping[str, int]) -> None:
        self.topics: tuple[str, ...] = tuple(counts)
        #: Whether the topics are in sorted order (so indices sort as the wire does).
        self.sorted = list(self.topics) == sorted(self.topics)
        self.count_of: dict[str, int] = dict(counts)
        starts: list[int] = []
        total = 0
        for topic in self.topics:
            starts.append(total)
            total += counts[topic]
        #: The index of each topic's partition 0, in topic order.
        self.starts: tuple[int, ...] = tuple(starts)
        self.start_of: dict[str, int] = dict(zip(self.topics, starts, strict=True))
        self.total = total
        self._topic_at: list[str] | None = None
        self._number_at: list[int] | None = None

    def tables(self) -> tuple[list[str], list[int]]:
        """The topic and the partition number of every index."""
        if self._topic_at is None or self._number_at is None:
            numbers = list(range(max(self.count_of.values(), default=0)))
            topic_at: list[str] = []
            number_at: list[int] = []
            for topic in self.topics:
                n = self.count_of[topic]
                topic_at.extend(repeat(topic, n))
                number_at.extend(numbers[:n])
            self._topic_at, self._number_at = topic_at, number_at
        return self._topic_at, self._number_at

    def partitions(self, indices: Iterable[int]) -> Iterator[TopicPartition]:
        """The ``TopicPartition`` of each index, in order, made in C."""
        topic_at, number_at = self.tables()
        if not isinstance(indices, Sequence):
            indices = list(indices)
        return map(
            _tuple_new,
            repeat(TopicPartition),
            zip(
                map(topic_at.__getitem__, indices),
                map(number_at.__getitem__, indices),
                strict=True,
            ),
        )

    def index(self, tp: TopicPartition) -> int | None:
        """The index of ``tp``, or None when it is not a partition of this space."""
        topic, partition = tp
        count = self.count_of.get(topic)
        number = as_partition_number(partition)
        if count is None or number is None or not 0 <= number < count:
            return None
        return self.start_of[topic] + number

    def indices_of(self, partitions: Iterable[TopicPartition]) -> Iterator[int]:
        """The index of each of ``partitions`` that belongs to this space (others skipped)."""
        for tp in partitions:
            i = self.index(tp)
            if i is not None:
                yield i

    def unchecked_indices(self, partitions: Sequence[TopicPartition]) -> Iterator[int]:
        """``start_of[topic] + partition`` of each of ``partitions``, in C.

        Equal partitions give equal numbers, and valid distinct ones distinct numbers;
        a partition number out of range may collide with another topic's, and an
        unknown topic raises ``KeyError`` (callers use this only as a fast path that
        falls back to an exact check).
        """
        return map(
            add,
            map(self.start_of.__getitem__, map(_topic_of, partitions)),
            map(_number_of, partitions),
        )

    def topic_of(self, index: int) -> str:
        """The topic of one index."""
        return self.topics[bisect_right(self.starts, index) - 1]


class CompactPartitions(Sequence[TopicPartition]):
    """A read-only sequence of ``TopicPartition``: ``kept`` (partitions given as
    objects), then the partitions at ``runs`` (index sequences into ``space``).

    Equal to, and hashing like, the tuple of the same partitions in the same order;
    the built-in sticky assignors return it as ``Assignment.partitions``.
    """

    __slots__ = ("_hash", "_len", "kept", "runs", "space")

    def __init__(
        self, kept: Sequence[TopicPartition], space: PartitionSpace, runs: Sequence[Sequence[int]]
    ) -> None:
        self.kept: tuple[TopicPartition, ...] = tuple(kept)
        self.space = space
        self.runs: tuple[Sequence[int], ...] = tuple(r for r in runs if len(r))
        self._len = len(self.kept) + sum(map(len, self.runs))
        self._hash: int | None = None

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[TopicPartition]:
        if not self.runs:
            return iter(self.kept)
        return chain(self.kept, *map(self.space.partitions, self.runs))

    def __reversed__(self) -> Iterator[TopicPartition]:
        return reversed(tuple(self))

    def __contains__(self, value: object) -> bool:
        if value in self.kept:
            return True
        if not (isinstance(value, tuple) and len(value) == 2):
            return False
        try:
            i = self.space.index(TopicPartition(value[0], value[1]))
        except TypeError:  # an unhashable topic: equal to no partition, as in a tuple
            return False
        return i is not None and any(i in run for run in self.runs)

    @overload
    def __getitem__(self, index: int) -> TopicPartition: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[TopicPartition, ...]: ...

    def __getitem__(self, index: int | slice) -> TopicPartition | tuple[TopicPartition, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        i = index.__index__()
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("CompactPartitions index out of range")
        if i < len(self.kept):
            return self.kept[i]
        i -= len(self.kept)
        for run in self.runs:
            if i < len(run):
                return next(self.space.partitions((run[i],)))
            i -= len(run)
        raise AssertionError("unreachable: index within length")

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        return tuple(self).index(value, start, self._len if stop is None else stop)

    def count(self, value: Any) -> int:
        return tuple(self).count(value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CompactPartitions):
            return self._len == other._len and tuple(self) == tuple(other)
        if isinstance(other, tuple):
            return self._len == len(other) and tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self))
        return self._hash

    def _compare(self, other: object) -> tuple[TopicPartition, ...] | None:
        if isinstance(other, CompactPartitions):
            return tuple(other)
        if isinstance(other, tuple):
            return other
        return None

    def __lt__(self, other: object) -> bool:
        theirs = self._compare(other)
        return NotImplemented if theirs is None else tuple(self) < theirs

    def __le__(self, other: object) -> bool:
        theirs = self._compare(other)
        return NotImplemented if theirs is None else tuple(self) <= theirs

    def __gt__(self, other: object) -> bool:
        theirs = self._compare(other)
        return NotImplemented if theirs is None else tuple(self) > theirs

    def __ge__(self, other: object) -> bool:
        theirs = self._compare(other)
        return NotImplemented if theirs is None else tuple(self) >= theirs

    def __add__(self, other: object) -> tuple[TopicPartition, ...]:
        theirs = self._compare(other)
        if theirs is None:
            return NotImplemented
        return tuple(self) + theirs

    def __radd__(self, other: object) -> tuple[TopicPartition, ...]:
        theirs = self._compare(other)
        if theirs is None:
            return NotImplemented
        return theirs + tuple(self)

    def __mul__(self, times: int) -> tuple[TopicPartition, ...]:
        return tuple(self) * times

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickles as the tuple it equals: the index space stays behind.
        return (tuple, (tuple(self),))

    def sorted_numbers(self) -> tuple[list[tuple[str, int]], array[int]] | None:
        """The partitions as the wire lays them out, without ``TopicPartition`` objects:
        ``[(topic, how many), ...]`` in topic order, and every partition number, sorted
        within its topic, in that order.

        None when that takes objects after all (the kept partitions are not all
        ``int`` partitions of the space, or its topics are not in sorted order).
        """
        space = self.space
        kept = self._kept_indices()
        if kept is None or not space.sorted:
            return None
        indices = sorted(chain(kept, *self.runs))
        topic_at, number_at = space.tables()
        # Sorted indices run topic by topic (topics sorted): counting in C keeps that order.
        counts = Counter(map(topic_at.__getitem__, indices))
        return list(counts.items()), array("i", map(number_at.__getitem__, indices))

    def _kept_indices(self) -> list[int] | None:
        """The indices of ``kept``, or None unless each is an int partition of the space."""
        kept = self.kept
        if not kept:
            return []
        space = self.space
        topics = list(map(_topic_of, kept))
        numbers = list(map(_number_of, kept))
        limits = list(map(space.count_of.get, topics))
        if set(map(type, numbers)) != {int} or None in limits or min(numbers) < 0:
            return None
        if not all(map(lt, numbers, cast("list[int]", limits))):
            return None
        return list(map(add, map(space.start_of.__getitem__, topics), numbers))
