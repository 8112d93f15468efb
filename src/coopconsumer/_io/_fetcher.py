"""Record fetching through confluent-kafka (librdkafka) in manual-assignment mode.

One of the two modules of the library that import ``confluent_kafka`` (the other is
``_producer``). librdkafka never joins
the group here: it is told which partitions to fetch, from which offsets, by the group
member (``Assign``/``Unassign`` effects), and it never commits (offsets are committed by
our own wire client with the member id and generation, which librdkafka cannot supply).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import ParamSpec, TypeVar

import confluent_kafka

from .._errors import ConfigurationError, KafkaError, RequestTimeoutError
from .._protocol import error_codes
from .._types import TopicPartition
from ._failure_log import FailureLog, LibrdkafkaLog
from ._librdkafka import HandleLayoutError, consumer_queue

__all__ = [
    "LIBRDKAFKA_LOG",
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "Fetcher",
    "Record",
    "end_offsets",
]

log = logging.getLogger(__name__)

#: Where librdkafka's own log lines go unless the ``logger`` configuration key says.
LIBRDKAFKA_LOG = logging.getLogger("coopconsumer.librdkafka")

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: Logical start offsets understood by ``Fetcher.assign``.
OFFSET_BEGINNING = confluent_kafka.OFFSET_BEGINNING
OFFSET_END = confluent_kafka.OFFSET_END

#: The record type returned by ``poll``/``consume``: confluent-kafka's own ``Message``.
#: Records are handed through without copying so that consuming costs what librdkafka
#: costs (issue 4 asks for >= 0.9x a raw confluent-kafka consumer).
Record = confluent_kafka.Message

# librdkafka settings the fetcher must own: group membership and commits belong to the
# coopconsumer group member, never to librdkafka.
_FORCED: dict[str, str | int | bool] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
}

#: Default ``fetch.queue.backoff.ms`` of the fetcher (librdkafka's is 1000).
_FETCH_QUEUE_BACKOFF_MS = 50

# Error codes librdkafka reports as events that do not stop fetching: it retries by itself.
_TRANSIENT = frozenset(
    {
        confluent_kafka.KafkaError._TRANSPORT,
        confluent_kafka.KafkaError._ALL_BROKERS_DOWN,
        confluent_kafka.KafkaError._TIMED_OUT,
        confluent_kafka.KafkaError._PARTITION_EOF,
        confluent_kafka.KafkaError._MAX_POLL_EXCEEDED,
    }
)


_message_error = confluent_kafka.Message.error


def _ck(tp: TopicPartition, offset: int | None = None) -> confluent_kafka.TopicPartition:
    if offset is None:
        return confluent_kafka.TopicPartition(tp.topic, tp.partition)
    return confluent_kafka.TopicPartition(tp.topic, tp.partition, offset)


def _to_error(err: confluent_kafka.KafkaError, what: str) -> KafkaError:
    return KafkaError(
        err.code(),
        err.name(),
        retriable=bool(err.retriable()),
        description=err.str(),
        message=f"librdkafka fetcher: {what}",
    )


class Fetcher:
    """A confluent-kafka ``Consumer`` in manual-assignment mode.

    Not thread-safe: the Consumer facade calls it from the thread that calls ``poll()``
    only (the driver thread hands it Assign/Unassign work through the facade).
    """

    def __init__(
        self,
        config: Mapping[str, str | int | float | bool],
        *,
        logger: logging.Logger | None = None,
    ) -> None:
        if "bootstrap.servers" not in config:
            raise ConfigurationError("fetcher config needs bootstrap.servers")
        conf: dict[str, object] = dict(config)
        # librdkafka's log lines go to Python logging, not to stderr (a consumer that
        # cannot reach its brokers otherwise prints a "Connect ... failed" line for every
        # attempt); confluent-kafka hands them over while consume()/poll() run.
        # Each distinct failure once per reconnect.backoff.max.ms, not every attempt
        # (issue 35); the client errors of the same failure share the window.
        target = logger if logger is not None else LIBRDKAFKA_LOG
        self.failures = FailureLog.for_config(target, conf)
        conf["logger"] = LibrdkafkaLog(target, self.failures)
        conf["error_cb"] = self._on_client_error
        #: Errors librdkafka reported while reaching brokers, oldest first, for the
        #: consumer to hand to the application (``error_cb``) and clear.
        self.client_errors: list[KafkaError] = []
        # librdkafka insists on a group.id even in manual-assignment mode; it is only used
        # for librdkafka's own offset APIs, which the fetcher never calls.
        conf.setdefault("group.id", "coopconsumer-fetcher")
        # librdkafka postpones a partition's next fetch by fetch.queue.backoff.ms (1 s by
        # default) once its local queue looks full; reading a backlog at full speed on
        # Tansu, that showed as a single ~1 s gap with no records in a third of the runs
        # (librdkafka's docs advise lowering it against "~1s delays between messages").
        # The user's own setting wins.
        conf.setdefault("fetch.queue.backoff.ms", _FETCH_QUEUE_BACKOFF_MS)
        conf.update(_FORCED)
        try:
            self._consumer = confluent_kafka.Consumer(conf)
        except confluent_kafka.KafkaException as exc:
            raise ConfigurationError(f"invalid fetcher configuration: {exc}") from exc
        self._assigned: set[TopicPartition] = set()
        self._known_topics: set[str] = set()
        self._closed = False
        # librdkafka's consumer queue, to cut short a consume() another thread waits
        # in (wake); None where librdkafka cannot be reached (then nothing wakes it).
        self._wake_lock = threading.Lock()
        self._wake_lib, self._wake_queue = _wake_queue(self._consumer)

    def wake(self) -> None:
        """Make a ``consume()`` under way on another thread return now, as librdkafka
        does for its own rebalance events (``rd_kafka_queue_yield``). Thread-safe; a
        no-op once closed. A wake with nobody waiting ends the next ``consume()`` at
        once, with what it has."""
        with self._wake_lock:
            if self._wake_lib is not None and self._wake_queue is not None:
                self._wake_lib.rd_kafka_queue_yield(self._wake_queue)

    @property
    def assigned(self) -> frozenset[TopicPartition]:
        """The partitions currently being fetched."""
        return frozenset(self._assigned)

    def serve_events(self) -> None:
        """Let librdkafka hand over its queued log lines and client errors without
        fetching. ``consume`` does this itself whenever partitions are assigned."""
        if not self._assigned:  # with partitions assigned, poll() would take a record
            self._consumer.poll(0)

    def _on_client_error(self, err: confluent_kafka.KafkaError) -> None:
        # Called by confluent-kafka on the thread inside consume()/poll().
        self.client_errors.append(_to_error(err, "reaching the brokers"))

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        """Start fetching ``starts``' partitions, each from its offset.

        An offset is a committed offset (>= 0) or ``OFFSET_BEGINNING``/``OFFSET_END``.
        Partitions already assigned are left alone (their position is kept).
        """
        new = {tp: off for tp, off in starts.items() if tp not in self._assigned}
        if not new:
            return
        for topic in sorted({tp.topic for tp in new} - self._known_topics):
            self._ask_metadata(topic)
        self._call(
            "assign", self._consumer.incremental_assign, [_ck(tp, o) for tp, o in new.items()]
        )
        self._assigned.update(new)

    def _ask_metadata(self, topic: str) -> None:
        """Ask for ``topic``'s metadata without waiting for the answer. librdkafka looks
        up a topic it was never asked about only at its next topic scan (once a second),
        so a member's first partitions of a topic went unfetched for up to a second
        after the rebalance gave them to it (issue 24); the answer fills librdkafka's
        metadata cache, where the assigned partitions find their leaders."""
        self._known_topics.add(topic)
        # It times out at once, as asked: the request is on its way.
        with contextlib.suppress(confluent_kafka.KafkaException):
            self._consumer.list_topics(topic, timeout=0)

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching ``partitions``; records not yet returned for them are dropped."""
        gone = [tp for tp in partitions if tp in self._assigned]
        if not gone:
            return
        self._call("unassign", self._consumer.incremental_unassign, [_ck(tp) for tp in gone])
        self._assigned.difference_update(gone)

    def consume(self, max_records: int, timeout_s: float) -> list[Record]:
        """Up to ``max_records`` records, waiting at most ``timeout_s`` for the first."""
        if not self._assigned:
            return []
        messages = self._consumer.consume(max_records, timeout_s)
        # Rare: librdkafka reports errors as messages. The scan runs in C (map + any
        # over the method descriptor), so the common path costs no Python bytecode per
        # record; the batch is only rebuilt when an error is in it.
        if any(map(_message_error, messages)):
            return self._drop_errors(messages)
        return messages

    def _drop_errors(self, messages: list[Record]) -> list[Record]:
        kept: list[Record] = []
        for m in messages:
            err = m.error()
            if err is None:
                kept.append(m)
            elif err.code() in _TRANSIENT or not err.fatal():
                log.warning("fetcher: %s (%s [%s])", err.str(), m.topic(), m.partition())
            else:
                raise _to_error(err, f"fetching {m.topic()}-{m.partition()}")
        return kept

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The next offset to be returned per partition (negative: not fetched yet)."""
        asked = [_ck(tp) for tp in partitions if tp in self._assigned]
        if not asked:
            return {}
        got = self._call("position", self._consumer.position, asked)
        return {TopicPartition(p.topic, p.partition): p.offset for p in got}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Fetch ``tp`` from ``offset`` next."""
        self._call("seek", self._consumer.seek, _ck(tp, offset))

    def watermarks(
        self, tp: TopicPartition, timeout_s: float | None, *, cached: bool
    ) -> tuple[int, int]:
        """``(low, high)`` offsets of ``tp``: asked of the partition's leader, or, with
        ``cached``, as of the last fetch response (-1001 when not known yet)."""
        if cached:
            low, high = self._call(
                "watermarks", self._consumer.get_watermark_offsets, _ck(tp), cached=True
            )
        else:
            low, high = self._call(
                "watermarks",
                self._consumer.get_watermark_offsets,
                _ck(tp),
                timeout=-1 if timeout_s is None else timeout_s,
            )
        return int(low), int(high)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_s: float | None
    ) -> dict[TopicPartition, int | None]:
        """The earliest offset whose timestamp is at least the given one (milliseconds
        since the epoch) per partition; None when no such record exists."""
        asked = [_ck(tp, ts) for tp, ts in timestamps.items()]
        got = self._call(
            "offsets_for_times",
            self._consumer.offsets_for_times,
            asked,
            timeout=-1 if timeout_s is None else timeout_s,
        )
        result: dict[TopicPartition, int | None] = {}
        for p in got:
            if p.error is not None:
                raise _to_error(p.error, f"offsets_for_times of {p.topic}-{p.partition}")
            result[TopicPartition(p.topic, p.partition)] = p.offset if p.offset >= 0 else None
        return result

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop returning records of ``partitions`` until resumed (they stay assigned)."""
        asked = [_ck(tp) for tp in partitions if tp in self._assigned]
        if asked:
            self._call("pause", self._consumer.pause, asked)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Undo ``pause``."""
        asked = [_ck(tp) for tp in partitions if tp in self._assigned]
        if asked:
            self._call("resume", self._consumer.resume, asked)

    def close(self) -> None:
        """Stop fetching and release librdkafka's resources. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._assigned.clear()
        try:
            with self._wake_lock:
                queue, self._wake_queue = self._wake_queue, None
            if self._wake_lib is not None and queue is not None:
                self._wake_lib.rd_kafka_queue_destroy(queue)
            self._consumer.close()
        except (confluent_kafka.KafkaException, RuntimeError) as exc:
            log.warning("fetcher: close failed: %s", exc)

    @staticmethod
    def _call(what: str, fn: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return fn(*args, **kwargs)
        except confluent_kafka.KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, confluent_kafka.KafkaError):
                raise _to_error(err, what) from exc
            raise KafkaError(-1, "UNKNOWN", message=f"librdkafka fetcher: {what}: {exc}") from exc


#: How long ``end_offsets`` waits for the last record of each partition (see there).
_PROBE_TIMEOUT_S = 5.0


def end_offsets(
    config: Mapping[str, str | int | float | bool],
    topics: Iterable[str],
    *,
    timeout_s: float = 30.0,
) -> dict[TopicPartition, tuple[int, int]]:
    """The ``(low, high)`` watermarks of every partition of ``topics``, now.

    ``high`` is the end offset: the offset the next produced record will get. Our wire
    client has no ListOffsets, so a throwaway confluent-kafka consumer (``config`` is a
    librdkafka configuration, e.g. ``ConsumerConfig.fetcher_config()``) asks for the
    watermarks, then reads the last record of every non-empty partition and takes the
    high watermark of that fetch when it is larger. The second step is for Tansu 0.x:
    its ListOffsets(latest) answers the base offset of the last record batch + 1, so
    after a batch of several records it reports too small an end offset, while its
    Fetch responses carry the right high watermark. On Kafka both agree. A partition
    whose last record does not arrive within a few seconds (e.g. a transaction marker
    at the end, which is never delivered) keeps the ListOffsets answer.

    Raises ``KafkaError`` for a topic that does not exist (or another metadata error)
    and ``RequestTimeoutError`` if the broker does not answer within ``timeout_s``.
    """
    names = sorted(set(topics))
    if not names:
        raise ConfigurationError("end_offsets needs at least one topic")
    conf: dict[str, object] = dict(config)
    if "bootstrap.servers" not in conf:
        raise ConfigurationError("end_offsets config needs bootstrap.servers")
    conf["logger"] = LibrdkafkaLog(LIBRDKAFKA_LOG, FailureLog.for_config(LIBRDKAFKA_LOG, conf))
    conf.setdefault("group.id", "coopconsumer-end-offsets")
    conf.update(_FORCED)
    conf["allow.auto.create.topics"] = False
    deadline = time.monotonic() + timeout_s
    try:
        consumer = confluent_kafka.Consumer(conf)
    except confluent_kafka.KafkaException as exc:
        raise ConfigurationError(f"invalid configuration for end_offsets: {exc}") from exc
    try:
        marks: dict[TopicPartition, tuple[int, int]] = {}
        for topic in names:
            for tp in _partitions_of(consumer, topic, deadline):
                got = _watermarks(consumer, tp, deadline)
                if got is None:
                    raise RequestTimeoutError(f"no watermarks for {tp} within {timeout_s:.1f}s")
                marks[tp] = (int(got[0]), int(got[1]))
        _probe_last_records(consumer, marks, min(deadline, time.monotonic() + _PROBE_TIMEOUT_S))
        return marks
    finally:
        consumer.close()


#: Pause between two ListOffsets of a partition that answered a retriable error.
_WATERMARK_RETRY_S = 0.1


def _watermarks(
    consumer: confluent_kafka.Consumer,
    tp: TopicPartition,
    deadline: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[int, int] | None:
    """``tp``'s watermarks, asked again while the broker answers a retriable error
    until ``deadline``: Kafka lists a topic in its metadata before it has made itself
    the leader of each new partition, and answers a ListOffsets in between
    NOT_LEADER_OR_FOLLOWER (seen right after CreateTopics on one KRaft node), as Java's
    consumer retries ``endOffsets`` then."""
    while True:
        try:
            got: tuple[int, int] | None = Fetcher._call(
                f"watermarks of {tp}",
                consumer.get_watermark_offsets,
                _ck(tp),
                timeout=_remaining(deadline, f"watermarks of {tp}"),
                cached=False,
            )
        except KafkaError as exc:
            retriable = exc.retriable or (exc.code > 0 and error_codes.is_retriable(exc.code))
            if not retriable or time.monotonic() + _WATERMARK_RETRY_S >= deadline:
                raise
            log.debug("end_offsets: %s; asking again", exc)
            sleep(_WATERMARK_RETRY_S)
            continue
        return got


def _remaining(deadline: float, what: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise RequestTimeoutError(f"end_offsets: timed out before {what}")
    return left


def _partitions_of(
    consumer: confluent_kafka.Consumer, topic: str, deadline: float
) -> list[TopicPartition]:
    metadata = Fetcher._call(
        f"metadata of {topic}",
        consumer.list_topics,
        topic,
        timeout=_remaining(deadline, f"metadata of {topic}"),
    )
    found = metadata.topics.get(topic)
    if found is None:
        raise KafkaError(3, "UNKNOWN_TOPIC_OR_PARTITION", message=f"topic {topic!r} not found")
    if found.error is not None:
        raise _to_error(found.error, f"metadata of topic {topic!r}")
    if not found.partitions:
        raise KafkaError(
            3, "UNKNOWN_TOPIC_OR_PARTITION", message=f"topic {topic!r} has no partitions"
        )
    return [TopicPartition(topic, p) for p in sorted(found.partitions)]


def _probe_last_records(
    consumer: confluent_kafka.Consumer,
    marks: dict[TopicPartition, tuple[int, int]],
    deadline: float,
) -> None:
    """Raise ``marks``' high watermarks to what a fetch of each last record reports."""
    waiting = {tp for tp, (low, high) in marks.items() if high > low}
    if not waiting:
        return
    consumer.assign([_ck(tp, max(marks[tp][0], marks[tp][1] - 1)) for tp in sorted(waiting)])
    while waiting and time.monotonic() < deadline:
        for m in consumer.consume(1000, 0.1):
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            if m.error() is not None or topic is None or partition is None or offset is None:
                continue
            tp = TopicPartition(topic, partition)
            if tp not in marks:
                continue
            waiting.discard(tp)
            low, high = marks[tp]
            cached = consumer.get_watermark_offsets(_ck(tp), cached=True)
            fetched_high = int(cached[1]) if cached is not None else -1
            marks[tp] = (low, max(high, fetched_high, offset + 1))
    if waiting:
        log.info(
            "end_offsets: no last record of %d partition(s) within the probe; "
            "keeping their ListOffsets end offsets",
            len(waiting),
        )


def _wake_queue(consumer: object) -> tuple[ctypes.CDLL | None, int | None]:
    """librdkafka and the consumer queue of ``consumer``, for ``Fetcher.wake``; (None,
    None) where they cannot be reached (then nothing cuts a ``consume()`` short)."""
    try:
        reached = consumer_queue(consumer)
    except HandleLayoutError as exc:
        log.info("%s; a poll() waiting in librdkafka is not woken early", exc)
        return None, None
    return reached if reached is not None else (None, None)
