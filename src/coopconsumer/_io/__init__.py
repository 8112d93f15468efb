"""The blocking side of the library: our own Kafka wire client, the driver thread, and
the confluent-kafka fetcher and producer.

``BrokerConnection`` is one non-blocking TCP connection; ``KafkaClient`` drives all of
them from one thread with one ``selectors`` loop. Both are general-purpose (group, offset
and admin APIs alike) and hold no consumer-group state.

This package's ``__init__`` deliberately imports neither the fetcher nor the producer (the
two modules that import ``confluent_kafka``), so the wire client can be used without
loading librdkafka.
"""

from .._protocol.queries import find_coordinator_request as find_coordinator_request
from .._protocol.queries import raise_for_error as raise_for_error
from ._backoff import ExponentialBackoff as ExponentialBackoff
from ._client import BrokerInfo as BrokerInfo
from ._client import ClusterSnapshot as ClusterSnapshot
from ._client import CoordinatorAnswer as CoordinatorAnswer
from ._client import KafkaClient as KafkaClient
from ._client import PartitionInfo as PartitionInfo
from ._client import TopicInfo as TopicInfo
from ._client import coordinator_answer as coordinator_answer
from ._client_config import ClientConfig as ClientConfig
from ._connection import BrokerConnection as BrokerConnection
from ._connection import ConnectionState as ConnectionState
from ._connection import choose_version as choose_version
from ._future import PendingRequest as PendingRequest

__all__ = [
    "BrokerConnection",
    "BrokerInfo",
    "ClientConfig",
    "ClusterSnapshot",
    "ConnectionState",
    "CoordinatorAnswer",
    "ExponentialBackoff",
    "KafkaClient",
    "PartitionInfo",
    "PendingRequest",
    "TopicInfo",
    "choose_version",
    "coordinator_answer",
    "find_coordinator_request",
    "raise_for_error",
]
