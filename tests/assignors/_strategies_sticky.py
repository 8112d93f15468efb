"""Hypothesis strategies, checks and a rebalance simulator for the sticky assignor tests.

A sticky "problem" is a topic -> partition-count map plus members, each with the topics
it subscribes to, an optional rack, and what it claims to own (possibly stale, invalid
or claimed by others too) with a generation. The checks are the assignors' promises:
every subscribed partition exactly once and only to a subscriber, balance (Java's
``isBalanced``), and the stickiness rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
from hypothesis import strategies as st

from coopconsumer.assignors import (
    ClusterMetadata,
    GroupAssignment,
    TopicPartition,
)

TP = TopicPartition
TOPICS = ("t0", "t1", "t2", "t3", "t4")
RACKS = ("ra", "rb", "rc")


@attrs.frozen
class Member:
    """One member of a drawn problem."""

    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...] = ()
    generation: int = -1
    rack: str | None = None


@attrs.frozen
class Problem:
    counts: Mapping[str, int]
    members: Mapping[str, Member]
    replica_racks: Mapping[TopicPartition, frozenset[str]] = attrs.field(factory=dict)

    def metadata(self) -> ClusterMetadata:
        return ClusterMetadata.from_partition_counts(self.counts, replica_racks=self.replica_racks)


member_ids = st.lists(
    st.text(alphabet="abcxyz0123", min_size=1, max_size=4), min_size=1, max_size=9, unique=True
)


@st.composite
def partition_counts(draw: st.DrawFn, max_partitions: int = 10) -> dict[str, int]:
    """Counts for a non-empty random subset of TOPICS (the others are unknown topics)."""
    present = draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))
    return {t: draw(st.integers(0, max_partitions)) for t in present}


@st.composite
def claims(draw: st.DrawFn, counts: Mapping[str, int]) -> tuple[TopicPartition, ...]:
    """Partitions a member says it owns: mostly real ones, sometimes of unknown topics,
    beyond the partition count or negative, and sometimes one listed twice."""
    real = [TP(t, p) for t, n in counts.items() for p in range(n)]
    bogus = [TP("gone", 0), TP("t0", 99), TP("t4", 50), TP("t0", -1)]
    pool = real + bogus
    return tuple(draw(st.lists(st.sampled_from(pool), max_size=8)) if pool else [])


@st.composite
def problems(
    draw: st.DrawFn,
    *,
    equal: bool,
    with_claims: bool = True,
    racks: bool = False,
) -> Problem:
    """A random problem; ``equal`` gives every member the same topics."""
    counts = draw(partition_counts())
    ids = draw(member_ids)
    known = sorted(counts)
    shared = tuple(draw(st.lists(st.sampled_from([*known, "missing"]), min_size=1, unique=True)))
    members: dict[str, Member] = {}
    for m in ids:
        topics = (
            shared
            if equal
            else tuple(draw(st.lists(st.sampled_from([*known, "missing"]), unique=True)))
        )
        owned = draw(claims(counts)) if with_claims else ()
        generation = draw(st.integers(-1, 3))
        rack = draw(st.sampled_from((None, *RACKS))) if racks else None
        members[m] = Member(topics=topics, owned=owned, generation=generation, rack=rack)
    replica: dict[TopicPartition, frozenset[str]] = {}
    if racks:
        rack_sets = st.frozensets(st.sampled_from(RACKS), max_size=2)
        for t, n in counts.items():
            for p in range(n):
                replica[TP(t, p)] = draw(rack_sets)
    return Problem(counts=counts, members=members, replica_racks=replica)


# --------------------------------------------------------------------------- checks


def partitions_by_member(result: GroupAssignment) -> dict[str, list[TopicPartition]]:
    return {m: list(a.partitions) for m, a in result.assignments.items()}


def subscribable(counts: Mapping[str, int], topics: Sequence[str]) -> set[TopicPartition]:
    return {TP(t, p) for t in topics if t in counts for p in range(counts[t])}


def check_valid(
    counts: Mapping[str, int],
    topics_of: Mapping[str, Sequence[str]],
    result: GroupAssignment,
    *,
    complete: bool = True,
) -> None:
    """Every member has an entry; no partition twice; each only to a subscriber; and,
    when ``complete``, every partition of a subscribed topic is assigned."""
    assert set(result.assignments) == set(topics_of)
    seen: set[TopicPartition] = set()
    for m, a in result.assignments.items():
        allowed = subscribable(counts, topics_of[m])
        for tp in a.partitions:
            assert tp in allowed, f"{tp} assigned to {m}, not a subscriber"
            assert tp not in seen, f"{tp} assigned twice"
            seen.add(tp)
    if complete:
        everything: set[TopicPartition] = set()
        for topics in topics_of.values():
            everything |= subscribable(counts, topics)
        assert seen == everything, f"unassigned: {sorted(everything - seen)}"


def check_balanced(
    counts: Mapping[str, int], topics_of: Mapping[str, Sequence[str]], result: GroupAssignment
) -> None:
    """Java's ``isBalanced``: no member could take a partition of one of its topics from
    a member holding at least two more partitions than it."""
    load = {m: len(a.partitions) for m, a in result.assignments.items()}
    holder = {tp: m for m, a in result.assignments.items() for tp in a.partitions}
    for m, topics in topics_of.items():
        for tp in subscribable(counts, topics):
            other = holder.get(tp)
            if other is not None and other != m:
                assert load[m] + 1 >= load[other], (
                    f"{tp} could move from {other} ({load[other]}) to {m} ({load[m]})"
                )


def check_equal_balance(result: GroupAssignment) -> None:
    sizes = [len(a.partitions) for a in result.assignments.values()]
    assert max(sizes) - min(sizes) <= 1, sizes


# --------------------------------------------------------------------------- simulation

events = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.text(alphabet="pqrs", min_size=1, max_size=3)),
        st.tuples(st.just("leave"), st.integers(0, 20)),
    ),
    min_size=1,
    max_size=5,
)
