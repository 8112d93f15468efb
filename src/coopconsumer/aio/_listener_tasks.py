"""Coroutine rebalance callbacks run as tasks: ``ListenerTasks``, the asyncio facade's
``ListenerGate`` on the consumer core.

``AsyncConsumer`` composes the same ``ConsumerCore`` as the sync ``Consumer`` (running
app work in order, positions, the commit before revoking, auto-commit, seeks, pauses,
lag, metrics). What differs is only what waits: a rebalance listener whose methods are
coroutines runs as a task, and the app work that follows it waits until it finished
(as the sync consumer's work waits for a synchronous callback to return); then
``ListenerDone`` goes to the member, with the sync invoker's rules (skipping, LOST
falling back to REVOKED, latency, first exception).

Imports the consumer core's gate and the listener kinds; never the sync facade.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .._consumer_core._core import ConsumerCore, GateState
from .._io._member_driver import AppWork
from .._listener import ListenerKind
from .._member import InvokeListener
from .._metrics import CoordinatorMetrics
from .._types import TopicPartition

__all__ = ["AsyncListenerCall", "ListenerTasks", "is_async_listener"]

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


class ListenerTasks:
    """The coroutine callbacks of one ``AsyncConsumer`` (see the module).

    ``on_done`` is called when a callback's task ends, so that the facade wakes."""

    def __init__(self, on_done: Callable[[], None]) -> None:
        self._core: ConsumerCore | None = None
        self._listener: object | None = None
        self._call: AsyncListenerCall | None = None
        self._after_listener: list[AppWork] = []
        self._error: Exception | None = None
        self._on_done = on_done

    def bind(self, core: ConsumerCore) -> None:
        """The core whose listener work this gate takes (built with this gate)."""
        self._core = core

    def _bound(self) -> ConsumerCore:
        assert self._core is not None, "ListenerTasks.bind() was not called"
        return self._core

    def set_listener(self, listener: object | None) -> None:
        """The listener whose callbacks run as tasks (None: the core's invoker runs
        the callbacks)."""
        self._listener = listener

    @property
    def call(self) -> AsyncListenerCall | None:
        """The coroutine callback running now, or finished and not yet released."""
        return self._call

    def running(self) -> bool:
        """Whether a coroutine callback is under way (the fetcher stays shut then)."""
        call = self._call
        return call is not None and not call.task.done()

    # ------------------------------------------------------------------ the gate

    def take(self, item: AppWork) -> bool:
        if self._call is not None:
            self._after_listener.append(item)  # queued behind the running callback
            return True
        if isinstance(item, InvokeListener) and self._listener is not None:
            self._start(item)
            return True
        return False

    def release(self) -> GateState:
        call = self._call
        if call is None:
            return GateState.FREE
        if not call.task.done():
            return GateState.RUNNING
        self._finish(call)
        return GateState.HELD if self._replay_after_listener() else GateState.FREE

    @property
    def has_error(self) -> bool:
        return self._error is not None

    def take_error(self) -> Exception | None:
        error, self._error = self._error, None
        return error

    # ------------------------------------------------------------------ callbacks

    def _replay_after_listener(self) -> bool:
        """Run the work held behind a finished callback; True if a new hold started."""
        core = self._bound()
        while self._after_listener:
            items, self._after_listener = self._after_listener, []
            for index, item in enumerate(items):
                core.do(item)
                if self._call is not None:
                    self._after_listener = items[index + 1 :] + self._after_listener
                    return True
                if core.hold(items[index + 1 :]):
                    return True
        return False

    def _start(self, item: InvokeListener) -> None:
        core = self._bound()
        kind = ListenerKind.of(item.kind)
        parts = frozenset(item.partitions)
        method = self._callback(kind)
        if method is None or (not parts and kind is not ListenerKind.ASSIGNED):
            # KIP-429: revoked and lost are only called for a non-empty set; no method,
            # nothing to run. Done at once, as the sync invoker does.
            core.listener_done(item)
            return
        task = asyncio.get_running_loop().create_task(
            self._timed(core.metrics, kind, method, parts),
            name=f"coopconsumer-{kind.method_name}",
        )
        task.add_done_callback(lambda _t: self._on_done())
        self._call = AsyncListenerCall(item, task)

    def _callback(self, kind: ListenerKind) -> Callable[[frozenset[TopicPartition]], Any] | None:
        listener = self._listener
        method = getattr(listener, kind.method_name, None)
        if kind is ListenerKind.LOST and method is None:
            method = getattr(listener, ListenerKind.REVOKED.method_name, None)
        return method if callable(method) else None

    async def _timed(
        self,
        metrics: CoordinatorMetrics,
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
            if self._error is None:
                self._error = exc
            return
        end = time.monotonic()
        metrics.listener_latency(kind, max(0.0, end - start), end)

    def _finish(self, call: AsyncListenerCall) -> None:
        self._call = None
        if call.task.cancelled():
            # The loop is shutting down (close() never cancels a callback): count it as
            # done, as a callback that raised (KIP-429).
            log.warning("rebalance listener %s was cancelled", call.item.kind)
        self._bound().listener_done(call.item)


async def _await(result: Awaitable[Any]) -> None:
    await result
