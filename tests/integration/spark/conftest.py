"""A Spark standalone cluster shared by the Spark tests (docs/spark.md, docs/testing.md).

One master and two workers, each its own JVM started from the installed pyspark package
(``coopconsumer.testing.spark_standalone_cluster``), two task slots per worker, and one
SparkSession on it for the whole test session: starting the JVMs costs tens of seconds
on a busy two-core machine, so it happens once. ``spark.task.maxFailures=2``: a task
may fail once and be retried, which the injected-failure tests rely on; each attempt
runs in a fresh Python worker on whichever executor has a free slot.

A test that kills a worker (``spark_cluster.kill_worker``) starts it again and waits for
the session's executors to be back before it ends (:func:`restore_workers`), so the
tests after it find the same cluster.

The broker fixtures come from ``tests/integration/conftest.py``.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition

from coopconsumer.testing import (
    EmbeddedBroker,
    SparkStandaloneCluster,
    spark_standalone_cluster,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Workers of the test cluster and task slots on each.
WORKERS = 2
CORES_PER_WORKER = 2
#: Partitions of the Spark tests' topics.
PARTITIONS = 4


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkStandaloneCluster]:
    """The session's standalone cluster: a master and two workers, two slots each."""
    # Executors must run this interpreter (it has coopconsumer installed); loopback only.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with spark_standalone_cluster(WORKERS, cores_per_worker=CORES_PER_WORKER) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def spark(spark_cluster: SparkStandaloneCluster) -> Iterator[SparkSession]:
    """The session's SparkSession on :func:`spark_cluster`, with all its executors."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("coopconsumer-tests")
    for key, value in spark_cluster.session_config().items():
        builder = builder.config(key, value)
    session = builder.config("spark.task.maxFailures", "2").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        spark_cluster.wait_for_executors(session, WORKERS)
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def txn_broker(kafka_broker: EmbeddedBroker) -> EmbeddedBroker:
    """The broker of the exactly-once and transactional Spark tests: Apache Kafka,
    whose transactions (aborted records hidden, KIP-447 fencing, timeouts) are the
    real ones the Tansu proxy imitated (docs/testing.md, "Which broker a test uses")."""
    return kafka_broker


def restore_workers(cluster: SparkStandaloneCluster, spark: SparkSession) -> None:
    """Start every killed worker again and wait until the session has an executor on
    each (the master gives the application the new worker's cores by itself)."""
    for index in range(WORKERS):
        if index not in cluster.worker_indexes:
            cluster.start_worker(index)
    cluster.wait_for_executors(spark, WORKERS)


def job_config(
    broker: EmbeddedBroker, group: str, *, session_timeout_ms: int = 2000
) -> dict[str, object]:
    """A consume job's configuration for the test brokers: a member that vanished is
    noticed after the session timeout (Tansu also holds a JoinGroup for
    max(1 s, session.timeout.ms / 2), docs/testing.md)."""
    return {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "session.timeout.ms": session_timeout_ms,
        "heartbeat.interval.ms": 500,
        "max.poll.interval.ms": 30000,
    }


def produce_values(bootstrap: str, topic: str, values: list[str]) -> None:
    """Produce ``values`` round-robin over :data:`PARTITIONS` partitions, every
    delivery awaited."""
    failures: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i, value in enumerate(values):
        producer.produce(
            topic,
            value=value.encode(),
            key=value.encode(),
            partition=i % PARTITIONS,
            on_delivery=lambda err, _m: failures.append(err) if err is not None else None,
        )
    assert producer.flush(30) == 0
    assert failures == []


def read_committed_values(
    broker: EmbeddedBroker, topic: str, *, expected: int, patience_s: float = 60.0
) -> collections.Counter[str]:
    """Every value of ``topic`` (all :data:`PARTITIONS` partitions, from offset 0) that
    an independent ``read_committed`` confluent-kafka consumer sees, counted: read
    until ``expected`` values arrived and then 2 s more (a duplicate arriving late is
    counted), or until ``patience_s``."""
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"verify-{topic}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.assign([KafkaPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: collections.Counter[str] = collections.Counter()
    deadline = time.monotonic() + patience_s
    quiet_until: float | None = None
    try:
        while time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is not None and message.error() is None:
                seen[(message.value() or b"").decode()] += 1
                continue
            if seen.total() >= expected:
                quiet_until = quiet_until or time.monotonic() + 2.0
                if time.monotonic() >= quiet_until:
                    break
    finally:
        reader.close()
    return seen


class GrowingTopic:
    """Produces ``v0, v1, ...`` round-robin over :data:`PARTITIONS` partitions from a
    thread, paced at ``per_second``, until :meth:`finish`."""

    def __init__(self, bootstrap: str, topic: str, per_second: float) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topic = topic
        self._interval = 1.0 / per_second
        self._stop = threading.Event()
        self.produced = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self._producer.produce(self._topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
            i += 1
            self._producer.poll(0)
            time.sleep(self._interval)
        assert self._producer.flush(30) == 0
        self.produced = i

    def finish(self) -> int:
        """Stop producing; return how many records were produced (all acknowledged)."""
        self._stop.set()
        self._thread.join(60)
        return self.produced
