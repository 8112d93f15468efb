"""Benchmark: reassignment on Apache Kafka (issue 33), figures from Kafka itself.

    python benchmarks/reassign_kafka.py throttle [--mb N] [--rate BYTES_PER_S]
    python benchmarks/reassign_kafka.py scale [--brokers 6] [--partitions 2000] [--window 50]

``throttle``: 3 KRaft nodes; one partition (RF 1) holding ``--mb`` MB of incompressible
records moves to another broker through the executor throttled at ``--rate``. The
replica's size on the new broker (DescribeLogDirs) is sampled twice a second; printed:
the rate the brokers actually held (bytes over the steady middle of the copy) against
the rate set, and each broker's throttle configs before and after (kafka-configs).

``scale``: ``--brokers`` nodes on 3 racks, ``--partitions`` partitions at RF 3 (a few
KB each, so the figures are the control plane's), moved off broker 1 twice on the same
cluster: by our executor with a window of ``--window``, then back by
kafka-reassign-partitions all at once. Printed: the JVMs' memory (RSS), plan time,
execute time, requests per progress poll by API, the peak of partitions in flight,
and the time kafka-reassign-partitions took for the same moves. Figures from one run;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from coopconsumer._io._connection import BrokerConnection
from coopconsumer._types import TopicPartition
from coopconsumer.admin import AdminClient, ConfigResource, ConfigResourceType, NewTopic
from coopconsumer.admin.reassign import ExecutorConfig, ReassignmentExecutor, plan_move_off
from coopconsumer.admin.reassign._reassign_driver import partition_sizes
from coopconsumer.testing import KafkaCluster, kafka_cluster

MB = 1_000_000
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def _wait(what: str, check: Any, timeout_s: float = 300.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def _in_sync(admin: AdminClient, topic: str, count: int) -> bool:
    try:
        d = admin.describe_topics([topic])[topic]
    except Exception:
        return False
    return len(d.partitions) == count and all(
        p.leader >= 0 and set(p.isr) == set(p.replicas) for p in d.partitions
    )


def _rss_mb(cluster: KafkaCluster) -> list[int]:
    out = []
    for node in cluster.nodes:
        try:
            status = Path(f"/proc/{node.pid}/status").read_text()
        except (OSError, TypeError):
            out.append(-1)
            continue
        kb = next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS"))
        out.append(kb // 1024)
    return out


def _rates(admin: AdminClient, brokers: list[int]) -> dict[int, dict[str, str | None]]:
    resources = [ConfigResource(ConfigResourceType.BROKER, str(b)) for b in brokers]
    configs = admin.describe_configs(resources)
    return {
        int(r.name): {
            k: e.value if e is not None and not e.is_default else None
            for k in RATE_KEYS
            for e in [c.get(k)]
        }
        for r, c in configs.items()
    }


def _fill(bootstrap: str, topics: list[str], partitions: int, nbytes: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50})
    for topic in topics:
        for p in range(partitions):
            for _ in range(max(1, nbytes // 10_000)):
                while True:
                    try:
                        producer.produce(topic, os.urandom(10_000), partition=p)
                        break
                    except BufferError:
                        producer.poll(0.1)
    producer.flush(600)


def throttle(args: argparse.Namespace) -> None:
    from confluent_kafka import Producer

    with (
        kafka_cluster(brokers=3, racks=["a", "b", "c"]) as cluster,
        AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin,
    ):
        admin.create_topics([NewTopic("big", assignment={0: (1,)})])
        _wait("topic", lambda: _in_sync(admin, "big", 1))
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20}
        )
        for _ in range(args.mb * 10):
            while True:
                try:
                    producer.produce("big", os.urandom(100_000), partition=0)
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.flush(120)
        tp = TopicPartition("big", 0)
        (dirs,) = admin.describe_log_dirs([1], partitions=[tp]).values()
        size = sum(r.size_bytes for d in dirs for r in d.replicas)
        before = _rates(admin, [1, 2, 3])
        plan = plan_move_off(admin.cluster_view(), [1], admin.replica_assignor, topics=["big"])
        (move,) = plan.moves
        target = move.replicas[0]
        executor = ReassignmentExecutor.create(
            admin, plan, ExecutorConfig(throttle_bytes_per_s=args.rate), poll_interval_s=0.5
        )
        samples: list[tuple[float, int]] = []
        import threading

        done = threading.Event()

        def sample() -> None:
            with AdminClient({"bootstrap.servers": cluster.bootstrap}) as watcher:
                while not done.is_set():
                    try:
                        (d,) = watcher.describe_log_dirs([target], partitions=[tp]).values()
                        got = sum(r.size_bytes for x in d for r in x.replicas)
                        samples.append((time.monotonic(), got))
                    except Exception:
                        pass
                    time.sleep(0.5)

        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        start = time.monotonic()
        executor.run()
        took = time.monotonic() - start
        done.set()
        watcher.join()
        after = _rates(admin, [1, 2, 3])
    # The steady middle: from 10% to 90% of the bytes.
    lo = next(s for s in samples if s[1] >= 0.1 * size)
    hi = next(s for s in samples if s[1] >= 0.9 * size)
    held = (hi[1] - lo[1]) / (hi[0] - lo[0])
    print(f"Kafka {cluster.version}, {platform.machine()}, {os.cpu_count()} cores")
    print(f"partition of {size / MB:.1f} MB moved 1 -> {target}, throttle set {args.rate} B/s")
    print(f"  executor run: {took:.1f} s; replica copied at {held:,.0f} B/s (10%-90% of bytes)")
    print(f"  held / set = {held / args.rate:.3f}")
    print(f"  broker rates before: {before}")
    print(f"  broker rates after:  {after}")
    print(f"  restored exactly: {before == after}")


def scale(args: argparse.Namespace) -> None:
    racks = ["a", "b", "c"]
    start = time.monotonic()
    with kafka_cluster(brokers=args.brokers, racks=racks, startup_timeout_s=300) as cluster:
        print(
            f"Kafka {cluster.version}: {args.brokers} nodes up in {time.monotonic() - start:.1f} s"
        )
        print(f"  RSS MB per JVM at start: {_rss_mb(cluster)}")
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
            topics = [f"t{i}" for i in range(args.partitions // 100)]
            t0 = time.monotonic()
            admin.create_topics(
                [NewTopic(t, num_partitions=100, replication_factor=3) for t in topics]
            )
            for t in topics:
                _wait(t, lambda t=t: _in_sync(admin, t, 100))
            created_s = time.monotonic() - t0
            print(f"  {args.partitions} partitions RF 3 created and in sync in {created_s:.1f} s")
            print(f"  RSS MB per JVM with partitions: {_rss_mb(cluster)}")
            t0 = time.monotonic()
            _fill(cluster.bootstrap, topics, 100, args.kb * 1000)
            print(f"  {args.kb} KB written to each partition in {time.monotonic() - t0:.1f} s")
            t0 = time.monotonic()
            sizes = partition_sizes(admin)
            plan = plan_move_off(
                admin.cluster_view(), [1], admin.replica_assignor, topics=topics, sizes=sizes
            )
            plan_s = time.monotonic() - t0
            print(f"  plan (move off broker 1): {len(plan)} partitions in {plan_s:.2f} s")

            # Requests by API (the wire client's request entry points) and bytes
            # received (every connection's reads), counted around the executor run.
            calls: Counter[str] = Counter()
            received = [0]
            client = admin._client
            original_request, original_any = client.request, client.request_any
            original_feed = BrokerConnection._feed

            def request(node: Any, req: Any, **kw: Any) -> Any:
                calls[type(req).__name__] += 1
                return original_request(node, req, **kw)

            def request_any(req: Any, **kw: Any) -> Any:
                calls[type(req).__name__] += 1
                return original_any(req, **kw)

            def feed(self: BrokerConnection, event: object, now: float | None = None) -> None:
                if type(event).__name__ == "BytesReceived":
                    received[0] += len(event.data)  # type: ignore[attr-defined]
                original_feed(self, event, now)

            client.request, client.request_any = request, request_any  # type: ignore[method-assign,assignment]
            BrokerConnection._feed = feed  # type: ignore[method-assign]
            polls = 0
            peak = peak_bytes = 0
            state = Path(tempfile.mkdtemp()) / "scale.state"
            executor = ReassignmentExecutor.create(
                admin,
                plan,
                ExecutorConfig(max_partitions=args.window),
                state_path=state,
                poll_interval_s=1.0,
            )

            def progress(p: Any) -> None:
                nonlocal polls, peak, peak_bytes
                polls += 1
                peak = max(peak, p.in_flight)
                peak_bytes = max(peak_bytes, p.bytes_in_flight)

            t0 = time.monotonic()
            executor.run(on_progress=progress)
            exec_s = time.monotonic() - t0
            BrokerConnection._feed = original_feed  # type: ignore[method-assign]
            print(f"  executor (window {args.window}): {exec_s:.1f} s, {polls} polls")
            print(
                "  requests per poll: "
                + ", ".join(
                    f"{k.removesuffix('Request')} {v / polls:.2f}" for k, v in sorted(calls.items())
                )
            )
            print(f"  bytes received per poll: {received[0] / polls / 1024:.1f} KiB")
            print(
                f"  peak in flight (executor): {peak} partitions, "
                f"{peak_bytes / MB:.1f} MB to copy of {plan.total_bytes / MB:.1f} MB"
            )
            print(f"  RSS MB per JVM after: {_rss_mb(cluster)}")
            # Back, all at once, by Kafka's tool.
            back = {tp: m.original_replicas for tp, m in plan.by_partition().items()}
            path = Path(tempfile.mkdtemp()) / "back.json"
            path.write_text(
                json.dumps(
                    {
                        "version": 1,
                        "partitions": [
                            {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)}
                            for tp, r in back.items()
                        ],
                    }
                )
            )
            t0 = time.monotonic()
            result = cluster.run_tool(
                "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                "--bootstrap-server",
                cluster.internal_bootstrap,
                "--reassignment-json-file",
                str(path),
                "--execute",
                timeout_s=600,
            )
            submitted_s = time.monotonic() - t0
            assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
            moving = admin.list_partition_reassignments()
            peak_all = len(moving)
            bytes_all = sum(sizes.get(tp, 0) * len(r.adding) for tp, r in moving.items())
            _wait("Kafka's tool's moves", lambda: not admin.list_partition_reassignments(), 900)
            print(
                f"  kafka-reassign-partitions all at once: submitted in {submitted_s:.1f} s "
                f"(a JVM start included), {peak_all} in flight just after "
                f"({bytes_all / MB:.1f} MB to copy), all done in "
                f"{time.monotonic() - t0:.1f} s"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    t = sub.add_parser("throttle")
    t.add_argument("--mb", type=int, default=30)
    t.add_argument("--rate", type=int, default=2_000_000)
    s = sub.add_parser("scale")
    s.add_argument("--brokers", type=int, default=6)
    s.add_argument("--partitions", type=int, default=2000)
    s.add_argument("--window", type=int, default=50)
    s.add_argument("--kb", type=int, default=100, help="KB written to each partition")
    args = parser.parse_args()
    (throttle if args.mode == "throttle" else scale)(args)


if __name__ == "__main__":
    main()
