"""The sans-I/O broker session: one Kafka connection's protocol without a socket.

``BrokerSession`` takes a driver's facts (connected, bytes, end of stream, transport
errors, time, requests) and returns what to write, answers, failures and deadlines; it
does TLS (``ssl.MemoryBIO``), ApiVersions (``choose_version``), SASL, KIP-368
re-authentication, framing and correlation ids. Its states (``ConnectionState``) move
only as its transition table (``_session_table``) allows. ``_io/_connection.py`` is
the selector pump that drives it over a socket; any other driver (asyncio) can pump
the same session. See docs/architecture.md, "The broker connection".

Imports the standard library (``ssl`` for its memory objects), attrs, ``_errors``,
``_protocol``, the SASL mechanisms (``_security._sasl``) and ``_transition_table``; never
``socket``, ``selectors``, ``threading``, ``time``, ``asyncio`` or ``_io``
(tests/test_layering.py).
"""

from __future__ import annotations

from ._broker_session import BrokerSession as BrokerSession
from ._connection_states import ConnectionState as ConnectionState
from ._session_core import DEFAULT_MAX_RESPONSE_BYTES as DEFAULT_MAX_RESPONSE_BYTES
from ._session_core import SaslSource as SaslSource
from ._session_events import Answered as Answered
from ._session_events import Closed as Closed
from ._session_events import Failed as Failed
from ._session_events import SessionEvent as SessionEvent
from ._session_inputs import DRIVER_INPUTS as DRIVER_INPUTS
from ._session_inputs import BytesReceived as BytesReceived
from ._session_inputs import CloseRequested as CloseRequested
from ._session_inputs import Connected as Connected
from ._session_inputs import PeerClosed as PeerClosed
from ._session_inputs import RequestSubmitted as RequestSubmitted
from ._session_inputs import Tick as Tick
from ._session_inputs import TransportFailed as TransportFailed
from ._tickets import Ticket as Ticket
from ._tls_pipe import tls_failure_reason as tls_failure_reason
from ._versions import api_name as api_name
from ._versions import choose_version as choose_version

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DRIVER_INPUTS",
    "Answered",
    "BrokerSession",
    "BytesReceived",
    "CloseRequested",
    "Closed",
    "Connected",
    "ConnectionState",
    "Failed",
    "PeerClosed",
    "RequestSubmitted",
    "SaslSource",
    "SessionEvent",
    "Tick",
    "Ticket",
    "TransportFailed",
    "api_name",
    "choose_version",
    "tls_failure_reason",
]
