"""A custom partition assignor written in Python, safe under COOPERATIVE rebalancing.

Loaded by name from the consumer configuration::

    Consumer({..., "partition.assignment.strategy": "my_assignors:HashAssignor"})

(this module must be importable: run from this directory or put it on ``sys.path``).
docs/custom-assignor.md walks through it.
"""

from __future__ import annotations

import hashlib

from coopconsumer.assignors import (
    Assignment,
    ClusterMetadata,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupSubscription,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
)


def _weight(member_key: str, tp: TopicPartition) -> int:
    # A stable hash (Python's hash() of str changes between processes, and every
    # member that may become leader must compute the same result).
    digest = hashlib.blake2b(f"{member_key}/{tp.topic}/{tp.partition}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


def _member_key(member_id: str, subscription: Subscription) -> str:
    # A static member (group.instance.id) keeps its key across restarts, so it keeps
    # its partitions; a dynamic member gets a new member id each time it joins.
    return subscription.group_instance_id or member_id


class HashAssignor(ConsumerPartitionAssignor):
    """Rendezvous hashing: each partition goes to the subscriber with the highest
    hash of (member, partition).

    When a member joins, only the partitions it wins move (about 1/N of them); when
    one leaves, only its own partitions move. Balance is statistical, not exact.

    COOPERATIVE rule (KIP-429): a partition another member still owns is left out of
    this round. Its owner sees it revoked and rejoins, and the follow-up rebalance
    gives it to its new owner, when nobody owns it any more.
    """

    name = "hash"

    def supported_protocols(self) -> list[RebalanceProtocol]:
        # COOPERATIVE first; EAGER too, so it can be listed beside an eager assignor
        # during a two-bounce upgrade (under EAGER nobody reports owned partitions).
        return [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        """Every partition of every subscribed topic to its highest-weight subscriber,
        minus the partitions that would change owner in this round."""
        subscriptions = group_subscription.subscriptions
        intended: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        topics = sorted({topic for sub in subscriptions.values() for topic in sub.topics})
        for topic in topics:
            subscribers = [m for m, sub in subscriptions.items() if topic in sub.topics]
            for tp in metadata.partitions_for_topic(topic):  # empty for unknown topics
                winner = max(
                    subscribers, key=lambda m: (_weight(_member_key(m, subscriptions[m]), tp), m)
                )
                intended[winner].append(tp)

        owners: dict[TopicPartition, set[str]] = {}
        for member, sub in subscriptions.items():
            for tp in sub.owned_partitions:
                owners.setdefault(tp, set()).add(member)

        assignments = {
            member: Assignment(
                # Keep a partition if nobody owns it, or this member is its only owner.
                partitions=[tp for tp in partitions if owners.get(tp, {member}) <= {member}]
            )
            for member, partitions in intended.items()
        }
        return GroupAssignment(assignments=assignments)
