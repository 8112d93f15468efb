"""The optimised sticky algorithm assigns exactly as the frozen copy of the previous one.

Issue 24 restructured how the constrained (equal subscriptions) path finds unclaimed
partitions and deals them; the assignments must not change. ``_sticky_core_reference``
is the algorithm as it was; every test here runs both on the same input and compares
each member's whole assignment, in order, for ``sticky`` and ``cooperative-sticky``
(including the partitions the cooperative assignor holds back).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import cast

import _sticky_core_reference as reference
import pytest
from _strategies_sticky import TP, Member, Problem, problems
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
from coopconsumer.assignors._sticky_userdata import encode_sticky_user_data

Outcome = dict[str, Sequence[TopicPartition]] | tuple[type[BaseException], str]


def outcome(run: Callable[[], Mapping[str, Sequence[TopicPartition]]]) -> Outcome:
    """Each member's assignment, or the error raised (type and message)."""
    try:
        return dict(run())
    except Exception as exc:
        return (type(exc), str(exc))


def reference_assignment(
    metadata: ClusterMetadata, subs: Mapping[str, Subscription], *, cooperative: bool
) -> dict[str, Sequence[TopicPartition]]:
    members = {}
    for m, s in subs.items():
        if cooperative:
            data = CooperativeStickyAssignor.member_data(m, s)
        else:
            data = StickyAssignor.member_data(m, s)
        members[m] = reference.MemberData(*data)
    result = reference.sticky_assign(metadata, members)
    if cooperative:
        reference.hold_back_transfers(result, subs)
    return {m: result.assignment(m) for m in subs}


def assignment_of(
    assignor: StickyAssignor | CooperativeStickyAssignor,
    metadata: ClusterMetadata,
    subs: Mapping[str, Subscription],
) -> dict[str, Sequence[TopicPartition]]:
    got = assignor.assign(metadata, GroupSubscription(subscriptions=subs))
    return {m: a.partitions for m, a in got.assignments.items()}


def check_same(
    metadata: ClusterMetadata, subs: Mapping[str, Subscription], *, eager: bool = True
) -> None:
    """Same outcome for cooperative-sticky, and for sticky with the same claims in its
    user data (unless ``eager`` is false)."""
    new = outcome(lambda: assignment_of(CooperativeStickyAssignor(), metadata, subs))
    old = outcome(lambda: reference_assignment(metadata, subs, cooperative=True))
    assert new == old
    if not eager:
        return
    eager_subs = {
        m: Subscription(
            topics=s.topics,
            user_data=encode_sticky_user_data(s.owned_partitions, s.generation_id)
            if s.owned_partitions
            else b"",
            rack_id=s.rack_id,
        )
        for m, s in subs.items()
    }
    new = outcome(lambda: assignment_of(StickyAssignor(), metadata, eager_subs))
    old = outcome(lambda: reference_assignment(metadata, eager_subs, cooperative=False))
    assert new == old


def subscriptions_of(problem: Problem) -> dict[str, Subscription]:
    return {
        m: Subscription(
            topics=d.topics, owned_partitions=d.owned, generation_id=d.generation, rack_id=d.rack
        )
        for m, d in problem.members.items()
    }


@given(st.booleans().flatmap(lambda equal: problems(equal=equal)))
@settings(max_examples=300)
def test_same_as_before_on_drawn_problems(problem: Problem) -> None:
    check_same(problem.metadata(), subscriptions_of(problem))


@given(st.booleans().flatmap(lambda equal: problems(equal=equal, racks=True)))
@settings(max_examples=150)
def test_same_as_before_with_racks(problem: Problem) -> None:
    check_same(problem.metadata(), subscriptions_of(problem))


@st.composite
def clean_problems(draw: st.DrawFn) -> Problem:
    """Equal subscriptions where each partition is claimed by at most one member (the
    fast path), sometimes spoiled by one bad claim (the fallback)."""
    base = draw(problems(equal=True, with_claims=False, racks=draw(st.booleans())))
    everything = [TP(t, p) for t, n in sorted(base.counts.items()) for p in range(n)]
    ids = sorted(base.members)
    owner = {tp: draw(st.sampled_from([None, *ids])) for tp in everything}
    owned: dict[str, list[TopicPartition]] = {m: [] for m in ids}
    for tp, m in owner.items():
        if m is not None:
            owned[m].append(tp)
    for m in ids:
        owned[m] = draw(st.permutations(owned[m]))
    spoil = draw(
        st.sampled_from(
            [None, TP("gone", 0), TP("t0", 99), TP("t0", -1), TP("t1", -1), "twice", "again"]
        )
    )
    victim = draw(st.sampled_from(ids))
    if spoil == "twice" and owned[victim]:
        owned[victim].append(owned[victim][0])  # a member lists a partition twice
    elif spoil == "again" and everything:
        owned[victim].append(draw(st.sampled_from(everything)))  # two members claim it
    elif isinstance(spoil, TopicPartition):
        owned[victim].append(spoil)
    members = {
        m: Member(
            topics=d.topics,
            owned=tuple(owned[m]),
            generation=draw(st.integers(-1, 2)),
            rack=d.rack,
        )
        for m, d in base.members.items()
    }
    return Problem(counts=base.counts, members=members, replica_racks=base.replica_racks)


@given(clean_problems())
@settings(max_examples=300)
def test_same_as_before_when_claims_are_clean_or_nearly(problem: Problem) -> None:
    check_same(problem.metadata(), subscriptions_of(problem))


@pytest.mark.parametrize("seed", range(12))
def test_same_as_before_on_larger_groups_after_joins_and_leaves(seed: int) -> None:
    """Rebalance rounds on groups of tens of members over hundreds of partitions, with
    uneven topic sizes, members leaving and joining, and each round's result claimed."""
    rng = random.Random(seed)
    counts = {f"topic-{i}": rng.randint(0, 60) for i in range(rng.randint(1, 12))}
    topics = tuple(sorted(counts))
    metadata = ClusterMetadata.from_partition_counts(counts)
    members = [f"m{i:03d}" for i in range(rng.randint(1, 40))]
    owned: dict[str, Sequence[TopicPartition]] = {}
    next_id = len(members)
    for generation in range(1, 5):
        subs = {
            m: Subscription(
                topics=topics, owned_partitions=owned.get(m, ()), generation_id=generation - 1
            )
            for m in members
        }
        check_same(metadata, subs)
        got = CooperativeStickyAssignor().assign(metadata, GroupSubscription(subscriptions=subs))
        owned = {m: a.partitions for m, a in got.assignments.items()}
        members = [m for m in members if rng.random() > 0.2]
        for _ in range(rng.randint(0, 5)):
            members.append(f"m{next_id:03d}")
            next_id += 1
        if not members:
            members = [f"m{next_id:03d}"]
            next_id += 1


def test_odd_partition_numbers_take_the_general_way_as_before() -> None:
    """``True`` is partition 1 to both; 1.5 (never decoded from the wire, but a
    Subscription does not check) made the old code fail with an ``AssignorError``."""
    counts = {"t0": 3}
    subs = {
        "a": Subscription(topics=("t0",), owned_partitions=(TP("t0", True), TP("t0", 2))),
        "b": Subscription(topics=("t0",), owned_partitions=(TP("t0", 0),)),
        "c": Subscription(topics=("t0",), owned_partitions=(TP("t0", cast(int, 1.5)),)),
    }
    # Only cooperative-sticky: the eager user data cannot even encode 1.5.
    check_same(ClusterMetadata.from_partition_counts(counts), subs, eager=False)
