"""Repeated failures logged once per window: librdkafka's log lines and client errors.

A consumer whose broker cannot be reached hears of it about every 50 ms, twice: as
librdkafka's ``FAIL`` log line and as the ``_TRANSPORT`` client error with the same
text (issue 35: 117 lines in 3 s where raw confluent-kafka prints 59). Both go through
one :class:`FailureLog` per librdkafka client, keyed by the failure's text without
what changes between attempts (the thread, the time spent, the state), so a failure
is reported once per window (``reconnect.backoff.max.ms``: the longest librdkafka
waits between two attempts), the next report says how often it recurred meanwhile,
and one line says when it stopped recurring.

Blocking-layer helper: reads the clock; imports nothing of confluent-kafka.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Final

import attrs

__all__ = ["FailureLog", "LibrdkafkaLog", "backoff_window_s", "failure_key"]

#: What differs between two reports of one failure in librdkafka's text.
_VOLATILE: Final = (
    re.compile(r"^\[thrd:[^\]]*\]:\s*"),  # the thread that logged it
    # How long the attempt took, and librdkafka's own count of what it suppressed.
    re.compile(r"\s*\(after \d+ms in state [A-Z_]+(?:, \d+ identical error\(s\) suppressed)?\)"),
    re.compile(r"\s*\(\d+ identical error\(s\) suppressed\)"),
)
#: librdkafka's default ``reconnect.backoff.max.ms``.
_RECONNECT_BACKOFF_MAX_MS: Final = 10_000
#: The shortest window, whatever the backoff settings.
_MIN_WINDOW_S: Final = 1.0


def backoff_window_s(conf: Mapping[str, object]) -> float:
    """The longest librdkafka waits between two connection attempts
    (``reconnect.backoff.max.ms``, 10 s by default): the window in which a repeated
    failure is reported once."""
    value = conf.get("reconnect.backoff.max.ms", _RECONNECT_BACKOFF_MAX_MS)
    try:
        return int(str(value)) / 1000.0
    except ValueError:
        return _RECONNECT_BACKOFF_MAX_MS / 1000.0


def failure_key(text: str) -> str:
    """``text`` without the parts that change from one attempt to the next."""
    for pattern in _VOLATILE:
        text = pattern.sub("", text)
    return text.strip()


@attrs.define
class _Seen:
    level: int
    reported_at: float
    last_at: float
    total: int = 1
    since_report: int = 0


class FailureLog:
    """Reports each distinct failure once per ``window_s`` to ``logger``.

    :meth:`admit` says whether a failure is reported now (its first occurrence, or the
    first one after a window); :meth:`settle` logs, once, the failures that have not
    recurred for a whole window. Not thread-safe: librdkafka's callbacks and
    ``poll()`` run on the application's thread.
    """

    def __init__(
        self,
        logger: logging.Logger,
        window_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self.window_s = max(_MIN_WINDOW_S, window_s)
        self._clock = clock
        self._seen: dict[str, _Seen] = {}
        #: Occurrences not reported (kept for tests and the metrics).
        self.suppressed = 0

    def admit(self, key: str, level: int) -> str | None:
        """None: do not report this occurrence. Otherwise the suffix to append to the
        report ("" the first time, the count of unreported repeats afterwards)."""
        now = self._clock()
        seen = self._seen.get(key)
        if seen is None:
            self._seen[key] = _Seen(level=level, reported_at=now, last_at=now)
            return ""
        seen.total += 1
        seen.last_at = now
        if now - seen.reported_at < self.window_s:
            seen.since_report += 1
            self.suppressed += 1
            return None
        repeats, seen.since_report = seen.since_report, 0
        elapsed, seen.reported_at = now - seen.reported_at, now
        if not repeats:
            return ""
        return f" (reported {repeats} more time(s) in the last {elapsed:.0f} s)"

    def settle(self) -> None:
        """Log once each failure that has not recurred for a whole window."""
        if not self._seen:
            return
        now = self._clock()
        for key, seen in list(self._seen.items()):
            if now - seen.last_at >= self.window_s:
                del self._seen[key]
                if seen.total > 1:
                    self._logger.log(
                        min(seen.level, logging.WARNING),
                        "no longer failing (not seen for %.0f s, %d time(s) in all): %s",
                        now - seen.last_at,
                        seen.total,
                        key,
                    )

    def report(self, level: int, text: str) -> None:
        """Log ``text`` at ``level`` unless the same failure was reported this window."""
        suffix = self.admit(failure_key(text), level)
        if suffix is not None:
            self._logger.log(level, "%s%s", text, suffix)


class LibrdkafkaLog:
    """What librdkafka is given as its ``logger``: confluent-kafka calls
    ``log(level, "%s [%s] %s", facility, client_name, text)``. Lines of level WARNING
    and above go through ``failures`` (repeats within a window dropped); the others
    pass as they are."""

    def __init__(self, target: logging.Logger, failures: FailureLog) -> None:
        self._target = target
        self._failures = failures

    def log(self, level: int, msg: str, *args: object) -> None:
        if level < logging.WARNING or len(args) != 3:
            self._target.log(level, msg, *args)
            return
        facility, name, text = (str(a) for a in args)
        # Keyed by the text alone: the client error librdkafka reports for the same
        # failure (``_TRANSPORT``, same text) is then the same failure.
        suffix = self._failures.admit(failure_key(text), level)
        if suffix is not None:
            self._target.log(level, "%s [%s] %s%s", facility, name, text, suffix)
