"""ConsumerConfig: defaults, coercion, every validation error, fetcher configuration."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer._config import (
    DEFAULT_ASSIGNMENT_STRATEGY,
    FETCHER_GROUP_ID,
    FETCHER_PASSTHROUGH_KEYS,
    ConsumerConfig,
    documented_keys,
)
from coopconsumer._errors import ConfigurationError
from coopconsumer._security import SecurityConfig
from coopconsumer.assignors import (
    RebalanceProtocol,
    load_assignors,
    select_rebalance_protocol,
)

BASE: dict[str, object] = {"bootstrap.servers": "localhost:9092", "group.id": "g"}


def parse(**extra: object) -> ConsumerConfig:
    """Parse BASE plus ``extra``; keyword names use ``__`` for dots."""
    settings_ = dict(BASE)
    settings_.update({key.replace("__", "."): value for key, value in extra.items()})
    return ConsumerConfig.from_mapping(settings_)


def with_key(key: str, value: object) -> ConsumerConfig:
    return ConsumerConfig.from_mapping({**BASE, key: value})


def test_defaults() -> None:
    config = ConsumerConfig.from_mapping({"bootstrap.servers": "b1:9092"})
    assert config.bootstrap_servers == (("b1", 9092),)
    assert config.client_id == "coopconsumer"
    conn = config.connection
    assert (conn.socket_timeout_ms, conn.request_timeout_ms) == (60000, 30000)
    assert (conn.reconnect_backoff_ms, conn.reconnect_backoff_max_ms) == (100, 10000)
    assert (conn.retry_backoff_ms, conn.retry_backoff_max_ms) == (100, 1000)
    assert conn.socket_connection_setup_timeout_ms == 10000
    assert conn.connections_max_idle_ms == 540000
    assert config.group_id is None
    assert config.group_instance_id is None
    assert config.client_rack is None
    assert config.partition_assignment_strategy == ("range", "cooperative-sticky")
    assert DEFAULT_ASSIGNMENT_STRATEGY == "range,cooperative-sticky"
    assert config.session_timeout_ms == 45000
    assert config.heartbeat_interval_ms == 3000
    assert config.max_poll_interval_ms == 300000
    assert config.max_poll_records == 500
    assert config.enable_auto_commit is True
    assert config.auto_commit_interval_ms == 5000
    assert config.auto_offset_reset == "latest"
    assert config.isolation_level == "read_uncommitted"
    assert config.metadata_max_age_ms == 300000
    assert config.default_api_timeout_ms == 60000
    assert config.security_protocol == "plaintext"
    assert config.security == SecurityConfig()
    assert config.fetcher_overrides == ()


def test_default_strategy_is_eager_as_java() -> None:
    config = parse()
    assignors = load_assignors(list(config.partition_assignment_strategy))  # type: ignore[arg-type]
    assert [a.name for a in assignors] == ["range", "cooperative-sticky"]
    assert select_rebalance_protocol(assignors) is RebalanceProtocol.EAGER


def test_config_is_frozen() -> None:
    config = parse()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        config.session_timeout_ms = 1  # type: ignore[misc]


def test_string_values_are_coerced() -> None:
    config = parse(
        session__timeout__ms="10000",
        heartbeat__interval__ms=" 2000 ",
        enable__auto__commit="FALSE",
        max__poll__records=50.0,
    )
    assert config.session_timeout_ms == 10000
    assert config.heartbeat_interval_ms == 2000
    assert config.enable_auto_commit is False
    assert config.max_poll_records == 50


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("true", True), ("False", False), ("1", True), (0, False)],
)
def test_booleans(value: object, expected: bool) -> None:
    assert parse(enable__auto__commit=value).enable_auto_commit is expected


@pytest.mark.parametrize("value", ["yes", 2, "", 1.0, None.__class__])
def test_bad_booleans(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"'enable\.auto\.commit'.*true or false"):
        parse(enable__auto__commit=value)


@pytest.mark.parametrize("value", [True, "abc", 1.5, "1e3", [1], "", "4 5"])
def test_bad_integers_name_key_value_and_range(value: object) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse(auto__commit__interval__ms=value)
    message = str(info.value)
    assert "'auto.commit.interval.ms'" in message
    assert repr(value) in message
    assert "an integer from 0 to 2147483647" in message


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("session.timeout.ms", 0, "from 1 to"),
        ("socket.timeout.ms", 5, "from 10 to 300000"),
        ("retry.backoff.ms", 0, "from 1 to 300000"),
        ("max.poll.records", -1, "from 1 to"),
        ("request.timeout.ms", 2**31, "to 2147483647"),
        ("metadata.max.age.ms", 3600001, "from 1 to 3600000"),
    ],
)
def test_integer_ranges(key: str, value: int, allowed: str) -> None:
    with pytest.raises(ConfigurationError, match=allowed):
        with_key(key, value)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 2**31 - 1))
def test_property_int_and_str_parse_alike(value: int) -> None:
    as_int = parse(max__poll__interval__ms=value)
    as_str = parse(max__poll__interval__ms=str(value))
    assert as_int == as_str
    assert as_int.max_poll_interval_ms == value


def test_integer_with_more_digits_than_int_converts() -> None:
    # Python refuses to convert over 4300 digits with a bare ValueError; it must be a
    # ConfigurationError like any other out-of-range value, without a 5000-char message.
    with pytest.raises(ConfigurationError) as info:
        parse(session__timeout__ms="9" * 5000)
    message = str(info.value)
    assert "'session.timeout.ms'" in message
    assert "(5002 characters)" in message
    assert len(message) < 200


_ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.complex_numbers(),
    st.text(max_size=20),
    st.sampled_from(["9" * 5000, " 1 ", "١٢", "a:1", "[::1]:1", "range", ".", "\x00"]),
    st.binary(max_size=4),
    st.lists(st.one_of(st.integers(), st.text(max_size=5)), max_size=3),
    st.tuples(),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.frozensets(st.integers(), max_size=2),
    st.builds(object),
    st.just(print),
)


@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from([row.key for row in documented_keys()]), value=_ODD_VALUES)
def test_property_any_value_of_any_type_is_accepted_or_a_configuration_error(
    key: str, value: object
) -> None:
    settings_: dict[str, object] = {**BASE, key: value}
    error: ConfigurationError | None = None
    try:
        ConsumerConfig.from_mapping(settings_)
    except ConfigurationError as exc:
        error = exc
    if error is not None:  # the message names the key the user wrote
        assert key in str(error)


def test_rebalance_timeout_is_not_a_consumer_key() -> None:
    # Java's consumer has no rebalance.timeout.ms: the JoinGroup rebalance timeout is
    # max.poll.interval.ms. A key that parsed and did nothing would mislead.
    with pytest.raises(ConfigurationError, match=r"rebalance\.timeout\.ms"):
        parse(rebalance__timeout__ms=1234)


def test_none_means_default() -> None:
    config = parse(session__timeout__ms=None, group__instance__id=None)
    assert config.session_timeout_ms == 45000
    assert config.group_instance_id is None


# -- required keys, bootstrap servers ---------------------------------------------------


@pytest.mark.parametrize("settings_", [{}, {"bootstrap.servers": None}, {"group.id": "g"}])
def test_bootstrap_servers_required(settings_: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match=r"'bootstrap\.servers' is required"):
        ConsumerConfig.from_mapping(settings_)


def test_bootstrap_forms() -> None:
    config = with_key("bootstrap.servers", " a:1, PLAINTEXT://b.example:9093,[::1]:9094 ")
    assert config.bootstrap_servers == (("a", 1), ("b.example", 9093), ("::1", 9094))
    assert with_key("bootstrap.servers", ["x:1", "y:2"]).bootstrap_servers == (
        ("x", 1),
        ("y", 2),
    )
    # Blank entries are skipped, as Java's ClientUtils does ("a:1," from a Java config).
    assert with_key("bootstrap.servers", "a:1, ,").bootstrap_servers == (("a", 1),)
    assert with_key("bootstrap.servers", ["", "b:2"]).bootstrap_servers == (("b", 2),)
    only_rdkafka_name = ConsumerConfig.from_mapping({"metadata.broker.list": "z:3"})
    assert only_rdkafka_name.bootstrap_servers == (("z", 3),)


@pytest.mark.parametrize(
    "value", ["localhost", "localhost:", "h:0", "h:65536", "h:port", "::1:9092", "", " , ", []]
)
def test_bad_bootstrap_servers(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"'bootstrap\.servers'"):
        with_key("bootstrap.servers", value)


def test_bootstrap_wrong_type() -> None:
    with pytest.raises(ConfigurationError, match="list of 'host:port'"):
        with_key("bootstrap.servers", 9092)


def test_same_option_under_two_names() -> None:
    with pytest.raises(ConfigurationError, match="set the same option"):
        ConsumerConfig.from_mapping(
            {"bootstrap.servers": "a:1", "metadata.broker.list": "b:2", "group.id": "g"}
        )
    with pytest.raises(ConfigurationError, match="set the same option"):
        parse(metadata__max__age__ms=1000, topic__metadata__refresh__interval__ms=1000)


def test_librdkafka_metadata_refresh_name() -> None:
    config = parse(topic__metadata__refresh__interval__ms="60000")
    assert config.metadata_max_age_ms == 60000
    assert config.fetcher_config()["topic.metadata.refresh.interval.ms"] == 60000


# -- group settings ---------------------------------------------------------------------


def test_group_id_required_for_subscribe() -> None:
    config = ConsumerConfig.from_mapping({"bootstrap.servers": "a:1"})
    with pytest.raises(ConfigurationError, match=r"'group\.id' is required to subscribe"):
        config.require_group_id()
    assert parse().require_group_id() == "g"


@pytest.mark.parametrize("value", ["", "   ", 7])
def test_bad_group_id(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"'group\.id'.*non-empty string"):
        parse(group__id=value)


def test_group_instance_id() -> None:
    assert parse(group__instance__id="worker-1.a_b").group_instance_id == "worker-1.a_b"
    # Java trims string values (ConfigDef) before JoinGroupRequest validates them.
    assert parse(group__instance__id=" w1\t").group_instance_id == "w1"
    assert parse(group__instance__id="...").group_instance_id == "..."
    for bad in ("", "has space", "x" * 250, "é", 3, ".", "..", " . "):
        with pytest.raises(ConfigurationError, match=r"\[a-zA-Z0-9._-\]"):
            parse(group__instance__id=bad)


def test_heartbeat_must_be_below_session_timeout() -> None:
    with pytest.raises(ConfigurationError, match=r"'heartbeat.interval.ms' \(2000\).*lower"):
        parse(session__timeout__ms=2000, heartbeat__interval__ms=2000)
    assert parse(session__timeout__ms=2000, heartbeat__interval__ms=666).session_timeout_ms == (
        2000
    )


@pytest.mark.parametrize(
    ("base", "top"),
    [
        ("reconnect.backoff.ms", "reconnect.backoff.max.ms"),
        ("retry.backoff.ms", "retry.backoff.max.ms"),
    ],
)
def test_backoff_max_not_below_base(base: str, top: str) -> None:
    with pytest.raises(ConfigurationError, match=f"'{top}' \\(50\\) must not be lower"):
        ConsumerConfig.from_mapping({**BASE, base: 100, top: 50})


def test_client_rack() -> None:
    assert parse(client__rack="").client_rack is None
    config = parse(client__rack="eu-1a")
    assert config.client_rack == "eu-1a"
    assert config.fetcher_config()["client.rack"] == "eu-1a"
    assert "client.rack" not in parse().fetcher_config()


# -- choices -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("earliest", "earliest"),
        ("LATEST", "latest"),
        ("none", "none"),
        ("smallest", "earliest"),
        ("largest", "latest"),
        ("beginning", "earliest"),
        ("end", "latest"),
        ("error", "none"),
    ],
)
def test_auto_offset_reset(value: str, expected: str) -> None:
    assert parse(auto__offset__reset=value).auto_offset_reset == expected


def test_bad_auto_offset_reset_lists_choices() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse(auto__offset__reset="begin")
    assert str(info.value) == (
        "invalid value 'begin' for 'auto.offset.reset': expected earliest | latest | none "
        "(or beginning, end, error, largest, smallest)"
    )


def test_isolation_level() -> None:
    assert parse(isolation__level="READ_COMMITTED").isolation_level == "read_committed"
    with pytest.raises(ConfigurationError, match=r"expected read_committed \| read_uncommitted$"):
        parse(isolation__level="committed")


def test_security_protocol_is_librdkafkas_any_case() -> None:
    assert parse(security__protocol="PLAINTEXT").security_protocol == "plaintext"
    assert parse(security__protocol="SSL").security_protocol == "ssl"
    with pytest.raises(ConfigurationError, match=r"invalid value 'TLS' for 'security\.protocol'"):
        parse(security__protocol="TLS")


# -- fetcher ------------------------------------------------------------------------------


def test_fetcher_config_defaults() -> None:
    config = parse(
        bootstrap__servers="a:1,[::1]:2", client__id="me", isolation__level="read_committed"
    )
    assert config.fetcher_config() == {
        "bootstrap.servers": "a:1,[::1]:2",
        "group.id": FETCHER_GROUP_ID,
        "client.id": "me",
        "security.protocol": "plaintext",
        "auto.offset.reset": "latest",
        "isolation.level": "read_committed",
        "socket.timeout.ms": 60000,
        "socket.connection.setup.timeout.ms": 10000,
        "connections.max.idle.ms": 540000,
        "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 10000,
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 300000,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
    }


def test_fetcher_group_id_is_not_the_users_group() -> None:
    assert parse(group__id="orders").fetcher_config()["group.id"] == FETCHER_GROUP_ID


def test_auto_offset_reset_none_is_librdkafka_error() -> None:
    assert parse(auto__offset__reset="none").fetcher_config()["auto.offset.reset"] == "error"


def test_passthrough_keys_are_typed_and_forwarded() -> None:
    config = parse(
        fetch__wait__max__ms="100",
        queued__min__messages=1000,
        check__crcs="true",
        broker__address__family="V4",
        fetch__max__wait__ms=None,
    )
    assert config.fetcher_overrides == (
        ("broker.address.family", "v4"),
        ("check.crcs", True),
        ("fetch.wait.max.ms", 100),
        ("queued.min.messages", 1000),
    )
    fetcher = config.fetcher_config()
    assert fetcher["fetch.wait.max.ms"] == 100
    assert fetcher["check.crcs"] is True
    assert fetcher["broker.address.family"] == "v4"


def test_java_fetch_max_wait_maps_to_librdkafka_name() -> None:
    config = parse(fetch__max__wait__ms=250)
    assert config.fetcher_config()["fetch.wait.max.ms"] == 250
    for first, second in (
        ("fetch.max.wait.ms", "fetch.wait.max.ms"),
        ("fetch.wait.max.ms", "fetch.max.wait.ms"),
    ):
        with pytest.raises(ConfigurationError) as info:
            ConsumerConfig.from_mapping({**BASE, first: 250, second: 250})
        assert str(info.value) == (
            f"{first!r} and {second!r} set the same fetcher option; give one"
        )
    with pytest.raises(ConfigurationError, match="same librdkafka option"):
        parse(fetch__message__max__bytes=1000, max__partition__fetch__bytes=1000)


def test_receive_message_max_bytes_must_exceed_fetch_max_bytes() -> None:
    with pytest.raises(ConfigurationError, match=r"\(52428800\) \+ 512"):
        parse(receive__message__max__bytes=52428800)
    with pytest.raises(ConfigurationError, match=r"\(2000000\) \+ 512"):
        parse(receive__message__max__bytes=2000000, fetch__max__bytes=2000000)
    config = parse(receive__message__max__bytes=2000512, fetch__max__bytes=2000000)
    assert config.fetcher_config()["receive.message.max.bytes"] == 2000512


def test_bad_passthrough_value() -> None:
    with pytest.raises(ConfigurationError, match=r"'queued\.min\.messages'.*from 1 to"):
        parse(queued__min__messages=0)
    with pytest.raises(ConfigurationError, match=r"'debug'.*non-empty string"):
        parse(debug="")


@settings(max_examples=60, deadline=None)
@given(
    auto_commit=st.sampled_from([True, False, "true", "false", 1, 0]),
    extra=st.dictionaries(
        st.sampled_from(["fetch.wait.max.ms", "queued.min.messages", "fetch.min.bytes"]),
        st.integers(1, 1000),
    ),
)
def test_property_fetcher_never_commits(auto_commit: object, extra: dict[str, int]) -> None:
    config = ConsumerConfig.from_mapping({**BASE, "enable.auto.commit": auto_commit, **extra})
    fetcher = config.fetcher_config()
    assert fetcher["enable.auto.commit"] is False
    assert fetcher["enable.auto.offset.store"] is False
    assert fetcher["group.id"] == FETCHER_GROUP_ID
    for key, value in extra.items():
        assert fetcher[key] == value


def test_librdkafka_accepts_the_fetcher_config_at_range_limits() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    config = parse(
        bootstrap__servers="127.0.0.1:1",
        socket__timeout__ms=10,
        retry__backoff__ms=300000,
        retry__backoff__max__ms=300000,
        reconnect__backoff__max__ms=3600000,
        metadata__max__age__ms=3600000,
        socket__connection__setup__timeout__ms=1000,
        connections__max__idle__ms=1,
        auto__offset__reset="none",
        client__rack="r1",
        **{key.replace(".", "__"): _limit_value(key) for key in FETCHER_PASSTHROUGH_KEYS},
    )
    consumer = confluent_kafka.Consumer(config.fetcher_config())
    consumer.close()


def _limit_value(key: str) -> Any:
    values: dict[str, Any] = {
        "check.crcs": True,
        "socket.keepalive.enable": True,
        "socket.nagle.disable": True,
        "broker.address.family": "v4",
        "debug": "consumer",
        "log_level": 0,
        "max.partition.fetch.bytes": None,  # same option as fetch.message.max.bytes
        "receive.message.max.bytes": 1000000 + 512,  # fetch.max.bytes below + 512
    }
    if key in values:
        return values[key]
    parse_value = FETCHER_PASSTHROUGH_KEYS[key]
    # The smallest accepted value: probe upwards from 0.
    for candidate in (0, 1, 1000, 1000000):
        try:
            return parse_value(key, candidate)
        except ConfigurationError:
            continue
    raise AssertionError(key)


# -- documentation ------------------------------------------------------------------------


def test_documented_keys_cover_every_accepted_key() -> None:
    rows = documented_keys()
    keys = [row.key for row in rows]
    assert len(keys) == len(set(keys))
    for key in FETCHER_PASSTHROUGH_KEYS:
        assert key in keys
    by_key = {row.key: row for row in rows}
    assert by_key["session.timeout.ms"].default == "45000"
    assert by_key["enable.auto.commit"].default == "true"
    assert by_key["bootstrap.servers"].default == "(required)"
    assert by_key["partition.assignment.strategy"].default == DEFAULT_ASSIGNMENT_STRATEGY
    assert all(row.description for row in rows)
    # Every documented key is accepted (aliases of one option are tried one at a time).
    for row in rows:
        if row.key in ("bootstrap.servers", "metadata.broker.list"):
            continue
        value = _documented_sample(row.key)
        # group.remote.assignor only applies to the KIP-848 protocol.
        group = {"group.protocol": "consumer"} if row.key == "group.remote.assignor" else {}
        ConsumerConfig.from_mapping({**BASE, **_security_context(row.key), **group, row.key: value})


def _security_context(key: str) -> dict[str, object]:
    """Settings that make a security key meaningful (alone it contradicts plaintext)."""
    if key.startswith(("ssl.", "enable.ssl.")):
        tls: dict[str, object] = {"security.protocol": "ssl"}
        if key.startswith("ssl.certificate.") or key == "ssl.key.password":
            tls["ssl.key.location"] = "client.key"
        if key in ("ssl.key.location", "ssl.key.pem", "ssl.key.password"):
            tls["ssl.certificate.location"] = "client.crt"
        return tls
    if key in ("sasl.username", "sasl.password", "sasl.mechanism", "sasl.mechanisms"):
        named: dict[str, object] = {"security.protocol": "sasl_ssl"}
        if not key.startswith("sasl.mechanism"):
            named["sasl.mechanism"] = "PLAIN"
        return named | {"sasl.username": "u", "sasl.password": "p"}
    if key.startswith("sasl.oauthbearer.") or key == "oauth_cb":
        oidc = {
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "id",
            "sasl.oauthbearer.client.secret": "s",
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        }
        base: dict[str, object] = {"security.protocol": "sasl_ssl", "sasl.mechanism": "OAUTHBEARER"}
        if key in ("oauth_cb", "sasl.oauthbearer.config") or key == "sasl.oauthbearer.extensions":
            return base | {"oauth_cb": lambda _config: ("t", 1e12)}
        return base | oidc
    return {}


def _documented_sample(key: str) -> object:
    samples: dict[str, object] = {
        "group.id": "g2",
        "group.instance.id": "i",
        "client.id": "c",
        "client.rack": "r",
        "partition.assignment.strategy": "range",
        "group.protocol": "consumer",
        "group.remote.assignor": "uniform",
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "security.protocol": "plaintext",
        "enable.auto.commit": "false",
        "heartbeat.interval.ms": 100,
        "session.timeout.ms": 10000,
        "receive.message.max.bytes": 52428800 + 512,
        "error_cb": print,
        "logger": logging.getLogger("app.kafka"),
    }
    if key in samples:
        return samples[key]
    security: dict[str, object] = {
        "security.protocol": "ssl",
        "ssl.ca.location": "ca.pem",
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----",
        "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----",
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----",
        "ssl.endpoint.identification.algorithm": "none",
        "enable.ssl.certificate.verification": "false",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "oauth_cb": lambda _config: ("t", 1e12),
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1",
    }
    if key in security:
        return security[key]
    if key.startswith(("ssl.", "sasl.")):
        return "x"
    if key in FETCHER_PASSTHROUGH_KEYS:
        return _limit_value(key) if key != "max.partition.fetch.bytes" else 1000
    return 1000


def test_connection_config_builds_the_wire_clients_config() -> None:
    """ConnectionConfig's names match the wire client's ClientConfig (contract check)."""
    from coopconsumer._io._client import ClientConfig

    config = parse(
        bootstrap__servers="a:1,b:2",
        client__id="me",
        request__timeout__ms=1234,
        retry__backoff__max__ms=5000,
        connections__max__idle__ms=1000,
    )
    client_fields = {field.name for field in attrs.fields(ClientConfig)}
    ours = attrs.asdict(config.connection, recurse=False)
    assert set(ours) - client_fields == {"socket_timeout_ms"}
    client = ClientConfig(**{k: v for k, v in ours.items() if k in client_fields})
    assert client.bootstrap_servers == (("a", 1), ("b", 2))
    assert client.client_id == "me"
    assert client.request_timeout_ms == 1234
    assert client.retry_backoff_max_ms == 5000
    assert client.connections_max_idle_ms == 1000


def test_group_protocol_consumer_and_its_assignor() -> None:
    cfg = ConsumerConfig.from_mapping(
        {**BASE, "group.protocol": "Consumer", "group.remote.assignor": "range"}
    )
    assert (cfg.group_protocol, cfg.group_remote_assignor) == ("consumer", "range")
    assert ConsumerConfig.from_mapping(BASE).group_protocol == "classic"


def test_group_protocol_consumer_refuses_client_assignors() -> None:
    with pytest.raises(ConfigurationError, match="the broker assigns partitions"):
        ConsumerConfig.from_mapping(
            {
                **BASE,
                "group.protocol": "consumer",
                "partition.assignment.strategy": "cooperative-sticky",
            }
        )


def test_remote_assignor_needs_the_consumer_protocol() -> None:
    with pytest.raises(ConfigurationError, match=r"only applies to group\.protocol=consumer"):
        ConsumerConfig.from_mapping({**BASE, "group.remote.assignor": "uniform"})
    with pytest.raises(ConfigurationError, match=r"expected range \| uniform"):
        ConsumerConfig.from_mapping(
            {**BASE, "group.protocol": "consumer", "group.remote.assignor": "sticky"}
        )
