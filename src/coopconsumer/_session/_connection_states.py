"""``ConnectionState``: where a broker session is in its life.

Which state may follow which is not written here: the transition table
(``_session_table.py``) says it, and docs/architecture.md draws it.

Pure: the standard library only.
"""

from __future__ import annotations

import enum

__all__ = ["ConnectionState"]


class ConnectionState(enum.Enum):
    """Lifecycle of a broker session: it moves forward, except that READY and
    REAUTHENTICATING alternate."""

    CONNECTING = "connecting"
    """TCP connect in progress (the driver's). Requests queue."""
    TLS_HANDSHAKE = "tls handshake"
    """Connected; TLS handshake in progress (``ssl`` and ``sasl_ssl``). Requests queue."""
    NEGOTIATING = "negotiating"
    """Connected; ApiVersions sent, answer pending. Requests queue."""
    AUTHENTICATING = "authenticating"
    """Versions known; SaslHandshake/SaslAuthenticate in progress. Requests queue."""
    READY = "ready"
    """Versions known; requests are encoded and written as they come."""
    REAUTHENTICATING = "reauthenticating"
    """READY before, re-authenticating (KIP-368): new requests queue, answers to those
    already written still arrive. Back to READY when done."""
    CLOSED = "closed"
    """Terminal. ``close_error`` says why (None for a deliberate close)."""
