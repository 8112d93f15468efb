"""Requests, bytes and time: the handlers every phase of a broker session shares.

Requests queue until READY and are written in order then (``become_ready``). Bytes
are decrypted (under TLS), cut into frames by their 4-byte size and matched to the
written request by correlation id (pipelined; Kafka answers in order, matching does
not rely on it); an answer to the session's own request becomes a derived input
(``ApiVersionsAnswer``, ...). A ``Tick`` becomes the timers that are due.

Failure rules, as in Java's ``NetworkClient``: any stream-level problem (EOF, garbage,
an unknown correlation id, an absurd frame size, a request that timed out after being
written) closes the session; the request the problem concerns gets the specific error
and every other outstanding request gets ``BrokerConnectionError`` chained to it.

Pure: no sockets, threads or clocks.
"""

from __future__ import annotations

from typing import Any

from .._errors import BrokerConnectionError
from .._protocol import decode_response
from .._transition_table import IllegalTransition
from ._connection_states import ConnectionState
from ._session_core import SessionCore
from ._session_events import Failed
from ._session_inputs import (
    BytesReceived,
    CloseRequested,
    PeerClosed,
    ReauthenticationDue,
    RequestSubmitted,
    SetupExpired,
    StreamBroken,
    Tick,
    TlsFailed,
    TransportFailed,
)
from ._versions import api_name

__all__ = [
    "become_ready",
    "close",
    "closed_by_peer",
    "on_bytes",
    "on_tick",
    "queue_request",
    "refuse_request",
    "setup_expired",
    "stream_broken",
    "tls_receive_failed",
    "transport_failed",
    "write_request",
]

Session = SessionCore[Any]

_OPERATIONS = {
    "connect": "cannot connect",
    "send": "send failed",
    "receive": "receive failed",
    "socket": "socket error",
}

#: What timed out, by the state a setup deadline passes in.
_SETUP_STEP = {
    ConnectionState.CONNECTING: "connection setup (connect)",
    ConnectionState.TLS_HANDSHAKE: "connection setup (TLS handshake)",
    ConnectionState.NEGOTIATING: "connection setup (ApiVersions handshake)",
    ConnectionState.AUTHENTICATING: "connection setup (SASL authentication)",
    ConnectionState.REAUTHENTICATING: "SASL re-authentication",
}


# ----------------------------------------------------------------------------- requests


def queue_request(session: Session, event: RequestSubmitted[Any], now: float) -> None:
    """Not READY yet (or re-authenticating): the request waits its turn."""
    session.queued.append(event.ticket)


def write_request(session: Session, event: RequestSubmitted[Any], now: float) -> None:
    session.write_request(event.ticket)


def refuse_request(session: Session, event: RequestSubmitted[Any], now: float) -> None:
    """CLOSED: the request fails at once with the reason the session closed."""
    session.emit(Failed(event.ticket, session.closed_error(event.ticket)))


def become_ready(session: Session, now: float) -> None:
    """Versions known (and authenticated): write every queued request, in order."""
    session.enter(ConnectionState.READY)
    session.was_ready = True
    session.setup_deadline = None
    queued, session.queued = session.queued, type(session.queued)()
    for ticket in queued:
        session.write_request(ticket)


# ----------------------------------------------------------------------------- bytes


def on_bytes(session: Session, event: BytesReceived, now: float) -> None:
    """Bytes once frames flow (NEGOTIATING and after): decrypt, cut, match."""
    tls = session.tls
    if tls is None:
        take_plaintext(session, event.data, now)
        return
    tls.feed(event.data)
    read_tls(session, now)


def read_tls(session: Session, now: float) -> None:
    """Take every byte the TLS layer can decrypt now; then its failure or its end."""
    assert session.tls is not None
    plaintext, closed, failure = session.tls.read()
    if plaintext:
        take_plaintext(session, plaintext, now)
    if failure is not None and session.open():
        session.dispatch(TlsFailed(failure), now)
    elif closed and session.open():
        session.dispatch(PeerClosed(), now)


def take_plaintext(session: Session, data: bytes, now: float) -> None:
    """Frame by frame as bytes arrive: an absurd size prefix is caught after the first
    chunk, and the buffer never holds more than one frame plus a chunk."""
    buf = session.incoming
    buf += data
    offset = 0
    try:
        while len(buf) - offset >= 4 and session.open():
            size = int.from_bytes(buf[offset : offset + 4], "big", signed=True)
            if size < 4 or size > session.max_response_bytes:
                oldest = session.oldest()
                error = session.protocol_error(
                    f"response size {size} outside 4..{session.max_response_bytes}"
                    " bytes: not a Kafka frame",
                    oldest,
                )
                session.dispatch(StreamBroken(error=error, victim=oldest), now)
                return
            if len(buf) - offset - 4 < size:
                break
            frame = bytes(buf[offset + 4 : offset + 4 + size])
            offset += 4 + size
            _on_frame(session, frame, now)
    finally:
        if offset and session.open():
            del buf[:offset]


def _on_frame(session: Session, frame: bytes, now: float) -> None:
    correlation_id = int.from_bytes(frame[:4], "big", signed=True)
    entry = session.in_flight.pop(correlation_id, None)
    if entry is None:
        oldest = session.oldest()
        expected = list(session.in_flight)[:5]
        error = session.protocol_error(
            f"response with unknown correlation id {correlation_id} (outstanding: {expected})",
            oldest,
        )
        session.dispatch(StreamBroken(error=error, victim=oldest), now)
        return
    if entry.own_answer is not None:
        try:
            answer = entry.own_answer(frame)
        except Exception as exc:
            session.dispatch(StreamBroken(error=session.decode_error(entry, exc), victim=None), now)
            return
        try:
            session.dispatch(answer, now)
        except IllegalTransition:
            raise
        except Exception as exc:
            # A mechanism or codec that raised something unexpected on a hostile
            # answer: the stream is unusable, as for an answer that does not decode.
            if session.open():
                session.dispatch(
                    StreamBroken(error=session.decode_error(entry, exc), victim=None), now
                )
        return
    try:
        _cid, response = decode_response(entry.request_type, frame, api_version=entry.api_version)
    except Exception as exc:
        # Put the entry back so that the close reports this request as the victim.
        session.in_flight[correlation_id] = entry
        session.dispatch(StreamBroken(error=session.decode_error(entry, exc), victim=entry), now)
        return
    session.answered(entry, response)


def stream_broken(session: Session, event: StreamBroken, now: float) -> None:
    session.close_with(event.error, event.victim)


def tls_receive_failed(session: Session, event: TlsFailed, now: float) -> None:
    """A TLS record failed after the session was established."""
    session.close_with(
        BrokerConnectionError(f"receive failed: {event.error}", broker=session.broker), None
    )


# ----------------------------------------------------------------------------- the transport


def closed_by_peer(session: Session, event: PeerClosed, now: float) -> None:
    session.close_with(eof_error(session), None)


def eof_error(session: Session) -> BrokerConnectionError:
    oldest = session.oldest()
    pending = "" if not session.incoming else f" after {len(session.incoming)} bytes of a response"
    if oldest is None:
        return BrokerConnectionError(
            f"connection closed by the broker{pending}", broker=session.broker
        )
    return BrokerConnectionError(
        f"connection closed by the broker{pending} while waiting for"
        f" {api_name(oldest.request_type)} v{oldest.api_version}",
        broker=session.broker,
    )


def transport_failed(session: Session, event: TransportFailed, now: float) -> None:
    error = BrokerConnectionError(
        f"{_OPERATIONS[event.operation]}: {event.error}", broker=session.broker
    )
    error.__cause__ = event.error
    session.close_with(error, None)


def close(session: Session, event: CloseRequested, now: float) -> None:
    session.close_with(event.error, None)


# ----------------------------------------------------------------------------- time


def on_tick(session: Session, event: Tick, now: float) -> None:
    """The timers that are due, in order: the setup (or re-authentication) bound, the
    re-authentication point, queued requests, then written ones (Java closes the
    connection for one: a broker that sat on it is presumed stuck)."""
    if session.setup_deadline is not None and now >= session.setup_deadline:
        session.dispatch(SetupExpired(), now)
        return
    if session.reauth_at is not None and now >= session.reauth_at:
        session.dispatch(ReauthenticationDue(), now)
    if any(ticket.deadline <= now for ticket in session.queued):
        keep = type(session.queued)()
        for ticket in session.queued:
            if ticket.deadline <= now:
                session.emit(Failed(ticket, session.timeout_error(ticket, sent=False)))
            else:
                keep.append(ticket)
        session.queued = keep
    if not session.open():
        return
    for entry in session.in_flight.values():
        if entry.ticket is not None and entry.ticket.deadline <= now:
            error = session.timeout_error(entry.ticket, sent=True)
            session.dispatch(StreamBroken(error=error, victim=entry), now)
            return


def setup_expired(session: Session, event: SetupExpired, now: float) -> None:
    what = _SETUP_STEP.get(session.state, "connection setup")
    session.close_with(BrokerConnectionError(f"{what} timed out", broker=session.broker), None)
