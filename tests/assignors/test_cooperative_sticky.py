"""CooperativeStickyAssignor: KIP-429's rule that no partition changes owner within one
rebalance, the follow-up rebalance that completes the move, where owned partitions and
generations come from (v1/v2 fields, then user data), and the EAGER fallback."""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence

import pytest
from _strategies_sticky import (
    TP,
    Problem,
    check_balanced,
    check_equal_balance,
    check_valid,
    events,
    problems,
    subscribable,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer.assignors import (
    Assignment,
    ClusterMetadata,
    ConsumerGroupMetadata,
    CooperativeStickyAssignor,
    GroupAssignment,
    GroupSubscription,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
)
from coopconsumer.assignors._sticky_userdata import encode_sticky_user_data


def coop(
    topics: tuple[str, ...],
    owned: Sequence[TopicPartition] = (),
    generation: int = -1,
    *,
    user_data: bytes = b"",
    rack: str | None = None,
) -> Subscription:
    return Subscription(
        topics=topics,
        owned_partitions=owned,
        generation_id=generation,
        user_data=user_data,
        rack_id=rack,
    )


def assign(
    counts: dict[str, int],
    subscriptions: dict[str, Subscription],
    replica_racks: dict[TopicPartition, frozenset[str]] | None = None,
) -> GroupAssignment:
    metadata = ClusterMetadata.from_partition_counts(counts, replica_racks=replica_racks)
    return CooperativeStickyAssignor().assign(
        metadata, GroupSubscription(subscriptions=subscriptions)
    )


def sets(result: GroupAssignment) -> dict[str, set[TopicPartition]]:
    return {m: set(a.partitions) for m, a in result.assignments.items()}


def check_no_handover(
    subscriptions: dict[str, Subscription] | GroupSubscription, result: GroupAssignment
) -> None:
    """KIP-429: a partition added to one member is not still owned by another."""
    subs = (
        subscriptions.subscriptions
        if isinstance(subscriptions, GroupSubscription)
        else subscriptions
    )
    for m, a in result.assignments.items():
        mine = set(subs[m].owned_partitions)
        for tp in a.partitions:
            if tp in mine:
                continue
            others = [o for o, s in subs.items() if o != m and tp in s.owned_partitions]
            assert not others, f"{tp} handed to {m} while {others} still own it"


# --------------------------------------------------------------------------- contract


def test_name_and_protocols() -> None:
    assignor = CooperativeStickyAssignor()
    assert assignor.name == "cooperative-sticky"
    assert assignor.supported_protocols() == [
        RebalanceProtocol.COOPERATIVE,
        RebalanceProtocol.EAGER,
    ]


def test_user_data_is_the_int32_generation_from_on_assignment() -> None:
    assignor = CooperativeStickyAssignor()
    assert assignor.subscription_user_data(frozenset({"t"})) == struct.pack(">i", -1)
    assignor.on_assignment(
        Assignment(partitions=(TP("t", 0),)),
        ConsumerGroupMetadata(group_id="g", generation_id=12, member_id="m"),
    )
    assert assignor.subscription_user_data(frozenset({"t"})) == struct.pack(">i", 12)


def test_generation_field_wins_over_user_data() -> None:
    data = CooperativeStickyAssignor.member_data(
        "m", coop(("t",), (TP("t", 0),), 4, user_data=struct.pack(">i", 9))
    )
    assert data.generation == 4
    assert data.owned == (TP("t", 0),)


def test_user_data_generation_used_when_the_field_is_absent() -> None:
    # A v0/v1 subscription has no generation field (-1); Java reads the int32 user data,
    # ignoring any bytes after it.
    data = CooperativeStickyAssignor.member_data(
        "m", coop(("t",), (TP("t", 0),), -1, user_data=struct.pack(">i", 9) + b"xx")
    )
    assert data.generation == 9


def test_short_user_data_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="coopconsumer.assignors.sticky"):
        data = CooperativeStickyAssignor.member_data("m", coop(("t",), user_data=b"\x01\x02"))
    assert data.generation == -1
    assert any("too short" in r.message for r in caplog.records)


def test_librdkafka_user_data_gives_its_trailing_generation() -> None:
    # librdkafka's cooperative-sticky writes StickyAssignorUserData V1 (previous
    # assignment + generation); librdkafka 1.6-2.0 sent it in v1 subscriptions (no
    # generation field). Its first four bytes are the topic count (2), not the generation.
    owned = (TP("t0", 0), TP("t1", 1))
    data = encode_sticky_user_data(owned, 41)
    assert struct.unpack_from(">i", data)[0] == 2
    member = CooperativeStickyAssignor.member_data("rd", coop(("t0", "t1"), owned, user_data=data))
    assert member.generation == 41
    # Same claim at generation 40 on the v2 field: the librdkafka member's 41 wins.
    subs = {
        "rd": coop(("t0", "t1"), owned, user_data=data),
        "java": coop(("t0", "t1"), (TP("t0", 0),), 40),
    }
    result = assign({"t0": 2, "t1": 2}, subs)
    assert TP("t0", 0) in result.assignments["rd"].partitions
    assert TP("t0", 0) not in result.assignments["java"].partitions


@given(st.binary(max_size=48))
@settings(max_examples=150)
def test_any_user_data_gives_a_generation_without_raising(data: bytes) -> None:
    generation = CooperativeStickyAssignor.member_data("m", coop(("t",), user_data=data)).generation
    if len(data) == 4:  # Java's exact format
        assert generation == struct.unpack(">i", data)[0]
    elif len(data) < 4:
        assert generation == -1


def test_user_data_generation_settles_a_duplicate_claim() -> None:
    # "old" is a pre-v2 peer whose generation (5) is only in its user data; it beats
    # "new" at generation 3 on the wire field.
    subs = {
        "old": coop(("t0",), (TP("t0", 0),), -1, user_data=struct.pack(">i", 5)),
        "new": coop(("t0",), (TP("t0", 0), TP("t0", 1)), 3),
    }
    result = assign({"t0": 2}, subs)
    assert sets(result) == {"old": {TP("t0", 0)}, "new": {TP("t0", 1)}}


# --------------------------------------------------------------------------- exact rounds


def test_joining_member_gets_moved_partitions_only_in_the_follow_up() -> None:
    counts = {"t0": 6}
    t = ("t0",)
    a_owned = (TP("t0", 0), TP("t0", 1), TP("t0", 2))
    b_owned = (TP("t0", 3), TP("t0", 4), TP("t0", 5))
    first = {"a": coop(t, a_owned, 1), "b": coop(t, b_owned, 1), "c": coop(t)}
    r1 = assign(counts, first)
    check_no_handover(first, r1)
    # a and b each give up one partition; c gets nothing yet.
    assert sets(r1) == {
        "a": {TP("t0", 0), TP("t0", 1)},
        "b": {TP("t0", 3), TP("t0", 4)},
        "c": set(),
    }
    second = {m: coop(t, r1.assignments[m].partitions, 2) for m in ("a", "b", "c")}
    r2 = assign(counts, second)
    check_no_handover(second, r2)
    assert sets(r2) == {
        "a": {TP("t0", 0), TP("t0", 1)},
        "b": {TP("t0", 3), TP("t0", 4)},
        "c": {TP("t0", 2), TP("t0", 5)},
    }


def test_leaving_member_partitions_move_at_once() -> None:
    # Nobody owns a departed member's partitions any more: no follow-up is needed.
    t = ("t0",)
    subs = {"a": coop(t, (TP("t0", 0),), 4), "b": coop(t, (TP("t0", 1),), 4)}
    result = assign({"t0": 4}, subs)
    check_valid({"t0": 4}, {"a": t, "b": t}, result)
    assert sets(result)["a"] >= {TP("t0", 0)}


def test_stale_duplicate_claim_goes_to_the_newer_generation() -> None:
    t = ("t0",)
    subs = {
        "fresh": coop(t, (TP("t0", 0), TP("t0", 1)), 6),
        "stale": coop(t, (TP("t0", 1), TP("t0", 2)), 5),
        "other": coop(t, (TP("t0", 3),), 6),
    }
    result = assign({"t0": 6}, subs)
    check_no_handover(subs, result)
    assert TP("t0", 1) in result.assignments["fresh"].partitions
    assert TP("t0", 1) not in result.assignments["stale"].partitions


def test_same_generation_duplicate_is_not_handed_to_a_third_member() -> None:
    t = ("t0",)
    subs = {
        "a": coop(t, (TP("t0", 0), TP("t0", 1), TP("t0", 2)), 3),
        "b": coop(t, (TP("t0", 0), TP("t0", 3), TP("t0", 4)), 3),
        "c": coop(t, (), -1),
    }
    result = assign({"t0": 6}, subs)
    check_no_handover(subs, result)
    assert TP("t0", 0) not in result.assignments["c"].partitions


def test_eager_use_reports_no_owned_partitions_so_nothing_is_held_back() -> None:
    # Under EAGER (first bounce of the KIP-429 upgrade) members revoke everything before
    # joining, so owned_partitions is empty and the assignment is complete.
    t = ("t0", "t1")
    subs = {m: coop(t, (), 7) for m in ("a", "b", "c")}
    result = assign({"t0": 4, "t1": 3}, subs)
    check_valid({"t0": 4, "t1": 3}, dict.fromkeys(subs, t), result)
    check_equal_balance(result)


def test_rack_mismatched_owned_partition_is_held_back_before_moving() -> None:
    racks = {TP("t0", 0): frozenset({"ra"}), TP("t0", 1): frozenset({"rb"})}
    t = ("t0",)
    first = {
        "a": coop(t, (TP("t0", 1),), 1, rack="ra"),
        "b": coop(t, (TP("t0", 0),), 1, rack="rb"),
    }
    r1 = assign({"t0": 2}, first, racks)
    check_no_handover(first, r1)
    assert sets(r1) == {"a": set(), "b": set()}
    second = {"a": coop(t, (), 2, rack="ra"), "b": coop(t, (), 2, rack="rb")}
    r2 = assign({"t0": 2}, second, racks)
    assert sets(r2) == {"a": {TP("t0", 0)}, "b": {TP("t0", 1)}}


# --------------------------------------------------------------------------- properties


def _rounds_until_stable(
    assignor: CooperativeStickyAssignor,
    metadata: ClusterMetadata,
    topics_of: dict[str, tuple[str, ...]],
    owned: dict[str, Sequence[TopicPartition]],
    generation: int,
    *,
    max_rounds: int,
    racks: Mapping[str, str | None] | None = None,
) -> tuple[list[GroupAssignment], dict[str, Sequence[TopicPartition]], int]:
    """Rebalance like a COOPERATIVE group: each round the members apply the result
    (revoking what they lost); a member that revoked anything triggers a follow-up."""
    results: list[GroupAssignment] = []
    for _ in range(max_rounds):
        subs = {
            m: coop(
                topics,
                owned.get(m, ()),
                generation if owned.get(m) else -1,
                rack=racks.get(m) if racks else None,
            )
            for m, topics in topics_of.items()
        }
        result = assignor.assign(metadata, GroupSubscription(subscriptions=subs))
        check_no_handover(subs, result)
        results.append(result)
        new = {m: a.partitions for m, a in result.assignments.items()}
        revoked = any(set(owned.get(m, ())) - set(p) for m, p in new.items())
        owned = new
        generation += 1
        if not revoked:
            return results, owned, generation
    raise AssertionError(f"no stable assignment after {max_rounds} rounds")


def test_off_rack_partitions_nobody_on_their_racks_can_take_stay_with_their_owners() -> None:
    """Each member must hold two partitions with no replica on its rack. It does not keep
    them as owned (KIP-881), but dealt round-robin they would swap between the members
    at every rebalance, each swap a revocation and a follow-up, so the group would never
    settle; they go back to their owners instead."""
    t = ("t0",)
    racks = {TP("t0", 0): frozenset({"ra"}), TP("t0", 1): frozenset({"rb"})}
    owned = {
        "a": (TP("t0", 0), TP("t0", 2), TP("t0", 3)),
        "b": (TP("t0", 1), TP("t0", 4), TP("t0", 5)),
    }
    subs = {"a": coop(t, owned["a"], 3, rack="ra"), "b": coop(t, owned["b"], 3, rack="rb")}
    result = assign({"t0": 6}, subs, racks)
    assert sets(result) == {m: set(tps) for m, tps in owned.items()}


def test_rack_aware_member_leaving_settles_after_one_follow_up() -> None:
    """Found by Hypothesis (test_rack_aware_rounds_converge_complete_and_balanced):
    after a member left, the off-rack partitions that members on racks must hold changed
    hands at every rebalance and the group revoked for five rounds in a row."""
    counts = {"t0": 4, "t1": 10, "t2": 10, "t3": 10}
    replica_racks = {TP("t2", 8): frozenset({"rc"}), TP("t2", 9): frozenset({"rc"})}
    replica_racks.update({TP("t3", p): frozenset({"rc"}) for p in range(3)})
    replica_racks.update({TP("t3", p): frozenset({"ra", "rc"}) for p in range(3, 10)})
    metadata = ClusterMetadata.from_partition_counts(counts, replica_racks=replica_racks)
    racks = {"00": "rc", "000": "rc", "1": None, "0": "ra"}
    topics_of = dict.fromkeys(racks, tuple(counts))
    assignor = CooperativeStickyAssignor()
    results, owned, generation = _rounds_until_stable(
        assignor, metadata, topics_of, {}, 1, max_rounds=1, racks=racks
    )
    del topics_of["000"]
    del owned["000"]
    results, owned, generation = _rounds_until_stable(
        assignor, metadata, topics_of, owned, generation, max_rounds=2, racks=racks
    )
    check_valid(counts, topics_of, results[-1])
    check_equal_balance(results[-1])


@given(problems(equal=True, with_claims=False), events)
@settings(max_examples=120)
def test_equal_subscriptions_one_follow_up_completes_every_move(
    problem: Problem, steps: list[tuple[str, object]]
) -> None:
    metadata = problem.metadata()
    topics = next(iter(problem.members.values())).topics
    topics_of = dict.fromkeys(problem.members, topics)
    assignor = CooperativeStickyAssignor()
    owned: dict[str, Sequence[TopicPartition]] = {}
    generation = 1
    for kind, arg in [("start", None), *steps]:
        if kind == "join":
            assert isinstance(arg, str)
            topics_of.setdefault(arg, topics)
        elif kind == "leave" and len(topics_of) > 1:
            assert isinstance(arg, int)
            gone = sorted(topics_of)[arg % len(topics_of)]
            del topics_of[gone]
            owned.pop(gone, None)
        before = dict(owned)
        results, owned, generation = _rounds_until_stable(
            assignor, metadata, topics_of, owned, generation, max_rounds=2
        )
        final = results[-1]
        check_valid(problem.counts, topics_of, final)
        check_equal_balance(final)
        if kind == "leave":
            # Survivors keep everything and nothing waits for a follow-up.
            assert len(results) == 1
            for m, had in before.items():
                assert set(had) <= set(final.assignments[m].partitions)


@given(problems(equal=False, with_claims=False), events)
@settings(max_examples=120)
def test_unequal_subscriptions_converge_to_a_balanced_assignment(
    problem: Problem, steps: list[tuple[str, object]]
) -> None:
    metadata = problem.metadata()
    topics_of = {m: d.topics for m, d in problem.members.items()}
    pool = sorted({t for d in problem.members.values() for t in d.topics})
    assignor = CooperativeStickyAssignor()
    owned: dict[str, Sequence[TopicPartition]] = {}
    generation = 1
    for kind, arg in [("start", None), *steps]:
        if kind == "join":
            assert isinstance(arg, str)
            topics_of.setdefault(arg, tuple(pool[: 1 + len(arg) % max(1, len(pool))]))
        elif kind == "leave" and len(topics_of) > 1:
            assert isinstance(arg, int)
            gone = sorted(topics_of)[arg % len(topics_of)]
            del topics_of[gone]
            owned.pop(gone, None)
        results, owned, generation = _rounds_until_stable(
            assignor, metadata, topics_of, owned, generation, max_rounds=4
        )
        check_valid(problem.counts, topics_of, results[-1])
        check_balanced(problem.counts, topics_of, results[-1])


@given(st.one_of(problems(equal=False), problems(equal=True), problems(equal=True, racks=True)))
@settings(max_examples=200)
def test_arbitrary_claims_never_cause_a_handover(problem: Problem) -> None:
    """Stale, duplicated, invalid and rack-mismatched claims: no partition goes to a new
    owner while another member claims it, and only such partitions are left out."""
    subs = {
        m: coop(d.topics, d.owned, d.generation, rack=d.rack) for m, d in problem.members.items()
    }
    result = CooperativeStickyAssignor().assign(
        problem.metadata(), GroupSubscription(subscriptions=subs)
    )
    check_no_handover(subs, result)
    topics_of = {m: d.topics for m, d in problem.members.items()}
    check_valid(problem.counts, topics_of, result, complete=False)
    assigned = {tp for a in result.assignments.values() for tp in a.partitions}
    claimed = {tp for sub in subs.values() for tp in sub.owned_partitions}
    everything: set[TopicPartition] = set()
    for topics in topics_of.values():
        everything |= subscribable(problem.counts, topics)
    assert everything - assigned <= claimed, "left out a partition nobody owns"


@given(problems(equal=True, with_claims=False))
@settings(max_examples=80)
def test_same_placement_as_sticky_when_nobody_owns_anything(problem: Problem) -> None:
    from coopconsumer.assignors import StickyAssignor

    subs = {m: coop(d.topics) for m, d in problem.members.items()}
    group = GroupSubscription(subscriptions=subs)
    metadata = problem.metadata()
    assert sets(CooperativeStickyAssignor().assign(metadata, group)) == sets(
        StickyAssignor().assign(metadata, group)
    )


@given(problems(equal=True, with_claims=False, racks=True), st.integers(0, 20))
@settings(max_examples=100)
def test_rack_aware_rounds_converge_complete_and_balanced(problem: Problem, leaver: int) -> None:
    """KIP-881 + KIP-429: owned partitions off their member's rack are given up, so a
    rebalance can take an extra follow-up; it still settles, complete and within one."""
    metadata = problem.metadata()
    topics_of = {m: d.topics for m, d in problem.members.items()}
    racks = {m: d.rack for m, d in problem.members.items()}
    assignor = CooperativeStickyAssignor()
    owned: dict[str, Sequence[TopicPartition]] = {}
    generation = 1
    for phase in ("start", "leave"):
        if phase == "leave" and len(topics_of) > 1:
            gone = sorted(topics_of)[leaver % len(topics_of)]
            del topics_of[gone]
            owned.pop(gone, None)
        results, owned, generation = _rounds_until_stable(
            assignor, metadata, topics_of, owned, generation, max_rounds=4, racks=racks
        )
        check_valid(problem.counts, topics_of, results[-1])
        check_equal_balance(results[-1])
