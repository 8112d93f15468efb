"""Kafka administration from the client side: a blocking admin client and pluggable
replica assignors (docs/admin.md).

:class:`AdminClient` speaks Kafka's admin APIs over the library's own wire client,
configured with the consumer's connection and security keys. When it creates topics
or partitions it places the replicas itself, with a :class:`ReplicaAssignor`
(``kraft``, the default: Kafka's KRaft controller placement; ``zookeeper``: the
ZooKeeper-era one; ``balanced``: least-loaded, rack- and disk-aware, skipping draining
and nearly full brokers, with a per-call rule hook), and sends the explicit
assignment, so custom placement works against any Kafka >= 2.4 without a broker
plugin::

    from coopconsumer.admin import AdminClient, NewTopic

    with AdminClient({"bootstrap.servers": "localhost:9092",
                      "replica.assignor": "balanced"}) as admin:
        admin.create_topics([NewTopic("orders", num_partitions=12, replication_factor=3)])
        print(admin.describe_topics(["orders"])["orders"].partitions[0].replicas)
"""

from ._admin_client import AdminClient as AdminClient
from ._admin_loading import BUILTIN_REPLICA_ASSIGNORS as BUILTIN_REPLICA_ASSIGNORS
from ._admin_loading import load_replica_assignor as load_replica_assignor
from ._admin_types import AdminOperationError as AdminOperationError
from ._admin_types import AlterConfigOp as AlterConfigOp
from ._admin_types import AlterConfigOpType as AlterConfigOpType
from ._admin_types import BrokerDescription as BrokerDescription
from ._admin_types import ClusterDescription as ClusterDescription
from ._admin_types import ConfigEntry as ConfigEntry
from ._admin_types import ConfigResource as ConfigResource
from ._admin_types import ConfigResourceType as ConfigResourceType
from ._admin_types import ConfigSource as ConfigSource
from ._admin_types import ElectionResult as ElectionResult
from ._admin_types import ElectionType as ElectionType
from ._admin_types import LogDirDescription as LogDirDescription
from ._admin_types import NewTopic as NewTopic
from ._admin_types import PartitionDescription as PartitionDescription
from ._admin_types import PartitionReassignment as PartitionReassignment
from ._admin_types import ReplicaLogInfo as ReplicaLogInfo
from ._admin_types import TopicDescription as TopicDescription
from ._admin_types import TopicPartitionReplica as TopicPartitionReplica
from ._balanced import BalancedReplicaAssignor as BalancedReplicaAssignor
from ._balanced import PlacementRule as PlacementRule
from ._kraft import KRaftReplicaAssignor as KRaftReplicaAssignor
from ._replica_assignor import BrokerLoad as BrokerLoad
from ._replica_assignor import ClusterView as ClusterView
from ._replica_assignor import LogDirLoad as LogDirLoad
from ._replica_assignor import NewPartitions as NewPartitions
from ._replica_assignor import ReplicaAssignor as ReplicaAssignor
from ._replica_assignor import ReplicaAssignorError as ReplicaAssignorError
from ._zookeeper import ZooKeeperReplicaAssignor as ZooKeeperReplicaAssignor

__all__ = [
    "BUILTIN_REPLICA_ASSIGNORS",
    "AdminClient",
    "AdminOperationError",
    "AlterConfigOp",
    "AlterConfigOpType",
    "BalancedReplicaAssignor",
    "BrokerDescription",
    "BrokerLoad",
    "ClusterDescription",
    "ClusterView",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "ElectionResult",
    "ElectionType",
    "KRaftReplicaAssignor",
    "LogDirDescription",
    "LogDirLoad",
    "NewPartitions",
    "NewTopic",
    "PartitionDescription",
    "PartitionReassignment",
    "PlacementRule",
    "ReplicaAssignor",
    "ReplicaAssignorError",
    "ReplicaLogInfo",
    "TopicDescription",
    "TopicPartitionReplica",
    "ZooKeeperReplicaAssignor",
    "load_replica_assignor",
]
