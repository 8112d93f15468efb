"""asyncio support: :class:`AsyncConsumer`, the consumer for event-loop applications,
and :class:`AsyncTransactionalProcessor`, the exactly-once loop on it.

The group protocol and the broker connections run on the event loop through the same
sans-I/O group member and broker session as :class:`coopconsumer.Consumer`; records
come from librdkafka, which wakes the loop through a file descriptor. The exactly-once
loop drives the same core as :class:`coopconsumer.TransactionalProcessor`. See
docs/asyncio.md.
"""

from ._consumer import AsyncConsumer as AsyncConsumer
from ._transactional import AsyncProcessFunction as AsyncProcessFunction
from ._transactional import AsyncTransactionalProcessor as AsyncTransactionalProcessor

__all__ = ["AsyncConsumer", "AsyncProcessFunction", "AsyncTransactionalProcessor"]
