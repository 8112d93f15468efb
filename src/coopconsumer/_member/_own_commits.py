"""The commits a member decides on its own: auto-commit's timer and the retried commits
(before revoking, before leaving, at the close of a manual assignment).

Both members (classic and KIP-848) hand every input through ``OwnCommits.handle``,
which passes it to the member's transition table and then:

- arms ``auto.commit.interval.ms`` and emits ``AutoCommitDue`` when it passes (at most
  one outstanding until the next ``PollCalled``: the commit is taken by the ``poll()``
  thread, which alone knows the consumed positions);
- runs each ``RetriedCommitRequested`` as a series of ``CommitRequested`` attempts:
  a failure a retry can cure (coordinator moved or unavailable, a lost connection, a
  timeout) is retried after ``retry.backoff.ms`` while that retry still starts before
  the deadline, as Java retries the commit of ``onJoinPrepare``; never retried are
  ``RebalanceInProgressError`` (the member itself holds the rebalance up until this
  commit is done) and ``CommitFailedError`` (the generation is gone). An attempt still
  unanswered at the deadline ends the commit with ``RequestTimeoutError``; its late
  answer is dropped. Exactly one ``CommitDone(token)`` answers each request.

Pure: no sockets, threads, clocks; time is the ``now`` argument.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import attrs

from .._errors import (
    CommitFailedError,
    CoopConsumerError,
    RebalanceInProgressError,
    RequestTimeoutError,
)
from ._effects import AutoCommitDue, CommitDone, Effect, Log
from ._inputs import CommitRequested, PollCalled, RetriedCommitRequested

__all__ = ["OwnCommits", "earliest"]

#: What runs an input through the member's transition table.
Inner = Callable[[object, float], list[Effect]]


@attrs.define(kw_only=True, eq=False)
class _Retried:
    """One ``RetriedCommitRequested`` while it runs."""

    request: RetriedCommitRequested
    deadline: float
    #: The token of the attempt in flight; None while waiting to retry at ``retry_at``.
    attempt: object | None = None
    retry_at: float = 0.0
    #: The last failure logged: a retry that fails the same way is not logged again.
    logged: str | None = None


class _CommitSettings(Protocol):
    """What ``OwnCommits.for_config`` reads of either member's configuration."""

    @property
    def auto_commit_interval_ms(self) -> int | None: ...

    @property
    def retry_backoff_ms(self) -> int: ...


def earliest(*times: float | None) -> float | None:
    """The earliest of the deadlines given (None: no timer armed)."""
    return min((t for t in times if t is not None), default=None)


def _retriable(error: CoopConsumerError) -> bool:
    return error.retriable and not isinstance(error, RebalanceInProgressError | CommitFailedError)


class OwnCommits:
    """Auto-commit's timer and the retried commits of one member (see the module)."""

    def __init__(self, *, auto_commit_interval_ms: int | None, retry_backoff_ms: int) -> None:
        self._interval_s = (
            None if auto_commit_interval_ms is None else auto_commit_interval_ms / 1000.0
        )
        self._backoff_s = retry_backoff_ms / 1000.0
        # Armed by the first input (the member reads no clock of its own).
        self._next_auto_commit: float | None = None
        self._auto_commit_queued = False
        self._running: dict[object, _Retried] = {}  # by attempt token
        self._waiting: list[_Retried] = []  # between attempts
        self._dropped: set[object] = set()  # attempts given up at the deadline

    @classmethod
    def for_config(cls, config: _CommitSettings) -> OwnCommits:
        """The part of a member with ``config`` (auto-commit's timer only when its
        interval is set)."""
        return cls(
            auto_commit_interval_ms=config.auto_commit_interval_ms,
            retry_backoff_ms=config.retry_backoff_ms,
        )

    @property
    def next_deadline(self) -> float | None:
        """The earliest of auto-commit's time, a retry and a retried commit's deadline."""
        times: list[float | None] = [task.retry_at for task in self._waiting]
        times.extend(task.deadline for task in self._running.values())
        if not self._auto_commit_queued:
            times.append(self._next_auto_commit)
        return earliest(*times)

    def handle(self, event: object, now: float, inner: Inner) -> list[Effect]:
        """Run ``event`` through ``inner`` (the member's table) and this part's rules."""
        if isinstance(event, RetriedCommitRequested):
            task = _Retried(request=event, deadline=now + event.timeout_s)
            effects = self._attempt(task, now, inner)
        else:
            effects = inner(event, now)
            if isinstance(event, PollCalled):
                self._auto_commit_queued = False
        effects = self._answers(effects, now)
        effects.extend(self._due(now, inner))
        return effects

    # ------------------------------------------------------------------ internals

    def _attempt(self, task: _Retried, now: float, inner: Inner) -> list[Effect]:
        task.attempt = object()
        self._running[task.attempt] = task
        return inner(CommitRequested(offsets=task.request.offsets, token=task.attempt), now)

    def _answers(self, effects: list[Effect], now: float) -> list[Effect]:
        """Replace the answers of attempts by what they mean for their commit."""
        if not self._running and not self._dropped:
            return effects
        out: list[Effect] = []
        for effect in effects:
            if not isinstance(effect, CommitDone):
                out.append(effect)
            elif effect.token in self._dropped:
                self._dropped.discard(effect.token)
            elif effect.token in self._running:
                out.extend(self._answered(self._running.pop(effect.token), effect.error, now))
            else:
                out.append(effect)
        return out

    def _answered(
        self, task: _Retried, error: CoopConsumerError | None, now: float
    ) -> list[Effect]:
        task.attempt = None
        request = task.request
        if error is not None and _retriable(error) and now + self._backoff_s < task.deadline:
            task.retry_at = now + self._backoff_s
            self._waiting.append(task)
            # Once per distinct failure: with the coordinator gone the same failure
            # comes back every retry.backoff.ms until the deadline (issue 35).
            if str(error) == task.logged:
                return []
            task.logged = str(error)
            left = task.deadline - now
            return [
                Log(
                    level=logging.INFO,
                    message=f"{request.purpose} failed, retrying every "
                    f"{self._backoff_s * 1000:g} ms for up to {left:.1f} s more: {error}",
                )
            ]
        if error is None and task.logged is not None:
            return [
                Log(level=logging.INFO, message=f"{request.purpose} succeeded after retrying"),
                CommitDone(token=request.token),
            ]
        return [CommitDone(token=request.token, error=error)]

    def _due(self, now: float, inner: Inner) -> list[Effect]:
        """Retries, deadlines and auto-commit's timer that ``now`` has reached."""
        effects: list[Effect] = []
        for attempt, task in list(self._running.items()):
            if now >= task.deadline:
                del self._running[attempt]
                self._dropped.add(attempt)
                effects.append(
                    CommitDone(
                        token=task.request.token,
                        error=RequestTimeoutError(
                            f"no answer within {task.request.timeout_s:.1f}s "
                            f"(default.api.timeout.ms)"
                        ),
                    )
                )
        due = [task for task in self._waiting if now >= task.retry_at]
        if due:
            self._waiting = [task for task in self._waiting if now < task.retry_at]
            for task in due:
                effects.extend(self._answers(self._attempt(task, now, inner), now))
        if self._interval_s is not None:
            if self._next_auto_commit is None:
                self._next_auto_commit = now + self._interval_s
            elif now >= self._next_auto_commit and not self._auto_commit_queued:
                self._next_auto_commit = now + self._interval_s
                self._auto_commit_queued = True
                effects.append(AutoCommitDue())
        return effects
