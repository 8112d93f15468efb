"""The broker's side of a ``BrokerSession`` transcript, in memory: no socket, no thread,
no clock.

``Peer`` takes what the session wrote (``data_to_send()``), decrypts it with a
server-side ``ssl.SSLObject`` over memory BIOs when TLS is on, cuts it into frames and
decodes the requests; it encodes answers (at the request's version and correlation
id), frames and encrypts them for ``BytesReceived``. ``Req`` is the simplest ticket a
driver can give a session.
"""

from __future__ import annotations

import contextlib
import random
import ssl
import struct
from typing import Any

import trustme

from coopconsumer._protocol import RequestHeader, decode_request, encode_response
from coopconsumer._protocol._schema import Request, Response
from coopconsumer._protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
    HeartbeatRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from coopconsumer._session import (
    BrokerSession,
    BytesReceived,
    Connected,
    ConnectionState,
    SessionEvent,
)

BROKER = "127.0.0.1:9092 (node 1)"

#: What the peer advertises unless a test says otherwise.
VERSIONS: dict[int, tuple[int, int]] = {
    ApiVersionsRequest.API_KEY: (0, 3),
    MetadataRequest.API_KEY: (0, 12),
    HeartbeatRequest.API_KEY: (0, 4),
}
SASL_VERSIONS: dict[int, tuple[int, int]] = {
    **VERSIONS,
    SaslHandshakeRequest.API_KEY: (0, 1),
    SaslAuthenticateRequest.API_KEY: (0, 2),
}


class Req:
    """A ticket: the request, its deadline, and what the session writes into it."""

    def __init__(self, request: Request, *, deadline: float = 100.0, version: int | None = None):
        self.request = request
        self.deadline = deadline
        self.api_version: int | None = version
        self.correlation_id: int | None = None

    def __repr__(self) -> str:
        return f"<Req {type(self.request).__name__}>"


def heartbeat(generation_id: int = 0, *, deadline: float = 100.0) -> Req:
    return Req(
        HeartbeatRequest(group_id="g", generation_id=generation_id, member_id="m"),
        deadline=deadline,
    )


def new_session(**kwargs: Any) -> BrokerSession[Req]:
    """A session starting at t=0 with a seeded RNG (the KIP-368 point is reproducible)."""
    kwargs.setdefault("broker", BROKER)
    kwargs.setdefault("now", 0.0)
    kwargs.setdefault("rng", random.Random(7))
    return BrokerSession(**kwargs)


def state_of(session: BrokerSession[Req]) -> ConnectionState:
    """The state, read through a call (mypy would keep a narrowed one)."""
    return session.state


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Peer:
    """The broker end of one session's stream (see the module docstring)."""

    def __init__(self, session: BrokerSession[Req], *, tls: ssl.SSLContext | None = None):
        self.session = session
        self.events: list[SessionEvent[Req]] = []
        self._buffer = bytearray()
        self._server: ssl.SSLObject | None = None
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        #: The server-side TLS failure, if the handshake failed on this side.
        self.tls_error: ssl.SSLError | None = None
        if tls is not None:
            self._server = tls.wrap_bio(self._incoming, self._outgoing, server_side=True)

    # -- session side -----------------------------------------------------------------

    def feed(self, event: object, now: float = 0.0) -> list[SessionEvent[Req]]:
        """Hand ``event`` to the session; keep and return its events."""
        events = self.session.handle(event, now)
        self.events.extend(events)
        return events

    def connect(self, now: float = 0.0) -> None:
        self.feed(Connected(), now)

    # -- the wire ---------------------------------------------------------------------

    def pump_tls(self, now: float = 0.0, rounds: int = 10) -> None:
        """Run the TLS handshake both ways until neither side has anything to say, or
        the server side failed (its alert is then left for ``server_bytes``)."""
        for _ in range(rounds):
            sent = self.session.data_to_send()
            if sent:
                self._buffer += self.take_from_client(sent)
            if self.tls_error is not None:
                return
            reply = self._outgoing.read()
            if not sent and not reply:
                return
            if reply:
                self.feed(BytesReceived(reply), now)

    def take_from_client(self, data: bytes) -> bytes:
        """Absorb the client's bytes; the plaintext (all of it without TLS)."""
        if self._server is None:
            return data
        self._incoming.write(data)
        if self.tls_error is not None:
            return b""
        try:
            self._server.do_handshake()
        except ssl.SSLWantReadError:
            return b""
        except ssl.SSLError as exc:
            self.tls_error = exc
            return b""
        out = bytearray()
        while True:
            try:
                chunk = self._server.read(1 << 20)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLError as exc:
                self.tls_error = exc
                break
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def requests(self) -> list[tuple[RequestHeader, Request]]:
        """Every whole request the session wrote since the last call, decoded."""
        data = self.session.data_to_send()
        self._buffer += self.take_from_client(data)
        found = []
        while len(self._buffer) >= 4:
            (size,) = struct.unpack(">i", self._buffer[:4])
            if len(self._buffer) < 4 + size:
                break
            payload = bytes(self._buffer[4 : 4 + size])
            del self._buffer[: 4 + size]
            found.append(decode_request(payload))
        return found

    def request(self) -> tuple[RequestHeader, Request]:
        """The one request the session wrote (exactly one)."""
        found = self.requests()
        assert len(found) == 1, found
        return found[0]

    def encode(self, header: RequestHeader, response: Response) -> bytes:
        """``response`` framed for ``header``'s request (encrypted under TLS)."""
        return self.wire(
            frame(
                encode_response(
                    response,
                    api_version=header.api_version,
                    correlation_id=header.correlation_id,
                )
            )
        )

    def wire(self, plaintext: bytes) -> bytes:
        """``plaintext`` as it travels (encrypted under TLS)."""
        if self._server is None:
            return plaintext
        self._server.write(plaintext)
        return self._outgoing.read()

    def close_notify(self) -> bytes:
        """The server's TLS close_notify, as it travels."""
        assert self._server is not None
        # unwrap() then waits for the client's close_notify, which never comes.
        with contextlib.suppress(ssl.SSLWantReadError):
            self._server.unwrap()
        return self._outgoing.read()

    def server_bytes(self) -> bytes:
        """Whatever the server side of TLS wants to send now (alerts, tickets)."""
        return self._outgoing.read()

    def answer(
        self, header: RequestHeader, response: Response, now: float = 0.0
    ) -> list[SessionEvent[Req]]:
        return self.feed(BytesReceived(self.encode(header, response)), now)

    def answer_api_versions(
        self,
        versions: dict[int, tuple[int, int]] | None = None,
        now: float = 0.0,
        *,
        header: RequestHeader | None = None,
    ) -> list[SessionEvent[Req]]:
        """Answer the ApiVersions request (read now, unless its ``header`` is given)."""
        if header is None:
            header, request = self.request()
            assert isinstance(request, ApiVersionsRequest)
        keys = tuple(
            ApiVersionsResponseApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted((versions or VERSIONS).items())
        )
        return self.answer(header, ApiVersionsResponse(api_keys=keys), now)


def server_context(ca: trustme.CA, *, require_client_cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        ca.configure_trust(context)
    return context


def client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca.configure_trust(context)
    return context
