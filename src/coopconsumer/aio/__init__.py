"""asyncio support: :class:`AsyncConsumer`, the consumer for event-loop applications.

The group protocol and the broker connections run on the event loop through the same
sans-I/O group member and broker session as :class:`coopconsumer.Consumer`; records
come from librdkafka, which wakes the loop through a file descriptor. See
docs/asyncio.md.
"""

from ._consumer import AsyncConsumer as AsyncConsumer

__all__ = ["AsyncConsumer"]
