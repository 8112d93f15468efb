"""CompactPartitions behaves as the tuple of the same partitions, and the sticky
assignors return it where the collector would otherwise walk a TopicPartition per
partition (docs/assignors.md, "Compact assignments")."""

from __future__ import annotations

import gc
import pickle
from collections.abc import Mapping

import pytest
from _gc_counting import collections_started
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer.assignors import (
    ClusterMetadata,
    CooperativeStickyAssignor,
    GroupSubscription,
    StickyAssignor,
    Subscription,
    TopicPartition,
)
from coopconsumer.assignors._compact import CompactPartitions, PartitionSpace, as_partition_number

TP = TopicPartition


@st.composite
def compacts(draw: st.DrawFn) -> tuple[CompactPartitions, tuple[TopicPartition, ...]]:
    """A CompactPartitions and the tuple it must equal (kept, then the runs' partitions)."""
    counts = draw(
        st.dictionaries(st.sampled_from("abcde"), st.integers(0, 6), min_size=1, max_size=4)
    )
    counts = dict(sorted(counts.items()))
    space = PartitionSpace(counts)
    every = [TP(t, p) for t, n in counts.items() for p in range(n)]
    kept = draw(st.lists(st.sampled_from(every), max_size=5)) if every else []
    runs: list[range | list[int]] = []
    if space.total:
        indices = st.integers(0, space.total - 1)
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                start = draw(indices)
                runs.append(range(start, space.total, draw(st.integers(1, 4))))
            else:
                runs.append(draw(st.lists(indices, max_size=6)))
    expected = tuple(kept) + tuple(every[i] for run in runs for i in run)
    return CompactPartitions(kept, space, runs), expected


@given(compacts(), st.lists(st.tuples(st.sampled_from("abcdez"), st.integers(-1, 7))))
@settings(max_examples=300)
def test_behaves_as_the_tuple_it_equals(
    case: tuple[CompactPartitions, tuple[TopicPartition, ...]],
    probes: list[tuple[str, int]],
) -> None:
    compact, expected = case
    assert compact == expected
    assert expected == compact
    assert not compact != expected  # noqa: SIM202 - checks __ne__ too
    assert hash(compact) == hash(expected)
    assert len(compact) == len(expected)
    assert bool(compact) == bool(expected)
    assert tuple(compact) == expected
    assert list(reversed(compact)) == list(reversed(expected))
    assert all(type(tp) is TopicPartition for tp in compact)
    for i in range(-len(expected), len(expected)):
        assert compact[i] == expected[i]
    for bad in (len(expected), -len(expected) - 1):
        with pytest.raises(IndexError):
            compact[bad]
    assert compact[1:-1:2] == expected[1:-1:2]
    assert compact + (TP("x", 0),) == (*expected, TP("x", 0))  # noqa: RUF005 - checks __add__
    assert (TP("x", 0),) + compact == (TP("x", 0), *expected)  # noqa: RUF005 - and __radd__
    assert compact * 2 == expected * 2
    assert repr(compact) == repr(expected)
    assert pickle.loads(pickle.dumps(compact)) == expected
    for probe in [*probes, *expected[:3]]:
        tp = TP(*probe)
        assert (tp in compact) == (tp in expected)
        assert compact.count(tp) == expected.count(tp)
        if tp in expected:
            assert compact.index(tp) == expected.index(tp)
    other = tuple(sorted(expected))
    assert (compact < other) == (expected < other)
    assert (compact <= other) == (expected <= other)
    assert (compact > other) == (expected > other)
    assert (compact >= other) == (expected >= other)
    assert compact == CompactPartitions(expected, compact.space, ())
    odd_values: tuple[object, ...] = ("not a partition", (["unhashable"], 0), ("a",), None)
    for not_a_partition in odd_values:
        assert not_a_partition not in compact
    assert (compact == list(expected)) is False


@given(compacts())
@settings(max_examples=200)
def test_sorted_numbers_are_the_wire_layout(
    case: tuple[CompactPartitions, tuple[TopicPartition, ...]],
) -> None:
    compact, expected = case
    layout = compact.sorted_numbers()
    assert layout is not None
    topic_counts, numbers = layout
    by_topic: dict[str, list[int]] = {}
    for topic, partition in expected:
        by_topic.setdefault(topic, []).append(partition)
    assert topic_counts == [(t, len(by_topic[t])) for t in sorted(by_topic)]
    assert list(numbers) == [p for t in sorted(by_topic) for p in sorted(by_topic[t])]


def test_sorted_numbers_need_objects_for_odd_kept_partitions_or_unsorted_topics() -> None:
    space = PartitionSpace({"a": 3, "b": 2})
    assert CompactPartitions([TP("a", 2)], space, [range(3, 5)]).sorted_numbers() is not None
    for odd in (TP("a", True), TP("a", 3), TP("a", -1), TP("z", 0), TP("a", 1.0)):  # type: ignore[arg-type]
        assert CompactPartitions([odd], space, [range(2)]).sorted_numbers() is None
    unsorted = PartitionSpace({"b": 2, "a": 3})
    assert CompactPartitions((), unsorted, [range(5)]).sorted_numbers() is None


def test_space_numbers_partitions_topic_by_topic() -> None:
    space = PartitionSpace({"a": 2, "empty": 0, "b": 3})
    assert space.total == 5
    assert [space.index(TP("b", p)) for p in range(3)] == [2, 3, 4]
    assert space.index(TP("b", 3)) is None
    assert space.index(TP("empty", 0)) is None
    assert space.index(TP("zzz", 0)) is None
    assert space.index(TP("a", 1.0)) == 1  # type: ignore[arg-type]
    assert space.index(TP("a", 1.5)) is None  # type: ignore[arg-type]
    assert [space.topic_of(i) for i in range(5)] == ["a", "a", "b", "b", "b"]
    assert list(space.indices_of([TP("a", 0), TP("nope", 0), TP("b", 2)])) == [0, 4]
    assert list(space.partitions(range(5))) == [
        TP("a", 0),
        TP("a", 1),
        TP("b", 0),
        TP("b", 1),
        TP("b", 2),
    ]


def test_partition_numbers_equal_to_ints_are_those_ints() -> None:
    assert as_partition_number(3) == 3
    assert as_partition_number(True) == 1
    assert type(as_partition_number(True)) is int
    assert as_partition_number(2.0) == 2
    assert as_partition_number(2.5) is None
    assert as_partition_number("2") is None
    assert as_partition_number(None) is None
    assert as_partition_number(float("inf")) is None


# --------------------------------------------------------------------------- in the assignors


def _equal_group(
    members: int, topics: Mapping[str, int]
) -> tuple[ClusterMetadata, GroupSubscription]:
    names = tuple(topics)
    return ClusterMetadata.from_partition_counts(topics), GroupSubscription(
        subscriptions={f"m{i:03d}": Subscription(topics=names) for i in range(members)}
    )


@pytest.mark.parametrize("assignor_type", [StickyAssignor, CooperativeStickyAssignor])
def test_a_large_first_assignment_starts_no_collection(
    assignor_type: type[StickyAssignor | CooperativeStickyAssignor],
) -> None:
    # With the collector running (the default), a first assignment of 40,000 partitions
    # to 3 members used to start dozens of collections (a TopicPartition per partition);
    # dealt as numbers it allocates a few objects per member.
    metadata, group = _equal_group(3, {"big": 40_000})
    assert gc.isenabled()
    started, result = collections_started(lambda: assignor_type().assign(metadata, group))
    assert started <= 1
    assert all(isinstance(a.partitions, CompactPartitions) for a in result.assignments.values())
    assert sorted(tp for a in result.assignments.values() for tp in a.partitions) == [
        TP("big", p) for p in range(40_000)
    ]


def test_the_next_rebalance_keeps_owned_partitions_as_given_and_deals_numbers() -> None:
    metadata, group = _equal_group(4, {"a": 10, "b": 7})
    first = CooperativeStickyAssignor().assign(metadata, group)
    survivors = ("m000", "m001", "m002")
    owned = {m: tuple(first.assignments[m].partitions) for m in survivors}
    second = CooperativeStickyAssignor().assign(
        metadata,
        GroupSubscription(
            subscriptions={
                m: Subscription(topics=("a", "b"), owned_partitions=owned[m], generation_id=1)
                for m in survivors
            }
        ),
    )
    for m in survivors:
        got = second.assignments[m].partitions
        assert isinstance(got, CompactPartitions)
        assert got.kept is owned[m]  # no copy of what the member keeps
        assert tuple(got[: len(owned[m])]) == owned[m]
    assert sum(len(a.partitions) for a in second.assignments.values()) == 17


def test_rack_aware_and_general_assignments_stay_tuples() -> None:
    racks = {TP("t", p): ["r0" if p % 2 else "r1"] for p in range(6)}
    metadata = ClusterMetadata.from_partition_counts({"t": 6}, replica_racks=racks)
    group = GroupSubscription(
        subscriptions={
            "a": Subscription(topics=("t",), rack_id="r0"),
            "b": Subscription(topics=("t",), rack_id="r1"),
        }
    )
    racked = CooperativeStickyAssignor().assign(metadata, group)
    assert all(type(a.partitions) is tuple for a in racked.assignments.values())
    unequal = GroupSubscription(
        subscriptions={"a": Subscription(topics=("t",)), "b": Subscription(topics=("t", "u"))}
    )
    general = StickyAssignor().assign(
        ClusterMetadata.from_partition_counts({"t": 4, "u": 2}), unequal
    )
    assert all(type(a.partitions) is tuple for a in general.assignments.values())
