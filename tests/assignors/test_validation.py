"""validate_cooperative_assignment (KIP-429's rule) and check_assignment (the leader's
sanity check on every assignor result)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import pytest
from _strategies_basic import problems
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from coopconsumer._errors import AssignorError, InvalidAssignmentError
from coopconsumer.assignors import (
    Assignment,
    ClusterMetadata,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    GroupAssignment,
    GroupSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    validate_cooperative_assignment,
)
from coopconsumer.assignors._compact import CompactPartitions, PartitionSpace
from coopconsumer.assignors._validation import check_assignment

TP = TopicPartition


def _group(
    owned: Mapping[str, Sequence[TopicPartition]], topics: Sequence[str] = ("t",)
) -> GroupSubscription:
    return GroupSubscription(
        subscriptions={
            m: Subscription(topics=topics, owned_partitions=ps) for m, ps in owned.items()
        }
    )


def _result(assigned: Mapping[str, Sequence[TopicPartition]]) -> GroupAssignment:
    return GroupAssignment(assignments={m: Assignment(partitions=ps) for m, ps in assigned.items()})


def _coop_error(group: GroupSubscription, result: GroupAssignment) -> str:
    with pytest.raises(InvalidAssignmentError) as info:
        validate_cooperative_assignment(group, result, assignor_name="my-coop")
    return str(info.value)


# --- validate_cooperative_assignment -------------------------------------------------------


def test_invalid_assignment_error_is_an_assignor_error() -> None:
    assert issubclass(InvalidAssignmentError, AssignorError)


def test_first_generation_has_nothing_to_violate() -> None:
    group = _group({"a": [], "b": []})
    validate_cooperative_assignment(
        group, _result({"a": [TP("t", 0)], "b": [TP("t", 1)]}), assignor_name="x"
    )


def test_keeping_owned_and_adding_free_partitions_is_fine() -> None:
    group = _group({"a": [TP("t", 0), TP("t", 1)], "b": []})
    result = _result({"a": [TP("t", 0)], "b": [TP("t", 2)]})
    validate_cooperative_assignment(group, result, assignor_name="x")


def test_revoking_without_reassigning_is_the_cooperative_way() -> None:
    # t-1 leaves a this round and stays unassigned until the follow-up rebalance.
    group = _group({"a": [TP("t", 0), TP("t", 1)], "b": []})
    validate_cooperative_assignment(group, _result({"a": [TP("t", 0)], "b": []}), assignor_name="x")


def test_handing_a_partition_straight_to_another_member_is_rejected() -> None:
    group = _group({"a": [TP("t", 0), TP("t", 1)], "b": []})
    message = _coop_error(group, _result({"a": [TP("t", 0)], "b": [TP("t", 1)]}))
    assert "'my-coop'" in message
    assert "t-1 from 'a' to 'b'" in message
    assert "1 partition(s)" in message


def test_adding_a_partition_its_owner_keeps_is_rejected_too() -> None:
    group = _group({"a": [TP("t", 0)], "b": []})
    message = _coop_error(group, _result({"a": [TP("t", 0)], "b": [TP("t", 0)]}))
    assert "t-0 from 'a' to 'b'" in message


def test_all_previous_claimants_are_named() -> None:
    group = _group({"a": [TP("t", 0)], "b": [TP("t", 0)], "c": []})
    message = _coop_error(group, _result({"a": [], "b": [], "c": [TP("t", 0)]}))
    assert "t-0 from 'a', 'b' to 'c'" in message


def test_member_keeping_a_partition_another_also_claims_is_not_a_handover() -> None:
    # Two members claim t-0 (one from a stale generation); giving it to one of them adds
    # it to nobody, so nothing moves in this round.
    group = _group({"a": [TP("t", 0)], "b": [TP("t", 0)]})
    validate_cooperative_assignment(group, _result({"a": [TP("t", 0)], "b": []}), assignor_name="x")


def test_long_violation_lists_are_truncated_in_order() -> None:
    owned = {"a": [TP("t", p) for p in range(25)], "b": []}
    message = _coop_error(_group(owned), _result({"a": [], "b": owned["a"]}))
    assert "25 partition(s)" in message
    assert "t-0 from 'a' to 'b'" in message
    assert "t-9 from 'a' to 'b'" in message
    assert "t-10 " not in message
    assert "... and 15 more" in message


def test_result_member_missing_from_subscription_counts_as_owning_nothing() -> None:
    group = _group({"a": [TP("t", 0)]})
    assert "to 'ghost'" in _coop_error(group, _result({"a": [], "ghost": [TP("t", 0)]}))


@settings(max_examples=150, deadline=None)
@given(problems(), st.data())
def test_rejects_exactly_when_a_partition_changes_owner(
    problem: tuple[ClusterMetadata, GroupSubscription], data: st.DataObject
) -> None:
    # Owned partitions from one range round; the next round is a roundrobin result on
    # the same members, optionally with moving partitions stripped as KIP-429 requires.
    metadata, group = problem
    previous = RangeAssignor().assign(metadata, group).assignments
    owned_group = GroupSubscription(
        subscriptions={
            m: Subscription(topics=s.topics, owned_partitions=previous[m].partitions)
            for m, s in group.subscriptions.items()
        }
    )
    proposed = RoundRobinAssignor().assign(metadata, group).assignments
    owner = {tp: m for m, a in previous.items() for tp in a.partitions}
    moving = {tp for m, a in proposed.items() for tp in a.partitions if owner.get(tp, m) != m}
    strip = data.draw(st.booleans())
    result = GroupAssignment(
        assignments={
            m: Assignment(partitions=[tp for tp in a.partitions if not (strip and tp in moving)])
            for m, a in proposed.items()
        }
    )
    if strip or not moving:
        validate_cooperative_assignment(owned_group, result, assignor_name="rr")
    else:
        message = _coop_error(owned_group, result)
        assert f"{len(moving)} partition(s)" in message


@settings(max_examples=100, deadline=None)
@given(problems(), st.data())
def test_cooperative_sticky_second_round_passes(
    problem: tuple[ClusterMetadata, GroupSubscription], data: st.DataObject
) -> None:
    # Cross-check with the built-in COOPERATIVE assignor: after a membership change it
    # must leave moving partitions out, so its result always validates.
    metadata, group = problem
    first = CooperativeStickyAssignor().assign(metadata, group).assignments
    members = dict(group.subscriptions)
    if len(members) > 1 and data.draw(st.booleans()):
        del members[data.draw(st.sampled_from(sorted(members)))]
    else:
        members["newcomer"] = next(iter(members.values()))
    second_group = GroupSubscription(
        subscriptions={
            m: Subscription(
                topics=s.topics,
                owned_partitions=first[m].partitions if m in first else (),
                generation_id=1 if m in first else -1,
            )
            for m, s in members.items()
        }
    )
    result = CooperativeStickyAssignor().assign(metadata, second_group)
    check_assignment(metadata, second_group, result, assignor_name="cooperative-sticky")
    validate_cooperative_assignment(second_group, result, assignor_name="cooperative-sticky")


# --- check_assignment ------------------------------------------------------------------------

METADATA = ClusterMetadata.from_partition_counts({"t": 3, "u": 2})


def _subs(**topics: Sequence[str]) -> GroupSubscription:
    return GroupSubscription(subscriptions={m: Subscription(topics=ts) for m, ts in topics.items()})


def _check_error(group: GroupSubscription, result: object) -> str:
    with pytest.raises(InvalidAssignmentError) as info:
        check_assignment(METADATA, group, result, assignor_name="custom")  # type: ignore[arg-type]
    assert "'custom'" in str(info.value)
    return str(info.value)


def test_valid_assignment_passes_even_with_idle_partitions() -> None:
    group = _subs(a=["t"], b=["t", "u"])
    check_assignment(
        METADATA,
        group,
        _result({"a": [TP("t", 0)], "b": [TP("t", 2), TP("u", 1)]}),
        assignor_name="custom",
    )
    check_assignment(METADATA, group, _result({"a": [], "b": []}), assignor_name="custom")


def test_missing_member() -> None:
    message = _check_error(_subs(a=["t"], b=["t"]), _result({"a": [TP("t", 0)]}))
    assert "no assignment for 1 member(s) of the group: 'b'" in message


def test_member_not_in_group() -> None:
    message = _check_error(_subs(a=["t"]), _result({"a": [], "zombie": []}))
    assert "1 member(s) not in the group: 'zombie'" in message


def test_partition_assigned_to_two_members() -> None:
    message = _check_error(
        _subs(a=["t"], b=["t"]), _result({"a": [TP("t", 0)], "b": [TP("t", 0), TP("t", 1)]})
    )
    assert "1 partition(s) assigned more than once: t-0 to 'a', 'b'" in message


def test_partition_listed_twice_for_one_member() -> None:
    message = _check_error(_subs(a=["t"]), _result({"a": [TP("t", 1), TP("t", 1)]}))
    assert "t-1 to 'a', 'a'" in message


def test_partition_of_unsubscribed_topic() -> None:
    message = _check_error(_subs(a=["t"], b=["u"]), _result({"a": [TP("u", 0)], "b": []}))
    assert "'a' got 'u'" in message


@pytest.mark.parametrize(
    ("partition", "shown"),
    [(TP("t", 3), "t-3"), (TP("t", -1), "t--1"), (TP("gone", 0), "gone-0")],
)
def test_partition_not_in_metadata(partition: TopicPartition, shown: str) -> None:
    group = _subs(a=["t", "gone"])
    message = _check_error(group, _result({"a": [partition]}))
    assert f"1 partition(s) not in the metadata: {shown}" in message


def test_unknown_partition_may_go_back_to_the_member_that_owns_it() -> None:
    # KIP-429 leader step 2.3.6: "unknown-but-owned" partitions (the leader's metadata
    # lags a previous leader's, so it does not know t-5 yet) may be given back to their
    # claimant. Handing one to anybody else is still an error.
    group = GroupSubscription(
        subscriptions={
            "a": Subscription(topics=["t"], owned_partitions=[TP("t", 5), TP("t", 0)]),
            "b": Subscription(topics=["t"]),
        }
    )
    back = _result({"a": [TP("t", 0), TP("t", 5)], "b": [TP("t", 1)]})
    check_assignment(METADATA, group, back, assignor_name="custom")
    elsewhere = _result({"a": [TP("t", 0)], "b": [TP("t", 1), TP("t", 5)]})
    assert "1 partition(s) not in the metadata: t-5" in _check_error(group, elsewhere)


def test_all_problems_are_reported_together() -> None:
    group = _subs(a=["t"], b=["t"], c=["t"])
    result = _result({"a": [TP("t", 0), TP("u", 0)], "b": [TP("t", 0), TP("t", 7)], "x": []})
    message = _check_error(group, result)
    for fragment in (
        "no assignment for 1 member(s) of the group: 'c'",
        "not in the group: 'x'",
        "assigned more than once: t-0",
        "'a' got 'u'",
        "not in the metadata: t-7",
    ):
        assert fragment in message


def test_long_problem_lists_are_truncated() -> None:
    group = _subs(a=["t"])
    result = _result({"a": [TP("t", 100 + i) for i in range(30)]})
    message = _check_error(group, result)
    assert "30 partition(s) not in the metadata" in message
    assert "... and 20 more" in message


def test_member_ids_that_are_not_strings_are_reported_not_a_crash() -> None:
    # An assignor returning None/int keys must get an InvalidAssignmentError (which the
    # leader turns into a failed assignment), not a TypeError from sorting the ids.
    group = _subs(a=["t"], b=["t"])
    bad: dict[object, Assignment] = {
        "a": Assignment(partitions=[TP("t", 0)]),
        None: Assignment(partitions=[TP("t", 0)]),
        7: Assignment(partitions=[TP("t", 0)]),
    }
    message = _check_error(group, GroupAssignment(assignments=bad))  # type: ignore[arg-type]
    assert "no assignment for 1 member(s) of the group: 'b'" in message
    assert "2 member(s) not in the group: 7; None" in message
    assert "t-0 to 'a', 7, None" in message
    not_assignments = GroupAssignment(assignments={None: [], "a": 3})  # type: ignore[dict-item]
    assert "for member(s) 'a', None" in _check_error(group, not_assignments)
    with pytest.raises(InvalidAssignmentError, match="t-0 from 'a' to 7"):
        validate_cooperative_assignment(
            _group({"a": [TP("t", 0)]}),
            GroupAssignment(assignments={"a": Assignment(partitions=[]), 7: bad[7]}),  # type: ignore[dict-item]
            assignor_name="x",
        )


def test_not_a_group_assignment() -> None:
    assert "returned dict, not a GroupAssignment" in _check_error(_subs(a=["t"]), {"a": []})


def test_entries_that_are_not_assignments() -> None:
    bad = GroupAssignment(assignments={"a": [TP("t", 0)]})  # type: ignore[dict-item]
    assert "not Assignment objects for member(s) 'a'" in _check_error(_subs(a=["t"]), bad)


@pytest.mark.parametrize("entry", [("t", "0"), ("t",), "t-0", ("t", True), (0, 0)])
def test_malformed_partitions(entry: object) -> None:
    result = _result({"a": [entry]})  # type: ignore[list-item]
    assert "not TopicPartition" in _check_error(_subs(a=["t"]), result)


def test_plain_tuples_count_as_partitions() -> None:
    result = _result({"a": [("t", 0)]})  # type: ignore[list-item]
    check_assignment(METADATA, _subs(a=["t"]), result, assignor_name="custom")


BUILTINS: list[ConsumerPartitionAssignor] = [
    RangeAssignor(),
    RoundRobinAssignor(),
    StickyAssignor(),
    CooperativeStickyAssignor(),
]


@pytest.mark.parametrize("assignor", BUILTINS, ids=lambda a: a.name)
@settings(max_examples=100, deadline=None)
@given(problem=problems(racks=True))
def test_builtin_results_always_pass(
    assignor: ConsumerPartitionAssignor, problem: tuple[ClusterMetadata, GroupSubscription]
) -> None:
    metadata, group = problem
    result = assignor.assign(metadata, group)
    check_assignment(metadata, group, result, assignor_name=assignor.name)


@settings(max_examples=100, deadline=None)
@given(problems(), st.data())
def test_corrupted_results_fail(
    problem: tuple[ClusterMetadata, GroupSubscription], data: st.DataObject
) -> None:
    metadata, group = problem
    assignments = dict(RangeAssignor().assign(metadata, group).assignments)
    corruption = data.draw(st.sampled_from(["drop", "extra", "duplicate", "foreign", "ghost"]))
    member = data.draw(st.sampled_from(sorted(assignments)))
    if corruption == "drop":
        del assignments[member]
    elif corruption == "extra":
        assignments["not-a-member-" + member] = Assignment(partitions=())
    elif corruption == "ghost":
        ghost = TP("no-such-topic", 0)
        assignments[member] = Assignment(partitions=(*assignments[member].partitions, ghost))
    else:
        holders = [m for m, a in assignments.items() if a.partitions]
        if not holders:
            return
        donor = data.draw(st.sampled_from(holders))
        tp = data.draw(st.sampled_from(assignments[donor].partitions))
        if corruption == "duplicate":
            target = data.draw(st.sampled_from(sorted(assignments)))
        else:  # "foreign": hand it to a member not subscribed to its topic
            outsiders = [m for m, s in group.subscriptions.items() if tp.topic not in s.topics]
            if not outsiders:
                return
            target = data.draw(st.sampled_from(outsiders))
            assignments[donor] = Assignment(
                partitions=[p for p in assignments[donor].partitions if p != tp]
            )
        assignments[target] = Assignment(partitions=(*assignments[target].partitions, tp))
    with pytest.raises(InvalidAssignmentError):
        check_assignment(
            metadata, group, GroupAssignment(assignments=assignments), assignor_name="x"
        )


# --------------------------------------------------------------------------- compact results


def _plus(assignment: Assignment, extra: tuple[TopicPartition, ...]) -> Assignment:
    """``assignment`` with ``extra`` partitions added, keeping a compact result compact."""
    partitions = assignment.partitions
    if isinstance(partitions, CompactPartitions):
        kept = (*partitions.kept, *extra)
        return Assignment(partitions=CompactPartitions(kept, partitions.space, partitions.runs))
    return Assignment(partitions=(*partitions, *extra))


@settings(max_examples=100, deadline=None)
@given(problems(equal_subscriptions=True), st.data())
def test_corrupted_compact_results_fail(
    problem: tuple[ClusterMetadata, GroupSubscription], data: st.DataObject
) -> None:
    # The checks read a CompactPartitions' numbers without making objects: they must
    # still catch a duplicate, a foreign or a ghost partition added to one.
    metadata, group = problem
    assignments = dict(CooperativeStickyAssignor().assign(metadata, group).assignments)
    compact = sorted(
        m for m, a in assignments.items() if isinstance(a.partitions, CompactPartitions)
    )
    assume(compact)
    member = data.draw(st.sampled_from(compact))
    corruption = data.draw(st.sampled_from(["duplicate", "foreign", "ghost", "twice"]))
    if corruption == "ghost":
        assignments[member] = _plus(assignments[member], (TP("no-such-topic", 0),))
    elif corruption == "twice":
        first = assignments[member].partitions[0]
        assignments[member] = _plus(assignments[member], (first,))
    elif corruption == "duplicate":
        others = [m for m, a in assignments.items() if a.partitions and m != member]
        assume(others)
        donor = data.draw(st.sampled_from(others))
        tp = data.draw(st.sampled_from(tuple(assignments[donor].partitions)))
        assignments[member] = _plus(assignments[member], (tp,))
    else:
        outsiders = [m for m, s in group.subscriptions.items() if "foreign" not in s.topics]
        metadata = ClusterMetadata.from_partition_counts(
            {**metadata.partition_counts, "foreign": 1}
        )
        assignments[data.draw(st.sampled_from(outsiders))] = _plus(
            assignments[member], (TP("foreign", 0),)
        )
    with pytest.raises(InvalidAssignmentError):
        check_assignment(
            metadata, group, GroupAssignment(assignments=assignments), assignor_name="x"
        )


def test_compact_runs_outside_the_metadata_or_the_subscription_are_reported() -> None:
    space = PartitionSpace({"t": 5, "u": 2})  # t has 3 partitions in METADATA
    past_the_end = _result({"a": CompactPartitions((), space, [range(2, 5)])})
    message = _check_error(_subs(a=["t"]), past_the_end)
    assert "2 partition(s) not in the metadata: t-3; t-4" in message
    unsubscribed = _result({"a": CompactPartitions((), PartitionSpace({"t": 3, "u": 2}), [[4]])})
    assert "'a' got 'u'" in _check_error(_subs(a=["t"]), unsubscribed)
    fine = _result({"a": CompactPartitions((), PartitionSpace({"t": 3, "u": 2}), [[0, 2]])})
    check_assignment(METADATA, _subs(a=["t"]), fine, assignor_name="custom")
    malformed = _result(
        {"a": CompactPartitions([TP("t", cast(int, 1.5))], PartitionSpace({"t": 3}), [[0]])}
    )
    assert "not TopicPartition" in _check_error(_subs(a=["t"]), malformed)
