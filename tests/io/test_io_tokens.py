"""OAUTHBEARER token sources: oauth_cb results, the OIDC grant's parsing, refresh at
80% of the lifetime in the background, and errors that never quote a secret."""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest

from coopconsumer import AuthenticationError
from coopconsumer._security import SecurityConfig
from coopconsumer._security._credentials import (
    OAuthToken,
    SaslSetup,
    TokenProvider,
    fetch_oidc_token,
)
from coopconsumer._security._sasl import OAuthBearerMechanism


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_cached_token_is_refreshed_in_the_background_after_80_percent() -> None:
    clock = Clock()
    issued: list[str] = []
    refreshed = threading.Event()

    def fetch() -> OAuthToken:
        issued.append(f"t{len(issued)}")
        if len(issued) > 1:
            refreshed.set()
        return OAuthToken(value=issued[-1], expires_at=clock.now + 100)

    provider = TokenProvider(fetch, now=clock)
    assert provider.token().value == "t0"
    clock.now += 79
    assert provider.token().value == "t0"
    assert len(issued) == 1
    clock.now += 2  # past 80%: served from cache, refreshed in the background
    assert provider.token().value == "t0"
    assert refreshed.wait(5)
    for _ in range(100):
        if provider.token().value == "t1":
            break
        time.sleep(0.01)
    assert provider.token().value == "t1"


def test_an_expired_token_is_fetched_again_in_the_foreground() -> None:
    clock = Clock()
    values = iter(["a", "b"])
    provider = TokenProvider(
        lambda: OAuthToken(value=next(values), expires_at=clock.now + 10), now=clock
    )
    assert provider.token().value == "a"
    clock.now += 11
    assert provider.token().value == "b"


def _cb_setup(callback: object, **extra: object) -> SaslSetup:
    return SaslSetup(
        SecurityConfig(
            security_protocol="sasl_ssl",
            sasl_mechanism="OAUTHBEARER",
            oauth_cb=callback,  # type: ignore[arg-type]
            **extra,  # type: ignore[arg-type]
        )
    )


def test_oauth_cb_results_as_confluent_kafka_takes_them() -> None:
    expiry = time.time() + 600
    setup = _cb_setup(
        lambda config: ("tok", expiry, "alice", {"logicalCluster": "lkc-9"}),
        sasl_oauthbearer_config="cfg",
        sasl_oauthbearer_extensions=(("identityPoolId", "pool-1"),),
    )
    mechanism = setup.new_mechanism()
    assert isinstance(mechanism, OAuthBearerMechanism)
    assert mechanism.start() == (
        b"n,,\x01auth=Bearer tok\x01identityPoolId=pool-1\x01logicalCluster=lkc-9\x01\x01"
    )


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ("just-a-token", "must return"),
        (("", 1e12), "no token"),
        (("tok", "soon"), "not a number"),
        (("tok", 1.0), "already expired"),
    ],
)
def test_bad_oauth_cb_results_are_authentication_errors(result: object, message: str) -> None:
    setup = _cb_setup(lambda _config: result)
    with pytest.raises(AuthenticationError, match=message):
        setup.new_mechanism()


def test_an_oauth_cb_that_raises_is_reported_with_its_error() -> None:
    def broken(_config: str | None) -> tuple[str, float]:
        raise RuntimeError("no credentials in the environment")

    with pytest.raises(AuthenticationError, match="oauth_cb raised RuntimeError: no credentials"):
        _cb_setup(broken).new_mechanism()


def _jwt(claims: dict[str, object]) -> str:
    def part(document: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


def test_the_oidc_grant_reads_exp_and_sub_and_hides_the_secret() -> None:
    import http.server

    token = _jwt({"sub": "svc-account", "exp": 2_000_000_000})
    seen: list[str] = []

    class Endpoint(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            length = int(self.headers.get("Content-Length", "0"))
            self.rfile.read(length)
            status = 200 if len(seen) == 1 else 401
            body = json.dumps({"access_token": token} if status == 200 else {"error": "nope"})
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/token"
    try:
        got = fetch_oidc_token(url, "svc id", "s3cret:/")
        assert got.value == token
        assert got.expires_at == 2_000_000_000
        assert got.principal == "svc-account"
        assert "s3cret" not in repr(got)
        # RFC 6749 2.3.1: both parts form-encoded before Basic encoding.
        assert base64.b64decode(seen[0].split()[1]) == b"svc+id:s3cret%3A%2F".replace(b"+", b"%20")
        with pytest.raises(AuthenticationError, match="answered HTTP 401") as info:
            fetch_oidc_token(url, "svc", "s3cret")
        assert "s3cret" not in str(info.value)
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(AuthenticationError, match="cannot reach the OIDC token endpoint"):
        fetch_oidc_token(url, "svc", "s3cret", timeout_s=1)
