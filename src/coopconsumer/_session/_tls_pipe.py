"""TLS over memory: ``ssl.SSLObject`` between two ``ssl.MemoryBIO``.

The session feeds the broker's bytes in, takes plaintext out, and hands ciphertext to
its driver, so the same TLS code serves a selector pump and an asyncio driver and can
be tested with no socket at all (a server-side ``SSLObject`` in memory).
``tls_failure_reason`` turns OpenSSL's failures into short, specific reasons.

Imports ``ssl`` for its memory objects only; nothing here opens a socket or reads a
clock.
"""

from __future__ import annotations

import ssl
from typing import Final

__all__ = ["TlsPipe", "tls_failure_reason"]

#: Plaintext taken out of the SSL object per read call.
_READ_SIZE: Final = 256 * 1024


class TlsPipe:
    """One client-side TLS session over memory buffers.

    Raises what ``ssl`` raises: ``ssl.SSLError`` (and its subclasses) for a handshake or
    record that fails, ``ValueError`` for a context that cannot make a client (from the
    constructor).
    """

    def __init__(self, context: ssl.SSLContext, server_hostname: str | None) -> None:
        if context.check_hostname and not server_hostname:
            # SSLContext.wrap_socket refuses this; wrap_bio does not, and would then
            # verify the chain without the name.
            raise ValueError("check_hostname requires server_hostname")
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._object = context.wrap_bio(
            self._incoming, self._outgoing, server_side=False, server_hostname=server_hostname
        )
        # Plaintext the SSL object could not take yet (it wants the peer's bytes first:
        # a renegotiation or key update in progress).
        self._backlog = bytearray()
        self.handshake_done = False

    def handshake(self) -> bool:
        """Advance the handshake; True once it is done."""
        try:
            self._object.do_handshake()
        except ssl.SSLWantReadError:
            return False
        self.handshake_done = True
        return True

    def feed(self, data: bytes) -> None:
        """The broker's bytes, as read from the transport."""
        self._incoming.write(data)

    def feed_eof_during_handshake(self) -> str:
        """The transport ended before the handshake did: the name of what OpenSSL
        makes of it (``SSLEOFError`` for a peer that never spoke TLS)."""
        self._incoming.write_eof()
        try:
            self._object.do_handshake()
        except ssl.SSLError as exc:
            return type(exc).__name__
        return "EOF"

    def read(self) -> tuple[bytes, bool, ssl.SSLError | None]:
        """Every byte of plaintext that can be decrypted now; whether the broker closed
        the TLS session (close_notify); the error that stopped decryption, if one did
        (the plaintext before it is still returned)."""
        chunks: list[bytes] = []
        closed = False
        failure: ssl.SSLError | None = None
        try:
            self._flush_backlog()
            while True:
                chunk = self._object.read(_READ_SIZE)
                if not chunk:
                    closed = True
                    break
                chunks.append(chunk)
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError as exc:
            failure = exc
        return b"".join(chunks), closed, failure

    def write(self, data: bytes) -> None:
        """Encrypt ``data`` (after anything the SSL object could not take yet)."""
        self._backlog += data
        self._flush_backlog()

    def take_ciphertext(self) -> bytes:
        """The bytes to send to the broker, produced since the last call."""
        return self._outgoing.read()

    def describe(self) -> str:
        """Protocol version and cipher, for the log."""
        cipher = self._object.cipher()
        return f"{self._object.version()} {cipher[0] if cipher else '?'}"

    def _flush_backlog(self) -> None:
        while self._backlog and self.handshake_done:
            try:
                written = self._object.write(self._backlog)
            except ssl.SSLWantReadError:
                return
            del self._backlog[:written]


def tls_failure_reason(exc: BaseException) -> str:
    """A short, specific reason for a failed TLS handshake (hostname mismatch, unknown
    CA, expired certificate, ...), without anything secret."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        message = exc.verify_message or str(exc)
        code = exc.verify_code
        hints = {
            10: "the broker's certificate has expired",
            9: "the broker's certificate is not yet valid",
            18: "the broker's certificate is self-signed and not trusted",
            19: "the broker's chain ends in a self-signed CA that is not trusted",
            20: "the broker's certificate was issued by a CA that is not trusted"
            " (check ssl.ca.location / ssl.ca.pem)",
            62: "the broker's certificate does not name this host"
            " (ssl.endpoint.identification.algorithm=https)",
            64: "the broker's certificate does not name this IP address"
            " (ssl.endpoint.identification.algorithm=https)",
        }
        hint = hints.get(code)
        return f"certificate verify failed: {message}" + (f": {hint}" if hint else "")
    if isinstance(exc, ssl.SSLError):
        return f"{exc.reason or exc}" if getattr(exc, "reason", None) else str(exc)
    return str(exc)
