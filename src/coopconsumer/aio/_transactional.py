"""``AsyncTransactionalProcessor``: the exactly-once loop for asyncio (KIP-447).

The loop's decisions are ``coopconsumer._transactional.TransactionLoop``, the core the
sync ``TransactionalProcessor`` drives too; this module only performs its requests
(docs/exactly-once.md, "One core, two loops"; docs/asyncio.md, "Exactly-once"):

* ``Consume``: ``await AsyncConsumer.consume``, then the processor's own rebalance
  callback, if one is running, is awaited to its end, so a callback's steps never run
  beside the step that consumed (the sync loop has this for free: its callbacks run
  inside ``consume()``);
* ``Process``: the process function, on the loop; a coroutine it returns is awaited;
* ``ProducerCall``/``CheckBrokers``: confluent-kafka's transactional calls block until
  the transaction coordinator answers, so they run on one worker thread of the
  processor's own executor, one at a time, while the loop goes on (heartbeats, other
  tasks). ``produce`` stays on the loop: librdkafka queues the record and returns.

Cancellation: a cancelled ``step()`` never leaves a producer call half-seen. A call in
flight on the worker thread is waited for and its outcome given to the core; the
cancellation then enters the core at its next request (a cancelled process function
aborts the transaction and rewinds, as an exception does), and ``CancelledError`` is
raised once the core's step ended.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._errors import CoopConsumerError
from .._transaction_loop import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_COMMIT_INTERVAL_MS,
    DEFAULT_MAX_RECORDS_PER_TRANSACTION,
    CheckBrokers,
    Consume,
    Process,
    ProducerCall,
    Steps,
    TransactionalOutput,
    TransactionStats,
)
from .._transactional import ProcessorBase, perform_blocking
from .._types import ConsumerGroupMetadata, TopicPartition

if TYPE_CHECKING:
    from .._io._fetcher import Record as Message

__all__ = ["AsyncProcessFunction", "AsyncTransactionalProcessor"]

_R = TypeVar("_R")

#: ``process(records, output)``: a plain function or an ``async def``; called on the
#: loop with each batch, writing its results through ``output``.
AsyncProcessFunction = Callable[["list[Message]", TransactionalOutput], Awaitable[None] | None]


class _AsyncConsumerLike(Protocol):
    """What the processor needs of ``AsyncConsumer`` (tests substitute a fake)."""

    def subscribe(self, topics: list[str], listener: object) -> None: ...

    async def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]: ...

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    def assignment(self) -> frozenset[TopicPartition]: ...

    def group_metadata(self) -> ConsumerGroupMetadata: ...

    def metrics(self) -> dict[str, float]: ...

    async def close(self, timeout: float | None = None) -> None: ...


async def _call(method: Callable[[frozenset[TopicPartition]], Any], parts: Any) -> None:
    result = method(parts)
    if inspect.isawaitable(result):
        await result


class _AsyncListener:
    """Settles the open transaction before the application's listener (plain or
    ``async def``) runs; every callback is a coroutine, run by ``AsyncConsumer`` as a
    task that the processor's consume awaits."""

    def __init__(self, processor: AsyncTransactionalProcessor, user: object | None) -> None:
        self._processor = processor
        self._user = user

    async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        processor = self._processor
        with processor._callback():
            await processor._drive(processor._loop.on_revoked(partitions))
            await self._user_call("on_partitions_revoked", partitions)

    async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        processor = self._processor
        with processor._callback():
            await processor._drive(processor._loop.on_assigned())
            await self._user_call("on_partitions_assigned", partitions)

    async def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        processor = self._processor
        with processor._callback():
            await processor._drive(processor._loop.on_lost(partitions))
            if getattr(self._user, "on_partitions_lost", None) is None:
                await self._user_call("on_partitions_revoked", partitions)
            else:
                await self._user_call("on_partitions_lost", partitions)

    async def _user_call(self, name: str, partitions: frozenset[TopicPartition]) -> None:
        method = getattr(self._user, name, None)
        if method is not None:
            await _call(method, partitions)


class _CallbackScope:
    def __init__(self, processor: AsyncTransactionalProcessor) -> None:
        self._processor = processor

    def __enter__(self) -> None:
        self._processor._callback_task = asyncio.current_task()

    def __exit__(self, *exc_info: object) -> None:
        self._processor._callback_task = None


class AsyncTransactionalProcessor(ProcessorBase):
    """:class:`coopconsumer.TransactionalProcessor` for asyncio: exactly-once Kafka ->
    Python -> Kafka across cooperative rebalances, with an
    :class:`~coopconsumer.aio.AsyncConsumer` as the group member.

    The arguments, the configuration rules and the guarantee are the sync processor's
    (docs/exactly-once.md), and so is every decision: both drive one core. ``process``
    may be a plain function or an ``async def`` (awaited); ``listener``'s callbacks may
    be either too, and run after the processor settled the open transaction (committed
    it when its partitions are revoked, aborted it when they are lost).

    Build it inside a running event loop; :meth:`run` or the first :meth:`step`
    initializes the producer and checks the brokers. The producer's blocking calls
    (init, begin, send offsets, commit, abort, close) run on a worker thread of the
    processor, one at a time; nothing else leaves the loop. Use from one task;
    :meth:`stop` may be called from any thread.
    """

    _consumer: _AsyncConsumerLike
    _process_fn: AsyncProcessFunction

    def __init__(
        self,
        consumer_config: Mapping[str, object],
        producer_config: Mapping[str, object],
        process: AsyncProcessFunction,
        *,
        topics: Iterable[str] | str,
        listener: object | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS,
        max_records_per_transaction: int = DEFAULT_MAX_RECORDS_PER_TRANSACTION,
    ) -> None:
        self._open(
            consumer_config,
            producer_config,
            process,
            topics=topics,
            listener=listener,
            batch_size=batch_size,
            commit_interval_ms=commit_interval_ms,
            max_records_per_transaction=max_records_per_transaction,
        )

    def _consumer_type(self, config: Mapping[str, object]) -> Any:
        from ._consumer import AsyncConsumer

        return AsyncConsumer(config)

    def _start_io(self, user: object | None) -> _AsyncListener:
        self._callback_task: asyncio.Task[Any] | None = None
        # One thread: the producer's transactional calls are made one at a time, in the
        # core's order.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coopconsumer-txn")
        return _AsyncListener(self, user)

    def _abandon(self) -> None:
        self._executor.shutdown(wait=False)

    # ------------------------------------------------------------------ driving the core

    def _callback(self) -> _CallbackScope:
        return _CallbackScope(self)

    async def _drive(self, steps: Steps[_R]) -> _R:
        """Perform the core's requests until its step returns (see the module for
        what cancellation does)."""
        value: Any = None
        error: BaseException | None = None
        cancelled: asyncio.CancelledError | None = None  # raised when the step ends
        deliver = False  # throw ``cancelled`` into the core at its next request
        while True:
            try:
                request = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                if cancelled is not None:
                    raise cancelled from None
                result: _R = done.value
                return result
            value = error = None
            if deliver:
                deliver = False
                error = cancelled
                continue
            if isinstance(request, (ProducerCall, CheckBrokers)):
                value, error, cancel = await self._blocking(request)
                if cancel is not None and cancelled is None:
                    cancelled, deliver = cancel, True
                continue
            try:
                if isinstance(request, Consume):
                    value = await self._consume(request)
                else:
                    await self._process(request)
            except asyncio.CancelledError as exc:
                if cancelled is None:
                    cancelled = exc
                    error = exc
                # else: cleanup after a delivered cancellation was cancelled again; it
                # goes on (the cancellation is raised at the end).
            except BaseException as exc:
                error = exc

    async def _blocking(
        self, request: ProducerCall | CheckBrokers
    ) -> tuple[Any, BaseException | None, asyncio.CancelledError | None]:
        """Run a blocking request on the worker thread and wait for its outcome, even
        when cancelled: (result, its exception, the cancellation that arrived)."""
        future = asyncio.get_running_loop().run_in_executor(
            self._executor, perform_blocking, request, self._producer, self._broker_check
        )
        cancel: asyncio.CancelledError | None = None
        while not future.done():
            try:
                await asyncio.wait({future})
            except asyncio.CancelledError as exc:
                cancel = cancel or exc
        error = future.exception()
        return (None if error is not None else future.result()), error, cancel

    async def _consume(self, request: Consume) -> list[Message]:
        records = await self._consumer.consume(request.count, request.timeout)
        # A callback of this processor still running (consume() gave up waiting for it
        # at its timeout): its steps finish before this step's go on.
        task = self._callback_task
        while task is not None and not task.done() and task is not asyncio.current_task():
            await asyncio.wait({task})
            task = self._callback_task
        return records

    async def _process(self, request: Process) -> None:
        result = self._process_fn(request.records, self._loop.output)
        if result is not None and inspect.isawaitable(result):
            await result

    # ------------------------------------------------------------------ public

    async def run(self, *, poll_timeout: float = 0.5) -> TransactionStats:
        """:meth:`TransactionalProcessor.run`: process until :meth:`stop`, then commit
        the open transaction and return; raises as it does."""
        stopping = self._loop.stopping
        stopping.clear()
        while not stopping.is_set():
            await self.step(poll_timeout)
        await self._drive(self._loop.finish("stop"))
        return self.stats()

    async def step(self, timeout: float = 0.5) -> int:
        """:meth:`TransactionalProcessor.step`: one turn of the loop; returns the
        number of records processed. Cancelling it leaves the processor usable: a
        batch whose processing was cancelled is aborted and replayed."""
        if self._closed:
            raise CoopConsumerError("the processor is closed")
        return await self._drive(self._loop.step(timeout))

    async def close(self, timeout: float | None = None) -> None:
        """:meth:`TransactionalProcessor.close`: commit the open transaction (abort it
        if that fails, or after a fatal error), leave the group, close the producer.
        Idempotent; closed when this returns or raises."""
        if self._closed:
            return
        try:
            task = self._callback_task
            if task is not None and not task.done():
                await asyncio.wait({task})
            await self._drive(self._loop.close())
        finally:
            self._closed = True
            try:
                await self._consumer.close(timeout)
            finally:
                try:
                    await asyncio.get_running_loop().run_in_executor(
                        self._executor, self._producer.close
                    )
                finally:
                    self._executor.shutdown(wait=False)

    async def __aenter__(self) -> AsyncTransactionalProcessor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
