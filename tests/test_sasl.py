"""The sans-I/O SASL mechanisms against the RFCs' own examples and a hostile server."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
import scramp
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer import AuthenticationError
from coopconsumer._security._sasl import (
    OAuthBearerMechanism,
    PlainMechanism,
    ScramMechanism,
    oauthbearer_client_message,
    scram_salted_password,
)

# RFC 7677 section 3: SCRAM-SHA-256, user "user", password "pencil".
RFC7677_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_sha_256_matches_the_rfc_7677_example() -> None:
    scram = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    assert scram.start() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert scram.step(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert not scram.complete
    assert scram.step(RFC7677_SERVER_FINAL) is None
    assert scram.complete


def test_scram_sha_1_structure_matches_the_rfc_5802_example() -> None:
    # Kafka offers no SCRAM-SHA-1; the RFC's only full example checks the message
    # structure and key derivation with the hash swapped.
    scram = ScramMechanism(
        "SCRAM-SHA-1", "user", "pencil", nonce="fyko+d2lbbFgONRv9qkxdawL", hash_name="sha1"
    )
    assert scram.start() == b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"
    final = scram.step(b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096")
    assert final == (
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    )
    assert scram.step(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=") is None
    assert scram.complete


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_an_independent_server(mechanism: str) -> None:
    server_mechanism = scramp.ScramMechanism(mechanism)
    info = server_mechanism.make_auth_info("s3cr=t,pw", iteration_count=4096)
    server = server_mechanism.make_server(lambda _user: info)
    client = ScramMechanism(mechanism, "we=ird,user", "s3cr=t,pw")
    first = client.start()
    assert b"n=we=3Dird=2Cuser," in first  # RFC 5802 saslname escaping
    server.set_client_first(first.decode())
    final = client.step(server.get_server_first().encode())
    assert final is not None
    server.set_client_final(final.decode())
    assert client.step(server.get_server_final().encode()) is None
    assert client.complete


def test_scram_refuses_a_server_that_does_not_know_the_password() -> None:
    scram = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    scram.start()
    scram.step(RFC7677_SERVER_FIRST)
    forged = b"v=" + base64.b64encode(b"\0" * 32)
    with pytest.raises(AuthenticationError, match="signature does not match"):
        scram.step(forged)
    assert not scram.complete


@pytest.mark.parametrize(
    ("server_first", "reason"),
    [
        (b"e=unknown-user", "refused the client-first-message"),
        (b"r=someone-elses-nonce,s=QSXCR+Q6sek8bf92,i=4096", "does not extend"),
        (b"r=" + RFC7677_NONCE.encode() + b"x,s=QSXCR+Q6sek8bf92,i=1000", "fewer than"),
        (b"r=" + RFC7677_NONCE.encode() + b"x,s=***,i=4096", "salt or iterations"),
        (b"m=ext,r=" + RFC7677_NONCE.encode() + b"x,s=QSXCR+Q6sek8bf92,i=4096", "extension"),
        (b"garbage", "malformed"),
    ],
)
def test_scram_refuses_bad_server_first_messages(server_first: bytes, reason: str) -> None:
    scram = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    scram.start()
    with pytest.raises(AuthenticationError, match=reason) as info:
        scram.step(server_first)
    assert info.value.mechanism == "SCRAM-SHA-256"
    assert "pencil" not in str(info.value)


def test_scram_server_final_error_is_the_brokers_message() -> None:
    scram = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    scram.start()
    scram.step(RFC7677_SERVER_FIRST)
    with pytest.raises(AuthenticationError) as info:
        scram.step(b"e=invalid-proof")
    assert info.value.broker_message == "invalid-proof"


def test_salted_password_is_pbkdf2() -> None:
    salt = b"salt"
    expected = hashlib.pbkdf2_hmac("sha512", b"pw", salt, 4096)
    assert scram_salted_password("sha512", "pw", salt, 4096) == expected
    # Kafka's StoredKey from it, as AlterUserScramCredentials brokers derive it.
    client_key = hmac.new(expected, b"Client Key", "sha512").digest()
    assert len(hashlib.sha512(client_key).digest()) == 64


def test_plain_message_and_completion() -> None:
    plain = PlainMechanism("alice", "pw")
    assert plain.start() == b"\0alice\0pw"
    assert plain.step(b"") is None
    assert plain.complete
    with pytest.raises(AuthenticationError):
        PlainMechanism("al\0ice", "pw")
    assert "pw" not in repr(plain)


def test_oauthbearer_client_message_bytes() -> None:
    # RFC 7628 section 3.1 (kvsep is 0x01); Kafka's Java client sends no authzid.
    assert oauthbearer_client_message("tok") == b"n,,\x01auth=Bearer tok\x01\x01"
    assert (
        oauthbearer_client_message("tok", [("logicalCluster", "lkc-1"), ("a", "b c")])
        == b"n,,\x01auth=Bearer tok\x01logicalCluster=lkc-1\x01a=b c\x01\x01"
    )
    assert oauthbearer_client_message("tok", authzid="u=1,x") == (
        b"n,a=u=3D1=2Cx,\x01auth=Bearer tok\x01\x01"
    )


def test_oauthbearer_success_and_the_rfc_7628_error_flow() -> None:
    ok = OAuthBearerMechanism("tok", [("k", "v")])
    assert ok.start() == b"n,,\x01auth=Bearer tok\x01k=v\x01\x01"
    assert ok.step(b"") is None
    assert ok.complete
    refused = OAuthBearerMechanism("tok")
    refused.start()
    # The server's error challenge is answered with a single 0x01 (RFC 7628 3.2.3).
    assert refused.step(b'{"status":"invalid_token","scope":"kafka"}') == b"\x01"
    assert not refused.complete
    assert refused.server_error == "status=invalid_token, scope=kafka"
    with pytest.raises(AuthenticationError):
        refused.step(b"")


def test_oauthbearer_refuses_tokens_that_would_break_the_message() -> None:
    for token in ("", "a b", "a\x01b"):
        with pytest.raises(AuthenticationError):
            OAuthBearerMechanism(token)


@settings(max_examples=300, deadline=None)
@given(server_first=st.binary(max_size=200), server_final=st.binary(max_size=200))
def test_any_server_bytes_are_either_accepted_or_an_authentication_error(
    server_first: bytes, server_final: bytes
) -> None:
    scram = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    scram.start()
    error: AuthenticationError | None = None
    try:
        scram.step(server_first)
        scram.step(server_final)
    except AuthenticationError as exc:
        error = exc
    if error is None:  # only a server that knows the password gets here
        assert scram.complete
    else:
        assert "pencil" not in str(error)


@settings(max_examples=100, deadline=None)
@given(nonce_suffix=st.text(alphabet="abcXYZ019+/", min_size=1, max_size=20))
def test_scram_accepts_only_the_matching_signature(nonce_suffix: str) -> None:
    server_first = f"r={RFC7677_NONCE}{nonce_suffix},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    scram = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    scram.start()
    assert scram.step(server_first.encode()) is not None
    with pytest.raises(AuthenticationError):
        scram.step(RFC7677_SERVER_FINAL)  # the signature of another exchange
