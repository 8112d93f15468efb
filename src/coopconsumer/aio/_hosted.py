"""The sync ``Consumer``'s logic hosted on an event loop (``AsyncConsumer`` wraps it).

Everything the consumer decides (running app work in order, positions, the commit
before revoking, auto-commit, seeks, pauses, lag, metrics) is the sync ``Consumer``'s
own code, inherited unchanged. What differs is only what waits:

* the driver is ``LoopDriver`` (a task on the loop, no thread);
* ``poll``/``consume`` are called with timeout 0 (they never block: librdkafka is
  asked with a zero timeout, the driver's ``wait_for`` answers at once) and the
  facade awaits the wake-ups between calls;
* a rebalance listener whose methods are coroutines runs as a task: the app work that
  follows it waits until it finished (as the sync consumer's work waits for a
  synchronous callback to return), then ``ListenerDone`` goes to the member, with the
  sync invoker's rules (skipping, LOST falling back to REVOKED, latency, first
  exception).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .._consumer import Consumer
from .._coordinator import InvokeListener, ListenerDone
from .._io._member_driver import AppWork
from .._listener import ListenerKind
from .._types import TopicPartition
from ._loop_driver import LoopDriver

__all__ = ["AsyncListenerCall", "HostedConsumer", "is_async_listener"]

log = logging.getLogger("coopconsumer.aio")

_METHODS = tuple(kind.method_name for kind in ListenerKind)


def is_async_listener(listener: object) -> bool:
    """Whether any of ``listener``'s callbacks is an ``async def``."""
    return any(inspect.iscoroutinefunction(getattr(listener, name, None)) for name in _METHODS)


class AsyncListenerCall:
    """One coroutine callback running as a task, and the work queued behind it."""

    __slots__ = ("item", "task")

    def __init__(self, item: InvokeListener, task: asyncio.Task[None]) -> None:
        self.item = item
        self.task = task


class HostedConsumer(Consumer):
    """``Consumer`` with the loop driver and coroutine listeners (see the module)."""

    _driver_type = LoopDriver

    def _init_async(self, on_error: Callable[[], None]) -> None:
        self._async_listener: object | None = None
        self._listener_call: AsyncListenerCall | None = None
        self._after_listener: list[AppWork] = []
        self._listener_error: Exception | None = None
        self._wake_facade = on_error

    @property
    def listener_call(self) -> AsyncListenerCall | None:
        """The coroutine callback running now, if any."""
        return self._listener_call

    def callback_running(self) -> bool:
        """Whether a coroutine callback is under way (the fetcher stays shut then)."""
        call = self._listener_call
        return call is not None and not call.task.done()

    def set_async_listener(self, listener: object | None) -> None:
        self._async_listener = listener

    # ------------------------------------------------------------------ app work

    def run_app_work(self) -> None:
        """Run the queued app work now (after a coroutine callback finished, say), and
        raise what it left to raise (``poll()``'s rules)."""
        self._check_usable()
        self._run_app_work()
        if self._fatal is not None or self._errors or self._listener_error is not None:
            self._raise_pending()

    def _run_app_work(self) -> None:
        call = self._listener_call
        if call is not None:
            if not call.task.done():
                return  # what follows the callback waits for it
            self._finish_listener(call)
            if self._replay_after_listener():
                self._flush_starts()  # what the replayed work positioned
                return
        super()._run_app_work()

    def _do(self, item: AppWork) -> None:
        if self._listener_call is not None:
            self._after_listener.append(item)  # queued behind the running callback
        elif isinstance(item, InvokeListener) and self._async_listener is not None:
            self._start_listener(item)
        else:
            super()._do(item)

    def _replay_after_listener(self) -> bool:
        """Run the work held behind a finished callback; True if a new hold started."""
        while self._after_listener:
            items, self._after_listener = self._after_listener, []
            for index, item in enumerate(items):
                self._do(item)
                if self._listener_call is not None:
                    self._after_listener = items[index + 1 :] + self._after_listener
                    return True
                if self._revoke_commit is not None:
                    self._held_work = items[index + 1 :] + self._held_work
                    return True
        return False

    def _start_listener(self, item: InvokeListener) -> None:
        kind = ListenerKind.of(item.kind)
        parts = frozenset(item.partitions)
        method = self._callback(kind)
        if method is None or (not parts and kind is not ListenerKind.ASSIGNED):
            # KIP-429: revoked and lost are only called for a non-empty set; no method,
            # nothing to run. Done at once, as the sync invoker does.
            self._listener_done(item)
            return
        task = asyncio.get_running_loop().create_task(
            self._timed(kind, method, parts), name=f"coopconsumer-{kind.method_name}"
        )
        task.add_done_callback(lambda _t: self._wake_facade())
        self._listener_call = AsyncListenerCall(item, task)

    def _callback(self, kind: ListenerKind) -> Callable[[frozenset[TopicPartition]], Any] | None:
        listener = self._async_listener
        method = getattr(listener, kind.method_name, None)
        if kind is ListenerKind.LOST and method is None:
            method = getattr(listener, ListenerKind.REVOKED.method_name, None)
        return method if callable(method) else None

    async def _timed(
        self,
        kind: ListenerKind,
        method: Callable[[frozenset[TopicPartition]], Any],
        parts: frozenset[TopicPartition],
    ) -> None:
        start = time.monotonic()
        try:
            result = method(parts)
            if inspect.isawaitable(result):
                await _await(result)
        except Exception as exc:
            log.error(
                "Rebalance listener %s raised; continuing the rebalance",
                kind.method_name,
                exc_info=exc,
            )
            if self._listener_error is None:
                self._listener_error = exc
            return
        end = time.monotonic()
        self._metrics.listener_latency(kind, max(0.0, end - start), end)

    def _finish_listener(self, call: AsyncListenerCall) -> None:
        self._listener_call = None
        if call.task.cancelled():
            # The loop is shutting down (close() never cancels a callback): count it as
            # done, as a callback that raised (KIP-429).
            log.warning("rebalance listener %s was cancelled", call.item.kind)
        self._listener_done(call.item)

    def _listener_done(self, item: InvokeListener) -> None:
        if ListenerKind.of(item.kind) is ListenerKind.REVOKED:
            self._drop(item.partitions)  # as the sync consumer, right after the callback
        if self._driver.failure is None:
            self._driver.submit(ListenerDone(invocation_id=item.invocation_id, kind=item.kind))

    # ------------------------------------------------------------------ errors

    @property
    def has_listener_error(self) -> bool:
        return self._listener_error is not None

    def _raise_pending(self) -> None:
        if self._fatal is None and self._listener_error is not None:
            error, self._listener_error = self._listener_error, None
            raise error
        super()._raise_pending()


async def _await(result: Awaitable[Any]) -> None:
    await result
