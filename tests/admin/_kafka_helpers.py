"""Helpers shared by the admin tests that run on Apache Kafka (``kafka_cluster``):
waiting on the cluster with generous deadlines, writing data with confluent-kafka,
and reading Kafka's own tools' output."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from coopconsumer._types import TopicPartition
from coopconsumer.admin import AdminClient, AdminOperationError, TopicDescription
from coopconsumer.testing import KafkaCluster

T = TypeVar("T")

#: How long a condition on the cluster may take on a busy two-core machine.
PATIENCE_S = 180.0

RECONFIGURATION = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"  # kafka.admin.ConfigCommand before 4.x
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"


def wait_for(
    what: str, check: Callable[[], T | None], *, timeout_s: float = PATIENCE_S, every_s: float = 0.2
) -> T:
    """Call ``check`` until it returns something other than None or False."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while True:
        last = check()
        if last is not None and last is not False:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


def described(admin: AdminClient, topic: str) -> TopicDescription | None:
    """The topic as Metadata shows it, None while this broker does not know it yet
    (KRaft brokers learn new topics from the metadata log, after CreateTopics
    returns)."""
    try:
        return admin.describe_topics([topic])[topic]
    except AdminOperationError:
        return None


def wait_in_sync(admin: AdminClient, topic: str, partitions: int) -> TopicDescription:
    """Wait until every partition of ``topic`` has a leader and all replicas in sync,
    and no reassignment of it is in flight."""

    def check() -> TopicDescription | None:
        d = described(admin, topic)
        if d is None or len(d.partitions) != partitions:
            return None
        if any(p.leader < 0 or set(p.isr) != set(p.replicas) for p in d.partitions):
            return None
        if any(tp.topic == topic for tp in admin.list_partition_reassignments()):
            return None
        return d

    return wait_for(f"{topic}: every partition in sync", check)


def produce(
    bootstrap: str, topic: str, partitions: Iterable[int], *, bytes_each: int, record_bytes: int
) -> None:
    """Write about ``bytes_each`` bytes of incompressible records to each partition
    (acks=all), so moves have data to copy."""
    import os

    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "compression.type": "none",
        }
    )
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for p in partitions:
        for _ in range(max(1, bytes_each // record_bytes)):
            while True:
                try:
                    producer.produce(
                        topic, os.urandom(record_bytes), partition=p, on_delivery=delivered
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
    assert producer.flush(PATIENCE_S) == 0, "records still unsent"
    assert not failures, failures[:3]


def tool(cluster: KafkaCluster, main_class: str, *args: str) -> str:
    """Run one of Kafka's tools against ``cluster``; its stdout (a failure raises,
    with what it printed)."""
    result = cluster.run_tool(main_class, "--bootstrap-server", cluster.internal_bootstrap, *args)
    if result.returncode != 0:
        raise AssertionError(
            f"{main_class} {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result.stdout


def kafka_configs(cluster: KafkaCluster, entity_type: str, name: str) -> dict[str, str]:
    """What ``kafka-configs --describe`` prints for one entity's own (dynamic)
    configs, as a dict (the sensitive ones are never involved here)."""
    out = tool(
        cluster,
        CONFIGS,
        "--describe",
        "--entity-type",
        entity_type,
        "--entity-name",
        name,
    )
    configs: dict[str, str] = {}
    for line in out.splitlines():
        line = line.strip()
        if "=" not in line or line.startswith(("Dynamic", "All", "[")):
            continue
        # "leader.replication.throttled.rate=1000 sensitive=false synonyms={...}"
        head = line.split(" sensitive=")[0]
        key, _, value = head.partition("=")
        configs[key] = value
    return configs


def kafka_log_dirs(cluster: KafkaCluster, brokers: Iterable[int]) -> dict[int, dict[str, Any]]:
    """``kafka-log-dirs --describe``: broker -> {log dir -> {partition name -> entry}}."""
    out = tool(cluster, LOG_DIRS, "--describe", "--broker-list", ",".join(map(str, brokers)))
    line = next(x for x in out.splitlines() if x.startswith("{"))
    return {
        b["broker"]: {
            d["logDir"]: {p["partition"]: p for p in d["partitions"]} for d in b["logDirs"]
        }
        for b in json.loads(line)["brokers"]
    }


def reassignment_json(targets: Mapping[TopicPartition, tuple[int, ...]]) -> str:
    """Kafka's reassignment file for ``targets``."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)}
                for tp, r in sorted(targets.items())
            ],
        }
    )
