"""``Signal``: the wake-up flag of the driver task and of ``poll()``."""

from __future__ import annotations

import asyncio

from coopconsumer.aio._signal import Signal


def test_a_set_before_the_wait_returns_at_once_and_is_consumed() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        signal = Signal()
        signal.set()
        start = loop.time()
        await signal.wait(5.0)
        assert loop.time() - start < 1.0
        assert signal.sleeps == 0
        assert not signal.is_set

    asyncio.run(main())


def test_a_set_wakes_the_waiter_and_the_timeout_ends_a_quiet_wait() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        signal = Signal()
        loop.call_later(0.05, signal.set)
        start = loop.time()
        await signal.wait(5.0)
        assert loop.time() - start < 2.0
        start = loop.time()
        await signal.wait(0.05)  # nobody sets it
        assert loop.time() - start >= 0.04
        assert signal.sleeps == 2

    asyncio.run(main())


def test_a_set_between_the_timeout_and_the_resumption_is_not_lost() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        signal = Signal()
        waiting = asyncio.ensure_future(signal.wait(5.0))
        await asyncio.sleep(0)  # now waiting
        waiter = signal._waiter
        assert waiter is not None
        # What the timeout does, then a set() before the waiting coroutine resumes.
        waiter.set_result(None)
        signal.set()
        await waiting
        assert signal.is_set  # kept for the next wait
        start = loop.time()
        await signal.wait(5.0)
        assert loop.time() - start < 1.0

    asyncio.run(main())


def test_a_zero_timeout_yields_to_the_loop() -> None:
    async def main() -> None:
        ran: list[int] = []
        asyncio.get_running_loop().call_soon(ran.append, 1)
        await Signal().wait(0)
        assert ran == [1]

    asyncio.run(main())
