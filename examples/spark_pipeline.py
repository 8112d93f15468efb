"""A PySpark pipeline: Kafka -> Parquet -> aggregate -> Kafka, with coopconsumer.spark.

    python examples/spark_pipeline.py                     # embedded Tansu, own Spark cluster
    python examples/spark_pipeline.py --bootstrap host:9092 --master spark://host:7077

Needs the ``spark`` extra (pyspark, pandas, pyarrow) and Java 17. By default it starts a
Spark standalone cluster -- a master and two workers, each its own process, from the
installed pyspark package (``coopconsumer.testing.spark_standalone_cluster``) -- so the
consume job's members run in executors of separate worker processes; ``--master``
takes any master URL instead (``local[2]`` runs everything in one JVM). Steps:

1. produce sample shop events (JSON: user, action, amount) to a new topic;
2. consume the topic up to its current end with ``run_consume_job``: ``--members``
   Spark tasks, each a cooperative-sticky group member, hand each batch to a sink that
   writes it as Parquet files (one per partition and offset range) under ``--out``;
3. read the Parquet back with Spark, drop records seen twice (the job delivers at least
   once; a record is identified by topic, partition and offset), and aggregate per user;
   the aggregate is written as Parquet too;
4. produce the aggregate to a second topic with ``KafkaWriter`` in transactional mode
   (each Spark task's rows in one Kafka transaction: a failed attempt leaves nothing
   behind) and read it back with a ``read_committed`` coopconsumer ``Consumer``.

Exits 0 when every event reached the Parquet files, the
aggregate accounts for every event, and every aggregate row was read back from Kafka;
1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Message, Producer

from coopconsumer import Consumer
from coopconsumer.testing import (
    EmbeddedBroker,
    embedded_broker,
    external_broker,
    spark_standalone_cluster,
    unique_name,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ACTIONS = ("view", "view", "view", "cart", "buy")


def produce_events(bootstrap: str, topic: str, count: int, users: int) -> None:
    """``count`` JSON events for ``users`` users, keyed by user (same user, same partition)."""
    rng = random.Random(42)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10})
    for i in range(count):
        user = f"user-{rng.randrange(users):03d}"
        action = rng.choice(ACTIONS)
        amount = round(rng.uniform(1, 100), 2) if action == "buy" else 0.0
        event = {"id": i, "user": user, "action": action, "amount": amount}
        producer.produce(topic, key=user.encode(), value=json.dumps(event).encode())
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(60) != 0:
        raise SystemExit("the producer could not deliver every event")


class ParquetSink:
    """The consume job's sink: each batch becomes Parquet files under ``out``.

    Runs on the executors (pickled there with the job). One file per Kafka partition
    in the batch, named after its first and last offset, written to a temporary name
    and renamed, so a reader never sees half a file. A batch delivered again after a
    task failure may overlap an earlier file; the reader drops the duplicates. On a
    cluster ``out`` must be storage every executor and the driver can reach.
    """

    def __init__(self, out: str) -> None:
        self.out = out

    def __call__(self, batch: list[Message]) -> None:
        import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

        by_partition: dict[tuple[str, int], list[Message]] = {}
        for message in batch:
            by_partition.setdefault((message.topic() or "", message.partition() or 0), []).append(
                message
            )
        for (topic, partition), messages in by_partition.items():
            events = [json.loads(m.value() or b"{}") for m in messages]
            table = pa.table(
                {
                    "topic": [topic] * len(messages),
                    "partition": pa.array([partition] * len(messages), pa.int32()),
                    "offset": [m.offset() for m in messages],
                    "timestamp_ms": [m.timestamp()[1] for m in messages],
                    "id": [e["id"] for e in events],
                    "user": [e["user"] for e in events],
                    "action": [e["action"] for e in events],
                    "amount": pa.array([e["amount"] for e in events], pa.float64()),
                }
            )
            first, last = messages[0].offset(), messages[-1].offset()
            name = f"{topic}-{partition}-{first:012d}-{last:012d}.parquet"
            target = Path(self.out, name)
            temporary = Path(self.out, f".{name}.{os.getpid()}.tmp")
            pq.write_table(table, temporary)
            os.replace(temporary, target)


def start_spark(stack: ExitStack, master: str | None) -> SparkSession:
    """A session on ``master``, or on a standalone cluster started here (stopped by
    ``stack``). Executors run this interpreter; everything stays on loopback."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "512m",
        "spark.driver.host": "127.0.0.1",
    }
    cluster = None
    if master:
        settings["spark.master"] = master
    else:
        print("starting a Spark standalone cluster (a master, two workers)", flush=True)
        cluster = stack.enter_context(spark_standalone_cluster(2))
        settings.update(cluster.session_config())
    builder = SparkSession.builder.appName("coopconsumer-spark-pipeline")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    stack.callback(spark.stop)
    spark.sparkContext.setLogLevel("ERROR")
    if cluster is not None:
        cluster.wait_for_executors(spark, 2)  # both workers take part in the job
    return spark


def read_back(bootstrap: str, topic: str, expected: int, timeout_s: float) -> dict[str, Any]:
    """The aggregate rows in ``topic``, by key, read with a ``read_committed``
    coopconsumer Consumer."""
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": unique_name("pipeline-check"),
        "partition.assignment.strategy": "cooperative-sticky",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",  # what the transactions committed
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
    }
    rows: dict[str, Any] = {}
    deadline = time.monotonic() + timeout_s
    with Consumer(config) as consumer:
        consumer.subscribe([topic])
        while len(rows) < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                rows[(message.key() or b"").decode()] = json.loads(message.value() or b"{}")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="an existing cluster (default: an embedded broker)")
    parser.add_argument(
        "--broker",
        choices=("tansu", "kafka"),
        default="tansu",
        help="the embedded broker: tansu (pip only) or kafka (Apache Kafka; Java 17, Maven)",
    )
    parser.add_argument("--master", help="a Spark master URL (default: a standalone cluster)")
    parser.add_argument("--records", type=int, default=5000, help="events to produce")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--members", type=int, default=2, help="consume job tasks")
    parser.add_argument("--out", help="output directory (default: a temporary one)")
    parser.add_argument("--timeout", type=float, default=180.0, help="consume job timeout (s)")
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from coopconsumer.spark import KafkaWriter, run_consume_job

    with ExitStack() as stack:
        broker: EmbeddedBroker
        if args.bootstrap:
            broker = external_broker(args.bootstrap)
        else:
            print(f"starting an embedded {args.broker} broker", flush=True)
            broker = stack.enter_context(embedded_broker(args.broker))
        out = Path(args.out or stack.enter_context(tempfile.TemporaryDirectory()))
        events_dir, totals_dir = out / "events", out / "user_totals"
        events_dir.mkdir(parents=True, exist_ok=True)

        events_topic, totals_topic = unique_name("shop-events"), unique_name("user-totals")
        broker.create_topic(events_topic, partitions=args.partitions)
        broker.create_topic(totals_topic, partitions=args.partitions)
        produce_events(broker.bootstrap, events_topic, args.records, args.users)
        print(f"produced {args.records} events to {events_topic}", flush=True)

        spark = start_spark(stack, args.master)

        # 1. Kafka -> Parquet: the consume job.
        config = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_name("pipeline"),
            # Short for the embedded broker: Tansu holds every JoinGroup for
            # session.timeout.ms / 2 (at least 1 s), which is what a rebalance costs.
            "session.timeout.ms": 3000,
            "heartbeat.interval.ms": 1000,
        }
        started = time.monotonic()
        stats = run_consume_job(
            spark,
            config,
            [events_topic],
            ParquetSink(str(events_dir)),
            members=args.members,
            batch_size=500,
            timeout_s=args.timeout,
        )
        print(f"consume job finished in {time.monotonic() - started:.1f}s; per member:")
        stats.select(
            "member",
            "attempt",
            "records",
            "batches",
            "rebalances",
            F.round("rebalance_latency_avg_ms").alias("rebal_avg_ms"),
            F.round("rebalance_latency_max_ms").alias("rebal_max_ms"),
            "assigned",
        ).show(truncate=False)
        consumed = stats.agg(F.sum("records")).first()[0] or 0  # type: ignore[index]
        print(f"consumed {consumed} records")

        # 2. Parquet -> aggregate (deduplicated: at-least-once delivery).
        events = spark.read.parquet(str(events_dir)).dropDuplicates(
            ["topic", "partition", "offset"]
        )
        stored = events.count()
        print(f"parquet rows: {stored} distinct of {args.records} produced")
        totals = (
            events.groupBy("user")
            .agg(
                F.count("*").alias("events"),
                F.sum(F.when(F.col("action") == "buy", 1).otherwise(0)).alias("purchases"),
                F.round(F.sum("amount"), 2).alias("revenue"),
            )
            .orderBy(F.desc("revenue"))
        )
        totals.write.mode("overwrite").parquet(str(totals_dir))
        totals = spark.read.parquet(str(totals_dir))
        print("top users by revenue:")
        totals.orderBy(F.desc("revenue")).show(5)
        accounted = totals.agg(F.sum("events")).first()[0] or 0  # type: ignore[index]

        # 3. aggregate -> Kafka: KafkaWriter, one transaction per Spark task.
        writer = KafkaWriter(
            {"bootstrap.servers": broker.bootstrap},
            totals_topic,
            key_column="user",
            value_column="json",
            transactional_id=unique_name("pipeline-totals"),
        )
        outgoing = totals.select(
            "user", F.to_json(F.struct("user", "events", "purchases", "revenue")).alias("json")
        )
        report = outgoing.mapInPandas(writer.map_in_pandas, writer.output_schema).collect()
        written = sum(row.records for row in report)
        users = totals.count()
        print(f"wrote {written} aggregate records to {totals_topic}", flush=True)

        back = read_back(broker.bootstrap, totals_topic, users, timeout_s=60.0)
        print(f"read back {len(back)} aggregate records from {totals_topic}")
        print(f"output directory: {out}")

    ok = stored == args.records and accounted == args.records and written == users
    ok = ok and len(back) == users and sum(r["events"] for r in back.values()) == args.records
    if not ok:
        print("FAILED: the pipeline lost or invented records", file=sys.stderr)
        return 1
    print(f"pipeline OK: {args.records} events -> {users} user totals")
    return 0


if __name__ == "__main__":
    sys.exit(main())
