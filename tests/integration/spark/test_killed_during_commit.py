"""A consume job whose member is killed in its commit window (issue 35's probe list).

The window opens when the sink returned a batch and closes when the broker stored
that batch's offsets. One member's Python worker is SIGKILLed at either edge, without
timing luck:

* ``after-commit-stored``: the sink starts a thread on the batch it just took that
  watches the group's committed offsets (with a consumer of its own that never joins)
  and kills the worker as soon as they reach the batch's ends; the member's next sink
  call waits for that kill, so it cannot go on past the commit;
* ``before-commit``: the sink kills its worker once it took the batch, before the
  member can send the commit.

Then Spark retries the task (a clean retry: the job returns, with a row for attempt 1),
the group rebalances and nothing is lost. A stored commit is never delivered again
(every record exactly once); an unsent one is delivered again, that batch only.
"""

from __future__ import annotations

import collections
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Message
from pyspark import TaskContext, cloudpickle

from coopconsumer.spark import run_consume_job
from coopconsumer.testing import EmbeddedBroker
from integration.spark.conftest import job_config
from integration.spark.test_consume_job import FileSink, attempt_file, produce, sunk

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

PATIENCE_S = 60.0


class KilledInCommitSink(FileSink):
    """A FileSink whose first attempt-0 member, past ``after`` batches and with the
    other member started, is SIGKILLed once it took its next batch (``when`` is
    ``"before-commit"``) or once that batch's commit is stored.

    ``killed.marker`` names the killed attempt's file; ``killed-batch.txt`` holds the
    values of the batch whose commit the kill followed."""

    def __init__(self, out: Path, bootstrap: str, group: str, after: int, when: str) -> None:
        super().__init__(out)
        self.bootstrap, self.group, self.after, self.when = bootstrap, group, after, when
        self.calls = 0
        self.armed = False

    def __call__(self, batch: list[Message]) -> None:
        context = TaskContext.get()
        assert context is not None
        member, attempt = context.partitionId(), context.attemptNumber()
        (self.out / f"started-{member}-{attempt}").touch()
        if self.armed:
            # The next batch: the kill is on its way; never take it.
            deadline = time.monotonic() + PATIENCE_S
            while time.monotonic() < deadline:
                time.sleep(0.05)
            raise RuntimeError("the worker was not killed after its commit was stored")
        self.calls += 1
        others = [
            p for p in self.out.glob("started-*") if not p.name.startswith(f"started-{member}-")
        ]
        time.sleep(0.1)  # paced so that both members get records
        super().__call__(batch)
        if attempt != 0 or self.calls <= self.after or not others:
            return
        try:
            fd = os.open(self.out / "killed.marker", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, attempt_file(self.out).name.encode())
        os.close(fd)
        (self.out / "killed-batch.txt").write_text(
            "".join(f"{(m.value() or b'').decode()}\n" for m in batch)
        )
        if self.when == "before-commit":
            os.kill(os.getpid(), signal.SIGKILL)
        ends: dict[tuple[str, int], int] = {}
        for m in batch:
            key = (m.topic() or "", m.partition() or 0)
            ends[key] = max(ends.get(key, 0), (m.offset() or 0) + 1)
        self.armed = True
        threading.Thread(target=self._kill_once_committed, args=(ends,), daemon=True).start()

    def _kill_once_committed(self, ends: dict[tuple[str, int], int]) -> None:
        # Imported here: the class is pickled by value (see test_consume_job.py).
        from confluent_kafka import Consumer as Watcher
        from confluent_kafka import TopicPartition as Tp

        watcher = Watcher(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "enable.auto.commit": False,
            }
        )
        asked = [Tp(topic, partition) for topic, partition in ends]
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            got = watcher.committed(asked, timeout=10)
            if all(tp.offset >= ends[(tp.topic, tp.partition)] for tp in got):
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.02)


@pytest.mark.parametrize("when", ["after-commit-stored", "before-commit"])
def test_a_member_killed_in_its_commit_window_loses_nothing_and_is_retried(
    when: str,
    spark: SparkSession,
    kafka_broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    tmp_path: Path,
) -> None:
    kafka_broker.create_topic(unique_topic, partitions=4)
    values = [f"r{i}" for i in range(400)]
    produce(kafka_broker.bootstrap, unique_topic, values)

    stats = run_consume_job(
        spark,
        job_config(kafka_broker, unique_group),
        [unique_topic],
        KilledInCommitSink(tmp_path, kafka_broker.bootstrap, unique_group, after=2, when=when),
        members=2,
        batch_size=10,
    ).collect()

    killed_file = (tmp_path / "killed.marker").read_text()  # "member-<m>-attempt-0.txt"
    killed_member = int(killed_file.split("-")[1])
    killed_batch = set((tmp_path / "killed-batch.txt").read_text().splitlines())
    assert killed_batch
    per_attempt = sunk(tmp_path)
    assert killed_batch <= set(per_attempt[killed_file])
    everything = sum(per_attempt.values(), collections.Counter[str]())
    assert set(everything) == set(values)  # nothing lost
    twice = {v for v, n in everything.items() if n > 1}
    assert max(everything.values()) <= 2
    if when == "after-commit-stored":
        # Everything the killed member took was committed (the last batch just before
        # the kill): nobody takes any of it again, nor anything else twice.
        assert twice == set()
    else:
        # Only the batch whose commit was never sent comes again, all of it.
        assert twice == killed_batch
    # A clean retry: the job returned, with the killed member's attempt 1.
    rows = {(row.member, row.attempt) for row in stats}
    assert rows == {(killed_member, 1), (1 - killed_member, 0)}
    assert sum(row.records for row in stats) == (
        len(values) - per_attempt[killed_file].total() + len(twice)
    )
