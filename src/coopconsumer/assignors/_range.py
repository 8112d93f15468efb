"""The ``range`` assignor, with Java's member order and KIP-881 rack awareness.

Also home of ``java_member_order``, the member ordering every non-sticky built-in shares
(Java's ``AbstractPartitionAssignor.MemberInfo``).

Pure computation: imports only ``_api``, ``_types`` and ``_gc.paused_gc`` (with
``pause_gc=True``, passes over 20,000 partitions or more pause the cyclic garbage
collector, see ``_gc``); no I/O, no clock, no logging.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from itertools import repeat
from typing import NamedTuple

from .._types import TopicPartition
from ._api import (
    Assignment,
    ClusterMetadata,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupSubscription,
    Subscription,
)
from ._gc import paused_gc

__all__ = [
    "Layout",
    "RangeAssignor",
    "java_member_order",
    "layout",
    "subscriber_positions",
    "topic_partitions",
]


def _java_string_key(value: str) -> bytes:
    # Java's String.compareTo compares UTF-16 code units; Python compares code points.
    # The two disagree only beyond the BMP, but member ids embed client.id and can hold
    # anything. Big-endian UTF-16 bytes sort exactly as Java's code units do.
    return value.encode("utf-16-be", "surrogatepass")


def java_member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Member ids in the order Java's assignors lay members out.

    Static members (with a ``group_instance_id``) come first, ordered by instance id;
    then dynamic members ordered by member id. This is ``MemberInfo.compareTo`` in
    Java's ``AbstractPartitionAssignor``, so that a static member keeps its place (and
    its partitions) when it rejoins with a new member id (KIP-345). Strings compare as
    Java compares them (UTF-16 code units). Two static members claiming one instance id
    cannot both be in a generation; should it happen, member id breaks the tie.
    """

    def key(member_id: str) -> tuple[int, bytes, bytes]:
        instance_id = subscriptions[member_id].group_instance_id
        if instance_id is not None:
            return (0, _java_string_key(instance_id), _java_string_key(member_id))
        return (1, _java_string_key(member_id), b"")

    return sorted(subscriptions, key=key)


def subscriber_positions(
    ordered_members: Sequence[str], subscriptions: Mapping[str, Subscription]
) -> dict[str, list[int]]:
    """topic -> positions in ``ordered_members`` of its subscribers, ascending.

    Members with the same topic list are handled together, so the common case (all
    members subscribe alike) costs one pass over the topics rather than one per member.
    A topic listed twice by one member counts once.
    """
    by_topics: dict[tuple[str, ...], list[int]] = {}
    for position, member_id in enumerate(ordered_members):
        topics = tuple(dict.fromkeys(subscriptions[member_id].topics))
        same = by_topics.get(topics)
        if same is None:
            by_topics[topics] = [position]
        else:
            same.append(position)
    result: dict[str, list[int]] = {}
    merged: set[str] = set()
    for topics, positions in by_topics.items():
        for topic in topics:
            existing = result.get(topic)
            if existing is None:
                result[topic] = positions.copy()
            else:
                existing.extend(positions)
                merged.add(topic)
    for topic in merged:
        result[topic].sort()
    return result


def topic_partitions(topic: str, count: int) -> list[TopicPartition]:
    """``[TopicPartition(topic, 0), ..., TopicPartition(topic, count - 1)]``, built at C
    speed (``TopicPartition`` is a named tuple; its Python-level ``__new__`` would
    double the cost of a million-partition assignment)."""
    return list(map(_new_partition, zip(repeat(topic, count), range(count), strict=True)))


_new_partition = partial(tuple.__new__, TopicPartition)


def assignable_partition_counts(metadata: ClusterMetadata, topics: Iterable[str]) -> dict[str, int]:
    """Partition count of each topic that exists in ``metadata`` with partitions.

    Topics absent from the metadata (or with no partitions) are skipped, as Java's
    ``AbstractPartitionAssignor`` does: their subscribers simply get nothing for them.
    """
    counts: dict[str, int] = {}
    for topic in topics:
        count = metadata.partition_count(topic)
        if count is not None and count > 0:
            counts[topic] = count
    return counts


class Layout(NamedTuple):
    """What range and roundrobin both start from (Java's ``AbstractPartitionAssignor``)."""

    subscriptions: Mapping[str, Subscription]
    #: Member ids in ``java_member_order``.
    ordered: list[str]
    #: topic -> positions in ``ordered`` of its subscribers, ascending.
    topic_subscribers: dict[str, list[int]]
    #: Partition count of every subscribed topic that exists with partitions.
    counts: dict[str, int]
    #: member id -> an empty list to collect its partitions in.
    lists: dict[str, list[TopicPartition]]


def layout(metadata: ClusterMetadata, group_subscription: GroupSubscription) -> Layout:
    """Order the members, find each topic's subscribers and the assignable topics."""
    subscriptions = group_subscription.subscriptions
    ordered = java_member_order(subscriptions)
    topic_subscribers = subscriber_positions(ordered, subscriptions)
    counts = assignable_partition_counts(metadata, topic_subscribers)
    lists: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
    return Layout(subscriptions, ordered, topic_subscribers, counts, lists)


def finish(
    subscriptions: Mapping[str, Subscription], lists: Mapping[str, list[TopicPartition]]
) -> GroupAssignment:
    """Wrap per-member partition lists (already sorted) into a ``GroupAssignment``.

    Every member of the subscription gets an entry, empty when it got nothing.
    """
    return GroupAssignment(
        assignments={
            member_id: Assignment(partitions=tuple(lists.get(member_id, ())))
            for member_id in subscriptions
        }
    )


class RangeAssignor(ConsumerPartitionAssignor):
    """Java's ``RangeAssignor`` (protocol name ``range``, EAGER only).

    Works topic by topic: the topic's partitions in numeric order are cut into
    contiguous ranges, one per subscribed member in ``java_member_order``; the first
    ``partitions % members`` members get one extra. With two members ``C0``, ``C1`` and
    topics ``t0``, ``t1`` of three partitions each::

        C0: [t0-0, t0-1, t1-0, t1-1]
        C1: [t0-2, t1-2]

    Topics with the same partition count and the same subscribers are therefore
    co-partitioned: partition ``i`` of each goes to the same member.

    Rack awareness (KIP-881): when members send ``rack_id`` and the metadata carries
    replica racks, and some partitions of a topic have replicas on only some racks,
    partitions are first matched to members on a rack holding a replica, without
    breaking the per-topic balance above; co-partitioned topics stay co-partitioned
    (a partition number goes to a member whose rack matches it in *every* such topic,
    else it waits); whatever cannot be matched is then assigned as plain ranges. The
    result equals Java's for the same input.

    Members subscribed to topics missing from the metadata get nothing for them; every
    member of the subscription appears in the result; partitions in each assignment are
    sorted.

    ``pause_gc=True`` pauses Python's cyclic garbage collector while an assignment over
    20,000 partitions or more runs (process-wide, restored afterwards; see
    ``docs/assignors.md``). Off by default.
    """

    name = "range"

    def __init__(self, *, pause_gc: bool = False) -> None:
        #: Whether ``assign`` pauses the cyclic garbage collector on large passes.
        self.pause_gc = pause_gc

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        """Assign every partition of every subscribed topic to one of its subscribers."""
        prepared = layout(metadata, group_subscription)
        with paused_gc(sum(prepared.counts.values()), enabled=self.pause_gc):
            return _assign_range(metadata, prepared)


def _assign_range(metadata: ClusterMetadata, prepared: Layout) -> GroupAssignment:
    """Java's ``RangeAssignor.assignPartitions``: rack-matched first when KIP-881 applies."""
    subscriptions, ordered, topic_subscribers, counts, lists = prepared
    consumer_racks = _consumer_racks(subscriptions)
    if consumer_racks and metadata.has_rack_info:
        states = [
            _TopicState(
                topic,
                counts[topic],
                [ordered[i] for i in topic_subscribers[topic]],
                consumer_racks,
                metadata,
            )
            for topic in sorted(counts)
        ]
        if any(state.needs_rack_aware for state in states):
            _assign_rack_aware(states, lists)
            return finish(subscriptions, lists)

    # Topics in sorted order and each range ascending: every member's list comes
    # out sorted without a final sort.
    for topic in sorted(counts):
        count = counts[topic]
        subscribers = topic_subscribers[topic]
        per_member, extra = divmod(count, len(subscribers))
        partitions = topic_partitions(topic, count)
        start = 0
        for index in range(min(len(subscribers), count)):
            end = start + per_member + (1 if index < extra else 0)
            lists[ordered[subscribers[index]]].extend(partitions[start:end])
            start = end
    return finish(subscriptions, lists)


def _consumer_racks(subscriptions: Mapping[str, Subscription]) -> dict[str, str]:
    # Java ignores an empty client.rack exactly like an absent one.
    return {
        member_id: subscription.rack_id
        for member_id, subscription in subscriptions.items()
        if subscription.rack_id
    }


class _TopicState:
    """One topic's progress during rack-aware range assignment (Java's
    ``RangeAssignor.TopicAssignmentState``).

    Quotas follow plain range: every member may take ``per_member`` partitions, and
    ``extra`` members (whichever get there first) one more. Unassigned partitions are
    found through cursors that only move forward, so taking ``k`` partitions costs
    O(k) amortised instead of a scan of the topic per member.
    """

    def __init__(
        self,
        topic: str,
        count: int,
        members: Sequence[str],
        consumer_racks: Mapping[str, str],
        metadata: ClusterMetadata,
    ) -> None:
        self.topic = topic
        self.count = count
        self.members = members
        self.member_racks: dict[str, str | None] = {m: consumer_racks.get(m) for m in members}
        self.per_member, self.remaining_extra = divmod(count, len(members))
        self.assigned_by_member: dict[str, int] = dict.fromkeys(members, 0)
        self.unassigned = count
        self._taken = bytearray(count)
        self._any_cursor = 0

        racks_of_members = {rack for rack in self.member_racks.values() if rack is not None}
        # Replica racks are only looked at when some subscriber has a rack: Java leaves
        # them empty otherwise, which also decides how topics group as co-partitioned.
        self.partition_racks: list[frozenset[str]] = []
        self._rack_partitions: dict[str, list[int]] = {}
        self._rack_cursors: dict[str, int] = {}
        self.needs_rack_aware = False
        if not racks_of_members:
            return
        replica_racks = metadata.partition_racks
        no_racks: frozenset[str] = frozenset()
        self.partition_racks = [
            replica_racks.get(tp, no_racks) for tp in topic_partitions(topic, count)
        ]
        all_partition_racks: set[str] = set()
        for racks in self.partition_racks:
            all_partition_racks |= racks
        # KIP-881: rack-aware only if some member rack holds replicas and not every
        # partition has replicas on every rack (otherwise any member is as good).
        self.needs_rack_aware = not racks_of_members.isdisjoint(all_partition_racks) and any(
            racks != all_partition_racks for racks in self.partition_racks
        )
        for rack in racks_of_members:
            self._rack_partitions[rack] = []
            self._rack_cursors[rack] = 0
        for p, racks in enumerate(self.partition_racks):
            for rack in racks:
                indexes = self._rack_partitions.get(rack)
                if indexes is not None:
                    indexes.append(p)

    def max_assignable(self, member_id: str) -> int:
        """How many more partitions of this topic ``member_id`` may take now."""
        quota = self.per_member + (1 if self.remaining_extra > 0 else 0)
        return max(0, quota - self.assigned_by_member[member_id])

    def take_any(self, limit: int) -> list[int]:
        """Take the first ``limit`` unassigned partitions, lowest first."""
        taken = self._taken
        cursor = self._any_cursor
        chosen: list[int] = []
        while cursor < self.count and len(chosen) < limit:
            if not taken[cursor]:
                taken[cursor] = 1
                chosen.append(cursor)
            cursor += 1
        self._any_cursor = cursor
        return chosen

    def take_on_rack(self, rack: str, limit: int) -> list[int]:
        """Take the first ``limit`` unassigned partitions with a replica on ``rack``."""
        indexes = self._rack_partitions.get(rack, [])
        taken = self._taken
        cursor = self._rack_cursors.get(rack, 0)
        chosen: list[int] = []
        while cursor < len(indexes) and len(chosen) < limit:
            p = indexes[cursor]
            if not taken[p]:
                taken[p] = 1
                chosen.append(p)
            cursor += 1
        self._rack_cursors[rack] = cursor
        return chosen

    def take_one(self, partition: int) -> None:
        """Take one given partition (co-partitioned matching). Must be unassigned."""
        self._taken[partition] = 1

    def on_assigned(self, member_id: str, how_many: int) -> None:
        """Record ``how_many`` partitions (already taken) as given to ``member_id``."""
        assigned = self.assigned_by_member[member_id] + how_many
        self.assigned_by_member[member_id] = assigned
        # Once a member is over the base quota it has used one of the extra slots.
        if assigned > self.per_member:
            self.remaining_extra -= 1
        self.unassigned -= how_many


def _assign_ranges(
    state: _TopicState, lists: dict[str, list[TopicPartition]], *, match_racks: bool
) -> None:
    """One pass over the members in order, each taking up to its quota."""
    topic = state.topic
    for member_id in state.members:
        if state.unassigned == 0:
            break
        limit = state.max_assignable(member_id)
        if limit == 0:
            continue
        rack = state.member_racks[member_id] if match_racks else None
        chosen = state.take_any(limit) if rack is None else state.take_on_rack(rack, limit)
        if not chosen:
            continue
        lists[member_id].extend(TopicPartition(topic, p) for p in chosen)
        state.on_assigned(member_id, len(chosen))


def _assign_rack_aware(states: list[_TopicState], lists: dict[str, list[TopicPartition]]) -> None:
    """KIP-881 range: rack-matched first, then plain ranges for what is left."""
    # Topics group as co-partitioned when they have the same subscribers (racks
    # included) and, if those have racks, the same partition count (Java groups by
    # the size of the replica-rack map, which is empty when no subscriber has a rack).
    groups: dict[tuple[tuple[tuple[str, str | None], ...], int], list[_TopicState]] = {}
    for state in states:
        consumers = tuple((m, state.member_racks[m]) for m in state.members)
        groups.setdefault((consumers, len(state.partition_racks)), []).append(state)

    for (_consumers, num_partitions), group in groups.items():
        if len(group) > 1:
            _assign_co_partitioned(group, num_partitions, lists)
        elif group[0].needs_rack_aware:
            _assign_ranges(group[0], lists, match_racks=True)

    for state in states:
        _assign_ranges(state, lists, match_racks=False)

    for partitions in lists.values():
        partitions.sort()


def _assign_co_partitioned(
    group: list[_TopicState], num_partitions: int, lists: dict[str, list[TopicPartition]]
) -> None:
    """Give partition ``p`` of every topic in ``group`` to one member whose rack holds a
    replica of ``p`` in all of them, first such member in order with quota left in all.

    A member's quota only ever shrinks, so a member that is out of quota is dropped from
    the front of its rack queue for good; each partition number then costs a few set
    operations instead of a walk over all members.
    """
    first = group[0]
    order = {member_id: index for index, member_id in enumerate(first.members)}
    queues: dict[str | None, list[str]] = {}
    for member_id in first.members:
        queues.setdefault(first.member_racks[member_id], []).append(member_id)
    heads: dict[str | None, int] = dict.fromkeys(queues, 0)

    # Every topic of the group has the same partition count and members, none has been
    # assigned from before this pass, and each step below gives partition p of *every*
    # topic to one member: the topics' quotas move in lockstep, so the first topic's
    # quota answers Java's "maxAssignable > 0 in all of them" (500 topics: 500x fewer
    # checks).
    def has_quota_everywhere(member_id: str) -> bool:
        return first.max_assignable(member_id) > 0

    def head_of(rack: str | None) -> str | None:
        queue = queues[rack]
        index = heads[rack]
        while index < len(queue) and not has_quota_everywhere(queue[index]):
            index += 1
        heads[rack] = index
        return queue[index] if index < len(queue) else None

    for p in range(num_partitions):
        common = first.partition_racks[p]
        for state in group[1:]:
            if not common:
                break
            common = common & state.partition_racks[p]
        candidates: list[str | None] = [rack for rack in common if rack in queues]
        if None in queues:
            candidates.append(None)
        chosen: str | None = None
        for rack in candidates:
            head = head_of(rack)
            if head is not None and (chosen is None or order[head] < order[chosen]):
                chosen = head
        if chosen is None:
            continue
        for state in group:
            state.take_one(p)
            state.on_assigned(chosen, 1)
        lists[chosen].extend([TopicPartition(state.topic, p) for state in group])
