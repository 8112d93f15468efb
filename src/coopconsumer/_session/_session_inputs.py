"""What a broker session is told: facts from its driver, and the facts it derives.

A driver (the selector pump in ``_io/_connection.py``, or any other transport) hands
``BrokerSession.handle`` the ``DRIVER_INPUTS``: the transport's facts (``Connected``,
``BytesReceived``, ``PeerClosed``, ``TransportFailed``), time passing (``Tick``) and its
caller's wishes (``RequestSubmitted``, ``CloseRequested``).

The session derives the others from them and dispatches them through the same table
(``_session_table.py``), as the group member routes an answer to its per-API outcome:
bytes become the TLS handshake finishing or failing, answers to the session's own
requests and broken streams; a ``Tick`` becomes the timers that are due. A driver never
sends a derived input.

Pure: ``ssl`` (for its error type), attrs, the protocol's message types and the
request types of ``_tickets``.
"""

from __future__ import annotations

import ssl
from typing import Any, Final, Generic, Literal

import attrs

from .._protocol.messages import (
    ApiVersionsResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)
from ._tickets import InFlight, TicketT

__all__ = [
    "DRIVER_INPUTS",
    "ApiVersionsAnswer",
    "BytesReceived",
    "CloseRequested",
    "Connected",
    "PeerClosed",
    "ReauthenticationDue",
    "RequestSubmitted",
    "SaslAuthenticateAnswer",
    "SaslHandshakeAnswer",
    "SetupExpired",
    "StreamBroken",
    "Tick",
    "TlsEstablished",
    "TlsFailed",
    "TransportFailed",
]

#: What a failed transport operation was doing; it names the error ("send failed: ...").
Operation = Literal["connect", "send", "receive", "socket"]


# ----------------------------------------------------------------------------- driver


@attrs.frozen
class Connected:
    """The TCP connection is established."""


@attrs.frozen
class BytesReceived:
    """Bytes read from the transport (ciphertext under TLS), in order."""

    data: bytes


@attrs.frozen
class PeerClosed:
    """The transport reached end of stream: the broker hung up."""


@attrs.frozen(kw_only=True)
class TransportFailed:
    """A transport operation failed (``OSError`` or, while connecting, anything
    name resolution raised). ``unread`` is what the transport could still read after a
    failed send: under TLS 1.3 a refused client certificate is an alert followed by a
    hang-up, and the write may meet the hang-up before the read meets the alert."""

    error: Exception
    operation: Operation
    unread: bytes = b""


@attrs.frozen
class Tick:
    """Time passed: expire what is due (request and setup timeouts, KIP-368)."""


@attrs.frozen(eq=False)
class RequestSubmitted(Generic[TicketT]):
    """The caller wants ``ticket.request`` sent; it queues until READY."""

    ticket: TicketT


@attrs.frozen(kw_only=True)
class CloseRequested:
    """Close now. ``error`` None is a deliberate close; a driver that must give up on
    the session (a bug of its own) passes the reason, which every request gets."""

    error: BaseException | None = None


# ----------------------------------------------------------------------------- derived


@attrs.frozen
class TlsEstablished:
    """The TLS handshake finished (the broker's certificate verified)."""


@attrs.frozen
class TlsFailed:
    """The TLS layer failed: the handshake, or a record after it (an alert)."""

    error: ssl.SSLError


@attrs.frozen(kw_only=True)
class ApiVersionsAnswer:
    """The broker's answer to the session's ApiVersions request."""

    response: ApiVersionsResponse
    api_version: int


@attrs.frozen(kw_only=True)
class SaslHandshakeAnswer:
    """The broker's answer to SaslHandshake."""

    response: SaslHandshakeResponse


@attrs.frozen(kw_only=True)
class SaslAuthenticateAnswer:
    """The broker's answer to one SaslAuthenticate round."""

    response: SaslAuthenticateResponse
    api_version: int


@attrs.frozen(kw_only=True, eq=False)
class StreamBroken:
    """The byte stream is unusable (a frame size that is not Kafka's, an unknown
    correlation id, an answer that does not decode, a written request that timed out).
    ``victim`` is the request the problem concerns: it gets ``error`` itself, every
    other one a ``BrokerConnectionError`` chained to it."""

    error: BaseException
    victim: InFlight[Any] | None


@attrs.frozen
class SetupExpired:
    """``socket.connection.setup.timeout.ms`` (or a re-authentication's bound) passed."""


@attrs.frozen
class ReauthenticationDue:
    """The point chosen within the SASL session's lifetime came (KIP-368)."""


#: The inputs a driver may hand to ``BrokerSession.handle``.
DRIVER_INPUTS: Final = (
    Connected,
    BytesReceived,
    PeerClosed,
    TransportFailed,
    Tick,
    RequestSubmitted,
    CloseRequested,
)
