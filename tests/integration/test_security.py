"""TLS and SASL against real servers (issue 10).

* SASL_SSL: Tansu behind ``coopconsumer.testing``'s SASL gateway (TLS by OpenSSL, SCRAM by
  ``scramp``, Kafka's error answers, KIP-368 session lifetimes enforced). A coopconsumer
  member and a confluent-kafka (librdkafka) member share one cooperative-sticky group
  and consume every record once; both authenticate, and re-authenticate, against the
  same server.
* SSL: the same gateway without SASL (Tansu 0.6's own TLS listener cannot be started:
  its ``--cert`` and ``--key`` exclude each other).
* Failures, each bounded by a few seconds: wrong password, wrong CA, expired
  certificate, hostname mismatch, unsupported mechanism, missing client certificate;
  plus Tansu's own SASL (which can refuse but never accept, see docs/testing.md).

Certificates are made per session with trustme; no key is committed. Timings are
printed (``-s``) for the report, never asserted beyond the "few seconds" bound.
"""

from __future__ import annotations

import datetime
import json
import logging
import pickle
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from coopconsumer import AuthenticationError, Consumer, TopicPartition
from coopconsumer._io._client import ClientConfig, KafkaClient
from coopconsumer._protocol.messages import MetadataRequest
from coopconsumer._security import parse_security
from coopconsumer.testing import (
    EmbeddedBroker,
    SaslServer,
    TestCertificates,
    embedded_broker,
    find_tansu_binary,
    free_port,
    probe_api_versions,
    unique_name,
    write_test_certificates,
)
from integration.conftest import EXTERNAL_BOOTSTRAP

pytestmark = pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP), reason="starts its own secured brokers")

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
#: A failure must reach the caller within this bound (the issue's "few seconds").
FAIL_FAST_S = 5.0
PARTITIONS = 4
RECORDS = 200


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return write_test_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def sasl_ssl_broker(certs: TestCertificates) -> Iterator[EmbeddedBroker]:
    server = SaslServer(users=USERS, session_lifetime_ms=3000)
    with embedded_broker("tansu", tls=certs.tls_files(), sasl=server) as broker:
        yield broker


def _sasl_ssl(certs: TestCertificates, mechanism: str, user: str = "alice") -> dict[str, Any]:
    return {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": str(certs.ca),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def _consumer(bootstrap: str, group: str, security: Mapping[str, Any]) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 3000,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            **security,
        }
    )


def _produce(
    bootstrap: str,
    topic: str,
    security: Mapping[str, Any],
    count: int,
    partitions: int = PARTITIONS,
) -> None:
    failed: list[object] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **security})
    for i in range(count):
        producer.produce(
            topic,
            key=str(i).encode(),
            value=b"v",
            partition=i % partitions,
            on_delivery=lambda err, _msg: failed.append(err) if err is not None else None,
        )
    assert producer.flush(30) == 0
    assert not failed


def _time_to_error(call: Callable[[], object]) -> tuple[BaseException, float]:
    started = time.monotonic()
    with pytest.raises(Exception) as info:  # noqa: PT011 - the type is asserted by callers
        call()
    return info.value, time.monotonic() - started


def _poll_until_error(consumer: Consumer, bound_s: float) -> None:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        consumer.poll(0.1)
    raise AssertionError(f"no error within {bound_s} s")


def _report(case: str, error: BaseException, elapsed: float) -> None:
    print(f"\n[security] {case}: {elapsed:.3f} s: {type(error).__name__}: {error}")


# --------------------------------------------------------------------------- end to end


def test_sasl_ssl_mixed_cooperative_group_consumes_every_record_once(
    sasl_ssl_broker: EmbeddedBroker, certs: TestCertificates
) -> None:
    broker = sasl_ssl_broker
    assert broker.gateway is not None  # type: ignore[attr-defined]
    topic, group = unique_name("sec-topic"), unique_name("sec-group")
    broker.create_topic(topic, PARTITIONS)
    ours = _consumer(broker.bootstrap, group, _sasl_ssl(certs, "SCRAM-SHA-512"))
    theirs = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 3000,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            **_sasl_ssl(certs, "SCRAM-SHA-256", "bob"),
        }
    )
    seen: dict[TopicPartition, list[int]] = {}
    readers: dict[str, int] = {"coopconsumer": 0, "librdkafka": 0}

    def note(who: str, topic_: str | None, partition: int | None, offset: int | None) -> None:
        assert topic_ == topic
        assert partition is not None
        assert offset is not None
        seen.setdefault(TopicPartition(topic_, partition), []).append(offset)
        readers[who] += 1

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            message = ours.poll(0.02)
            if message is not None:
                note("coopconsumer", message.topic(), message.partition(), message.offset())
            other = theirs.poll(0.02)
            if other is not None and other.error() is None:
                note("librdkafka", other.topic(), other.partition(), other.offset())

    try:
        started = time.monotonic()
        ours.subscribe([topic])
        theirs.subscribe([topic])
        # Settle first: no partition changes owner while records flow, so every record
        # is read exactly once without depending on commit timing.
        deadline = time.monotonic() + 40
        while True:
            pump(0.2)
            mine = ours.assignment()
            other = {TopicPartition(tp.topic, tp.partition) for tp in theirs.assignment()}
            if mine and other and not (mine & other) and len(mine | other) == PARTITIONS:
                break
            assert time.monotonic() < deadline, f"no balanced group: {mine} / {other}"
        settled = time.monotonic() - started
        _produce(broker.bootstrap, topic, _sasl_ssl(certs, "PLAIN"), RECORDS)
        deadline = time.monotonic() + 40
        while sum(len(v) for v in seen.values()) < RECORDS:
            pump(0.2)
            assert time.monotonic() < deadline, f"only {seen} of {RECORDS} records"
        pump(1.0)  # nothing more may arrive
        # Hold the group past one session lifetime (3 s): both clients must have
        # re-authenticated (KIP-368) or the gateway would have closed their sessions.
        pump(3.5)
    finally:
        ours.close()
        theirs.close()
    offsets = sorted((tp.partition, o) for tp, os_ in seen.items() for o in os_)
    assert len(offsets) == RECORDS == len(set(offsets)), "a record was read twice or lost"
    assert readers["coopconsumer"] > 0
    assert readers["librdkafka"] > 0
    stats = broker.gateway.stats  # type: ignore[attr-defined]
    assert {"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"} <= set(stats.mechanisms)
    assert stats.reauthentications > 0
    assert stats.expired_sessions == 0
    print(
        f"\n[security] SASL_SSL mixed group: settled in {settled:.2f} s; read "
        f"{readers}; gateway {stats.authentications} authentications, "
        f"{stats.reauthentications} re-authentications, 0 expired sessions"
    )


def test_ssl_without_sasl(certs: TestCertificates) -> None:
    with embedded_broker("tansu", tls=certs.tls_files()) as broker:
        assert broker.client_config["security.protocol"] == "ssl"
        topic, group = unique_name("tls-topic"), unique_name("tls-group")
        broker.create_topic(topic, 2)
        security = {"security.protocol": "ssl", "ssl.ca.location": str(certs.ca)}
        _produce(broker.bootstrap, topic, security, 20, partitions=2)
        consumer = _consumer(broker.bootstrap, group, security)
        got: set[tuple[int, int]] = set()
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 30
            while len(got) < 20:
                message = consumer.poll(0.2)
                if message is not None:
                    offset, partition = message.offset(), message.partition()
                    assert offset is not None
                    assert partition is not None
                    got.add((partition, offset))
                assert time.monotonic() < deadline, f"only {len(got)} records"
        finally:
            consumer.close()


@pytest.mark.parametrize("kind", ["tansu", "kafka"])
def test_mutual_tls_with_an_encrypted_client_key(certs: TestCertificates, kind: str) -> None:
    # Tansu through the gateway; Kafka's own listener (ssl.client.auth=required).
    with embedded_broker(kind, tls=certs.tls_files(require_client_cert=True)) as broker:  # type: ignore[arg-type]
        good = parse_security(
            {
                "security.protocol": "ssl",
                "ssl.ca.location": str(certs.ca),
                "ssl.certificate.location": str(certs.client_cert),
                "ssl.key.location": str(certs.client_key_encrypted),
                "ssl.key.password": certs.client_key_password,
            }
        )
        with KafkaClient(ClientConfig(bootstrap_servers=broker.bootstrap, security=good)) as c:
            assert c.metadata(timeout_ms=5000).brokers
        anonymous = parse_security({"security.protocol": "ssl", "ssl.ca.location": str(certs.ca)})
        with KafkaClient(
            ClientConfig(bootstrap_servers=broker.bootstrap, security=anonymous)
        ) as client:
            error, elapsed = _time_to_error(lambda: client.metadata(timeout_ms=5000))
        _report("mutual TLS without a client certificate", error, elapsed)
        # TLS 1.3: the server checks the client's certificate after the client's
        # handshake finished, so the refusal arrives as an alert or a hang-up. OpenSSL
        # (the gateway) sends certificate_required, Java's TLS stack (Kafka) bad_certificate.
        assert isinstance(error, AuthenticationError)
        alert = {"tansu": "CERTIFICATE_REQUIRED", "kafka": "BAD_CERTIFICATE"}[kind]
        assert alert in str(error)
        assert elapsed < FAIL_FAST_S


# --------------------------------------------------------------------------- failures


def test_wrong_password_fails_poll_promptly(
    sasl_ssl_broker: EmbeddedBroker, certs: TestCertificates
) -> None:
    security = {**_sasl_ssl(certs, "SCRAM-SHA-512"), "sasl.password": "not-the-password"}
    consumer = _consumer(sasl_ssl_broker.bootstrap, unique_name("g"), security)
    try:
        started = time.monotonic()
        consumer.subscribe([unique_name("t")])
        error, _ = _time_to_error(lambda: _poll_until_error(consumer, FAIL_FAST_S))
        elapsed = time.monotonic() - started
    finally:
        consumer.close()
    _report("wrong password (SCRAM-SHA-512), subscribe()+poll()", error, elapsed)
    assert isinstance(error, AuthenticationError)
    assert error.mechanism == "SCRAM-SHA-512"
    assert error.broker is not None
    assert sasl_ssl_broker.bootstrap in error.broker
    assert error.broker_message is not None
    assert "invalid credentials" in error.broker_message
    assert "not-the-password" not in str(error)
    assert elapsed < FAIL_FAST_S


def test_an_untrusted_broker_fails_poll_promptly(
    sasl_ssl_broker: EmbeddedBroker, certs: TestCertificates, tmp_path: Path
) -> None:
    other = write_test_certificates(tmp_path / "other")
    security = {**_sasl_ssl(certs, "SCRAM-SHA-512"), "ssl.ca.location": str(other.ca)}
    consumer = _consumer(sasl_ssl_broker.bootstrap, unique_name("g"), security)
    try:
        started = time.monotonic()
        consumer.subscribe([unique_name("t")])
        error, _ = _time_to_error(lambda: _poll_until_error(consumer, FAIL_FAST_S))
        elapsed = time.monotonic() - started
        # Fatal: every later poll() says the same, nothing reconnects in a loop.
        again, _ = _time_to_error(lambda: consumer.poll(0.1))
    finally:
        consumer.close()
    _report("wrong CA, subscribe()+poll()", error, elapsed)
    assert isinstance(error, AuthenticationError)
    assert again is error
    assert error.mechanism == "SSL"
    assert elapsed < FAIL_FAST_S


def _metadata_error(bootstrap: str, settings: Mapping[str, object]) -> tuple[BaseException, float]:
    config = ClientConfig(bootstrap_servers=bootstrap, security=parse_security(settings))
    with KafkaClient(config) as client:
        return _time_to_error(lambda: client.metadata(timeout_ms=10_000))


def test_unsupported_mechanism_lists_the_enabled_ones(certs: TestCertificates) -> None:
    server = SaslServer(mechanisms=("SCRAM-SHA-512",), users=USERS)
    with embedded_broker("tansu", tls=certs.tls_files(), sasl=server) as broker:
        error, elapsed = _metadata_error(broker.bootstrap, _sasl_ssl(certs, "PLAIN"))
    _report("unsupported mechanism (PLAIN; broker enables SCRAM-SHA-512)", error, elapsed)
    assert isinstance(error, AuthenticationError)
    assert error.enabled_mechanisms == ("SCRAM-SHA-512",)
    assert "it enables: SCRAM-SHA-512" in str(error)
    assert elapsed < FAIL_FAST_S


def test_wrong_ca(sasl_ssl_broker: EmbeddedBroker, certs: TestCertificates, tmp_path: Path) -> None:
    other = write_test_certificates(tmp_path / "other")
    settings = {**_sasl_ssl(certs, "PLAIN"), "ssl.ca.location": str(other.ca)}
    error, elapsed = _metadata_error(sasl_ssl_broker.bootstrap, settings)
    _report("wrong CA", error, elapsed)
    assert isinstance(error, AuthenticationError)
    assert error.mechanism == "SSL"
    assert "certificate verify failed" in str(error)
    assert "127.0.0.1" in str(error)
    assert elapsed < FAIL_FAST_S


def test_expired_certificate(tmp_path: Path) -> None:
    now = datetime.datetime.now(datetime.UTC)
    expired = write_test_certificates(
        tmp_path,
        not_before=now - datetime.timedelta(days=30),
        not_after=now - datetime.timedelta(days=1),
    )
    with embedded_broker("tansu", tls=expired.tls_files()) as broker:
        settings = {"security.protocol": "ssl", "ssl.ca.location": str(expired.ca)}
        error, elapsed = _metadata_error(broker.bootstrap, settings)
    _report("expired broker certificate", error, elapsed)
    assert isinstance(error, AuthenticationError)
    assert "expired" in str(error)
    assert elapsed < FAIL_FAST_S


def test_hostname_mismatch(tmp_path: Path) -> None:
    elsewhere = write_test_certificates(tmp_path, hostnames=("kafka.example.invalid",))
    with embedded_broker("tansu", tls=elsewhere.tls_files()) as broker:
        settings = {"security.protocol": "ssl", "ssl.ca.location": str(elsewhere.ca)}
        error, elapsed = _metadata_error(broker.bootstrap, settings)
        unchecked = {**settings, "ssl.endpoint.identification.algorithm": "none"}
        config = ClientConfig(
            bootstrap_servers=broker.bootstrap, security=parse_security(unchecked)
        )
        with KafkaClient(config) as client:
            assert client.metadata(timeout_ms=5000).brokers  # the check was the only problem
    _report("hostname mismatch", error, elapsed)
    assert isinstance(error, AuthenticationError)
    assert "mismatch" in str(error)
    assert "does not name this IP address" in str(error)
    assert elapsed < FAIL_FAST_S


def test_tansus_own_sasl_refuses_and_the_client_says_why(certs: TestCertificates) -> None:
    """Tansu's SASL (with --authentication, not started by the fixtures): it knows no
    SCRAM user (memory store) and hangs up on mechanisms it lacks."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    binary = str(find_tansu_binary())
    process = subprocess.Popen(
        [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--authentication",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                probe_api_versions(f"127.0.0.1:{port}", timeout_s=1)
                break
            except Exception:
                assert time.monotonic() < deadline
                time.sleep(0.02)
        base = {
            "security.protocol": "sasl_plaintext",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        error, elapsed = _metadata_error(
            f"127.0.0.1:{port}", {**base, "sasl.mechanism": "SCRAM-SHA-256"}
        )
        _report("Tansu's own SASL: SCRAM for a user it does not know", error, elapsed)
        assert isinstance(error, AuthenticationError)
        assert error.broker_message == "unknown-user"
        error, elapsed = _metadata_error(f"127.0.0.1:{port}", {**base, "sasl.mechanism": "PLAIN"})
        _report("Tansu's own SASL: a mechanism it does not enable (PLAIN)", error, elapsed)
        assert isinstance(error, AuthenticationError)
        assert "closed the connection instead of answering SaslHandshake" in str(error)
    finally:
        process.kill()
        process.wait()


# --------------------------------------------------------------------------- OAUTHBEARER


def test_oauthbearer_with_oauth_cb_and_extensions(certs: TestCertificates) -> None:
    token = "opaque-token-1"
    server = SaslServer(mechanisms=("OAUTHBEARER",), tokens={token: time.time() + 600})
    with embedded_broker("tansu", tls=certs.tls_files(), sasl=server) as broker:
        calls: list[str | None] = []

        def oauth_cb(config: str | None) -> tuple[str, float]:
            calls.append(config)
            return token, time.time() + 600

        settings = {
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": str(certs.ca),
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": oauth_cb,
            "sasl.oauthbearer.config": "scope=kafka",
            "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2",
        }
        config = ClientConfig(bootstrap_servers=broker.bootstrap, security=parse_security(settings))
        with KafkaClient(config) as client:
            assert client.metadata(timeout_ms=5000).brokers
        assert calls
        assert calls[0] == "scope=kafka"
        stats = broker.gateway.stats  # type: ignore[attr-defined]
        assert {"logicalCluster": "lkc-1", "identityPoolId": "pool-2"} in stats.extensions
        bad = {**settings, "oauth_cb": lambda _c: ("not-a-known-token", time.time() + 600)}
        error, elapsed = _metadata_error(broker.bootstrap, bad)
    _report("OAUTHBEARER token refused", error, elapsed)
    assert isinstance(error, AuthenticationError)
    assert "invalid_token" in str(error)
    assert elapsed < FAIL_FAST_S


class _TokenEndpoint(BaseHTTPRequestHandler):
    token = ""
    requests: list[dict[str, str]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length).decode()
        type(self).requests.append(
            {"authorization": self.headers.get("Authorization", ""), "body": body}
        )
        answer = json.dumps(
            {"access_token": type(self).token, "token_type": "bearer", "expires_in": 600}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_oauthbearer_oidc_client_credentials(certs: TestCertificates) -> None:
    token = "oidc-token-7"
    _TokenEndpoint.token = token
    _TokenEndpoint.requests = []
    http = HTTPServer(("127.0.0.1", 0), _TokenEndpoint)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    server = SaslServer(mechanisms=("OAUTHBEARER",), tokens={token: time.time() + 600})
    try:
        with embedded_broker("tansu", tls=certs.tls_files(), sasl=server) as broker:
            settings = {
                "security.protocol": "sasl_ssl",
                "ssl.ca.location": str(certs.ca),
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.client.id": "svc",
                "sasl.oauthbearer.client.secret": "oidc-secret",
                "sasl.oauthbearer.token.endpoint.url": f"http://127.0.0.1:{http.server_port}/t",
                "sasl.oauthbearer.scope": "kafka",
            }
            config = ClientConfig(
                bootstrap_servers=broker.bootstrap, security=parse_security(settings)
            )
            with KafkaClient(config) as client:
                assert client.metadata(timeout_ms=5000).brokers
    finally:
        http.shutdown()
        http.server_close()
    (request,) = _TokenEndpoint.requests
    assert request["authorization"].startswith("Basic ")
    assert "grant_type=client_credentials" in request["body"]
    assert "scope=kafka" in request["body"]


# --------------------------------------------------------------------------- KIP-368


def test_reauthentication_keeps_the_connection_and_its_requests(
    sasl_ssl_broker: EmbeddedBroker, certs: TestCertificates
) -> None:
    """Session lifetime 3 s: over 5 s of steady requests the one connection
    re-authenticates in time (the gateway would close it otherwise) and no request
    fails."""
    config = ClientConfig(
        bootstrap_servers=sasl_ssl_broker.bootstrap,
        security=parse_security(_sasl_ssl(certs, "SCRAM-SHA-256")),
    )
    with KafkaClient(config) as client:
        node = client.least_loaded_node()
        assert node is not None
        client.metadata(timeout_ms=5000)
        node = next(iter(client.brokers()))
        client.api_versions(node, timeout_ms=5000)
        conn = client._nodes[node].connection
        assert conn is not None
        assert conn.session_lifetime_ms == 3000
        end = time.monotonic() + 5.5
        answered = 0
        while time.monotonic() < end:
            client.request(node, MetadataRequest(topics=None), timeout_ms=5000)
            answered += 1
            client.poll(0.05)
        assert client._nodes[node].connection is conn, "the connection was replaced"
        assert conn.authentications >= 2
    print(f"\n[security] KIP-368: {conn.authentications} authentications, {answered} requests")


# --------------------------------------------------------------------------- secrets


def test_the_password_never_reaches_repr_logs_errors_pickles_or_metrics(
    sasl_ssl_broker: EmbeddedBroker,
    certs: TestCertificates,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """PLAIN puts the password itself on the wire (inside TLS): the one mechanism where a
    logged request would leak it. Everything a user or an operator sees is searched."""
    password = USERS["alice"]
    wrong = "wrong-" + password[::-1]
    topic = unique_name("secret-topic")
    sasl_ssl_broker.create_topic(topic, 1)
    seen: list[str] = []
    with caplog.at_level(logging.DEBUG):
        good = _consumer(sasl_ssl_broker.bootstrap, unique_name("g"), _sasl_ssl(certs, "PLAIN"))
        try:
            good.subscribe([topic])
            end = time.monotonic() + 4
            while time.monotonic() < end:
                good.poll(0.1)
            seen += [repr(good), str(good.metrics()), repr(good._config)]
        finally:
            good.close()
        bad_settings = {**_sasl_ssl(certs, "PLAIN"), "sasl.password": wrong}
        bad = _consumer(sasl_ssl_broker.bootstrap, unique_name("g"), bad_settings)
        try:
            bad.subscribe([topic])
            error, _ = _time_to_error(lambda: _poll_until_error(bad, FAIL_FAST_S))
            seen += [repr(bad), str(bad.metrics())]
        finally:
            bad.close()
    assert isinstance(error, AuthenticationError)
    copy = pickle.loads(pickle.dumps(error))
    seen += [str(error), repr(error), str(vars(error)), str(copy), str(vars(copy))]
    seen += [pickle.dumps(error).decode("latin-1")]
    seen += [record.getMessage() for record in caplog.records]
    seen += [str(record.exc_info[1]) for record in caplog.records if record.exc_info is not None]
    captured = capfd.readouterr()  # librdkafka logs to stderr
    seen += [captured.out, captured.err]
    assert len(caplog.records) > 10  # DEBUG was on and things were logged
    for text in seen:
        assert password not in text
        assert wrong not in text


def test_a_consumer_with_oauth_cb_reads_through_both_of_its_clients(
    certs: TestCertificates,
) -> None:
    """The group member (our wire client) and the fetcher (librdkafka, handed the same
    oauth_cb) both authenticate with OAUTHBEARER; records arrive."""
    token = "consumer-token"
    server = SaslServer(mechanisms=("OAUTHBEARER",), tokens={token: time.time() + 600})
    with embedded_broker("tansu", tls=certs.tls_files(), sasl=server) as broker:
        topic = unique_name("oauth-topic")
        broker.create_topic(topic, 1)
        security: dict[str, Any] = {
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": str(certs.ca),
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token, time.time() + 600),
        }
        _produce(broker.bootstrap, topic, security, 10, partitions=1)
        consumer = _consumer(broker.bootstrap, unique_name("g"), security)
        got = 0
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 30
            while got < 10:
                if consumer.poll(0.2) is not None:
                    got += 1
                assert time.monotonic() < deadline, f"only {got} records"
        finally:
            consumer.close()
        stats = broker.gateway.stats  # type: ignore[attr-defined]
        # Harness admin, producer, group member, fetcher: all OAUTHBEARER.
        assert set(stats.mechanisms) == {"OAUTHBEARER"}
        assert stats.authentications >= 3
