"""RoundRobinAssignor: Java's documented examples and properties checked against a
literal model of Java's circular iterator."""

from __future__ import annotations

from collections.abc import Mapping

from _strategies_basic import (
    as_strings,
    check_complete_and_valid,
    counts_by_member,
    java_sorted_members,
    problems,
)
from hypothesis import given, settings

from coopconsumer.assignors import (
    Assignment,
    ClusterMetadata,
    GroupAssignment,
    GroupSubscription,
    RebalanceProtocol,
    RoundRobinAssignor,
    Subscription,
    TopicPartition,
)


def _assign(
    counts: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> GroupAssignment:
    metadata = ClusterMetadata.from_partition_counts(counts)
    return RoundRobinAssignor().assign(metadata, GroupSubscription(subscriptions=subscriptions))


def _sub(*topics: str, instance: str | None = None) -> Subscription:
    return Subscription(topics=topics, group_instance_id=instance)


def test_name_and_protocols_match_java() -> None:
    assignor = RoundRobinAssignor()
    assert assignor.name == "roundrobin"
    assert assignor.supported_protocols() == [RebalanceProtocol.EAGER]


def test_javadoc_example_identical_subscriptions() -> None:
    result = _assign({"t0": 3, "t1": 3}, {"C0": _sub("t0", "t1"), "C1": _sub("t0", "t1")})
    assert as_strings(result) == {
        "C0": ["t0-0", "t0-2", "t1-1"],
        "C1": ["t0-1", "t1-0", "t1-2"],
    }


def test_javadoc_example_differing_subscriptions() -> None:
    # C0 -> t0; C1 -> t0, t1; C2 -> t0, t1, t2 with 1, 2 and 3 partitions.
    result = _assign(
        {"t0": 1, "t1": 2, "t2": 3},
        {"C0": _sub("t0"), "C1": _sub("t0", "t1"), "C2": _sub("t0", "t1", "t2")},
    )
    assert as_strings(result) == {
        "C0": ["t0-0"],
        "C1": ["t1-0"],
        "C2": ["t1-1", "t2-0", "t2-1", "t2-2"],
    }


def test_javadoc_static_members_follow_instance_ids() -> None:
    # Javadoc: three static members I0, I1, I2 on t0 and t1 (3 partitions each) keep
    # I0: [t0p0, t1p0], I1: [t0p1, t1p1], I2: [t0p2, t1p2] whatever their member ids.
    expected = {"I0": ["t0-0", "t1-0"], "I1": ["t0-1", "t1-1"], "I2": ["t0-2", "t1-2"]}
    for member_ids in (["C0", "C1", "C2"], ["z", "y", "x"], ["m", "a", "q"]):
        subscriptions = {
            member_id: _sub("t0", "t1", instance=f"I{i}") for i, member_id in enumerate(member_ids)
        }
        result = _assign({"t0": 3, "t1": 3}, subscriptions)
        by_instance = {
            subscriptions[m].group_instance_id: [str(tp) for tp in a.partitions]
            for m, a in result.assignments.items()
        }
        assert by_instance == expected


def test_static_members_come_before_dynamic_ones() -> None:
    result = _assign(
        {"t": 3}, {"a": _sub("t"), "b": _sub("t", instance="y"), "c": _sub("t", instance="x")}
    )
    assert as_strings(result) == {"c": ["t-0"], "b": ["t-1"], "a": ["t-2"]}


def test_cursor_carries_over_between_topics() -> None:
    # Three members, t0 has 2 partitions (A, B), so t1 starts at C and wraps to A.
    result = _assign({"t0": 2, "t1": 2}, {m: _sub("t0", "t1") for m in "ABC"})
    assert as_strings(result) == {"A": ["t0-0", "t1-1"], "B": ["t0-1"], "C": ["t1-0"]}


def test_cycle_continues_across_topics_with_equal_and_different_subscribers() -> None:
    # Derived by hand from Java's circular iterator over A, B, C:
    # t0-0 A, t0-1 B | t1-0 C, t1-1 A | t2 (A only): B and C are skipped, t2-0 A |
    # t3-0 B, t3-1 C.
    everyone = ("t0", "t1", "t2", "t3")
    result = _assign(
        {"t0": 2, "t1": 2, "t2": 1, "t3": 2},
        {"A": _sub(*everyone), "B": _sub("t0", "t1", "t3"), "C": _sub("t0", "t1", "t3")},
    )
    assert as_strings(result) == {
        "A": ["t0-0", "t1-1", "t2-0"],
        "B": ["t0-1", "t3-0"],
        "C": ["t1-0", "t3-1"],
    }


def test_unknown_topics_and_topicless_members_get_nothing() -> None:
    result = _assign(
        {"t": 3, "empty": 0},
        {"a": _sub("t", "missing", "empty"), "b": _sub(), "c": _sub("missing"), "d": _sub("t")},
    )
    assert as_strings(result) == {"a": ["t-0", "t-2"], "b": [], "c": [], "d": ["t-1"]}


def test_no_members_gives_empty_result() -> None:
    assert _assign({"t": 3}, {}).assignments == {}


# --- a literal model of Java's algorithm -----------------------------------------------------


def reference_roundrobin(metadata: ClusterMetadata, group: GroupSubscription) -> GroupAssignment:
    """Java's RoundRobinAssignor.assign: a circular iterator over sorted members."""
    subs = group.subscriptions
    members = java_sorted_members(subs)
    out: dict[str, list[TopicPartition]] = {m: [] for m in subs}
    cursor = 0
    for topic in sorted({t for s in subs.values() for t in s.topics}):
        for tp in metadata.partitions_for_topic(topic):
            while topic not in subs[members[cursor]].topics:
                cursor = (cursor + 1) % len(members)
            out[members[cursor]].append(tp)
            cursor = (cursor + 1) % len(members)
    return GroupAssignment(assignments={m: Assignment(partitions=ps) for m, ps in out.items()})


@settings(max_examples=200, deadline=None)
@given(problems())
def test_matches_literal_model_of_java(problem: tuple[ClusterMetadata, GroupSubscription]) -> None:
    metadata, group = problem
    result = RoundRobinAssignor().assign(metadata, group)
    check_complete_and_valid(metadata, group, result)
    assert result == reference_roundrobin(metadata, group)


@settings(max_examples=150, deadline=None)
@given(problems(equal_subscriptions=True, max_partitions=30))
def test_equal_subscriptions_are_globally_balanced(
    problem: tuple[ClusterMetadata, GroupSubscription],
) -> None:
    metadata, group = problem
    result = RoundRobinAssignor().assign(metadata, group)
    check_complete_and_valid(metadata, group, result)
    counts = counts_by_member(result)
    assert max(counts.values()) - min(counts.values()) <= 1


def test_balanced_with_many_members_and_topics() -> None:
    counts = {f"topic{i:02d}": 7 + i for i in range(20)}
    subscriptions = {f"member{i:03d}": _sub(*counts) for i in range(33)}
    result = _assign(counts, subscriptions)
    check_complete_and_valid(
        ClusterMetadata.from_partition_counts(counts),
        GroupSubscription(subscriptions=subscriptions),
        result,
    )
    shares = counts_by_member(result).values()
    assert max(shares) - min(shares) <= 1
