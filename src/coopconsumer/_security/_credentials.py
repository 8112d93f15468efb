"""What a connection authenticates with: a fresh SASL mechanism per exchange, and tokens.

``SaslSetup`` gives each (re-)authentication a fresh sans-I/O mechanism (``_sasl``); for
OAUTHBEARER it asks a ``TokenProvider``, which calls ``oauth_cb`` or the OIDC token
endpoint, caches the token, and refreshes it in the background once 80% of its lifetime
has passed (librdkafka's rule), so that a connection rarely waits for a token.

One of the security package's two I/O modules (HTTP to the token endpoint, a refresh
thread; ``tests/test_layering.py``): imports the standard library, attrs, ``_errors``,
the settings and the mechanisms only; used by ``_io``.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from .._errors import AuthenticationError
from ._sasl import (
    SCRAM_MECHANISMS,
    OAuthBearerMechanism,
    PlainMechanism,
    SaslMechanism,
    ScramMechanism,
)
from ._settings import SecurityConfig

__all__ = [
    "OAuthToken",
    "SaslSetup",
    "TokenProvider",
    "fetch_oidc_token",
]

log = logging.getLogger(__name__)

#: Refresh a token once this share of its lifetime has passed (librdkafka: 80%).
TOKEN_REFRESH_SHARE: Final = 0.8
#: How long a token endpoint may take to answer.
OIDC_TIMEOUT_S: Final = 10.0


# ----------------------------------------------------------------------------- tokens


@attrs.frozen
class OAuthToken:
    """A bearer token, when it expires (epoch seconds), its principal, extensions."""

    value: str = attrs.field(repr=False)
    expires_at: float
    principal: str | None = None
    extensions: tuple[tuple[str, str], ...] = ()


def _from_callback(result: object) -> OAuthToken:
    if not isinstance(result, tuple | list) or len(result) not in (2, 4):
        raise AuthenticationError(
            "oauth_cb must return (token, expiry) or (token, expiry, principal, extensions)"
            f", not a {type(result).__name__}",
            mechanism="OAUTHBEARER",
        )
    token, expiry = result[0], result[1]
    if not isinstance(token, str) or not token:
        raise AuthenticationError("oauth_cb returned no token string", mechanism="OAUTHBEARER")
    if not isinstance(expiry, int | float) or isinstance(expiry, bool):
        raise AuthenticationError(
            "oauth_cb returned an expiry that is not a number (seconds since the epoch)",
            mechanism="OAUTHBEARER",
        )
    principal = result[2] if len(result) == 4 else None
    extensions = result[3] if len(result) == 4 else None
    pairs: tuple[tuple[str, str], ...] = ()
    if isinstance(extensions, Mapping):
        pairs = tuple((str(k), str(v)) for k, v in extensions.items())
    return OAuthToken(
        value=token,
        expires_at=float(expiry),
        principal=str(principal) if principal else None,
        extensions=pairs,
    )


def _jwt_claims(token: str) -> dict[str, Any]:
    try:
        payload = token.split(".")[1]
        payload += "=" * (-len(payload) % 4)
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (IndexError, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def fetch_oidc_token(
    url: str,
    client_id: str,
    client_secret: str,
    *,
    scope: str | None = None,
    timeout_s: float = OIDC_TIMEOUT_S,
    now: Callable[[], float] = time.time,
) -> OAuthToken:
    """The OAuth 2 client credentials grant (RFC 6749 section 4.4) against ``url``, as
    librdkafka's and Java's ``oidc`` method do it: HTTP Basic authentication with the
    client id and secret, ``grant_type=client_credentials`` and the scope.

    The expiry is the JWT's ``exp`` claim, else ``expires_in``; the principal its
    ``sub``. Raises ``AuthenticationError`` (never quoting the secret).
    """
    # Imported here: urllib.request (with http.client, email) is a fifth of the
    # consumer's import time, and only OAUTHBEARER with an OIDC endpoint needs it.
    import urllib.error
    import urllib.parse
    import urllib.request

    # RFC 6749 section 2.3.1: both parts form-encoded before Basic encoding.
    user = urllib.parse.quote(client_id, safe="")
    secret = urllib.parse.quote(client_secret, safe="")
    basic = base64.b64encode(f"{user}:{secret}".encode()).decode()
    form = {"grant_type": "client_credentials"}
    if scope:
        form["scope"] = scope
    request = urllib.request.Request(
        url,
        data=urllib.parse.urlencode(form).encode(),
        headers={
            "Authorization": f"Basic {basic}",
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            body = answer.read(1_000_000)
    except urllib.error.HTTPError as exc:
        detail = exc.read(500).decode(errors="replace") if exc.fp is not None else ""
        raise AuthenticationError(
            f"the OIDC token endpoint {url} answered HTTP {exc.code}",
            mechanism="OAUTHBEARER",
            broker_message=detail.strip() or None,
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        raise AuthenticationError(
            f"cannot reach the OIDC token endpoint {url}: {getattr(exc, 'reason', exc)}",
            mechanism="OAUTHBEARER",
        ) from None
    try:
        document = json.loads(body)
        token = document["access_token"]
    except (ValueError, KeyError, TypeError):
        raise AuthenticationError(
            f"the OIDC token endpoint {url} answered without an access_token",
            mechanism="OAUTHBEARER",
        ) from None
    if not isinstance(token, str) or not token:
        raise AuthenticationError(
            f"the OIDC token endpoint {url} answered an empty access_token",
            mechanism="OAUTHBEARER",
        )
    claims = _jwt_claims(token)
    issued = now()
    expires_at: float
    if isinstance(claims.get("exp"), int | float):
        expires_at = float(claims["exp"])
    elif isinstance(document.get("expires_in"), int | float):
        expires_at = issued + float(document["expires_in"])
    else:
        expires_at = issued + 3600.0
    subject = claims.get("sub")
    return OAuthToken(
        value=token,
        expires_at=expires_at,
        principal=subject if isinstance(subject, str) else None,
    )


class TokenProvider:
    """OAUTHBEARER tokens from ``oauth_cb`` or the OIDC endpoint, cached and refreshed.

    ``token()`` returns the cached token while it is valid; past 80% of its lifetime
    it starts one background refresh (the next call gets the new token) and only blocks
    when no valid token is left. Thread-safe. A refresh that fails is logged and
    retried on the next call; an expired token with a failing source raises
    ``AuthenticationError``.
    """

    def __init__(
        self, fetch: Callable[[], OAuthToken], *, now: Callable[[], float] = time.time
    ) -> None:
        self._fetch = fetch
        self._now = now
        self._lock = threading.Lock()
        self._token: OAuthToken | None = None
        self._obtained_at = 0.0
        self._refreshing = False

    @classmethod
    def for_config(cls, security: SecurityConfig) -> TokenProvider:
        """The provider ``security`` describes (oauth_cb or OIDC)."""
        if security.sasl_oauthbearer_method == "oidc":
            url = security.sasl_oauthbearer_token_endpoint_url
            client_id = security.sasl_oauthbearer_client_id
            secret = security.sasl_oauthbearer_client_secret
            assert url is not None
            assert client_id is not None
            assert secret is not None
            scope = security.sasl_oauthbearer_scope

            def fetch() -> OAuthToken:
                return fetch_oidc_token(url, client_id, secret.reveal(), scope=scope)

            return cls(fetch)
        callback = security.oauth_cb
        assert callback is not None
        argument = security.sasl_oauthbearer_config

        def call() -> OAuthToken:
            try:
                result = callback(argument)
            except AuthenticationError:
                raise
            except Exception as exc:
                error = AuthenticationError(
                    f"oauth_cb raised {type(exc).__name__}: {exc}", mechanism="OAUTHBEARER"
                )
                raise error from exc
            return _from_callback(result)

        return cls(call)

    def token(self) -> OAuthToken:
        """A valid token (blocking only when there is none)."""
        now = self._now()
        with self._lock:
            token = self._token
            if token is not None and now < token.expires_at:
                lifetime = max(0.0, token.expires_at - self._obtained_at)
                if (
                    now >= self._obtained_at + TOKEN_REFRESH_SHARE * lifetime
                    and not self._refreshing
                ):
                    self._refreshing = True
                    threading.Thread(
                        target=self._refresh, name="coopconsumer-token-refresh", daemon=True
                    ).start()
                return token
        fresh = self._fetch()
        with self._lock:
            self._token = fresh
            self._obtained_at = self._now()
        if fresh.expires_at <= self._now():
            raise AuthenticationError(
                "the token source returned a token that has already expired",
                mechanism="OAUTHBEARER",
            )
        return fresh

    def _refresh(self) -> None:
        try:
            fresh = self._fetch()
        except Exception as exc:  # the old token stays until it expires
            log.warning("OAUTHBEARER token refresh failed (will retry): %s", exc)
            with self._lock:
                self._refreshing = False
            return
        with self._lock:
            self._token = fresh
            self._obtained_at = self._now()
            self._refreshing = False


# ----------------------------------------------------------------------------- SASL


class SaslSetup:
    """Makes a fresh mechanism for each SASL exchange of a client's connections."""

    def __init__(self, security: SecurityConfig) -> None:
        mechanism = security.sasl_mechanism
        assert security.uses_sasl
        assert mechanism is not None
        self.mechanism = mechanism
        self._security = security
        self._tokens = TokenProvider.for_config(security) if mechanism == "OAUTHBEARER" else None

    def new_mechanism(self) -> SaslMechanism:
        """A mechanism for one exchange (OAUTHBEARER: with a current token).

        Raises ``AuthenticationError`` when no token can be had."""
        security = self._security
        if self.mechanism == "PLAIN":
            assert security.sasl_username is not None
            assert security.sasl_password is not None
            return PlainMechanism(security.sasl_username, security.sasl_password.reveal())
        if self.mechanism in SCRAM_MECHANISMS:
            assert security.sasl_username is not None
            assert security.sasl_password is not None
            return ScramMechanism(
                self.mechanism, security.sasl_username, security.sasl_password.reveal()
            )
        assert self._tokens is not None
        token = self._tokens.token()
        extensions = tuple(security.sasl_oauthbearer_extensions) + tuple(
            (k, v)
            for k, v in token.extensions
            if k not in dict(security.sasl_oauthbearer_extensions)
        )
        return OAuthBearerMechanism(token.value, extensions)
