"""What a broker session tells its driver: answers, failures and its end.

``BrokerSession.handle`` returns these in order; bytes to write come from
``data_to_send()`` and the next timer from ``next_deadline()``.

Pure: attrs and the ``Ticket`` type.
"""

from __future__ import annotations

from typing import Any, Generic

import attrs

from ._tickets import TicketT

__all__ = ["Answered", "Closed", "Failed", "SessionEvent"]


@attrs.frozen(eq=False)
class Answered(Generic[TicketT]):
    """``ticket``'s request was answered with ``response`` (decoded)."""

    ticket: TicketT
    response: Any


@attrs.frozen(eq=False)
class Failed(Generic[TicketT]):
    """``ticket``'s request failed with ``error`` (typed, naming the broker)."""

    ticket: TicketT
    error: BaseException


@attrs.frozen
class Closed:
    """The session closed: the driver closes its transport. ``error`` says why (None for
    a deliberate close); every outstanding request got its ``Failed`` with it.
    ``farewell`` is what the driver may still try to write before closing (a TLS alert
    that tells the broker why), without waiting."""

    error: BaseException | None
    farewell: bytes = b""


SessionEvent = Answered[TicketT] | Failed[TicketT] | Closed
