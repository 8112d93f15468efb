"""A Spark application with speculative execution on, run by test_exactly_once_job.py
in a child process (speculation is set when a SparkContext starts, and the test session
already has one).

It starts its own standalone cluster whose two workers are distinct loopback hosts
(Spark launches a speculative copy of a task only on a host where no attempt of it
ran), with ``spark.speculation.task.duration.threshold``: every task of a stage no
larger than one executor's slots that runs longer than that gets a copy. It runs an
exactly-once consume job of two members over ``--topic``, whose sink copies each
record to ``--output`` and appends the values to a ledger per task attempt under
``--ledgers``, and prints the job's rows as one JSON line.

    python speculation_driver.py --bootstrap HOST:PORT --topic T --output O --group G
                                 --ledgers DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from confluent_kafka import Message

    from coopconsumer import TransactionalOutput

#: A task running longer than this gets a speculative copy.
THRESHOLD_S = 4
#: Until a speculative copy has handed records to its sink, a first attempt's sink waits
#: this long per batch for one (short of the transaction timeout, 6 s, and of
#: max.poll.interval.ms): the job cannot run out of records before a copy got some.
HOLD_S = 2.0


class SlowCopySink:
    """Copies each record to ``topic`` in the transaction and keeps a ledger per task
    attempt (``member-<m>-attempt-<a>-pid-<pid>.txt``); paced so that the job outlasts
    the speculation threshold, and first attempts held back (:data:`HOLD_S` per batch)
    until a copy has handed records: how fast Spark launches a copy and the group gives
    it partitions depends on the machine's load, and a job that drained its topic
    first ran no copy at all."""

    def __init__(self, out: str, topic: str, pace_s: float) -> None:
        self.out = out
        self.topic = topic
        self.pace_s = pace_s

    def __call__(self, batch: list[Message], output: TransactionalOutput) -> None:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        for message in batch:
            output.produce(self.topic, message.value(), message.key())
        name = (
            f"member-{context.partitionId()}-attempt-{context.attemptNumber()}"
            f"-pid-{os.getpid()}.txt"
        )
        with (Path(self.out) / name).open("a") as f:
            f.write("".join(f"{(m.value() or b'').decode()}\n" for m in batch))
        time.sleep(self.pace_s)
        if context.attemptNumber() == 0:
            until = time.monotonic() + HOLD_S
            while time.monotonic() < until and not self._copy_handed_records():
                time.sleep(0.1)

    def _copy_handed_records(self) -> bool:
        return any(Path(self.out).glob("member-*-attempt-[1-9]*"))


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--topic", "--output", "--group", "--ledgers"):
        parser.add_argument(name, required=True)
    parser.add_argument("--pace-s", type=float, default=0.2)
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from coopconsumer.spark import run_consume_job
    from coopconsumer.testing import spark_standalone_cluster

    with spark_standalone_cluster(2, cores_per_worker=2, distinct_hosts=True) as cluster:
        builder = SparkSession.builder.appName("coopconsumer-speculation")
        for key, value in cluster.session_config().items():
            builder = builder.config(key, value)
        spark = (
            builder.config("spark.executor.cores", "2")  # speculation counts slots by it
            .config("spark.task.maxFailures", "4")
            .config("spark.speculation", "true")
            .config("spark.speculation.interval", "200ms")
            .config("spark.speculation.task.duration.threshold", f"{THRESHOLD_S}s")
            .config("spark.speculation.efficiency.enabled", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        cluster.wait_for_executors(spark, 2)
        started = time.monotonic()
        rows = run_consume_job(
            spark,
            {
                "bootstrap.servers": args.bootstrap,
                "group.id": args.group,
                "session.timeout.ms": 3000,
                "heartbeat.interval.ms": 500,
                "max.poll.interval.ms": 30000,
            },
            [args.topic],
            SlowCopySink(args.ledgers, args.output, args.pace_s),
            exactly_once=True,
            producer_config={"transaction.timeout.ms": 6000},
            members=2,
            batch_size=20,
            timeout_s=240,
            report_interval_s=0.5,
        ).collect()
        elapsed = time.monotonic() - started
        spark.stop()
    print(
        json.dumps(
            {
                "seconds": round(elapsed, 1),
                "rows": [[r.member, r.attempt, r.records, r.failed_commits] for r in rows],
            }
        )
    )


if __name__ == "__main__":
    main()
