"""Benchmark: replica assignors placing 10,000 partitions x RF 3 on 100 brokers.

    python benchmarks/replica_assignors.py [--partitions N] [--brokers N] [--racks N]
                                           [--repeat N]

The cluster already hosts 20,000 partitions x RF 3 spread unevenly (brokers 91-100
are new and empty, brokers 1-5 are 90% full), across 5 racks. Timed: ``balanced``
placing one new topic of 10,000 partitions, ``kraft`` (the default: the KRaft
controller's striped placement) and ``zookeeper`` (ZooKeeper-era Kafka's placement) on
the same input: inside the timed window, one ``assign()`` call and nothing else.
Each is run ``--repeat`` times on the same input (best and median printed). Every
result is checked outside the timed region: each partition placed once with 3
distinct brokers on 3 racks, no replica on a full broker (balanced), and the replica
spread per broker after placement is printed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Mapping

from coopconsumer._types import TopicPartition
from coopconsumer.admin import (
    BalancedReplicaAssignor,
    BrokerLoad,
    ClusterView,
    KRaftReplicaAssignor,
    NewPartitions,
    ReplicaAssignor,
    ZooKeeperReplicaAssignor,
)
from coopconsumer.admin._replica_assignor import check_assignment


def build_cluster(brokers: int, racks: int, existing: int) -> ClusterView:
    """``existing`` partitions x 3 replicas on the older 90% of brokers, round robin;
    the last 10% are new and empty; the first 5% are 90% full."""
    old = max(3, brokers * 9 // 10)
    assignments: dict[TopicPartition, tuple[int, ...]] = {}
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    for p in range(existing):
        chosen = tuple(1 + (p + k * 7) % old for k in range(3))
        if len(set(chosen)) < 3:
            chosen = tuple(1 + (p + k) % old for k in range(3))
        assignments[TopicPartition(f"old-{p // 1000}", p % 1000)] = chosen
        replicas.update(chosen)
        leaders[chosen[0]] += 1
    full = set(range(1, max(1, brokers // 20) + 1))
    loads = [
        BrokerLoad(
            node_id=b,
            rack=f"rack-{(b - 1) % racks}",
            replicas=replicas[b],
            leaders=leaders[b],
            used_bytes=(900 if b in full else 300) * 2**30,
            total_bytes=1000 * 2**30,
        )
        for b in range(1, brokers + 1)
    ]
    return ClusterView(brokers=loads, assignments=assignments)


def run(
    assignor: ReplicaAssignor, partitions: NewPartitions, cluster: ClusterView, repeat: int
) -> tuple[list[float], Mapping[int, tuple[int, ...]]]:
    times = []
    result: Mapping[int, tuple[int, ...]] = {}
    for _ in range(repeat):
        start = time.perf_counter()
        result = assignor.assign(partitions, cluster)
        times.append(time.perf_counter() - start)
    return times, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--racks", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cluster = build_cluster(args.brokers, args.racks, existing=20_000)
    partitions = NewPartitions(
        topic="bench", partition_ids=range(args.partitions), replication_factor=3
    )
    print(
        f"placing {args.partitions:,} partitions x RF 3 on {args.brokers} brokers "
        f"({args.racks} racks, {len(cluster.assignments):,} partitions already placed)"
    )
    assignors: tuple[ReplicaAssignor, ...] = (
        BalancedReplicaAssignor(),
        KRaftReplicaAssignor(),
        ZooKeeperReplicaAssignor(),
    )
    for assignor in assignors:
        times, result = run(assignor, partitions, cluster, args.repeat)
        placed = check_assignment(assignor, partitions, cluster, result)
        racks = {b: v.rack for b, v in cluster.brokers.items()}
        assert all(len({racks[r] for r in rs}) == 3 for rs in placed.values())
        new_counts = Counter(r for rs in placed.values() for r in rs)
        total = {b: v.replicas + new_counts[b] for b, v in cluster.brokers.items()}
        full = [b for b, v in cluster.brokers.items() if (v.storage_ratio or 0) >= 0.85]
        on_full = sum(new_counts[b] for b in full)
        if isinstance(assignor, BalancedReplicaAssignor):
            assert on_full == 0
        others = [n for b, n in total.items() if b not in full]
        print(
            f"{assignor.name:>9}: best {min(times) * 1000:8.1f} ms, "
            f"median {statistics.median(times) * 1000:8.1f} ms over {len(times)} runs; "
            f"replicas per broker after: {min(others)}..{max(others)} "
            f"(full brokers: {min(total[b] for b in full)}..{max(total[b] for b in full)}), "
            f"new replicas on the 90%-full brokers: {on_full}, "
            f"on the new brokers: {sum(new_counts[b] for b in total if b > args.brokers * 9 // 10)}"
        )


if __name__ == "__main__":
    main()
