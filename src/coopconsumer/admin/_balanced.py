"""``balanced``: placement that reads the cluster's current load (the placement scenarios).

Each replica of each new partition goes to the eligible broker with the fewest
replicas (then, among those, the broker on the least loaded rack, then the fewest
preferred leaderships, the fewest bytes, the lowest id), on a rack the partition does
not use yet while one is left; the member with the fewest preferred leaderships is put
first (the preferred leader), so leaderships spread too. That one rule covers the
four scenarios of pluggable replica placement (docs/admin.md has an example of each):

1. New brokers (no replicas) get new partitions first, until they catch up.
2. Brokers being drained (``draining``) get none.
3. Brokers whose storage is at or above ``max_storage_ratio`` get none. With JBOD
   (several log directories per broker, from DescribeLogDirs) what counts is the disk
   Kafka would put the new replica on (the one with the fewest replicas,
   ``LogManager.nextLogDirs``), not the broker's total: a broker with one nearly full
   disk that has few replicas gets none, since that is where the replica would land.
4. ``rule`` is called for every placement (every topic of every create call) and may
   return the brokers this topic may use, e.g. a tenant's brokers chosen by topic
   prefix or by the requesting principal (``NewPartitions.principal``); None means no
   restriction.

Loads (and each disk's replica count) are updated as replicas are placed, so one call
spreads its own partitions too. Placing 10,000 partitions x 3 replicas on 100 brokers
takes well under a second (benchmarks/replica_assignors.py prints the figure).

Pure: imports the standard library and the sibling ``_assignor``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import ClassVar

from ._replica_assignor import (
    BrokerLoad,
    ClusterView,
    NewPartitions,
    ReplicaAssignor,
    ReplicaAssignorError,
)

__all__ = ["BalancedReplicaAssignor", "PlacementRule"]

#: ``rule(partitions, cluster)``: the brokers this placement may use, or None for all.
PlacementRule = Callable[[NewPartitions, ClusterView], Collection[int] | None]


class BalancedReplicaAssignor(ReplicaAssignor):
    """Least-loaded, rack- and disk-aware placement (see the module docstring).

    ``draining``: broker ids that get no new replicas. ``max_storage_ratio``: brokers
    whose storage (the disk a new replica would go to, with JBOD) is used to at least
    this get none (1.0 disables the check; brokers whose storage is unknown are
    eligible). ``rule``: the per-call hook. Raises ``ValueError`` for a ratio outside
    (0, 1].
    """

    name: ClassVar[str] = "balanced"

    def __init__(
        self,
        *,
        draining: Iterable[int] = (),
        max_storage_ratio: float = 0.85,
        rule: PlacementRule | None = None,
    ) -> None:
        if not 0.0 < max_storage_ratio <= 1.0:
            raise ValueError(f"max_storage_ratio must be in (0, 1], not {max_storage_ratio}")
        self.draining = frozenset(draining)
        self.max_storage_ratio = max_storage_ratio
        self.rule = rule

    def eligible(self, partitions: NewPartitions, cluster: ClusterView) -> list[int]:
        """The brokers this placement may use, by id; why others are left out is in
        the ``ReplicaAssignorError`` raised when too few remain."""
        allowed: Collection[int] | None = None
        if self.rule is not None:
            allowed = self.rule(partitions, cluster)
        out = []
        for broker in cluster.brokers.values():
            if broker.node_id in self.draining:
                continue
            if allowed is not None and broker.node_id not in allowed:
                continue
            if self._full(broker, {d.path: d.replicas for d in broker.log_dirs}):
                continue
            out.append(broker.node_id)
        return out

    def _full(self, broker: BrokerLoad, dir_replicas: Mapping[str, int]) -> bool:
        """Whether a new replica would land on storage at or above the ratio: the
        disk with the fewest replicas when the disks are known, else the broker."""
        if self.max_storage_ratio >= 1.0:
            return False
        if broker.log_dirs:
            target = min(broker.log_dirs, key=lambda d: dir_replicas[d.path])
            ratio = target.storage_ratio
        else:
            ratio = broker.storage_ratio
        return ratio is not None and ratio >= self.max_storage_ratio

    def assign(
        self, partitions: NewPartitions, cluster: ClusterView
    ) -> Mapping[int, tuple[int, ...]]:
        eligible = self.eligible(partitions, cluster)
        rf = partitions.replication_factor
        if rf <= 0:
            raise ReplicaAssignorError("Replication factor must be larger than 0.")
        if len(eligible) < rf:
            raise ReplicaAssignorError(
                f"{partitions.topic!r} needs {rf} brokers per partition but only "
                f"{len(eligible)} are eligible ({sorted(eligible)}): draining "
                f"{sorted(self.draining)}, storage at or above {self.max_storage_ratio:.0%} "
                f"or excluded by the placement rule"
            )
        pool = _Pool(cluster, eligible, self._full)
        out: dict[int, tuple[int, ...]] = {}
        for partition in sorted(partitions.partition_ids):
            chosen: list[int] = []
            racks_used: set[str | None] = set()
            for _ in range(rf):
                # Another rack while some rack has no replica of this partition yet.
                spread = pool.num_racks > len(racks_used - {None})
                broker = pool.best(chosen, racks_used if spread else set())
                if broker is None:
                    raise ReplicaAssignorError(
                        f"no eligible broker left for a replica of "
                        f"{partitions.topic}-{partition} (disks full or racks used)"
                    )
                chosen.append(broker)
                racks_used.add(pool.rack[broker])
            # The member with the fewest leaderships leads: leaders spread as well.
            leader = min(chosen, key=lambda b: (pool.leaders[b], b))
            chosen.remove(leader)
            chosen.insert(0, leader)
            pool.place(chosen)
            out[partition] = tuple(chosen)
        return out


class _Pool:
    """The eligible brokers, one lazy heap per rack keyed (replicas, leaders, bytes,
    id): entries whose counts are stale are dropped when met."""

    def __init__(
        self,
        cluster: ClusterView,
        eligible: Iterable[int],
        full: Callable[[BrokerLoad, Mapping[str, int]], bool],
    ) -> None:
        brokers = cluster.brokers
        self.loads = {b: brokers[b] for b in eligible}
        self.full = full
        self.rack = {b: load.rack for b, load in self.loads.items()}
        self.replicas = {b: load.replicas for b, load in self.loads.items()}
        self.leaders = {b: load.leaders for b, load in self.loads.items()}
        self.used = {b: load.used_bytes or 0 for b, load in self.loads.items()}
        self.dir_replicas = {
            b: {d.path: d.replicas for d in load.log_dirs} for b, load in self.loads.items()
        }
        self.num_racks = len({r for r in self.rack.values() if r is not None})
        self.heaps: dict[str | None, list[tuple[int, int, int, int]]] = {}
        self.rack_replicas: dict[str | None, int] = {}
        self.rack_size: dict[str | None, int] = {}
        for b in self.loads:
            r = self.rack[b]
            self.heaps.setdefault(r, []).append(self._key(b))
            self.rack_replicas[r] = self.rack_replicas.get(r, 0) + self.replicas[b]
            self.rack_size[r] = self.rack_size.get(r, 0) + 1
        for heap in self.heaps.values():
            heapq.heapify(heap)
        #: Each rack's best broker while nothing on the rack changed.
        self.tops: dict[str | None, tuple[int, int, int, int] | None] = {}

    def _key(self, b: int) -> tuple[int, int, int, int]:
        return (self.replicas[b], self.leaders[b], self.used[b], b)

    def _scan(self, rack: str | None, skip: Collection[int]) -> tuple[int, int, int, int] | None:
        heap = self.heaps[rack]
        held: list[tuple[int, int, int, int]] = []
        try:
            while heap:
                key = heap[0]
                b = key[-1]
                if b not in self.loads or key != self._key(b):
                    heapq.heappop(heap)  # stale, or a broker whose disk filled up
                    continue
                if b in skip:
                    held.append(heapq.heappop(heap))
                    continue
                return key
            return None
        finally:
            for key in held:
                heapq.heappush(heap, key)

    def best(self, chosen: Collection[int], racks_used: Collection[str | None]) -> int | None:
        """The next replica's broker: fewest replicas, then least loaded rack."""
        best: tuple[float, ...] | None = None
        holding = {self.rack[b] for b in chosen}  # racks whose best may be taken
        tops = self.tops
        for rack in self.heaps:
            if rack in racks_used:
                continue
            if rack in holding:
                key = self._scan(rack, chosen)
            elif rack in tops:
                key = tops[rack]
            else:
                key = tops[rack] = self._scan(rack, ())
            if key is None:
                continue
            rank = (key[0], self.rack_replicas[rack] / self.rack_size[rack], *key[1:])
            if best is None or rank < best:
                best = rank
        return None if best is None else int(best[-1])

    def place(self, replicas: list[int]) -> None:
        self.leaders[replicas[0]] += 1
        for b in replicas:
            self.tops.pop(self.rack[b], None)
            self.replicas[b] += 1
            self.rack_replicas[self.rack[b]] += 1
            dirs = self.dir_replicas[b]
            if dirs:
                target = min(self.loads[b].log_dirs, key=lambda d: dirs[d.path])
                dirs[target.path] += 1
                if self.full(self.loads[b], dirs):
                    del self.loads[b]  # its next disk is full now: no more replicas
                    continue
            heapq.heappush(self.heaps[self.rack[b]], self._key(b))
