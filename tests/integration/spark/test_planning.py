"""The data source's offset planning (``coopconsumer.spark._planning``), pure: no broker,
no Spark. Read limits, batch ranges with added, gone and rewound partitions, and the
``minPartitions`` split, whose pieces must cover every range exactly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coopconsumer import ConfigurationError, TopicPartition
from coopconsumer.spark._planning import (
    DataLossError,
    OffsetRange,
    delay_batch,
    duration_ms,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    split_ranges,
)

A0, A1, A2 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("a", 2)
B0 = TopicPartition("b", 0)


def raise_loss(message: str) -> None:
    raise DataLossError(message)


def test_offsets_round_trip_as_spark_kafka_offsets() -> None:
    offsets = {A1: 7, A0: 3, B0: 0}
    as_json = offsets_to_json(offsets)
    assert as_json == {"a": {"0": 3, "1": 7}, "b": {"0": 0}}
    assert offsets_from_json(as_json) == offsets
    assert offsets_from_json('{"a": {"0": 3, "1": 7}, "b": {"0": 0}}') == offsets
    for bad in (
        "[1]",
        '{"a": [1]}',
        '{"a": {"x": 1}}',
        '{"a": {"0": "1"}}',
        "{",
        '{"a": {"0": true}}',
    ):
        with pytest.raises(ConfigurationError, match="startingOffsets"):
            offsets_from_json(bad, "startingOffsets")


def test_durations_in_spark_units() -> None:
    assert [duration_ms(t, "d") for t in ("250", "250ms", "10s", "15m", "2h", "1d")] == [
        250,
        250,
        10_000,
        900_000,
        7_200_000,
        86_400_000,
    ]
    with pytest.raises(ConfigurationError, match="maxTriggerDelay"):
        duration_ms("soon", "maxTriggerDelay")


def test_rate_limit_spreads_the_limit_by_backlog_without_starving_small_partitions() -> None:
    start = {A0: 0, A1: 100, A2: 50}
    latest = {A0: 900, A1: 199, A2: 51}  # backlogs 900, 99, 1: total 1000
    assert rate_limit(100, start, latest, {}) == {A0: 90, A1: 109, A2: 51}
    # A partition added since the start begins at its earliest offset.
    assert rate_limit(10, {A0: 0}, {A0: 10, A1: 30}, {A1: 20}) == {A0: 5, A1: 25}
    # Never past the latest offsets; nothing new: the latest offsets as they are.
    assert rate_limit(10**6, start, latest, {}) == latest
    assert rate_limit(5, latest, latest, {}) == latest


def test_min_offsets_wait_for_enough_records_or_the_delay() -> None:
    start, latest = {A0: 10}, {A0: 14}
    assert delay_batch(5, latest, start, now_ms=1000, last_trigger_ms=0, max_delay_ms=5000) == (
        True,
        0,
    )
    assert delay_batch(4, latest, start, now_ms=1000, last_trigger_ms=0, max_delay_ms=5000) == (
        False,
        1000,
    )
    assert delay_batch(5, latest, start, now_ms=6000, last_trigger_ms=0, max_delay_ms=5000) == (
        False,
        6000,
    )


def test_batch_ranges_cover_added_partitions_and_report_data_loss() -> None:
    ranges = plan_ranges({A0: 5, A1: 7}, {A0: 9, A1: 7, A2: 4}, {A2: 0}, raise_loss)
    assert ranges == [
        OffsetRange(topic="a", partition=0, from_offset=5, until_offset=9),
        OffsetRange(topic="a", partition=2, from_offset=0, until_offset=4),
    ]
    losses: list[str] = []
    ranges = plan_ranges(
        {A0: 5, A1: 7, B0: 3},  # b-0 gone
        {A0: 2, A1: 8, A2: 6},  # a-0 rewound; a-2 added, starting at 3
        {A2: 3},
        losses.append,
    )
    assert ranges == [
        OffsetRange(topic="a", partition=1, from_offset=7, until_offset=8),
        OffsetRange(topic="a", partition=2, from_offset=3, until_offset=6),
    ]
    assert len(losses) == 3
    assert "a-2 starts from 3 instead of 0" in losses[0]
    assert "b-0 are gone" in losses[1]
    assert "a-0 went from 5 back to 2" in losses[2]
    with pytest.raises(DataLossError, match="cannot find the earliest offsets of a-2"):
        plan_ranges({A0: 0}, {A0: 1, A2: 3}, {}, raise_loss)


def test_min_partitions_splits_the_large_ranges() -> None:
    small = [
        OffsetRange(topic="a", partition=0, from_offset=0, until_offset=1),
        OffsetRange(topic="a", partition=1, from_offset=0, until_offset=1),
    ]
    big = OffsetRange(topic="a", partition=2, from_offset=100, until_offset=200)
    pieces = split_ranges([*small, big], 10)
    assert pieces[:2] == small  # too small to split: one task each
    assert len(pieces) == 10
    # Integer division: the last pieces take the round-off.
    assert [p.size for p in pieces[2:]] == [12, 12, 12, 12, 13, 13, 13, 13]
    assert split_ranges([*small, big], 3) == [*small, big]  # enough ranges already
    assert split_ranges([*small, big], None) == [*small, big]


ranges_strategy = st.lists(
    st.tuples(st.integers(0, 10**6), st.integers(0, 10_000)), min_size=1, max_size=8
).map(
    lambda spans: [
        OffsetRange(topic="t", partition=i, from_offset=start, until_offset=start + size)
        for i, (start, size) in enumerate(spans)
    ]
)


@given(ranges_strategy, st.integers(1, 64))
def test_split_pieces_cover_every_range_exactly(ranges: list[OffsetRange], parts: int) -> None:
    pieces = split_ranges(ranges, parts)
    assert all(p.size > 0 for p in pieces)
    for r in ranges:
        mine = [p for p in pieces if p.partition == r.partition]
        covered = [o for p in mine for o in range(p.from_offset, p.until_offset)]
        assert covered == list(range(r.from_offset, r.until_offset))
    non_empty = sum(1 for r in ranges if r.size)
    if non_empty >= parts:
        assert len(pieces) == non_empty


def test_source_options_are_parsed_and_checked_on_the_driver() -> None:
    from coopconsumer.spark._source import SourceOptions

    base = {"kafka.bootstrap.servers": "k:9092", "subscribe": "b, a,a"}
    stream = SourceOptions.parse({**base, "kafka.group.id": "g"}, streaming=True)
    assert stream.topics == ("a", "b")
    assert (stream.starting, stream.fallback, stream.commit_offsets) == ("group", "latest", True)
    assert stream.client_config()["group.id"] == "g"
    batch = SourceOptions.parse(
        {**base, "STARTINGOFFSETS": "Earliest", "maxTriggerDelay": "10s"}, streaming=False
    )
    assert (batch.starting, batch.fallback, batch.commit_offsets) == ("earliest", "earliest", False)
    assert batch.max_trigger_delay_ms == 10_000
    assert batch.client_config()["group.id"] == "coopconsumer-spark-source"
    refused = [
        ({"subscribe": "a"}, "kafka.bootstrap.servers"),
        ({"kafka.bootstrap.servers": "k:9092"}, "subscribe"),
        ({**base, "subscribePattern": "a.*"}, "use subscribe"),
        ({**base, "startingOffsets": "group"}, "needs option kafka.group.id"),
        ({**base, "commitOffsets": "true"}, "needs option kafka.group.id"),
        ({**base, "startingOffsets": "now"}, "startingOffsets"),
        ({**base, "endingOffsets": "latest"}, "batch reads only"),
        ({**base, "maxOffsetsPerTrigger": "-3"}, "maxOffsetsPerTrigger"),
        ({**base, "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({**base, "kafka.enable.auto.commit": "true"}, "not supported"),
        ({**base, "kafka.auto.offset.reset": "none"}, "auto.offset.reset"),
        ({**base, "kafka.no.such.key": "1"}, "no.such.key"),
    ]
    for options, message in refused:
        with pytest.raises(ConfigurationError, match=message):
            SourceOptions.parse(options, streaming=True)
