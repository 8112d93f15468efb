"""AsyncConsumer on both embedded brokers: subscribe, consume, commit and close with
coroutine listeners; a group shared with the sync Consumer under the ownership ledger;
cancellation; and a quiet, healthy event loop through a rebalance."""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import os
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import confluent_kafka
import pytest

import coopconsumer
from coopconsumer import TopicPartition
from coopconsumer.aio import AsyncConsumer
from coopconsumer.assignors import (
    ClusterMetadata,
    CooperativeStickyAssignor,
    GroupAssignment,
    GroupSubscription,
    RebalanceProtocol,
)
from coopconsumer.testing import EmbeddedBroker, unique_name
from integration._ledger import (
    MOCK_ASSIGN_DELAY_S,
    CoopMember,
    KeyProducer,
    OwnershipLedger,
    RdkafkaMember,
    RecordAccounting,
    _MemberThread,
    committed_offsets,
    kept_but_given_up,
    late_sync_on_mock,
    wait_for,
)

PARTITIONS = 4
#: Bound of every wait below (a loaded two-core machine included).
SETTLE_S = 60.0


def config(kafka: EmbeddedBroker, group: str, **extra: object) -> dict[str, object]:
    return {
        "bootstrap.servers": kafka.bootstrap,
        "group.id": group,
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 3000,
        "heartbeat.interval.ms": 300,
        "auto.offset.reset": "earliest",
        **extra,
    }


def produce(kafka: EmbeddedBroker, topic: str, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


async def read_all(consumer: AsyncConsumer, count: int) -> int:
    """Consume until ``count`` records arrived (or SETTLE_S passed); how many did."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    seen = 0
    while seen < count and loop.time() < deadline:
        seen += len(await consumer.consume(count, 0.5))
    return seen


class Recorder:
    """A listener whose callbacks are coroutines: records calls, commits on revoke."""

    def __init__(self, consumer: AsyncConsumer | None = None) -> None:
        self.consumer = consumer
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []

    async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        await asyncio.sleep(0)  # really awaited: the rest of the rebalance waits for it
        self.calls.append(("assigned", partitions))

    async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        if self.consumer is not None:
            await self.consumer.commit()
        self.calls.append(("revoked", partitions))


def test_subscribe_consume_commit_close(kafka: EmbeddedBroker) -> None:
    topic = unique_name("aio")
    group = unique_name("g")
    kafka.create_topic(topic, PARTITIONS)
    produce(kafka, topic, 200)
    all_tps = frozenset(TopicPartition(topic, p) for p in range(PARTITIONS))

    async def main() -> None:
        async with AsyncConsumer(config(kafka, group, **{"enable.auto.commit": False})) as c:
            listener = Recorder(c)
            c.subscribe([topic], listener=listener)
            seen: set[bytes] = set()

            async def read() -> None:
                async for record in c:
                    value = record.value()
                    assert value is not None
                    seen.add(value)
                    if len(seen) == 150:
                        await c.commit()  # positions so far
                    if len(seen) == 200:
                        return

            await asyncio.wait_for(read(), SETTLE_S)
            assert listener.calls == [("assigned", all_tps)]
            assert c.assignment() == all_tps
            committed = await c.committed(all_tps)
            assert sum(o or 0 for o in committed.values()) == 150
            assert c.metrics()["assigned-partitions"] == PARTITIONS
        # close() ran on_partitions_revoked, whose await commit() made the rest.
        assert listener.calls[-1] == ("revoked", all_tps)

    asyncio.run(main())
    final = committed_offsets(kafka.bootstrap, group, sorted(all_tps))
    assert sum(o or 0 for o in final.values()) == 200


def test_a_listener_exception_is_raised_once_and_the_consumer_carries_on(
    kafka: EmbeddedBroker,
) -> None:
    topic = unique_name("aio")
    kafka.create_topic(topic, PARTITIONS)
    produce(kafka, topic, 20)

    class Raising:
        async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
            raise ValueError("from the listener")

    async def main() -> None:
        async with AsyncConsumer(config(kafka, unique_name("g"))) as c:
            c.subscribe([topic], listener=Raising())

            async def until_raised() -> None:
                while True:
                    await c.poll(0.5)

            with pytest.raises(ValueError, match="from the listener"):
                await asyncio.wait_for(until_raised(), SETTLE_S)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE_S
            count = 0
            while count < 20 and loop.time() < deadline:
                count += len(await c.consume(100, 0.5))
            assert count == 20

    asyncio.run(main())


def test_cancelled_poll_and_commit_leave_the_consumer_usable(kafka: EmbeddedBroker) -> None:
    topic = unique_name("aio")
    group = unique_name("g")
    kafka.create_topic(topic, PARTITIONS)

    async def main() -> None:
        async with AsyncConsumer(config(kafka, group, **{"enable.auto.commit": False})) as c:
            c.subscribe([topic])
            # Cancelled while waiting (joining, then nothing to read).
            task = asyncio.ensure_future(c.poll(30))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE_S
            while len(c.assignment()) < PARTITIONS and loop.time() < deadline:
                assert await c.poll(0.2) is None
            assert len(c.assignment()) == PARTITIONS
            produce(kafka, topic, 8)
            got: list[Any] = []
            while len(got) < 8 and loop.time() < deadline:
                got.extend(await c.consume(8, 1.0))
            assert len(got) == 8
            # A commit whose await is cancelled still completes in the background.
            commit = asyncio.ensure_future(c.commit())
            await asyncio.sleep(0)
            commit.cancel()
            with pytest.raises(asyncio.CancelledError):
                await commit
            await c.commit()
            committed = await c.committed(c.assignment())
            assert sum(o or 0 for o in committed.values()) == 8

    asyncio.run(main())


class AsyncMember(_MemberThread):
    """An ``AsyncConsumer`` member on its own thread and event loop, accounted as
    ``CoopMember`` is: commits after each batch and, awaited, inside its coroutine
    ``on_partitions_revoked``."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        group_id: str,
        topics: Sequence[str],
        ledger: OwnershipLedger,
        accounting: RecordAccounting,
        *,
        tolerate: Callable[[BaseException], bool] | None = None,
    ) -> None:
        super().__init__(name, ledger, accounting)
        self.tolerate = tolerate
        self.config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 3000,
            "heartbeat.interval.ms": 300,
        }
        self.topics = list(topics)
        self.consumer: AsyncConsumer | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            logging.getLogger("tests.aio").exception("%s failed", self.name)
            if self.error is None:
                self.error = exc

    async def _main(self) -> None:
        member = self

        class Listener:
            async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
                member.ledger.assigned(member.name, partitions)

            async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                await member._commit_async(frozenset(partitions))
                member.ledger.revoked(member.name, partitions)

            async def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
                member._forget_pending(frozenset(partitions))
                member.ledger.lost(member.name, partitions)

        async with AsyncConsumer(self.config) as consumer:
            self.consumer = consumer
            consumer.subscribe(self.topics, listener=Listener())
            while not self._stop.is_set():
                try:
                    records = await consumer.consume(200, 0.05)
                except coopconsumer.CoopConsumerError as exc:
                    if self.tolerate is None or not self.tolerate(exc):
                        raise
                    continue
                self._account(records)
                await self._commit_async(None)
            await self._commit_async(None)

    async def _commit_async(self, only: frozenset[TopicPartition] | None) -> None:
        consumer = self.consumer
        if consumer is None:
            return
        offsets = self._take_pending(only)
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except coopconsumer.RebalanceInProgressError as exc:
            if only is not None:
                self.commit_failures.append(f"on revoke of {sorted(offsets)}: {exc}")
                return
            self._restore_pending(offsets)
            return
        except coopconsumer.CommitFailedError as exc:
            self.commit_failures.append(f"{exc}")
            return
        assert self.accounting is not None
        self.accounting.committed(self.name, offsets)


def _balanced(
    ledger: OwnershipLedger, members: Sequence[_MemberThread], tps: list[TopicPartition]
) -> bool:
    owners = ledger.owners()
    if set(owners) != set(tps):
        return False
    counts = [len(ledger.owned_by(m.name)) for m in members]
    return max(counts) - min(counts) <= 1 and ledger.quiet_for() >= 1.0


def test_a_group_of_async_sync_and_librdkafka_consumers(kafka: EmbeddedBroker) -> None:
    on_mock = kafka.kind == "mock"
    topic = unique_name("aio")
    group = unique_name("g")
    kafka.create_topic(topic, PARTITIONS)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    ledger = OwnershipLedger()
    accounting = RecordAccounting()
    producer = KeyProducer(kafka.bootstrap, topic, PARTITIONS, accounting, rate=150)
    producer.produce(300)
    producer.start()
    tolerate = late_sync_on_mock if on_mock else None
    a1 = AsyncMember("async-1", kafka.bootstrap, group, [topic], ledger, accounting)
    s1 = CoopMember(
        "sync-1",
        kafka.bootstrap,
        group,
        [topic],
        ledger,
        accounting,
        assign_delay_s=MOCK_ASSIGN_DELAY_S if on_mock else 0.0,
        tolerate=tolerate,
    )
    r1 = RdkafkaMember("rdkafka-1", kafka.bootstrap, group, [topic], ledger, accounting)
    a2 = AsyncMember("async-2", kafka.bootstrap, group, [topic], ledger, accounting)
    a1.tolerate = a2.tolerate = tolerate
    live: list[_MemberThread] = []
    try:
        for member in (a1, s1, r1, a2):
            since = time.monotonic()
            member.start()
            earlier = list(live)
            live.append(member)
            wait_for(
                lambda: _balanced(ledger, live, tps),
                SETTLE_S,
                f"{member.name} to join",
                members=live,
            )
            for other in earlier:
                # KIP-429: a join revokes only partitions that move, never a kept one.
                kept_but_revoked = kept_but_given_up(ledger, other, since)
                assert not kept_but_revoked, (other.name, ledger.events(other.name))
        s1.stop()
        live.remove(s1)
        wait_for(lambda: _balanced(ledger, live, tps), SETTLE_S, "a hand-over", members=live)
        producer.stop()
        wait_for(lambda: not accounting.missing(), SETTLE_S, "every record", members=live)
        for running in list(live):
            running.stop()
            live.remove(running)
    finally:
        producer.stop()
        for running in live:
            running.stop()
    for member in (a1, s1, r1, a2):
        assert member.error is None, f"{member.name}: {member.error!r}"
    ledger.check()  # no partition ever had two owners
    assert not producer.errors
    assert accounting.missing() == []
    # Every member commits before giving a partition up, so no record is processed
    # twice, except where a broker refused a commit (test_interop.py names the
    # embedded brokers' refusals of librdkafka's commits): a duplicate is accepted only
    # from a member that reported a failed commit.
    failures = {m.name: m.commit_failures[:3] for m in (a1, s1, r1, a2) if m.commit_failures}
    for name, count in accounting.duplicated_after().items():
        assert name in failures, (
            f"{count} record(s) first processed by {name} were processed again, but "
            f"{name} had no failed commit: {accounting.duplicate_readers()}"
        )


#: What asyncio's debug mode logs for a callback over ``slow_callback_duration``.
_SLOW_CALLBACK = re.compile(r"^Executing .* took \d+\.\d+ seconds$", re.S)


class _LoopWatch:
    """What could stall the loop, watched on the loop's thread.

    * every callback's CPU time (``time.thread_time``): the consumer's own work per
      callback must stay under the slow-callback limit;
    * every call that can block: ``time.sleep``, a ``threading`` wait with a timeout,
      librdkafka asked to wait (``Fetcher.consume`` with a timeout > 0, its broker
      queries), name resolution of a name that is not an address.

    * every callback over the limit on the wall clock, split by the kernel's own
      accounting of the thread (``/proc/self/task/<tid>/schedstat``: time on a CPU,
      time runnable but waiting for one) into running, waiting for a CPU, and the rest:
      off a CPU without being runnable, which is blocking, whatever call did it (a
      socket or ``select`` with a timeout, a lock, a sleep the patches above miss).

    asyncio's debug check (``slow_callback_duration``) measures the wall clock, which on
    a loaded two-core machine also counts the time the thread waited for a CPU. A slow
    callback is ``preempted`` (the machine's load) only when it would have been under
    the limit without that wait and the garbage collection inside it; otherwise it is
    ``blocked`` (mostly off a CPU) or ``heavy`` (mostly computing).
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.heavy: list[str] = []
        self.blocking: list[str] = []
        self.blocked: list[str] = []
        self.preempted: list[str] = []
        self._loop_thread = threading.get_ident()
        self._schedstat = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", 0)
        self._undo: list[tuple[Any, str, Any]] = []

    def _sched(self) -> tuple[int, int]:
        """(ns on a CPU, ns runnable waiting for one) of the loop's thread so far."""
        on_cpu, waiting, _slices = os.pread(self._schedstat, 128, 0).split()
        return int(on_cpu), int(waiting)

    def _patch(self, owner: Any, name: str, check: Callable[..., str | None]) -> None:
        original = getattr(owner, name)
        watch = self

        def watched(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == watch._loop_thread:
                problem = check(*args, **kwargs)
                if problem is not None:
                    watch.blocking.append(problem)
            return original(*args, **kwargs)

        self._undo.append((owner, name, original))
        setattr(owner, name, watched)

    def _gc(self, phase: str, _info: dict[str, int]) -> None:
        if threading.get_ident() != self._loop_thread:
            return
        if phase == "start":
            self._gc_started = time.thread_time()
        else:
            self.gc_cpu += time.thread_time() - self._gc_started

    def __enter__(self) -> _LoopWatch:
        from coopconsumer._io._fetcher import Fetcher

        handle = asyncio.events.Handle
        original = handle._run
        watch = self
        # The interpreter's cyclic garbage collection may run inside any callback of
        # any program; its CPU time is counted apart, not as the callback's.
        self.gc_cpu = 0.0
        self._gc_started = 0.0
        gc.callbacks.append(self._gc)
        self._undo.append((None, "gc", self._gc))

        def timed(self: asyncio.events.Handle) -> None:
            on_cpu, waiting = watch._sched()
            wall, cpu, in_gc = time.perf_counter(), time.thread_time(), watch.gc_cpu
            try:
                original(self)
            finally:
                wall = time.perf_counter() - wall
                # A little under the limit: asyncio's own measure, around this one, is
                # a little longer.
                if wall > 0.9 * watch.limit_s:
                    collected = watch.gc_cpu - in_gc
                    cpu = time.thread_time() - cpu - collected
                    on_cpu_after, waiting_after = watch._sched()
                    ran = (on_cpu_after - on_cpu) / 1e9
                    queued = (waiting_after - waiting) / 1e9
                    off = wall - ran - queued
                    what = (
                        f"{self!r}: {wall:.3f}s wall, {cpu:.3f}s CPU, {queued:.3f}s "
                        f"waiting for a CPU, {off:.3f}s off a CPU, {collected:.3f}s in "
                        f"garbage collection"
                    )
                    # Garbage collection is the interpreter's, not the callback's: a
                    # collection that ran inside it (a CI run saw 0.164 s) is set apart,
                    # as from its CPU time above.
                    if wall - queued - collected < watch.limit_s:
                        watch.preempted.append(what)  # quick, but for the wait for a CPU
                    elif off > cpu:
                        watch.blocked.append(what)
                    else:
                        watch.heavy.append(what)

        self._undo.append((handle, "_run", original))
        handle._run = timed  # type: ignore[method-assign]
        self._patch(time, "sleep", lambda s: f"time.sleep({s})" if s > 0 else None)
        self._patch(
            threading.Condition,
            "wait",
            lambda _c, timeout=None: None if timeout == 0 else f"Condition.wait({timeout})",
        )
        self._patch(
            Fetcher,
            "consume",
            lambda _f, n, t: f"Fetcher.consume({n}, {t})" if t > 0 else None,
        )
        for name in ("watermarks", "offsets_for_times"):
            self._patch(Fetcher, name, lambda *_a, _n=name, **_k: f"Fetcher.{_n}")
        self._patch(socket, "getaddrinfo", _named_host)
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._undo):
            if owner is None:
                gc.callbacks.remove(original)
            else:
                setattr(owner, name, original)
        os.close(self._schedstat)


def _named_host(host: Any, *_args: Any, **_kwargs: Any) -> str | None:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return f"getaddrinfo({host!r})"
    return None


def test_the_loop_stays_healthy_through_a_rebalance(
    kafka: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique_name("aio")
    group = unique_name("g")
    kafka.create_topic(topic, PARTITIONS)
    total = 100_000
    produce(kafka, topic, total)
    limit_s = 0.05

    async def main() -> int:
        loop = asyncio.get_running_loop()
        loop.slow_callback_duration = limit_s
        cfg = config(kafka, group)  # bootstrap is an address: nothing to resolve
        seen = 0
        deadline = loop.time() + SETTLE_S
        async with AsyncConsumer(cfg) as first:
            first.subscribe([topic])
            while seen < total // 4 and loop.time() < deadline:
                seen += len(await first.consume(200, 0.5))
            # A second member joins: a cooperative rebalance on the same loop.
            async with AsyncConsumer(cfg) as second:
                second.subscribe([topic])
                while loop.time() < deadline and (
                    len(first.assignment()) + len(second.assignment()) != PARTITIONS
                    or not first.assignment()
                    or not second.assignment()
                    or seen < total
                ):
                    batches = await asyncio.gather(
                        first.consume(200, 0.2), second.consume(200, 0.2)
                    )
                    seen += sum(len(b) for b in batches)
                assert first.assignment()
                assert second.assignment()
        return seen

    with _LoopWatch(limit_s) as watch, caplog.at_level(logging.WARNING, "asyncio"):
        seen = asyncio.run(main(), debug=True)
    assert seen >= total
    assert watch.blocking == [], watch.blocking  # no call that waits was made on the loop
    # No callback took 50 ms of its own (computing, or off a CPU without being runnable).
    assert watch.blocked == [], watch.blocked
    assert watch.heavy == [], watch.heavy
    slow = [r.getMessage() for r in caplog.records if _SLOW_CALLBACK.search(r.getMessage())]
    # asyncio's own check logged no slow callback, but for those the machine's load kept
    # waiting for a CPU (each one the watch saw: neither blocked nor computed).
    assert len(slow) <= len(watch.preempted), (slow, watch.preempted)
    print(f"asyncio debug: {len(slow)} slow callback(s), all waiting for a CPU: {watch.preempted}")


def test_an_idle_consumer_sleeps(kafka: EmbeddedBroker) -> None:
    topic = unique_name("aio")
    kafka.create_topic(topic, PARTITIONS)
    produce(kafka, topic, 10)

    async def main() -> None:
        async with AsyncConsumer(config(kafka, unique_name("g"))) as c:
            c.subscribe([topic])
            assert await read_all(c, 10) == 10
            driver = c._driver
            steps = driver.steps
            signal_sleeps = c._signal.sleeps
            assert await c.poll(3.0) is None  # three idle seconds
            # Heartbeats every 300 ms, each a send and an answer; a busy loop would make
            # thousands of steps. poll() itself sleeps until woken or a second passed.
            assert driver.steps - steps < 100
            assert c._signal.sleeps - signal_sleeps <= 10

    asyncio.run(main())


def test_the_loop_watch_catches_blocking_and_heavy_callbacks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.slow_callback_duration = 0.05
        loop.call_soon(time.sleep, 0.06)  # blocks, through a watched call
        loop.call_soon(select.select, [], [], [], 0.08)  # blocks, through any other
        loop.call_soon(sum, range(10))  # quick
        loop.call_soon(lambda: sum(i * i for i in range(3_000_000)))  # computes
        await asyncio.sleep(0.2)

    with _LoopWatch(0.05) as watch, caplog.at_level(logging.WARNING, "asyncio"):
        asyncio.run(main(), debug=True)
    assert watch.blocking == ["time.sleep(0.06)"]
    assert len(watch.blocked) == 2, watch.blocked  # the sleep and the select
    assert "select" in watch.blocked[1]
    assert len(watch.heavy) == 1
    assert "lambda" in watch.heavy[0]
    # asyncio's own check logged the three (so the health test's count of its
    # reports is a count of these).
    slow = [r.getMessage() for r in caplog.records if _SLOW_CALLBACK.search(r.getMessage())]
    assert len(slow) >= 3, slow


def test_the_consumer_group_protocol_kip848(kafka: EmbeddedBroker) -> None:
    if kafka.kind == "tansu":
        pytest.skip("Tansu does not answer ConsumerGroupHeartbeat (docs/testing.md)")
    topic = unique_name("aio")
    group = unique_name("g")
    kafka.create_topic(topic, PARTITIONS)
    produce(kafka, topic, 100)
    cfg: dict[str, object] = {
        "bootstrap.servers": kafka.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    all_tps = frozenset(TopicPartition(topic, p) for p in range(PARTITIONS))

    async def main() -> None:
        async with AsyncConsumer(cfg) as c:
            listener = Recorder(c)
            c.subscribe([topic], listener=listener)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE_S
            count = 0
            while count < 100 and loop.time() < deadline:
                count += len(await c.consume(100, 0.5))
            assert count == 100
            assert c.assignment() == all_tps
            assert c.group_metadata().generation_id >= 1  # the member epoch
            assert ("assigned", all_tps) in listener.calls
        assert listener.calls[-1] == ("revoked", all_tps)

    asyncio.run(main())
    final = committed_offsets(kafka.bootstrap, group, sorted(all_tps))
    assert sum(o or 0 for o in final.values()) == 100  # committed in the revocation


def test_pause_is_kept_for_retained_partitions_and_dropped_for_revoked_ones(
    kafka: EmbeddedBroker,
) -> None:
    topic = unique_name("aio")
    group = unique_name("g")
    kafka.create_topic(topic, PARTITIONS)

    async def main() -> None:
        cfg = config(kafka, group)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_S
        async with AsyncConsumer(cfg) as first:
            first.subscribe([topic])
            while len(first.assignment()) < PARTITIONS and loop.time() < deadline:
                await first.poll(0.2)
            first.pause(first.assignment())
            assert first.paused() == first.assignment()
            async with AsyncConsumer(cfg) as second:
                second.subscribe([topic])
                while loop.time() < deadline and not (
                    second.assignment()
                    and len(first.assignment()) + len(second.assignment()) == PARTITIONS
                ):
                    await asyncio.gather(first.poll(0.2), second.poll(0.2))
                kept = first.assignment()
                assert 0 < len(kept) < PARTITIONS
                # Retained partitions stay paused; the revoked ones left the set.
                assert first.paused() == kept
                produce(kafka, topic, 40)
                got = 0
                end = loop.time() + 3.0
                while loop.time() < min(end, deadline):
                    records = await first.consume(100, 0.2)
                    assert records == []  # everything it owns is paused
                    got += len(await second.consume(100, 0.2))
                assert got > 0  # the moved partitions flow at the new owner

    asyncio.run(main())


def test_no_record_is_returned_while_a_coroutine_callback_runs(kafka: EmbeddedBroker) -> None:
    topic = unique_name("aio")
    group = unique_name("g")
    kafka.create_topic(topic, PARTITIONS)
    produce(kafka, topic, 20_000)  # a backlog the first member is still reading
    revoking: list[tuple[float, float, frozenset[TopicPartition]]] = []
    returned: list[tuple[float, TopicPartition]] = []

    class SlowRevoke:
        async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
            start = time.monotonic()
            await asyncio.sleep(1.0)  # records of these partitions keep arriving meanwhile
            revoking.append((start, time.monotonic(), partitions))

    async def main() -> None:
        cfg = config(kafka, group, **{"enable.auto.commit": False})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_S
        async with AsyncConsumer(cfg) as first:
            first.subscribe([topic], listener=SlowRevoke())
            while len(returned) < 1000 and loop.time() < deadline:
                for r in await first.consume(10, 0.1):
                    returned.append((time.monotonic(), TopicPartition(topic, r.partition() or 0)))
            async with AsyncConsumer(cfg) as second:
                second.subscribe([topic])
                while not revoking and loop.time() < deadline:
                    _, records = await asyncio.gather(second.poll(0.01), first.consume(10, 0.01))
                    for r in records:
                        returned.append(
                            (time.monotonic(), TopicPartition(topic, r.partition() or 0))
                        )
                    await asyncio.sleep(0.005)  # reads slowly: the backlog lasts

    asyncio.run(main())
    assert revoking, "the second member never took partitions from the first"
    start, end, _ = revoking[0]
    # As with a sync callback, which runs inside poll(): nothing while it runs.
    during = [tp for at, tp in returned if start <= at <= end]
    assert during == [], f"{len(during)} records returned during the callback"


def test_a_python_assignor_runs_on_the_loop(kafka: EmbeddedBroker) -> None:
    topic = unique_name("aio")
    kafka.create_topic(topic, PARTITIONS)
    produce(kafka, topic, 20)
    loop_thread = threading.get_ident()

    class Recording(CooperativeStickyAssignor):
        def __init__(self) -> None:
            super().__init__()
            self.threads: list[int] = []

        def assign(
            self, metadata: ClusterMetadata, group_subscription: GroupSubscription
        ) -> GroupAssignment:
            self.threads.append(threading.get_ident())
            return super().assign(metadata, group_subscription)

    assignor = Recording()

    async def main() -> None:
        cfg = config(kafka, unique_name("g"), **{"partition.assignment.strategy": [assignor]})
        async with AsyncConsumer(cfg) as c:
            c.subscribe([topic])
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE_S
            count = 0
            while count < 20 and loop.time() < deadline:
                count += len(await c.consume(20, 0.5))
            assert count == 20
            assert c.is_leader
            assert c.assignor == "cooperative-sticky"
            assert c.rebalance_protocol is RebalanceProtocol.COOPERATIVE

    asyncio.run(main())
    assert assignor.threads
    assert set(assignor.threads) == {loop_thread}  # the leader's assignment: on the loop


def test_manual_assignment_commits_at_close_with_auto_commit(kafka: EmbeddedBroker) -> None:
    topic = unique_name("aio")
    group = unique_name("g")
    kafka.create_topic(topic, PARTITIONS)
    produce(kafka, topic, 40)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    async def main() -> None:
        cfg = config(kafka, group, **{"enable.auto.commit": True})
        async with AsyncConsumer(cfg) as c:
            c.assign(tps)
            assert c.assignment() == frozenset(tps)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE_S
            count = 0
            while count < 40 and loop.time() < deadline:
                count += len(await c.consume(40, 0.5))
            assert count == 40
        # close() committed the consumed positions (no group to leave: Java's
        # maybeAutoCommitOffsetsSync), through the member's retried commit.

    asyncio.run(main())
    final = committed_offsets(kafka.bootstrap, group, tps)
    assert sum(o or 0 for o in final.values()) == 40


def test_every_public_name_of_the_sync_consumer_exists_on_the_async_one() -> None:
    def public(cls: type) -> set[str]:
        return {name for name in dir(cls) if not name.startswith("_")}

    missing = public(coopconsumer.Consumer) - public(AsyncConsumer)
    assert missing == set(), f"AsyncConsumer lacks {sorted(missing)}"


def test_offsets_for_times_and_consumer_group_metadata(kafka: EmbeddedBroker) -> None:
    topic = unique_name("aio")
    kafka.create_topic(topic, PARTITIONS)
    produce(kafka, topic, 40)
    first, second = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def main() -> None:
        async with AsyncConsumer(config(kafka, unique_name("g"))) as c:
            c.subscribe([topic])
            assert await read_all(c, 40) == 40
            assert c.consumer_group_metadata() == c.group_metadata()
            assert c.group_metadata().generation_id >= 0
            # As the sync test (tests/integration/test_consumer.py): neither stand-in
            # searches by timestamp; each is asked where its answer is Kafka's, and
            # Kafka is asked both.
            far_future = int(time.time() * 1000) + 3_600_000
            before: tuple[dict[TopicPartition, int], dict[TopicPartition, int | None]] = (
                {first: 0, second: 0},
                {first: 0, second: 0},
            )
            after: tuple[dict[TopicPartition, int], dict[TopicPartition, int | None]] = (
                {first: far_future},
                {first: None},
            )
            cases = {"tansu": [before], "mock": [after]}.get(kafka.kind, [before, after])
            for asked, expected in cases:
                assert await c.offsets_for_times(asked, timeout=SETTLE_S) == expected
            assert await c.offsets_for_times({}) == {}
            with pytest.raises(coopconsumer.ConfigurationError, match="must be an int >= 0"):
                await c.offsets_for_times({first: -1})
        with pytest.raises(coopconsumer.CoopConsumerError):
            await c.offsets_for_times({first: 0})  # closed: as the sync consumer

    asyncio.run(main())
