"""``coopconsumer.spark.start_consume_job`` on the standalone cluster (conftest.py).

The members run until the driver stops them, over a topic that keeps growing while
they run. Every record the sink takes is appended to a *ledger*: one file per task
attempt, named after the attempt and its Python worker's pid, which tells the test on
which worker the member runs. The tests read the ledgers back:

* no failure: the members report live statistics (both own partitions, rebalances
  counted), every record is taken exactly once, and after ``stop()`` the group's
  committed offsets are the end offsets;
* a worker killed mid-job (a lost machine): Spark runs the killed members again, one
  on a free slot, the others once the worker is back (an executor added); the group
  rebalances each time; nothing is lost, and the only records taken twice are ones a
  killed attempt had taken (at-least-once), counted in the report.
"""

from __future__ import annotations

import collections
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Message
from pyspark import TaskContext, cloudpickle

from coopconsumer import Consumer, TopicPartition
from coopconsumer.spark import ConsumeJob, MemberStatus, start_consume_job
from coopconsumer.testing import EmbeddedBroker, SparkStandaloneCluster
from integration.spark.conftest import (
    PARTITIONS,
    GrowingTopic,
    job_config,
    restore_workers,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

#: Joins, task launches and a lost member's session timeout on a busy two-core machine.
PATIENCE_S = 120.0


class LedgerSink:
    """Appends each record's value to this attempt's ledger under ``out``:
    ``member-<m>-attempt-<a>-pid-<pid>.txt`` (the Python worker's pid)."""

    def __init__(self, out: Path, pace_s: float = 0.0) -> None:
        self.out = out
        self.pace_s = pace_s

    def __call__(self, batch: list[Message]) -> None:
        context = TaskContext.get()
        assert context is not None
        name = (
            f"member-{context.partitionId()}-attempt-{context.attemptNumber()}"
            f"-pid-{os.getpid()}.txt"
        )
        with (self.out / name).open("a") as f:
            f.write("".join(f"{(m.value() or b'').decode()}\n" for m in batch))
        if self.pace_s:
            time.sleep(self.pace_s)


def ledgers(out: Path) -> dict[str, collections.Counter[str]]:
    """Values per ledger file, by file name."""
    return {
        path.name: collections.Counter(path.read_text().splitlines())
        for path in sorted(out.glob("member-*.txt"))
    }


def attempt_of(name: str) -> tuple[int, int, int]:
    """(member, attempt, pid) of a ledger file name."""
    parts = name.removesuffix(".txt").split("-")
    return int(parts[1]), int(parts[3]), int(parts[5])


def wait_until(condition: Callable[[], bool], what: str, job: ConsumeJob) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if job.done:
            job.wait()  # raises the job's failure
            pytest.fail(f"the job ended while waiting for: {what}")
        if time.monotonic() >= deadline:
            pytest.fail(f"not within {PATIENCE_S:.0f}s: {what}\n{job.statistics()}")
        time.sleep(0.2)


def running(job: ConsumeJob) -> dict[int, MemberStatus]:
    """The running attempt of each member, by member."""
    return {s.stats.member: s for s in job.statistics() if s.state == "running"}


def assigned_everything(statuses: dict[int, MemberStatus], topic: str) -> bool:
    owned = [p for s in statuses.values() for p in s.stats.assigned]
    return sorted(owned) == sorted(f"{topic}-{p}" for p in range(PARTITIONS))


def committed_offsets(broker: EmbeddedBroker, group: str, topic: str) -> dict[int, int | None]:
    config = {"bootstrap.servers": broker.bootstrap, "group.id": group}
    with Consumer(config) as consumer:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)])
    return {tp.partition: offset for tp, offset in found.items()}


def test_members_run_until_stopped_and_report_while_running(
    spark: SparkSession,
    kafka_broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    tmp_path: Path,
) -> None:
    kafka_broker.create_topic(unique_topic, partitions=PARTITIONS)
    topic = GrowingTopic(kafka_broker.bootstrap, unique_topic, per_second=200)
    job = start_consume_job(
        spark,
        job_config(kafka_broker, unique_group, session_timeout_ms=3000),
        [unique_topic],
        LedgerSink(tmp_path),
        members=2,
        batch_size=50,
        report_interval_s=0.5,
    )
    try:
        # Both members report while they run, between them own every partition, and
        # have rebalanced (the first join at least).
        wait_until(
            lambda: (
                len(s := running(job)) == 2
                and assigned_everything(s, unique_topic)
                and all(m.stats.records > 0 for m in s.values())
            ),
            "two members own all partitions and consume",
            job,
        )
        live = running(job)
        assert all(m.stats.rebalances >= 1 and m.generation_id >= 0 for m in live.values())
        assert live[0].stats.member_id != live[1].stats.member_id
        assert not set(live[0].stats.assigned) & set(live[1].stats.assigned)
        seen_then = sum(m.stats.records for m in live.values())
    finally:
        produced = topic.finish()
    values = {f"v{i}" for i in range(produced)}
    wait_until(
        lambda: set(sum(ledgers(tmp_path).values(), collections.Counter[str]())) == values,
        "every produced record reaches the sink",
        job,
    )
    assert not job.done  # it runs until asked to stop
    final = job.stop(timeout_s=PATIENCE_S).collect()

    everything = sum(ledgers(tmp_path).values(), collections.Counter[str]())
    assert everything == collections.Counter(values)  # exactly once: no failure
    assert [(row.member, row.attempt) for row in final] == [(0, 0), (1, 0)]
    assert sum(row.records for row in final) == produced > seen_then
    assert all(row.failed_commits == 0 for row in final)
    assert [s.state for s in job.statistics()] == ["finished", "finished"]
    # Stopping committed everything delivered: the group's offsets are the end offsets.
    per_partition = [produced // PARTITIONS + (p < produced % PARTITIONS) for p in range(4)]
    assert committed_offsets(kafka_broker, unique_group, unique_topic) == dict(
        enumerate(per_partition)
    )


def test_a_lost_worker_is_a_rebalance_and_its_members_come_back_nothing_lost(
    spark: SparkSession,
    spark_cluster: SparkStandaloneCluster,
    kafka_broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    tmp_path: Path,
) -> None:
    """Three members on two workers of two slots: killing either worker leaves at
    least one killed member without a free slot until the worker is started again."""
    kafka_broker.create_topic(unique_topic, partitions=PARTITIONS)
    topic = GrowingTopic(kafka_broker.bootstrap, unique_topic, per_second=150)
    job = start_consume_job(
        spark,
        job_config(kafka_broker, unique_group, session_timeout_ms=3000),
        [unique_topic],
        LedgerSink(tmp_path, pace_s=0.05),
        members=3,
        batch_size=20,
        report_interval_s=0.5,
    )
    try:
        wait_until(
            lambda: (
                len(s := running(job)) == 3
                and assigned_everything(s, unique_topic)
                and len(ledgers(tmp_path)) == 3
            ),
            "three members consume",
            job,
        )
        # Which worker runs which member: the ledger names the Python worker's pid.
        hosts = {
            attempt_of(name)[0]: index
            for name in ledgers(tmp_path)
            for index in spark_cluster.worker_indexes
            if attempt_of(name)[2] in spark_cluster.worker_pids(index)
        }
        assert sorted(hosts) == [0, 1, 2], hosts
        victim = collections.Counter(hosts.values()).most_common(1)[0][0]
        killed = sorted(m for m, index in hosts.items() if index == victim)
        survivors = sorted(set(hosts) - set(killed))
        before = {m: running(job)[m].stats.rebalances for m in survivors}
        spark_cluster.kill_worker(victim)

        # Executor removed: the group notices the killed members (session timeout) and
        # the survivors take over every partition in a cooperative rebalance, while at
        # least one killed member waits for a slot.
        def survivors_own_everything() -> bool:
            statuses = running(job)
            alive = {m: s for m, s in statuses.items() if s.stats.attempt == 0}
            return (
                set(alive) == set(survivors)
                and all(alive[m].stats.rebalances > before[m] for m in survivors)
                and assigned_everything(statuses, unique_topic)
            )

        wait_until(survivors_own_everything, "the survivors take over", job)
        gone = {(s.stats.member, s.stats.attempt) for s in job.statistics() if s.state == "gone"}
        assert gone == {(m, 0) for m in killed}

        # Executor added: the worker comes back, the waiting member(s) start as new
        # attempts and join (another cooperative rebalance).
        restore_workers(spark_cluster, spark)
        wait_until(
            lambda: (
                len(s := running(job)) == 3
                and all(s[m].stats.attempt >= 1 for m in killed)
                and assigned_everything(s, unique_topic)
            ),
            "the killed members rejoin",
            job,
        )
    finally:
        produced = topic.finish()
        restore_workers(spark_cluster, spark)
    values = {f"v{i}" for i in range(produced)}
    wait_until(
        lambda: set(sum(ledgers(tmp_path).values(), collections.Counter[str]())) == values,
        "every produced record reaches the sink",
        job,
    )
    final = job.stop(timeout_s=PATIENCE_S).collect()

    per_attempt = ledgers(tmp_path)
    everything = sum(per_attempt.values(), collections.Counter[str]())
    assert set(everything) == values  # nothing lost
    for counts in per_attempt.values():
        assert max(counts.values()) == 1  # no attempt took a record twice
    # At-least-once: only records a killed attempt had taken come twice.
    killed_files = [n for n in per_attempt if attempt_of(n)[:2] in {(m, 0) for m in killed}]
    taken_by_killed = set().union(*(set(per_attempt[n]) for n in killed_files))
    duplicates = {v for v, n in everything.items() if n > 1}
    assert duplicates <= taken_by_killed
    print(
        f"worker {victim} killed with members {killed}: {len(values)} records, "
        f"{len(duplicates)} delivered twice (taken by a killed attempt, not committed)"
    )
    rows = {(row.member, row.attempt): row for row in final}
    assert {m for m, a in rows if a == 0} == set(survivors)
    assert all(any(m == k and a >= 1 for m, a in rows) for k in killed)
    assert (
        sum(row.records for row in final) + sum(per_attempt[n].total() for n in killed_files)
        == everything.total()
    )


class StuckSink:
    """Never returns from its first batch (a sink stuck on a dead service)."""

    def __call__(self, batch: list[Message]) -> None:
        time.sleep(3600)


def test_stop_cancels_members_that_do_not_stop_in_time(
    spark: SparkSession, kafka_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    from coopconsumer import RequestTimeoutError

    kafka_broker.create_topic(unique_topic, partitions=PARTITIONS)
    topic = GrowingTopic(kafka_broker.bootstrap, unique_topic, per_second=50)
    job = start_consume_job(
        spark,
        job_config(kafka_broker, unique_group),
        [unique_topic],
        StuckSink(),
        members=2,
        report_interval_s=0.5,
    )
    try:
        wait_until(lambda: len(running(job)) == 2, "two members run", job)
    finally:
        topic.finish()
    time.sleep(2.0)  # both take a batch and get stuck in the sink
    with pytest.raises(RequestTimeoutError, match=r"job group coopconsumer-.* was cancelled"):
        job.stop(timeout_s=5.0)
    assert job.done  # the cancelled Spark job ended; the cluster's slots are free again
    with pytest.raises(Exception, match="cancelled"):
        job.wait(0)
    # Nothing was committed: the stuck batches are delivered again to the next run.
    assert all(
        o is None for o in committed_offsets(kafka_broker, unique_group, unique_topic).values()
    )
