"""``balanced``: placement that reads the cluster's current load (seed 001's scenarios).

Each replica of each new partition goes to the eligible broker with the fewest
replicas (then the fewest preferred leaderships, the fewest bytes, the lowest id),
preferring racks the partition does not use yet; the member with the fewest preferred
leaderships is put first (the preferred leader), so leaderships spread too. That one
rule covers the seed's scenarios (docs/admin.md has an example of each):

1. New brokers (no replicas) get new partitions first, until they catch up.
2. Brokers being drained (``draining``) get none.
3. Brokers at or above ``max_storage_ratio`` of their storage (DescribeLogDirs' used
   and total bytes) get none.
4. ``rule`` is called for every placement (every topic of every create call) and may
   return the brokers this topic may use, e.g. a tenant's brokers chosen by topic
   prefix; None means no restriction.

Loads are updated as replicas are placed, so one call spreads its own partitions too.
Placing 10,000 partitions x 3 replicas on 100 brokers takes well under a second
(benchmarks/replica_assignors.py prints the figure).

Pure: imports the standard library and the sibling ``_assignor``.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import ClassVar

from ._assignor import ClusterView, NewPartitions, ReplicaAssignor, ReplicaAssignorError

__all__ = ["BalancedReplicaAssignor", "PlacementRule"]

#: ``rule(partitions, cluster)``: the brokers this placement may use, or None for all.
PlacementRule = Callable[[NewPartitions, ClusterView], Collection[int] | None]


class BalancedReplicaAssignor(ReplicaAssignor):
    """Least-loaded, rack-diverse placement (see the module docstring).

    ``draining``: broker ids that get no new replicas. ``max_storage_ratio``: brokers
    whose used/total storage is at least this get none (1.0 disables the check;
    brokers whose storage is unknown are eligible). ``rule``: the per-call hook.
    Raises ``ValueError`` for a ratio outside (0, 1].
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
            ratio = broker.storage_ratio
            if (
                self.max_storage_ratio < 1.0
                and ratio is not None
                and ratio >= self.max_storage_ratio
            ):
                continue
            out.append(broker.node_id)
        return out

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
        brokers = cluster.brokers
        rack = {b: brokers[b].rack for b in eligible}
        replicas = {b: brokers[b].replicas for b in eligible}
        leaders = {b: brokers[b].leaders for b in eligible}
        used = {b: brokers[b].used_bytes or 0 for b in eligible}
        # A lazy heap keyed (replicas, leaders, bytes, id): entries whose counts are
        # stale are skipped when popped.
        heap: list[tuple[int, ...]] = [(replicas[b], leaders[b], used[b], b) for b in eligible]
        heapq.heapify(heap)
        num_racks = len({r for r in rack.values() if r is not None})

        def current(key: tuple[int, ...], b: int) -> bool:
            return key == (replicas[b], leaders[b], used[b], b)

        out: dict[int, tuple[int, ...]] = {}
        for partition in sorted(partitions.partition_ids):
            chosen: list[int] = []
            chosen_racks: set[str | None] = set()
            for _ in range(rf):
                # Another rack while some rack has no replica of this partition yet.
                spread = num_racks > len(chosen_racks - {None})
                broker = _pop_best(
                    heap, current, functools.partial(_fits, chosen, chosen_racks, rack, spread)
                )
                chosen.append(broker)
                chosen_racks.add(rack[broker])
            # The member with the fewest leaderships leads: leaders spread as well.
            leader = min(chosen, key=lambda b: (leaders[b], b))
            chosen.remove(leader)
            chosen.insert(0, leader)
            leaders[leader] += 1
            for b in chosen:
                replicas[b] += 1
                heapq.heappush(heap, (replicas[b], leaders[b], used[b], b))
            out[partition] = tuple(chosen)
        return out


def _fits(
    chosen: list[int],
    chosen_racks: set[str | None],
    rack: Mapping[int, str | None],
    spread: bool,
    broker: int,
) -> bool:
    """Whether ``broker`` may take the next replica of a partition."""
    return broker not in chosen and not (spread and rack[broker] in chosen_racks)


def _pop_best(
    heap: list[tuple[int, ...]],
    current: Callable[[tuple[int, ...], int], bool],
    fits: Callable[[int], bool],
) -> int:
    """The broker of the smallest up-to-date heap entry that ``fits``; entries that
    are up to date but do not fit are pushed back. The broker's entry is removed (the
    caller pushes a new one)."""
    skipped: list[tuple[int, ...]] = []
    seen: set[int] = set()
    try:
        while heap:
            key = heapq.heappop(heap)
            broker = key[-1]
            if not current(key, broker) or broker in seen:
                continue  # stale, or a duplicate of an entry already looked at
            seen.add(broker)
            if fits(broker):
                return broker
            skipped.append(key)
        raise ReplicaAssignorError("no eligible broker left for a replica")
    finally:
        for key in skipped:
            heapq.heappush(heap, key)
