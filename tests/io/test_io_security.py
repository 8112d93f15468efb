"""BrokerConnection and KafkaClient security against the fake broker: TLS in the
non-blocking loop, SASL after ApiVersions, KIP-368 re-authentication that keeps
in-flight requests, and failures that are typed and final."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
import trustme
from _fake_broker import FakeBroker, FakeConn, ManualClock
from _fake_secure import SASL_VERSIONS, PlainSasl, TlsFakeBroker, server_context

from coopconsumer import AuthenticationError, BrokerConnectionError
from coopconsumer._io import BrokerConnection, ConnectionState, PendingRequest
from coopconsumer._io._client import ClientConfig, KafkaClient
from coopconsumer._protocol import RequestHeader
from coopconsumer._protocol._schema import Request
from coopconsumer._protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from coopconsumer._security import SecurityConfig
from coopconsumer._security._credentials import SaslSetup
from coopconsumer._security._tls import build_ssl_context

WAIT_S = 10.0


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def tls(ca: trustme.CA, **extra: Any) -> SecurityConfig:
    return SecurityConfig(security_protocol="ssl", ssl_ca_pem=ca.cert_pem.bytes().decode(), **extra)


def plain(password: str = "pw", protocol: str = "sasl_plaintext", **extra: Any) -> SecurityConfig:
    return SecurityConfig(
        security_protocol=protocol,
        sasl_mechanism="PLAIN",
        sasl_username="alice",
        sasl_password=password,
        **extra,
    )


def drive(conn: BrokerConnection, *futures: PendingRequest[Any]) -> None:
    for _ in range(int(WAIT_S / 0.01)):
        if all(f.done() for f in futures):
            return
        conn.poll(0.01)
    raise AssertionError(f"not done: {futures}")


def state_of(conn: BrokerConnection) -> ConnectionState:
    """The state, read through a call (mypy would keep a narrowed one)."""
    return conn.state


def drive_until(conn: BrokerConnection, *states: ConnectionState) -> None:
    for _ in range(int(WAIT_S / 0.01)):
        if conn.state in states:
            return
        conn.poll(0.01)
    raise AssertionError(f"{conn} never reached {states}")


@contextlib.contextmanager
def connection(
    broker: FakeBroker, security: SecurityConfig, **kwargs: Any
) -> Iterator[BrokerConnection]:
    conn = BrokerConnection(
        "127.0.0.1",
        broker.port,
        node_id=broker.node_id,
        ssl_context=build_ssl_context(security) if security.uses_tls else None,
        sasl=SaslSetup(security) if security.uses_sasl else None,
        **kwargs,
    )
    try:
        yield conn
    finally:
        conn.close()


# --------------------------------------------------------------------------- TLS


def test_tls_carries_pipelined_and_multi_record_responses(ca: trustme.CA) -> None:
    with TlsFakeBroker(server_context(ca)) as broker, connection(broker, tls(ca)) as conn:
        # Responses far larger than one TLS record (16 KiB): reassembled from several
        # records, some of them already decrypted in the SSL object when the socket
        # has nothing left to read.
        broker.topics = {f"topic-{i:04d}-{'x' * 40}": 3 for i in range(400)}
        futures = [conn.send(MetadataRequest(topics=None)) for _ in range(5)]
        drive(conn, *futures)
        for future in futures:
            assert len(future.result().topics) == 400
        assert conn.state is ConnectionState.READY


def test_tls_with_an_untrusted_ca_is_an_authentication_error(ca: trustme.CA) -> None:
    other = trustme.CA()
    with TlsFakeBroker(server_context(ca)) as broker, connection(broker, tls(other)) as conn:
        future = conn.send(MetadataRequest(topics=None))
        drive(conn, future)
    error = future.exception()
    assert isinstance(error, AuthenticationError)
    assert error.mechanism == "SSL"
    assert "127.0.0.1" in str(error)
    assert "certificate verify failed" in str(error)


def test_tls_to_a_plaintext_listener_fails_clearly(ca: trustme.CA) -> None:
    # The fake reads the ClientHello as the size of a huge frame and waits for it (a
    # Kafka broker would hang up); the setup timeout names the TLS handshake.
    with (
        FakeBroker() as broker,
        connection(broker, tls(ca), connection_setup_timeout_ms=300) as conn,
    ):
        drive_until(conn, ConnectionState.CLOSED)
    assert conn.close_error is not None
    assert "TLS handshake" in str(conn.close_error)


def test_hostname_checks_follow_the_endpoint_identification_setting(ca: trustme.CA) -> None:
    context = server_context(ca, "kafka.example.invalid")
    with TlsFakeBroker(context) as broker:
        with connection(broker, tls(ca)) as conn:
            drive_until(conn, ConnectionState.CLOSED)
            assert isinstance(conn.close_error, AuthenticationError)
            assert "mismatch" in str(conn.close_error)
        unchecked = tls(ca, ssl_endpoint_identification_algorithm="none")
        with connection(broker, unchecked) as conn:
            drive_until(conn, ConnectionState.READY)
        anything = SecurityConfig(
            security_protocol="ssl", enable_ssl_certificate_verification=False
        )
        with connection(broker, anything) as conn:
            drive_until(conn, ConnectionState.READY)


# --------------------------------------------------------------------------- SASL


def test_sasl_follows_api_versions_and_releases_queued_requests() -> None:
    sasl = PlainSasl({"alice": "pw"})
    with FakeBroker(versions=SASL_VERSIONS) as broker:
        sasl.install(broker)
        with connection(broker, plain()) as conn:
            future = conn.send(MetadataRequest(topics=None))  # queued until authenticated
            drive(conn, future)
            assert future.exception() is None
            assert conn.authentications == 1
            assert conn.reauthenticate_at is None  # no session lifetime: no re-auth
    keys = [key for key, _version in broker.received_keys()]
    assert keys[:4] == [18, SaslHandshakeRequest.API_KEY, SaslAuthenticateRequest.API_KEY, 3]


def test_refused_credentials_fail_every_waiting_request_with_the_brokers_message() -> None:
    sasl = PlainSasl({"alice": "pw"})
    with FakeBroker(versions=SASL_VERSIONS) as broker:
        sasl.install(broker)
        with connection(broker, plain("wrong")) as conn:
            futures = [conn.send(MetadataRequest(topics=None)) for _ in range(3)]
            drive(conn, *futures)
    for future in futures:
        error = future.exception()
        assert isinstance(error, AuthenticationError)
        assert error.error_code == 58
        assert error.mechanism == "PLAIN"
        assert error.broker_message == "Authentication failed: Invalid username or password"
        assert "wrong" not in str(error)


def test_an_unsupported_mechanism_lists_what_the_broker_enables() -> None:
    sasl = PlainSasl({})
    security = SecurityConfig(
        security_protocol="sasl_plaintext",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="alice",
        sasl_password="pw",
    )
    with FakeBroker(versions=SASL_VERSIONS) as broker:
        sasl.install(broker)
        with connection(broker, security) as conn:
            drive_until(conn, ConnectionState.CLOSED)
    error = conn.close_error
    assert isinstance(error, AuthenticationError)
    assert error.enabled_mechanisms == ("PLAIN",)
    assert "it enables: PLAIN" in str(error)


def test_a_broker_without_sasl_apis_is_refused_before_anything_is_sent() -> None:
    with FakeBroker() as broker, connection(broker, plain()) as conn:
        drive_until(conn, ConnectionState.CLOSED)
    assert isinstance(conn.close_error, AuthenticationError)
    assert "SaslHandshake v1" in str(conn.close_error)


def test_a_hang_up_instead_of_a_handshake_answer_is_final() -> None:
    def hang_up(conn: FakeConn, _header: RequestHeader, _request: Request) -> None:
        conn.close()

    with FakeBroker(versions=SASL_VERSIONS) as broker:
        broker.on(SaslHandshakeRequest.API_KEY, hang_up)
        with connection(broker, plain()) as conn:
            drive_until(conn, ConnectionState.CLOSED)
    assert isinstance(conn.close_error, AuthenticationError)
    assert "instead of answering SaslHandshake" in str(conn.close_error)


# --------------------------------------------------------------------------- KIP-368


def test_reauthentication_keeps_requests_in_flight_and_queues_new_ones() -> None:
    clock = ManualClock()
    sasl = PlainSasl({"alice": "pw"}, lifetime_ms=10_000)
    held: list[tuple[FakeConn, RequestHeader]] = []

    def hold(conn: FakeConn, header: RequestHeader, _request: Request) -> None:
        held.append((conn, header))  # answered later, like a parked group request

    with FakeBroker(versions=SASL_VERSIONS) as broker:
        sasl.install(broker)
        broker.on(HeartbeatRequest.API_KEY, hold)
        with connection(broker, plain(), clock=clock, request_timeout_ms=60_000) as conn:
            drive_until(conn, ConnectionState.READY)
            due = conn.reauthenticate_at
            assert due is not None
            # Java's window: 85-95% of the lifetime after the request was sent.
            assert clock.now + 8.5 <= due <= clock.now + 9.5
            in_flight = conn.send(HeartbeatRequest(group_id="g", member_id="m"))
            for _ in range(200):
                if held:
                    break
                conn.poll(0.01)
            assert held
            clock.now = due
            conn.expire()
            assert conn.state is ConnectionState.REAUTHENTICATING
            queued = conn.send(MetadataRequest(topics=None))
            drive_until(conn, ConnectionState.READY)
            assert sasl.authentications == 2
            held_conn, header = held[0]
            held_conn.reply(header, HeartbeatResponse(error_code=0))
            drive(conn, in_flight, queued)
            assert in_flight.exception() is None
            assert queued.exception() is None
            assert conn.authentications == 2
            assert state_of(conn) is ConnectionState.READY
            assert broker.connections == 1
    keys = [key for key, _version in broker.received_keys()]
    reauth = keys.index(SaslHandshakeRequest.API_KEY, 3)
    # The request made during re-authentication went out only after it.
    assert keys.index(3, reauth) > keys.index(SaslAuthenticateRequest.API_KEY, reauth)


def test_a_refused_reauthentication_closes_as_a_retriable_failure() -> None:
    clock = ManualClock()
    sasl = PlainSasl({"alice": "pw"}, lifetime_ms=1_000)
    with FakeBroker(versions=SASL_VERSIONS) as broker:
        sasl.install(broker)
        with connection(broker, plain(), clock=clock) as conn:
            drive_until(conn, ConnectionState.READY)
            sasl.refuse_with = 58
            assert conn.reauthenticate_at is not None
            clock.now = conn.reauthenticate_at
            conn.expire()
            drive_until(conn, ConnectionState.CLOSED)
    error = conn.close_error
    assert isinstance(error, BrokerConnectionError)
    assert isinstance(error.__cause__, AuthenticationError)
    assert "re-authentication failed" in str(error)


# --------------------------------------------------------------------------- client


def test_the_client_reports_an_authentication_failure_at_once_and_does_not_loop() -> None:
    sasl = PlainSasl({"alice": "pw"})
    with FakeBroker(versions=SASL_VERSIONS) as broker:
        sasl.install(broker)
        config = ClientConfig(
            bootstrap_servers=broker.bootstrap, security=plain("wrong"), reconnect_backoff_ms=5000
        )
        with KafkaClient(config) as client:
            with pytest.raises(AuthenticationError):
                client.metadata(timeout_ms=5000)
            node = -1  # the bootstrap node
            future = client.send(node, MetadataRequest(topics=None))
            assert future.done()
            assert isinstance(future.exception(), AuthenticationError)
            with pytest.raises(AuthenticationError):
                client.try_negotiated_version(node, MetadataRequest)
            assert broker.connections == 1


def test_a_bad_key_password_is_a_configuration_error_at_construction(tmp_path: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    from coopconsumer import ConfigurationError

    ca = trustme.CA()
    leaf = ca.issue_cert("client")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"right"),
    )
    (tmp_path / "key.pem").write_bytes(encrypted)
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    base = {
        "security_protocol": "ssl",
        "ssl_certificate_location": str(tmp_path / "cert.pem"),
        "ssl_key_location": str(tmp_path / "key.pem"),
    }
    build_ssl_context(SecurityConfig(**base, ssl_key_password="right"))  # type: ignore[arg-type]
    with pytest.raises(
        ConfigurationError, match=re.escape("'ssl.key.password' does not decrypt")
    ) as info:
        build_ssl_context(SecurityConfig(**base, ssl_key_password="wrong"))  # type: ignore[arg-type]
    assert "wrong" not in str(info.value).replace("'wrong'", "")
    with pytest.raises(ConfigurationError, match="the key is encrypted"):
        build_ssl_context(SecurityConfig(**base))  # type: ignore[arg-type]
    with pytest.raises(
        ConfigurationError, match=re.escape("'ssl.ca.location' '/nonexistent/ca.pem'")
    ):
        build_ssl_context(
            SecurityConfig(security_protocol="ssl", ssl_ca_location="/nonexistent/ca.pem")
        )
    # PEM text works the same (loaded from memory, never written to disk).
    build_ssl_context(
        SecurityConfig(
            security_protocol="ssl",
            ssl_certificate_pem=leaf.cert_chain_pems[0].bytes().decode(),
            ssl_key_pem=encrypted.decode(),
            ssl_key_password="right",
        )
    )
