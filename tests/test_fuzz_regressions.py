"""Regression tests for faults the reliability campaign's fuzzer found (reliability/README.md).

Each test replays the input that broke a promise -- a decoder of broker or peer bytes
raising something other than its typed error, or hanging -- and checks the fixed
behaviour.
"""

from __future__ import annotations

import base64
import time

import pytest

from coopconsumer import AuthenticationError
from coopconsumer._security._sasl import MAX_SCRAM_ITERATIONS, OAuthBearerMechanism, ScramMechanism

NONCE = "fyko+d2lbbFgONRv9qkxdawL"


def test_oauthbearer_error_of_deeply_nested_json_is_summarized() -> None:
    # json.loads raised RecursionError (not a ValueError) out of step().
    mechanism = OAuthBearerMechanism("token")
    mechanism.start()
    assert mechanism.step(b"[" * 100_000) == b"\x01"
    assert mechanism.server_error == "<100000 bytes that are not JSON>"
    assert not mechanism.complete


@pytest.mark.parametrize("iterations", [MAX_SCRAM_ITERATIONS + 1, 2**31 - 1, 10**12])
def test_scram_refuses_absurd_iteration_counts_without_hashing(iterations: int) -> None:
    # The client salted the password with whatever count the server named: 2^31 - 1
    # iterations froze the I/O thread for hours.
    salt = base64.b64encode(b"salt-of-sixteen!").decode()
    server_first = f"r={NONCE}server,s={salt},i={iterations}".encode()
    mechanism = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=NONCE)
    mechanism.start()
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="more than the 16384"):
        mechanism.step(server_first)
    assert time.monotonic() - started < 5  # refused before PBKDF2 ran, not after


def test_scram_iteration_count_beyond_a_c_long_is_an_authentication_error() -> None:
    # atheris's input against the code before the fix: hashlib raised OverflowError.
    mechanism = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=NONCE)
    mechanism.start()
    with pytest.raises(AuthenticationError, match="iterations"):
        mechanism.step(
            b"r=fyko+d2lbbFgONRv9qkxdawL7j,s=csd=,i=400000000000000000000000000000000000000096"
        )


def test_scram_accepts_kafkas_maximum_iteration_count() -> None:
    salt = base64.b64encode(b"salt-of-sixteen!").decode()
    mechanism = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=NONCE)
    mechanism.start()
    answer = mechanism.step(f"r={NONCE}server,s={salt},i={MAX_SCRAM_ITERATIONS}".encode())
    assert answer is not None
    assert answer.startswith(b"c=biws,r=" + NONCE.encode())
