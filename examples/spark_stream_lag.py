"""A Spark streaming query on Kafka whose progress shows up as consumer-group lag.

    python examples/spark_stream_lag.py                    # embedded Tansu, own Spark cluster
    python examples/spark_stream_lag.py --bootstrap host:9092 --master spark://host:7077

Needs the ``spark`` extra and Java 17. A producer thread writes shop events to a new
topic for ``--seconds`` seconds while a streaming query reads them with the
``coopconsumer`` data source (``spark.readStream.format("coopconsumer")``) into a
memory table, counted per action at the end. The query names a consumer group
(``kafka.group.id``), so after every micro-batch the source commits the batch's end
offsets to that group -- which Spark's own Kafka source never does. A *lag check*
then reads the group the way ``kafka-consumer-groups --describe`` or a lag exporter
does (committed offsets against the high watermarks, with a plain
``coopconsumer.Consumer`` that never joins the group) and prints it once a second.
Once the producer stops, the lag falls to 0.

By default it starts an embedded Tansu broker and a Spark standalone cluster (a master
and two workers, each its own process, from the installed pyspark package). Exits 0
when the lag reached 0 and the query counted every event; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING

from confluent_kafka import Producer

from coopconsumer import Consumer, TopicPartition
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


class EventProducer(threading.Thread):
    """Produces JSON shop events, ``rate`` per second, until :meth:`stop`."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10})
        self.topic, self.rate = topic, rate
        self.stopping = threading.Event()
        self.produced = 0

    def run(self) -> None:
        rng = random.Random(7)
        started = time.monotonic()
        while not self.stopping.is_set():
            due = int((time.monotonic() - started) * self.rate)
            for _ in range(due - self.produced):
                user = f"user-{rng.randrange(20):02d}"
                event = {"id": self.produced, "user": user, "action": rng.choice(ACTIONS)}
                self.producer.produce(self.topic, key=user.encode(), value=json.dumps(event))
                self.produced += 1
            self.producer.poll(0)
            time.sleep(0.05)
        if self.producer.flush(30) != 0:
            raise SystemExit("the producer could not deliver every event")

    def stop(self) -> int:
        self.stopping.set()
        self.join(60)
        return self.produced


def group_lag(checker: Consumer, partitions: list[TopicPartition]) -> tuple[int, int]:
    """(lag, committed): high watermarks minus the group's committed offsets, summed --
    what a lag exporter reports -- and the sum of the committed offsets."""
    committed = checker.committed(partitions)
    lag = total = 0
    for tp in partitions:
        _low, high = checker.get_watermark_offsets(tp)
        offset = committed.get(tp) or 0
        lag += max(0, high - offset)
        total += offset
    return lag, total


def start_spark(master: str) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("coopconsumer-stream-lag")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


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
    parser.add_argument("--seconds", type=float, default=8.0, help="how long events flow")
    parser.add_argument("--rate", type=float, default=200.0, help="events per second")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=180.0, help="for the lag to reach 0")
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from coopconsumer.spark import register_data_source

    with ExitStack() as stack:
        broker: EmbeddedBroker
        if args.bootstrap:
            broker = external_broker(args.bootstrap)
        else:
            print(f"starting an embedded {args.broker} broker", flush=True)
            broker = stack.enter_context(embedded_broker(args.broker))
        if args.master:
            spark = start_spark(args.master)
        else:
            print("starting a Spark standalone cluster (a master, two workers)", flush=True)
            cluster = stack.enter_context(spark_standalone_cluster(2))
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            from pyspark.sql import SparkSession

            builder = SparkSession.builder.appName("coopconsumer-stream-lag")
            for key, value in cluster.session_config().items():
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
        stack.callback(spark.stop)
        register_data_source(spark)

        topic, group = unique_name("shop-events"), unique_name("stream-counts")
        broker.create_topic(topic, partitions=args.partitions)
        partitions = [TopicPartition(topic, p) for p in range(args.partitions)]
        checkpoint = stack.enter_context(tempfile.TemporaryDirectory())

        events = (
            spark.readStream.format("coopconsumer")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("kafka.group.id", group)  # the query's progress becomes this group's
            .option("kafka.auto.offset.reset", "earliest")  # a new group starts at the start
            .option("subscribe", topic)
            .option("maxOffsetsPerTrigger", "1000")
            .load()
        )
        # Stateless: each micro-batch appends (offset, action) rows to a memory table.
        actions = events.select(
            "partition",
            "offset",
            F.get_json_object(F.col("value").cast("string"), "$.action").alias("action"),
        )
        query = (
            actions.writeStream.outputMode("append")
            .format("memory")
            .queryName("actions")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second")
            .start()
        )
        stack.callback(query.stop)

        producer = EventProducer(broker.bootstrap, topic, args.rate)
        producer.start()
        checker = stack.enter_context(
            Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        )
        started = time.monotonic()
        produced: int | None = None
        caught_up = False
        while time.monotonic() - started < args.seconds + args.timeout:
            if query.exception() is not None:
                print(f"FAILED: the query failed: {query.exception()}", file=sys.stderr)
                return 1
            if produced is None and time.monotonic() - started >= args.seconds:
                produced = producer.stop()
                print(f"producer stopped after {produced} events", flush=True)
            lag, committed = group_lag(checker, partitions)
            batches = len([p for p in query.recentProgress if p["numInputRows"] > 0])
            print(
                f"lag check: group {group} lag {lag}, committed {committed}, "
                f"{batches} micro-batches with data",
                flush=True,
            )
            if produced is not None and lag == 0 and committed == produced:
                caught_up = True
                break
            time.sleep(1.0)
        rows = {
            r.action: r.events
            for r in spark.sql(
                "SELECT action, COUNT(DISTINCT partition, offset) AS events FROM actions "
                "GROUP BY action"
            ).collect()
        }
        print("events per action:", json.dumps(rows, sort_keys=True))
        counted = sum(rows.values())

    if not caught_up or counted != produced:
        print(
            f"FAILED: lag 0 reached: {caught_up}; counted {counted} of {produced} events",
            file=sys.stderr,
        )
        return 1
    print(f"stream OK: lag 0 after {produced} events, all counted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
