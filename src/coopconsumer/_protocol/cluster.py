"""The cluster as one Metadata answer describes it: the one reader of Metadata.

``ClusterSnapshot.from_response`` reads a ``MetadataResponse`` of any version into
immutable values (brokers, topics with their ids, partitions with leader, replicas and
in-sync replicas). The wire client's ``metadata()`` and the group members' metadata
refresh (``_member/_metadata.py``) both read Metadata through it; the request
side is ``queries.MetadataQuery``.

Pure: imports the messages and value types only.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from types import MappingProxyType

import attrs

from ._schema import ZERO_UUID
from .messages import MetadataResponse

__all__ = ["BrokerInfo", "ClusterSnapshot", "PartitionInfo", "TopicInfo"]


@attrs.frozen(kw_only=True)
class BrokerInfo:
    """A broker as Metadata (or FindCoordinator) described it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@attrs.frozen(kw_only=True)
class PartitionInfo:
    """One partition of a topic: leader (and its epoch, -1 before Metadata v7),
    replicas, in-sync and offline replicas."""

    partition: int
    leader_id: int
    replica_nodes: tuple[int, ...] = ()
    isr_nodes: tuple[int, ...] = ()
    error_code: int = 0
    leader_epoch: int = -1
    offline_replicas: tuple[int, ...] = ()


@attrs.frozen(kw_only=True)
class TopicInfo:
    """A topic from Metadata; ``error_code`` != 0 means it is unknown or unusable."""

    name: str
    error_code: int
    partitions: Mapping[int, PartitionInfo]
    is_internal: bool = False
    #: The topic id (Metadata v10+), ``ZERO_UUID`` when the broker did not say.
    topic_id: uuid.UUID = ZERO_UUID


@attrs.frozen(kw_only=True)
class ClusterSnapshot:
    """What one Metadata answer said about the cluster. Immutable."""

    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, TopicInfo]
    controller_id: int = -1
    cluster_id: str | None = None

    def partition_counts(self) -> dict[str, int]:
        """``{topic: partition count}`` for topics without error."""
        return {
            name: len(info.partitions) for name, info in self.topics.items() if info.error_code == 0
        }

    def partition_racks(self) -> dict[tuple[str, int], frozenset[str]]:
        """Racks of each ``(topic, partition)``'s replicas (KIP-881 rack-aware
        assignment input)."""
        racks: dict[tuple[str, int], frozenset[str]] = {}
        for name, info in self.topics.items():
            for partition in info.partitions.values():
                replica_racks = frozenset(
                    rack
                    for node in partition.replica_nodes
                    if (broker := self.brokers.get(node)) is not None
                    and (rack := broker.rack) is not None
                )
                racks[(name, partition.partition)] = replica_racks
        return racks

    @classmethod
    def from_response(cls, response: MetadataResponse) -> ClusterSnapshot:
        """Build from a decoded ``MetadataResponse`` (any version)."""
        brokers = {
            b.node_id: BrokerInfo(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in response.brokers
        }
        topics: dict[str, TopicInfo] = {}
        for topic in response.topics:
            if topic.name is None:
                continue
            partitions = {
                p.partition_index: PartitionInfo(
                    partition=p.partition_index,
                    leader_id=p.leader_id,
                    replica_nodes=tuple(p.replica_nodes),
                    isr_nodes=tuple(p.isr_nodes),
                    error_code=p.error_code,
                    leader_epoch=p.leader_epoch,
                    offline_replicas=tuple(p.offline_replicas),
                )
                for p in topic.partitions
            }
            topics[topic.name] = TopicInfo(
                name=topic.name,
                error_code=topic.error_code,
                partitions=MappingProxyType(partitions),
                is_internal=topic.is_internal,
                topic_id=topic.topic_id,
            )
        return cls(
            brokers=MappingProxyType(brokers),
            topics=MappingProxyType(topics),
            controller_id=response.controller_id,
            cluster_id=response.cluster_id,
        )
