"""The ``roundrobin`` assignor (Java's ``RoundRobinAssignor``).

Pure computation: imports only ``_api``, ``_types`` and the shared helpers of
``_range``; no I/O, no clock, no logging.
"""

from __future__ import annotations

from bisect import bisect_left

from .._types import TopicPartition
from ._api import ClusterMetadata, ConsumerPartitionAssignor, GroupAssignment, GroupSubscription
from ._range import (
    assignable_partition_counts,
    finish,
    java_member_order,
    subscriber_positions,
    topic_partitions,
)

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
    """

    name = "roundrobin"

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        """Deal every partition of every subscribed topic to its subscribers in turn."""
        subscriptions = group_subscription.subscriptions
        ordered = java_member_order(subscriptions)
        topic_subscribers = subscriber_positions(ordered, subscriptions)
        counts = assignable_partition_counts(metadata, topic_subscribers)
        lists: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
        if not ordered:
            return finish(subscriptions, lists)

        # Java walks one circular iterator over all members, partition by partition,
        # skipping members not subscribed to the partition's topic. Within one topic
        # the skipping always lands on the topic's next subscriber, so the topic's
        # partitions go to its subscribers cyclically starting from the first one at
        # or after the cursor: each subscriber's share is a stride slice. That is
        # O(partitions) overall instead of O(partitions x members) when most members
        # skip a topic. Kafka topic names are ASCII, so Python's sort is Java's.
        cursor = 0
        for topic in sorted(counts):
            count = counts[topic]
            subscribers = topic_subscribers[topic]
            width = len(subscribers)
            start = bisect_left(subscribers, cursor)
            if start == width:
                start = 0
            partitions = topic_partitions(topic, count)
            dealt_to = subscribers[start:] + subscribers[:start]
            for offset, member in enumerate(dealt_to[:count]):
                lists[ordered[member]].extend(partitions[offset::width])
            last = subscribers[(start + count - 1) % width]
            cursor = (last + 1) % len(ordered)
        return finish(subscriptions, lists)
