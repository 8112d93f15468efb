"""coopconsumer: Kafka incremental cooperative rebalancing (KIP-429) for Python consumers.

The public API is what this module re-exports; everything under a leading underscore is
private.
"""

from ._consumer import Consumer as Consumer
from ._errors import AssignorError as AssignorError
from ._errors import AuthenticationError as AuthenticationError
from ._errors import BrokerConnectionError as BrokerConnectionError
from ._errors import CommitFailedError as CommitFailedError
from ._errors import ConfigurationError as ConfigurationError
from ._errors import CoopConsumerError as CoopConsumerError
from ._errors import DeliveryError as DeliveryError
from ._errors import IllegalStateError as IllegalStateError
from ._errors import IncompatibleVersionError as IncompatibleVersionError
from ._errors import InvalidAssignmentError as InvalidAssignmentError
from ._errors import KafkaError as KafkaError
from ._errors import ProducerFencedError as ProducerFencedError
from ._errors import ProtocolError as ProtocolError
from ._errors import RebalanceInProgressError as RebalanceInProgressError
from ._errors import RequestTimeoutError as RequestTimeoutError
from ._errors import TransactionAbortedError as TransactionAbortedError
from ._errors import TransactionError as TransactionError
from ._listener import RebalanceListener as RebalanceListener
from ._transactional import TransactionalOutput as TransactionalOutput
from ._transactional import TransactionalProcessor as TransactionalProcessor
from ._transactional import TransactionStats as TransactionStats
from ._types import ConsumerGroupMetadata as ConsumerGroupMetadata
from ._types import OffsetAndMetadata as OffsetAndMetadata
from ._types import TopicPartition as TopicPartition

__version__ = "0.1.0.dev0"

__all__ = [
    "AssignorError",
    "AuthenticationError",
    "BrokerConnectionError",
    "CommitFailedError",
    "ConfigurationError",
    "Consumer",
    "ConsumerGroupMetadata",
    "CoopConsumerError",
    "DeliveryError",
    "IllegalStateError",
    "IncompatibleVersionError",
    "InvalidAssignmentError",
    "KafkaError",
    "OffsetAndMetadata",
    "ProducerFencedError",
    "ProtocolError",
    "RebalanceInProgressError",
    "RebalanceListener",
    "RequestTimeoutError",
    "TopicPartition",
    "TransactionAbortedError",
    "TransactionError",
    "TransactionStats",
    "TransactionalOutput",
    "TransactionalProcessor",
    "__version__",
]
