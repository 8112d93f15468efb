"""From TCP connect to known versions: TLS, then the ApiVersions handshake.

Java's order: the TLS handshake right after TCP connect (``ssl`` and ``sasl_ssl``), then
ApiVersions, then SASL (``_authentication``). ApiVersions is tried at v3 first (KIP-511);
a broker that does not know it answers UNSUPPORTED_VERSION with a v0 body carrying its
own ApiVersions range (if it knows how), and the session retries at that, else v0.
A failed TLS handshake closes the session with ``AuthenticationError`` (mechanism
"SSL"), as does a broker that refuses the TLS session after the client's handshake
finished (TLS 1.3 judges the client's certificate then, so its refusal is an alert on
the first read).

Pure: no sockets, threads or clocks; ``ssl`` for the memory-BIO TLS layer.
"""

from __future__ import annotations

import logging
import ssl
from typing import Any

from .._errors import AuthenticationError, BrokerConnectionError
from .._protocol import decode_response, error_codes
from .._protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from . import _authentication, _traffic
from ._connection_states import ConnectionState
from ._session_core import SessionCore
from ._session_inputs import (
    ApiVersionsAnswer,
    BytesReceived,
    Connected,
    PeerClosed,
    TlsEstablished,
    TlsFailed,
    TransportFailed,
)
from ._tls_pipe import TlsPipe, tls_failure_reason
from ._versions import CLIENT_SOFTWARE_NAME, client_software_version

__all__ = [
    "api_versions_answer",
    "closed_during_tls",
    "on_connected",
    "tls_bytes",
    "tls_established",
    "tls_handshake_failed",
    "tls_session_refused",
    "tls_transport_failed",
    "transport_failed_negotiating",
]

log = logging.getLogger(__name__)

Session = SessionCore[Any]


def on_connected(session: Session, event: Connected, now: float) -> None:
    """TCP is up: start TLS, or ask for the broker's versions."""
    if session.ssl_context is None:
        session.enter(ConnectionState.NEGOTIATING)
        _send_api_versions(session)
        return
    try:
        session.tls = TlsPipe(session.ssl_context, session.server_hostname)
    except (ssl.SSLError, ValueError) as exc:
        session.close_with(
            AuthenticationError(
                f"cannot start TLS: {tls_failure_reason(exc)}",
                broker=session.broker,
                mechanism="SSL",
            ),
            None,
        )
        return
    session.enter(ConnectionState.TLS_HANDSHAKE)
    _advance_tls(session, now)


# ----------------------------------------------------------------------------- TLS


def tls_bytes(session: Session, event: BytesReceived, now: float) -> None:
    """TLS_HANDSHAKE: the broker's handshake messages."""
    assert session.tls is not None
    session.tls.feed(event.data)
    _advance_tls(session, now)


def _advance_tls(session: Session, now: float) -> None:
    assert session.tls is not None
    try:
        done = session.tls.handshake()
    except ssl.SSLError as exc:
        session.dispatch(TlsFailed(exc), now)
        return
    if done:
        session.dispatch(TlsEstablished(), now)


def tls_established(session: Session, event: TlsEstablished, now: float) -> None:
    assert session.tls is not None
    log.debug("TLS with %s: %s", session.broker, session.tls.describe())
    session.enter(ConnectionState.NEGOTIATING)
    _send_api_versions(session)
    # Whatever came with the broker's last handshake message (TLS 1.3 session tickets).
    _traffic.read_tls(session, now)


def tls_handshake_failed(session: Session, event: TlsFailed, now: float) -> None:
    exc = event.error
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
        session.close_with(_closed_during_tls(session, type(exc).__name__), None)
        return
    reason = tls_failure_reason(exc)
    if getattr(exc, "reason", None) == "WRONG_VERSION_NUMBER":
        reason += " (the broker does not speak TLS on this port?)"
    session.close_with(
        AuthenticationError(reason, broker=session.broker, mechanism="SSL"), None, tls_alert=True
    )


def closed_during_tls(session: Session, event: PeerClosed, now: float) -> None:
    assert session.tls is not None
    session.close_with(_closed_during_tls(session, session.tls.feed_eof_during_handshake()), None)


def tls_transport_failed(session: Session, event: TransportFailed, now: float) -> None:
    if isinstance(event.error, ConnectionError):
        session.close_with(_closed_during_tls(session, type(event.error).__name__), None)
        return
    _traffic.transport_failed(session, event, now)


def _closed_during_tls(session: Session, what: str) -> BrokerConnectionError:
    return BrokerConnectionError(
        f"connection closed during the TLS handshake ({what}); is this a TLS listener?",
        broker=session.broker,
    )


def tls_session_refused(session: Session, event: TlsFailed, now: float) -> None:
    """NEGOTIATING: TLS 1.3's verdict on the client's certificate (certificate
    required, unknown CA) arrives as an alert on the first read."""
    exc = event.error
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
        _traffic.tls_receive_failed(session, event, now)
        return
    session.close_with(
        AuthenticationError(
            f"the broker refused the TLS session: {tls_failure_reason(exc)}",
            broker=session.broker,
            mechanism="SSL",
        ),
        None,
    )


def transport_failed_negotiating(session: Session, event: TransportFailed, now: float) -> None:
    """A failed write may have met the hang-up that follows TLS 1.3's refusal of the
    client's certificate before the read met the alert: read the alert first, so the
    refusal is the same ``AuthenticationError`` either way."""
    tls = session.tls
    if tls is not None and event.unread:
        tls.feed(event.unread)
        _plaintext, _closed, failure = tls.read()
        if failure is not None and not isinstance(
            failure, ssl.SSLEOFError | ssl.SSLZeroReturnError
        ):
            tls_session_refused(session, TlsFailed(failure), now)
            return
    _traffic.transport_failed(session, event, now)


# ----------------------------------------------------------------------------- ApiVersions


def _send_api_versions(session: Session) -> None:
    version = session.handshake_version
    request = ApiVersionsRequest(
        client_software_name=CLIENT_SOFTWARE_NAME,
        client_software_version=client_software_version(),
    )

    def answer(frame: bytes) -> ApiVersionsAnswer:
        # decode_response re-reads an answer that does not parse at our version as v0
        # (Java's ApiVersionsResponse.parse): a broker that does not know our
        # ApiVersions version answers in v0.
        _cid, response = decode_response(ApiVersionsRequest, frame, api_version=version)
        assert isinstance(response, ApiVersionsResponse)
        return ApiVersionsAnswer(response=response, api_version=version)

    session.write_frame(request, version, None, answer)


def api_versions_answer(session: Session, event: ApiVersionsAnswer, now: float) -> None:
    response = event.response
    code = response.error_code
    if code == error_codes.UNSUPPORTED_VERSION and event.api_version > 0:
        advertised = {k.api_key: k.max_version for k in response.api_keys}
        fallback = min(advertised.get(ApiVersionsRequest.API_KEY, 0), event.api_version - 1)
        session.handshake_version = max(0, fallback)
        log.debug(
            "%s rejected ApiVersions v%d; retrying with v%d",
            session.broker,
            event.api_version,
            session.handshake_version,
        )
        _send_api_versions(session)
        return
    if code != 0:
        failure = error_codes.to_exception(
            code,
            api_key=ApiVersionsRequest.API_KEY,
            api_version=event.api_version,
            broker=session.broker,
            message=None,
        )
        session.close_with(
            BrokerConnectionError(
                f"ApiVersions handshake failed: {failure}", broker=session.broker
            ),
            None,
        )
        return
    session.api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    if session.sasl is not None:
        session.enter(ConnectionState.AUTHENTICATING)
        _authentication.start(session, now)
        return
    _traffic.become_ready(session, now)
