"""SASL mechanisms as sans-I/O objects: feed the server's bytes, get the client's.

``PLAIN`` (RFC 4616), ``SCRAM-SHA-256``/``SCRAM-SHA-512`` (RFC 5802, RFC 7677; the
server's signature is verified, so a server that does not know the password is refused)
and ``OAUTHBEARER`` (RFC 7628, as Kafka's KIP-255 uses it). A connection calls
``start()`` for the first SaslAuthenticate, then ``step(server_bytes)`` with every answer
until it returns None; ``complete`` then says whether the exchange succeeded on the
client's side. A failure raises ``AuthenticationError`` (the connection adds the broker).

No messages' bytes are ever logged: a PLAIN message holds the password. Nothing here
reads a clock, a socket or a file.

Imports the standard library and ``_errors`` only (a leaf: the broker session imports it).
"""

from __future__ import annotations

import abc
import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from .._errors import AuthenticationError

__all__ = [
    "SCRAM_MECHANISMS",
    "MechanismFactory",
    "OAuthBearerMechanism",
    "PlainMechanism",
    "SaslMechanism",
    "ScramMechanism",
    "oauthbearer_client_message",
    "scram_salted_password",
]

#: Kafka's SCRAM mechanisms: name -> (hashlib name, AlterUserScramCredentials id).
SCRAM_MECHANISMS: Final[Mapping[str, tuple[str, int]]] = {
    "SCRAM-SHA-256": ("sha256", 1),
    "SCRAM-SHA-512": ("sha512", 2),
}

#: Kafka refuses SCRAM credentials with fewer iterations (ScramMechanism.minIterations);
#: a server asking for fewer is not a Kafka broker one should trust with a proof.
MIN_SCRAM_ITERATIONS: Final = 4096
#: Kafka refuses to store SCRAM credentials with more iterations (ScramMechanism's
#: maxIterations). Salting the password is the client's work, on its I/O thread: a
#: server asking for 2^31 iterations would freeze it for hours, and one beyond 2^63
#: made hashlib raise OverflowError (found by fuzzing, reliability/README.md): more than
#: this is refused before any hashing.
MAX_SCRAM_ITERATIONS: Final = 16384


class SaslMechanism(abc.ABC):
    """One client-side SASL exchange. Single use: re-authentication makes a new one."""

    #: The mechanism's registered name, as sent in SaslHandshake.
    name: str

    def __init__(self) -> None:
        self._complete = False

    @property
    def complete(self) -> bool:
        """Whether the exchange finished successfully on the client's side."""
        return self._complete

    @abc.abstractmethod
    def start(self) -> bytes:
        """The client's first message (sent in the first SaslAuthenticate)."""

    @abc.abstractmethod
    def step(self, challenge: bytes) -> bytes | None:
        """Take the server's bytes; return the next client message, or None when the
        client has nothing more to send. Raises ``AuthenticationError``."""

    def _fail(self, message: str, *, broker_message: str | None = None) -> AuthenticationError:
        return AuthenticationError(message, mechanism=self.name, broker_message=broker_message)


# ----------------------------------------------------------------------------- PLAIN


class PlainMechanism(SaslMechanism):
    """RFC 4616: ``authzid NUL authcid NUL passwd`` in one message; the server's empty
    answer (or an error code) ends it. Send it over TLS only."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        super().__init__()
        if "\0" in username or "\0" in password:
            raise self._fail("the user name and password may not contain NUL characters")
        self._message = b"\0" + username.encode() + b"\0" + password.encode()

    def start(self) -> bytes:
        return self._message

    def step(self, challenge: bytes) -> bytes | None:
        if self._complete:
            raise self._fail("the server sent a message after the exchange ended")
        if challenge:
            raise self._fail("the server answered PLAIN with a challenge; PLAIN has none")
        self._complete = True
        return None


# ----------------------------------------------------------------------------- SCRAM


def _saslname(name: str) -> str:
    # RFC 5802 section 5.1: "=" and "," are escaped in the user name.
    return name.replace("=", "=3D").replace(",", "=2C")


def scram_salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    """``Hi(Normalize(password), salt, i)``: PBKDF2 with HMAC of ``hash_name``.

    The password is used as its UTF-8 bytes (Kafka's Java client does not apply
    SASLprep either), so both sides agree on non-ASCII passwords.
    """
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


def _parse_attributes(message: str) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ValueError(f"malformed attribute {part[:20]!r}")
        attributes.setdefault(key, value)
    return attributes


class ScramMechanism(SaslMechanism):
    """RFC 5802 client (no channel binding: ``n,,``), SHA-256 or SHA-512 (RFC 7677).

    ``nonce`` is for tests (the RFC's vectors); by default 32 random bytes, URL-safe
    base64 (printable, no comma). The server's final message must carry the signature
    only a holder of the password's ServerKey can compute; anything else is refused.
    """

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        *,
        nonce: str | None = None,
        hash_name: str | None = None,
    ) -> None:
        super().__init__()
        if hash_name is None:
            if mechanism not in SCRAM_MECHANISMS:
                raise ValueError(f"not a SCRAM mechanism: {mechanism!r}")
            hash_name = SCRAM_MECHANISMS[mechanism][0]
        self.name = mechanism
        self._hash = hash_name
        self._password = password
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(32)
        if "," in self._nonce or not self._nonce.isprintable():
            raise ValueError("a SCRAM nonce is printable and has no comma")
        self._client_first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self._stage = 0

    def start(self) -> bytes:
        if self._stage != 0:
            raise self._fail("start() called twice")
        self._stage = 1
        return ("n,," + self._client_first_bare).encode()

    def step(self, challenge: bytes) -> bytes | None:
        if self._stage == 1:
            self._stage = 2
            return self._client_final(challenge)
        if self._stage == 2:
            self._stage = 3
            self._verify_server_final(challenge)
            return None
        raise self._fail("the server sent a message after the exchange ended")

    def _client_final(self, challenge: bytes) -> bytes:
        try:
            server_first = challenge.decode()
            attributes = _parse_attributes(server_first)
        except (UnicodeDecodeError, ValueError) as exc:
            raise self._fail(f"malformed server-first-message: {exc}") from None
        if "e" in attributes:
            raise self._fail(
                "the server refused the client-first-message", broker_message=attributes["e"]
            )
        if "m" in attributes:
            raise self._fail("the server requires an extension this client does not know")
        nonce = attributes.get("r", "")
        if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
            raise self._fail("the server's nonce does not extend the client's")
        try:
            salt = base64.b64decode(attributes["s"], validate=True)
            iterations = int(attributes["i"])
        except (KeyError, ValueError) as exc:
            raise self._fail(
                f"malformed server-first-message (salt or iterations): {exc}"
            ) from None
        if iterations < MIN_SCRAM_ITERATIONS:
            raise self._fail(
                f"the server asks for {iterations} iterations, fewer than the minimum"
                f" {MIN_SCRAM_ITERATIONS}"
            )
        if iterations > MAX_SCRAM_ITERATIONS:
            raise self._fail(
                f"the server asks for {iterations} iterations, more than the {MAX_SCRAM_ITERATIONS}"
                " a Kafka broker stores (refusing rather than hashing for that long)"
            )
        salted = scram_salted_password(self._hash, self._password, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"  # biws = base64("n,,")
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        client_signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, challenge: bytes) -> None:
        try:
            attributes = _parse_attributes(challenge.decode())
        except (UnicodeDecodeError, ValueError) as exc:
            raise self._fail(f"malformed server-final-message: {exc}") from None
        if "e" in attributes:
            raise self._fail("the server refused the credentials", broker_message=attributes["e"])
        try:
            signature = base64.b64decode(attributes["v"], validate=True)
        except (KeyError, ValueError):
            raise self._fail("the server-final-message carries no signature") from None
        assert self._server_signature is not None
        if not hmac.compare_digest(signature, self._server_signature):
            raise self._fail(
                "the server's signature does not match: it does not know this user's"
                " credentials (refusing the server)"
            )
        self._complete = True

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()


# ----------------------------------------------------------------------------- OAUTHBEARER

_KVSEP: Final = "\x01"


def oauthbearer_client_message(
    token: str, extensions: Sequence[tuple[str, str]] = (), *, authzid: str = ""
) -> bytes:
    """RFC 7628 initial client response: ``gs2-header kvsep "auth=Bearer " token
    kvsep *(key=value kvsep) kvsep``, the GS2 header ``n,,`` (or ``n,a=authzid,``).

    Kafka's Java client sends no authzid; extensions follow the auth pair.
    """
    authz = f"a={_saslname(authzid)}" if authzid else ""
    parts = [f"n,{authz},", f"auth=Bearer {token}"]
    parts.extend(f"{key}={value}" for key, value in extensions)
    return (_KVSEP.join(parts) + _KVSEP + _KVSEP).encode()


class OAuthBearerMechanism(SaslMechanism):
    """RFC 7628 client: one message with the bearer token (and SASL extensions).

    On success the server answers with empty bytes. On failure it sends a JSON error
    (``status``, ``scope``, ``openid-configuration``); the client answers with the
    single byte 0x01 as the RFC requires and the broker then fails the exchange; the
    JSON is kept in ``server_error`` for the error message.
    """

    name = "OAUTHBEARER"

    def __init__(self, token: str, extensions: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__()
        if not token or any(ch in token for ch in "\x01 "):
            raise self._fail("the OAUTHBEARER token is empty or contains a space or 0x01")
        self._message = oauthbearer_client_message(token, extensions)
        self._done = False
        #: The server's error (its JSON, summarized) when it refused the token.
        self.server_error: str | None = None

    def start(self) -> bytes:
        return self._message

    def step(self, challenge: bytes) -> bytes | None:
        if self._done:
            raise self._fail(
                "the server sent another message after refusing the token",
                broker_message=self.server_error,
            )
        self._done = True
        if not challenge:
            self._complete = True
            return None
        self.server_error = _summarize_error(challenge)
        return b"\x01"


def _summarize_error(challenge: bytes) -> str:
    try:
        document = json.loads(challenge.decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        # RecursionError: deeply nested arrays from a hostile server (found while
        # writing the fuzz targets, reliability/README.md); the JSON is only summarized
        # for the error message.
        return f"<{len(challenge)} bytes that are not JSON>"
    if not isinstance(document, dict):
        return str(document)[:200]
    return ", ".join(f"{k}={v}" for k, v in document.items())[:500]


#: Builds the mechanism for one (re-)authentication; OAUTHBEARER's fetches its token.
MechanismFactory = Callable[[], SaslMechanism]
