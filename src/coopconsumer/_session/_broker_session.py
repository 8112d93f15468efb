"""``BrokerSession``: one Kafka connection's protocol, with no I/O.

Bytes and time in; bytes to send, answers, failures, deadlines out. A driver owns the
transport: it connects, reports ``Connected``, writes ``data_to_send()``, feeds what it
reads as ``BytesReceived`` (``PeerClosed`` at end of stream, ``TransportFailed`` for an
``OSError``), calls ``handle(Tick(), now)`` at ``next_deadline()``, and acts on the
events ``handle`` returns (``Answered``, ``Failed``, ``Closed``). The session does the
rest: TLS through ``ssl.MemoryBIO``, ApiVersions, SASL, KIP-368, framing, correlation
ids, pipelining and timeouts (docs/architecture.md, "The broker connection").

Pure: no sockets, threads or clocks.
"""

from __future__ import annotations

from typing import ClassVar

from .._protocol._schema import Request
from ._connection_states import ConnectionState
from ._session_core import SessionCore
from ._session_events import SessionEvent
from ._session_inputs import DRIVER_INPUTS, RequestSubmitted
from ._session_table import IGNORED, TRANSITIONS
from ._tickets import TicketT
from ._versions import choose_version

__all__ = ["BrokerSession"]


class BrokerSession(SessionCore[TicketT]):
    """The sans-I/O state machine of one broker connection (see the module docstring).

    Construct it when the driver starts connecting (``now`` starts the setup timeout),
    with the TLS context and SASL source the connection must use. ``handle`` accepts
    only the driver's inputs (``DRIVER_INPUTS``) and raises ``IllegalTransition`` for
    one the current state rejects (a driver bug; nothing changes) and ``TypeError`` for
    anything else.
    """

    transitions: ClassVar = TRANSITIONS
    ignored: ClassVar = IGNORED

    def handle(self, event: object, now: float) -> list[SessionEvent[TicketT]]:
        """Handle one driver input at ``now``; the events for the driver, in order.

        Afterwards ``data_to_send()`` holds what to write and ``next_deadline()`` when
        to ``Tick``."""
        if not isinstance(event, DRIVER_INPUTS):
            raise TypeError(f"not an input a driver may hand a session: {event!r}")
        self.dispatch(event, now)
        return self.take_events()

    def submit(self, ticket: TicketT, now: float) -> list[SessionEvent[TicketT]]:
        """``handle(RequestSubmitted(ticket), now)``, typed."""
        return self.handle(RequestSubmitted(ticket), now)

    def next_deadline(self) -> float | None:
        """The earliest time at which a ``Tick`` has something to do."""
        deadlines = [ticket.deadline for ticket in self.queued]
        deadlines.extend(e.ticket.deadline for e in self.in_flight.values() if e.ticket)
        if self.setup_deadline is not None and self.state is not ConnectionState.CLOSED:
            deadlines.append(self.setup_deadline)
        if self.reauth_at is not None and self.state is ConnectionState.READY:
            deadlines.append(self.reauth_at)
        return min(deadlines) if deadlines else None

    def negotiated_version(self, request_type: type[Request]) -> int:
        """The version this session speaks for ``request_type``.

        Raises ``RuntimeError`` before READY and ``KafkaError`` UNSUPPORTED_VERSION when
        the two sides share no version of the API.
        """
        if self.state is not ConnectionState.READY:
            raise RuntimeError(f"connection to {self.broker} is {self.state.value}, not ready")
        return choose_version(
            request_type, self.api_versions.get(request_type.API_KEY), broker=self.broker
        )

    @property
    def reauthenticate_at(self) -> float | None:
        """When the next KIP-368 re-authentication is due, None if none is."""
        return self.reauth_at

    @property
    def in_flight_count(self) -> int:
        """Requests written and not yet answered (the session's own included)."""
        return len(self.in_flight)

    @property
    def queued_count(self) -> int:
        """Requests waiting for READY."""
        return len(self.queued)

    def __repr__(self) -> str:
        return f"<BrokerSession {self.broker} {self.state.value}>"
