"""Benchmark: moving 2,000 partitions through the sliding window vs all at once.

    python benchmarks/reassignment.py [--partitions N] [--window N] [--poll S]
                                      [--throttle BYTES_PER_S] [--seed N]

On the replication test cluster (6 brokers on 3 racks, manual clock, each broker's
followers copying 64 MiB/s together), ``--partitions`` partitions with RF 2 live on
brokers 1-3, sized 1-20 MB at random (seeded). Both runs move them off brokers 1-3
with the same plan, each on a fresh cluster, over the wire:

- window: the executor, at most ``--window`` partitions in flight, polling every
  ``--poll`` simulated seconds;
- all at once: one AlterPartitionReassignments with every target, then the same
  polling until ListPartitionReassignments is empty.

Printed: the simulated time until the last partition arrived, the peak of the bytes
the in-flight moves still had to copy (sampled at every poll), their ratios, and the
wall-clock seconds each run took here. Figures from one run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import platform
import random
import time

from coopconsumer._types import TopicPartition
from coopconsumer.admin import AdminClient
from coopconsumer.admin.reassign import (
    ExecutorConfig,
    ReassignmentExecutor,
    ReassignmentPlan,
    plan_move_off,
)
from coopconsumer.testing import ReplicationCluster, replication_cluster

MB = 1_000_000


def build(cluster: ReplicationCluster, count: int, seed: int) -> dict[TopicPartition, int]:
    rng = random.Random(seed)
    cluster.create_topic("t", [[1 + i % 3, 1 + (i + 1) % 3] for i in range(count)])
    sizes = {}
    for i in range(count):
        size = rng.randint(1, 20) * MB
        cluster.set_partition_size("t", i, size)
        sizes[TopicPartition("t", i)] = size
    return sizes


def bytes_in_flight(cluster: ReplicationCluster) -> int:
    """What the moving replicas still have to copy."""
    return sum(
        p.size_bytes - p.replica_bytes[r]
        for p in cluster.partitions("t")
        if p.reassigning
        for r in p.adding
    )


def windowed(
    cluster: ReplicationCluster, plan: ReassignmentPlan, config: ExecutorConfig, poll: float
) -> tuple[float, int]:
    peak = 0

    def sample(_: object) -> None:
        nonlocal peak
        peak = max(peak, bytes_in_flight(cluster))

    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        start = cluster.now
        executor = ReassignmentExecutor.create(
            admin,
            plan,
            config,
            clock=lambda: cluster.now,
            sleep=cluster.advance_time,
            poll_interval_s=poll,
        )
        executor.run(on_progress=sample)
        return cluster.now - start, peak


def all_at_once(
    cluster: ReplicationCluster, plan: ReassignmentPlan, poll: float
) -> tuple[float, int]:
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        start = cluster.now
        admin.alter_partition_reassignments({m.tp: m.replicas for m in plan.moves})
        peak = bytes_in_flight(cluster)
        while admin.list_partition_reassignments():
            cluster.advance_time(poll)
            peak = max(peak, bytes_in_flight(cluster))
        return cluster.now - start, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--poll", type=float, default=0.5, help="simulated seconds")
    parser.add_argument("--throttle", type=int, default=None, help="bytes/s per broker")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = ExecutorConfig(max_partitions=args.window, throttle_bytes_per_s=args.throttle)

    results: dict[str, tuple[float, int, float]] = {}
    plan: ReassignmentPlan | None = None
    for mode in ("window", "all at once"):
        with replication_cluster(6, racks=["a", "b", "c"], manual_clock=True) as cluster:
            sizes = build(cluster, args.partitions, args.seed)
            with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
                fresh = plan_move_off(
                    admin.cluster_view(), [1, 2, 3], admin.replica_assignor, sizes=sizes
                )
            assert plan is None or fresh == plan, "both runs must move the same plan"
            plan = fresh
            began = time.perf_counter()
            if mode == "window":
                simulated, peak = windowed(cluster, plan, config, args.poll)
            else:
                simulated, peak = all_at_once(cluster, plan, args.poll)
            results[mode] = (simulated, peak, time.perf_counter() - began)
            wrong = [
                p.partition
                for p in cluster.partitions("t")
                if set(p.replicas) & {1, 2, 3} or p.reassigning
            ]
            assert not wrong, f"{mode}: partitions not moved: {wrong[:5]}"

    assert plan is not None
    print(
        f"{len(plan)} partitions, {plan.total_bytes / MB:,.0f} MB to copy, off brokers 1-3 "
        f"onto 4-6 (64 MiB/s each); window {args.window}, poll {args.poll} s, "
        f"throttle {args.throttle or 'none'}; Python {platform.python_version()}"
    )
    print(f"{'mode':<12} {'simulated s':>12} {'peak MB in flight':>18} {'wall s':>8}")
    for mode, (simulated, peak, wall) in results.items():
        print(f"{mode:<12} {simulated:>12.1f} {peak / MB:>18,.0f} {wall:>8.1f}")
    (w_time, w_peak, _), (a_time, a_peak, _) = results["window"], results["all at once"]
    print(
        f"window / all at once: total time x{w_time / a_time:.2f}, "
        f"peak bytes in flight x{w_peak / a_peak:.3f}"
    )


if __name__ == "__main__":
    main()
