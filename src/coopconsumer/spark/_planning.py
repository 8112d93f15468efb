"""Offset planning for the ``coopconsumer`` Spark data source: pure functions.

What Spark's own Kafka source does on the driver (``KafkaMicroBatchStream``,
``KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets``,
``KafkaOffsetRangeCalculator``), rewritten for this source and kept free of I/O so that
tests can walk through it: the source offset as JSON, the read limits
(``maxOffsetsPerTrigger`` spread over partitions in proportion to their backlog,
``minOffsetsPerTrigger`` with ``maxTriggerDelay``), the ranges of one batch (partitions
added since the start begin at their earliest offset, partitions gone or moved
backwards are data loss) and their split into at least ``minPartitions`` tasks.
Offsets are *next* offsets, like a consumer's position: ``{"orders": {"0": 120}}``
means partition 0 is read up to offset 119. Imports nothing that does I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final

import attrs

from .._errors import ConfigurationError
from .._types import TopicPartition

__all__ = [
    "DataLossError",
    "OffsetRange",
    "PartitionOffsets",
    "delay_batch",
    "duration_ms",
    "offsets_from_json",
    "offsets_to_json",
    "plan_ranges",
    "rate_limit",
    "split_ranges",
]

#: Next offset per partition.
PartitionOffsets = dict[TopicPartition, int]

_DURATION = re.compile(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", re.I)
_UNIT_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


class DataLossError(Exception):
    """Records the source was to read are gone (deleted by retention, a partition
    deleted or recreated). Raised when ``failOnDataLoss`` is true (the default)."""


@attrs.frozen(kw_only=True)
class OffsetRange:
    """Records ``[from_offset, until_offset)`` of one partition: one Spark task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        """Offsets in the range (records may be fewer: compaction, transaction markers)."""
        return self.until_offset - self.from_offset

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The source offset Spark checkpoints: ``{topic: {partition: next offset}}``,
    Spark's Kafka source's own shape, sorted."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(value: object, what: str = "offsets") -> PartitionOffsets:
    """The inverse of :func:`offsets_to_json`; also takes the JSON text. Raises
    ``ConfigurationError`` naming ``what`` for anything else."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ConfigurationError(f"{what}: not JSON: {exc}") from exc
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{what} must be a JSON object {{topic: {{partition: offset}}}}")
    offsets: PartitionOffsets = {}
    for topic, partitions in value.items():
        if not isinstance(topic, str) or not isinstance(partitions, Mapping):
            raise ConfigurationError(f"{what}: {topic!r} must map partitions to offsets")
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except (TypeError, ValueError):
                raise ConfigurationError(f"{what}: partition {partition!r} of {topic}") from None
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise ConfigurationError(f"{what}: offset {offset!r} of {topic}-{partition}")
            offsets[TopicPartition(topic, number)] = offset
    return offsets


def duration_ms(text: str, what: str) -> int:
    """``"500ms"``, ``"10s"``, ``"15m"``, ``"2h"``, ``"1d"`` or a number of
    milliseconds as milliseconds (Spark's time strings, the common units)."""
    match = _DURATION.fullmatch(str(text))
    if match is None:
        raise ConfigurationError(f"{what}: {text!r} is not a duration like 500ms, 10s or 15m")
    return int(match.group(1)) * _UNIT_MS[(match.group(2) or "ms").lower()]


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
) -> PartitionOffsets:
    """The end offsets of a batch of at most about ``limit`` records: each partition's
    share of ``limit`` is in proportion to its backlog (``latest - start``), rounded
    down, but at least one record for a partition with any backlog (so small
    partitions are not starved). Partitions not in ``start`` (added since) begin at
    ``earliest_of_new``. Never past ``latest``."""
    sizes: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    limited: PartitionOffsets = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            limited[tp] = end
            continue
        begin = start.get(tp, earliest_of_new.get(tp, end))
        share = limit * (size / total)
        take = math.ceil(share) if share < 1 else math.floor(share)
        limited[tp] = min(end, begin + take)
    return limited


def delay_batch(
    min_rows: int,
    latest: Mapping[TopicPartition, int],
    start: Mapping[TopicPartition, int],
    *,
    now_ms: int,
    last_trigger_ms: int,
    max_delay_ms: int,
) -> tuple[bool, int]:
    """``minOffsetsPerTrigger``: whether to skip this trigger (fewer than ``min_rows``
    new offsets and ``max_delay_ms`` not yet passed since the last batch), and the
    last-batch time to keep."""
    if now_ms - last_trigger_ms >= max_delay_ms:
        return False, now_ms
    new = sum(offset - start.get(tp, 0) for tp, offset in latest.items())
    if new < min_rows:
        return True, last_trigger_ms
    return False, now_ms


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
    report_data_loss: Callable[[str], None],
) -> list[OffsetRange]:
    """The ranges of one batch from ``start`` to ``end``: a partition in ``end`` but
    not in ``start`` was added since and begins at ``earliest_of_new`` (data loss if
    that is not 0, or if it is missing: the partition is gone again); a partition in
    ``start`` but not in ``end`` is gone (data loss); one whose end is before its start
    moved backwards (data loss: the topic was recreated). Empty ranges are left out;
    ``report_data_loss`` gets a message for each loss and decides whether to raise."""
    added = set(end) - set(start)
    missing = added - set(earliest_of_new)
    if missing:
        report_data_loss(
            f"cannot find the earliest offsets of {_names(missing)}: some data may have been missed"
        )
    for tp in sorted(added & set(earliest_of_new)):
        if earliest_of_new[tp] != 0:
            report_data_loss(
                f"added partition {tp} starts from {earliest_of_new[tp]} instead of 0: some "
                "data may have been missed"
            )
    gone = set(start) - set(end)
    if gone:
        report_data_loss(f"{_names(gone)} are gone: some data may have been missed")
    ranges = []
    for tp in sorted(end):
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is None:
            continue
        until = end[tp]
        if until < begin:
            report_data_loss(
                f"the offset of {tp} went from {begin} back to {until}: some data may have "
                "been missed"
            )
            continue
        if until > begin:
            ranges.append(
                OffsetRange(
                    topic=tp.topic, partition=tp.partition, from_offset=begin, until_offset=until
                )
            )
    return ranges


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """At least about ``min_partitions`` tasks: when there are fewer ranges, the large
    ones are cut into pieces in proportion to their share of all offsets (ranges whose
    share rounds to one piece stay whole), as Spark's ``minPartitions`` does. None or a
    number no larger than the ranges: one task per range."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)

    def pieces(size: int, of: int, parts: int) -> int:
        # Half up, as Scala's math.round (Python's round() goes to even).
        return max(math.floor(size / of * parts + 0.5), 1)

    whole = [r for r in ranges if pieces(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in whole)
    split_parts = max(min_partitions - len(whole), 1)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = 1 if r in whole else pieces(r.size, split_total, split_parts)
        remaining, begin = r.size, r.from_offset
        for part in range(parts):
            take = remaining // (parts - part)
            remaining -= take
            until = min(begin + take, r.until_offset)
            if until > begin:
                out.append(attrs.evolve(r, from_offset=begin, until_offset=until))
            begin = until
    return out


def _names(partitions: Iterable[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in sorted(partitions))
