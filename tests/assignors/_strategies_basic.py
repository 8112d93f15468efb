"""Hypothesis strategies and checks shared by the non-sticky assignor tests.

A "problem" is ``(ClusterMetadata, GroupSubscription)``: topics with 0..N partitions
(some subscribed topics missing from the metadata), members with optional static
instance ids and optional racks, and optional replica racks per partition.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from hypothesis import strategies as st

from coopconsumer.assignors import (
    ClusterMetadata,
    GroupAssignment,
    GroupSubscription,
    Subscription,
    TopicPartition,
)

TOPICS = ("t0", "t1", "t2", "t3", "t4")
RACKS = ("a", "b", "c")

Problem = tuple[ClusterMetadata, GroupSubscription]


@st.composite
def cluster_metadata(
    draw: st.DrawFn,
    *,
    topics: tuple[str, ...] = TOPICS,
    max_partitions: int = 12,
    racks: bool = False,
    few_counts: bool = False,
) -> ClusterMetadata:
    """Partition counts for a random subset of ``topics`` (others are unknown).

    ``few_counts`` draws counts from a handful of values so that topics often share a
    count (co-partitioned topics, for range).
    """
    present = draw(st.lists(st.sampled_from(topics), unique=True))
    count_strategy = st.sampled_from((0, 3, 5)) if few_counts else st.integers(0, max_partitions)
    counts = {t: draw(count_strategy) for t in present}
    replica_racks: dict[TopicPartition, frozenset[str]] = {}
    if racks and draw(st.booleans()):
        rack_sets = st.frozensets(st.sampled_from(RACKS), max_size=len(RACKS))
        for topic, count in counts.items():
            for p in range(count):
                replica_racks[TopicPartition(topic, p)] = draw(rack_sets)
    return ClusterMetadata.from_partition_counts(counts, replica_racks=replica_racks)


@st.composite
def group_subscription(
    draw: st.DrawFn,
    *,
    topics: tuple[str, ...] = TOPICS,
    max_members: int = 8,
    equal_subscriptions: bool = False,
    static: bool = True,
    racks: bool = False,
) -> GroupSubscription:
    """Members ``m0..`` (ids drawn so their order is not their index order)."""
    member_ids = draw(
        st.lists(
            st.text(alphabet="abcxyz0123", min_size=1, max_size=4),
            min_size=1,
            max_size=max_members,
            unique=True,
        )
    )
    shared = draw(st.lists(st.sampled_from(topics), unique=True))
    instance_ids = draw(
        st.lists(st.text(alphabet="IJK09", min_size=1, max_size=3), unique=True)
        if static
        else st.just([])
    )
    subscriptions: dict[str, Subscription] = {}
    for index, member_id in enumerate(member_ids):
        member_topics = (
            shared if equal_subscriptions else draw(st.lists(st.sampled_from(topics), unique=True))
        )
        instance_id = (
            instance_ids[index] if index < len(instance_ids) and draw(st.booleans()) else None
        )
        rack = draw(st.sampled_from((*RACKS, "", None))) if racks else None
        subscriptions[member_id] = Subscription(
            topics=member_topics, group_instance_id=instance_id, rack_id=rack
        )
    return GroupSubscription(subscriptions=subscriptions)


@st.composite
def problems(
    draw: st.DrawFn,
    *,
    equal_subscriptions: bool = False,
    racks: bool = False,
    max_partitions: int = 12,
    max_members: int = 8,
    few_counts: bool = False,
) -> Problem:
    """A random ``(metadata, group_subscription)`` pair."""
    metadata = draw(
        cluster_metadata(max_partitions=max_partitions, racks=racks, few_counts=few_counts)
    )
    subscription = draw(
        group_subscription(
            equal_subscriptions=equal_subscriptions, racks=racks, max_members=max_members
        )
    )
    return metadata, subscription


def subscribed_partitions(
    metadata: ClusterMetadata, group: GroupSubscription
) -> set[TopicPartition]:
    """Every partition of every subscribed topic that exists in the metadata."""
    topics = {t for s in group.subscriptions.values() for t in s.topics}
    return {tp for t in topics for tp in metadata.partitions_for_topic(t)}


def check_complete_and_valid(
    metadata: ClusterMetadata, group: GroupSubscription, result: GroupAssignment
) -> None:
    """Each subscribed partition assigned exactly once, only to a subscriber; every
    member present; each member's partitions sorted."""
    assert set(result.assignments) == set(group.subscriptions)
    seen: list[TopicPartition] = []
    for member_id, assignment in result.assignments.items():
        partitions = list(assignment.partitions)
        assert partitions == sorted(partitions), member_id
        assert assignment.user_data == b""
        topics = set(group.subscriptions[member_id].topics)
        for tp in partitions:
            assert tp.topic in topics, (member_id, tp)
        seen.extend(partitions)
    assert len(seen) == len(set(seen)), "a partition was assigned twice"
    assert set(seen) == subscribed_partitions(metadata, group)


def _java_compare(a: str, b: str) -> int:
    # String.compareTo: UTF-16 code units, which big-endian UTF-16 bytes order alike.
    ua, ub = a.encode("utf-16-be", "surrogatepass"), b.encode("utf-16-be", "surrogatepass")
    return (ua > ub) - (ua < ub)


def java_sorted_members(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Member ids sorted by a literal transcription of Java's
    ``AbstractPartitionAssignor.MemberInfo.compareTo`` (static members first by
    instance id, then dynamic ones by member id), the reference for the assignors'
    own ``java_member_order``. Java leaves two equal instance ids in input order; the
    member id decides here, as in the implementation, so results are comparable."""

    def compare(a: str, b: str) -> int:
        ia, ib = subscriptions[a].group_instance_id, subscriptions[b].group_instance_id
        if ia is not None and ib is not None:
            return _java_compare(ia, ib) or _java_compare(a, b)
        if ia is not None:
            return -1
        if ib is not None:
            return 1
        return _java_compare(a, b)

    return sorted(subscriptions, key=functools.cmp_to_key(compare))


def as_strings(result: GroupAssignment) -> dict[str, list[str]]:
    """``{member: ["t0-0", ...]}`` for readable comparisons."""
    return {m: [str(tp) for tp in a.partitions] for m, a in result.assignments.items()}


def counts_by_member(result: GroupAssignment, topic: str | None = None) -> Mapping[str, int]:
    """How many partitions (of ``topic``, or of all topics) each member got."""
    return {
        m: sum(1 for tp in a.partitions if topic is None or tp.topic == topic)
        for m, a in result.assignments.items()
    }


@st.composite
def copartitioned_rack_problems(draw: st.DrawFn, *, max_members: int = 6) -> Problem:
    """Every topic exists with 3 or 5 partitions, every member subscribes to all of
    them and replica racks are always present: co-partitioned topic groups with rack
    matching (range's hardest path) in nearly every example."""
    counts = {t: draw(st.sampled_from((3, 5))) for t in TOPICS}
    rack_sets = st.frozensets(st.sampled_from(RACKS), min_size=1, max_size=2)
    replica_racks = {
        TopicPartition(t, p): draw(rack_sets) for t, n in counts.items() for p in range(n)
    }
    metadata = ClusterMetadata.from_partition_counts(counts, replica_racks=replica_racks)
    member_ids = draw(
        st.lists(
            st.text(alphabet="abcxyz", min_size=1, max_size=3),
            min_size=1,
            max_size=max_members,
            unique=True,
        )
    )
    subscriptions = {
        m: Subscription(topics=TOPICS, rack_id=draw(st.sampled_from((*RACKS, None))))
        for m in member_ids
    }
    return metadata, GroupSubscription(subscriptions=subscriptions)
