"""Exactly-once consume jobs (``run_consume_job(..., exactly_once=True)``) on the
standalone cluster (conftest.py) and Tansu behind the transactions proxy.

The proxy adds what Tansu lacks for this (docs/testing.md, "Transactions"): aborted
records hidden from ``read_committed`` readers, TxnOffsetCommit fenced by the group
generation (KIP-447), ``require_stable`` and transactions aborted at their timeout.
librdkafka's mock stores no transactional offsets, so it cannot host these runs.

Every member copies each input record to the output topic inside its transaction (one
per batch) and appends what it was handed to a ledger file per task attempt. One fault
is injected per test, in the middle of the job:

* the sink of one first attempt raises right after producing its batch (Spark retries
  the task);
* the Python worker of one first attempt SIGKILLs itself right after producing its
  batch (a member dying mid-transaction: Spark sees a crashed worker and retries);
* a whole Spark worker is SIGKILLed (its executor JVM and Python workers): Spark runs
  the lost tasks again on the other worker, the group rebalances;
* speculative execution on (its own application in a child process,
  speculation_driver.py): copies of the member tasks join the group, and Spark kills
  the slower attempt of each task.

A long-running exactly-once job (``start_consume_job``) copies a growing topic until
stopped, once.

Then an independent ``read_committed`` confluent-kafka consumer counts the output:
every input record exactly once -- 0 duplicates, 0 missing -- while the ledgers show
the records the failed attempt had been handed were handed over again (the fault
really hit work in flight, so a broken fence would show as duplicates).
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Message
from pyspark import TaskContext, cloudpickle

from coopconsumer import ConfigurationError, TransactionalOutput
from coopconsumer.spark import run_consume_job, start_consume_job
from coopconsumer.testing import EmbeddedBroker, SparkStandaloneCluster, TransactionalBroker
from integration.spark.conftest import (
    PARTITIONS,
    GrowingTopic,
    job_config,
    produce_values,
    read_committed_values,
    restore_workers,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

RECORDS = 1200
BATCH = 20
#: How long a transaction a killed member left open blocks its partitions before the
#: broker aborts it (the same id never comes back: each attempt has its own).
TRANSACTION_TIMEOUT_MS = 6000
#: The whole job, retries and a worker restart included, on a busy two-core machine.
JOB_TIMEOUT_S = 240.0


class CopySink:
    """Copies every record to ``topic`` through the transaction's output, appends the
    values to this attempt's ledger (``member-<m>-attempt-<a>-pid-<pid>.txt``) and,
    with ``fault``, makes the first attempt 0 that has handed over more than ``after``
    batches while another member has too fail right after producing: ``"raise"`` or
    ``"sigkill"`` (its own Python worker). ``failed.marker`` names that attempt."""

    def __init__(
        self, out: Path, topic: str, *, fault: str | None = None, after: int = 3, pace_s: float
    ) -> None:
        self.out = out
        self.topic = topic
        self.fault = fault
        self.after = after
        self.pace_s = pace_s
        self.calls = 0

    def __call__(self, batch: list[Message], output: TransactionalOutput) -> None:
        context = TaskContext.get()
        assert context is not None
        member, attempt = context.partitionId(), context.attemptNumber()
        for message in batch:
            output.produce(self.topic, message.value(), message.key())
        name = f"member-{member}-attempt-{attempt}-pid-{os.getpid()}.txt"
        with (self.out / name).open("a") as f:
            f.write("".join(f"{(m.value() or b'').decode()}\n" for m in batch))
        self.calls += 1
        others = [
            p for p in self.out.glob("member-*") if not p.name.startswith(f"member-{member}-")
        ]
        if self.fault and attempt == 0 and self.calls > self.after and others:
            try:
                fd = os.open(self.out / "failed.marker", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, name.encode())
                os.close(fd)
                if self.fault == "sigkill":
                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError("injected sink failure after producing")
        time.sleep(self.pace_s)


def ledgers(out: Path) -> dict[str, collections.Counter[str]]:
    return {
        path.name: collections.Counter(path.read_text().splitlines())
        for path in sorted(out.glob("member-*.txt"))
    }


def check_exactly_once(
    broker: EmbeddedBroker, output_topic: str, values: list[str], out: Path
) -> tuple[int, int, int]:
    """Count the output with an independent ``read_committed`` reader: assert every
    input value exactly once and no TxnOffsetCommit without a generation. Returns
    (duplicates, missing, values handed to a sink more than once)."""
    seen = read_committed_values(broker, output_topic, expected=len(values))
    expected = collections.Counter(values)
    duplicates = sum((seen - expected).values())
    missing = sum((expected - seen).values())
    handed = sum(ledgers(out).values(), collections.Counter[str]())
    replayed = sum(1 for n in handed.values() if n > 1)
    assert (duplicates, missing) == (0, 0), (duplicates, missing)
    assert seen == expected
    assert set(handed) == set(values)
    if isinstance(broker, TransactionalBroker):  # the proxy saw every TxnOffsetCommit
        commits = broker.proxy.txn_offset_commits
        assert commits
        assert all(c.generation_id >= 0 and c.member_id for c in commits)
    return duplicates, missing, replayed


def run_job(
    spark: SparkSession,
    broker: EmbeddedBroker,
    topic: str,
    group: str,
    sink: CopySink,
) -> list[tuple[int, int, int, int]]:
    """The exactly-once job over ``topic`` with two members; (member, attempt,
    records, aborted transactions) per finished attempt."""
    started = time.monotonic()
    stats = run_consume_job(
        spark,
        job_config(broker, group, session_timeout_ms=3000),
        [topic],
        sink,
        exactly_once=True,
        producer_config={"transaction.timeout.ms": TRANSACTION_TIMEOUT_MS},
        members=2,
        batch_size=BATCH,
        timeout_s=JOB_TIMEOUT_S,
        report_interval_s=0.5,
    ).collect()
    rows = [(r.member, r.attempt, r.records, r.failed_commits) for r in stats]
    print(f"exactly-once job: {time.monotonic() - started:.1f}s, attempts {rows}")
    return rows


def setup_topics(broker: EmbeddedBroker, topic: str) -> tuple[str, list[str]]:
    output_topic = f"{topic}-out"
    broker.create_topic(topic, partitions=PARTITIONS)
    broker.create_topic(output_topic, partitions=PARTITIONS)
    values = [f"v{i}" for i in range(RECORDS)]
    produce_values(broker.bootstrap, topic, values)
    return output_topic, values


@pytest.mark.parametrize("fault", ["raise", "sigkill"])
def test_a_failing_attempt_commits_nothing_twice(
    spark: SparkSession,
    txn_broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    tmp_path: Path,
    fault: str,
) -> None:
    output_topic, values = setup_topics(txn_broker, unique_topic)
    sink = CopySink(tmp_path, output_topic, fault=fault, pace_s=0.05)
    rows = run_job(spark, txn_broker, unique_topic, unique_group, sink)

    failed = (tmp_path / "failed.marker").read_text()
    member = int(failed.split("-")[1])
    assert (member, 1) in {(m, a) for m, a, _r, _f in rows}  # Spark retried that task
    assert (member, 0) not in {(m, a) for m, a, _r, _f in rows}
    duplicates, missing, replayed = check_exactly_once(txn_broker, output_topic, values, tmp_path)
    # The failed attempt's last batch was produced but never committed: its records
    # were handed over again, and still appear once.
    assert replayed >= 1
    print(f"{fault}: {duplicates} duplicates, {missing} missing, {replayed} records replayed")


def test_a_worker_killed_mid_job_loses_and_repeats_nothing(
    spark: SparkSession,
    spark_cluster: SparkStandaloneCluster,
    txn_broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    tmp_path: Path,
) -> None:
    import threading

    output_topic, values = setup_topics(txn_broker, unique_topic)
    sink = CopySink(tmp_path, output_topic, pace_s=0.1)
    killed: list[int] = []

    def kill_when_both_run() -> None:
        deadline = time.monotonic() + JOB_TIMEOUT_S / 2
        while time.monotonic() < deadline:
            names = list(ledgers(tmp_path))
            members = {n.split("-")[1] for n in names}
            if (
                len(members) == 2
                and sum(ledgers(tmp_path).values(), collections.Counter()).total() > 200
            ):
                pids = {int(n.removesuffix(".txt").split("-")[5]) for n in names}
                for index in spark_cluster.worker_indexes:
                    if pids & set(spark_cluster.worker_pids(index)):
                        spark_cluster.kill_worker(index)
                        killed.append(index)
                        return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_when_both_run, daemon=True)
    killer.start()
    try:
        rows = run_job(spark, txn_broker, unique_topic, unique_group, sink)
    finally:
        killer.join(JOB_TIMEOUT_S)
        restore_workers(spark_cluster, spark)
    assert len(killed) == 1, "no worker was killed mid-job"
    assert any(a >= 1 for _m, a, _r, _f in rows)  # Spark ran the lost task(s) again
    duplicates, missing, replayed = check_exactly_once(txn_broker, output_topic, values, tmp_path)
    print(
        f"worker {killed[0]} killed: {duplicates} duplicates, {missing} missing, "
        f"{replayed} records replayed"
    )


def test_exactly_once_settings_are_checked_on_the_driver(
    spark: SparkSession, txn_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    txn_broker.create_topic(unique_topic, partitions=1)
    config = job_config(txn_broker, unique_group)
    sink = CopySink(Path("/nonexistent"), "out", pace_s=0.0)
    cases: list[tuple[dict[str, object], dict[str, object] | None, str]] = [
        ({"isolation.level": "read_uncommitted"}, None, "read_committed"),
        ({}, {"transaction.timeout.ms": 60000}, "exceeds max.poll.interval.ms"),
        ({}, {"transactional.id": ""}, "transactional.id"),
    ]
    for extra, producer, match in cases:
        with pytest.raises(ConfigurationError, match=match):
            run_consume_job(
                spark,
                {**config, **extra},
                [unique_topic],
                sink,
                exactly_once=True,
                producer_config=producer,
            )
    with pytest.raises(ConfigurationError, match="exactly_once=True"):
        run_consume_job(spark, config, [unique_topic], sink, producer_config={})


def test_a_long_running_exactly_once_job_copies_a_growing_topic_once(
    spark: SparkSession,
    txn_broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    tmp_path: Path,
) -> None:
    output_topic = f"{unique_topic}-out"
    txn_broker.create_topic(unique_topic, partitions=PARTITIONS)
    txn_broker.create_topic(output_topic, partitions=PARTITIONS)
    topic = GrowingTopic(txn_broker.bootstrap, unique_topic, per_second=150)
    job = start_consume_job(
        spark,
        job_config(txn_broker, unique_group, session_timeout_ms=3000),
        [unique_topic],
        CopySink(tmp_path, output_topic, pace_s=0.0),
        exactly_once=True,
        producer_config={"transaction.timeout.ms": TRANSACTION_TIMEOUT_MS},
        members=2,
        batch_size=BATCH,
        report_interval_s=0.5,
    )
    try:
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while len({s.stats.member for s in job.statistics() if s.stats.records}) < 2:
            assert not job.done
            assert time.monotonic() < deadline, job.statistics()
            time.sleep(0.2)
    finally:
        produced = topic.finish()
    values = [f"v{i}" for i in range(produced)]
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while set(sum(ledgers(tmp_path).values(), collections.Counter[str]())) != set(values):
        assert not job.done
        assert time.monotonic() < deadline, "not every record reached a sink"
        time.sleep(0.2)
    rows = job.stop(timeout_s=JOB_TIMEOUT_S).collect()
    assert [(r.member, r.attempt) for r in rows] == [(0, 0), (1, 0)]
    duplicates, missing, _replayed = check_exactly_once(txn_broker, output_topic, values, tmp_path)
    print(f"long-running: {produced} records, {duplicates} duplicates, {missing} missing")


def test_speculative_copies_duplicate_nothing(
    txn_broker: EmbeddedBroker, unique_topic: str, unique_group: str, tmp_path: Path
) -> None:
    """Speculation is set when a SparkContext starts: a child process runs its own
    application, with speculation on, on its own cluster of two distinct hosts
    (speculation_driver.py). Every member task outlasting 4 s gets a copy: one more
    member of the group, until Spark kills whichever attempt of the task is slower."""
    output_topic, values = setup_topics(txn_broker, unique_topic)
    driver = Path(__file__).with_name("speculation_driver.py")
    argv = [sys.executable, str(driver), "--bootstrap", txn_broker.bootstrap]
    argv += ["--topic", unique_topic, "--output", output_topic, "--group", unique_group]
    argv += ["--ledgers", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=JOB_TIMEOUT_S + 180)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    attempts = sorted({name.split("-pid-")[0] for name in ledgers(tmp_path)})
    copies = [a for a in attempts if not a.endswith("-attempt-0")]
    assert copies, f"no speculative copy ran: {attempts}"
    duplicates, missing, replayed = check_exactly_once(txn_broker, output_topic, values, tmp_path)
    print(
        f"speculation: {result['seconds']}s, attempts that handed records {attempts}, "
        f"finished {result['rows']}: {duplicates} duplicates, {missing} missing, "
        f"{replayed} records handed over twice"
    )
