"""The sticky assignment algorithm shared by ``sticky`` and ``cooperative-sticky``.

Semantics follow Java's ``AbstractStickyAssignor`` (KIP-54, KIP-341, KIP-429, KIP-881):

* claims: each member reports the partitions it owned and its generation. Claims on
  partitions of topics that no member can be assigned (unknown to the metadata, not
  subscribed) are dropped. A partition claimed by several members goes to the single
  claimer with the highest generation; when several claim it at that highest generation
  nobody keeps it (KAFKA-12984: Java's ``partitionsWithMultiplePreviousOwners``).
* all subscriptions equal: Java's constrained assignment. ``min_quota = P // N``,
  ``max_quota = ceil(P / N)``; members keep owned partitions up to their quota (at most
  ``P % N`` members keep ``max_quota``), and the rest are dealt round-robin, neediest
  member first. O(P) with C-level range, bytearray and slice operations. Without
  rack awareness what is dealt are partition numbers (``_compact.PartitionSpace``)
  and each member's fresh partitions a ``CompactPartitions``: no per-partition
  Python object at all, so a large pass starts no garbage collection (docs/assignors.md,
  "Compact assignments"). Claims are checked and subtracted with one byte per
  partition (see ``_mark_claims``) rather than a set of tuples, which hashing a
  million claims and probing a million partitions made the slowest step.
* otherwise: a general balancing pass. Valid owned partitions of subscribed topics are
  kept, unowned ones go to the least loaded subscriber, then partitions move from a
  member to a subscriber of the same topic holding at least two fewer, until no such
  move exists (Java's ``isBalanced``). Moves prefer partitions the member received this
  round, so previous owners keep what they had.
* rack-aware (KIP-881) when members report racks and the metadata has replica racks on
  those racks that not every partition shares: owned partitions without a replica on
  the member's rack are not kept, and partitions go to members on a replica's rack when
  the balance allows. With equal subscriptions, such a partition that no member on a
  replica's rack takes goes back to its owner when it has room (``_give_back``).

Imports the standard library, the public errors and the assignor value types; no I/O,
no clock. The callers (``_sticky``) pause the cyclic garbage collector around large
passes (``_gc.paused_gc``) only when the assignor was built with ``pause_gc=True``.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress, filterfalse, islice, repeat
from operator import itemgetter
from typing import NamedTuple, TypeVar

from .._errors import AssignorError
from .._types import TopicPartition
from ._api import DEFAULT_GENERATION_ID, ClusterMetadata
from ._compact import CompactPartitions, PartitionSpace, as_partition_number

__all__ = ["MemberData", "StickyResult", "sticky_assign"]

_log = logging.getLogger("coopconsumer.assignors.sticky")

# ``tuple.__new__(TopicPartition, (topic, p))`` through ``map`` builds the named tuples
# in C; calling ``TopicPartition(topic, p)`` runs a Python-level ``__new__`` per
# partition, about twice as slow at a million partitions.
_tuple_new = tuple.__new__
_by_partition_then_topic = itemgetter(1, 0)
_T = TypeVar("_T")


def _make_partitions(topic: str, numbers: Iterable[int]) -> Iterable[TopicPartition]:
    return map(_tuple_new, repeat(TopicPartition), zip(repeat(topic), numbers))


class MemberData(NamedTuple):
    """One member's input to the algorithm (Java's ``MemberData`` plus the subscription)."""

    topics: Sequence[str]
    """Subscribed topics, as sent."""
    owned: Sequence[TopicPartition]
    """Partitions the member reports owning."""
    generation: int = DEFAULT_GENERATION_ID
    """The generation those partitions were assigned in; -1 when unknown."""
    rack_id: str | None = None
    """The member's ``client.rack``; None or empty when not set."""


class StickyResult(NamedTuple):
    """The algorithm's answer.

    Each member's assignment is ``kept[m] + fresh[m]``. ``kept`` holds only partitions
    the member itself claimed; ``fresh`` holds the rest of what it receives (normally
    partitions it did not claim; the cooperative assignor re-checks). Without rack
    awareness, equal subscriptions give ``CompactPartitions`` as ``fresh`` (index runs,
    no ``TopicPartition`` objects; see ``_compact``), and ``assignment`` then returns a
    ``CompactPartitions`` too. ``claimed``
    holds every partition that some member claimed and that can be in a ``fresh``
    list (what the cooperative assignor needs to know which new partitions someone
    still owns). It may hold more claimed partitions than that (all of them, when
    claims conflicted or named partitions that do not exist), never fewer.
    """

    kept: dict[str, Sequence[TopicPartition]]
    fresh: dict[str, Sequence[TopicPartition]]
    claimed: set[TopicPartition]

    def assignment(self, member_id: str) -> Sequence[TopicPartition]:
        """The member's full assignment: kept partitions first, then fresh ones."""
        kept = self.kept[member_id]
        fresh = self.fresh[member_id]
        if isinstance(fresh, CompactPartitions) and fresh:
            return CompactPartitions(kept, fresh.space, fresh.runs)
        if not fresh:
            return tuple(kept)
        if not kept:
            return tuple(fresh)
        return (*kept, *fresh)


# --------------------------------------------------------------------------- racks


class _RackInfo:
    """Which partitions have a replica on which member's rack, when that matters.

    Rack-aware assignment is used only when some member has a rack, some partition has
    a replica on one of the members' racks, and not every partition has replicas on
    every rack (otherwise any placement is rack-local; Java's
    ``useRackAwareAssignment``). When it is off, ``member_rack`` is empty and every
    check says "no mismatch".
    """

    __slots__ = ("member_rack", "partition_racks")

    def __init__(
        self,
        metadata: ClusterMetadata,
        members: Mapping[str, MemberData],
        partition_counts: Mapping[str, int],
    ) -> None:
        self.member_rack: dict[str, str] = {}
        self.partition_racks: Mapping[TopicPartition, frozenset[str]] = {}
        if not metadata.has_rack_info:
            return
        member_rack = {m: d.rack_id for m, d in members.items() if d.rack_id}
        if not member_rack:
            return
        racks = metadata.partition_racks
        all_racks: set[str] = set()
        per_partition: list[frozenset[str]] = []
        empty: frozenset[str] = frozenset()
        for topic, count in partition_counts.items():
            for p in range(count):
                r = racks.get(TopicPartition(topic, p), empty)
                per_partition.append(r)
                all_racks.update(r)
        if all_racks.isdisjoint(member_rack.values()):
            return
        if all(r == all_racks for r in per_partition):
            return
        self.member_rack = member_rack
        self.partition_racks = racks

    @property
    def enabled(self) -> bool:
        return bool(self.member_rack)

    def mismatch(self, member: str, tp: TopicPartition) -> bool:
        """True when the member has a rack and no replica of ``tp`` lives on it."""
        rack = self.member_rack.get(member)
        return rack is not None and rack not in self.partition_racks.get(tp, ())

    def matches(self, member: str, tp: TopicPartition) -> bool:
        """True when the member has a rack holding a replica of ``tp``."""
        rack = self.member_rack.get(member)
        return rack is not None and rack in self.partition_racks.get(tp, ())


# --------------------------------------------------------------------------- claims


def _resolve_claims(
    members: Mapping[str, MemberData],
    order: Sequence[str],
    partition_counts: Mapping[str, int],
) -> dict[str, list[TopicPartition]]:
    """Valid, de-duplicated claims per member, conflicts settled by generation.

    A claim is valid when its topic is assignable and its partition exists. A member
    listing a partition twice claims it once. Between members, the single highest
    generation wins; a tie at the highest generation leaves the partition unowned.
    """
    best: dict[TopicPartition, tuple[int, str | None]] = {}
    per_member: dict[str, list[TopicPartition]] = {}
    ties: list[tuple[TopicPartition, str, str, int]] = []
    for m in order:
        data = members[m]
        gen = data.generation
        mine: list[TopicPartition] = []
        seen: set[TopicPartition] = set()
        for tp in data.owned:
            count = partition_counts.get(tp[0])
            if count is None or not 0 <= tp[1] < count or tp in seen:
                continue
            seen.add(tp)
            mine.append(tp)
            held = best.get(tp)
            if held is None or gen > held[0]:
                best[tp] = (gen, m)
            elif gen == held[0]:
                if held[1] is not None:
                    ties.append((tp, held[1], m, gen))
                best[tp] = (gen, None)
        per_member[m] = mine
    if ties:
        # Java logs each one; one summary keeps a pathological group from flooding logs.
        tp, first, second, gen = ties[0]
        _log.warning(
            "%d partitions are claimed by several members in the same generation and "
            "none of them keeps those (KAFKA-12984), e.g. %s by %s and %s in generation %d",
            len(ties),
            tp,
            first,
            second,
            gen,
        )
    resolved: dict[str, list[TopicPartition]] = {}
    for m, mine in per_member.items():
        resolved[m] = [tp for tp in mine if best[tp][1] == m]
        lost = len(mine) - len(resolved[m])
        if lost:
            _log.info("member %s loses %d claimed partitions to newer or duplicate claims", m, lost)
    return resolved


# --------------------------------------------------------------------------- dealing


def _deal_round_robin(
    order: Sequence[str], needs: Mapping[str, int], partitions: Sequence[_T]
) -> dict[str, Sequence[_T]]:
    """Deal ``partitions`` round-robin to ``order`` (sorted neediest first); return
    what each member got.

    Member ``order[i]`` gets exactly ``needs[order[i]]`` partitions; in every round
    each member that still needs one gets the next partition, as Java's round-robin
    fill. Rounds with the same set of members form one block dealt with slices (of a
    ``range`` of indices, slices are ranges: nothing per partition is allocated).
    """
    dealt: dict[str, Sequence[_T]] = {}
    active = [m for m in order if needs[m] > 0]
    total = sum(needs[m] for m in active)
    if total != len(partitions):
        raise AssignorError(
            f"sticky assignment bookkeeping error: {total} slots for {len(partitions)} partitions"
        )
    counts = [needs[m] for m in active]
    if len(set(counts)) > 64:
        # Many different needs would mean many small blocks: deal one by one instead.
        alive = list(range(len(active)))
        left = counts[:]
        got: list[list[_T]] = [[] for _ in active]
        pos = 0
        while alive:
            still: list[int] = []
            for i in alive:
                got[i].append(partitions[pos])
                pos += 1
                left[i] -= 1
                if left[i]:
                    still.append(i)
            alive = still
        return dict(zip(active, got, strict=True))
    pos = 0
    done = 0  # rounds dealt so far
    a = len(active)
    while a:
        rounds = counts[a - 1] - done
        width = a * rounds
        # Each copy touches every partition object (reference counts): a million
        # partitions cost a few milliseconds per copy, so copy no more than needed.
        block = partitions if width == len(partitions) else partitions[pos : pos + width]
        for j in range(a):
            m = active[j]
            before = dealt.get(m)
            dealt[m] = block[j::a] if before is None else [*before, *block[j::a]]
        pos += width
        done = counts[a - 1]
        while a and counts[a - 1] <= done:
            a -= 1
    return dealt


def _deal_rack_aware(
    order: Sequence[str],
    needs: dict[str, int],
    partitions: Sequence[TopicPartition],
    racks: _RackInfo,
    fresh: dict[str, list[TopicPartition]],
) -> list[TopicPartition]:
    """Give each partition to a member on one of its replicas' racks, within ``needs``.

    Partitions with the fewest rack-local candidates go first (Java sorts by
    ``numConsumersByPartition``); within a rack, members take turns. ``needs`` is
    decremented; the partitions no rack-local member could take are returned in order.
    """
    by_rack: dict[str, list[str]] = {}
    for m in order:
        rack = racks.member_rack.get(m)
        if rack is not None and needs[m] > 0:
            by_rack.setdefault(rack, []).append(m)
    if not by_rack:
        return list(partitions)
    rack_sizes = {r: len(ms) for r, ms in by_rack.items()}
    prt = racks.partition_racks
    empty: frozenset[str] = frozenset()

    def local_members(tp: TopicPartition) -> int:
        return sum(rack_sizes.get(r, 0) for r in prt.get(tp, empty))

    ordered = sorted(partitions, key=local_members)
    cursor = dict.fromkeys(by_rack, 0)
    rest: list[TopicPartition] = []
    for tp in ordered:
        choice: str | None = None
        best_room = -1
        for r in sorted(prt.get(tp, empty)):
            ms = by_rack.get(r)
            if ms and len(ms) > best_room:
                choice, best_room = r, len(ms)
        if choice is None:
            rest.append(tp)
            continue
        ms = by_rack[choice]
        i = cursor[choice] % len(ms)
        m = ms[i]
        fresh[m].append(tp)
        needs[m] -= 1
        if needs[m] == 0:
            ms.pop(i)
            cursor[choice] = i
        else:
            cursor[choice] = i + 1
    return rest


def _give_back(
    off_rack: Mapping[str, Sequence[TopicPartition]],
    needs: dict[str, int],
    partitions: list[TopicPartition],
    fresh: dict[str, list[TopicPartition]],
) -> list[TopicPartition]:
    """Give each member back, within ``needs``, the off-rack partitions it owned that
    are still in ``partitions``; return the rest in order.

    The rack-aware deal has run, so no member on a replica's rack has room for these:
    whoever gets one fetches it off-rack. Dealing them round-robin would hand them to
    other members that did not own them and that give them up again in the next
    rebalance, so a cooperative group would keep revoking and rejoining (the partitions
    change hands every round and no assignment is ever stable). Given back, they stay
    put: the owner releases and gets them again each rebalance without revoking.
    Java's ``AbstractStickyAssignor`` deals them round-robin; giving them back costs no
    balance (``needs`` bounds it) and no locality (docs/assignors.md, rack awareness).
    """
    left = set(partitions)
    back: set[TopicPartition] = set()
    for m, tps in off_rack.items():
        room = needs.get(m, 0)
        if room <= 0:
            continue
        mine = [tp for tp in tps if tp in left][:room]
        if mine:
            fresh[m].extend(mine)
            needs[m] = room - len(mine)
            back.update(mine)
    return [tp for tp in partitions if tp not in back] if back else partitions


# --------------------------------------------------------------------------- entry point


def sticky_assign(metadata: ClusterMetadata, members: Mapping[str, MemberData]) -> StickyResult:
    """Compute a balanced, sticky assignment for ``members`` (see module docstring)."""
    order = sorted(members)
    if not order:
        return StickyResult(kept={}, fresh={}, claimed=set())
    # Java's allSubscriptionsEqual compares topic sets; equal tuples (the common case,
    # since every member sorts the same list) short-circuit in C.
    first = members[order[0]].topics
    first_set: frozenset[str] | None = None
    equal = True
    for m in order:
        topics = members[m].topics
        if topics == first:
            continue
        if first_set is None:
            first_set = frozenset(first)
        if frozenset(topics) != first_set:
            equal = False
            break
    subscribed: set[str] = set(first)
    if not equal:
        for m in order:
            subscribed.update(members[m].topics)
    counts: dict[str, int] = {}
    for topic in sorted(subscribed):
        count = metadata.partition_counts.get(topic)
        if count is None:
            continue
        if count < 0:
            raise AssignorError(f"metadata reports {count} partitions for topic {topic!r}")
        counts[topic] = count
    racks = _RackInfo(metadata, members, counts)
    if equal:
        return _constrained_assign(members, order, counts, racks)
    kept, fresh = _general_assign(members, order, counts, racks)
    return StickyResult(kept=kept, fresh=fresh, claimed=_all_claims(members, order))


def _all_claims(members: Mapping[str, MemberData], order: Sequence[str]) -> set[TopicPartition]:
    claimed: set[TopicPartition] = set()
    for m in order:
        claimed.update(members[m].owned)
    return claimed


# --------------------------------------------------------------------------- constrained


def _partition_numbers(counts: Mapping[str, int]) -> list[int]:
    """``0 .. max count - 1``, shared by every topic's partitions: one int object per
    number instead of one per partition (less to allocate, and less memory for the
    garbage collector to walk over while the assignment builds a million tuples)."""
    return list(range(max(counts.values(), default=0)))


def _all_partitions(counts: Mapping[str, int]) -> list[TopicPartition]:
    numbers = _partition_numbers(counts)
    out: list[TopicPartition] = []
    for topic, n in counts.items():
        out.extend(_make_partitions(topic, islice(numbers, n)))
    return out


def _unclaimed_partitions(
    counts: Mapping[str, int], claimed: set[TopicPartition]
) -> list[TopicPartition]:
    """Partitions (in topic, partition order) that are not in ``claimed``.

    Probes the set with plain ``(topic, p)`` tuples (equal to, and hashing like, a
    ``TopicPartition``) so that only the unclaimed partitions become
    ``TopicPartition``s; the whole scan runs in C.
    """
    out: list[TopicPartition] = []
    for topic, n in counts.items():
        free = filterfalse(claimed.__contains__, zip(repeat(topic, n), range(n), strict=True))
        out.extend(map(_tuple_new, repeat(TopicPartition), free))
    return out


# Turns a row of claim marks (0 free, 1 claimed) into compress() selectors of free ones.
_FREE_SELECTORS = bytes.maketrans(b"\x00\x01", b"\x01\x00")


def _mark_claims(
    members: Mapping[str, MemberData], order: Sequence[str], counts: Mapping[str, int]
) -> dict[str, bytearray] | None:
    """One row of marks per topic (1: some member claims that partition), or None unless
    every claim names an existing partition of an assignable topic and no partition is
    claimed twice.

    That "clean" case is the normal one (members report what the last assignment gave
    them), and it needs no per-partition hashing: a million claims cost one byte store
    each into rows that fit in the CPU cache. Anything else (an unknown topic, a
    partition number out of range or not an int, a partition claimed twice) returns
    None, and the caller settles the claims the general way.
    """
    marks = {topic: bytearray(n) for topic, n in counts.items()}
    claims = 0
    try:
        for m in order:
            owned = members[m].owned
            claims += len(owned)
            for topic, p in owned:
                if p < 0:  # a negative index would mark a partition from the end
                    return None
                marks[topic][p] = 1
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    marked = sum(row.count(1) for row in marks.values())
    return marks if marked == claims else None


def _unmarked_partitions(
    counts: Mapping[str, int], marks: Mapping[str, bytearray]
) -> list[TopicPartition]:
    """Partitions (in topic, partition order) whose mark is 0; the scan runs in C."""
    numbers = _partition_numbers(counts)
    out: list[TopicPartition] = []
    for topic in counts:
        free = compress(numbers, marks[topic].translate(_FREE_SELECTORS))
        out.extend(_make_partitions(topic, free))
    return out


def _unmarked_indices(space: PartitionSpace, marks: Mapping[str, bytearray]) -> list[int]:
    """The indices (into ``space``) of the partitions whose mark is 0, in order; in C."""
    selectors = b"".join(marks[topic].translate(_FREE_SELECTORS) for topic in space.topics)
    return list(compress(range(space.total), selectors))


def _constrained_assign(
    members: Mapping[str, MemberData],
    order: Sequence[str],
    counts: Mapping[str, int],
    racks: _RackInfo,
) -> StickyResult:
    n_members = len(order)
    n_partitions = sum(counts.values())
    # Without rack awareness, what is dealt are partition numbers (``_compact``): the
    # fresh partitions of a million-partition assignment then need no objects at all.
    space = None if racks.enabled else PartitionSpace(counts)
    kept: dict[str, Sequence[TopicPartition]] = {}
    min_quota, extra = divmod(n_partitions, n_members)
    max_quota = min_quota + (1 if extra else 0)
    over = 0  # members keeping max_quota (Java's currentNumMembersWithOverMinQuota)
    under: list[str] = []
    at_min: list[str] = []

    if not any(members[m].owned for m in order):
        # First assignment: nothing to keep, every partition is dealt.
        for m in order:
            kept[m] = ()
        quotas = _Quotas(list(order), at_min, min_quota, extra, over)
        if space is not None:
            fresh = _deal_indices(kept, quotas, range(space.total), space, order)
            return StickyResult(kept=kept, fresh=fresh, claimed=set())
        fresh_tps: dict[str, list[TopicPartition]] = {m: [] for m in order}
        _fill(kept, quotas, _all_partitions(counts), racks, fresh_tps)
        return StickyResult(kept=kept, fresh=dict(fresh_tps), claimed=set())

    marks = _mark_claims(members, order, counts)
    # ``marks`` (the clean case): every claim names an existing partition of a
    # subscribed topic and no partition is claimed twice, so each member's claims are
    # its valid owned partitions.
    owned_by: Mapping[str, Sequence[TopicPartition]] = (
        {m: members[m].owned for m in order}
        if marks is not None
        else _resolve_claims(members, order, counts)
    )
    released: list[TopicPartition] = []
    off_rack: dict[str, list[TopicPartition]] = {}
    for m in order:
        owned = owned_by[m]
        if racks.enabled and m in racks.member_rack:
            # KIP-881: an owned partition with no replica on the member's rack is not
            # kept (Java's racksMismatch filter in assignOwnedPartitions).
            local = [tp for tp in owned if not racks.mismatch(m, tp)]
            if len(local) != len(owned):
                off_rack[m] = [tp for tp in owned if racks.mismatch(m, tp)]
                released.extend(off_rack[m])
                owned = local
        size = len(owned)
        if size < min_quota:
            kept[m] = owned
            under.append(m)
            continue
        if size >= max_quota and over < extra:
            over += 1
            quota = max_quota
        else:
            quota = min_quota
            if over < extra:
                at_min.append(m)
        if size > quota:
            # Keep the lowest partition numbers across topics, as Java does, so that
            # what is given up spreads over topics.
            ordered = sorted(owned, key=_by_partition_then_topic)
            kept[m] = ordered[:quota]
            released.extend(ordered[quota:])
        else:
            kept[m] = owned
    quotas = _Quotas(under, at_min, min_quota, extra, over)

    if marks is not None:
        # What is not kept is what nobody claimed plus what was released, in order.
        for topic, p in released:
            marks[topic][p] = 0
        # A claimed partition can only reach another member's fresh list by being
        # released: those are the ones the cooperative assignor must look at.
        claimed = set(released)
    else:
        # Resolution dropped some claims: recompute from what is actually kept.
        keeping: set[TopicPartition] = set()
        for k in kept.values():
            keeping.update(k)
        marks = _mark_kept(counts, keeping)
        claimed = _all_claims(members, order)
    if space is not None:
        unassigned = _unmarked_indices(space, marks)
        return StickyResult(
            kept=kept, fresh=_deal_indices(kept, quotas, unassigned, space, order), claimed=claimed
        )
    fresh_tps = {m: [] for m in order}
    _fill(kept, quotas, _unmarked_partitions(counts, marks), racks, fresh_tps, off_rack)
    return StickyResult(kept=kept, fresh=dict(fresh_tps), claimed=claimed)


def _mark_kept(counts: Mapping[str, int], keeping: set[TopicPartition]) -> dict[str, bytearray]:
    """One row of marks per topic: 1 for the partitions in ``keeping`` (valid claims).

    A claim's number may be any number equal to an int (``TopicPartition("t", 1.0)``
    equals ``TopicPartition("t", 1)``): it marks that partition, as a set would match.
    """
    marks = {topic: bytearray(n) for topic, n in counts.items()}
    for topic, p in keeping:
        number = as_partition_number(p)
        if number is not None:
            marks[topic][number] = 1
    return marks


class _Quotas(NamedTuple):
    """Who still needs partitions after the claims, and the quotas (see ``_fill``)."""

    under: Sequence[str]
    at_min: Sequence[str]
    min_quota: int
    extra: int
    over: int


def _needs(kept: Mapping[str, Sequence[TopicPartition]], quotas: _Quotas) -> dict[str, int]:
    """How many partitions each member of ``quotas.under`` (or ``at_min``) gets.

    Members under min_quota are filled to it; the remaining max_quota slots go first to
    members that kept exactly min_quota (Java polls them first), then to the filled
    members in the order they fill up (most kept first).
    """
    under, at_min, min_quota, extra, over = quotas
    needs = {m: min_quota - len(kept[m]) for m in under}
    spare = extra - over
    if spare:
        for m in at_min:
            if not spare:
                break
            needs[m] = 1
            spare -= 1
        if spare:
            for m in sorted(under, key=lambda m: (-len(kept[m]), m)):
                if not spare:
                    break
                needs[m] += 1
                spare -= 1
    return needs


def _deal_order(needs: Mapping[str, int]) -> list[str]:
    return sorted((m for m in needs if needs[m] > 0), key=lambda m: (-needs[m], m))


def _deal_indices(
    kept: Mapping[str, Sequence[TopicPartition]],
    quotas: _Quotas,
    unassigned: Sequence[int],
    space: PartitionSpace,
    order: Sequence[str],
) -> dict[str, Sequence[TopicPartition]]:
    """``_fill`` without racks, dealing indices into ``space``: each member's fresh
    partitions become one ``CompactPartitions`` (empty members get ``()``)."""
    needs = _needs(kept, quotas)
    dealt = _deal_round_robin(_deal_order(needs), needs, unassigned)
    empty: tuple[TopicPartition, ...] = ()
    return {m: CompactPartitions(empty, space, (dealt[m],)) if m in dealt else empty for m in order}


def _fill(
    kept: Mapping[str, Sequence[TopicPartition]],
    quotas: _Quotas,
    unassigned: list[TopicPartition],
    racks: _RackInfo,
    fresh: dict[str, list[TopicPartition]],
    off_rack: Mapping[str, Sequence[TopicPartition]] | None = None,
) -> None:
    """Deal ``unassigned`` so every member ends at min_quota or max_quota (``_needs``).

    ``off_rack`` holds, per member, the owned partitions it did not keep for want of a
    replica on its rack. Those that no member on a replica's rack takes go back to their
    owner while it has room, before the round-robin deal (see ``_give_back``).
    """
    needs = _needs(kept, quotas)
    deal_order = _deal_order(needs)
    if racks.enabled:
        unassigned = _deal_rack_aware(deal_order, needs, unassigned, racks, fresh)
        if off_rack:
            unassigned = _give_back(off_rack, needs, unassigned, fresh)
        deal_order = _deal_order(needs)
        unassigned.sort()
    for m, got in _deal_round_robin(deal_order, needs, unassigned).items():
        fresh[m].extend(got)


# --------------------------------------------------------------------------- general


def _general_assign(
    members: Mapping[str, MemberData],
    order: Sequence[str],
    counts: Mapping[str, int],
    racks: _RackInfo,
) -> tuple[dict[str, Sequence[TopicPartition]], dict[str, Sequence[TopicPartition]]]:
    topics_of = {m: frozenset(t for t in members[m].topics if t in counts) for m in order}
    subscribers: dict[str, list[str]] = {t: [] for t in counts}
    for m in order:
        for t in sorted(topics_of[m]):
            subscribers[t].append(m)
    resolved = _resolve_claims(members, order, counts)

    # holdings[m][t] = [kept partitions of t, fresh partitions of t]
    holdings: dict[str, dict[str, tuple[list[TopicPartition], list[TopicPartition]]]] = {
        m: {} for m in order
    }
    load = dict.fromkeys(order, 0)
    taken: set[TopicPartition] = set()
    for m in order:
        mine = topics_of[m]
        held = holdings[m]
        before = len(taken)
        for tp in resolved[m]:
            if tp[0] in mine and not racks.mismatch(m, tp):
                held.setdefault(tp[0], ([], []))[0].append(tp)
                taken.add(tp)
        load[m] = len(taken) - before

    # Topics with the fewest potential members first (Java's TopicComparator).
    for t in sorted(counts, key=lambda t: (len(subscribers[t]), t)):
        subs = subscribers[t]
        free = _unclaimed_partitions({t: counts[t]}, taken)
        if not free or not subs:
            continue
        if racks.enabled:
            rest = []
            for tp in free:
                local = [m for m in subs if racks.matches(m, tp)]
                if local:
                    m = min(local, key=lambda x: (load[x], x))
                    holdings[m].setdefault(t, ([], []))[1].append(tp)
                    load[m] += 1
                else:
                    rest.append(tp)
            free = rest
        pos = 0
        for m, gets in _water_fill(subs, load, len(free)):
            holdings[m].setdefault(t, ([], []))[1].extend(free[pos : pos + gets])
            load[m] += gets
            pos += gets

    _balance(order, subscribers, holdings, load, racks)

    kept: dict[str, Sequence[TopicPartition]] = {}
    fresh: dict[str, Sequence[TopicPartition]] = {}
    for m in order:
        k: list[TopicPartition] = []
        f: list[TopicPartition] = []
        for t in sorted(holdings[m]):
            k.extend(holdings[m][t][0])
            f.extend(holdings[m][t][1])
        kept[m] = k
        fresh[m] = f
    return kept, fresh


def _water_fill(subs: Sequence[str], load: Mapping[str, int], k: int) -> list[tuple[str, int]]:
    """How many of ``k`` new partitions each subscriber gets.

    The same counts as handing them out one at a time to the least loaded subscriber,
    ties to the lowest member id (Java's general assignment), computed in one pass:
    raise the least loaded members together to the next load level while the
    partitions last, then share what is left, the lowest ids taking the remainder.
    """
    if not k:
        return []
    ranked = sorted(subs, key=lambda m: (load[m], m))
    i = 0
    level = load[ranked[0]]
    left = k
    while i + 1 < len(ranked):
        cost = (load[ranked[i + 1]] - level) * (i + 1)
        if cost > left:
            break
        left -= cost
        level = load[ranked[i + 1]]
        i += 1
    share, remainder = divmod(left, i + 1)
    out = []
    for j, m in enumerate(sorted(ranked[: i + 1])):
        gets = level + share + (1 if j < remainder else 0) - load[m]
        if gets:
            out.append((m, gets))
    return out


def _balance(
    order: Sequence[str],
    subscribers: Mapping[str, list[str]],
    holdings: dict[str, dict[str, tuple[list[TopicPartition], list[TopicPartition]]]],
    load: dict[str, int],
    racks: _RackInfo,
) -> None:
    """Move partitions until no member could take one from a member with 2+ more.

    Each move lowers the sum of squared loads, so the loop ends; it ends exactly when
    Java's ``isBalanced`` holds. A pass computes each topic's lowest subscriber load
    once; a pass that moves nothing saw exact values, so its verdict is exact.
    """
    while True:
        moved = False
        topic_min = {t: min(load[m] for m in subs) for t, subs in subscribers.items() if subs}
        floor = min(load.values(), default=0)
        for c in sorted(order, key=lambda m: (-load[m], m)):
            if load[c] <= floor + 1:
                break
            for t in sorted(holdings[c], key=lambda t: (len(subscribers[t]), t)):
                if topic_min[t] + 1 >= load[c]:
                    continue
                kept_t, fresh_t = holdings[c][t]
                heap = [(load[m], m) for m in subscribers[t] if m != c]
                heapq.heapify(heap)
                while (kept_t or fresh_t) and heap and heap[0][0] + 1 < load[c]:
                    n, m = heap[0]
                    tp = _pick_partition(fresh_t, kept_t, m, racks)
                    holdings[m].setdefault(t, ([], []))[1].append(tp)
                    load[m] = n + 1
                    load[c] -= 1
                    heapq.heapreplace(heap, (n + 1, m))
                    moved = True
                topic_min[t] = min(heap[0][0], load[c]) if heap else load[c]
                if not kept_t and not fresh_t:
                    del holdings[c][t]
        if not moved:
            return


def _pick_partition(
    fresh_t: list[TopicPartition], kept_t: list[TopicPartition], target: str, racks: _RackInfo
) -> TopicPartition:
    """Which partition of a topic to move to ``target``: one received this round before
    one the member owned (stickiness), and one local to the target's rack if any."""
    pool = fresh_t if fresh_t else kept_t
    if racks.enabled:
        for i in range(len(pool) - 1, -1, -1):
            if racks.matches(target, pool[i]):
                return pool.pop(i)
    return pool.pop()
