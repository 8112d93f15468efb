"""``coopconsumer.spark.run_consume_job`` on the standalone cluster (conftest.py).

The end-offset and no-failure tests run on both embedded brokers (``broker``), the
others on Tansu.

Two members consume a topic up to the end offsets seen at job start. Every record the
sink takes is appended to a file (one per task attempt), which the test reads back:
with no failure each record is there exactly once and records produced after the start
are not (a second run takes exactly those); after an injected sink failure the task is
retried (attempt 1), the group rebalanced, and nothing is lost -- the only records
seen twice are ones the failed attempt had taken. Also: Tansu's short ListOffsets
answer is corrected by ``end_offsets``, invalid settings are refused before anything
runs, and a job that cannot finish fails with a timeout naming the partitions.
"""

from __future__ import annotations

import collections
import functools
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Message, Producer
from pyspark import TaskContext, cloudpickle

from coopconsumer import ConfigurationError, KafkaError, TopicPartition
from coopconsumer._io._fetcher import end_offsets
from coopconsumer.spark import run_consume_job
from coopconsumer.testing import EmbeddedBroker
from integration.spark.conftest import PARTITIONS, job_config

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession

# The sinks below are defined in a test module the Spark workers cannot import: ship
# them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

PATIENCE_S = 30.0
BATCH = 25
#: Not picklable: a sink holding it is refused.
LOCK = threading.Lock()


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    """Produce ``values`` round-robin over the partitions, in multi-record batches."""
    failures: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i, value in enumerate(values):
        producer.produce(
            topic,
            value=value.encode(),
            partition=i % PARTITIONS,
            on_delivery=lambda err, _m: failures.append(err) if err is not None else None,
        )
    assert producer.flush(PATIENCE_S) == 0
    assert failures == []


def attempt_file(out: Path) -> Path:
    context = TaskContext.get()
    assert context is not None
    return out / f"member-{context.partitionId()}-attempt-{context.attemptNumber()}.txt"


class FileSink:
    """Appends ``value`` of each record to this task attempt's file under ``out``."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def __call__(self, batch: list[Message]) -> None:
        lines = "".join(f"{(m.value() or b'').decode()}\n" for m in batch)
        with attempt_file(self.out).open("a") as f:
            f.write(lines)


class LateProducingSink(FileSink):
    """A FileSink that, on its first call, produces ``late`` more records to the topic:
    they lie past the job's end offsets and must never reach the sink."""

    def __init__(self, out: Path, bootstrap: str, topic: str, late: int) -> None:
        super().__init__(out)
        self.bootstrap, self.topic, self.late = bootstrap, topic, late
        self.produced = False

    def __call__(self, batch: list[Message]) -> None:
        if not self.produced:
            self.produced = True
            context = TaskContext.get()
            assert context is not None
            who = f"{context.partitionId()}.{context.attemptNumber()}"
            # Imported here: the class is pickled by value, and confluent-kafka's
            # classes do not survive that as globals.
            from confluent_kafka import Producer as LateProducer

            producer = LateProducer({"bootstrap.servers": self.bootstrap})
            for i in range(self.late):
                producer.produce(self.topic, value=f"late-{who}-{i}".encode())
            assert producer.flush(PATIENCE_S) == 0
        super().__call__(batch)


class FailingSink(FileSink):
    """A FileSink that fails one task attempt 0, once both members took records.

    The first attempt 0 that has taken more than ``after`` batches and sees that
    another member took records too (so both are in the group, each with partitions)
    raises instead of taking its next batch. Marker files in ``out`` coordinate the
    worker processes; ``failed.marker`` names the attempt file of the one that failed.
    Between the failure and the retry's first batch the survivor slows down (it still
    polls between batches, so rebalances complete), leaving the retry work to take.
    """

    def __init__(self, out: Path, after: int) -> None:
        super().__init__(out)
        self.after = after
        self.calls = 0

    def __call__(self, batch: list[Message]) -> None:
        context = TaskContext.get()
        assert context is not None
        member, attempt = context.partitionId(), context.attemptNumber()
        (self.out / f"started-{member}-{attempt}").touch()
        self.calls += 1
        others = [
            p for p in self.out.glob("started-*") if not p.name.startswith(f"started-{member}-")
        ]
        if attempt == 0 and self.calls > self.after and others:
            try:
                fd = os.open(self.out / "failed.marker", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, attempt_file(self.out).name.encode())
                os.close(fd)
                raise RuntimeError("injected sink failure")
        # Paced so that both members get records before the work runs out.
        time.sleep(0.1)
        if (self.out / "failed.marker").exists() and not list(self.out.glob("started-*-1")):
            time.sleep(0.5)
        super().__call__(batch)


def locked_sink(lock: object, batch: list[Message]) -> None:
    """A sink bound to a lock (which cannot be pickled) with functools.partial."""


def sunk(out: Path) -> dict[str, collections.Counter[str]]:
    """Values taken by the sink, per attempt file."""
    return {
        path.name: collections.Counter(path.read_text().splitlines())
        for path in sorted(out.glob("member-*.txt"))
    }


def test_end_offsets_count_every_record_of_the_last_batch(
    broker: EmbeddedBroker, unique_topic: str
) -> None:
    # Records produced with linger.ms land in multi-record batches. Tansu's
    # ListOffsets(latest) answers the last batch's base offset + 1 (here 1 per
    # partition); end_offsets reads the last batch to get the real end.
    broker.create_topic(unique_topic, partitions=PARTITIONS)
    produce(broker.bootstrap, unique_topic, [f"v{i}" for i in range(103)])
    marks = end_offsets({"bootstrap.servers": broker.bootstrap}, [unique_topic])
    assert marks == {
        TopicPartition(unique_topic, p): (0, 26 if p < 3 else 25) for p in range(PARTITIONS)
    }
    empty = f"{unique_topic}-empty"
    broker.create_topic(empty, partitions=2)
    assert end_offsets({"bootstrap.servers": broker.bootstrap}, [empty]) == {
        TopicPartition(empty, 0): (0, 0),
        TopicPartition(empty, 1): (0, 0),
    }
    with pytest.raises(KafkaError, match="UNKNOWN_TOPIC"):
        end_offsets({"bootstrap.servers": broker.bootstrap}, [f"{unique_topic}-missing"])


def test_job_settings_are_checked_before_running(
    spark: SparkSession, kafka_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    config = job_config(kafka_broker, unique_group)
    sink = FileSink(Path("/nonexistent"))
    refused: list[dict[str, object]] = [
        {**config, "enable.auto.commit": True},
        {**config, "auto.offset.reset": "latest"},
        {**config, "partition.assignment.strategy": "range"},
        {**config, "partition.assignment.strategy": "cooperative-sticky,range"},
    ]
    for bad in refused:
        with pytest.raises(ConfigurationError):
            run_consume_job(spark, bad, unique_topic, sink)
    with pytest.raises(ConfigurationError, match="picklable"):
        run_consume_job(spark, config, unique_topic, functools.partial(locked_sink, LOCK))
    with pytest.raises(ConfigurationError, match="batch_size"):
        run_consume_job(spark, config, unique_topic, sink, batch_size=0)


def test_every_record_exactly_once_without_failure(
    spark: SparkSession,
    broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    tmp_path: Path,
) -> None:
    broker.create_topic(unique_topic, partitions=PARTITIONS)
    values = [f"r{i}" for i in range(400)]
    produce(broker.bootstrap, unique_topic, values)

    sink = LateProducingSink(tmp_path, broker.bootstrap, unique_topic, late=20)
    stats = run_consume_job(
        spark,
        job_config(broker, unique_group),
        [unique_topic],
        sink,
        members=2,
        batch_size=BATCH,
    ).collect()

    per_attempt = sunk(tmp_path)
    everything = sum(per_attempt.values(), collections.Counter[str]())
    assert set(everything) == set(values)  # nothing lost, and no late record
    assert [(row.member, row.attempt) for row in stats] == [(0, 0), (1, 0)]
    assert sum(row.records for row in stats) == everything.total()
    assert all(row.batches >= 1 and row.rebalances >= 1 for row in stats if row.records)
    if exact(broker, stats):
        assert everything == collections.Counter(values)  # exactly once

    if broker.kind == "tansu":
        # Tansu may wedge the group here: when the first run's leader leaves last, with
        # the rebalance its follower's LeaveGroup started still pending, Tansu names the
        # departed leader in every later JoinGroup answer and answers each SyncGroup with
        # REBALANCE_IN_PROGRESS (seen in 2 of 5 runs; docs/testing.md, "Quirks of the
        # embedded brokers"). The resume below is checked on the mock.
        return
    # A second run starts where the first one's commits left off: it takes exactly the
    # records produced while the first one ran (each sink attempt produced 20).
    late = collections.Counter(
        f"late-{name.split('-')[1]}.{name.split('-')[3].removesuffix('.txt')}-{i}"
        for name in per_attempt
        for i in range(20)
    )
    second = tmp_path / "second"
    second.mkdir()
    stats = run_consume_job(
        spark, job_config(broker, unique_group), unique_topic, FileSink(second), members=2
    ).collect()
    again = sum(sunk(second).values(), collections.Counter[str]())
    assert set(again) == set(late)
    if exact(broker, stats):
        assert again == late


def exact(broker: EmbeddedBroker, stats: list[Row]) -> bool:
    """Whether a run without task failures must have been exactly once: always, except
    on librdkafka's mock when a member lost its generation with offsets not yet
    committed (failed_commits). The mock sometimes refuses a late SyncGroup with
    INVALID_REQUEST; what the member took but had not committed is then delivered
    again (at-least-once)."""
    failed: int = sum(row.failed_commits for row in stats)
    if broker.kind == "mock":
        return failed == 0
    assert failed == 0
    return True


def test_the_consumer_group_protocol_runs_the_job(
    spark: SparkSession,
    mock_broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    tmp_path: Path,
) -> None:
    """group.protocol=consumer (KIP-848, librdkafka's mock): no assignor is filled in,
    the broker assigns, and two members read every record once."""
    mock_broker.create_topic(unique_topic, partitions=PARTITIONS)
    values = [f"r{i}" for i in range(200)]
    produce(mock_broker.bootstrap, unique_topic, values)
    config: dict[str, object] = {
        "bootstrap.servers": mock_broker.bootstrap,
        "group.id": unique_group,
        "group.protocol": "consumer",
        "max.poll.interval.ms": 20000,
    }
    stats = run_consume_job(
        spark, config, [unique_topic], FileSink(tmp_path), members=2, batch_size=BATCH
    ).collect()
    everything = sum(sunk(tmp_path).values(), collections.Counter[str]())
    assert set(everything) == set(values)
    assert sum(row.records for row in stats) == everything.total()
    if exact(mock_broker, stats):
        assert everything == collections.Counter(values)
    with pytest.raises(ConfigurationError, match=r"partition\.assignment\.strategy"):
        run_consume_job(
            spark,
            {**config, "partition.assignment.strategy": "cooperative-sticky"},
            unique_topic,
            FileSink(tmp_path),
        )


def test_failed_task_is_retried_the_group_rebalances_and_nothing_is_lost(
    spark: SparkSession,
    kafka_broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    tmp_path: Path,
) -> None:
    kafka_broker.create_topic(unique_topic, partitions=PARTITIONS)
    values = [f"r{i}" for i in range(600)]
    produce(kafka_broker.bootstrap, unique_topic, values)

    stats = run_consume_job(
        spark,
        job_config(kafka_broker, unique_group),
        [unique_topic],
        FailingSink(tmp_path, after=3),
        members=2,
        batch_size=10,
    ).collect()

    failed_file = (tmp_path / "failed.marker").read_text()  # "member-<m>-attempt-0.txt"
    assert failed_file.endswith("-attempt-0.txt")
    failed_member = int(failed_file.split("-")[1])
    per_attempt = sunk(tmp_path)
    assert per_attempt[failed_file].total() >= 3  # what it took before failing
    everything = sum(per_attempt.values(), collections.Counter[str]())
    assert set(everything) == set(values)  # nothing lost
    # At-least-once: only records the failed attempt had taken may come again, and
    # the attempts that finished took each record at most once.
    assert {v for v, n in everything.items() if n > 1} <= set(per_attempt[failed_file])
    finished = sum(
        (c for name, c in per_attempt.items() if name != failed_file), collections.Counter[str]()
    )
    assert max(finished.values()) == 1

    rows = {(row.member, row.attempt): row for row in stats}
    assert set(rows) == {(failed_member, 1), (1 - failed_member, 0)}
    # The survivor joined, and rebalanced again when the failed member left (with
    # the retry joining in the same round or in later ones): two rebalances at least.
    # The retry rejoined (a new member id) and got partitions with records left.
    survivor, retry = rows[(1 - failed_member, 0)], rows[(failed_member, 1)]
    assert survivor.rebalances >= 2
    assert retry.rebalances >= 1
    assert retry.records >= 1
    assert retry.member_id != survivor.member_id
    assert sum(row.records for row in stats) == len(values) - len(
        set(per_attempt[failed_file]) - {v for v, n in everything.items() if n > 1}
    )


class SlowSink(FileSink):
    """Takes its time: two members cannot finish within the test's job timeout."""

    def __call__(self, batch: list[Message]) -> None:
        time.sleep(0.5)
        super().__call__(batch)


def test_job_that_cannot_finish_in_time_fails_naming_the_partitions(
    spark: SparkSession,
    kafka_broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    tmp_path: Path,
) -> None:
    from pyspark.errors import PythonException

    kafka_broker.create_topic(unique_topic, partitions=PARTITIONS)
    produce(kafka_broker.bootstrap, unique_topic, [f"r{i}" for i in range(80)])
    with pytest.raises(PythonException, match="consume job timed out after 4s") as info:
        run_consume_job(
            spark,
            job_config(kafka_broker, unique_group),
            unique_topic,
            SlowSink(tmp_path),
            members=2,
            batch_size=1,
            timeout_s=4,
        )
    assert f"{unique_topic}-" in str(info.value)
    assert " of 20" in str(info.value)  # a partition's committed offset of its end offset
