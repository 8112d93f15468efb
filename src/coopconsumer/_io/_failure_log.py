"""Repeated failures logged once per window: librdkafka's log lines and client errors.

A consumer whose broker cannot be reached hears of it about every 50 ms, twice: as
librdkafka's ``FAIL`` log line and as the ``_TRANSPORT`` client error with the same
text (issue 35: 117 lines in 3 s where raw confluent-kafka prints 59). Both go through
one :class:`FailureLog` per librdkafka client, keyed by the failure's text without
what changes between attempts (the thread, the time spent, the state), so a failure
is reported once per window (``reconnect.backoff.max.ms``: the longest librdkafka
waits between two attempts), the next report says how often it recurred meanwhile,
and one line says when it stopped. That line is said on a positive sign where the
client has one (:meth:`FailureLog.recovered`: a record delivered or fetched, a
transaction committed), else after two windows of silence (:meth:`FailureLog.settle`):
librdkafka's backoff jitter lets one attempt come up to 1.5 windows after the last.

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
#: Windows of silence before a failure counts as over without a positive sign:
#: librdkafka adds up to +50 % jitter to its reconnect backoff.
_SILENT_WINDOWS: Final = 2.0
#: librdkafka's "M/N brokers are down" (``_ALL_BROKERS_DOWN``).
_BROKERS_DOWN: Final = re.compile(r"\b(\d+)/(\d+) brokers are down")
#: A connection-level failure to one broker, in librdkafka's words.
_TRANSPORT: Final = re.compile(
    r"Connect to |Disconnected|Receive failed|Send failed|SSL handshake failed|"
    r"Failed to resolve"
)
#: The broker librdkafka names after a ``bootstrap.servers`` entry ("host:port/bootstrap",
#: with a "proto://" prefix under TLS or SASL), at the start of its failure texts.
_BOOTSTRAP_BROKER: Final = re.compile(r"^(?:[a-z_]+://)?[^\s/]+/bootstrap:")


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
    first one after a window); :meth:`recovered` logs, once, the failures a positive
    sign proves over; :meth:`settle` those that have not recurred for two windows.
    Not thread-safe: librdkafka's callbacks and ``poll()`` run on the application's
    thread.
    """

    def __init__(
        self,
        logger: logging.Logger,
        window_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        bootstrap_servers: str = "",
    ) -> None:
        self._logger = logger
        self.window_s = max(_MIN_WINDOW_S, window_s)
        self._clock = clock
        #: One address in ``bootstrap.servers``: any answer then proves it was reached,
        #: since a client learns of every other broker through it.
        self._sole_bootstrap = len([a for a in bootstrap_servers.split(",") if a.strip()]) == 1
        self._seen: dict[str, _Seen] = {}
        #: Occurrences not reported (kept for tests and the metrics).
        self.suppressed = 0

    @classmethod
    def for_config(cls, logger: logging.Logger, conf: Mapping[str, object]) -> FailureLog:
        """The failure log of a librdkafka client configured with ``conf``: its window
        from ``reconnect.backoff.max.ms``, its bootstrap list from ``bootstrap.servers``."""
        return cls(
            logger,
            backoff_window_s(conf),
            bootstrap_servers=str(conf.get("bootstrap.servers", "")),
        )

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

    def note_client_error(self, text: str) -> None:
        """Count a "brokers are down" client error reported elsewhere (handed to a
        callback, or logged at debug level), so :meth:`recovered` knows the cluster's
        size ("1/1 brokers are down": one broker). Other client errors repeat the text
        of a librdkafka log line, whose own report this must not take the place of."""
        if _BROKERS_DOWN.search(text):
            self.admit(failure_key(text), logging.DEBUG)

    def settle(self) -> None:
        """Log once each failure that has not recurred for two windows (librdkafka's
        longest gap between two attempts is 1.5 windows)."""
        if not self._seen:
            return
        now = self._clock()
        for key, seen in list(self._seen.items()):
            silent_s = now - seen.last_at
            if silent_s >= _SILENT_WINDOWS * self.window_s:
                self._over(key, f"not seen for {silent_s:.0f} s")

    def recovered(self, sign: str) -> None:
        """A broker answered (``sign`` says how: "a record was delivered"). Logs once
        that the failures this proves over have stopped: "brokers are down"; when the
        cluster was reported as one broker ("1/1 brokers are down"), that broker's
        connection failures; and the connection failures of the sole
        ``bootstrap.servers`` address, which the client must have reached to learn of
        the broker that answered (librdkafka may report the cluster as "0/2 brokers are
        down" once it knows the broker behind the address, or not at all). Others wait
        for :meth:`settle`. Cheap when nothing failed: callers may call it for every
        answer."""
        if not self._seen:
            return
        downs = [_BROKERS_DOWN.search(key) for key in self._seen]
        sole_broker = any(m is not None for m in downs) and all(
            m.group(2) == "1" for m in downs if m is not None
        )
        for key in list(self._seen):
            transport = _TRANSPORT.search(key) is not None
            if (
                _BROKERS_DOWN.search(key)
                or (sole_broker and transport)
                or (self._sole_bootstrap and transport and _BOOTSTRAP_BROKER.match(key))
            ):
                self._over(key, sign)

    def _over(self, key: str, why: str) -> None:
        seen = self._seen.pop(key)
        if seen.total > 1:
            self._logger.log(
                min(seen.level, logging.WARNING),
                "no longer failing (%s, %d time(s) in all): %s",
                why,
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
