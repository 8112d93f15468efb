"""Security configuration: librdkafka's keys, validation naming the key, secrets hidden,
and the same setting reaching every place that opens a connection."""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any

import pytest

from coopconsumer import ConfigurationError
from coopconsumer._config import ConsumerConfig
from coopconsumer._io._client import ClientConfig
from coopconsumer._io._producer import producer_config
from coopconsumer._security import Secret, SecurityConfig, parse_security

PASSWORD = "hunter2-very-secret"
BASE = {"bootstrap.servers": "b:9093", "group.id": "g"}
SCRAM = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "SCRAM-SHA-512",
    "sasl.username": "alice",
    "sasl.password": PASSWORD,
    "ssl.ca.location": "/etc/ssl/ca.pem",
}


def _token(_config: str | None) -> tuple[str, float]:
    return "t", 2e9


def test_a_confluent_kafka_config_pastes_unchanged() -> None:
    config = ConsumerConfig.from_mapping({**BASE, **SCRAM})
    security = config.security
    assert security.security_protocol == "sasl_ssl"
    assert security.sasl_mechanism == "SCRAM-SHA-512"
    assert security.uses_tls
    assert security.uses_sasl
    assert security.verify_hostname  # https by default, as librdkafka >= 2.0
    assert isinstance(security.sasl_password, Secret)
    assert security.sasl_password.reveal() == PASSWORD


def test_the_fetcher_gets_the_same_keys() -> None:
    fetcher = ConsumerConfig.from_mapping({**BASE, **SCRAM}).fetcher_config()
    assert fetcher["security.protocol"] == "sasl_ssl"
    assert fetcher["sasl.mechanism"] == "SCRAM-SHA-512"
    assert fetcher["sasl.username"] == "alice"
    assert fetcher["sasl.password"] == PASSWORD
    assert fetcher["ssl.ca.location"] == "/etc/ssl/ca.pem"
    oauth = ConsumerConfig.from_mapping(
        {
            **BASE,
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": _token,
            "sasl.oauthbearer.extensions": "logicalCluster=lkc-1",
        }
    ).fetcher_config()
    assert oauth["oauth_cb"] is _token
    assert oauth["sasl.oauthbearer.extensions"] == "logicalCluster=lkc-1"


def test_the_wire_client_gets_the_same_setting() -> None:
    config = ConsumerConfig.from_mapping({**BASE, **SCRAM})
    client = ClientConfig(bootstrap_servers=config.bootstrap_servers, security=config.security)
    assert client.security is config.connection.security


def test_the_producer_gets_the_same_keys_checked_the_same_way() -> None:
    plain_sasl = {**SCRAM, "security.protocol": "sasl_plaintext"}
    del plain_sasl["ssl.ca.location"]  # librdkafka reads the file when the producer starts
    conf = producer_config({"bootstrap.servers": "b:9093", **plain_sasl})
    assert conf["sasl.password"] == PASSWORD
    assert conf["security.protocol"] == "sasl_plaintext"
    with pytest.raises(ConfigurationError, match=r"'sasl\.username' is set but"):
        producer_config({"bootstrap.servers": "b:9093", "sasl.username": "alice"})
    conf = producer_config(
        {
            "bootstrap.servers": "b:9093",
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": _token,
        }
    )
    assert conf["oauth_cb"] is _token


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ssl.ca.location": "ca.pem"}, "'ssl.ca.location' is set but 'security.protocol'"),
        (
            {"security.protocol": "ssl", "sasl.mechanism": "PLAIN"},
            "'sasl.mechanism' is set but 'security.protocol' is 'ssl'",
        ),
        ({"security.protocol": "sasl_ssl"}, "GSSAPI"),
        (
            {"security.protocol": "sasl_ssl", "sasl.mechanism": "GSSAPI"},
            "GSSAPI \\(Kerberos\\) is not supported",
        ),
        (
            {"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-1"},
            "'sasl.mechanism': expected PLAIN",
        ),
        (
            {"security.protocol": "sasl_ssl", "sasl.mechanism": "PLAIN", "sasl.username": "a"},
            "PLAIN needs 'sasl.password'",
        ),
        (
            {
                "security.protocol": "sasl_ssl",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "a",
                "sasl.password": "p",
                "oauth_cb": _token,
            },
            "'oauth_cb' is set but 'sasl.mechanism' is 'PLAIN'",
        ),
        (
            {
                "security.protocol": "sasl_ssl",
                "sasl.mechanism": "OAUTHBEARER",
                "oauth_cb": _token,
                "sasl.username": "a",
            },
            "'sasl.username' is set but 'sasl.mechanism' is OAUTHBEARER",
        ),
        (
            {"security.protocol": "sasl_ssl", "sasl.mechanism": "OAUTHBEARER"},
            "no token source",
        ),
        (
            {
                "security.protocol": "sasl_ssl",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.client.id": "c",
                "sasl.oauthbearer.client.secret": "s",
            },
            "needs 'sasl.oauthbearer.token.endpoint.url'",
        ),
        (
            {
                "security.protocol": "sasl_ssl",
                "sasl.mechanism": "OAUTHBEARER",
                "oauth_cb": _token,
                "sasl.oauthbearer.client.id": "c",
            },
            "'sasl.oauthbearer.client.id' is set but 'sasl.oauthbearer.method' is 'default'",
        ),
        (
            {
                "security.protocol": "sasl_ssl",
                "sasl.mechanism": "OAUTHBEARER",
                "oauth_cb": _token,
                "sasl.oauthbearer.extensions": "auth=x",
            },
            "not 'auth'",
        ),
        (
            {"security.protocol": "ssl", "ssl.certificate.location": "c.pem"},
            "without its key",
        ),
        ({"security.protocol": "ssl", "ssl.key.location": "k.pem"}, "without its certificate"),
        (
            {"security.protocol": "ssl", "ssl.ca.location": "a", "ssl.ca.pem": "-----BEGIN x"},
            "'ssl.ca.location' and 'ssl.ca.pem' are both set",
        ),
        ({"security.protocol": "ssl", "ssl.key.password": "x"}, "no client key is"),
        ({"security.protocol": "tls"}, "invalid value 'tls' for 'security.protocol'"),
        ({"sasl.jaas.config": "x"}, "'sasl.jaas.config' is not supported: use sasl.username"),
        ({"ssl.keystore.location": "x"}, "'ssl.keystore.location' is not supported"),
        ({"ssl.unknown.thing": "x"}, "unknown security key 'ssl.unknown.thing'"),
        (
            {"sasl.mechanism": "PLAIN", "sasl.mechanisms": "PLAIN"},
            "'sasl.mechanism' and 'sasl.mechanisms' set the same option",
        ),
        (
            {"security.protocol": "sasl_ssl", "sasl.mechanisms": "GSSAPI"},
            "'sasl.mechanisms' is GSSAPI",
        ),
    ],
)
def test_contradictory_or_incomplete_settings_name_the_key(
    settings: Mapping[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ConsumerConfig.from_mapping({**BASE, **settings})


def _all_text(value: object) -> str:
    return repr(value) + str(value)


def test_secrets_never_show_in_repr_str_errors_or_pickled_errors() -> None:
    key_pem = "-----BEGIN PRIVATE KEY-----\nSECRETKEYMATERIAL\n-----END PRIVATE KEY-----\n"
    settings: dict[str, object] = {
        **BASE,
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "svc",
        "sasl.oauthbearer.client.secret": PASSWORD,
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
        "ssl.key.pem": key_pem,
        "ssl.key.password": PASSWORD,
    }
    config = ConsumerConfig.from_mapping(settings)
    for shown in (config, config.connection, config.security, config.security.redacted()):
        assert PASSWORD not in _all_text(shown)
        assert "SECRETKEYMATERIAL" not in _all_text(shown)
    assert config.security.redacted()["ssl.key.password"] == "***"
    # Bad values of secret keys are not quoted back.
    for key in ("sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret"):
        with pytest.raises(ConfigurationError) as info:
            parse_security({key: [PASSWORD]})
        assert PASSWORD not in str(info.value)
        assert PASSWORD not in str(pickle.loads(pickle.dumps(info.value)).__dict__)
    with pytest.raises(ConfigurationError) as info:
        parse_security({"ssl.key.pem": PASSWORD})
    assert PASSWORD not in str(info.value)


def test_secret_equality_hash_and_pickle() -> None:
    assert Secret("a") == Secret("a")
    assert Secret("a") != Secret("b")
    assert hash(Secret("a")) == hash(Secret("a"))
    assert pickle.loads(pickle.dumps(Secret("a"))).reveal() == "a"
    config = SecurityConfig(
        security_protocol="sasl_ssl",
        sasl_mechanism="PLAIN",
        sasl_username="u",
        sasl_password="p",  # the converter wraps it
    )
    assert config == pickle.loads(pickle.dumps(config))
    assert repr(config.sasl_password) == "Secret('***')"


def test_a_misspelt_security_key_gets_a_suggestion() -> None:
    with pytest.raises(ConfigurationError, match=r"did you mean 'sasl\.password'"):
        ConsumerConfig.from_mapping({**BASE, "sasl.pasword": PASSWORD})


def test_a_listener_prefix_in_bootstrap_must_agree_with_the_protocol() -> None:
    config = ConsumerConfig.from_mapping(
        {**BASE, **SCRAM, "bootstrap.servers": "SASL_SSL://b1:9096,b2:9096"}
    )
    assert config.bootstrap_servers == (("b1", 9096), ("b2", 9096))
    with pytest.raises(ConfigurationError, match=r"names ssl but .security\.protocol. is"):
        ConsumerConfig.from_mapping({**BASE, "bootstrap.servers": "ssl://b1:9093"})


def test_plaintext_stays_the_default() -> None:
    config = ConsumerConfig.from_mapping(BASE)
    assert config.security == SecurityConfig()
    assert config.fetcher_config()["security.protocol"] == "plaintext"
    assert not config.security.uses_tls
    assert not config.security.uses_sasl
