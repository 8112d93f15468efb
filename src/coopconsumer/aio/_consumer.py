"""``AsyncConsumer``: the consumer for asyncio applications (docs/asyncio.md).

The group member, every broker connection and the consumer's own logic run on the
event loop: this facade composes the ``ConsumerCore`` the sync ``Consumer`` composes,
with the loop's driver and client (``_loop_driver``, ``_loop_client``) and coroutine
callbacks run as tasks (``_listener_tasks``); librdkafka's fetch
threads wake the loop through a file descriptor when records arrive
(``_records_wakeup``). No method blocks the loop: where the sync ``Consumer`` waits,
this one awaits.
"""

from __future__ import annotations

import asyncio
import logging
import re
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._config import ConsumerConfig
from .._consumer_core._arguments import OFFSET_BEGINNING, OFFSET_END, subscription
from .._consumer_core._core import ConsumerCore, close_notices
from .._errors import ConfigurationError, CoopConsumerError, RequestTimeoutError
from .._io._member_factory import client_for
from .._listener import RebalanceListener, RebalanceListenerLike
from .._member import AssignmentChange, CloseRequested, LeaveRequested
from .._types import ConsumerGroupMetadata, TopicPartition
from ..assignors import RebalanceProtocol
from ._listener_tasks import ListenerTasks, is_async_listener
from ._loop_client import LoopKafkaClient
from ._loop_driver import LoopDriver
from ._records_wakeup import RecordsWakeup
from ._signal import Signal

if TYPE_CHECKING:
    from .._io._fetcher import Record as Message

__all__ = ["AsyncConsumer"]

log = logging.getLogger("coopconsumer.aio")

_T = TypeVar("_T")

#: Longest await inside ``poll()`` when librdkafka wakes the loop itself: between two
#: awaits the consumer reports that it polls (``max.poll.interval.ms``) and retries a
#: failed committed-offset lookup. The member's own timers (auto-commit among them)
#: wake it through the driver.
_IDLE_SLICE_S: Final = 1.0
#: The await while a commit before revoking runs (the sync consumer's slice then).
_REVOKE_COMMIT_SLICE_S: Final = 0.01
#: Without librdkafka's wake-up (not Linux), records are looked for this often: the
#: sync consumer's slice.
_POLLING_SLICE_S: Final = 0.05
_CLOSE_TIMEOUT_S: Final = 30.0
#: poll()/consume() suspend at least this often, even while records are ready: a
#: reading loop that never awaits anything else would otherwise hold the event loop
#: (its slow-callback limit is 100 ms by default, 50 ms in our health test).
_YIELD_EVERY_S: Final = 0.01


class AsyncConsumer:
    """A Kafka consumer in a consumer group for asyncio: the configuration keys and
    semantics of :class:`coopconsumer.Consumer` (KIP-429 cooperative rebalancing,
    ``group.protocol`` classic or consumer, assignors written in Python, TLS and
    SASL), with ``await`` where the sync consumer blocks.

    Build it inside a running event loop (``async with AsyncConsumer(config) as c``).
    One coroutine at a time should poll. Rebalance listener callbacks may be
    ``async def`` (they are awaited, and may ``await consumer.commit()``) or plain
    methods; either way they run on the loop, in the sync consumer's order.

    Raises :class:`ConfigurationError` for an unknown key or invalid value, or when no
    loop is running; nothing is started then.
    """

    def __init__(self, config: Mapping[str, object]) -> None:
        from ._gated_fetcher import GatedFetcher  # loads librdkafka

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise ConfigurationError(
                "AsyncConsumer must be created inside a running event loop "
                "(in a coroutine, e.g. 'async with AsyncConsumer(config) as consumer')"
            ) from None
        cfg = ConsumerConfig.from_mapping(config)
        cfg.require_group_id()
        self._loop = loop
        self._signal = Signal()
        #: When poll()/consume() last resumed from a suspension (see _YIELD_EVERY_S).
        self._resumed_at = 0.0
        self._closed = False
        self._api_timeout_s = cfg.default_api_timeout_ms / 1000.0
        fetcher = GatedFetcher(cfg.fetcher_config(), logger=cfg.logger)
        client: LoopKafkaClient | None = None
        wakeup: RecordsWakeup | None = None
        try:
            # The sync consumer's client settings (client_for), on the loop.
            settings = client_for(cfg)
            settings.close()
            client = LoopKafkaClient(settings.config, loop, self._wake_driver)
            wakeup = RecordsWakeup.create(loop, fetcher._consumer, self._signal.set)
            tasks = ListenerTasks(self._signal.set)
            core = ConsumerCore(cfg, fetcher, client, driver_type=LoopDriver, gate=tasks)
            tasks.bind(core)
            fetcher.shut = tasks.running
        except BaseException:
            if wakeup is not None:
                wakeup.close()
            if client is not None:
                client.close()
            fetcher.close()
            raise
        self._records_wakeup = wakeup
        if wakeup is not None:
            # Dropped without close(): librdkafka must stop writing to the socket pair
            # before its descriptors can be closed and reused.
            weakref.finalize(self, wakeup.close)
        self._core = core
        self._tasks = tasks
        driver = core.driver
        assert isinstance(driver, LoopDriver)
        self._driver = driver
        driver.set_on_publish(self._signal.set)

    def _wake_driver(self) -> None:
        driver = getattr(self, "_driver", None)
        if driver is not None:
            driver.wake()

    # ------------------------------------------------------------------ subscription

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str],
        listener: RebalanceListener | RebalanceListenerLike | object | None = None,
    ) -> None:
        """Join the group for ``topics`` (names or a pattern, as
        :meth:`Consumer.subscribe`). ``listener``'s callbacks may be coroutines.
        Returns at once; the following :meth:`poll` calls join and run the callbacks."""
        core = self._core
        core.check_usable()
        wanted = subscription(topics, broker_regex=core.config.kip848)
        if wanted is None:
            core.leave()  # as Consumer.subscribe([]): unsubscribe
            return
        if listener is not None and is_async_listener(listener):
            core.subscribe(wanted, None)
            self._tasks.set_listener(listener)
        else:
            core.subscribe(wanted, listener)  # type: ignore[arg-type]
            self._tasks.set_listener(None)

    async def unsubscribe(self) -> None:
        """Leave the group, as :meth:`Consumer.unsubscribe` (callbacks on the loop,
        commit first with ``enable.auto.commit``)."""
        self._core.prepare_leave()
        deadline = self._driver.clock() + self._api_timeout_s
        self._driver.request(LeaveRequested(commit_wait_s=self._api_timeout_s / 2), 0.0)
        await self._run_until(
            lambda: self._driver.state.unjoined or self._driver.state.stopped,
            deadline,
            "leaving the group",
        )
        self._core.raise_pending()

    def assign(self, partitions: Iterable[object]) -> None:
        """Consume exactly ``partitions`` without joining the group
        (:meth:`Consumer.assign`)."""
        self._core.assign(partitions, AssignmentChange.REPLACE, "assign()")

    def unassign(self) -> None:
        """Drop the manual assignment (:meth:`Consumer.unassign`)."""
        self._core.assign((), AssignmentChange.REPLACE, "unassign()")

    def incremental_assign(self, partitions: Iterable[object]) -> None:
        """Add to the manual assignment (:meth:`Consumer.incremental_assign`)."""
        self._core.assign(partitions, AssignmentChange.ADD, "incremental_assign()")

    def incremental_unassign(self, partitions: Iterable[object]) -> None:
        """Remove from the manual assignment (:meth:`Consumer.incremental_unassign`)."""
        self._core.assign(partitions, AssignmentChange.REMOVE, "incremental_unassign()")

    # ------------------------------------------------------------------ records

    async def poll(self, timeout: float | None = None) -> Message | None:
        """The next record, or None if none arrived within ``timeout`` seconds (None
        or negative: wait until one does). Runs the rebalance work first; raises as
        :meth:`Consumer.poll`. Cancelling it loses no record and leaves the consumer
        usable (a callback it started keeps running and completes the rebalance)."""
        records = await self._consume(1, timeout)
        return records[0] if records else None

    async def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to ``num_messages`` records, waiting at most ``timeout`` seconds
        (negative: until one arrives) for the first."""
        if not isinstance(num_messages, int) or num_messages < 1:
            raise ConfigurationError(f"num_messages must be a positive int: {num_messages!r}")
        return await self._consume(num_messages, timeout)

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._records()

    async def _records(self) -> AsyncIterator[Message]:
        while not self._closed:
            record = await self.poll(None)
            if record is not None:
                yield record

    async def _consume(self, count: int, timeout: float | None) -> list[Message]:
        core = self._core
        tasks = self._tasks
        deadline = None if timeout is None or timeout < 0 else self._driver.clock() + timeout
        while True:
            call = tasks.call
            if call is not None and not call.task.done():
                # As a sync callback runs inside poll(), no record is returned while a
                # coroutine callback runs (none of partitions being revoked, above all).
                # Cancelling this await leaves the callback running.
                if deadline is not None and self._driver.clock() >= deadline:
                    return []
                remaining = None if deadline is None else deadline - self._driver.clock()
                await asyncio.wait({call.task}, timeout=remaining)
                continue
            if call is not None or tasks.has_error:
                core.run_held_work()
            now = self._driver.clock()
            if now - self._resumed_at >= _YIELD_EVERY_S:
                # Records ready make this return without suspending, so a reading loop
                # could hold the loop for as long as records keep coming: let the loop
                # run its other callbacks (the driver's heartbeats) first. Before taking
                # records, so that cancelling this await loses none.
                await asyncio.sleep(0)
                self._resumed_at = now = self._driver.clock()
            # Never blocks: librdkafka is asked with a zero timeout.
            records = core.consume(count, 0)
            if records:
                return records
            if deadline is not None and now >= deadline:
                return []
            wait = self._slice(now)
            if deadline is not None:
                wait = min(wait, deadline - now)
            await self._signal.wait(wait)
            self._resumed_at = self._driver.clock()

    def _slice(self, now: float) -> float:
        """How long to await before looking again when nothing woke us."""
        positions = self._core.positions
        if self._records_wakeup is None:
            return _POLLING_SLICE_S
        if self._core.revoke_commit is not None:
            return _REVOKE_COMMIT_SLICE_S
        wait = _IDLE_SLICE_S
        if positions.unpositioned and positions.waiting is None:
            # A failed committed-offset lookup is retried by the next call after this.
            wait = min(wait, positions.next_retry - now)
        return max(0.0, wait)

    # ------------------------------------------------------------------ offsets

    async def commit(self, offsets: object = None) -> None:
        """Commit ``offsets`` (None: the consumed position of every assigned
        partition) with the member's generation; errors as :meth:`Consumer.commit`.
        Cancelling the await does not cancel the commit (it may still be made)."""
        future = self._core.commit(offsets)
        await self._answer(future, self._api_timeout_s, "commit")

    def commit_nowait(self, offsets: object = None) -> Future[None]:
        """Start a commit and return its ``concurrent.futures.Future`` (completed on
        the loop; ``asyncio.wrap_future`` makes it awaitable)."""
        return self._core.commit(offsets)

    async def committed(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of ``partitions`` (None: nothing committed)."""
        core = self._core
        core.check_usable()
        wanted = frozenset(partitions)
        timeout_s = core.timeout_or_default(timeout)
        result = await self._answer(
            self._driver.fetch_committed(wanted, timeout_s), timeout_s, "committed()"
        )
        return {tp: (None if om is None else om.offset) for tp, om in result.items()}

    async def _answer(self, future: Future[_T], timeout_s: float, what: str) -> _T:
        """Await a driver future; cancelling the await leaves the future alone."""
        waiter = asyncio.wrap_future(future, loop=self._loop)
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), timeout_s)
        except TimeoutError:
            if self._driver.failure is not None:
                raise self._driver.failure from None
            raise RequestTimeoutError(
                f"{what}: no answer within {timeout_s:.1f}s (default.api.timeout.ms)"
            ) from None

    def position(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The offset of the next record per assigned partition (:meth:`Consumer.position`)."""
        return self._core.position(partitions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Fetch ``partition`` from ``offset`` next (:meth:`Consumer.seek`)."""
        self._core.seek(partition, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        """:meth:`Consumer.seek_to_beginning`."""
        self._core.seek_all(partitions, OFFSET_BEGINNING)

    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        """:meth:`Consumer.seek_to_end`."""
        self._core.seek_all(partitions, OFFSET_END)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop returning records of ``partitions`` until :meth:`resume`; kept across
        rebalances for partitions this member keeps, dropped with revoked ones."""
        self._core.pause(partitions, paused=True)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Undo :meth:`pause`."""
        self._core.pause(partitions, paused=False)

    def paused(self) -> frozenset[TopicPartition]:
        """The partitions paused by the application."""
        return frozenset(self._core.positions.paused)

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions currently assigned to this consumer."""
        return frozenset(self._core.positions.assigned)

    async def lag(self, partition: TopicPartition, timeout: float | None = None) -> int | None:
        """:meth:`Consumer.lag`: asks the partition leader for its end offset through
        librdkafka, whose call blocks; it runs in the loop's default executor."""
        return await self._loop.run_in_executor(None, self._core.lag, partition, timeout)

    async def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """:meth:`Consumer.get_watermark_offsets` (the broker's answer through
        librdkafka in the default executor; ``cached=True`` asks nothing)."""
        if cached:
            return self._core.watermarks(partition, timeout, True)
        return await self._loop.run_in_executor(
            None, self._core.watermarks, partition, timeout, False
        )

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """:meth:`Consumer.offsets_for_times`: per partition, the earliest offset whose
        record timestamp is at least the given one (ms since the epoch), None if there
        is none. Same errors (``ConfigurationError`` for a negative timestamp,
        ``KafkaError``, ``RequestTimeoutError``). librdkafka's ListOffsets blocks its
        caller: it runs in the loop's default executor."""
        return await self._loop.run_in_executor(
            None, self._core.offsets_for_times, timestamps, timeout
        )

    def records_lag(self) -> dict[TopicPartition, int]:
        """Per assigned partition, the records after the position as of the last fetch."""
        return self._core.records_lag()

    def metrics(self) -> dict[str, float]:
        """The ``consumer-coordinator-metrics`` group (:meth:`Consumer.metrics`)."""
        return self._core.metrics.snapshot(self._driver.clock()).to_dict()

    def fetch_metrics(self) -> dict[str, float]:
        """The ``consumer-fetch-manager-metrics`` group (:meth:`Consumer.fetch_metrics`)."""
        return self._core.fetch_metrics.snapshot(self._driver.clock()).to_dict()

    def group_metadata(self) -> ConsumerGroupMetadata:
        """:meth:`Consumer.group_metadata`."""
        return self._core.group_metadata()

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """confluent-kafka's name for :meth:`group_metadata`."""
        return self.group_metadata()

    def _rejoining(self) -> bool:
        """:meth:`Consumer._rejoining` (read by the exactly-once loop)."""
        return self._driver.state.rejoining

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        """``EAGER`` or ``COOPERATIVE`` (:attr:`Consumer.rebalance_protocol`)."""
        return self._core.rebalance_protocol

    @property
    def assignor(self) -> str | None:
        """The assignor the coordinator chose at the last join."""
        return self._driver.protocol_name

    @property
    def is_leader(self) -> bool:
        """Whether this member led its last join."""
        return self._driver.is_leader

    # ------------------------------------------------------------------ close

    async def close(self, timeout: float | None = None) -> None:
        """Leave the group and release everything, as :meth:`Consumer.close`: commit
        the consumed positions (``enable.auto.commit``), run the revocation callback,
        send LeaveGroup, stop the driver task, close the fetcher and the sockets.
        Waits at most ``timeout`` seconds (default 30) and logs what it waits for, as
        :meth:`Consumer.close` (which says how long and why). Idempotent."""
        core = self._core
        if self._closed or not core.begin_close():
            return
        self._closed = True
        timeout_s = _CLOSE_TIMEOUT_S if timeout is None else max(0.0, timeout)
        deadline = self._driver.clock() + timeout_s
        driver = self._driver
        stopped = False
        try:
            if driver.failure is None and driver.alive:
                try:
                    start, later = close_notices(timeout_s, timeout is not None)
                    log.info("%s", start)
                    if core.commits.auto_commit and driver.state.manual:
                        await self._commit_manual_before_close(timeout_s / 2)
                    driver.submit(CloseRequested(commit_wait_s=timeout_s / 2))
                    await self._run_until(lambda: driver.state.stopped, deadline, "close", later)
                except CoopConsumerError as exc:
                    log.warning("close: leaving the group did not complete: %s", exc)
        finally:
            try:
                stopped = await driver.stopped(max(0.1, deadline - self._driver.clock()))
            finally:
                wakeup = self._records_wakeup
                core.finish_close(None if wakeup is None else wakeup.close)
        error = core.take_listener_error()
        if error is not None:
            raise error
        if not stopped:
            raise CoopConsumerError(
                f"close(): the consumer's driver task did not stop within {timeout_s:g} s"
            )

    async def _commit_manual_before_close(self, timeout_s: float) -> None:
        """``Consumer._commit_manual_before_close`` with an await: the member retries
        the commit until ``timeout_s``; a failure is logged (close goes on)."""
        started = self._core.commits.start_close_commit(timeout_s)
        if started is None:
            return
        offsets, future = started
        try:
            # The member answers at its deadline at the latest; the margin covers one
            # step of the driver task.
            await self._answer(future, timeout_s + _POLLING_SLICE_S, "auto-commit at close")
        except CoopConsumerError as exc:
            self._core.commits.end_close_commit(offsets, exc)
            return
        self._core.commits.end_close_commit(offsets, None)

    async def _run_until(
        self, done: Any, deadline: float, what: str, notice: tuple[float, str] | None = None
    ) -> None:
        """Run app work (callbacks included) until ``done()``, awaiting between; log
        ``notice`` (``(after_s, message)``) at WARNING if it still runs after after_s."""
        core = self._core
        started = self._driver.clock()
        while True:
            if notice is not None and self._driver.clock() - started >= notice[0]:
                log.warning("%s", notice[1])
                notice = None
            call = self._tasks.call
            if call is not None and not call.task.done():
                remaining = deadline - self._driver.clock()
                if remaining <= 0:
                    raise RequestTimeoutError(f"{what} did not complete in time")
                await asyncio.wait({call.task}, timeout=remaining)
            core.run_app_work()
            if core.fatal is not None or done():
                return
            remaining = deadline - self._driver.clock()
            if remaining <= 0:
                raise RequestTimeoutError(f"{what} did not complete in time")
            slice_s = _REVOKE_COMMIT_SLICE_S if core.revoke_commit is not None else 0.5
            await self._signal.wait(min(remaining, slice_s))

    async def __aenter__(self) -> AsyncConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
