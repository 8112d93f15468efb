"""TLS and SASL against Apache Kafka's own listeners.

Kafka is the referee here as everywhere; the SASL gateway in front of Tansu
(test_security.py) stays as a second one. One KRaft node serves SASL_SSL with PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512 (credentials written by ``kafka-storage format
--add-scram``) and OAUTHBEARER (Kafka's unsecured JWS validator), with a 3 s
``connections.max.reauth.ms`` so that every client must re-authenticate (KIP-368); a
second node serves mutual TLS. Certificates are made per module with trustme.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

import confluent_kafka
import pytest

from coopconsumer import AuthenticationError, Consumer, TopicPartition
from coopconsumer._io._client import ClientConfig, KafkaClient
from coopconsumer._security import parse_security
from coopconsumer.testing import (
    EmbeddedBroker,
    SaslServer,
    TestCertificates,
    embedded_broker,
    unique_name,
    write_test_certificates,
)
from integration.conftest import EXTERNAL_BOOTSTRAP

pytestmark = pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP), reason="starts its own secured brokers")

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SESSION_LIFETIME_MS = 3000
#: A refused login must reach the caller within this bound.
FAIL_FAST_S = 10.0
PARTITIONS = 4
RECORDS = 200


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return write_test_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def sasl_ssl_kafka(certs: TestCertificates) -> Iterator[EmbeddedBroker]:
    server = SaslServer(mechanisms=MECHANISMS, users=USERS, session_lifetime_ms=SESSION_LIFETIME_MS)
    with embedded_broker("kafka", tls=certs.tls_files(), sasl=server) as broker:
        yield broker


def unsecured_jws(principal: str, lifetime_s: float = 600.0) -> tuple[str, float]:
    """An unsigned JWS (``alg: none``) naming ``principal``: what Kafka's unsecured
    OAUTHBEARER validator accepts, and what librdkafka's unsecure-JWT option sends."""

    def part(value: Mapping[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    now = time.time()
    expiry = now + lifetime_s
    claims = {"sub": principal, "iat": int(now), "exp": int(expiry)}
    return f"{part({'alg': 'none'})}.{part(claims)}.", expiry


def _sasl_ssl(certs: TestCertificates, mechanism: str, user: str = "alice") -> dict[str, Any]:
    config: dict[str, Any] = {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": str(certs.ca),
        "sasl.mechanism": mechanism,
    }
    if mechanism == "OAUTHBEARER":
        config["oauth_cb"] = lambda _config: unsecured_jws(user)
    else:
        config.update({"sasl.username": user, "sasl.password": USERS[user]})
    return config


def _consumer(bootstrap: str, group: str, security: Mapping[str, Any]) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            **security,
        }
    )


def _produce(bootstrap: str, topic: str, security: Mapping[str, Any], count: int) -> None:
    failed: list[object] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **security})
    for i in range(count):
        producer.produce(
            topic,
            key=str(i).encode(),
            value=b"v",
            partition=i % PARTITIONS,
            on_delivery=lambda err, _msg: failed.append(err) if err is not None else None,
        )
    assert producer.flush(30) == 0
    assert not failed


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [("SCRAM-SHA-512", "SCRAM-SHA-256"), ("OAUTHBEARER", "PLAIN")],
    ids=["scram", "oauthbearer-plain"],
)
def test_sasl_ssl_mixed_group_on_kafka_reads_every_record_once(
    sasl_ssl_kafka: EmbeddedBroker, certs: TestCertificates, ours: str, theirs: str
) -> None:
    broker = sasl_ssl_kafka
    topic, group = unique_name("ksec-topic"), unique_name("ksec-group")
    broker.create_topic(topic, PARTITIONS)
    member = _consumer(broker.bootstrap, group, _sasl_ssl(certs, ours))
    rdkafka_security = _sasl_ssl(certs, theirs, "bob")
    if theirs == "OAUTHBEARER":
        rdkafka_security = {
            **{k: v for k, v in rdkafka_security.items() if k != "oauth_cb"},
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=bob",
        }
    other = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            **rdkafka_security,
        }
    )
    seen: dict[TopicPartition, list[int]] = {}
    readers = {"coopconsumer": 0, "librdkafka": 0}

    def note(who: str, partition: int | None, offset: int | None) -> None:
        assert partition is not None
        assert offset is not None
        seen.setdefault(TopicPartition(topic, partition), []).append(offset)
        readers[who] += 1

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            message = member.poll(0.02)
            if message is not None:
                note("coopconsumer", message.partition(), message.offset())
            theirs_message = other.poll(0.02)
            if theirs_message is not None and theirs_message.error() is None:
                note("librdkafka", theirs_message.partition(), theirs_message.offset())

    try:
        member.subscribe([topic])
        other.subscribe([topic])
        # Settle first, so no partition changes owner while records flow.
        deadline = time.monotonic() + 60
        while True:
            pump(0.2)
            mine = member.assignment()
            others = {TopicPartition(tp.topic, tp.partition) for tp in other.assignment()}
            if mine and others and not (mine & others) and len(mine | others) == PARTITIONS:
                break
            assert time.monotonic() < deadline, f"no balanced group: {mine} / {others}"
        _produce(broker.bootstrap, topic, broker.client_config, RECORDS // 2)
        # Past two session lifetimes: Kafka closes a connection whose session ran out
        # without re-authentication, so the group would fail or rebalance.
        pump(2.5 * SESSION_LIFETIME_MS / 1000)
        _produce(broker.bootstrap, topic, broker.client_config, RECORDS // 2)
        deadline = time.monotonic() + 60
        while sum(len(v) for v in seen.values()) < RECORDS:
            pump(0.2)
            assert time.monotonic() < deadline, f"only {seen} of {RECORDS} records"
        pump(1.0)  # nothing more may arrive
        assignment_after = member.assignment()
    finally:
        member.close()
        other.close()
    offsets = sorted((tp.partition, o) for tp, os_ in seen.items() for o in os_)
    assert len(offsets) == RECORDS == len(set(offsets)), "a record was read twice or lost"
    assert readers["coopconsumer"] > 0
    assert readers["librdkafka"] > 0
    assert assignment_after == mine, "the group rebalanced: a session was not renewed"


def test_our_wire_client_re_authenticates_on_one_connection(
    sasl_ssl_kafka: EmbeddedBroker, certs: TestCertificates
) -> None:
    security = parse_security(_sasl_ssl(certs, "SCRAM-SHA-256"))
    with KafkaClient(
        ClientConfig(bootstrap_servers=sasl_ssl_kafka.bootstrap, security=security)
    ) as client:
        assert client.metadata(timeout_ms=10000).brokers
        (node_id,) = client.brokers()
        end = time.monotonic() + 2.5 * SESSION_LIFETIME_MS / 1000
        while time.monotonic() < end:
            assert client.metadata(timeout_ms=10000).brokers
            time.sleep(0.2)
        # Kafka would have closed a connection that let its session expire.
        assert client.connection_losses(node_id) == 0
        assert client.connection_failures(node_id) == 0


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("SCRAM-SHA-512", "alice", "wrong"), ("PLAIN", "mallory", "x")],
)
def test_a_refused_login_on_kafka_fails_poll_promptly(
    sasl_ssl_kafka: EmbeddedBroker,
    certs: TestCertificates,
    mechanism: str,
    user: str,
    password: str,
) -> None:
    security = {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": str(certs.ca),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    consumer = _consumer(sasl_ssl_kafka.bootstrap, unique_name("g"), security)
    started = time.monotonic()
    try:
        consumer.subscribe([unique_name("t")])
        with pytest.raises(AuthenticationError) as info:
            _poll_for(consumer, FAIL_FAST_S)
    finally:
        consumer.close()
    assert time.monotonic() - started < FAIL_FAST_S + 5
    assert password not in str(info.value)


def _poll_for(consumer: Consumer, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        consumer.poll(0.1)


def test_mutual_tls_end_to_end_on_kafka(certs: TestCertificates) -> None:
    # The refusal of an anonymous client is test_security.py's mutual TLS test (Tansu's
    # gateway and Kafka); here the same certificates carry records both ways.
    with embedded_broker("kafka", tls=certs.tls_files(require_client_cert=True)) as broker:
        assert broker.client_config["security.protocol"] == "ssl"
        # The same certificates end to end: produce with librdkafka, consume with ours.
        topic = unique_name("mtls")
        broker.create_topic(topic, PARTITIONS)
        client_security: dict[str, Any] = {
            "security.protocol": "ssl",
            "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(certs.client_cert),
            "ssl.key.location": str(certs.client_key),
        }
        _produce(broker.bootstrap, topic, client_security, 40)
        consumer = _consumer(broker.bootstrap, unique_name("g"), client_security)
        got: set[tuple[int, int]] = set()
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 60
            while len(got) < 40:
                message = consumer.poll(0.2)
                if message is not None:
                    partition, offset = message.partition(), message.offset()
                    assert partition is not None
                    assert offset is not None
                    got.add((partition, offset))
                assert time.monotonic() < deadline, f"only {len(got)} records"
        finally:
            consumer.close()
