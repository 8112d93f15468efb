"""coopconsumer: Kafka incremental cooperative rebalancing (KIP-429) for Python consumers.

The public API is what this module re-exports; everything under a leading underscore is
private.

Only the exceptions are imported eagerly. The consumer, the listener protocol, the
transactional loop and the value types are imported on first use (PEP 562), so
``import coopconsumer`` (and an import of one exception) does not pay for the
consumer's whole stack: ``benchmarks/import_time.py`` measures it,
``tests/test_import_cost.py`` checks which modules it pulls in.
"""

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from ._consumer import Consumer as Consumer
    from ._listener import RebalanceListener as RebalanceListener
    from ._transactional import TransactionalOutput as TransactionalOutput
    from ._transactional import TransactionalProcessor as TransactionalProcessor
    from ._transactional import TransactionStats as TransactionStats
    from ._types import ConsumerGroupMetadata as ConsumerGroupMetadata
    from ._types import OffsetAndMetadata as OffsetAndMetadata
    from ._types import TopicPartition as TopicPartition

#: Public name -> the private module that defines it, imported on first access.
_LAZY: dict[str, str] = {
    "Consumer": "_consumer",
    "RebalanceListener": "_listener",
    "TransactionalOutput": "_transactional",
    "TransactionalProcessor": "_transactional",
    "TransactionStats": "_transactional",
    "ConsumerGroupMetadata": "_types",
    "OffsetAndMetadata": "_types",
    "TopicPartition": "_types",
}

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
