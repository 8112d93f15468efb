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
    """Sticky and cooperative: keeps owned partitions up to a fair quota, hands out
    unowned ones, and leaves partitions that change owner unassigned for one round."""

    def __init__(self, name: str = "test-coop") -> None:
        super().__init__(name)

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE]

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        subs = group_subscription.subscriptions
        partitions = _eligible(group_subscription, metadata)
        claims: dict[TopicPartition, list[str]] = {}
        for member, sub in subs.items():
            for tp in sub.owned_partitions:
                claims.setdefault(tp, []).append(member)
        quota = -(-len(partitions) // max(len(subs), 1))
        result: dict[str, list[TopicPartition]] = {m: [] for m in subs}
        moving: set[TopicPartition] = set()
        for tp in partitions:
            owners = claims.get(tp, [])
            if len(owners) == 1 and tp.topic in subs[owners[0]].topics:
                if len(result[owners[0]]) < quota:
                    result[owners[0]].append(tp)
                else:
                    moving.add(tp)  # owner revokes it; assigned in the follow-up
            elif owners:
                moving.add(tp)
        for tp in partitions:
            if tp in moving or any(tp in ps for ps in result.values()):
                continue
            members = sorted(m for m, s in subs.items() if tp.topic in s.topics)
            target = min(members, key=lambda m: (len(result[m]), m))
            result[target].append(tp)
        return GroupAssignment(
            assignments={m: Assignment(partitions=tuple(sorted(ps))) for m, ps in result.items()}
        )


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
