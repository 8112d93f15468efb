"""Benchmark: records/s from Kafka into Spark, per coopconsumer.spark path, side by side.

    python benchmarks/spark.py [--records N] [--value-size BYTES] [--partitions P]
                               [--members M]

Starts an embedded Tansu broker behind coopconsumer's transactions proxy (every path
goes through it, so the paths compare like with like) and a Spark standalone cluster
(a master and two workers with two task slots each, separate processes, from the
installed pyspark package), pre-produces ``N`` records (default 200,000 of 100 bytes
over 4 partitions) to one topic, then reads the whole topic once per path: the two
jobs copy it to a second topic (Kafka -> Kafka), the streaming and batch reads count
it (touching every value):

* **at-least-once job**: ``run_consume_job`` with ``M`` members (default 2) and a
  sink that copies every record to a second topic with a confluent-kafka producer,
  awaiting every delivery before it returns. Timed window: from the call to its
  return -- reading the end offsets, launching the tasks, the members joining the
  group, consuming, committing after every batch and leaving. Also printed: the
  members' own rate, records over the slowest member's wall time (its ``seconds``:
  joining and leaving included, task launch not).
* **exactly-once job**: ``run_consume_job(..., exactly_once=True)`` with ``M``
  members and batches of the same size, copying every record to the second topic
  inside the batch's transaction, which also commits the batch's offsets with the
  member's generation. Timed window as for the at-least-once job, plus each member's
  InitProducerId and broker version check. (Tansu drops the offsets of a transaction
  that holds no records, after a producer's first: a sink producing nothing cannot be
  measured there.)
* **streaming source**: ``spark.readStream.format("coopconsumer")`` from the earliest
  offsets with ``trigger(availableNow=True)`` and a ``foreachBatch`` sink that counts.
  Timed window: from ``start()`` to the query's termination -- planning every
  micro-batch on the driver, reading the ranges on the executors, committing the
  group's offsets.
* **batch read**: ``spark.read.format("coopconsumer")`` and a count of the values
  (for reference: the same reader without streaming's bookkeeping). Timed window: the
  ``collect()`` of the aggregate.

One untimed warm-up read (a batch count) starts the Python workers and the JVMs' JIT
first. Every path reads every record; the figures are records divided by the timed
window. Spark task launch and group joins are fixed costs, so small ``N`` understates
the steady rates. Prints the machine and its load: other processes on a shared
machine move these figures a lot; compare paths within one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

from _common import describe_machine, print_table, produce

from coopconsumer.testing import embedded_broker, spark_standalone_cluster

if TYPE_CHECKING:
    from confluent_kafka import Message

    from coopconsumer import TransactionalOutput


class CountingSink:
    """The streaming and batch paths' sink: counts records and touches each value."""

    def __call__(self, batch: list[Message]) -> None:
        touched = sum(len(m.value() or b"") for m in batch)
        assert touched >= 0


class CopySink:
    """The at-least-once job's sink: copies each record to ``topic`` with a
    confluent-kafka producer (one per task), every delivery awaited before it returns
    (so the commit after it covers delivered output)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.producer: Any = None

    def __call__(self, batch: list[Message]) -> None:
        if self.producer is None:
            from confluent_kafka import Producer

            self.producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        for m in batch:
            self.producer.produce(self.topic, m.value(), m.key())
        assert self.producer.flush(60) == 0


class TransactionalCopySink:
    """The exactly-once job's sink: copies each record to ``topic`` into the batch's
    transaction."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def __call__(self, batch: list[Message], output: TransactionalOutput) -> None:
        for m in batch:
            output.produce(self.topic, m.value(), m.key())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--members", type=int, default=2)
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from coopconsumer.spark import register_data_source, run_consume_job

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    n = args.records
    with (
        embedded_broker("tansu", transactions=True) as broker,
        spark_standalone_cluster(2, cores_per_worker=2) as cluster,
    ):
        topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic, partitions=args.partitions)
        produce_s = produce(
            broker.bootstrap, topic, n, value_size=args.value_size, partitions=args.partitions
        )
        builder = SparkSession.builder.appName("coopconsumer-bench")
        for key, value in cluster.session_config().items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        cluster.wait_for_executors(spark, 2)
        register_data_source(spark)
        rows: list[list[str]] = []

        def source(**options: str) -> Any:
            reader = spark.read.format("coopconsumer")
            for key, value in {
                "kafka.bootstrap.servers": broker.bootstrap,
                "subscribe": topic,
                **options,
            }.items():
                reader = reader.option(key, value)
            return reader.load()

        # Warm-up: Python workers, JIT, the broker's caches.
        source().agg(F.count("value")).collect()

        copies = f"{topic}-copy"  # Kafka -> Kafka: both jobs write every record here
        broker.create_topic(copies, partitions=args.partitions)
        sinks: list[tuple[str, bool, Any]] = [
            ("at-least-once job", False, CopySink(broker.bootstrap, copies)),
            ("exactly-once job", True, TransactionalCopySink(copies)),
        ]
        for label, exactly_once, sink in sinks:
            started = time.perf_counter()
            stats = run_consume_job(
                spark,
                {
                    "bootstrap.servers": broker.bootstrap,
                    "group.id": f"bench-job-{uuid.uuid4().hex[:8]}",
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 1000,
                },
                [topic],
                sink,
                exactly_once=exactly_once,
                members=args.members,
                batch_size=5000,
            ).collect()
            job_s = time.perf_counter() - started
            consumed = sum(r.records for r in stats)
            slowest = max(r.seconds for r in stats)
            assert consumed >= n, f"the job consumed {consumed} of {n}"
            rows.append(
                [
                    label,
                    f"{consumed:,}",
                    f"{job_s:.1f}",
                    f"{consumed / job_s:,.0f}",
                    f"members {consumed / slowest:,.0f}/s",
                ]
            )

        counted: list[int] = []

        def count_batch(frame: Any, _batch_id: int) -> None:
            counted.append(frame.agg(F.count("value")).collect()[0][0])

        stream = (
            spark.readStream.format("coopconsumer")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("kafka.group.id", f"bench-stream-{uuid.uuid4().hex[:8]}")
            .option("kafka.auto.offset.reset", "earliest")
            .option("subscribe", topic)
            .load()
        )
        checkpoint = f"/tmp/coopconsumer-bench-{uuid.uuid4().hex[:8]}"
        started = time.perf_counter()
        query = (
            stream.writeStream.foreachBatch(count_batch)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        stream_s = time.perf_counter() - started
        streamed = sum(counted)
        assert streamed == n, f"the stream read {streamed} of {n}"
        batches = len(counted)
        rows.append(
            [
                "streaming source",
                f"{streamed:,}",
                f"{stream_s:.1f}",
                f"{streamed / stream_s:,.0f}",
                f"{batches} micro-batch(es), availableNow",
            ]
        )

        started = time.perf_counter()
        read = source().agg(F.count("value")).collect()[0][0]
        read_s = time.perf_counter() - started
        assert read == n
        rows.append(
            ["batch read", f"{read:,}", f"{read_s:.1f}", f"{read / read_s:,.0f}", "spark.read"]
        )
        spark.stop()

    print(describe_machine())
    print(
        f"{n:,} records of {args.value_size} B over {args.partitions} partitions "
        f"(produced in {produce_s:.1f}s); standalone cluster: 2 workers x 2 slots; "
        f"job members: {args.members}"
    )
    print_table(["path", "records", "seconds", "records/s", "notes"], rows)


if __name__ == "__main__":
    main()
