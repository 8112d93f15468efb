"""``KafkaWriter(..., transactional_id=...)`` on the standalone cluster and Apache Kafka
(conftest.py): each task writes its rows in one transaction of
its own id (``<prefix>-<Spark partition>``).

A value serializer fails the first attempt of one task half-way through its rows --
by raising, or by SIGKILLing its own Python worker after the rows before it reached
the broker -- and Spark retries the task. An independent ``read_committed`` reader then
finds every row exactly once: the failed attempt's records were written to the log
(``read_uncommitted`` sees them: the test could fail) but never committed; after the
SIGKILL, the retry's ``init_transactions`` under the same id ended the dead attempt's
open transaction at once.
"""

from __future__ import annotations

import collections
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition
from pyspark import TaskContext, cloudpickle

from coopconsumer import ConfigurationError, TopicPartition
from coopconsumer.spark import KafkaWriter
from coopconsumer.testing import EmbeddedBroker, TransactionalBroker
from integration.spark.conftest import PARTITIONS, read_committed_values

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

#: Kafka's EndTxn API key.
END_TXN = 26
ROWS = 400
SPARK_PARTITIONS = 2


class FailOnce:
    """A value serializer (UTF-8) that fails attempt 0 of Spark partition 0 at row
    ``at``, after a pause that lets the rows before it reach the broker: ``"raise"``,
    or ``"sigkill"`` its own Python worker."""

    def __init__(self, fault: str, at: int) -> None:
        self.fault = fault
        self.at = at
        self.seen = 0

    def __call__(self, value: object) -> bytes:
        context = TaskContext.get()
        assert context is not None
        self.seen += 1
        if context.partitionId() == 0 and context.attemptNumber() == 0 and self.seen == self.at:
            time.sleep(1.0)  # linger.ms is 5: the records before this one are sent
            if self.fault == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError("injected failure half-way through the task")
        return str(value).encode()


def read_uncommitted_count(broker: EmbeddedBroker, topic: str) -> int:
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"uncommitted-{topic}",
            "isolation.level": "read_uncommitted",
            "enable.auto.commit": False,
        }
    )
    reader.assign([KafkaPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen, deadline, quiet = 0, time.monotonic() + 30, time.monotonic() + 3
    try:
        while time.monotonic() < min(deadline, quiet):
            message = reader.poll(0.2)
            if message is not None and message.error() is None:
                seen += 1
                quiet = time.monotonic() + 2
    finally:
        reader.close()
    return seen


def log_end_offsets(broker: EmbeddedBroker, topic: str) -> int:
    """The sum of the high watermarks of ``topic``'s partitions: records and
    transaction markers."""
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"ends-{topic}"})
    try:
        return sum(
            reader.get_watermark_offsets(KafkaPartition(topic, p), timeout=30)[1]
            for p in range(PARTITIONS)
        )
    finally:
        reader.close()


@pytest.mark.parametrize("fault", ["raise", "sigkill"])
def test_a_failed_attempt_leaves_no_rows_behind(
    spark: SparkSession,
    txn_broker: EmbeddedBroker,
    unique_topic: str,
    fault: str,
) -> None:
    txn_broker.create_topic(unique_topic, partitions=PARTITIONS)
    writer = KafkaWriter(
        {
            "bootstrap.servers": txn_broker.bootstrap,
            "linger.ms": 5,
            "transaction.timeout.ms": 20000,
        },
        unique_topic,
        value_column="n",
        value_serializer=FailOnce(fault, at=ROWS // SPARK_PARTITIONS // 2),
        transactional_id=f"writer-{unique_topic}",
    )
    frame = spark.range(ROWS, numPartitions=SPARK_PARTITIONS).withColumnRenamed("id", "n")
    started = time.monotonic()
    report = frame.mapInPandas(writer.map_in_pandas, writer.output_schema).collect()
    elapsed = time.monotonic() - started
    assert sum(r.records for r in report) == ROWS
    assert {r.partition for r in report} == {-1}  # the partitioner chose

    seen = read_committed_values(txn_broker, unique_topic, expected=ROWS)
    expected = collections.Counter(str(i) for i in range(ROWS))
    duplicates, missing = sum((seen - expected).values()), sum((expected - seen).values())
    assert (duplicates, missing) == (0, 0)
    in_log = read_uncommitted_count(txn_broker, unique_topic)
    print(
        f"transactional writer, {fault}: {duplicates} duplicates, {missing} missing, "
        f"{in_log - ROWS} aborted records in the log, {elapsed:.1f}s"
    )
    assert in_log > ROWS  # the failed attempt did write; its transaction was aborted


def test_transactional_settings_are_checked_on_the_driver(
    txn_broker: EmbeddedBroker,
) -> None:
    config = {"bootstrap.servers": txn_broker.bootstrap}
    with pytest.raises(ConfigurationError, match="transactional_id="):
        KafkaWriter({**config, "transactional.id": "x"}, "t", transactional_id="p")
    with pytest.raises(ConfigurationError, match="non-empty"):
        KafkaWriter(config, "t", transactional_id="")
    with pytest.raises(ConfigurationError, match=r"transaction\.timeout\.ms"):
        KafkaWriter({**config, "transaction.timeout.ms": "soon"}, "t", transactional_id="p")
    writer = KafkaWriter(config, "t", transactional_id="p")
    assert writer.transactional_id == "p"
    assert "transactional.id" not in writer.config


def test_without_spark_a_transactional_write_commits_every_row(
    txn_broker: EmbeddedBroker, unique_topic: str
) -> None:
    txn_broker.create_topic(unique_topic, partitions=PARTITIONS)
    writer = KafkaWriter(
        {"bootstrap.servers": txn_broker.bootstrap},
        unique_topic,
        partition_column="p",
        transactional_id=f"writer-{unique_topic}",
    )
    rows = [{"value": f"r{i}", "p": i % PARTITIONS} for i in range(40)]
    counts = writer.write_rows(rows)
    assert counts == {TopicPartition(unique_topic, p): 10 for p in range(PARTITIONS)}
    seen = read_committed_values(txn_broker, unique_topic, expected=40)
    assert seen == collections.Counter(f"r{i}" for i in range(40))


def test_the_data_source_writes_in_transactions(
    spark: SparkSession, txn_broker: EmbeddedBroker, unique_topic: str
) -> None:
    from coopconsumer.spark import register_data_source

    register_data_source(spark)
    txn_broker.create_topic(unique_topic, partitions=PARTITIONS)
    frame = spark.createDataFrame(
        [(f"k{i}", f"v{i}") for i in range(90)], "key STRING, value STRING"
    ).repartition(3)
    proxy = txn_broker.proxy if isinstance(txn_broker, TransactionalBroker) else None
    end_txns = 0 if proxy is None else proxy.stats.requests.get(END_TXN, 0)
    (
        frame.write.format("coopconsumer")
        .option("kafka.bootstrap.servers", txn_broker.bootstrap)
        .option("topic", unique_topic)
        .option("transactionalIdPrefix", f"ds-{unique_topic}")
        .mode("append")
        .save()
    )
    seen = read_committed_values(txn_broker, unique_topic, expected=90)
    assert seen == collections.Counter(f"v{i}" for i in range(90))
    if proxy is not None:
        # Each of the three tasks ended a transaction (other tests' may end meanwhile).
        assert proxy.stats.requests.get(END_TXN, 0) - end_txns >= 3
    else:
        # Each of the three tasks' commits wrote a COMMIT marker, an offset of its own,
        # to every partition it wrote: the log ends past the 90 records.
        assert log_end_offsets(txn_broker, unique_topic) >= 90 + 3
