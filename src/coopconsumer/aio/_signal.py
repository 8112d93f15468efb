"""A wake-up flag for one waiting coroutine, with a timeout and no task per wait."""

from __future__ import annotations

import asyncio

__all__ = ["Signal"]


class Signal:
    """``set()`` wakes the coroutine in ``wait()`` (or makes the next ``wait()`` return
    at once). ``wait(timeout)`` is a future and a loop timer, cheaper than
    ``asyncio.wait_for(event.wait(), timeout)``, which starts a task each time.
    Loop thread only; one waiter at a time (a second one replaces the first, which is
    woken)."""

    __slots__ = ("_set", "_waiter", "sleeps")

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None
        self._set = False
        #: How many waits slept (tests read it to catch busy loops).
        self.sleeps = 0

    def set(self) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            # Nobody waits, or the waiter was resolved and has not resumed yet: the
            # next wait() returns at once (a wake-up is never lost).
            self._set = True
            return
        try:
            waiter.set_result(None)
        except RuntimeError:  # its loop is closed (a finalizer after the loop ended)
            self._set = True

    def clear(self) -> None:
        self._set = False

    @property
    def is_set(self) -> bool:
        return self._set

    async def wait(self, timeout_s: float | None) -> None:
        """Return when set (clearing it) or after ``timeout_s`` (None: no timeout).
        Always yields to the loop once, also when set already."""
        if self._set or (timeout_s is not None and timeout_s <= 0):
            # Nothing to wait for, but the caller loops: let the loop run others first.
            self._set = False
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        previous = self._waiter
        if previous is not None and not previous.done():
            previous.set_result(None)
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiter = waiter
        self.sleeps += 1
        timer = None if timeout_s is None else loop.call_later(timeout_s, _resolve, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if self._waiter is waiter:
                self._waiter = None


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
