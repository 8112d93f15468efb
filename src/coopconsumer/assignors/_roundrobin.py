"""PLACEHOLDER: being written (issue 2)."""

from __future__ import annotations

from ._api import ClusterMetadata, ConsumerPartitionAssignor, GroupAssignment, GroupSubscription


class RoundRobinAssignor(ConsumerPartitionAssignor):
    name = "roundrobin"

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        raise NotImplementedError
