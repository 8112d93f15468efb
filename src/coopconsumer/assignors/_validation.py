"""Checks the leader runs on an assignor's result before sending it in SyncGroup.

``check_assignment`` catches results that would break the group under any protocol;
``validate_cooperative_assignment`` enforces KIP-429's rule for COOPERATIVE (Java's
``ConsumerCoordinator.validateCooperativeAssignment``).

A built-in sticky assignor's ``CompactPartitions`` is checked without making its
partitions into objects: its index runs are partitions of its ``PartitionSpace``, so
only that space is checked against the metadata and the subscriptions.

Pure: imports only ``_api``, ``_compact``, ``_types`` and ``_errors``; no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter

from .._errors import InvalidAssignmentError
from .._types import TopicPartition
from ._api import Assignment, ClusterMetadata, GroupAssignment, GroupSubscription, Subscription
from ._compact import CompactPartitions, PartitionSpace

__all__ = ["check_assignment", "validate_cooperative_assignment"]

#: How many offending items an error message lists before summarising the rest.
MAX_LISTED = 10


def _listing(items: Iterable[str], total: int) -> str:
    shown = list(items)[:MAX_LISTED]
    text = "; ".join(shown)
    if total > len(shown):
        text += f"; ... and {total - len(shown)} more"
    return text


def _order(member_id: object) -> tuple[bool, str]:
    # Sort key for member ids in messages. A broken assignor may return keys that are
    # not strings (None, ints): they must be reported, not crash the sort with TypeError.
    if isinstance(member_id, str):
        return (False, member_id)
    return (True, repr(member_id))


def _members(member_ids: Iterable[str]) -> str:
    return ", ".join(repr(m) for m in sorted(member_ids, key=_order))


def validate_cooperative_assignment(
    group_subscription: GroupSubscription,
    group_assignment: GroupAssignment,
    *,
    assignor_name: str,
) -> None:
    """Reject an assignment that hands a partition straight from one member to another.

    Under COOPERATIVE a partition must be revoked by its owner (one rebalance) before
    it is assigned to someone else (the follow-up rebalance) - KIP-429. A partition that
    is newly assigned to a member (not in that member's ``owned_partitions``) while
    another member lists it in its ``owned_partitions`` breaks that rule. Java checks
    against partitions the owner is losing; this check is a little stricter (it also
    catches the owner keeping it, which is a double assignment anyway).

    Raises ``InvalidAssignmentError`` naming the assignor and each offending partition
    with its previous and new owner (the first ten; the rest are counted). Nothing is
    changed: the leader should fail the rebalance rather than send the result.
    """
    subscriptions = group_subscription.subscriptions
    owned_by = {m: frozenset(s.owned_partitions) for m, s in subscriptions.items()}
    all_owned: set[TopicPartition] = set().union(*owned_by.values())
    if not all_owned:
        return

    # A partition added to a member (not in its own owned_partitions) breaks the rule
    # exactly when some member owns it, and that owner is necessarily another member.
    # Set operations keep the usual no-violation pass at C speed for a million
    # partitions; owners are looked up only for the violations, to name them.
    added_owned: list[tuple[str, set[TopicPartition]]] = []
    for member_id, assignment in group_assignment.assignments.items():
        added = set(assignment.partitions)
        added -= owned_by.get(member_id, frozenset())
        added &= all_owned
        if added:
            added_owned.append((member_id, added))
    if not added_owned:
        return

    moved: set[TopicPartition] = set().union(*(tps for _, tps in added_owned))
    owners: dict[TopicPartition, list[str]] = {}
    for member_id, owned in owned_by.items():
        for tp in owned & moved:
            owners.setdefault(tp, []).append(member_id)
    violations = [(tp, owners[tp], member_id) for member_id, tps in added_owned for tp in tps]
    violations.sort(key=lambda v: (v[0], _order(v[2])))
    details = (
        f"{tp} from {_members(previous)} to {new_owner!r}" for tp, previous, new_owner in violations
    )
    raise InvalidAssignmentError(
        f"assignor {assignor_name!r} supports COOPERATIVE but assigned "
        f"{len(violations)} partition(s) to a new owner while another member still owns "
        f"them; under KIP-429 a partition must be revoked in one rebalance and assigned "
        f"in the next: {_listing(details, len(violations))}"
    )


def check_assignment(
    metadata: ClusterMetadata,
    group_subscription: GroupSubscription,
    group_assignment: GroupAssignment,
    *,
    assignor_name: str,
) -> None:
    """Check a leader's assignment is one the group can run, whatever the protocol.

    Raises ``InvalidAssignmentError`` naming the assignor and listing every problem
    found (the first ten of each kind; the rest are counted):

    - ``group_assignment`` is not a ``GroupAssignment``, or an entry is not an
      ``Assignment``;
    - a member of the subscription has no entry, or an entry names no member;
    - a partition is assigned to two members (or twice to one);
    - a member gets a partition of a topic it is not subscribed to;
    - a partition does not exist in ``metadata`` (unknown topic or partition number),
      unless it goes back to a member that reports owning it: KIP-429 lets an assignor
      return such "unknown-but-owned" partitions to their claimant, e.g. when this
      leader's metadata is older than the previous leader's.

    Partitions left unassigned are allowed: cooperative assignors leave moving
    partitions out for a round, and an assignor may choose to leave some idle.
    """
    if not isinstance(group_assignment, GroupAssignment):
        raise InvalidAssignmentError(
            f"assignor {assignor_name!r} returned {type(group_assignment).__name__}, "
            f"not a GroupAssignment"
        )
    subscriptions = group_subscription.subscriptions
    assignments = group_assignment.assignments
    problems: list[str] = []

    bad_values = [m for m, a in assignments.items() if not isinstance(a, Assignment)]
    if bad_values:
        raise InvalidAssignmentError(
            f"assignor {assignor_name!r} returned entries that are not Assignment "
            f"objects for member(s) {_members(bad_values)}"
        )

    malformed = [
        (member_id, tp)
        for member_id, assignment in assignments.items()
        if not _all_partitions(assignment.partitions)
        for tp in assignment.partitions
        if not _is_partition(tp)
    ]
    if malformed:
        details = (f"{m!r} got {tp!r}" for m, tp in malformed)
        raise InvalidAssignmentError(
            f"assignor {assignor_name!r} returned {len(malformed)} entries that are not "
            f"TopicPartition(topic: str, partition: int): {_listing(details, len(malformed))}"
        )

    missing = subscriptions.keys() - assignments.keys()
    if missing:
        problems.append(
            f"no assignment for {len(missing)} member(s) of the group: "
            f"{_listing((repr(m) for m in sorted(missing, key=_order)), len(missing))}"
        )
    unknown = assignments.keys() - subscriptions.keys()
    if unknown:
        problems.append(
            f"assignment for {len(unknown)} member(s) not in the group: "
            f"{_listing((repr(m) for m in sorted(unknown, key=_order)), len(unknown))}"
        )

    problems.extend(_duplicates(assignments))
    problems.extend(_unsubscribed(subscriptions, assignments))
    problems.extend(_nonexistent(metadata, subscriptions, assignments))

    if problems:
        raise InvalidAssignmentError(
            f"assignor {assignor_name!r} returned an invalid assignment: " + " | ".join(problems)
        )


def _all_partitions(values: Sequence[TopicPartition]) -> bool:
    """Fast path (C-level maps) for the usual case: every entry a TopicPartition of
    (str, int). A False only sends the caller to the exact per-entry check."""
    if isinstance(values, CompactPartitions):
        values = values.kept  # the runs make TopicPartition(str, int) by construction
    if not values:
        return True
    if set(map(type, values)) != {TopicPartition}:
        return False
    return set(map(type, map(itemgetter(0), values))) == {str} and set(
        map(type, map(itemgetter(1), values))
    ) == {int}


def _is_partition(value: object) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
        and not isinstance(value[1], bool)
    )


def _compact_space(assignments: Mapping[str, Assignment]) -> PartitionSpace | None:
    """The one space of the ``CompactPartitions`` among ``assignments``, or None."""
    spaces = {
        id(a.partitions.space): a.partitions.space
        for a in assignments.values()
        if isinstance(a.partitions, CompactPartitions)
    }
    return next(iter(spaces.values())) if len(spaces) == 1 else None


def _distinct_numbers(space: PartitionSpace, assignments: Mapping[str, Assignment]) -> int:
    """How many distinct numbers the partitions map to in ``space``, or -1 when some
    partition is not of it. Equal partitions map to equal numbers, so a count equal to
    the number of partitions proves them distinct; a lower one proves nothing (a
    partition number out of range may map onto another topic's)."""
    numbers: set[int] = set()
    try:
        for assignment in assignments.values():
            partitions = assignment.partitions
            if isinstance(partitions, CompactPartitions) and partitions.space is space:
                for run in partitions.runs:
                    numbers.update(run)
                partitions = partitions.kept
            numbers.update(space.unchecked_indices(partitions))
    except (KeyError, TypeError):
        return -1
    return len(numbers)


def _duplicates(assignments: Mapping[str, Assignment]) -> list[str]:
    total = sum(len(a.partitions) for a in assignments.values())
    space = _compact_space(assignments)
    if space is not None and _distinct_numbers(space, assignments) == total:
        return []  # compact results: numbers, no TopicPartition objects
    distinct: set[TopicPartition] = set()
    for assignment in assignments.values():
        distinct.update(assignment.partitions)
    if len(distinct) == total:  # the common case, checked at C speed
        return []
    holders: dict[TopicPartition, list[str]] = {}
    for member_id, assignment in assignments.items():
        for tp in assignment.partitions:
            holders.setdefault(tp, []).append(member_id)
    doubled = sorted((tp, members) for tp, members in holders.items() if len(members) > 1)
    details = (f"{tp} to {_members(ms)}" for tp, ms in doubled)
    return [
        f"{len(doubled)} partition(s) assigned more than once: {_listing(details, len(doubled))}"
    ]


def _unsubscribed(
    subscriptions: Mapping[str, Subscription], assignments: Mapping[str, Assignment]
) -> list[str]:
    found: list[tuple[str, str]] = []
    topic_of = itemgetter(0)
    for member_id, assignment in assignments.items():
        subscription = subscriptions.get(member_id)
        if subscription is None:
            continue  # reported as a member not in the group
        subscribed = set(subscription.topics)
        partitions = assignment.partitions
        if isinstance(partitions, CompactPartitions) and subscribed.issuperset(
            partitions.space.topics
        ):
            partitions = partitions.kept  # every run's topic is subscribed
        extra = set(map(topic_of, partitions)) - subscribed
        found.extend((member_id, topic) for topic in sorted(extra))
    if not found:
        return []
    found.sort(key=lambda pair: (_order(pair[0]), pair[1]))
    details = (f"{m!r} got {t!r}" for m, t in found)
    return [
        f"{len(found)} member/topic pair(s) assigned without a subscription: "
        f"{_listing(details, len(found))}"
    ]


def _nonexistent(
    metadata: ClusterMetadata,
    subscriptions: Mapping[str, Subscription],
    assignments: Mapping[str, Assignment],
) -> list[str]:
    counts = metadata.partition_counts
    bad: set[TopicPartition] = set()
    checked_spaces: dict[int, bool] = {}
    for member_id, assignment in assignments.items():
        partitions = assignment.partitions
        if isinstance(partitions, CompactPartitions):
            space = partitions.space
            known_space = checked_spaces.get(id(space))
            if known_space is None:
                known_space = all(counts.get(t) == n for t, n in space.count_of.items())
                checked_spaces[id(space)] = known_space
            if known_space:
                partitions = partitions.kept  # every run is a partition of the metadata
        if not partitions:
            continue
        # Fast path: every partition number within the smallest count of the member's
        # topics proves them all valid, at C speed.
        topics = set(map(itemgetter(0), partitions))
        known = [counts[t] for t in topics if t in counts]
        if len(known) == len(topics):
            numbers = list(map(itemgetter(1), partitions))
            if min(numbers) >= 0 and max(numbers) < min(known):
                continue
        subscription = subscriptions.get(member_id)
        owned = set(subscription.owned_partitions) if subscription is not None else set()
        for tp in partitions:
            count = counts.get(tp[0])
            if (count is None or not 0 <= tp[1] < count) and tp not in owned:
                bad.add(tp)
    if not bad:
        return []
    ordered = sorted(bad)
    return [
        f"{len(ordered)} partition(s) not in the metadata: "
        f"{_listing((str(tp) for tp in ordered), len(ordered))}"
    ]
