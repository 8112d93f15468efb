"""What the consumer facades' arguments mean: partitions, offsets, subscriptions.

Shared by ``Consumer`` and ``AsyncConsumer`` (through ``ConsumerCore``): each argument
is checked and converted here once, and ``ConfigurationError`` says what was wrong
before anything changes. Also ``FetcherLike``, what the consumer needs of the
confluent-kafka ``Fetcher``. Imports the group member's inputs, the errors, the value types
and ``_io``'s failure log (which ``FetcherLike`` names); never ``confluent_kafka`` or a
facade.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from .._errors import ConfigurationError, KafkaError
from .._io._failure_log import FailureLog
from .._member import OffsetAndMetadata, Subscribe
from .._types import MAX_OFFSET, TopicPartition

__all__ = [
    "MIXED_MODES",
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "FetcherLike",
    "assignment",
    "commit_offsets",
    "start_offset",
    "subscription",
    "tp_of",
    "tps",
]

#: librdkafka's logical offsets (``confluent_kafka.OFFSET_BEGINNING``/``OFFSET_END``),
#: understood by ``Fetcher.assign``; a test checks they match.
OFFSET_BEGINNING: Final = -2
OFFSET_END: Final = -1
#: librdkafka's OFFSET_STORED and OFFSET_INVALID (confluent-kafka's TopicPartition
#: default): no start offset given, start at the committed offset.
NO_START_OFFSETS: Final = frozenset({-1000, -1001})
MIXED_MODES: Final = "subscription to topics, partitions and pattern are mutually exclusive"


class FetcherLike(Protocol):
    """What the consumer needs of ``Fetcher`` (tests substitute an in-memory fake)."""

    #: Errors the client reported while reaching brokers, for ``error_cb``.
    client_errors: list[KafkaError]
    #: Reports each distinct failure once per window (its log lines and its errors).
    failures: FailureLog

    @property
    def assigned(self) -> frozenset[TopicPartition]: ...

    def serve_events(self) -> None: ...

    def assign(self, starts: Mapping[TopicPartition, int]) -> None: ...

    def unassign(self, partitions: Iterable[TopicPartition]) -> None: ...

    def consume(self, max_records: int, timeout_s: float) -> list[Any]: ...

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def seek(self, tp: TopicPartition, offset: int) -> None: ...

    def pause(self, partitions: Iterable[TopicPartition]) -> None: ...

    def watermarks(
        self, tp: TopicPartition, timeout_s: float | None, *, cached: bool
    ) -> tuple[int, int]: ...

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_s: float | None
    ) -> dict[TopicPartition, int | None]: ...

    def resume(self, partitions: Iterable[TopicPartition]) -> None: ...

    def close(self) -> None: ...


def tp_of(value: object) -> TopicPartition:
    if isinstance(value, TopicPartition):
        return value
    topic = getattr(value, "topic", None)
    partition = getattr(value, "partition", None)
    if isinstance(topic, str) and isinstance(partition, int):
        return TopicPartition(topic, partition)
    raise ConfigurationError(f"expected a TopicPartition, got {value!r}")


def tps(values: Iterable[object]) -> frozenset[TopicPartition]:
    if isinstance(values, str | bytes):
        raise ConfigurationError(f"expected a collection of TopicPartition, got {values!r}")
    return frozenset(tp_of(v) for v in values)


def offset_of(value: object) -> OffsetAndMetadata:
    if isinstance(value, OffsetAndMetadata):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return OffsetAndMetadata(offset=value)  # its validator rejects what Kafka cannot store
    raise ConfigurationError(f"an offset to commit must be an int or OffsetAndMetadata: {value!r}")


def commit_offsets(offsets: object) -> dict[TopicPartition, OffsetAndMetadata]:
    if isinstance(offsets, Mapping):
        return {tp_of(tp): offset_of(om) for tp, om in offsets.items()}
    if isinstance(offsets, Iterable) and not isinstance(offsets, str | bytes):
        # confluent-kafka style: TopicPartition objects carrying .offset (and .metadata)
        result: dict[TopicPartition, OffsetAndMetadata] = {}
        for item in offsets:
            offset = getattr(item, "offset", None)
            if (
                not isinstance(offset, int)
                or isinstance(offset, bool)
                or not 0 <= offset <= MAX_OFFSET
            ):
                raise ConfigurationError(f"{item!r} carries no valid offset to commit")
            metadata = getattr(item, "metadata", None)
            leader_epoch = getattr(item, "leader_epoch", None)
            result[tp_of(item)] = OffsetAndMetadata(
                offset=offset,
                metadata=metadata if isinstance(metadata, str) else "",
                leader_epoch=leader_epoch if isinstance(leader_epoch, int) else -1,
            )
        return result
    raise ConfigurationError(
        f"offsets must be a mapping of TopicPartition to offsets or a list, not {offsets!r}"
    )


def subscription(topics: object, *, broker_regex: bool = False) -> Subscribe | None:
    """The member input for ``subscribe(topics)``; None for an empty list (Java's
    ``subscribe([])`` is ``unsubscribe()``). With ``broker_regex`` (KIP-848) a ``^``
    string goes to the coordinator as it is, as librdkafka sends it."""
    if isinstance(topics, re.Pattern):
        return Subscribe(pattern=topics)
    if isinstance(topics, str):
        if topics.startswith("^") and broker_regex:
            return Subscribe(regex=topics)
        if topics.startswith("^"):  # librdkafka's convention for a regex subscription
            try:
                # librdkafka searches (the leading ^ anchors the start only); the
                # member matches whole names (Java), so allow any rest of the name.
                return Subscribe(pattern=re.compile(f"(?:{topics}).*", re.DOTALL))
            except re.error as exc:
                raise ConfigurationError(f"invalid topic pattern {topics!r}: {exc}") from exc
        return Subscribe(topics=frozenset({topics}))
    if isinstance(topics, Iterable):
        names = list(topics)
        for name in names:
            if not isinstance(name, str) or not name:
                raise ConfigurationError(f"topic names must be non-empty strings: {name!r}")
            if name.startswith("^"):
                raise ConfigurationError(
                    f"{name!r} is a pattern: pass it alone (or compiled), not in a list"
                )
        return Subscribe(topics=frozenset(names)) if names else None
    raise ConfigurationError(f"subscribe() takes a list of topics or a pattern, not {topics!r}")


def assignment(partitions: object) -> tuple[frozenset[TopicPartition], dict[TopicPartition, int]]:
    """The partitions of an ``assign()``-style argument and the start offsets some of
    them carry (confluent-kafka's ``TopicPartition(topic, partition, offset)``)."""
    if isinstance(partitions, str | bytes) or not isinstance(partitions, Iterable):
        raise ConfigurationError(f"expected a list of TopicPartition, got {partitions!r}")
    found: set[TopicPartition] = set()
    starts: dict[TopicPartition, int] = {}
    for item in partitions:
        tp = tp_of(item)
        if tp in found:
            raise ConfigurationError(f"{tp} is listed twice")
        found.add(tp)
        offset = getattr(item, "offset", None)
        if offset is None or offset in NO_START_OFFSETS:
            continue
        starts[tp] = start_offset(tp, offset, "start offset")
    return frozenset(found), starts


def start_offset(tp: TopicPartition, offset: object, what: str) -> int:
    """``offset`` if fetching may start there: an offset from 0 to ``MAX_OFFSET``,
    ``OFFSET_BEGINNING`` or ``OFFSET_END``. Anything else raises ``ConfigurationError``
    before librdkafka sees it: it refuses a negative offset only once the partition was
    restarted (``_INVALID_ARG``) and takes one it cannot fetch from silently, after
    which the partition never delivers again (Java's ``seek`` rejects a negative offset
    too: "seek offset must not be a negative number")."""
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise ConfigurationError(f"the {what} of {tp} must be an int: {offset!r}")
    if offset in (OFFSET_BEGINNING, OFFSET_END) or 0 <= offset <= MAX_OFFSET:
        return offset
    raise ConfigurationError(
        f"invalid {what} {offset} for {tp}: give an offset from 0 to {MAX_OFFSET}, "
        f"OFFSET_BEGINNING (-2) or OFFSET_END (-1); nothing changed"
    )
