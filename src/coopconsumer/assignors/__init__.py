"""Partition assignors: the ``ConsumerPartitionAssignor`` contract and the built-ins.

Built-in names equal Java's (``range``, ``roundrobin``, ``sticky``,
``cooperative-sticky``) so that Python, Java and librdkafka members share one group.
"""

from .._types import ConsumerGroupMetadata as ConsumerGroupMetadata
from .._types import TopicPartition as TopicPartition
from ._api import DEFAULT_GENERATION_ID as DEFAULT_GENERATION_ID
from ._api import Assignment as Assignment
from ._api import ClusterMetadata as ClusterMetadata
from ._api import ConsumerPartitionAssignor as ConsumerPartitionAssignor
from ._api import GroupAssignment as GroupAssignment
from ._api import GroupSubscription as GroupSubscription
from ._api import RebalanceProtocol as RebalanceProtocol
from ._api import Subscription as Subscription
from ._loading import BUILTIN_ASSIGNORS as BUILTIN_ASSIGNORS
from ._loading import AssignorSpec as AssignorSpec
from ._loading import load_assignors as load_assignors
from ._loading import select_rebalance_protocol as select_rebalance_protocol
from ._range import RangeAssignor as RangeAssignor
from ._roundrobin import RoundRobinAssignor as RoundRobinAssignor
from ._sticky import CooperativeStickyAssignor as CooperativeStickyAssignor
from ._sticky import StickyAssignor as StickyAssignor
from ._validation import check_assignment as check_assignment
from ._validation import validate_cooperative_assignment as validate_cooperative_assignment

__all__ = [
    "BUILTIN_ASSIGNORS",
    "DEFAULT_GENERATION_ID",
    "Assignment",
    "AssignorSpec",
    "ClusterMetadata",
    "ConsumerGroupMetadata",
    "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor",
    "GroupAssignment",
    "GroupSubscription",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "TopicPartition",
    "check_assignment",
    "load_assignors",
    "select_rebalance_protocol",
    "validate_cooperative_assignment",
]
