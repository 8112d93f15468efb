"""A request as the session sees it: the caller's ``Ticket`` and the in-flight entry.

A ``Ticket`` is whatever the driver uses to hand an answer back (the selector pump's
``PendingRequest``, an asyncio driver's own future): the session reads its request and
deadline, writes the version and correlation id it chose into it, and returns it in
``Answered``/``Failed``. ``InFlight`` is one written request awaiting its answer, a
caller's or the session's own (ApiVersions, SASL), whose answer becomes a derived input.

Pure: the standard library and ``_protocol``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from .._protocol._schema import Request

__all__ = ["InFlight", "Ticket", "TicketT"]


class Ticket(Protocol):
    """What the session needs of a caller's request."""

    @property
    def request(self) -> Request:
        """The request to send."""
        ...

    @property
    def deadline(self) -> float:
        """When it fails with a timeout (monotonic seconds), queueing included."""
        ...

    #: The version to speak: pinned by the caller, or written by the session.
    api_version: int | None
    #: Written by the session when the request goes out.
    correlation_id: int | None


TicketT = TypeVar("TicketT", bound=Ticket)


class InFlight(Generic[TicketT]):
    """A request written (or being written) to the stream, awaiting its answer."""

    __slots__ = ("api_version", "own_answer", "request_type", "ticket")

    def __init__(
        self,
        request_type: type[Request],
        api_version: int,
        ticket: TicketT | None,
        own_answer: Callable[[bytes], object] | None = None,
    ) -> None:
        self.request_type = request_type
        self.api_version = api_version
        #: None for the session's own requests, whose answer frame ``own_answer``
        #: turns into a derived input.
        self.ticket = ticket
        self.own_answer = own_answer

    @property
    def api_key(self) -> int:
        return self.request_type.API_KEY
