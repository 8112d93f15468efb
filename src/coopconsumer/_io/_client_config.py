"""``ClientConfig``: the settings of a ``KafkaClient``, checked at construction.

The bootstrap servers (``"h1:9092,h2:9092"``, listener-style ``SASL_SSL://h:9093`` or
``(host, port)`` pairs), the timeouts and backoffs with Kafka's names, and the
``SecurityConfig`` every connection is secured with.

Imports the standard library, attrs, ``_errors``, the security settings and the
connection's frame limit; opens nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from .._errors import ConfigurationError
from .._security import SecurityConfig
from ._connection import DEFAULT_MAX_RESPONSE_BYTES

__all__ = ["ClientConfig"]


def _parse_server(text: str) -> tuple[str, int]:
    item = text.strip()
    if "://" in item:
        # Listener-style "SASL_SSL://host:port": the scheme is informative only, how
        # connections are secured is ClientConfig.security (ConsumerConfig checks that
        # the two agree).
        scheme, _, item = item.partition("://")
        if scheme.upper() not in ("PLAINTEXT", "TCP", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ConfigurationError(
                f"bootstrap server {text!r}: unknown listener scheme {scheme!r}"
            )
    host, sep, port_text = item.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit():
        raise ConfigurationError(f"bootstrap server {text!r} is not 'host:port'")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ConfigurationError(f"bootstrap server {text!r}: port {port} out of range")
    return host, port


def _to_servers(value: object) -> tuple[tuple[str, int], ...]:
    """Converter: accept ``"h1:1,h2:2"``, an iterable of strings or of (host, port)."""
    if isinstance(value, str):
        items: list[object] = [part for part in value.split(",") if part.strip()]
    elif isinstance(value, Iterable):
        items = list(value)
    else:
        raise ConfigurationError(f"bootstrap_servers must be a string or a sequence: {value!r}")
    servers: list[tuple[str, int]] = []
    for item in items:
        if isinstance(item, str):
            servers.append(_parse_server(item))
        elif (
            isinstance(item, tuple)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], int)
            and not isinstance(item[1], bool)
        ):
            servers.append(_parse_server(f"{item[0]}:{item[1]}"))
        else:
            raise ConfigurationError(f"bootstrap server {item!r} is not 'host:port'")
    return tuple(servers)


@attrs.frozen(kw_only=True)
class ClientConfig:
    """Settings of a ``KafkaClient``. Frozen; change with ``attrs.evolve``.

    Durations are milliseconds, named as Kafka names them (librdkafka's
    ``socket.timeout.ms`` maps onto ``request_timeout_ms``). Invalid values raise
    ``ConfigurationError`` at construction.
    """

    #: ``(host, port)`` pairs tried in order to learn the cluster.
    bootstrap_servers: tuple[tuple[str, int], ...] = attrs.field(converter=_to_servers)
    #: Sent in every request header; brokers log and quota by it.
    client_id: str = "coopconsumer"
    #: Default per-request timeout, counted from ``send`` (queueing included).
    request_timeout_ms: int = 30_000
    #: TCP connect plus ApiVersions handshake (``socket.connection.setup.timeout.ms``).
    socket_connection_setup_timeout_ms: int = 10_000
    #: First reconnect delay after a connection failure (``reconnect.backoff.ms``).
    reconnect_backoff_ms: int = 100
    #: Cap of the exponential reconnect delay (``reconnect.backoff.max.ms``).
    reconnect_backoff_max_ms: int = 10_000
    #: First delay before retrying a retriable answer (``retry.backoff.ms``).
    retry_backoff_ms: int = 100
    #: Cap of the exponential retry delay (``retry.backoff.max.ms``).
    retry_backoff_max_ms: int = 1_000
    #: Idle connections are closed after this long (``connections.max.idle.ms``).
    connections_max_idle_ms: int = 540_000
    #: Largest response frame accepted (``receive.message.max.bytes``).
    receive_message_max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    #: TLS and SASL for every connection (``security.protocol``, ``ssl.*``, ``sasl.*``).
    security: SecurityConfig = attrs.field(factory=SecurityConfig)

    def __attrs_post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ConfigurationError("bootstrap_servers is empty")
        if not isinstance(self.client_id, str):
            raise ConfigurationError(f"client_id must be a string: {self.client_id!r}")
        positive = {
            "request_timeout_ms": self.request_timeout_ms,
            "socket_connection_setup_timeout_ms": self.socket_connection_setup_timeout_ms,
            "connections_max_idle_ms": self.connections_max_idle_ms,
            "receive_message_max_bytes": self.receive_message_max_bytes,
        }
        non_negative = {
            "reconnect_backoff_ms": self.reconnect_backoff_ms,
            "reconnect_backoff_max_ms": self.reconnect_backoff_max_ms,
            "retry_backoff_ms": self.retry_backoff_ms,
            "retry_backoff_max_ms": self.retry_backoff_max_ms,
        }
        for name, value in {**positive, **non_negative}.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigurationError(f"{name} must be an int, got {value!r}")
        for name, value in positive.items():
            if value <= 0:
                raise ConfigurationError(f"{name} must be > 0, got {value}")
        for name, value in non_negative.items():
            if value < 0:
                raise ConfigurationError(f"{name} must be >= 0, got {value}")
        if not isinstance(self.security, SecurityConfig):
            raise ConfigurationError(
                f"security must be a SecurityConfig, not {type(self.security).__name__}"
            )
        if self.receive_message_max_bytes < 16:
            raise ConfigurationError(
                f"receive_message_max_bytes must be >= 16, got {self.receive_message_max_bytes}"
            )

    @classmethod
    def from_bootstrap(cls, servers: str | Iterable[str], **kwargs: Any) -> ClientConfig:
        """Build from ``"h1:9092,h2:9092"`` (or a list of ``"host:port"``) plus fields.

        Unknown keyword arguments raise ``ConfigurationError``.
        """
        known = {f.name for f in attrs.fields(cls)} - {"bootstrap_servers"}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ConfigurationError(f"unknown client settings: {', '.join(unknown)}")
        return cls(bootstrap_servers=_to_servers(servers), **kwargs)
