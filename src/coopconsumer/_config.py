"""Consumer configuration: Kafka/librdkafka-style keys parsed and validated once.

``ConsumerConfig.from_mapping({"bootstrap.servers": ..., "group.id": ...})`` checks every
key and value and returns a frozen object with snake_case fields whose names carry
their units (``session_timeout_ms``). Unknown keys and bad values raise
``ConfigurationError`` naming the key, the value and what is allowed, before anything
is started.

Keys for record fetching that only librdkafka understands (``fetch.*``, ``queued.*``
and a few socket settings) are accepted from a documented allow-list and handed to the
confluent-kafka fetcher by ``fetcher_config()``; any other key is an error. Security keys
(``security.protocol``, ``ssl.*``, ``sasl.*``, ``oauth_cb``) become one
``SecurityConfig`` (``_security``) in ``ConnectionConfig.security``: the wire client
and, through ``fetcher_config()``, librdkafka get the same setting.

Imports ``_errors``, ``_security``, ``_types`` and the assignor loader; no I/O, no clock.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import attrs

from ._errors import ConfigurationError
from ._security._settings import (
    SECURITY_KEYS,
    SECURITY_SYNONYMS,
    SecurityConfig,
    is_security_key,
    parse_security,
)
from .assignors import load_assignors, select_rebalance_protocol

__all__ = [
    "DEFAULT_ASSIGNMENT_STRATEGY",
    "FETCHER_GROUP_ID",
    "FETCHER_PASSTHROUGH_KEYS",
    "ConfigKey",
    "ConnectionConfig",
    "ConsumerConfig",
    "documented_keys",
]

#: Java 3.x's default ``[RangeAssignor, CooperativeStickyAssignor]``: it joins groups of
#: Java, librdkafka (``range,roundrobin``) and eager-only clients, and behaves EAGER
#: because ``range`` is EAGER-only. Set ``cooperative-sticky`` alone for KIP-429
#: incremental rebalancing (the second bounce of KIP-429's upgrade path).
DEFAULT_ASSIGNMENT_STRATEGY = "range,cooperative-sticky"

#: The ``group.id`` handed to librdkafka. confluent_kafka.Consumer refuses to start
#: without one even in manual-assignment mode, but the fetcher only ever calls
#: ``incremental_assign`` with explicit offsets: it never subscribes (so never sends
#: JoinGroup), never commits (auto commit and offset store are off) and never asks for
#: committed offsets. A name distinct from the user's group keeps it that way even if a
#: librdkafka code path we do not call looked offsets up or committed: it could only
#: touch this unused group, never the real one, whose offsets our own wire client
#: commits with the member id and generation librdkafka does not have.
FETCHER_GROUP_ID = "coopconsumer-fetcher"

ConfigValue: TypeAlias = str | int | bool
BootstrapServers: TypeAlias = tuple[tuple[str, int], ...]

_INT32_MAX = 2**31 - 1
_UNSET: Any = object()


# --------------------------------------------------------------------------- values


def _fail(key: str, value: object, allowed: str) -> ConfigurationError:
    shown = repr(value)
    if len(shown) > 100:  # a pasted blob should not flood the message
        shown = f"{shown[:60]}...({len(shown)} characters)"
    return ConfigurationError(f"invalid value {shown} for {key!r}: expected {allowed}")


_INT_TEXT = re.compile(r"\s*[+-]?\d+\s*")


def _int(lo: int = 0, hi: int = _INT32_MAX) -> Callable[[str, object], int]:
    allowed = f"an integer from {lo} to {hi}"

    def parse(key: str, value: object) -> int:
        if isinstance(value, bool):
            raise _fail(key, value, allowed)
        if isinstance(value, int):
            number = value
        elif (isinstance(value, float) and value.is_integer()) or (
            isinstance(value, str) and _INT_TEXT.fullmatch(value)
        ):
            try:
                number = int(value)
            except ValueError:  # more digits than int() converts (CVE-2020-10735 limit)
                raise _fail(key, value, allowed) from None
        else:
            raise _fail(key, value, allowed)
        if not lo <= number <= hi:
            raise _fail(key, value, allowed)
        return number

    return parse


_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0"})


def _bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise _fail(key, value, "true or false (also 'true'/'false', 1/0)")


def _str(*, empty_ok: bool = False) -> Callable[[str, object], str]:
    def parse(key: str, value: object) -> str:
        if not isinstance(value, str) or (not empty_ok and not value.strip()):
            raise _fail(key, value, "a string" if empty_ok else "a non-empty string")
        return value if empty_ok else value.strip()

    return parse


def _choice(choices: Mapping[str, str]) -> Callable[[str, object], str]:
    """Case-insensitive choice; ``choices`` maps every accepted spelling to its value."""
    canonical = sorted(set(choices.values()))
    synonyms = sorted(set(choices) - set(canonical))
    allowed = " | ".join(canonical)
    if synonyms:
        allowed += f" (or {', '.join(synonyms)})"

    def parse(key: str, value: object) -> str:
        if isinstance(value, str) and value.strip().lower() in choices:
            return choices[value.strip().lower()]
        raise _fail(key, value, allowed)

    return parse


_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]+))(?::(?P<port>[^:]*))?$")


def _bootstrap(key: str, value: object) -> BootstrapServers:
    if isinstance(value, str):
        entries = value.split(",")
    elif isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        entries = list(value)
    else:
        raise _fail(key, value, "'host:port[,host:port...]' or a list of 'host:port'")
    servers: list[tuple[str, int]] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            # Java's ClientUtils.parseAndValidateAddresses skips blank entries, so a
            # trailing comma copied from a Java config is harmless.
            continue
        # Java and librdkafka both accept a listener-style prefix; it must agree with
        # security.protocol (checked once that is known, in _check_listener_schemes).
        scheme, sep, rest = entry.partition("://")
        if sep and scheme.lower() in _LISTENER_SCHEMES:
            entry = rest
        match = _HOST_PORT.match(entry)
        port_text = match.group("port") if match else None
        if match is None or port_text is None:
            raise _fail(key, raw, "'host:port' entries, e.g. 'localhost:9092' or '[::1]:9092'")
        host = match.group("v6") or match.group("host")
        port = _int(1, 65535)(key, port_text) if port_text.isdigit() else None
        if port is None:
            raise _fail(key, raw, "a port from 1 to 65535 after the host")
        servers.append((host, port))
    if not servers:
        raise _fail(key, value, "at least one 'host:port'")
    return tuple(servers)


_LISTENER_SCHEMES = frozenset({"plaintext", "ssl", "sasl_plaintext", "sasl_ssl"})


def _check_listener_schemes(value: object, security: SecurityConfig) -> None:
    """A ``scheme://`` prefix in bootstrap.servers must name security.protocol: a
    prefix that says ``sasl_ssl`` while the connections would be plaintext is a
    mistake to report, not to follow silently."""
    entries = value.split(",") if isinstance(value, str) else value
    if not isinstance(entries, Sequence):
        return
    for raw in entries:
        if not isinstance(raw, str):
            continue
        scheme, sep, _rest = raw.strip().partition("://")
        if sep and scheme.lower() != security.security_protocol:
            raise ConfigurationError(
                f"'bootstrap.servers' entry {raw.strip()!r} names {scheme.lower()} but "
                f"'security.protocol' is {security.security_protocol!r}; make them agree"
            )


_INSTANCE_ID = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _group_instance_id(key: str, value: object) -> str:
    # The broker's rule for group.instance.id (Java's JoinGroupRequest
    # .validateGroupInstanceId, i.e. Topic.validate): 1-249 characters from
    # [a-zA-Z0-9._-], and not "." or "..". Java trims string configs first.
    allowed = "1 to 249 characters from [a-zA-Z0-9._-], not '.' or '..'"
    if not isinstance(value, str):
        raise _fail(key, value, allowed)
    text = value.strip()
    if not _INSTANCE_ID.fullmatch(text) or text in (".", ".."):
        raise _fail(key, value, allowed)
    return text


def _strategy(key: str, value: object) -> tuple[object, ...]:
    if isinstance(value, str):
        entries: tuple[object, ...] = tuple(part.strip() for part in value.split(","))
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        entries = tuple(value)
    else:
        entries = (value,)
    # Validate now so a bad name or an impossible mix fails at construction (KIP-429:
    # no protocol common to all assignors is a configuration error). The instances are
    # dropped; the coordinator loads its own.
    select_rebalance_protocol(load_assignors(list(entries)))  # type: ignore[arg-type]
    return entries


def _callback(key: str, value: object) -> Callable[..., object]:
    if callable(value):
        return value
    raise _fail(key, value, "a callable")


def _logger(key: str, value: object) -> logging.Logger:
    if isinstance(value, logging.Logger):
        return value
    raise _fail(key, value, "a logging.Logger")


# ----------------------------------------------------------------------------- keys


@attrs.frozen
class ConfigKey:
    """One row of the configuration reference: a key, its default and what it does."""

    key: str
    default: str
    description: str


@attrs.frozen
class _Option:
    key: str
    attr: str
    parse: Callable[[str, object], Any]
    default: Any
    description: str
    shown_default: str | None = None


_OPTIONS: tuple[_Option, ...] = (
    _Option(
        "bootstrap.servers",
        "bootstrap_servers",
        _bootstrap,
        _UNSET,
        "Brokers to contact first: 'host:port,host:port' or a list. Required.",
        "(required)",
    ),
    _Option(
        "group.id",
        "group_id",
        _str(),
        None,
        "The consumer group to join. Required for subscribe().",
        "(none)",
    ),
    _Option(
        "group.instance.id",
        "group_instance_id",
        _group_instance_id,
        None,
        "Static membership id (KIP-345): a restart within session.timeout.ms keeps the "
        "assignment without a rebalance.",
        "(none)",
    ),
    _Option(
        "client.id",
        "client_id",
        _str(empty_ok=True),
        "coopconsumer",
        "Name sent with every request, for broker logs and quotas.",
    ),
    _Option(
        "client.rack",
        "client_rack",
        _str(empty_ok=True),
        None,
        "Rack of this consumer, sent in the subscription for rack-aware assignors and "
        "to the fetcher for fetching from the closest replica (KIP-392).",
        "(none)",
    ),
    _Option(
        "partition.assignment.strategy",
        "partition_assignment_strategy",
        _strategy,
        DEFAULT_ASSIGNMENT_STRATEGY,
        "Assignors in preference order: built-in names (range, roundrobin, sticky, "
        "cooperative-sticky), Java class names, 'module:Class' paths, or classes and "
        "instances in a list. The rebalance protocol is the highest one all support: "
        "use 'cooperative-sticky' alone for incremental cooperative rebalancing.",
    ),
    _Option(
        "group.protocol",
        "group_protocol",
        _choice({"classic": "classic", "consumer": "consumer"}),
        "classic",
        "The group protocol: 'classic' (JoinGroup/SyncGroup, assignors run in the "
        "client) or 'consumer' (KIP-848: ConsumerGroupHeartbeat, the broker assigns; "
        "needs Kafka 4.0+).",
    ),
    _Option(
        "group.remote.assignor",
        "group_remote_assignor",
        _choice({"uniform": "uniform", "range": "range"}),
        None,
        "With group.protocol=consumer: the broker-side assignor, 'uniform' or 'range' "
        "(unset: the broker's default).",
        "(broker default)",
    ),
    _Option(
        "session.timeout.ms",
        "session_timeout_ms",
        _int(1),
        45000,
        "Without a heartbeat for this long the broker removes the member.",
    ),
    _Option(
        "heartbeat.interval.ms",
        "heartbeat_interval_ms",
        _int(1),
        3000,
        "Time between heartbeats; must be lower than session.timeout.ms.",
    ),
    _Option(
        "max.poll.interval.ms",
        "max_poll_interval_ms",
        _int(1),
        300000,
        "Longest allowed gap between poll() calls before the member leaves the group; "
        "also the JoinGroup rebalance timeout, as in Java.",
    ),
    _Option(
        "max.poll.records",
        "max_poll_records",
        _int(1),
        500,
        "Most records one poll() returns.",
    ),
    _Option(
        "enable.auto.commit",
        "enable_auto_commit",
        _bool,
        True,
        "Commit the consumed positions in the background every auto.commit.interval.ms "
        "and before partitions are revoked.",
    ),
    _Option(
        "auto.commit.interval.ms",
        "auto_commit_interval_ms",
        _int(0),
        5000,
        "Interval between automatic commits.",
    ),
    _Option(
        "auto.offset.reset",
        "auto_offset_reset",
        _choice(
            {
                "latest": "latest",
                "earliest": "earliest",
                "none": "none",
                "largest": "latest",
                "end": "latest",
                "smallest": "earliest",
                "beginning": "earliest",
                "error": "none",
            }
        ),
        "latest",
        "Where to start without a committed offset (or when it is out of range): "
        "latest, earliest, or none (raise). librdkafka's smallest/largest/beginning/"
        "end/error are accepted.",
    ),
    _Option(
        "isolation.level",
        "isolation_level",
        _choice({"read_uncommitted": "read_uncommitted", "read_committed": "read_committed"}),
        "read_uncommitted",
        "read_committed hides records of aborted and open transactions. The default is "
        "Java's (librdkafka's own default is read_committed).",
    ),
    _Option(
        "socket.timeout.ms",
        "socket_timeout_ms",
        _int(10, 300000),
        60000,
        "Network timeout for socket operations (librdkafka's key and range).",
    ),
    _Option(
        "request.timeout.ms",
        "request_timeout_ms",
        _int(1),
        30000,
        "How long to wait for a response before failing the request and closing the connection.",
    ),
    _Option(
        "socket.connection.setup.timeout.ms",
        "socket_connection_setup_timeout_ms",
        _int(1000),
        10000,
        "Longest time to set up a broker connection (TCP connect and ApiVersions); "
        "Java's default, also given to the fetcher.",
    ),
    _Option(
        "connections.max.idle.ms",
        "connections_max_idle_ms",
        _int(1),
        540000,
        "Close connections idle for this long (Java's default; also given to the fetcher).",
    ),
    _Option(
        "reconnect.backoff.ms",
        "reconnect_backoff_ms",
        _int(0, 3600000),
        100,
        "First delay before reconnecting to a broker; doubles up to the maximum.",
    ),
    _Option(
        "reconnect.backoff.max.ms",
        "reconnect_backoff_max_ms",
        _int(0, 3600000),
        10000,
        "Largest reconnect delay.",
    ),
    _Option(
        "retry.backoff.ms",
        "retry_backoff_ms",
        _int(1, 300000),
        100,
        "First delay before retrying a failed request (KIP-580: grows to the maximum).",
    ),
    _Option(
        "retry.backoff.max.ms",
        "retry_backoff_max_ms",
        _int(1, 300000),
        1000,
        "Largest retry delay.",
    ),
    _Option(
        "metadata.max.age.ms",
        "metadata_max_age_ms",
        _int(1, 3600000),
        300000,
        "Refresh topic metadata at least this often, to notice new partitions and "
        "deleted topics. librdkafka's topic.metadata.refresh.interval.ms is accepted as "
        "another name for it.",
    ),
    _Option(
        "default.api.timeout.ms",
        "default_api_timeout_ms",
        _int(0),
        60000,
        "Timeout of blocking calls (commit, committed, close) given no timeout.",
    ),
    _Option(
        "error_cb",
        "error_cb",
        _callback,
        None,
        "Called from poll()/consume() with a KafkaError for each error librdkafka reports "
        "while reaching the brokers (confluent-kafka's key), e.g. _ALL_BROKERS_DOWN when "
        "no broker can be reached. Without it such errors are logged as warnings on the "
        "'coopconsumer.consumer' logger. An exception it raises is raised from poll().",
        "(none)",
    ),
    _Option(
        "logger",
        "logger",
        _logger,
        None,
        "The logging.Logger that receives librdkafka's log lines (confluent-kafka's key); "
        "by default the 'coopconsumer.librdkafka' logger. librdkafka never writes to "
        "stderr.",
        "coopconsumer.librdkafka",
    ),
)

_BY_KEY = {option.key: option for option in _OPTIONS}

#: Other spellings of our keys: librdkafka's or Java's name -> our key.
_SYNONYMS: dict[str, str] = {
    "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
    "metadata.broker.list": "bootstrap.servers",
}

#: librdkafka consumer keys passed through to the confluent-kafka fetcher unchanged
#: (after type checking), with their accepted values. They tune fetching only.
FETCHER_PASSTHROUGH_KEYS: Mapping[str, Callable[[str, object], ConfigValue]] = {
    "fetch.wait.max.ms": _int(0, 300000),
    "fetch.min.bytes": _int(1, 100000000),
    # librdkafka: fetch.max.bytes >= message.max.bytes (1000000, not configurable here).
    "fetch.max.bytes": _int(1000000, 2147483135),
    "fetch.message.max.bytes": _int(1, 1000000000),
    "max.partition.fetch.bytes": _int(1, 1000000000),
    "fetch.error.backoff.ms": _int(0, 300000),
    "fetch.queue.backoff.ms": _int(0, 300000),
    "queued.min.messages": _int(1, 10000000),
    "queued.max.messages.kbytes": _int(1, 2097151),
    "receive.message.max.bytes": _int(1000, 2147483647),
    "check.crcs": _bool,
    "socket.keepalive.enable": _bool,
    "socket.nagle.disable": _bool,
    "socket.receive.buffer.bytes": _int(0, 100000000),
    "socket.send.buffer.bytes": _int(0, 100000000),
    "broker.address.family": _choice({"any": "any", "v4": "v4", "v6": "v6"}),
    "debug": _str(),
    "log_level": _int(0, 7),
}

#: Java's spelling -> librdkafka's, for pass-through keys a Java config may carry.
_PASSTHROUGH_SYNONYMS: dict[str, str] = {"fetch.max.wait.ms": "fetch.wait.max.ms"}

#: librdkafka keys that would fight the group member: refused with a reason.
_MANAGED: dict[str, str] = {
    "enable.auto.offset.store": "the fetcher never stores offsets; positions are tracked "
    "by coopconsumer",
    "enable.partition.eof": "partition EOF events are not surfaced",
    "group.protocol.type": "coopconsumer implements the classic group protocol itself",
    "partition.assignment.strategy.librdkafka": "use partition.assignment.strategy",
}


def _known_keys() -> list[str]:
    return [
        *_BY_KEY,
        *_SYNONYMS,
        *FETCHER_PASSTHROUGH_KEYS,
        *_PASSTHROUGH_SYNONYMS,
        *SECURITY_KEYS,
        *SECURITY_SYNONYMS,
    ]


def _unknown_key(key: str) -> ConfigurationError:
    known = _known_keys()
    dotted = key.replace("_", ".")
    if dotted in known:
        suggestion = dotted
    else:
        import difflib  # only for the error message; not at import time

        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        suggestion = close[0] if close else ""
    hint = f"; did you mean {suggestion!r}?" if suggestion else ""
    return ConfigurationError(
        f"unknown configuration key {key!r}{hint} (see coopconsumer's configuration "
        f"reference for the supported keys)"
    )


# --------------------------------------------------------------------------- config


def _freeze_pairs(value: Mapping[str, ConfigValue]) -> tuple[tuple[str, ConfigValue], ...]:
    return tuple(sorted(value.items()))


@attrs.frozen(kw_only=True)
class ConnectionConfig:
    """What the wire client needs to reach brokers (milliseconds, Kafka's key names).

    Field names match the wire client's ``ClientConfig`` where both have the setting;
    ``socket_timeout_ms`` is librdkafka's and is given to the fetcher. ``security``
    (TLS and SASL) applies to every connection: the wire client's and librdkafka's.
    """

    bootstrap_servers: BootstrapServers
    client_id: str
    request_timeout_ms: int
    socket_connection_setup_timeout_ms: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    connections_max_idle_ms: int
    socket_timeout_ms: int
    security: SecurityConfig = attrs.field(factory=SecurityConfig)


@attrs.frozen(kw_only=True)
class ConsumerConfig:
    """A validated consumer configuration (build it with :meth:`from_mapping`).

    Times are integers in milliseconds, as in Kafka's keys. ``group_id`` is ``None``
    when not configured (then only manual assignment is possible).
    """

    connection: ConnectionConfig
    group_id: str | None
    group_instance_id: str | None
    client_rack: str | None
    #: ``"classic"`` or ``"consumer"`` (KIP-848).
    group_protocol: str
    #: KIP-848's broker-side assignor (``group.remote.assignor``), None for the default.
    group_remote_assignor: str | None
    #: The raw ``partition.assignment.strategy`` entries (names, import paths, classes
    #: or instances), for ``coopconsumer.assignors.load_assignors``.
    partition_assignment_strategy: tuple[object, ...]
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    max_poll_records: int
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    #: ``"latest"``, ``"earliest"`` or ``"none"`` (librdkafka spellings normalized).
    auto_offset_reset: str
    isolation_level: str
    metadata_max_age_ms: int
    default_api_timeout_ms: int
    #: confluent-kafka's ``error_cb``: called on the poll() thread with each client error.
    error_cb: Callable[..., object] | None
    #: Where librdkafka's log lines go (None: the ``coopconsumer.librdkafka`` logger).
    logger: logging.Logger | None
    #: Validated pass-through librdkafka keys for the fetcher, sorted by key.
    fetcher_overrides: tuple[tuple[str, ConfigValue], ...] = attrs.field(
        default=(), converter=_freeze_pairs
    )

    @property
    def bootstrap_servers(self) -> BootstrapServers:
        """``((host, port), ...)`` in the configured order."""
        return self.connection.bootstrap_servers

    @property
    def client_id(self) -> str:
        """The configured ``client.id``."""
        return self.connection.client_id

    @property
    def security(self) -> SecurityConfig:
        """TLS and SASL settings of every connection."""
        return self.connection.security

    @property
    def security_protocol(self) -> str:
        """``plaintext``, ``ssl``, ``sasl_plaintext`` or ``sasl_ssl``."""
        return self.connection.security.security_protocol

    @classmethod
    def from_mapping(cls, settings: Mapping[str, object]) -> ConsumerConfig:
        """Parse Kafka-style ``settings`` (``{"bootstrap.servers": ..., ...}``).

        Values may be native (``45000``, ``True``) or strings (``"45000"``,
        ``"true"``); ``None`` means "use the default". Raises ``ConfigurationError``
        for an unknown key (suggesting the closest valid one), a missing
        ``bootstrap.servers``, a value of the wrong type or out of range, a key given
        twice under two names, ``heartbeat.interval.ms >= session.timeout.ms``, a
        backoff maximum below its base, assignors that cannot be loaded or share no
        rebalance protocol, or security settings that are unsupported, contradictory
        or incomplete (see ``coopconsumer._security``). Secrets are never quoted.
        """
        if not isinstance(settings, Mapping):
            raise ConfigurationError(
                f"configuration must be a mapping of keys to values, not {type(settings).__name__}"
            )
        values: dict[str, Any] = {}
        given_as: dict[str, str] = {}
        passthrough: dict[str, ConfigValue] = {}
        security: dict[str, object] = {}
        for raw_key, value in settings.items():
            if not isinstance(raw_key, str):
                raise ConfigurationError(f"configuration keys must be strings, not {raw_key!r}")
            key = raw_key.strip()
            if key in _MANAGED:
                raise ConfigurationError(f"{key!r} cannot be set: {_MANAGED[key]}")
            if is_security_key(key):
                security[key] = value  # parse_security checks it with its neighbours
                continue
            canonical = _SYNONYMS.get(key, key)
            lib_key = _PASSTHROUGH_SYNONYMS.get(key, key)
            store: dict[str, Any]
            if canonical in _BY_KEY:
                target, store, parse, what = canonical, values, _BY_KEY[canonical].parse, "option"
            elif lib_key in FETCHER_PASSTHROUGH_KEYS:
                target, store, what = lib_key, passthrough, "fetcher option"
                parse = FETCHER_PASSTHROUGH_KEYS[lib_key]
            else:
                raise _unknown_key(key)
            if value is None:
                continue
            if target in given_as:
                # Name both keys as the user wrote them, whichever came first.
                raise ConfigurationError(
                    f"{given_as[target]!r} and {raw_key!r} set the same {what}; give one"
                )
            given_as[target] = raw_key
            store[target] = parse(key, value)
        _check_passthrough(passthrough)
        _check_group_protocol(values)

        resolved: dict[str, Any] = {}
        for option in _OPTIONS:
            if option.key in values:
                resolved[option.attr] = values[option.key]
            elif option.default is _UNSET:
                raise ConfigurationError(f"{option.key!r} is required: {option.description}")
            elif option.key == "partition.assignment.strategy":
                resolved[option.attr] = _strategy(option.key, option.default)
            else:
                resolved[option.attr] = option.default
        if resolved["client_rack"] == "":
            resolved["client_rack"] = None
        _check_relations(resolved)
        resolved["security"] = parse_security(security)
        for key in ("bootstrap.servers", "metadata.broker.list"):
            if key in settings:
                _check_listener_schemes(settings[key], resolved["security"])

        connection = ConnectionConfig(
            **{field.name: resolved.pop(field.name) for field in attrs.fields(ConnectionConfig)}
        )
        return cls(connection=connection, fetcher_overrides=passthrough, **resolved)

    @property
    def kip848(self) -> bool:
        """``group.protocol=consumer``: the KIP-848 member (the broker assigns, every
        rebalance is incremental), else the classic one. The one reading of the setting
        outside its validation: the rest of the package asks this."""
        return self.group_protocol == "consumer"

    def require_group_id(self) -> str:
        """The ``group.id``; ``ConfigurationError`` if none was configured."""
        if self.group_id is None:
            raise ConfigurationError("'group.id' is required to subscribe() to topics")
        return self.group_id

    def fetcher_config(self) -> dict[str, Any]:
        """The confluent-kafka ``Consumer`` configuration for the record fetcher.

        The fetcher runs in manual-assignment mode: it never joins a group and never
        commits. Auto commit and offset storing are always off here, whatever
        ``enable.auto.commit`` says (that key drives coopconsumer's own commits). The
        security settings are librdkafka's own keys (secrets included, ``oauth_cb`` as
        the callable): do not log this mapping.
        """
        hosts = ",".join(
            f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            for host, port in self.connection.bootstrap_servers
        )
        config: dict[str, Any] = {
            "bootstrap.servers": hosts,
            "group.id": FETCHER_GROUP_ID,
            "client.id": self.connection.client_id,
            **self.connection.security.librdkafka_config(),
            # librdkafka's "error" is Java's "none": an error instead of a reset.
            "auto.offset.reset": "error"
            if self.auto_offset_reset == "none"
            else self.auto_offset_reset,
            "isolation.level": self.isolation_level,
            "socket.timeout.ms": self.connection.socket_timeout_ms,
            "socket.connection.setup.timeout.ms": (
                self.connection.socket_connection_setup_timeout_ms
            ),
            "connections.max.idle.ms": self.connection.connections_max_idle_ms,
            "reconnect.backoff.ms": self.connection.reconnect_backoff_ms,
            "reconnect.backoff.max.ms": self.connection.reconnect_backoff_max_ms,
            "retry.backoff.ms": self.connection.retry_backoff_ms,
            "retry.backoff.max.ms": self.connection.retry_backoff_max_ms,
            "topic.metadata.refresh.interval.ms": self.metadata_max_age_ms,
        }
        if self.client_rack is not None:
            config["client.rack"] = self.client_rack
        config.update(self.fetcher_overrides)
        # Last, so nothing above can turn them back on.
        config.update(
            {
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": False,
            }
        )
        return config


#: librdkafka's default fetch.max.bytes, for the receive.message.max.bytes check.
_LIBRDKAFKA_FETCH_MAX_BYTES = 52428800


def _check_passthrough(passthrough: Mapping[str, ConfigValue]) -> None:
    # Cross-key rules librdkafka enforces when the fetcher is created: checked here so
    # they fail at configuration time with our error type.
    if {"fetch.message.max.bytes", "max.partition.fetch.bytes"} <= passthrough.keys():
        raise ConfigurationError(
            "'fetch.message.max.bytes' and 'max.partition.fetch.bytes' are the same "
            "librdkafka option; give one"
        )
    receive_max = passthrough.get("receive.message.max.bytes")
    if receive_max is not None:
        fetch_max = passthrough.get("fetch.max.bytes", _LIBRDKAFKA_FETCH_MAX_BYTES)
        if int(receive_max) < int(fetch_max) + 512:
            raise ConfigurationError(
                f"'receive.message.max.bytes' ({receive_max}) must be at least "
                f"'fetch.max.bytes' ({fetch_max}) + 512"
            )


def _check_group_protocol(values: Mapping[str, Any]) -> None:
    consumer = values.get("group.protocol") == "consumer"
    if consumer and "partition.assignment.strategy" in values:
        raise ConfigurationError(
            "'partition.assignment.strategy' cannot be set with group.protocol=consumer: "
            "with KIP-848 the broker assigns partitions; choose its assignor with "
            "'group.remote.assignor' (uniform or range) or leave it to the broker"
        )
    if not consumer and "group.remote.assignor" in values:
        raise ConfigurationError(
            "'group.remote.assignor' only applies to group.protocol=consumer (KIP-848); "
            "the classic protocol's assignors are 'partition.assignment.strategy'"
        )


def _check_relations(resolved: Mapping[str, Any]) -> None:
    if resolved["heartbeat_interval_ms"] >= resolved["session_timeout_ms"]:
        raise ConfigurationError(
            f"'heartbeat.interval.ms' ({resolved['heartbeat_interval_ms']}) must be lower "
            f"than 'session.timeout.ms' ({resolved['session_timeout_ms']}); a third of it "
            f"is usual"
        )
    for base, top in (
        ("reconnect_backoff_ms", "reconnect_backoff_max_ms"),
        ("retry_backoff_ms", "retry_backoff_max_ms"),
    ):
        if resolved[top] < resolved[base]:
            raise ConfigurationError(
                f"{_key_of(top)!r} ({resolved[top]}) must not be lower than "
                f"{_key_of(base)!r} ({resolved[base]})"
            )


def _key_of(attr: str) -> str:
    return next(option.key for option in _OPTIONS if option.attr == attr)


def documented_keys() -> tuple[ConfigKey, ...]:
    """Every accepted key with its default and description, for the docs."""
    rows = [
        ConfigKey(
            option.key,
            option.shown_default if option.shown_default is not None else _show(option.default),
            option.description,
        )
        for option in _OPTIONS
    ]
    rows.extend(
        ConfigKey(
            alias,
            f"see {target}",
            f"Another name for {target} (librdkafka's).",
        )
        for alias, target in _SYNONYMS.items()
    )
    rows.extend(
        ConfigKey(
            key,
            "(none)" if spec.default in (None, ()) else _show(spec.default),
            spec.description,
        )
        for key, spec in SECURITY_KEYS.items()
    )
    rows.extend(
        ConfigKey(alias, f"see {target}", f"Another name for {target} (librdkafka's).")
        for alias, target in SECURITY_SYNONYMS.items()
    )
    rows.extend(
        ConfigKey(
            key,
            "librdkafka's default",
            "Passed through to the confluent-kafka fetcher (librdkafka consumer "
            "property of the same name).",
        )
        for key in FETCHER_PASSTHROUGH_KEYS
    )
    rows.extend(
        ConfigKey(java, f"see {lib}", f"Java's name for {lib}; passed to the fetcher.")
        for java, lib in _PASSTHROUGH_SYNONYMS.items()
    )
    return tuple(rows)


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
