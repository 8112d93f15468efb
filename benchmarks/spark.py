"""Benchmark: Spark's own Kafka source and sink against coopconsumer's data source and
consume job, same topic, same broker, one Spark cluster.

    python benchmarks/spark.py [--broker kafka|tansu] [--records N] [--rounds R]
                               [--partitions P] [--members M] [--latency-rate R/s]

Starts one embedded broker (``--broker kafka``, the default: one Apache Kafka KRaft
node from ``coopconsumer.testing``; ``tansu``: Tansu behind the transactions proxy) and a
Spark standalone cluster (a master and two workers with two task slots each, separate
processes, from the installed pyspark). Spark's Kafka connector
(``org.apache.spark:spark-sql-kafka-0-10_2.13`` and what it needs) is resolved from
Maven Central by ``mvn dependency:copy-dependencies`` on a generated POM, cached under
``~/.cache/coopconsumer/spark-kafka/<version>/``, and loaded through ``spark.jars``
(only the jars pyspark does not ship already). Its version is the installed pyspark's;
when Maven Central has no such release (pyspark 4.3.0 and no connector 4.3.0), the
newest published release below it is used and the run says so.

One topic of ``N`` records (default 200,000 of 100 bytes over 4 partitions) is read,
in ``R`` rounds (default 3; the order of the paths alternates between rounds), by:

* **batch read**: ``spark.read.format("kafka")`` and ``spark.read.format("coopconsumer")``,
  earliest to latest, aggregated to a count and the sum of the value lengths (every
  value touched). Timed window: the ``collect()`` of the aggregate -- planning (the end
  offsets), the tasks reading on the executors, the aggregate.
* **streaming**: ``readStream`` of each format from the earliest offsets with
  ``trigger(availableNow=True)`` and a ``foreachBatch`` that runs the same aggregate.
  Timed window: ``start()`` to the query's termination (planning every micro-batch,
  reading, the checkpoint; coopconsumer's source also commits the group's offsets,
  ``kafka.group.id`` is set for both formats, Spark's ignores it for commits).
* **consume job** (``run_consume_job``, ``M`` members, at-least-once, a sink that touches
  every value): from the call to its return -- end offsets, task launch, the members
  joining the group, consuming, a commit after every batch, leaving.

Then, once each:

* **exactly-once write** (Kafka -> Kafka copy of the topic): Spark's source ->
  Spark's Kafka sink (``writeStream.format("kafka")``, availableNow; Spark documents it
  as at-least-once) against ``run_consume_job(..., exactly_once=True)`` (every batch's
  output and offsets in one transaction, KIP-447). Timed window: start to the end of the
  query / job. The copies are then read back with read_committed and counted.
* **end-to-end latency**: a producer writes ``--latency-rate`` records/s for
  ``--latency-seconds``; Spark's stream, coopconsumer's stream (default trigger: as
  soon as the last batch ended) and a long-running consume job
  (``start_consume_job``) each take them; latency = when the record reached the
  driver (streams: ``foreachBatch`` collected its timestamp) or the sink (job: on the
  executor) minus its Kafka CreateTime. Same host, one clock.
* **what is left to operators**: consumer-group lag as Kafka's ``ConsumerGroupCommand``
  (``kafka-consumer-groups.sh``) and the admin API see it, for the group each path was
  given: coopconsumer's stream and job commit the group's offsets (lag 0), Spark's
  source does not commit (no offsets: the lag is unknown to Kafka's tools).

Printed: per path the median records/s, the spread (min-max) over the rounds and the
ratio coopconsumer / Spark of the medians; the load average before and after. JSON and a
PNG go to ``--results`` (``benchmarks/results``). The figures are records divided by
the timed window; Spark task launch and group joins are fixed costs, so a small ``N``
understates the steady rates. Other processes on a shared machine move these figures:
compare paths within one run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import describe_machine, print_table, produce

from coopconsumer.testing import embedded_broker, spark_standalone_cluster

if TYPE_CHECKING:
    from confluent_kafka import Message

    from coopconsumer import TransactionalOutput

_CONNECTOR = ("org.apache.spark", "spark-sql-kafka-0-10_2.13")
_CENTRAL = "https://repo.maven.apache.org/maven2"
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>coopconsumer.bench</groupId>
  <artifactId>spark-kafka-jars</artifactId>
  <version>1</version>
  <dependencies>
    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>
      <version>{version}</version></dependency>
  </dependencies>
</project>
"""
_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


# --------------------------------------------------------------- Spark's Kafka connector


def _cache_root() -> Path:
    root = os.environ.get("COOPCONSUMER_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME")
    return (Path(root) if root else Path.home() / ".cache") / "coopconsumer" / "spark-kafka"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def connector_version(wanted: str) -> tuple[str, str]:
    """The connector release to use for pyspark ``wanted``, and a note: ``wanted`` when
    Maven Central lists it, else the newest release (no preview) below it."""
    group, artifact = _CONNECTOR
    url = f"{_CENTRAL}/{group.replace('.', '/')}/{artifact}/maven-metadata.xml"
    with urllib.request.urlopen(url, timeout=30) as answer:
        metadata = answer.read().decode()
    published = re.findall(r"<version>([^<]+)</version>", metadata)
    if wanted in published:
        return wanted, f"{artifact} {wanted} (the installed pyspark's version)"
    releases = [v for v in published if re.fullmatch(r"\d+\.\d+\.\d+", v)]
    below = sorted(
        (v for v in releases if _version_key(v) < _version_key(wanted)), key=_version_key
    )
    if not below:
        raise RuntimeError(f"Maven Central has no {artifact} release at or below {wanted}")
    return below[-1], (
        f"{artifact} {below[-1]}: Maven Central has no {wanted} (the installed pyspark's "
        f"version); the newest release below it"
    )


def spark_kafka_jars(version: str) -> list[Path]:
    """The connector's jars (runtime scope) for ``version``, resolved by Maven once and
    cached, minus artifacts pyspark ships already (Scala, slf4j, compression codecs)."""
    import pyspark

    home = _cache_root() / version
    libs = home / "libs"
    if not (libs / ".complete").exists():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("resolving Spark's Kafka connector needs Maven ('mvn')")
        home.mkdir(parents=True, exist_ok=True)
        group, artifact = _CONNECTOR
        (home / "pom.xml").write_text(_POM.format(group=group, artifact=artifact, version=version))
        staging = home / "libs.staging"
        shutil.rmtree(staging, ignore_errors=True)
        done = subprocess.run(
            [mvn, "-B", "-q", "-f", str(home / "pom.xml"), "dependency:copy-dependencies",
             f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
            capture_output=True, text=True, check=False, timeout=900,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"mvn failed:\n{(done.stdout + done.stderr)[-2000:]}")
        (staging / ".complete").write_text("ok\n")
        shutil.rmtree(libs, ignore_errors=True)
        staging.rename(libs)
    shipped = {
        p.name.rsplit("-", 1)[0] for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")
    }
    return sorted(p for p in libs.glob("*.jar") if p.name.rsplit("-", 1)[0] not in shipped)


# --------------------------------------------------------------- sinks (pickled by value)


class CountingSink:
    """The consume job's sink: touches every value."""

    def __call__(self, batch: list[Message]) -> None:
        touched = sum(len(m.value() or b"") for m in batch)
        assert touched >= 0


class LatencySink:
    """The long-running job's sink: appends, per record, now minus its Kafka timestamp
    (ms) to a file of its own (the executors share this host)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def __call__(self, batch: list[Message]) -> None:
        now_ms = time.time() * 1000
        lines = "".join(f"{now_ms - m.timestamp()[1]:.1f}\n" for m in batch)
        path = os.path.join(self.directory, f"lat-{os.getpid()}-{threading.get_ident()}")
        with open(path, "a") as f:
            f.write(lines)


class TransactionalCopySink:
    """The exactly-once job's sink: copies each record to ``topic`` into the batch's
    transaction."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def __call__(self, batch: list[Message], output: TransactionalOutput) -> None:
        for m in batch:
            output.produce(self.topic, m.value(), m.key())


# --------------------------------------------------------------- helpers


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "rounds": len(values),
    }


def _count_committed(bootstrap: str, topic: str, partitions: int) -> tuple[int, int]:
    """Records a read_committed reader finds in ``topic``, and distinct keys."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    tps = [confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)]
    consumer.assign(tps)
    ends = {p: consumer.get_watermark_offsets(tp, timeout=10)[1] for p, tp in enumerate(tps)}
    seen = 0
    distinct: set[bytes | None] = set()
    done: set[int] = set()
    idle_until = time.monotonic() + 20
    while len(done) < partitions and time.monotonic() < idle_until:
        for m in consumer.consume(5000, 1.0):
            if m.error() is None:
                seen += 1
                distinct.add(m.key())
                idle_until = time.monotonic() + 20
        for tp in consumer.position(tps):
            if tp.offset >= ends[tp.partition] or ends[tp.partition] == 0:
                done.add(tp.partition)
    consumer.close()
    return seen, len(distinct)


def _group_lag(bootstrap: str, group: str, topic: str, partitions: int) -> dict[str, Any]:
    """Committed offsets and lag of ``group`` on ``topic`` through the admin API."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = confluent_kafka.ConsumerGroupTopicPartitions(
        group, [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
    )
    answer = admin.list_consumer_group_offsets([request])[group].result()
    committed = {tp.partition: tp.offset for tp in answer.topic_partitions}
    probe = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-lag"})
    ends = {
        p: probe.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)[1]
        for p in range(partitions)
    }
    probe.close()
    known = {p: o for p, o in committed.items() if o >= 0}
    return {
        "group": group,
        "partitions_with_offsets": len(known),
        "lag": sum(ends[p] - o for p, o in known.items()) if known else None,
        "end_offsets": sum(ends.values()),
    }


def _tool_describe(broker: Any, group: str) -> str:
    """``kafka-consumer-groups.sh --describe --group`` as Kafka's tool prints it."""
    run_tool = getattr(broker, "run_tool", None)
    if run_tool is None:
        return "(Kafka's tools need --broker kafka)"
    done = run_tool(
        _GROUP_COMMAND,
        "--bootstrap-server",
        broker.internal_bootstrap,
        "--describe",
        "--group",
        group,
        timeout_s=120,
    )
    text = str(done.stdout + done.stderr)
    # Its own log lines ("[2026-... INFO ...") and stack traces are not what it answers.
    kept = [
        line
        for line in text.splitlines()
        if line.strip() and not line.startswith(("[", "java.", "Caused by", "\tat "))
    ]
    return "\n".join(kept)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _LiveProducer(threading.Thread):
    """Writes ``rate`` records/s of ``value_size`` bytes for ``seconds``."""

    def __init__(self, bootstrap: str, topic: str, rate: float, seconds: float) -> None:
        super().__init__(daemon=True, name="latency-producer")
        import confluent_kafka

        self._producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        self.topic, self.rate, self.seconds = topic, rate, seconds
        self.sent = 0

    def run(self) -> None:
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < self.seconds:
            due = int(elapsed * self.rate)
            while self.sent < due:
                self._producer.produce(self.topic, b"x" * 100, str(self.sent).encode())
                self.sent += 1
            self._producer.poll(0.002)
        self._producer.flush(30)


# --------------------------------------------------------------- the benchmark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", choices=("kafka", "tansu"), default="kafka")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--members", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-rate", type=float, default=1000.0)
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    parser.add_argument("--connector-version", default=None, help="default: pyspark's")
    parser.add_argument("--results", default="benchmarks/results")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import pyspark
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from coopconsumer.spark import register_data_source, run_consume_job, start_consume_job

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    if args.connector_version:
        version, note = args.connector_version, f"{_CONNECTOR[1]} {args.connector_version}"
    else:
        version, note = connector_version(pyspark.__version__)
    jars = spark_kafka_jars(version)
    load_start = _load()
    n: int = args.records
    parts: int = args.partitions
    figures: dict[str, list[float]] = {}
    fixed: dict[str, list[float]] = {}
    extra: dict[str, Any] = {}
    broker_context = (
        embedded_broker("kafka")
        if args.broker == "kafka"
        else embedded_broker("tansu", transactions=True)
    )
    with broker_context as broker, spark_standalone_cluster(2, cores_per_worker=2) as cluster:
        kafka_version = getattr(broker, "version", args.broker)
        topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic, partitions=parts)
        # Keyed 0..N-1: the copies' distinct keys show a duplicate.
        produce_s = produce(
            broker.bootstrap, topic, n, value_size=args.value_size, partitions=parts, with_keys=True
        )
        builder = SparkSession.builder.appName("coopconsumer-bench")
        for key, value in cluster.session_config().items():
            builder = builder.config(key, value)
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        cluster.wait_for_executors(spark, 2)
        register_data_source(spark)

        def reader(fmt: str, stream: bool, on: str = topic, **options: str) -> Any:
            r = spark.readStream.format(fmt) if stream else spark.read.format(fmt)
            for key, value in {
                "kafka.bootstrap.servers": broker.bootstrap,
                "subscribe": on,
                "startingOffsets": "earliest",
                **options,
            }.items():
                r = r.option(key, value)
            return r.load()

        def aggregate(frame: Any) -> tuple[int, int]:
            row = frame.agg(F.count("value"), F.sum(F.length("value"))).collect()[0]
            return int(row[0]), int(row[1] or 0)

        def batch_read(fmt: str, on: str, expect: int) -> float:
            frame = reader(fmt, False, on, endingOffsets="latest")
            started = time.perf_counter()
            count, size = aggregate(frame)
            elapsed = time.perf_counter() - started
            assert count == expect, f"{fmt} batch read {count} of {expect}"
            assert size == expect * args.value_size
            return elapsed

        stream_groups: dict[str, str] = {}

        def stream_read(fmt: str, on: str, expect: int, *, group: bool = True) -> float:
            counted: list[int] = []

            def count_batch(frame: Any, _batch_id: int) -> None:
                counted.append(aggregate(frame)[0])

            options = {}
            if group:
                name = f"bench-stream-{fmt}-{uuid.uuid4().hex[:8]}"
                options["kafka.group.id"] = name
                if on == topic:
                    stream_groups[fmt] = name
            frame = reader(fmt, True, on, **options)
            checkpoint = f"/tmp/coopconsumer-bench-{uuid.uuid4().hex[:8]}"
            started = time.perf_counter()
            query = (
                frame.writeStream.foreachBatch(count_batch)
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            elapsed = time.perf_counter() - started
            shutil.rmtree(checkpoint, ignore_errors=True)
            assert sum(counted) == expect, f"{fmt} stream read {sum(counted)} of {expect}"
            return elapsed

        job_groups: list[str] = []

        def consume_job(on: str, expect: int) -> float:
            group = f"bench-job-{uuid.uuid4().hex[:8]}"
            if on == topic:
                job_groups.append(group)
            started = time.perf_counter()
            stats = run_consume_job(
                spark,
                {"bootstrap.servers": broker.bootstrap, "group.id": group},
                [on],
                CountingSink(),
                members=args.members,
                batch_size=5000,
            ).collect()
            elapsed = time.perf_counter() - started
            consumed = sum(r.records for r in stats)
            assert consumed >= expect, f"the job consumed {consumed} of {expect}"
            return elapsed

        # A tiny topic (one record per partition): the same path on it measures its
        # fixed cost (planning, task launch, group join, checkpoint), so a ratio can be
        # split into fixed cost and per-record rate. (Not an empty one: the figures of
        # docs/benchmarks.md were measured so, while an empty batch read still failed.)
        tiny = f"{topic}-tiny"
        broker.create_topic(tiny, partitions=parts)
        produce(broker.bootstrap, tiny, parts, value_size=args.value_size, partitions=parts)
        # Untimed warm-up: Python workers, the JVMs' JIT, the broker's page cache.
        batch_read("kafka", topic, n)
        batch_read("coopconsumer", topic, n)
        paths: list[tuple[str, Callable[[str, int], float]]] = [
            ("batch read: Spark's kafka source", lambda on, k: batch_read("kafka", on, k)),
            ("batch read: coopconsumer source", lambda on, k: batch_read("coopconsumer", on, k)),
            ("streaming: Spark's kafka source", lambda on, k: stream_read("kafka", on, k)),
            (
                "streaming: coopconsumer source",
                lambda on, k: stream_read("coopconsumer", on, k),
            ),
            (
                "streaming: coopconsumer source, no group",
                lambda on, k: stream_read("coopconsumer", on, k, group=False),
            ),
            ("streaming: coopconsumer consume job", consume_job),
        ]
        for round_index in range(args.rounds):
            ordered = paths if round_index % 2 == 0 else list(reversed(paths))
            for label, run in ordered:
                full_s = run(topic, n)
                tiny_s = run(tiny, parts)
                figures.setdefault(label, []).append(n / full_s)
                fixed.setdefault(label, []).append(tiny_s)
                print(
                    f"  round {round_index + 1}: {label}: {n / full_s:,.0f} records/s "
                    f"({full_s:.2f} s; tiny topic {tiny_s:.2f} s); load {_load()}"
                )

        # ---- exactly-once write, Kafka -> Kafka
        spark_copy = f"{topic}-spark-copy"
        coop_copy = f"{topic}-coop-copy"
        broker.create_topic(spark_copy, partitions=parts)
        broker.create_topic(coop_copy, partitions=parts)
        checkpoint = f"/tmp/coopconsumer-bench-{uuid.uuid4().hex[:8]}"
        started = time.perf_counter()
        query = (
            reader("kafka", True)
            .select("key", "value")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", spark_copy)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        spark_write_s = time.perf_counter() - started
        shutil.rmtree(checkpoint, ignore_errors=True)
        started = time.perf_counter()
        eos_group = f"bench-eos-{uuid.uuid4().hex[:8]}"
        run_consume_job(
            spark,
            {"bootstrap.servers": broker.bootstrap, "group.id": eos_group},
            [topic],
            TransactionalCopySink(coop_copy),
            exactly_once=True,
            members=args.members,
            batch_size=5000,
        ).collect()
        coop_write_s = time.perf_counter() - started
        job_groups.append(eos_group)
        extra["write"] = {
            "spark_kafka_sink": {
                "seconds": spark_write_s,
                "records_per_s": n / spark_write_s,
                "read_committed": _count_committed(broker.bootstrap, spark_copy, parts),
                "guarantee": "at-least-once (Spark's Kafka sink: a retried task writes again)",
            },
            "coopconsumer_exactly_once_job": {
                "seconds": coop_write_s,
                "records_per_s": n / coop_write_s,
                "read_committed": _count_committed(broker.bootstrap, coop_copy, parts),
                "guarantee": "exactly-once for read_committed readers (KIP-447 transactions)",
            },
        }
        print(f"  exactly-once write done; load {_load()}")

        # ---- end-to-end latency
        latency: dict[str, list[float]] = {}
        cadence: dict[str, float] = {}  # median ms between non-empty micro-batches
        for fmt in ("kafka", "coopconsumer"):
            live = f"bench-live-{fmt}-{uuid.uuid4().hex[:8]}"
            broker.create_topic(live, partitions=parts)
            got: list[float] = []
            batch_ends: list[float] = []

            def collect(
                frame: Any,
                _batch_id: int,
                got: list[float] = got,
                batch_ends: list[float] = batch_ends,
            ) -> None:
                stamps = frame.select(F.unix_millis("timestamp")).collect()
                now_ms = time.time() * 1000
                got.extend(now_ms - r[0] for r in stamps)
                if stamps:
                    batch_ends.append(now_ms)

            checkpoint = f"/tmp/coopconsumer-bench-{uuid.uuid4().hex[:8]}"
            frame = (
                spark.readStream.format(fmt)
                .option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", live)
                .option("startingOffsets", "earliest")
                .load()
            )
            query = (
                frame.writeStream.foreachBatch(collect)
                .option("checkpointLocation", checkpoint)
                .start()
            )
            time.sleep(5)  # the first (empty) micro-batches
            producer = _LiveProducer(
                broker.bootstrap, live, args.latency_rate, args.latency_seconds
            )
            producer.start()
            producer.join()
            deadline = time.monotonic() + 60
            while len(got) < producer.sent and time.monotonic() < deadline:
                time.sleep(0.2)
            query.stop()
            shutil.rmtree(checkpoint, ignore_errors=True)
            latency[f"{fmt} stream"] = got
            gaps = [b - a for a, b in itertools.pairwise(batch_ends)]
            cadence[f"{fmt} stream"] = statistics.median(gaps) if gaps else 0.0
            print(f"  latency {fmt} stream: {len(got)} of {producer.sent}; load {_load()}")
        live = f"bench-live-job-{uuid.uuid4().hex[:8]}"
        broker.create_topic(live, partitions=parts)
        lat_dir = Path(f"/tmp/coopconsumer-bench-lat-{uuid.uuid4().hex[:8]}")
        lat_dir.mkdir()
        job_group = f"bench-livejob-{uuid.uuid4().hex[:8]}"
        job = start_consume_job(
            spark,
            {"bootstrap.servers": broker.bootstrap, "group.id": job_group},
            [live],
            LatencySink(str(lat_dir)),
            members=args.members,
            batch_size=500,
            poll_timeout_s=0.05,
        )
        time.sleep(15)  # task launch and the group's first generation
        producer = _LiveProducer(broker.bootstrap, live, args.latency_rate, args.latency_seconds)
        producer.start()
        producer.join()
        time.sleep(5)
        job.stop(timeout_s=120)
        job_lat = [float(x) for p in lat_dir.glob("lat-*") for x in p.read_text().split()]
        shutil.rmtree(lat_dir, ignore_errors=True)
        latency["coopconsumer consume job"] = job_lat
        print(f"  latency consume job: {len(job_lat)} of {producer.sent}; load {_load()}")
        extra["latency_ms"] = {
            k: {
                "records": len(v),
                "p50": _percentile(v, 0.5),
                "p99": _percentile(v, 0.99),
                "max": max(v),
                "median_ms_between_batches": cadence.get(k),
            }
            for k, v in latency.items()
            if v
        }

        # ---- what operators see: the group's lag
        lag = {
            "Spark's kafka source (kafka.group.id set)": _group_lag(
                broker.bootstrap, stream_groups["kafka"], topic, parts
            ),
            "coopconsumer source (kafka.group.id set)": _group_lag(
                broker.bootstrap, stream_groups["coopconsumer"], topic, parts
            ),
            "coopconsumer consume job": _group_lag(broker.bootstrap, job_groups[0], topic, parts),
        }
        tool = {
            "kafka": _tool_describe(broker, stream_groups["kafka"]),
            "coopconsumer": _tool_describe(broker, stream_groups["coopconsumer"]),
        }
        extra["group_lag"] = lag
        # Spark runs a Python streaming source's driver side in a Python process it
        # starts per query (pyspark's python_streaming_source_runner), which imports
        # pyspark and the source's package: a fixed cost Spark's JVM source has not.
        imports = []
        for _ in range(3):
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", "import pyspark.sql, coopconsumer.spark"], check=True
            )
            imports.append(time.perf_counter() - started)
        extra["fresh_python_import_s"] = _summary(imports)
        extra["consumer_group_command"] = tool
        spark.stop()
    load_end = _load()

    print()
    print(describe_machine())
    print(
        f"broker: {args.broker} ({kafka_version}); Spark {pyspark.__version__}, connector "
        f"{note}; {n:,} records of {args.value_size} B over {parts} partitions (produced in "
        f"{produce_s:.1f} s); standalone cluster 2 workers x 2 slots; job members "
        f"{args.members}; {args.rounds} rounds; load average before {load_start}, after "
        f"{load_end}"
    )
    summaries = {label: _summary(values) for label, values in figures.items()}
    fixed_s = {label: _summary(values) for label, values in fixed.items()}
    rows = []
    for label, s in summaries.items():
        f = fixed_s[label]["median"]
        marginal = n / max(1e-9, n / s["median"] - f)
        s["fixed_s"] = f
        s["per_record_rate"] = marginal
        rows.append(
            [
                label,
                f"{s['median']:,.0f}",
                f"{s['min']:,.0f}-{s['max']:,.0f}",
                f"{f:.2f}",
                f"{marginal:,.0f}",
                f"{int(s['rounds'])}",
            ]
        )
    print_table(
        [
            "path",
            "records/s (median)",
            "spread (min-max)",
            "tiny topic s",
            "records/s less fixed",
            "rounds",
        ],
        rows,
    )
    print(
        f"tiny topic s: the same path on a topic of {parts} records (median): its fixed "
        "cost; "
        "records/s less fixed: N / (median time - that)"
    )

    def ratio(ours: str, theirs: str) -> float:
        return summaries[ours]["median"] / summaries[theirs]["median"]

    ratios = {
        "batch read: coopconsumer / Spark": ratio(
            "batch read: coopconsumer source", "batch read: Spark's kafka source"
        ),
        "streaming: coopconsumer source / Spark": ratio(
            "streaming: coopconsumer source", "streaming: Spark's kafka source"
        ),
        "streaming: consume job / Spark source": ratio(
            "streaming: coopconsumer consume job", "streaming: Spark's kafka source"
        ),
    }
    print()
    print_table(
        ["ratio of medians (target >= 1.0)", "x"], [[k, f"{v:.2f}"] for k, v in ratios.items()]
    )
    w = extra["write"]
    print()
    print_table(
        ["Kafka -> Kafka copy", "seconds", "records/s", "read_committed (n, keys)", "promise"],
        [
            [
                label,
                f"{d['seconds']:.1f}",
                f"{d['records_per_s']:,.0f}",
                f"{d['read_committed'][0]:,}, {d['read_committed'][1]:,}",
                d["guarantee"],
            ]
            for label, d in w.items()
        ],
    )  # fmt: skip
    print()
    print_table(
        ["end-to-end latency (ms)", "records", "p50", "p99", "max", "ms between batches"],
        [
            [
                k,
                f"{v['records']:,}",
                f"{v['p50']:.0f}",
                f"{v['p99']:.0f}",
                f"{v['max']:.0f}",
                "-" if v["median_ms_between_batches"] is None
                else f"{v['median_ms_between_batches']:.0f}",
            ]
            for k, v in extra["latency_ms"].items()
        ],
    )  # fmt: skip
    print()
    print_table(
        ["group given to the path", "partitions with offsets", "lag (admin API)"],
        [
            [k, str(v["partitions_with_offsets"]), "unknown" if v["lag"] is None else f"{v['lag']}"]
            for k, v in lag.items()
        ],
    )
    imp = extra["fresh_python_import_s"]
    print(
        f"\na fresh Python importing pyspark.sql and coopconsumer.spark (what each "
        f"coopconsumer stream query starts on the driver): median {imp['median']:.2f} s "
        f"({imp['min']:.2f}-{imp['max']:.2f}, {int(imp['rounds'])} runs)"
    )
    for fmt, text in tool.items():
        print(f"\nkafka-consumer-groups.sh --describe, the {fmt} stream's group:\n{text}")
    _write(args, summaries, ratios, extra, load_start, load_end, note, kafka_version)


def _write(
    args: argparse.Namespace,
    summaries: dict[str, dict[str, float]],
    ratios: dict[str, float],
    extra: dict[str, Any],
    load_start: str,
    load_end: str,
    note: str,
    kafka_version: str,
) -> None:
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"spark-kafka-vs-coopconsumer-{args.broker}"
    doc = {
        "args": vars(args),
        "connector": note,
        "kafka_version": kafka_version,
        "nproc": os.cpu_count(),
        "load_average_before": load_start,
        "load_average_after": load_end,
        "records_per_s": summaries,
        "ratios": ratios,
        **extra,
    }
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1, default=str))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = list(summaries)
    medians = [summaries[k]["median"] for k in labels]
    low = [summaries[k]["median"] - summaries[k]["min"] for k in labels]
    high = [summaries[k]["max"] - summaries[k]["median"] for k in labels]
    colors = ["tab:gray" if "Spark" in k else "tab:blue" for k in labels]
    left.barh(labels, medians, xerr=[low, high], color=colors)
    left.invert_yaxis()
    left.set_xlabel("records/s (median; bars: min-max)")
    left.set_title(f"{args.records:,} records, {args.rounds} rounds")
    lat = extra["latency_ms"]
    names = list(lat)
    xs = range(len(names))
    right.bar([x - 0.2 for x in xs], [lat[k]["p50"] for k in names], 0.4, label="p50")
    right.bar([x + 0.2 for x in xs], [lat[k]["p99"] for k in names], 0.4, label="p99")
    right.set_xticks(list(xs), names, rotation=15)
    right.set_ylabel("ms")
    right.set_title(f"end-to-end latency at {args.latency_rate:.0f} records/s")
    right.legend()
    fig.suptitle(f"Spark's Kafka source vs coopconsumer; load {load_start} -> {load_end}")
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    main()
