"""The exactly-once loop's decisions, on a scripted consumer and a recording producer.

No broker, no real clock: each ``consume()`` of the fake consumer plays one scripted
step (rebalance callbacks, a generation change, records), and the fake producer records
every transactional call and raises what a test injects. Every test runs twice, on the
sync ``TransactionalProcessor`` and on ``coopconsumer.aio.AsyncTransactionalProcessor``
(its producer calls on its worker thread, its callbacks and process function awaited):
both drive one core, ``TransactionLoop``, so both must give the same transcript. The
core's own requests, and what only the async driver does (cancellation), are tested at
the end. What a real broker does with these calls is tested in
tests/integration/test_exactly_once.py and tests/aio/test_aio_exactly_once.py.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

import pytest

from coopconsumer import (
    ConsumerGroupMetadata,
    ProducerFencedError,
    RebalanceListener,
    TopicPartition,
    TransactionAbortedError,
    TransactionalOutput,
    TransactionalProcessor,
    TransactionError,
)
from coopconsumer._io._txn_producer import check_group_metadata
from coopconsumer._transaction_loop import (
    CheckBrokers,
    Consume,
    Process,
    ProducerCall,
    Request,
    TransactionLoop,
)
from coopconsumer.aio import AsyncTransactionalProcessor

P0 = TopicPartition("in", 0)
P1 = TopicPartition("in", 1)
P2 = TopicPartition("in", 2)
GEN1 = ConsumerGroupMetadata(group_id="g", generation_id=1, member_id="m1")
GEN2 = ConsumerGroupMetadata(group_id="g", generation_id=2, member_id="m1")
GEN4 = ConsumerGroupMetadata(group_id="g", generation_id=4, member_id="m1")
NO_GEN = ConsumerGroupMetadata(group_id="g")


class Record:
    def __init__(self, tp: TopicPartition, offset: int) -> None:
        self._tp = tp
        self._offset = offset

    def topic(self) -> str:
        return self._tp.topic

    def partition(self) -> int:
        return self._tp.partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return f"{self._tp}@{self._offset}".encode()

    def key(self) -> bytes | None:
        return None


def records(tp: TopicPartition, first: int, count: int) -> list[Record]:
    return [Record(tp, first + i) for i in range(count)]


# A step: what one consume() call does, in order.
Event = tuple[str, Any]


class FakeConsumer:
    def __init__(self) -> None:
        # Any: the async processor's listener returns coroutines.
        self.listener: Any = None
        self.steps: deque[list[Event]] = deque()
        self.owned: set[TopicPartition] = set()
        self.metadata = GEN1
        self.rejoining = False  # a JoinGroup or SyncGroup under way ("rejoining" steps)
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.closed = False
        self.log: list[str] = []

    def play(self, *events: Event) -> None:
        self.steps.append(list(events))

    def subscribe(self, topics: list[str], listener: RebalanceListener) -> None:
        self.listener = listener

    def _play(self, num_messages: int) -> Generator[Any, None, list[Any]]:
        """One scripted step; yields what each listener callback returned (the async
        processor's callbacks are coroutines, awaited before the step goes on)."""
        assert self.listener is not None
        out: list[Any] = []
        for kind, arg in self.steps.popleft() if self.steps else []:
            if kind == "assign":
                self.owned |= arg
                yield self.listener.on_partitions_assigned(frozenset(arg))
            elif kind == "revoke":
                self.log.append(f"revoke {sorted(arg)}")
                yield self.listener.on_partitions_revoked(frozenset(arg))
                self.owned -= arg
            elif kind == "lost":
                yield self.listener.on_partitions_lost(frozenset(arg))
                self.owned -= arg
            elif kind == "generation":
                self.metadata = arg
            elif kind == "rejoining":
                self.rejoining = arg
            elif kind == "records":
                out.extend(arg)
            else:  # pragma: no cover - a typo in a test
                raise AssertionError(kind)
        assert len(out) <= num_messages
        return out

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        play = self._play(num_messages)
        while True:
            try:
                next(play)
            except StopIteration as done:
                result: list[Any] = done.value
                return result

    def seek(self, partition: TopicPartition, offset: int) -> None:
        assert partition in self.owned, f"seek of {partition}, which is not owned"
        self.seeks.append((partition, offset))

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(self.owned)

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self.metadata

    def _rejoining(self) -> bool:
        return self.rejoining

    def metrics(self) -> dict[str, float]:
        return {}

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


class AsyncFakeConsumer(FakeConsumer):
    """The fake for ``AsyncTransactionalProcessor``: ``consume`` and ``close`` are
    coroutines; the callbacks are awaited where the sync fake calls them."""

    async def consume(self, num_messages: int, timeout: float) -> list[Any]:  # type: ignore[override]
        play = self._play(num_messages)
        while True:
            try:
                result = next(play)
            except StopIteration as done:
                records: list[Any] = done.value
                return records
            if inspect.isawaitable(result):
                await result

    async def close(self, timeout: float | None = None) -> None:  # type: ignore[override]
        self.closed = True


class FakeProducer:
    transactional_id = "txn-1"

    def __init__(self, consumer: FakeConsumer) -> None:
        self.consumer = consumer
        self.calls: list[tuple[str, Any]] = []
        self.fail: dict[str, deque[BaseException]] = {}
        self.open = False
        self.closed = False

    def inject(self, method: str, error: BaseException) -> None:
        self.fail.setdefault(method, deque()).append(error)

    def _enter(self, method: str, arg: Any = None) -> None:
        self.calls.append((method, arg))
        # The log interleaves producer calls with the consumer's callbacks.
        self.consumer.log.append(method)
        queue = self.fail.get(method)
        if queue:
            raise queue.popleft()

    def init(self, timeout_s: float | None = None) -> None:
        self._enter("init")

    def begin(self) -> None:
        assert not self.open
        self._enter("begin")
        self.open = True

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        **kwargs: Any,
    ) -> None:
        assert self.open
        self._enter("produce", value)

    def send_offsets(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: ConsumerGroupMetadata,
        timeout_s: float | None = None,
    ) -> None:
        assert self.open
        self._enter("send_offsets", (dict(offsets), group_metadata))
        check_group_metadata(group_metadata)  # what the real producer refuses

    def commit(self, timeout_s: float | None = None) -> None:
        assert self.open
        self._enter("commit")
        self.open = False

    def abort(self, timeout_s: float | None = None) -> None:
        assert self.open
        self._enter("abort")
        self.open = False

    def delivery_failure(self) -> str | None:
        return None

    def close(self) -> None:
        self.closed = True

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def sent(self) -> list[tuple[dict[TopicPartition, int], ConsumerGroupMetadata]]:
        return [arg for name, arg in self.calls if name == "send_offsets"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def copy_all(batch: list[Any], out: TransactionalOutput) -> None:
    for record in batch:
        out.produce("out", record.value())


@pytest.fixture(params=["sync", "async"], autouse=True)
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which processor ``Setup`` builds: every test runs on both."""
    global MODE
    MODE = request.param
    yield MODE
    MODE = "sync"
    while RUNNERS:
        RUNNERS.pop().close()


MODE = "sync"
RUNNERS: list[asyncio.Runner] = []


class AsyncView:
    """An ``AsyncTransactionalProcessor`` seen through the sync processor's methods:
    each coroutine runs to its end on one event loop kept for the test."""

    def __init__(self, processor: AsyncTransactionalProcessor) -> None:
        self._processor = processor
        self._runner = asyncio.Runner()
        RUNNERS.append(self._runner)

    def step(self, timeout: float = 0.5) -> int:
        return self._runner.run(self._processor.step(timeout))

    def run(self, *, poll_timeout: float = 0.5) -> Any:
        return self._runner.run(self._processor.run(poll_timeout=poll_timeout))

    def close(self, timeout: float | None = None) -> None:
        self._runner.run(self._processor.close(timeout))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._processor, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_process_fn":
            setattr(self._processor, name, value)
        else:
            super().__setattr__(name, value)


class Setup:
    def __init__(
        self,
        process: Callable[[list[Any], TransactionalOutput], None] = copy_all,
        *,
        listener: RebalanceListener | None = None,
        commit_interval_ms: int = 0,
        max_records: int = 10_000,
        contiguous_generations: bool = True,
        transaction_timeout_ms: int = 60_000,
    ) -> None:
        self.consumer = AsyncFakeConsumer() if MODE == "async" else FakeConsumer()
        self.producer = FakeProducer(self.consumer)
        self.clock = Clock()
        options: dict[str, Any] = {
            "topics": ["in"],
            "listener": listener,
            "commit_interval_ms": commit_interval_ms,
            "max_records_per_transaction": max_records,
            "clock": self.clock,
            "contiguous_generations": contiguous_generations,
            "transaction_timeout_ms": transaction_timeout_ms,
        }
        self.processor: Any
        if MODE == "async":
            self.processor = AsyncView(
                AsyncTransactionalProcessor._with_io(
                    self.consumer,
                    self.producer,
                    process,
                    **options,
                )
            )
        else:
            self.processor = TransactionalProcessor._with_io(
                self.consumer, self.producer, process, **options
            )


def test_a_batch_and_its_offsets_commit_in_one_transaction() -> None:
    s = Setup()
    s.consumer.play(("assign", {P0, P1}), ("records", records(P0, 5, 3) + records(P1, 0, 2)))
    assert s.processor.step(0.1) == 5
    assert s.producer.names() == ["init", "begin", *["produce"] * 5, "send_offsets", "commit"]
    assert s.producer.sent() == [({P0: 8, P1: 2}, GEN1)]
    stats = s.processor.stats()
    assert (stats.transactions_committed, stats.records_processed, stats.records_produced) == (
        1,
        5,
        5,
    )


def test_batches_share_a_transaction_until_the_commit_interval() -> None:
    s = Setup(commit_interval_ms=100)
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 2)))
    s.consumer.play(("records", records(P0, 2, 2)))
    s.consumer.play(("records", records(P0, 4, 1)))
    s.processor.step(0.1)
    s.clock.now += 0.05
    s.processor.step(0.1)
    assert "commit" not in s.producer.names()
    s.clock.now += 0.06  # 110 ms after the transaction began: due before the next poll
    s.processor.step(0.1)
    assert s.producer.names().count("begin") == 2
    assert s.producer.sent() == [({P0: 4}, GEN1)]


def test_an_idle_poll_commits_the_open_transaction() -> None:
    s = Setup(commit_interval_ms=10_000)
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 3)))
    s.processor.step(0.1)
    assert "commit" not in s.producer.names()
    assert s.processor.step(0.1) == 0  # nothing arrived: do not hold the output back
    assert s.producer.sent() == [({P0: 3}, GEN1)]
    assert s.producer.names()[-1] == "commit"


def test_a_due_commit_waits_while_the_member_rejoins() -> None:
    """Offsets sent while the member's JoinGroup or SyncGroup is under way carry the
    generation about to be superseded: the coordinator would refuse them (a CI run on
    Tansu saw it) and the transaction abort. The commit waits for the new generation,
    as Kafka Streams skips commits during a rebalance, and carries it."""
    s = Setup(commit_interval_ms=100)
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 2)), ("rejoining", True))
    s.consumer.play(("records", records(P0, 2, 2)))
    s.consumer.play()  # nothing arrives: no idle commit either
    s.consumer.play(("generation", GEN2), ("rejoining", False))
    s.processor.step(0.1)
    s.clock.now += 0.2
    s.processor.step(0.1)  # due, but the member rejoins
    s.clock.now += 0.2
    assert s.processor.step(0.1) == 0
    assert "commit" not in s.producer.names()
    assert s.processor.step(0.1) == 0  # the new generation is there: commit
    assert s.producer.sent() == [({P0: 4}, GEN2)]
    assert s.processor.stats().transactions_aborted == 0


def test_a_transaction_is_not_kept_open_past_half_its_timeout_for_a_rejoin() -> None:
    s = Setup(commit_interval_ms=100, transaction_timeout_ms=2_000)
    s.consumer.play(("assign", {P0}), ("rejoining", True), ("records", records(P0, 0, 2)))
    s.consumer.play(("records", records(P0, 2, 1)))
    s.processor.step(0.1)
    s.clock.now += 0.9
    s.processor.step(0.1)
    assert "commit" not in s.producer.names()
    s.clock.now += 0.1  # open 1 s: half of transaction.timeout.ms
    s.processor.step(0.1)
    assert s.producer.sent() == [({P0: 3}, GEN1)]


def test_a_revocation_commits_at_once_even_while_the_member_rejoins() -> None:
    s = Setup(commit_interval_ms=10_000)
    s.consumer.play(("assign", {P0, P1}), ("records", records(P0, 0, 2)))
    s.consumer.play(("rejoining", True), ("generation", GEN2), ("revoke", {P0}))
    s.processor.step(0.1)
    s.processor.step(0.1)
    assert s.producer.sent() == [({P0: 2}, GEN2)]


def test_max_records_per_transaction_commits() -> None:
    s = Setup(commit_interval_ms=10_000, max_records=4)
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 3)))
    s.consumer.play(("records", records(P0, 3, 3)))
    s.processor.step(0.1)
    s.processor.step(0.1)
    assert s.producer.sent() == [({P0: 6}, GEN1)]


class Recorder(RebalanceListener):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.log.append(f"user revoked {sorted(partitions)}")

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.log.append(f"user assigned {sorted(partitions)}")

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.log.append(f"user lost {sorted(partitions)}")


def test_a_revocation_of_the_open_transactions_partitions_commits_it_first() -> None:
    log: list[str] = []
    s = Setup(commit_interval_ms=10_000, listener=Recorder(log))
    s.consumer.log = log
    s.consumer.play(("assign", {P0, P1}), ("records", records(P0, 0, 2) + records(P1, 0, 2)))
    # COOPERATIVE: SyncGroup of generation 2 moves P1 away; the revocation runs with the
    # new generation already published (KAFKA-9741), and commits with it.
    s.consumer.play(("generation", GEN2), ("revoke", {P1}), ("records", records(P0, 2, 1)))
    s.processor.step(0.1)
    s.processor.step(0.1)
    assert s.producer.sent()[0] == ({P0: 2, P1: 2}, GEN2)
    revoke = log.index("revoke [TopicPartition(topic='in', partition=1)]")
    assert log[revoke + 1 : revoke + 4] == [
        "send_offsets",
        "commit",
        "user revoked [TopicPartition(topic='in', partition=1)]",
    ]
    assert s.processor.stats().commits_on_revoke == 1
    # The record of the kept partition read after the revocation opened a new one.
    assert s.producer.names()[-2:] == ["begin", "produce"]


def test_a_revocation_of_other_partitions_keeps_the_transaction_open() -> None:
    s = Setup(commit_interval_ms=10_000)
    s.consumer.play(("assign", {P0, P1}), ("records", records(P0, 0, 2)))
    s.consumer.play(("generation", GEN2), ("revoke", {P1}), ("records", records(P0, 2, 2)))
    s.processor.step(0.1)
    s.processor.step(0.1)
    names = s.producer.names()
    assert "commit" not in names
    assert "abort" not in names
    assert names.count("begin") == 1
    s.processor.step(0.1)  # idle: commits both batches, with the generation current now
    assert s.producer.sent() == [({P0: 4}, GEN2)]


def test_lost_partitions_abort_the_open_transaction() -> None:
    log: list[str] = []
    s = Setup(commit_interval_ms=10_000, listener=Recorder(log))
    s.consumer.play(("assign", {P0, P1}), ("records", records(P0, 0, 2) + records(P1, 7, 1)))
    s.consumer.play(("generation", NO_GEN), ("lost", {P0, P1}))
    s.processor.step(0.1)
    s.processor.step(0.1)
    assert s.producer.names()[-1] == "abort"
    assert s.producer.sent() == []
    assert s.consumer.seeks == []  # nothing of them is ours any more
    assert log[-1].startswith("user lost")
    stats = s.processor.stats()
    assert stats.aborts == {"partitions lost": 1}
    assert stats.records_replayed == 3
    assert stats.records_processed == 0


def test_a_refused_generation_aborts_and_rewinds_to_the_transactions_start() -> None:
    s = Setup(commit_interval_ms=10_000)
    s.consumer.play(("assign", {P0, P1}), ("records", records(P0, 10, 2) + records(P1, 3, 1)))
    s.consumer.play(("records", records(P0, 12, 2)))
    s.producer.inject(
        "send_offsets",
        TransactionAbortedError("fenced", reason="group generation fenced", code=22),
    )
    s.processor.step(0.1)
    s.processor.step(0.1)
    s.processor.step(0.1)  # idle: commit, refused
    assert s.producer.names()[-2:] == ["send_offsets", "abort"]
    assert sorted(s.consumer.seeks) == [(P0, 10), (P1, 3)]
    assert s.processor.stats().aborts == {"group generation fenced": 1}
    # The replay commits normally.
    s.consumer.play(("records", records(P0, 10, 4) + records(P1, 3, 1)))
    s.processor.step(0.1)
    s.processor.step(0.1)
    assert s.producer.sent()[-1] == ({P0: 14, P1: 4}, GEN1)
    assert s.processor.stats().transactions_committed == 1


def test_offsets_are_never_sent_without_a_generation() -> None:
    s = Setup()
    s.consumer.play(("assign", {P0}), ("generation", NO_GEN), ("records", records(P0, 0, 2)))
    s.processor.step(0.1)
    assert s.producer.names()[-1] == "abort"
    assert "commit" not in s.producer.names()
    assert s.consumer.seeks == [(P0, 0)]
    assert s.processor.stats().aborts == {"not in a generation": 1}


def test_a_failed_commit_in_a_revocation_rewinds_only_the_kept_partitions() -> None:
    s = Setup(commit_interval_ms=10_000)
    s.consumer.play(("assign", {P0, P1}), ("records", records(P0, 4, 1) + records(P1, 9, 1)))
    s.consumer.play(("revoke", {P1}))
    s.producer.inject(
        "commit",
        TransactionAbortedError("aborted", reason="transaction aborted by the coordinator"),
    )
    s.processor.step(0.1)
    s.processor.step(0.1)
    assert s.consumer.seeks == [(P0, 4)]
    assert s.processor.stats().commits_on_revoke == 0


def test_the_process_function_raising_aborts_rewinds_and_reraises() -> None:
    calls = 0

    def flaky(batch: list[Any], out: TransactionalOutput) -> None:
        nonlocal calls
        calls += 1
        copy_all(batch, out)
        if calls == 1:
            raise RuntimeError("boom")

    s = Setup(flaky)
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 3)))
    with pytest.raises(RuntimeError, match="boom"):
        s.processor.step(0.1)
    assert s.producer.names()[-1] == "abort"
    assert s.consumer.seeks == [(P0, 0)]
    s.consumer.play(("records", records(P0, 0, 3)))
    assert s.processor.step(0.1) == 3
    assert s.producer.sent() == [({P0: 3}, GEN1)]


def test_a_permanent_failure_is_raised_after_the_abort() -> None:
    s = Setup()
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 1)))
    s.producer.inject(
        "commit",
        TransactionAbortedError(
            "too large", reason="delivery failed", permanent=True, code=10, name="MSG_SIZE"
        ),
    )
    with pytest.raises(TransactionAbortedError) as info:
        s.processor.step(0.1)
    assert info.value.permanent
    assert not info.value.fatal
    assert s.producer.names()[-1] == "abort"
    assert s.consumer.seeks == [(P0, 0)]
    s.consumer.play(("records", records(P0, 0, 1)))
    assert s.processor.step(0.1) == 1  # still usable: the application decides


def test_a_fenced_producer_is_fatal_and_close_still_leaves() -> None:
    s = Setup()
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 1)))
    s.producer.inject("commit", ProducerFencedError("fenced", code=47))
    with pytest.raises(ProducerFencedError):
        s.processor.step(0.1)
    with pytest.raises(ProducerFencedError):
        s.processor.step(0.1)
    assert "abort" not in s.producer.names()
    s.processor.close()
    assert s.consumer.closed
    assert s.producer.closed


def test_a_fatal_error_in_a_revocation_reaches_the_caller() -> None:
    s = Setup(commit_interval_ms=10_000)
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 1)))
    s.consumer.play(("revoke", {P0}))
    s.producer.inject("send_offsets", ProducerFencedError("fenced", code=90))
    s.processor.step(0.1)
    with pytest.raises(TransactionError) as info:
        s.processor.step(0.1)  # the fake consumer raises from the callback at once
    assert info.value.fatal


def test_close_commits_the_open_transaction() -> None:
    s = Setup(commit_interval_ms=10_000)
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 2)))
    s.processor.step(0.1)
    s.processor.close()
    assert s.producer.sent() == [({P0: 2}, GEN1)]
    assert s.producer.names()[-1] == "commit"
    assert s.consumer.closed
    assert s.producer.closed
    s.processor.close()  # idempotent


def test_run_returns_after_stop_with_the_transaction_committed() -> None:
    s = Setup(commit_interval_ms=10_000)
    seen = 0

    def stop_after_two(batch: list[Any], out: TransactionalOutput) -> None:
        nonlocal seen
        copy_all(batch, out)
        seen += len(batch)
        if seen >= 4:
            s.processor.stop()

    s.processor._process_fn = stop_after_two
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 2)))
    s.consumer.play(("records", records(P0, 2, 2)))
    stats = s.processor.run(poll_timeout=0.1)
    assert stats.transactions_committed == 1
    assert stats.records_processed == 4
    assert s.producer.sent() == [({P0: 4}, GEN1)]


def test_output_outside_the_process_function_is_refused() -> None:
    kept: list[TransactionalOutput] = []

    def keep(batch: list[Any], out: TransactionalOutput) -> None:
        kept.append(out)

    s = Setup(keep)
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 1)))
    s.processor.step(0.1)
    with pytest.raises(TransactionError, match="outside the process function"):
        kept[0].produce("out", b"late")


def test_a_long_wait_is_sliced_so_that_stop_takes_effect() -> None:
    s = Setup()
    waits: list[float] = []
    consume = s.consumer.consume

    def timed(num_messages: int, timeout: float) -> Any:
        waits.append(timeout)
        s.clock.now += timeout
        if len(waits) == 3:
            s.processor.stop()
        return consume(num_messages, timeout)

    async def timed_async(num_messages: int, timeout: float) -> Any:
        return await timed(num_messages, timeout)

    s.consumer.consume = timed_async if MODE == "async" else timed  # type: ignore[method-assign,assignment]
    assert s.processor.step(10.0) == 0
    assert waits == [0.5, 0.5, 0.5]  # stopped after the third slice, not after 10 s
    s.processor._loop.stopping.clear()
    waits.clear()
    assert s.processor.step(1.2) == 0
    assert waits == pytest.approx([0.5, 0.5, 0.2])


# ------------------------------------------------------------ a missed generation


def test_a_revocation_after_a_missed_generation_aborts_instead_of_committing() -> None:
    # Found by the exactly-once chaos run on Tansu: a member still rejoining (its
    # JoinGroup held) kept reading P1 while Tansu ended a round without it and gave P1
    # to another member, who read the same records; the member's next round (two
    # generations on) revoked P1, and the commit before revoking carried those records
    # with a generation the coordinator accepted: 51 records twice. Generations 2 and 3
    # were never this member's, so what it read since its last callback is not its own.
    s = Setup(commit_interval_ms=10_000)
    s.consumer.play(("assign", {P0, P1}), ("records", records(P0, 0, 2) + records(P1, 755, 3)))
    s.consumer.play(("generation", GEN4), ("revoke", {P1}), ("records", []))
    s.processor.step(0.1)
    s.processor.step(0.1)
    assert s.producer.sent() == []
    assert s.producer.names()[-1] == "abort"
    assert s.consumer.seeks == [(P0, 0)]  # the kept partition is read again; P1 is not ours
    stats = s.processor.stats()
    assert stats.aborts == {"missed a generation": 1}
    assert stats.commits_on_revoke == 0
    assert stats.records_replayed == 5


def test_an_assignment_after_a_missed_generation_aborts_the_open_transaction() -> None:
    s = Setup(commit_interval_ms=10_000)
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 2)))
    s.consumer.play(("generation", GEN4), ("assign", set()), ("records", records(P0, 0, 2)))
    s.processor.step(0.1)
    s.processor.step(0.1)
    assert s.producer.names().count("abort") == 1
    assert s.consumer.seeks == [(P0, 0)]
    s.processor.step(0.1)  # idle: the replayed batch commits with the new generation
    assert s.producer.sent() == [({P0: 2}, GEN4)]


def test_consecutive_generations_commit_on_revocation() -> None:
    s = Setup(commit_interval_ms=10_000)
    s.consumer.play(("assign", {P0, P1}), ("records", records(P1, 0, 2)))
    s.consumer.play(("generation", GEN2), ("revoke", {P1}), ("assign", set()))
    s.processor.step(0.1)
    s.processor.step(0.1)
    assert s.producer.sent() == [({P1: 2}, GEN2)]
    assert s.processor.stats().aborts == {}


def test_a_kip848_member_epoch_may_jump() -> None:
    # group.protocol=consumer: the member epoch follows the group epoch, which moves
    # for every member's change, so a jump says nothing.
    s = Setup(commit_interval_ms=10_000, contiguous_generations=False)
    s.consumer.play(("assign", {P0, P1}), ("records", records(P1, 0, 2)))
    s.consumer.play(("generation", GEN4), ("revoke", {P1}))
    s.processor.step(0.1)
    s.processor.step(0.1)
    assert s.producer.sent() == [({P1: 2}, GEN4)]


# ------------------------------------------------------------ the core's requests


def core(consumer: FakeConsumer, commit_interval_ms: int = 0) -> TransactionLoop:
    return TransactionLoop(
        consumer,
        FakeProducer(consumer),
        batch_size=10,
        commit_interval_ms=commit_interval_ms,
        max_records_per_transaction=100,
        clock=Clock(),
        contiguous_generations=True,
        stopping=threading.Event(),
    )


def answer(steps: Generator[Request, Any, Any], *results: Any) -> list[Request]:
    """Send ``results`` one by one into ``steps``; the requests it made, in order."""
    asked = [next(steps)]
    for result in results:
        asked.append(steps.send(result))
    return asked


@pytest.mark.parametrize("mode", ["sync"], indirect=True)
def test_the_core_asks_for_every_io_and_performs_none(mode: str) -> None:
    consumer = FakeConsumer()
    consumer.owned = {P0}
    loop = core(consumer)
    steps = loop.step(0.1)
    batch = records(P0, 0, 2)
    asked = answer(steps, None, None, batch, None, None, None)
    assert asked[:2] == [CheckBrokers(), ProducerCall("init")]
    assert asked[2] == Consume(10, pytest.approx(0.1))  # type: ignore[arg-type]
    assert asked[3] == ProducerCall("begin")
    assert isinstance(asked[4], Process)
    assert [r.offset() for r in asked[4].records] == [0, 1]
    assert asked[5:] == [ProducerCall("send_offsets", ({P0: 2}, GEN1)), ProducerCall("commit")]
    with pytest.raises(StopIteration) as done:
        steps.send(None)
    assert done.value.value == 2
    assert loop.stats().transactions_committed == 1


@pytest.mark.parametrize("mode", ["sync"], indirect=True)
def test_the_core_turns_a_refused_commit_into_an_abort_and_a_rewind(mode: str) -> None:
    consumer = FakeConsumer()
    consumer.owned = {P0}
    loop = core(consumer)
    steps = loop.step(0.1)
    answer(steps, None, None, records(P0, 7, 3), None, None)  # up to send_offsets
    assert steps.send(None) == ProducerCall("commit")
    refused = TransactionAbortedError("fenced", reason="group generation fenced", code=22)
    assert steps.throw(refused) == ProducerCall("abort")
    with pytest.raises(StopIteration) as done:
        steps.send(None)
    assert done.value.value == 3
    assert consumer.seeks == [(P0, 7)]
    assert loop.stats().aborts == {"group generation fenced": 1}
    assert loop.txn is None


# ------------------------------------------------------------ cancellation (async only)


@pytest.mark.parametrize("mode", ["async"], indirect=True)
def test_cancelling_an_async_process_function_aborts_and_replays_its_batch(mode: str) -> None:
    started = asyncio.Event()
    calls = 0

    async def slow(batch: list[Any], out: TransactionalOutput) -> None:
        nonlocal calls
        calls += 1
        copy_all(batch, out)
        if calls == 1:
            started.set()
            await asyncio.sleep(60)

    s = Setup(slow)  # type: ignore[arg-type]
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 3)))
    processor = s.processor._processor

    async def scenario() -> None:
        task = asyncio.create_task(processor.step(0.1))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert s.producer.names()[-1] == "abort"
        assert s.consumer.seeks == [(P0, 0)]
        s.consumer.play(("records", records(P0, 0, 3)))
        assert await processor.step(0.1) == 3  # the replay commits

    s.processor._runner.run(scenario())
    assert s.producer.sent() == [({P0: 3}, GEN1)]
    assert s.processor.stats().aborts == {"process function raised": 1}


@pytest.mark.parametrize("mode", ["async"], indirect=True)
def test_cancelling_during_a_commit_waits_for_it_and_keeps_the_core_in_step(mode: str) -> None:
    import threading

    s = Setup()
    s.consumer.play(("assign", {P0}), ("records", records(P0, 0, 2)))
    in_commit = threading.Event()
    release = threading.Event()
    commit = s.producer.commit

    def blocking_commit(timeout_s: float | None = None) -> None:
        in_commit.set()
        assert release.wait(10)
        commit(timeout_s)

    s.producer.commit = blocking_commit  # type: ignore[method-assign]
    processor = s.processor._processor

    async def scenario() -> None:
        task = asyncio.create_task(processor.step(0.1))
        while not in_commit.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        await asyncio.sleep(0.01)
        assert not task.done()  # the commit on the worker thread is waited for
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The core saw the commit succeed: nothing is open, nothing is committed twice.
        assert processor.stats().transactions_committed == 1
        assert await processor.step(0.1) == 0

    s.processor._runner.run(scenario())
    assert s.producer.names().count("commit") == 1
    assert "abort" not in s.producer.names()
