"""Tiny deterministic assignors for the coordinator tests (EAGER and COOPERATIVE), so
these tests do not hang on the built-ins; the property test also runs the built-ins."""

from __future__ import annotations

from coopconsumer._types import ConsumerGroupMetadata, TopicPartition
from coopconsumer.assignors import (
    Assignment,
    ClusterMetadata,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupSubscription,
    RebalanceProtocol,
)


def _eligible(group: GroupSubscription, metadata: ClusterMetadata) -> list[TopicPartition]:
    topics = sorted({t for s in group.subscriptions.values() for t in s.topics})
    return [tp for t in topics for tp in metadata.partitions_for_topic(t)]


class EagerTestAssignor(ConsumerPartitionAssignor):
    """Round-robin over sorted partitions and sorted member ids (EAGER only)."""

    def __init__(self, name: str = "test-eager") -> None:
        self._name = name
        self.seen: list[Assignment] = []

    @property
    def name(self) -> str:
        return self._name

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        subs = group_subscription.subscriptions
        result: dict[str, list[TopicPartition]] = {m: [] for m in subs}
        for tp in _eligible(group_subscription, metadata):
            members = sorted(m for m, s in subs.items() if tp.topic in s.topics)
            target = min(members, key=lambda m: (len(result[m]), m))
            result[target].append(tp)
        return GroupAssignment(
            assignments={m: Assignment(partitions=tuple(ps)) for m, ps in result.items()}
        )

    def on_assignment(self, assignment: Assignment, group_metadata: ConsumerGroupMetadata) -> None:
        self.seen.append(assignment)


class CooperativeTestAssignor(EagerTestAssignor):
    """Cooperative: computes the eager round-robin target, then withholds for one round
    every partition another member still owns (KIP-429). The target depends only on the
    members and their subscriptions, so a group converges in at most two rebalances."""

    def __init__(self, name: str = "test-coop") -> None:
        super().__init__(name)

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE]

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        target = super().assign(metadata, group_subscription).assignments
        claims: dict[TopicPartition, set[str]] = {}
        for member, sub in group_subscription.subscriptions.items():
            for tp in sub.owned_partitions:
                claims.setdefault(tp, set()).add(member)
        result = {
            member: Assignment(
                partitions=tuple(tp for tp in a.partitions if claims.get(tp, {member}) == {member})
            )
            for member, a in target.items()
        }
        return GroupAssignment(assignments=result)


class RaisingAssignor(EagerTestAssignor):
    """An assignor whose assign() raises."""

    def __init__(self, name: str = "test-raising") -> None:
        super().__init__(name)

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        raise RuntimeError("boom")


class GreedyCooperativeAssignor(EagerTestAssignor):
    """Claims COOPERATIVE but moves partitions straight between members (invalid)."""

    def __init__(self, name: str = "test-greedy") -> None:
        super().__init__(name)

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE]
