"""``kraft``: the replica placement of Kafka's KRaft controller, on the client.

The same behaviour as Kafka's ``StripedReplicaPlacer`` (every Kafka since 3.x places
new topics and partitions with it; 4.x has nothing else). Racks are visited round
robin, starting one rack further for each partition, and brokers within a rack round
robin too, which gives the "striped" pattern; the leader is always an unfenced broker,
followers go to fenced brokers only when the unfenced ones run out. Partitions added to
an existing topic continue from where its last partition left off. Once as many
partitions as there are unfenced brokers have been placed, racks and brokers are
shuffled so the pattern does not repeat.

Kafka draws the starting offsets and the shuffles from ``java.util.Random``. Here they
come from the same linear congruential generator as Kafka's own ``MockRandom`` test
helper, seeded with ``seed`` (or, by default, from the topic name), and the draws are
made in the same order as Kafka's, Java ``HashMap`` iteration order included, so with
``seed=17`` the output equals what Kafka's placer tests expect (tests/admin checks every
case of Kafka's ``StripedReplicaPlacerTest``). docs/admin.md, "Replica assignors".

Pure: imports the standard library and the sibling ``_assignor``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, Final, TypeVar

from ._replica_assignor import ClusterView, NewPartitions, ReplicaAssignor, ReplicaAssignorError

__all__ = ["JavaRandom", "KRaftReplicaAssignor", "UsableBroker", "striped_placement"]

T = TypeVar("T")

_MASK64: Final = (1 << 64) - 1
#: The state Kafka's ``MockRandom`` starts from.
MOCK_RANDOM_SEED: Final = 17


class JavaRandom:
    """``java.util.Random``'s ``nextInt(bound)`` over the generator of Kafka's
    ``MockRandom``: ``state = state * 2862933555777941757 + 3037000493`` (mod 2^64),
    the top ``bits`` bits drawn."""

    def __init__(self, state: int = MOCK_RANDOM_SEED) -> None:
        self.state = state & _MASK64

    def next_bits(self, bits: int) -> int:
        self.state = (self.state * 2862933555777941757 + 3037000493) & _MASK64
        value = self.state >> (64 - bits)
        # Java's (int) cast: keep 32 bits, signed.
        value &= 0xFFFFFFFF
        return value - (1 << 32) if value >= 1 << 31 else value

    def next_int(self, bound: int) -> int:
        """Uniform in ``[0, bound)``, exactly as ``Random.nextInt(int)`` draws it."""
        if bound <= 0:
            raise ValueError("bound must be positive")
        r = self.next_bits(31)
        m = bound - 1
        if bound & m == 0:  # a power of two: the top bits
            return (bound * r) >> 31
        u = r
        r = u % bound
        while u - r + m >= 1 << 31:  # Java's int overflow test: reject the last partial range
            u = self.next_bits(31)
            r = u % bound
        return r

    def shuffle(self, items: list[T]) -> None:
        """``Collections.shuffle(list, random)``."""
        for i in range(len(items), 1, -1):
            j = self.next_int(i)
            items[i - 1], items[j] = items[j], items[i - 1]


def _java_string_hash(text: str) -> int:
    """``String.hashCode()`` over UTF-16 code units, as an unsigned 32-bit value."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h


def _hash_map_order(keys: Sequence[str | None]) -> list[str | None]:
    """The iteration order of a ``java.util.HashMap<Optional<String>, _>`` into which
    ``keys`` were put in this order: by bucket of the spread hash, then insertion."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str | None) -> int:
        h = 0 if key is None else _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return [k for _, k in sorted(enumerate(keys), key=lambda item: (bucket(item[1]), item[0]))]


class UsableBroker:
    """A broker the placer may use: id, rack, and whether it is fenced."""

    __slots__ = ("fenced", "node_id", "rack")

    def __init__(self, node_id: int, rack: str | None = None, fenced: bool = False) -> None:
        self.node_id = node_id
        self.rack = rack
        self.fenced = fenced


class _BrokerList:
    """Brokers visited round robin from an offset; each iteration epoch starts one
    further along and returns each broker once."""

    __slots__ = ("brokers", "epoch", "index", "offset")

    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.index = 0
        self.offset = 0
        self.epoch = 0

    def add(self, broker: int) -> _BrokerList:
        self.brokers.append(broker)
        return self

    def initialize(self, random: JavaRandom) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = random.next_int(len(self.brokers))

    def initialize_after(self, previous_offset: int) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = (previous_offset + 1) % len(self.brokers)

    def next(self, epoch: int) -> int:
        """The next broker of this epoch, -1 when every one was returned."""
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


class _Rack:
    __slots__ = ("fenced", "unfenced")

    def __init__(self) -> None:
        self.fenced = _BrokerList()
        self.unfenced = _BrokerList()

    def next(self, epoch: int) -> int:
        """An unfenced broker while there is one this epoch, then a fenced one."""
        broker = self.unfenced.next(epoch)
        return broker if broker >= 0 else self.fenced.next(epoch)


def _invalid_rf(message: str) -> ReplicaAssignorError:
    return ReplicaAssignorError(message)


class _RackList:
    """Racks visited round robin; see the module docstring."""

    def __init__(
        self,
        random: JavaRandom,
        brokers: Iterable[UsableBroker],
        existing: Sequence[Sequence[int]] = (),
    ) -> None:
        self.random = random
        self.racks: dict[str | None, _Rack] = {}
        inserted: list[str | None] = []
        rack_of: dict[int, str | None] = {}
        self.num_total = self.num_unfenced = 0
        for b in brokers:
            rack_of[b.node_id] = b.rack
            rack = self.racks.get(b.rack)
            if rack is None:
                rack = self.racks[b.rack] = _Rack()
                inserted.append(b.rack)
            if b.fenced:
                rack.fenced.add(b.node_id)
            else:
                rack.unfenced.add(b.node_id)
                self.num_unfenced += 1
            self.num_total += 1
        # Kafka walks its HashMap of racks here, drawing from the generator per rack.
        self.map_order = _hash_map_order(inserted)
        for name in self.map_order:
            rack = self.racks[name]
            previous = previous_broker_offset(rack_of, existing, name, rack.unfenced.brokers)
            rack.fenced.initialize(random)
            if previous is None:
                rack.unfenced.initialize(random)
            else:
                rack.unfenced.initialize_after(previous)
        # Kafka's OptionalStringComparator: no rack first, then String.compareTo (UTF-16).
        self.rack_names = sorted(
            inserted, key=lambda r: (r is not None, (r or "").encode("utf-16-be"))
        )
        previous_rack = previous_rack_offset(rack_of, existing, self.rack_names)
        if previous_rack is not None:
            self.offset = (previous_rack + 1) % len(self.rack_names)
        else:
            self.offset = random.next_int(len(self.rack_names)) if self.rack_names else 0
        self.epoch = 0

    def place(self, replication_factor: int) -> list[int]:
        _check(replication_factor, self.num_total, self.num_unfenced)
        # After as many placements as there are unfenced brokers, shuffle so the same
        # assignments do not come round again (not with one broker: it would loop).
        if self.epoch == self.num_unfenced and self.num_unfenced > 1:
            self.random.shuffle(self.rack_names)
            for name in self.map_order:
                self.random.shuffle(self.racks[name].fenced.brokers)
                self.random.shuffle(self.racks[name].unfenced.brokers)
            self.epoch = 0
        if self.offset == len(self.rack_names):
            self.offset = 0
        first_rack = self.offset
        while True:  # the leader: the first unfenced broker from the offset on
            leader = self.racks[self.rack_names[first_rack]].unfenced.next(self.epoch)
            if leader >= 0:
                break
            first_rack = (first_rack + 1) % len(self.rack_names)
        chosen = [leader]
        rack_index = self.offset
        for _ in range(1, replication_factor):
            broker = -1
            while broker < 0:
                if rack_index == first_rack:
                    first_rack = -1  # the leader's rack gave its broker already
                else:
                    broker = self.racks[self.rack_names[rack_index]].next(self.epoch)
                rack_index = (rack_index + 1) % len(self.rack_names)
            chosen.append(broker)
        self.epoch += 1
        self.offset += 1
        return chosen


def _check(replication_factor: int, total: int, unfenced: int) -> None:
    if replication_factor <= 0:
        raise _invalid_rf(
            f"Invalid replication factor {replication_factor}: the replication factor "
            "must be positive."
        )
    if replication_factor > total:
        raise _invalid_rf(
            f"The target replication factor of {replication_factor} cannot be reached "
            f"because only {total} broker(s) are registered."
        )
    if unfenced == 0:
        raise _invalid_rf("All brokers are currently fenced.")


def previous_rack_offset(
    rack_of: Mapping[int, str | None],
    existing: Sequence[Sequence[int]],
    racks: Sequence[str | None],
) -> int | None:
    """The index in ``racks`` of the rack of the last existing partition's leader."""
    if not existing:
        return None
    leader = existing[-1][0]
    if leader not in rack_of:
        return None
    rack = rack_of[leader]
    return racks.index(rack) if rack in racks else None


def previous_broker_offset(
    rack_of: Mapping[int, str | None],
    existing: Sequence[Sequence[int]],
    rack: str | None,
    unfenced: Sequence[int],
) -> int | None:
    """The index in ``unfenced`` of the last broker of ``rack`` the existing
    partitions used (latest partition first, replicas in order); None when it is not
    an unfenced broker, or the rack was not used."""
    for replicas in reversed(existing):
        for broker in replicas:
            if broker not in rack_of:
                continue
            if rack_of[broker] == rack:
                return unfenced.index(broker) if broker in unfenced else None
    return None


def striped_placement(
    brokers: Iterable[UsableBroker],
    *,
    num_partitions: int,
    replication_factor: int,
    existing: Sequence[Sequence[int]] = (),
    random: JavaRandom | None = None,
) -> list[list[int]]:
    """Kafka's ``StripedReplicaPlacer.place``: the replicas of ``num_partitions`` new
    partitions (leader first), after the ``existing`` partitions of the topic (their
    replicas, in partition order). ``ReplicaAssignorError`` with Kafka's messages for
    a replication factor that is not positive or above the broker count, or when every
    broker is fenced."""
    rack_list = _RackList(random or JavaRandom(), brokers, existing)
    _check(replication_factor, rack_list.num_total, rack_list.num_unfenced)
    return [rack_list.place(replication_factor) for _ in range(num_partitions)]


class KRaftReplicaAssignor(ReplicaAssignor):
    """The placement of Kafka's KRaft controller (``StripedReplicaPlacer``; see the
    module docstring), the default.

    ``seed`` fixes the generator's starting state (Kafka's ``MockRandom`` starts at
    17); None derives it from the topic name, so the same cluster and topic always give
    the same placement. Partitions that exist already (a reassignment plan places them
    again) draw from a generator seeded by topic and partition, so one-by-one
    placements spread over the brokers. Fenced brokers
    (``ClusterView.fenced_brokers``) take followers only when the unfenced ones run
    out, never a leader.
    """

    name: ClassVar[str] = "kraft"

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def assign(
        self, partitions: NewPartitions, cluster: ClusterView
    ) -> Mapping[int, tuple[int, ...]]:
        usable = [
            UsableBroker(b.node_id, b.rack, fenced=False) for b in cluster.brokers.values()
        ] + [
            UsableBroker(b.node_id, b.rack, fenced=True)
            for b in cluster.fenced_brokers.values()
            if b.node_id not in cluster.brokers
        ]
        usable.sort(key=lambda b: b.node_id)
        ids = sorted(partitions.partition_ids)
        existing = cluster.topic_assignment(partitions.topic)
        # New partitions of a topic continue its stripes (Kafka's createPartitions).
        # Partitions placed again (a reassignment plan, one partition at a time) start
        # afresh, from offsets drawn for that partition, so they spread out.
        again = bool(set(ids) & set(existing))
        before = [] if again else [existing[p] for p in sorted(existing)]
        seed = self.seed
        if seed is None or again:
            name = f"{partitions.topic}-{ids[0]}" if again else partitions.topic
            seed = zlib.crc32(name.encode("utf-8")) ^ (self.seed or 0)
        placed = striped_placement(
            usable,
            num_partitions=len(ids),
            replication_factor=partitions.replication_factor,
            existing=before,
            random=JavaRandom(seed),
        )
        return {pid: tuple(replicas) for pid, replicas in zip(ids, placed, strict=True)}
