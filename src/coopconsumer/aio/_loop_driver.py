"""The group member driven from an asyncio event loop: ``Driver`` without its thread.

``_io._member_driver.Driver`` already holds everything a driver does (commands, feeding the
member, executing its effects, versioned calls, answers, the coordinator connection)
and never branches on protocol state. Its thread loop is one call, ``_once``: drain
commands, feed ``PollCalled``/``Tick``, step the calls, ``client.poll(wait)``, deliver
the answers. ``LoopDriver`` runs that same step in a task on the loop, with the wire
client of ``_loop_client`` (whose ``poll`` never blocks), and awaits instead of
blocking: until the loop reports a ready socket, a command is queued, or the wait the
step computed (the member's ``next_deadline``, the client's request deadlines) runs
out. Nothing crosses threads: the member, the client and every socket are touched on
the loop thread only (docs/asyncio.md).

The methods the application side uses to *wait* (``wait_for``, ``wait_answer``,
``request``) cannot block on the loop thread; here they never wait: commands queued
before are run at once (they are what would have run next anyway) and an answer that
needs the network is an error (the async facade awaits those itself).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Final

from .._io._member_driver import APP_WORK_TYPES, Driver
from .._member import CommitDone, CommittedOffsetsDone, Effect, GroupMember
from .._member.kip848 import ConsumerGroupMember
from .._metrics import CoordinatorMetrics
from ._loop_client import LoopKafkaClient
from ._signal import Signal

__all__ = ["LoopDriver"]

log = logging.getLogger("coopconsumer.aio.driver")

#: Longest await of the loop when nothing is due (the thread driver's ``_MAX_WAIT_S``).
_MAX_WAIT_S: Final = 1.0
#: Steps in a row without sleeping before the task sleeps this long anyway: a member
#: deadline that a ``Tick`` did not move must not spin the loop (the thread driver's
#: 1 ms floor).
_MAX_STEPS_AWAKE: Final = 8
_MIN_WAIT_S: Final = 0.001
_WAKES_FACADE: Final = (*APP_WORK_TYPES, CommitDone, CommittedOffsetsDone)


class LoopDriver(Driver):
    """Runs one group member in a task of the running event loop.

    ``on_publish`` is called (on the loop) whenever the driver published new state
    or app work, so that a coroutine waiting in ``poll()`` wakes.
    """

    def __init__(
        self,
        member: GroupMember | ConsumerGroupMember,
        client: LoopKafkaClient,
        metrics: CoordinatorMetrics,
        *,
        request_timeout_ms: int,
        on_publish: Callable[[], None] = lambda: None,
        wake: Callable[[], None] | None = None,
    ) -> None:
        # ``wake`` is not used: the event loop never waits inside consume() (its
        # records wake-up is the file descriptor of _records_wakeup).
        super().__init__(member, client, metrics, request_timeout_ms=request_timeout_ms)
        self._loop_client = client
        self._on_publish = on_publish
        self._task: asyncio.Task[None] | None = None
        self._signal = Signal()
        self._progress = False
        #: Steps run (a test reads it, with ``sleeps``, to check for busy loops).
        self.steps = 0

    # ------------------------------------------------------------------ Driver's API

    @property
    def alive(self) -> bool:
        """Whether the driver task is running."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the driver task on the running loop."""
        if self._task is not None:
            raise RuntimeError("the driver is already started")
        self._task = asyncio.get_running_loop().create_task(
            self._run_on_loop(), name="coopconsumer-driver"
        )

    @property
    def sleeps(self) -> int:
        """How many times the task slept."""
        return self._signal.sleeps

    def set_on_publish(self, on_publish: Callable[[], None]) -> None:
        """Who is told when the driver published state or app work."""
        self._on_publish = on_publish

    def wake(self) -> None:
        """Run the next step soon (the client's and the selector's wake-up)."""
        self._signal.set()

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Never waits on the loop: the predicate's value now."""
        return predicate()

    def wait_answer(self, future: Future[Any], timeout_s: float, timeout_message: str) -> Any:
        """The outcome of a command that completes without the network (``request``):
        the queued commands run now, in order. A future that needs an answer from a
        broker cannot be waited for on the loop: ``RuntimeError`` (a library bug)."""
        if not future.done():
            self._drain_commands()
        if not future.done():
            if self._failure is not None:
                raise self._failure from None
            raise RuntimeError(f"a blocking wait on the event loop: {timeout_message}")
        return future.result()

    def stop(self, timeout_s: float) -> bool:
        """Ask the task to end (it closes the client); True once it has."""
        self._stopping = True
        if self._task is None:
            self._client.close()  # never started: nobody else will close it
            return True
        self.wake()
        return self._task.done()

    async def stopped(self, timeout_s: float) -> bool:
        """Stop and wait up to ``timeout_s`` for the task to end; True if it did."""
        if self.stop(timeout_s):
            return True
        assert self._task is not None
        done, _ = await asyncio.wait({self._task}, timeout=max(0.0, timeout_s))
        return bool(done)

    # ------------------------------------------------------------------ the task

    async def _run_on_loop(self) -> None:
        selector = self._loop_client.selector
        awake = 0
        try:
            while not self._stopping:
                self._progress = False
                self.steps += 1
                self._once()
                if self._stopping:
                    break
                if selector.had_events or self._progress or self._signal.is_set:
                    # What this step handled may have moved the deadlines the wait was
                    # computed from: step again before sleeping (yielding first).
                    awake += 1
                    if awake < _MAX_STEPS_AWAKE:
                        self._signal.clear()
                        await asyncio.sleep(0)
                        continue
                    self._signal.clear()
                    await self._signal.wait(_MIN_WAIT_S)
                    awake = 0
                    continue
                awake = 0
                wait = selector.requested_wait
                await self._signal.wait(_MAX_WAIT_S if wait is None else min(wait, _MAX_WAIT_S))
        except asyncio.CancelledError:
            self._stopping = True
            raise
        except BaseException as exc:  # the task must never die silently
            self._die(exc)
            self._on_publish()
        finally:
            try:
                self._client.close()
            except Exception:
                log.exception("closing the wire client failed")
            self._on_publish()

    # ------------------------------------------------------------------ hooks

    def _feed(self, event: object) -> None:
        self._progress = True
        super()._feed(event)

    def _answered(self) -> None:
        super()._answered()
        self._on_publish()

    def _execute_all(self, effects: list[Effect]) -> None:
        before = self._state
        super()._execute_all(effects)
        # Only what a waiting poll() acts on wakes it: app work, a completed commit or
        # lookup, a new state. Waking it for every input made the two tasks wake each
        # other (each poll reports itself with PollCalled).
        if self._state is not before or any(isinstance(e, _WAKES_FACADE) for e in effects):
            self._on_publish()
