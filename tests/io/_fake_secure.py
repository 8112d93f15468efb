"""The fake broker with TLS (the standard library's OpenSSL, certificates from trustme)
and scripted SASL handlers, for the connection's security unit tests."""

from __future__ import annotations

import ssl
from collections.abc import Callable

import trustme
from _fake_broker import DEFAULT_VERSIONS, FakeBroker, FakeConn

from coopconsumer._protocol import RequestHeader
from coopconsumer._protocol._schema import Request
from coopconsumer._protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

SASL_VERSIONS = {
    **DEFAULT_VERSIONS,
    SaslHandshakeRequest.API_KEY: (0, 1),
    SaslAuthenticateRequest.API_KEY: (0, 2),
}


class TlsFakeBroker(FakeBroker):
    """A FakeBroker whose connections are TLS (server side) before any frame."""

    def __init__(self, context: ssl.SSLContext, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.context = context
        self.handshake_errors: list[BaseException] = []

    def _serve(self, conn: FakeConn) -> None:
        try:
            conn.sock.settimeout(5)
            conn.sock = self.context.wrap_socket(conn.sock, server_side=True)
            conn.sock.settimeout(0.05)
        except (ssl.SSLError, OSError) as exc:
            self.handshake_errors.append(exc)
            conn.close()
            return
        super()._serve(conn)


def server_context(ca: trustme.CA, *names: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*(names or ("127.0.0.1", "localhost"))).configure_cert(context)
    return context


class PlainSasl:
    """Broker-side PLAIN for ``FakeBroker.on``: accepts ``users``, counts exchanges,
    reports ``lifetime_ms`` (KIP-368); ``refuse`` makes the next answer an error."""

    def __init__(self, users: dict[str, str], *, lifetime_ms: int = 0) -> None:
        self.users = users
        self.lifetime_ms = lifetime_ms
        self.handshakes = 0
        self.authentications = 0
        self.refuse_with: int | None = None
        self.hold_handshake: Callable[[], bool] = lambda: False

    def install(self, broker: FakeBroker) -> None:
        broker.on(SaslHandshakeRequest.API_KEY, self.on_handshake)
        broker.on(SaslAuthenticateRequest.API_KEY, self.on_authenticate)

    def on_handshake(self, conn: FakeConn, header: RequestHeader, request: Request) -> None:
        assert isinstance(request, SaslHandshakeRequest)
        self.handshakes += 1
        if request.mechanism != "PLAIN":
            conn.reply(header, SaslHandshakeResponse(error_code=33, mechanisms=("PLAIN",)))
            return
        conn.reply(header, SaslHandshakeResponse(error_code=0, mechanisms=("PLAIN",)))

    def on_authenticate(self, conn: FakeConn, header: RequestHeader, request: Request) -> None:
        assert isinstance(request, SaslAuthenticateRequest)
        _authzid, user, password = request.auth_bytes.decode().split("\0")
        if self.refuse_with is not None or self.users.get(user) != password:
            conn.reply(
                header,
                SaslAuthenticateResponse(
                    error_code=self.refuse_with or 58,
                    error_message="Authentication failed: Invalid username or password",
                ),
            )
            return
        self.authentications += 1
        conn.reply(header, SaslAuthenticateResponse(session_lifetime_ms=self.lifetime_ms))
