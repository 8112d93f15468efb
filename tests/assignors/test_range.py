"""RangeAssignor: Java's documented examples, Java's rack-aware (KIP-881) results,
and properties checked against a slow, literal model of Java's algorithm."""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping, Sequence

import pytest
from _strategies_basic import (
    as_strings,
    check_complete_and_valid,
    copartitioned_rack_problems,
    counts_by_member,
    java_sorted_members,
    problems,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer.assignors import (
    Assignment,
    ClusterMetadata,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupSubscription,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    Subscription,
    TopicPartition,
)
from coopconsumer.assignors._range import java_member_order

TP = TopicPartition


def _assign(
    counts: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> GroupAssignment:
    metadata = ClusterMetadata.from_partition_counts(counts)
    return RangeAssignor().assign(metadata, GroupSubscription(subscriptions=subscriptions))


def _sub(*topics: str, instance: str | None = None, rack: str | None = None) -> Subscription:
    return Subscription(topics=topics, group_instance_id=instance, rack_id=rack)


# --- identity -------------------------------------------------------------------------


def test_name_and_protocols_match_java() -> None:
    assignor = RangeAssignor()
    assert assignor.name == "range"
    assert assignor.supported_protocols() == [RebalanceProtocol.EAGER]
    assert assignor.version() == 0


# --- Java's documented examples ----------------------------------------------------------


def test_javadoc_example_two_consumers_two_topics() -> None:
    # RangeAssignor Javadoc: C0, C1; t0 and t1 with 3 partitions each.
    result = _assign({"t0": 3, "t1": 3}, {"C0": _sub("t0", "t1"), "C1": _sub("t0", "t1")})
    assert as_strings(result) == {
        "C0": ["t0-0", "t0-1", "t1-0", "t1-1"],
        "C1": ["t0-2", "t1-2"],
    }


def test_javadoc_static_members_keep_their_ranges_across_member_id_changes() -> None:
    # Javadoc: after a rolling bounce C0 -> C3 and C1 -> C2; with instance ids I0, I1
    # the assignment follows the instance ids, not the new member ids.
    before = _assign(
        {"t0": 3, "t1": 3},
        {"C0": _sub("t0", "t1", instance="I0"), "C1": _sub("t0", "t1", instance="I1")},
    )
    after = _assign(
        {"t0": 3, "t1": 3},
        {"C3": _sub("t0", "t1", instance="I0"), "C2": _sub("t0", "t1", instance="I1")},
    )
    assert as_strings(before) == {
        "C0": ["t0-0", "t0-1", "t1-0", "t1-1"],
        "C1": ["t0-2", "t1-2"],
    }
    assert as_strings(after) == {
        "C3": ["t0-0", "t0-1", "t1-0", "t1-1"],
        "C2": ["t0-2", "t1-2"],
    }


def test_dynamic_members_are_reshuffled_by_member_id_order() -> None:
    # The Javadoc's counter-example: without instance ids the new ids reorder members.
    result = _assign({"t0": 3, "t1": 3}, {"C3": _sub("t0", "t1"), "C2": _sub("t0", "t1")})
    assert as_strings(result) == {
        "C2": ["t0-0", "t0-1", "t1-0", "t1-1"],
        "C3": ["t0-2", "t1-2"],
    }


def test_static_member_sorts_before_dynamic_even_with_higher_member_id() -> None:
    # Java RangeAssignorTest: consumer-b (static) wins over consumer-a (dynamic).
    result = _assign(
        {"topic1": 3, "topic2": 3},
        {
            "consumer-b": _sub("topic1", "topic2", instance="instance1"),
            "consumer-a": _sub("topic1", "topic2"),
        },
    )
    assert as_strings(result) == {
        "consumer-b": ["topic1-0", "topic1-1", "topic2-0", "topic2-1"],
        "consumer-a": ["topic1-2", "topic2-2"],
    }


def test_static_members_persist_when_a_dynamic_member_is_replaced() -> None:
    # Java RangeAssignorTest.testStaticMemberRangeAssignmentPersistent.
    subscriptions = {
        "consumer1": _sub("topic1", "topic2", instance="instance1"),
        "consumer2": _sub("topic1", "topic2", instance="instance2"),
        "consumer3": _sub("topic1", "topic2", instance="instance3"),
        "consumer4": _sub("topic1", "topic2"),
    }
    expected = {
        "consumer1": ["topic1-0", "topic1-1", "topic2-0"],
        "consumer2": ["topic1-2", "topic2-1"],
        "consumer3": ["topic1-3", "topic2-2"],
        "consumer4": ["topic1-4", "topic2-3"],
    }
    assert as_strings(_assign({"topic1": 5, "topic2": 4}, subscriptions)) == expected
    del subscriptions["consumer4"]
    subscriptions["consumer5"] = _sub("topic1", "topic2")
    expected["consumer5"] = expected.pop("consumer4")
    assert as_strings(_assign({"topic1": 5, "topic2": 4}, subscriptions)) == expected


def test_mixed_subscriptions() -> None:
    # Java RangeAssignorTest.testMultipleConsumersMixedTopics.
    result = _assign(
        {"topic1": 3, "topic2": 2},
        {
            "consumer1": _sub("topic1"),
            "consumer2": _sub("topic1", "topic2"),
            "consumer3": _sub("topic1"),
        },
    )
    assert as_strings(result) == {
        "consumer1": ["topic1-0"],
        "consumer2": ["topic1-1", "topic2-0", "topic2-1"],
        "consumer3": ["topic1-2"],
    }


def test_more_members_than_partitions() -> None:
    result = _assign({"t": 2}, {"a": _sub("t"), "b": _sub("t"), "c": _sub("t")})
    assert as_strings(result) == {"a": ["t-0"], "b": ["t-1"], "c": []}


# --- robustness ---------------------------------------------------------------------------


def test_unknown_and_empty_topics_and_topicless_members_get_nothing() -> None:
    result = _assign(
        {"t": 2, "empty": 0},
        {
            "a": _sub("t", "missing", "empty"),
            "b": _sub(),
            "c": _sub("missing"),
        },
    )
    assert as_strings(result) == {"a": ["t-0", "t-1"], "b": [], "c": []}


def test_no_members_gives_empty_result() -> None:
    assert _assign({"t": 3}, {}).assignments == {}


def test_topic_listed_twice_by_one_member_counts_once() -> None:
    result = _assign({"t": 4}, {"a": _sub("t", "t"), "b": _sub("t")})
    assert as_strings(result) == {"a": ["t-0", "t-1"], "b": ["t-2", "t-3"]}


def test_partitions_are_sorted_across_topics() -> None:
    result = _assign({"b": 2, "a": 2, "c": 1}, {"m": _sub("c", "b", "a")})
    assert as_strings(result) == {"m": ["a-0", "a-1", "b-0", "b-1", "c-0"]}


# --- member order ------------------------------------------------------------------------------


def test_member_order_static_first_by_instance_id_then_dynamic_by_member_id() -> None:
    # Java AbstractPartitionAssignorTest.testMemberInfoSortingSomeGroupInstanceId.
    subs = {"a": _sub(), "b": _sub(instance="y"), "c": _sub(instance="x")}
    assert java_member_order(subs) == ["c", "b", "a"]


def test_member_order_breaks_an_instance_id_tie_by_member_id() -> None:
    # Cannot happen in a healthy generation; the order must still be deterministic.
    subs = {"m2": _sub(instance="same"), "m1": _sub(instance="same"), "m0": _sub()}
    assert java_member_order(subs) == ["m1", "m2", "m0"]


def test_member_order_compares_strings_as_java_does() -> None:
    # Java compares UTF-16 code units: U+1F600 is the surrogate pair D83D DE00, which
    # sorts before U+FFFF; Python's code-point order says the opposite.
    emoji, high_bmp = "m\U0001f600", "m\uffff"
    assert sorted([emoji, high_bmp]) == [high_bmp, emoji]
    assert java_member_order({high_bmp: _sub(), emoji: _sub()}) == [emoji, high_bmp]
    static = {"x": _sub(instance=high_bmp), "y": _sub(instance=emoji)}
    assert java_member_order(static) == ["y", "x"]


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=3),
        st.one_of(st.none(), st.text(max_size=3)),
        max_size=8,
    )
)
def test_member_order_matches_a_literal_model_of_member_info_compare(
    instances: dict[str, str | None],
) -> None:
    # Any unicode (surrogate pairs included), empty instance ids, shared instance ids.
    subs = {member_id: _sub(instance=instance) for member_id, instance in instances.items()}
    assert java_member_order(subs) == java_sorted_members(subs)


# --- rack-aware (KIP-881): Java's RangeAssignorTest vectors ---------------------------------

ALL_RACKS = ("a", "b", "c", "d", "e", "f")


def racks(n: int) -> list[str | None]:
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


def null_racks(n: int) -> list[str | None]:
    return [None] * n


def rack_metadata(
    topics: Mapping[str, int], replication_factor: int, broker_racks: Sequence[str | None]
) -> ClusterMetadata:
    """The replica layout of Java's AbstractPartitionAssignorTest: broker ``k`` is on
    ``broker_racks[k]``; partition ``i`` of the n-th topic (in insertion order) has its
    replicas on brokers ``(i + j + offset) % brokers`` for ``j < replication_factor``,
    where ``offset`` is the number of partitions of the topics before it."""
    replica_racks: dict[TopicPartition, frozenset[str]] = {}
    offset = 0
    for topic, count in topics.items():
        for i in range(count):
            on = {
                broker_racks[(i + j + offset) % len(broker_racks)]
                for j in range(replication_factor)
            }
            replica_racks[TP(topic, i)] = frozenset(r for r in on if r is not None)
        offset += count
    return ClusterMetadata.from_partition_counts(topics, replica_racks=replica_racks)


def parse(expected: str) -> set[TopicPartition]:
    result = set()
    for item in expected.split(", "):
        if item:
            topic, _, partition = item.rpartition("-")
            result.add(TP(topic, int(partition)))
    return result


def verify_rack_assignment(
    topics: Mapping[str, int],
    replication_factor: int,
    broker_racks: Sequence[str | None],
    consumer_racks: Sequence[str | None],
    consumer_topics: Sequence[Sequence[str]],
    expected: Sequence[str],
    mismatches: int,
    *,
    instance_ids: Sequence[str | None] | None = None,
) -> GroupAssignment:
    """Java's verifyRackAssignment: members ``consumer0..``; compare as sets; count
    partitions given to a member with a rack that holds none of their replicas."""
    metadata = rack_metadata(topics, replication_factor, broker_racks)
    subscriptions = {
        f"consumer{i}": Subscription(
            topics=consumer_topics[i],
            rack_id=consumer_racks[i],
            group_instance_id=instance_ids[i] if instance_ids else None,
        )
        for i in range(len(consumer_racks))
    }
    group = GroupSubscription(subscriptions=subscriptions)
    result = RangeAssignor().assign(metadata, group)
    actual = {m: set(a.partitions) for m, a in result.assignments.items()}
    assert actual == {f"consumer{i}": parse(e) for i, e in enumerate(expected)}
    check_complete_and_valid(metadata, group, result)
    if mismatches >= 0:
        mismatched = [
            tp
            for i, rack in enumerate(consumer_racks)
            if rack is not None
            for tp in result.assignments[f"consumer{i}"].partitions
            if rack not in metadata.racks_for_partition(tp)
        ]
        assert len(mismatched) == mismatches, mismatched
    assert result == reference_range(metadata, group)
    return result


def verify_non_rack_aware(
    topics: Mapping[str, int], consumer_topics: Sequence[Sequence[str]], expected: Sequence[str]
) -> None:
    """Java's verifyNonRackAwareAssignment: layouts where racks must not matter."""
    verify_rack_assignment(topics, 3, null_racks(3), racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(topics, 3, racks(3), null_racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(topics, 3, racks(3), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(topics, 4, racks(4), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(topics, 3, racks(3), ["d", "e", "f"], consumer_topics, expected, -1)
    verify_rack_assignment(topics, 3, racks(3), [None, "e", "f"], consumer_topics, expected, -1)


def test_hand_derived_rack_aware_uniform_subscription() -> None:
    # Derived by hand from the algorithm (and equal to Java's test vector): one replica
    # per partition, brokers on racks a, b, c; consumers 0, 1, 2 on racks a, b, c.
    # t1 (offset 0): p0 a, p1 b, p2 c, p3 a, p4 b, p5 c      -> 2 each, all on-rack
    # t2 (offset 6): p0 a, p1 b, p2 c, p3 a, p4 b, p5 c, p6 a -> consumer0 may take 3
    #     (it is first, an extra slot is free) and rack a holds exactly p0, p3, p6
    # t3 (offset 13): p0 b, p1 c -> 0 per member + 2 extras: consumer0 matches nothing,
    #     consumer1 takes p0, consumer2 takes p1
    topics = {"t1": 6, "t2": 7, "t3": 2}
    everyone = [["t1", "t2", "t3"]] * 3
    verify_rack_assignment(
        topics,
        1,
        racks(3),
        racks(3),
        everyone,
        [
            "t1-0, t1-3, t2-0, t2-3, t2-6",
            "t1-1, t1-4, t2-1, t2-4, t3-0",
            "t1-2, t1-5, t2-2, t2-5, t3-1",
        ],
        0,
    )


def test_rack_aware_uniform_subscription_java_vectors() -> None:
    # Java RangeAssignorTest.testRackAwareAssignmentWithUniformSubscription.
    topics = {"t1": 6, "t2": 7, "t3": 2}
    everyone = [["t1", "t2", "t3"]] * 3
    non_rack = [
        "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0",
        "t1-2, t1-3, t2-3, t2-4, t3-1",
        "t1-4, t1-5, t2-5, t2-6",
    ]
    verify_non_rack_aware(topics, everyone, non_rack)
    verify_rack_assignment(
        topics,
        2,
        racks(3),
        racks(3),
        everyone,
        [
            "t1-0, t1-2, t2-0, t2-2, t2-3, t3-1",
            "t1-1, t1-3, t2-1, t2-4, t3-0",
            "t1-4, t1-5, t2-5, t2-6",
        ],
        1,
    )
    # One consumer on a rack with no partitions.
    verify_rack_assignment(topics, 3, racks(2), racks(3), everyone, non_rack, 4)


def test_rack_aware_non_equal_subscription_java_vectors() -> None:
    # Java RangeAssignorTest.testRackAwareAssignmentWithNonEqualSubscription.
    topics = {"t1": 6, "t2": 7, "t3": 2}
    consumer_topics = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
    non_rack = [
        "t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0",
        "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1",
        "t1-4, t1-5",
    ]
    verify_non_rack_aware(topics, consumer_topics, non_rack)
    verify_rack_assignment(
        topics,
        1,
        racks(3),
        racks(3),
        consumer_topics,
        [
            "t1-0, t1-3, t2-0, t2-2, t2-3, t2-6",
            "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0",
            "t1-2, t1-5, t3-1",
        ],
        2,
    )
    verify_rack_assignment(
        topics,
        2,
        racks(3),
        racks(3),
        consumer_topics,
        [
            "t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1",
            "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0",
            "t1-4, t1-5",
        ],
        0,
    )
    verify_rack_assignment(topics, 3, racks(2), racks(3), consumer_topics, non_rack, 2)


def test_co_partitioning_wins_over_rack_alignment_java_vectors() -> None:
    # Java RangeAssignorTest.testRackAwareAssignmentWithUniformPartitions: three topics
    # of five partitions with the same subscribers stay co-partitioned even when that
    # leaves partitions off-rack.
    topics = {"t1": 5, "t2": 5, "t3": 5}
    everyone = [["t1", "t2", "t3"]] * 3
    non_rack = [
        "t1-0, t1-1, t2-0, t2-1, t3-0, t3-1",
        "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3",
        "t1-4, t2-4, t3-4",
    ]
    verify_non_rack_aware(topics, everyone, non_rack)
    verify_rack_assignment(topics, 1, racks(3), racks(3), everyone, non_rack, 10)
    verify_rack_assignment(topics, 2, racks(3), racks(3), everyone, non_rack, 5)
    verify_rack_assignment(topics, 3, racks(2), racks(3), everyone, non_rack, 3)


def test_co_partitioning_only_among_equal_subscriptions_java_vectors() -> None:
    # Java RangeAssignorTest.testRackAwareAssignmentWithUniformPartitionsNonEqualSubscription.
    topics = {"t1": 5, "t2": 5, "t3": 5}
    consumer_topics = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
    non_rack = [
        "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1",
        "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3",
        "t1-4, t3-4",
    ]
    verify_non_rack_aware(topics, consumer_topics, non_rack)
    verify_rack_assignment(
        topics,
        1,
        racks(3),
        racks(3),
        consumer_topics,
        [
            "t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1",
            "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3",
            "t1-4, t3-4",
        ],
        9,
    )
    verify_rack_assignment(
        topics,
        2,
        racks(3),
        racks(3),
        consumer_topics,
        [
            "t1-2, t2-0, t2-1, t2-3, t3-2",
            "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3",
            "t1-1, t1-4, t3-1, t3-4",
        ],
        0,
    )
    verify_rack_assignment(topics, 3, racks(2), racks(3), consumer_topics, non_rack, 2)


def test_rack_aware_co_partitioning_java_vectors() -> None:
    # Java RangeAssignorTest.testRackAwareAssignmentWithCoPartitioning.
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2}
    consumer_racks: list[str | None] = ["a", "b", "b", "a"]
    pairs = [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]]
    non_rack = [
        "t1-0, t1-1, t1-2, t2-0, t2-1, t2-2",
        "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5",
        "t3-0, t4-0",
        "t3-1, t4-1",
    ]
    verify_rack_assignment(topics, 3, racks(2), consumer_racks, pairs, non_rack, -1)
    verify_rack_assignment(topics, 2, racks(2), consumer_racks, pairs, non_rack, 0)
    verify_rack_assignment(
        topics,
        1,
        racks(2),
        consumer_racks,
        pairs,
        [
            "t1-0, t1-2, t1-4, t2-0, t2-2, t2-4",
            "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5",
            "t3-1, t4-1",
            "t3-0, t4-0",
        ],
        0,
    )

    everyone = [["t1", "t2", "t3", "t4"]] * 4
    non_rack = [
        "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0",
        "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1",
        "t1-4, t2-4",
        "t1-5, t2-5",
    ]
    verify_rack_assignment(topics, 3, racks(2), consumer_racks, everyone, non_rack, -1)
    verify_rack_assignment(topics, 2, racks(2), consumer_racks, everyone, non_rack, 0)
    verify_rack_assignment(
        topics,
        1,
        racks(2),
        consumer_racks,
        everyone,
        [
            "t1-0, t1-2, t2-0, t2-2, t3-0, t4-0",
            "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1",
            "t1-5, t2-5",
            "t1-4, t2-4",
        ],
        0,
    )
    verify_rack_assignment(
        topics,
        1,
        racks(3),
        consumer_racks,
        everyone,
        [
            "t1-0, t1-3, t2-0, t2-3, t3-0, t4-0",
            "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1",
            "t1-2, t2-2",
            "t1-5, t2-5",
        ],
        6,
    )


def test_co_partitioned_with_same_subscription_and_missing_topics_java_vectors() -> None:
    # Java RangeAssignorTest.testCoPartitionedAssignmentWithSameSubscription (the cases
    # that do not need Java's test-only preferRackAwareLogic switch). t7..t9 do not
    # exist.
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4}
    topic_list = ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"]
    everyone = [topic_list] * 3
    verify_rack_assignment(
        topics,
        3,
        null_racks(3),
        ["a", "b", "c"],
        everyone,
        [
            "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
            "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
            "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3",
        ],
        -1,
    )
    verify_rack_assignment(
        topics,
        2,
        racks(3),
        ["a", "b", "c"],
        everyone,
        [
            "t1-0, t1-2, t2-0, t2-2, t3-0, t4-0, t5-1, t6-1",
            "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1, t5-2, t6-2",
            "t1-4, t1-5, t2-4, t2-5, t5-0, t5-3, t6-0, t6-3",
        ],
        0,
    )


def test_rack_aware_static_members_persist_after_member_id_changes() -> None:
    # Java RangeAssignorTest.testRackAwareStaticMemberRangeAssignmentPersistentAfterMemberIdChanges.
    # Both topics: 5 partitions, replicas on brokers (i, i+1) of six brokers on racks
    # a b c a b c, so p0 {a,b}, p1 {b,c}, p2 {c,a}, p3 {a,b}, p4 {b,c}.
    # By hand (co-partitioned, quota 1 + 2 extras): p0 -> instance1 (rack a, first);
    # p1 -> instance2 (b); p2 -> instance1 (a; uses an extra); p3: instance1 is full,
    # instance2 (b) takes it (last extra); p4: instance2 full, instance3 (c) takes it.
    broker_racks = ["a", "b", "c", "a", "b", "c"]
    replica_racks = {
        TP(topic, i): frozenset({broker_racks[i % 6], broker_racks[(i + 1) % 6]})
        for topic in ("topic1", "topic2")
        for i in range(5)
    }
    metadata = ClusterMetadata.from_partition_counts(
        {"topic1": 5, "topic2": 5}, replica_racks=replica_racks
    )

    def by_instance(subscriptions: dict[str, Subscription]) -> dict[str | None, list[str]]:
        group = GroupSubscription(subscriptions=subscriptions)
        result = RangeAssignor().assign(metadata, group)
        assert result == reference_range(metadata, group)
        return {
            subscriptions[m].group_instance_id: [str(tp) for tp in a.partitions]
            for m, a in result.assignments.items()
        }

    subs = {
        "consumer1": _sub("topic1", "topic2", instance="instance1", rack="a"),
        "consumer2": _sub("topic1", "topic2", instance="instance2", rack="b"),
        "consumer3": _sub("topic1", "topic2", instance="instance3", rack="c"),
    }
    expected: dict[str | None, list[str]] = {
        "instance1": ["topic1-0", "topic1-2", "topic2-0", "topic2-2"],
        "instance2": ["topic1-1", "topic1-3", "topic2-1", "topic2-3"],
        "instance3": ["topic1-4", "topic2-4"],
    }
    assert by_instance(subs) == expected
    subs["consumer4"] = subs.pop("consumer3")
    subs["consumer5"] = subs.pop("consumer2")
    assert by_instance(subs) == expected


def test_racks_are_ignored_when_every_partition_is_on_every_rack() -> None:
    metadata = ClusterMetadata.from_partition_counts(
        {"t": 4}, replica_racks={TP("t", p): {"a", "b"} for p in range(4)}
    )
    group = GroupSubscription(subscriptions={"m1": _sub("t", rack="b"), "m2": _sub("t", rack="a")})
    assert as_strings(RangeAssignor().assign(metadata, group)) == {
        "m1": ["t-0", "t-1"],
        "m2": ["t-2", "t-3"],
    }


def test_empty_rack_id_counts_as_no_rack() -> None:
    # Partitions alternate between racks a and b; m2 is on rack b, m1 sends "".
    # m1 has no rack, so any partition matches it: it takes the first two (p0, p1);
    # m2 then takes what is left. An m1 on rack "a" would get p0 and p2 instead.
    replica_racks = {TP("t", p): {"ab"[p % 2]} for p in range(4)}
    metadata = ClusterMetadata.from_partition_counts({"t": 4}, replica_racks=replica_racks)
    blank = GroupSubscription(subscriptions={"m1": _sub("t", rack=""), "m2": _sub("t", rack="b")})
    assert as_strings(RangeAssignor().assign(metadata, blank)) == {
        "m1": ["t-0", "t-1"],
        "m2": ["t-2", "t-3"],
    }
    on_a = GroupSubscription(subscriptions={"m1": _sub("t", rack="a"), "m2": _sub("t", rack="b")})
    assert as_strings(RangeAssignor().assign(metadata, on_a)) == {
        "m1": ["t-0", "t-2"],
        "m2": ["t-1", "t-3"],
    }


# --- a literal model of Java's algorithm, for differential testing ------------------------


class _ModelState:
    def __init__(
        self,
        topic: str,
        count: int,
        members: list[str],
        racks_of: dict[str, str],
        md: ClusterMetadata,
    ) -> None:
        self.topic = topic
        self.members = members
        self.racks = {m: racks_of.get(m) for m in members}
        self.unassigned = list(range(count))
        self.assigned = dict.fromkeys(members, 0)
        self.per, self.extra = divmod(count, len(members))
        member_racks = {r for r in self.racks.values() if r is not None}
        self.partition_racks: list[frozenset[str]] = []
        self.needs = False
        if member_racks:
            self.partition_racks = [md.racks_for_partition(TP(topic, p)) for p in range(count)]
            union = frozenset().union(*self.partition_racks)
            self.needs = bool(member_racks & union) and any(
                r != union for r in self.partition_racks
            )

    def max_assignable(self, m: str) -> int:
        return max(0, self.per + (1 if self.extra > 0 else 0) - self.assigned[m])

    def racks_match(self, m: str, p: int) -> bool:
        rack = self.racks[m]
        return rack is None or rack in self.partition_racks[p]

    def give(self, m: str, ps: list[int], out: dict[str, list[TopicPartition]]) -> None:
        out[m].extend(TP(self.topic, p) for p in ps)
        self.assigned[m] += len(ps)
        if self.assigned[m] > self.per:
            self.extra -= 1
        for p in ps:
            self.unassigned.remove(p)

    def assign_ranges(
        self, may: Callable[[str, int], bool], out: dict[str, list[TopicPartition]]
    ) -> None:
        for m in self.members:
            if not self.unassigned:
                break
            ps = [p for p in self.unassigned if may(m, p)][: self.max_assignable(m)]
            if ps:
                self.give(m, ps, out)


def reference_range(metadata: ClusterMetadata, group: GroupSubscription) -> GroupAssignment:
    """Java's RangeAssignor.assignPartitions, step by step and slowly."""
    subs = group.subscriptions
    order = java_sorted_members(subs)
    racks_of = {m: s.rack_id for m, s in subs.items() if s.rack_id}
    out: dict[str, list[TopicPartition]] = {m: [] for m in subs}
    states = []
    for topic in sorted({t for s in subs.values() for t in s.topics}):
        count = metadata.partition_count(topic) or 0
        if count > 0:
            members = [m for m in order if topic in subs[m].topics]
            states.append(_ModelState(topic, count, members, racks_of, metadata))
    if any(s.needs for s in states):
        groups: dict[tuple[tuple[tuple[str, str | None], ...], int], list[_ModelState]] = {}
        for s in states:
            key = (tuple(s.racks.items()), len(s.partition_racks))
            groups.setdefault(key, []).append(s)
        for (_, n), grp in groups.items():
            if len(grp) == 1:
                if grp[0].needs:
                    grp[0].assign_ranges(grp[0].racks_match, out)
                continue
            remaining = list(grp[0].members)
            for p in range(n):
                match = next(
                    (
                        c
                        for c in remaining
                        if all(s.racks_match(c, p) and s.max_assignable(c) > 0 for s in grp)
                    ),
                    None,
                )
                if match is None:
                    continue
                for s in grp:
                    s.give(match, [p], out)
                if all(s.max_assignable(match) == 0 for s in grp):
                    remaining.remove(match)
                    if not remaining:
                        break
    for s in states:
        s.assign_ranges(lambda m, p: True, out)
    return GroupAssignment(
        assignments={m: Assignment(partitions=sorted(ps)) for m, ps in out.items()}
    )


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(problems())
def test_every_partition_once_to_a_subscriber(
    problem: tuple[ClusterMetadata, GroupSubscription],
) -> None:
    metadata, group = problem
    check_complete_and_valid(metadata, group, RangeAssignor().assign(metadata, group))


@settings(max_examples=150, deadline=None)
@given(problems(racks=True))
def test_per_topic_balance_among_subscribers(
    problem: tuple[ClusterMetadata, GroupSubscription],
) -> None:
    # Holds with and without racks: rack matching never breaks range's quotas.
    metadata, group = problem
    result = RangeAssignor().assign(metadata, group)
    check_complete_and_valid(metadata, group, result)
    for topic in metadata.partition_counts:
        subscribers = [m for m, s in group.subscriptions.items() if topic in s.topics]
        if not subscribers:
            continue
        counts = counts_by_member(result, topic)
        shares = [counts[m] for m in subscribers]
        assert max(shares) - min(shares) <= 1, (topic, shares)


@settings(max_examples=150, deadline=None)
@given(problems())
def test_co_partitioned_topics_get_identical_assignments_without_racks(
    problem: tuple[ClusterMetadata, GroupSubscription],
) -> None:
    metadata, group = problem
    result = RangeAssignor().assign(metadata, group)
    by_topic: dict[tuple[frozenset[str], int], dict[str, dict[str, list[int]]]] = {}
    for topic, count in metadata.partition_counts.items():
        subscribers = frozenset(m for m, s in group.subscriptions.items() if topic in s.topics)
        if not subscribers or count == 0:
            continue
        layout = {
            m: [tp.partition for tp in result.assignments[m].partitions if tp.topic == topic]
            for m in subscribers
        }
        by_topic.setdefault((subscribers, count), {})[topic] = layout
    for layouts in by_topic.values():
        first, *rest = layouts.values()
        assert all(layout == first for layout in rest)


@settings(max_examples=200, deadline=None)
@given(problems(racks=True))
def test_matches_literal_model_of_java(problem: tuple[ClusterMetadata, GroupSubscription]) -> None:
    metadata, group = problem
    assert RangeAssignor().assign(metadata, group) == reference_range(metadata, group)


@settings(max_examples=150, deadline=None)
@given(copartitioned_rack_problems())
def test_co_partitioned_rack_matching_matches_literal_model_of_java(
    problem: tuple[ClusterMetadata, GroupSubscription],
) -> None:
    # Co-partitioned topic groups with rack matching (Java's
    # assignCoPartitionedWithRackMatching) in nearly every example.
    metadata, group = problem
    assert RangeAssignor().assign(metadata, group) == reference_range(metadata, group)


@settings(max_examples=100, deadline=None)
@given(problems(racks=True))
def test_result_does_not_depend_on_member_or_topic_listing_order(
    problem: tuple[ClusterMetadata, GroupSubscription],
) -> None:
    metadata, group = problem
    reversed_group = GroupSubscription(
        subscriptions={
            m: Subscription(
                topics=tuple(reversed(s.topics)),
                group_instance_id=s.group_instance_id,
                rack_id=s.rack_id,
            )
            for m, s in reversed(list(group.subscriptions.items()))
        }
    )
    assert RangeAssignor().assign(metadata, group) == RangeAssignor().assign(
        metadata, reversed_group
    )


@pytest.mark.parametrize("members", [1, 3, 7])
def test_large_topic_ranges_are_contiguous(members: int) -> None:
    result = _assign({"big": 1000}, {f"m{i}": _sub("big") for i in range(members)})
    start = 0
    for i in range(members):
        partitions = [tp.partition for tp in result.assignments[f"m{i}"].partitions]
        expected_len = 1000 // members + (1 if i < 1000 % members else 0)
        assert partitions == list(range(start, start + expected_len))
        start += expected_len


@pytest.mark.parametrize(
    "assignor", [RangeAssignor(), RoundRobinAssignor()], ids=lambda a: str(a.name)
)
def test_large_assignment_leaves_the_garbage_collector_as_it_found_it(
    assignor: ConsumerPartitionAssignor,
) -> None:
    # Both non-sticky assignors pause the collector above the threshold, then restore
    # whatever state they found.
    metadata = ClusterMetadata.from_partition_counts({"big": 30_000})
    group = GroupSubscription(subscriptions={"a": _sub("big"), "b": _sub("big")})
    assert gc.isenabled()
    assert len(assignor.assign(metadata, group).assignments["a"].partitions) == 15_000
    assert gc.isenabled()
    gc.disable()
    try:
        assignor.assign(metadata, group)
        assert not gc.isenabled()
    finally:
        gc.enable()
