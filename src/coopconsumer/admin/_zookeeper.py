"""``zookeeper``: the replica placement of ZooKeeper-era Kafka, on the client.

The same arithmetic as Kafka's ``AdminUtils.assignReplicasToBrokers`` (used by ZooKeeper
mode brokers and ``kafka-reassign-partitions``; KRaft controllers use the ``kraft``
assignor's placement instead): brokers sorted by id, or, when every
broker has a rack, alternated rack by rack (racks sorted by name, brokers by id within
a rack); partition ``p``'s first replica is broker ``(p + start) mod n``; the others
follow at a shift that grows by one every ``n`` partitions (times the rack count when
rack-aware), skipping brokers whose rack (or the broker itself) already holds a replica
while another rack (broker) holds none. New partitions of an existing topic start at
the broker of partition 0's first replica, as Kafka's ``createPartitions`` does.

Kafka draws ``start`` and the first shift at random; here both come from the topic name
(CRC-32) unless ``start_index`` fixes them, so the output is deterministic. With a fixed
start index the output equals Kafka's for the same brokers (docs/admin.md).

Pure: imports the standard library and the sibling ``_assignor``.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import ClassVar

from ._replica_assignor import ClusterView, NewPartitions, ReplicaAssignor, ReplicaAssignorError

__all__ = ["ZooKeeperReplicaAssignor", "kafka_placement", "rack_alternated"]


class ZooKeeperReplicaAssignor(ReplicaAssignor):
    """ZooKeeper-era Kafka's round-robin, rack-aware placement (see the module
    docstring).

    ``start_index`` fixes Kafka's random start index and first shift (``None``: derived
    from the topic name). Brokers with and without racks mixed is an error, as in
    Kafka's enforced rack-aware mode.
    """

    name: ClassVar[str] = "zookeeper"

    def __init__(self, start_index: int | None = None) -> None:
        if start_index is not None and start_index < 0:
            raise ValueError(f"start_index must be >= 0, not {start_index}")
        self.start_index = start_index

    def assign(
        self, partitions: NewPartitions, cluster: ClusterView
    ) -> Mapping[int, tuple[int, ...]]:
        racks = {b.node_id: b.rack for b in cluster.brokers.values()}
        existing = cluster.topic_assignment(partitions.topic)
        first_id = min(partitions.partition_ids, default=0)
        if existing and 0 in existing:
            brokers = sorted(racks)
            first = existing[0][0]
            start = next((i for i, b in enumerate(brokers) if b >= first), 0)
        elif self.start_index is not None:
            start = self.start_index
        else:
            start = zlib.crc32(partitions.topic.encode("utf-8")) % max(1, len(racks))
        placed = kafka_placement(
            racks,
            num_partitions=len(partitions.partition_ids),
            replication_factor=partitions.replication_factor,
            start_index=start,
            start_partition_id=first_id,
        )
        ids = sorted(partitions.partition_ids)
        return {pid: placed[first_id + i] for i, pid in enumerate(ids)}


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack: the first broker of each rack (racks by name),
    then the second of each, and so on (Kafka's ``getRackAlternatedBrokerList``)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(racks):
        for queue in queues:
            if depth < len(queue):
                out.append(queue[depth])
        depth += 1
    return out


def _replica_index(first: int, shift: int, index: int, n: int) -> int:
    return (first + 1 + (shift + index) % (n - 1)) % n


def kafka_placement(
    racks: Mapping[int, str | None],
    *,
    num_partitions: int,
    replication_factor: int,
    start_index: int,
    start_partition_id: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Kafka's ``assignReplicasToBrokers`` with a fixed start index (and first shift).

    ``racks`` maps every broker to its rack or None. Raises ``ReplicaAssignorError``
    for a bad count or replication factor, or racks given for some brokers only.
    """
    if num_partitions <= 0:
        raise ReplicaAssignorError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise ReplicaAssignorError("Replication factor must be larger than 0.")
    if replication_factor > len(racks):
        raise ReplicaAssignorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(racks)}."
        )
    with_rack = {b: r for b, r in racks.items() if r is not None}
    if not with_rack:
        return _rack_unaware(
            sorted(racks), num_partitions, replication_factor, start_index, start_partition_id
        )
    if len(with_rack) != len(racks):
        missing = sorted(b for b, r in racks.items() if r is None)
        raise ReplicaAssignorError(
            f"Not all brokers have rack information for replica rack aware assignment "
            f"(no rack: {missing})."
        )
    return _rack_aware(
        with_rack, num_partitions, replication_factor, start_index, start_partition_id
    )


def _rack_unaware(
    brokers: Sequence[int], count: int, rf: int, start: int, first_id: int
) -> dict[int, tuple[int, ...]]:
    n = len(brokers)
    shift = start
    out: dict[int, tuple[int, ...]] = {}
    partition = max(0, first_id)
    for _ in range(count):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [brokers[first]]
        replicas += [brokers[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
        out[partition] = tuple(replicas)
        partition += 1
    return out


def _rack_aware(
    racks: Mapping[int, str], count: int, rf: int, start: int, first_id: int
) -> dict[int, tuple[int, ...]]:
    arranged = rack_alternated(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    shift = start
    out: dict[int, tuple[int, ...]] = {}
    partition = max(0, first_id)
    for _ in range(count):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        leader = arranged[first]
        replicas = [leader]
        used_racks = {racks[leader]}
        used_brokers = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = racks[broker]
                k += 1
                # Skip a rack (broker) that already has a replica while another has none.
                if (rack not in used_racks or len(used_racks) == num_racks) and (
                    broker not in used_brokers or len(used_brokers) == n
                ):
                    replicas.append(broker)
                    used_racks.add(rack)
                    used_brokers.add(broker)
                    break
        out[partition] = tuple(replicas)
        partition += 1
    return out
