"""The ``coopconsumer`` data source on the standalone cluster (conftest.py).

* ``spark.read``: every record of the offset ranges, once, in Spark's Kafka schema
  (headers included on request), ``minPartitions`` splitting the ranges, JSON start and
  end offsets, the group's committed offsets as the start;
* ``spark.readStream`` over a topic that keeps growing: after each micro-batch the
  consumer group's committed offsets, read back by a coopconsumer ``Consumer`` and by
  kafka-python's admin client, advance to that batch's end offsets and never pass the
  batches Spark finished; when the topic stops growing they reach its end (lag 0);
* ``df.write``: every row becomes a record; overwrite and a missing value column are
  refused.
"""

from __future__ import annotations

import collections
import itertools
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient
from pyspark import cloudpickle

from coopconsumer import Consumer, TopicPartition
from coopconsumer.spark import register_data_source
from coopconsumer.testing import EmbeddedBroker
from integration.spark.conftest import PARTITIONS, GrowingTopic

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

PATIENCE_S = 120.0


@pytest.fixture(scope="module", autouse=True)
def registered(spark: SparkSession) -> None:
    register_data_source(spark)


def produce(bootstrap: str, topic: str, values: list[str], *, headers: bool = False) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(
            topic,
            key=f"k{i}".encode(),
            value=value.encode(),
            partition=i % PARTITIONS,
            headers=[("n", str(i).encode()), ("empty", None)] if headers else None,
        )
    assert producer.flush(30) == 0


def source(spark: SparkSession, broker: EmbeddedBroker, topic: str, **options: str) -> DataFrame:
    reader = (
        spark.read.format("coopconsumer")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_returns_every_record_once_in_the_kafka_schema(
    spark: SparkSession, broker: EmbeddedBroker, unique_topic: str
) -> None:
    broker.create_topic(unique_topic, partitions=PARTITIONS)
    values = [f"r{i}" for i in range(203)]
    produce(broker.bootstrap, unique_topic, values, headers=True)

    frame = source(spark, broker, unique_topic, includeHeaders="true", minPartitions="10")
    assert frame.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    # Four partitions of about 50 offsets, split into about ten tasks.
    assert 8 <= frame.rdd.getNumPartitions() <= 12
    rows = frame.collect()
    assert sorted(r.value.decode() for r in rows) == sorted(values)
    assert len({(r.partition, r.offset) for r in rows}) == len(values)
    first = next(r for r in rows if r.value == b"r5")
    assert (first.key, first.topic, first.partition, first.offset) == (
        b"k5",
        unique_topic,
        1,
        1,
    )
    assert first.timestampType == 0  # create time
    assert abs(first.timestamp.timestamp() - time.time()) < 600
    assert [(h.key, h.value) for h in first.headers] == [("n", b"5"), ("empty", None)]


def test_batch_read_of_an_empty_topic_is_an_empty_frame(
    spark: SparkSession, kafka_broker: EmbeddedBroker, unique_topic: str
) -> None:
    """Nothing to read plans no range; Spark then hands ``read`` its stand-in
    ``InputPartition(None)``, which used to fail an assertion (found by the Spark
    benchmark on Kafka). Spark's own Kafka source gives an empty frame: so does ours."""
    kafka_broker.create_topic(unique_topic, partitions=PARTITIONS)
    frame = source(spark, kafka_broker, unique_topic)
    assert frame.collect() == []
    assert frame.count() == 0


def test_batch_read_between_json_offsets_and_from_the_group(
    spark: SparkSession, kafka_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    kafka_broker.create_topic(unique_topic, partitions=PARTITIONS)
    produce(kafka_broker.bootstrap, unique_topic, [f"r{i}" for i in range(40)])  # 10 each
    between = source(
        spark,
        kafka_broker,
        unique_topic,
        startingOffsets=json.dumps({unique_topic: {"0": 2, "1": -2}}),
        endingOffsets=json.dumps({unique_topic: {"0": 5, "2": 3, "3": -1}}),
    ).collect()
    # Unlisted partitions start at the batch default (earliest) and end at latest.
    expected = {0: range(2, 5), 1: range(0, 10), 2: range(0, 3), 3: range(0, 10)}
    assert sorted((r.partition, r.offset) for r in between) == sorted(
        (p, o) for p, offsets in expected.items() for o in offsets
    )

    config = {"bootstrap.servers": kafka_broker.bootstrap, "group.id": unique_group}
    with Consumer(config) as committer:
        tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
        committer.assign(tps)
        committer.commit({tps[0]: 7, tps[1]: 9})
    from_group = source(
        spark, kafka_broker, unique_topic, **{"kafka.group.id": unique_group}
    ).collect()
    # startingOffsets defaults to the group's offsets; uncommitted partitions start at
    # kafka.auto.offset.reset (earliest for a batch read).
    assert collections.Counter(r.partition for r in from_group) == {0: 3, 1: 1, 2: 10, 3: 10}


def test_bad_options_are_refused_before_anything_runs(
    spark: SparkSession, kafka_broker: EmbeddedBroker, unique_topic: str
) -> None:
    from pyspark.errors import PySparkException

    kafka_broker.create_topic(unique_topic, partitions=1)
    errors = PySparkException
    with pytest.raises(errors, match="subscribe"):
        spark.read.format("coopconsumer").option(
            "kafka.bootstrap.servers", kafka_broker.bootstrap
        ).load().collect()
    with pytest.raises(errors, match="startingOffsets=group needs"):
        source(spark, kafka_broker, unique_topic, startingOffsets="group").collect()
    with pytest.raises(errors, match="minPartitions"):
        source(spark, kafka_broker, unique_topic, minPartitions="0").collect()


def offsets_of(progress_offsets: str | dict[str, Any] | None, topic: str) -> dict[int, int]:
    """A progress report's source offsets as {partition: next offset}."""
    if progress_offsets is None:
        return {}
    value = json.loads(progress_offsets) if isinstance(progress_offsets, str) else progress_offsets
    if value is None:  # the first batch's start
        return {}
    return {int(p): int(o) for p, o in value.get(topic, {}).items()}


def group_offsets(
    consumer: Consumer, admin: KafkaAdminClient, group: str, topic: str
) -> tuple[dict[int, int], dict[int, int]]:
    """The group's committed offsets as a coopconsumer Consumer and kafka-python's
    admin client read them (partitions without a commit left out)."""
    ours = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)])
    theirs = admin.list_group_offsets(group).get(group, {})
    return (
        {tp.partition: o for tp, o in ours.items() if o is not None},
        {tp.partition: om.offset for tp, om in theirs.items() if tp.topic == topic},
    )


def test_streaming_query_commits_the_group_offsets_after_each_micro_batch(
    spark: SparkSession,
    kafka_broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    tmp_path: Path,
) -> None:
    kafka_broker.create_topic(unique_topic, partitions=PARTITIONS)
    topic = GrowingTopic(kafka_broker.bootstrap, unique_topic, per_second=100)
    stream = (
        spark.readStream.format("coopconsumer")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("kafka.group.id", unique_group)
        .option("kafka.auto.offset.reset", "earliest")
        .option("subscribe", unique_topic)
        .load()
    )
    query = (
        stream.selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )
    # Reads the group's offsets (OffsetFetch) without joining it.
    config = {"bootstrap.servers": kafka_broker.bootstrap, "group.id": unique_group}
    snapshots: list[tuple[dict[int, int], dict[int, int]]] = []
    finished: dict[int, dict[int, int]] = {}  # batch id -> its end offsets
    # Where batches started; the first at the earliest offsets of the fresh topic.
    starts: list[dict[int, int]] = [dict.fromkeys(range(PARTITIONS), 0)]

    def read_progress() -> None:
        for progress in query.recentProgress:
            batch_end = offsets_of(progress["sources"][0]["endOffset"], unique_topic)
            if progress["numInputRows"] > 0:
                finished[progress["batchId"]] = batch_end
                starts.append(offsets_of(progress["sources"][0]["startOffset"], unique_topic))

    try:
        with Consumer(config) as consumer:
            admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
            try:
                deadline = time.monotonic() + PATIENCE_S
                produced: int | None = None
                while True:
                    assert time.monotonic() < deadline, (
                        f"stuck at {snapshots[-1:]}: {query.lastProgress}"
                    )
                    assert query.exception() is None, query.exception()
                    read_progress()
                    snapshot = group_offsets(consumer, admin, unique_group, unique_topic)
                    snapshots.append(snapshot)
                    if produced is None and len(finished) >= 4:
                        produced = topic.finish()  # the topic stops growing
                    if produced is not None:
                        end = [produced // 4 + (p < produced % 4) for p in range(4)]
                        if snapshot == (dict(enumerate(end)), dict(enumerate(end))):
                            # The query read everything and committed it: lag 0. Spark
                            # posts a batch's progress after the source's commit, so
                            # the last batch may not be in recentProgress yet: wait for it.
                            while dict(enumerate(end)) not in finished.values():
                                assert time.monotonic() < deadline, (
                                    f"no progress of the batch ending at {end}: {finished}"
                                )
                                time.sleep(0.2)
                                read_progress()
                            break
                    time.sleep(0.2)
            finally:
                admin.close()
    finally:
        topic.finish()
        query.stop()

    # Both clients always saw the same offsets (a read may straddle a commit: allow the
    # pairs that differ to be the exception), and the offsets only moved forward.
    assert sum(ours == theirs for ours, theirs in snapshots) >= len(snapshots) - 3
    seen = [ours for ours, _ in snapshots if ours]
    for earlier, later in itertools.pairwise(seen):
        assert all(later[p] >= o for p, o in earlier.items()), (earlier, later)
    # After each micro-batch with data the group's offsets became its end offsets, and
    # they never named an offset Spark had not finished: every value seen is the end of
    # a finished batch, or where the first one started (at-least-once for a new query
    # starting from the group).
    ends = [finished[b] for b in sorted(finished)]
    assert len(ends) >= 4
    distinct = {tuple(sorted(s.items())) for s in seen}
    assert all(tuple(sorted(e.items())) in distinct for e in ends), (ends, distinct)
    allowed = [*ends, *starts]
    assert all(s in allowed for s in seen), [s for s in seen if s not in allowed]
    written = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.value for r in written) == sorted(f"v{i}" for i in range(produced or 0))


def test_write_produces_every_row_and_refuses_overwrite(
    spark: SparkSession, kafka_broker: EmbeddedBroker, unique_topic: str
) -> None:
    from pyspark.errors import PySparkException

    kafka_broker.create_topic(unique_topic, partitions=PARTITIONS)
    frame = spark.createDataFrame(
        [(f"k{i}", f"v{i}", i % PARTITIONS) for i in range(120)],
        "key STRING, value STRING, partition INT",
    ).repartition(3)
    (
        frame.write.format("coopconsumer")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("topic", unique_topic)
        .mode("append")
        .save()
    )
    back = source(spark, kafka_broker, unique_topic).collect()
    assert sorted((r.key, r.value, r.partition) for r in back) == sorted(
        (f"k{i}".encode(), f"v{i}".encode(), i % PARTITIONS) for i in range(120)
    )
    errors = PySparkException
    with pytest.raises(errors, match="append"):
        frame.write.format("coopconsumer").option(
            "kafka.bootstrap.servers", kafka_broker.bootstrap
        ).option("topic", unique_topic).mode("overwrite").save()
    with pytest.raises(errors, match="value column"):
        frame.select("key").write.format("coopconsumer").option(
            "kafka.bootstrap.servers", kafka_broker.bootstrap
        ).option("topic", unique_topic).mode("append").save()
