"""The ``roundrobin`` assignor (Java's ``RoundRobinAssignor``).

Pure computation: imports only ``_api``, ``_types``, the shared helpers of ``_range``
and ``_gc.paused_gc`` (see ``_gc``); no I/O, no clock, no logging.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import chain

from .._types import TopicPartition
from ._api import ClusterMetadata, ConsumerPartitionAssignor, GroupAssignment, GroupSubscription
from ._gc import paused_gc
from ._range import Layout, finish, layout, topic_partitions

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor(ConsumerPartitionAssignor):
    """Java's ``RoundRobinAssignor`` (protocol name ``roundrobin``, EAGER only).

    Lays out all partitions of all subscribed topics sorted by topic then partition,
    and the members in ``java_member_order`` (static members by instance id first),
    then deals the partitions out in turn, skipping a member when it is not subscribed
    to the partition's topic. With identical subscriptions the counts differ by at most
    one. With two members ``C0``, ``C1`` and topics ``t0``, ``t1`` of three partitions::

        C0: [t0-0, t0-2, t1-1]
        C1: [t0-1, t1-0, t1-2]

    With differing subscriptions the result can be unbalanced, exactly as in Java.
    Members subscribed to topics missing from the metadata get nothing for them; every
    member appears in the result; partitions in each assignment are sorted.

    ``pause_gc=True`` pauses Python's cyclic garbage collector while an assignment over
    20,000 partitions or more runs (process-wide, restored afterwards; see
    ``docs/assignors.md``). Off by default.
    """

    name = "roundrobin"

    def __init__(self, *, pause_gc: bool = False) -> None:
        #: Whether ``assign`` pauses the cyclic garbage collector on large passes.
        self.pause_gc = pause_gc

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        """Deal every partition of every subscribed topic to its subscribers in turn."""
        prepared = layout(metadata, group_subscription)
        with paused_gc(sum(prepared.counts.values()), enabled=self.pause_gc):
            return _assign_roundrobin(prepared)


def _assign_roundrobin(prepared: Layout) -> GroupAssignment:
    """Java's ``RoundRobinAssignor.assign``, a stride slice per member and topic run."""
    subscriptions, ordered, topic_subscribers, counts, lists = prepared
    if not ordered:
        return finish(subscriptions, lists)

    # Java walks one circular iterator over all members, partition by partition,
    # skipping members not subscribed to the partition's topic. Within one topic
    # the skipping always lands on the topic's next subscriber, so the topic's
    # partitions go to its subscribers cyclically starting from the first one at
    # or after the cursor: each subscriber's share is a stride slice. That is
    # O(partitions) overall instead of O(partitions x members) when most members
    # skip a topic. Kafka topic names are ASCII, so Python's sort is Java's.
    #
    # After a topic the iterator stands just past its last receiver, which is where
    # the next topic with the same subscribers continues the cycle. So a run of
    # consecutive topics with equal subscriber lists is dealt as one sequence: one
    # slice per member for the run instead of one per member and topic (500 topics
    # x 2000 members would otherwise be a million one-element slices).
    topics = sorted(counts)
    cursor = 0
    index = 0
    while index < len(topics):
        subscribers = topic_subscribers[topics[index]]
        end = index + 1
        while end < len(topics) and topic_subscribers[topics[end]] == subscribers:
            end += 1
        partitions = list(
            chain.from_iterable(topic_partitions(t, counts[t]) for t in topics[index:end])
        )
        cursor = _deal(partitions, subscribers, cursor, ordered, lists)
        index = end
    return finish(subscriptions, lists)


def _deal(
    partitions: list[TopicPartition],
    subscribers: list[int],
    cursor: int,
    ordered: list[str],
    lists: dict[str, list[TopicPartition]],
) -> int:
    """Deal ``partitions`` to ``subscribers`` (positions in ``ordered``) in turn, from the
    first one at or after ``cursor``; return the cursor after the last receiver."""
    width = len(subscribers)
    start = bisect_left(subscribers, cursor)
    if start == width:
        start = 0
    dealt_to = subscribers[start:] + subscribers[:start]
    for offset, member in enumerate(dealt_to[: len(partitions)]):
        lists[ordered[member]].extend(partitions[offset::width])
    last = subscribers[(start + len(partitions) - 1) % width]
    return (last + 1) % len(ordered)
