"""SASL after ApiVersions, and KIP-368 re-authentication.

SaslHandshake v1 names the mechanism; SaslAuthenticate rounds carry the sans-I/O
mechanism's messages (``coopconsumer._security._sasl``: PLAIN, SCRAM-SHA-256/512 with the
server's signature verified, OAUTHBEARER with extensions) until it is complete. A
refusal closes the session with ``AuthenticationError``, which every waiting request
gets too. When SaslAuthenticate reports a session lifetime, the session
re-authenticates at a random point between 85% and 95% of it (Java's
``SaslClientAuthenticator`` window): new requests queue meanwhile, answers to those
already written are matched as usual, so nothing in flight is dropped. A refused
re-authentication closes the session as a retriable ``BrokerConnectionError``: the
reconnect authenticates from scratch, and only if that fails too is the failure fatal
(some brokers mishandle KIP-368 but accept a new connection).

Pure: no sockets, threads or clocks.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from .._errors import AuthenticationError, BrokerConnectionError
from .._protocol import decode_response, error_codes
from .._protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from .._security._sasl import OAuthBearerMechanism
from . import _traffic
from ._connection_states import ConnectionState
from ._session_core import SessionCore
from ._session_inputs import (
    PeerClosed,
    ReauthenticationDue,
    SaslAuthenticateAnswer,
    SaslHandshakeAnswer,
)
from ._versions import choose_version

__all__ = [
    "REAUTH_WINDOW",
    "authenticate_answer",
    "closed_while_authenticating",
    "handshake_answer",
    "reauthenticate",
    "reauthenticate_answer",
    "rehandshake_answer",
    "start",
]

log = logging.getLogger(__name__)

Session = SessionCore[Any]

#: KIP-368: re-authenticate within this share of the session lifetime (Java's
#: SaslClientAuthenticator picks a point between 85% and 95% at random).
REAUTH_WINDOW: Final = (0.85, 0.95)


class _Refused(Exception):
    """Internal: the exchange failed with ``error`` (an ``AuthenticationError``)."""

    def __init__(self, error: AuthenticationError) -> None:
        super().__init__(str(error))
        self.error = error


def _refusal(
    session: Session,
    message: str,
    *,
    broker_message: str | None = None,
    error_code: int | None = None,
    enabled: tuple[str, ...] = (),
) -> _Refused:
    assert session.sasl is not None
    return _Refused(
        AuthenticationError(
            message,
            broker=session.broker,
            mechanism=session.sasl.mechanism,
            broker_message=broker_message,
            error_code=error_code,
            enabled_mechanisms=enabled,
        )
    )


def _reauth_failure(error: BaseException) -> BrokerConnectionError:
    failure = BrokerConnectionError(f"re-authentication failed: {error}", broker=None)
    failure.__cause__ = error
    return failure


# ----------------------------------------------------------------------------- requests


def start(session: Session, now: float) -> None:
    """SaslHandshake v1 for the configured mechanism; refused before anything is sent
    when the broker lacks the SASL APIs."""
    try:
        _send_handshake(session)
    except _Refused as refused:
        session.close_with(refused.error, None)


def _send_handshake(session: Session) -> None:
    assert session.sasl is not None
    handshake = session.api_versions.get(SaslHandshakeRequest.API_KEY)
    authenticate = session.api_versions.get(SaslAuthenticateRequest.API_KEY)
    if handshake is None or handshake[1] < 1 or authenticate is None:
        raise _refusal(
            session,
            "the broker does not offer SaslHandshake v1 and SaslAuthenticate"
            " (a Kafka broker older than 1.0, or a listener without SASL)",
        )
    session.mechanism = None
    session.write_frame(
        SaslHandshakeRequest(mechanism=session.sasl.mechanism), 1, None, _handshake_answer
    )


def _handshake_answer(frame: bytes) -> SaslHandshakeAnswer:
    _cid, response = decode_response(SaslHandshakeRequest, frame, api_version=1)
    assert isinstance(response, SaslHandshakeResponse)
    return SaslHandshakeAnswer(response=response)


def _send_authenticate(session: Session, payload: bytes, now: float) -> None:
    version = choose_version(
        SaslAuthenticateRequest,
        session.api_versions.get(SaslAuthenticateRequest.API_KEY),
        broker=session.broker,
    )
    session.sasl_sent_at = now

    def answer(frame: bytes) -> SaslAuthenticateAnswer:
        _cid, response = decode_response(SaslAuthenticateRequest, frame, api_version=version)
        assert isinstance(response, SaslAuthenticateResponse)
        return SaslAuthenticateAnswer(response=response, api_version=version)

    session.write_frame(SaslAuthenticateRequest(auth_bytes=payload), version, None, answer)


# ----------------------------------------------------------------------------- answers


def _on_handshake(session: Session, response: SaslHandshakeResponse, now: float) -> None:
    assert session.sasl is not None
    enabled = tuple(response.mechanisms)
    if response.error_code == error_codes.UNSUPPORTED_SASL_MECHANISM:
        raise _refusal(
            session,
            f"the broker does not enable {session.sasl.mechanism}; it enables: "
            + (", ".join(enabled) if enabled else "(none listed)"),
            error_code=response.error_code,
            enabled=enabled,
        )
    if response.error_code != 0:
        info = error_codes.info(response.error_code)
        raise _refusal(
            session,
            f"SaslHandshake refused with {info.name} ({response.error_code})",
            error_code=response.error_code,
            enabled=enabled,
        )
    try:
        session.mechanism = session.sasl.new_mechanism()
    except AuthenticationError as exc:
        raise _refusal(session, _strip_prefix(str(exc)), broker_message=exc.broker_message) from exc
    _send_authenticate(session, session.mechanism.start(), now)


def _on_authenticate(session: Session, event: SaslAuthenticateAnswer, now: float) -> None:
    mechanism = session.mechanism
    assert mechanism is not None
    response = event.response
    if response.error_code != 0:
        info = error_codes.info(response.error_code)
        detail = mechanism.server_error if isinstance(mechanism, OAuthBearerMechanism) else None
        message = f"the broker refused the credentials ({info.name}, {response.error_code})"
        if detail:
            message += f"; token error: {detail}"
        raise _refusal(
            session,
            message,
            broker_message=response.error_message,
            error_code=response.error_code,
        )
    try:
        reply = mechanism.step(response.auth_bytes)
    except AuthenticationError as exc:
        raise _refusal(
            session,
            _strip_prefix(str(exc), exc.broker_message),
            broker_message=exc.broker_message,
        ) from exc
    if reply is not None:
        _send_authenticate(session, reply, now)
        return
    if not mechanism.complete:
        raise _refusal(session, "the exchange ended before the mechanism completed")
    session.mechanism = None
    session.authentications += 1
    lifetime_ms = response.session_lifetime_ms if event.api_version >= 1 else 0
    session.session_lifetime_ms = max(0, lifetime_ms)
    if lifetime_ms > 0:
        share = session.rng.uniform(*REAUTH_WINDOW)
        session.reauth_at = session.sasl_sent_at + lifetime_ms / 1000.0 * share
    else:
        session.reauth_at = None
    log.debug(
        "%s authenticated with %s%s",
        session.broker,
        mechanism.name,
        f"; session lifetime {lifetime_ms} ms" if lifetime_ms > 0 else "",
    )
    _traffic.become_ready(session, now)


def handshake_answer(session: Session, event: SaslHandshakeAnswer, now: float) -> None:
    """AUTHENTICATING: the mechanism is enabled; its first message goes out."""
    try:
        _on_handshake(session, event.response, now)
    except _Refused as refused:
        session.close_with(refused.error, None)


def authenticate_answer(session: Session, event: SaslAuthenticateAnswer, now: float) -> None:
    """AUTHENTICATING: the next round, or READY, or a refusal."""
    try:
        _on_authenticate(session, event, now)
    except _Refused as refused:
        session.close_with(refused.error, None)


def closed_while_authenticating(session: Session, event: PeerClosed, now: float) -> None:
    """Kafka answers an unknown mechanism with UNSUPPORTED_SASL_MECHANISM and its list;
    some brokers (Tansu) hang up instead. Reconnecting would only repeat it."""
    oldest = session.oldest()
    if oldest is None or oldest.request_type is not SaslHandshakeRequest:
        _traffic.closed_by_peer(session, event, now)
        return
    assert session.sasl is not None
    mechanism = session.sasl.mechanism
    session.close_with(
        AuthenticationError(
            f"the broker closed the connection instead of answering SaslHandshake"
            f" for {mechanism}: it does not enable that mechanism on this"
            f" listener (or the listener is not a SASL one)",
            broker=session.broker,
            mechanism=mechanism,
        ),
        None,
    )


# ----------------------------------------------------------------------------- KIP-368


def reauthenticate(session: Session, event: ReauthenticationDue, now: float) -> None:
    """A new SaslHandshake + SaslAuthenticate on the live connection."""
    session.enter(ConnectionState.REAUTHENTICATING)
    session.reauth_at = None
    # A request written before (a JoinGroup the coordinator holds) is answered first:
    # do not time the re-authentication out before it can be.
    written = [e.ticket.deadline for e in session.in_flight.values() if e.ticket is not None]
    session.setup_deadline = max([now + session.request_timeout_s, *written])
    log.debug("%s: re-authenticating (KIP-368)", session.broker)
    try:
        _send_handshake(session)
    except _Refused as refused:
        session.close_with(_reauth_failure(refused.error), None)


def rehandshake_answer(session: Session, event: SaslHandshakeAnswer, now: float) -> None:
    try:
        _on_handshake(session, event.response, now)
    except _Refused as refused:
        session.close_with(_reauth_failure(refused.error), None)


def reauthenticate_answer(session: Session, event: SaslAuthenticateAnswer, now: float) -> None:
    try:
        _on_authenticate(session, event, now)
    except _Refused as refused:
        session.close_with(_reauth_failure(refused.error), None)


def _strip_prefix(text: str, broker_message: str | None = None) -> str:
    """The reason part of an ``AuthenticationError`` message built without a broker."""
    _head, sep, rest = text.partition(" failed: ")
    reason = rest if sep else text
    if broker_message:
        reason = reason.removesuffix(f" (broker says: {broker_message})")
    return reason
