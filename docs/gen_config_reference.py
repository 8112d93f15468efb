"""Generate docs/configuration.md from the code that parses the configuration.

Every row comes from ``coopconsumer._config.documented_keys()``. The "Allowed values"
column and the cross-key rules are not written by hand either: each key is fed a value
no parser accepts, and each cross-key rule a combination that breaks it, and the
``ConfigurationError`` the real parser raises is quoted. When the code changes, the
reference changes with it; tests/test_docs.py fails while the committed file is stale.

Usage::

    python docs/gen_config_reference.py          # rewrite docs/configuration.md
    python docs/gen_config_reference.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from coopconsumer import ConfigurationError
from coopconsumer._config import FETCHER_PASSTHROUGH_KEYS, ConsumerConfig, documented_keys
from coopconsumer._io._fetcher import _FETCH_QUEUE_BACKOFF_MS
from coopconsumer._security import SECURITY_KEYS
from coopconsumer.assignors import (
    ClusterMetadata,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupSubscription,
    RebalanceProtocol,
)

OUTPUT = Path(__file__).resolve().with_name("configuration.md")

#: Fetcher keys whose default is coopconsumer's, not librdkafka's. documented_keys()
#: does not know them (the fetcher sets them), so they are read from the fetcher here:
#: a renamed constant fails this script, and with it tests/test_docs.py.
_FETCHER_DEFAULTS = {
    "fetch.queue.backoff.ms": f"{_FETCH_QUEUE_BACKOFF_MS} (librdkafka's is 1000)",
}

#: A mapping that satisfies the required keys, so one key at a time can be probed.
_BASE: dict[str, object] = {"bootstrap.servers": "localhost:9092", "group.id": "docs"}


class _CooperativeOnly(ConsumerPartitionAssignor):
    """An assignor without EAGER support, to show the no-common-protocol error."""

    name = "cooperative-only"

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE]

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        raise NotImplementedError("never called: only loaded to show a configuration error")


#: Cross-key rules, each as (what the rule says, settings that break it).
_RELATIONS: tuple[tuple[str, dict[str, object]], ...] = (
    (
        "heartbeat.interval.ms must be lower than session.timeout.ms",
        {"session.timeout.ms": 3000, "heartbeat.interval.ms": 3000},
    ),
    (
        "reconnect.backoff.max.ms must not be lower than reconnect.backoff.ms",
        {"reconnect.backoff.ms": 500, "reconnect.backoff.max.ms": 100},
    ),
    (
        "retry.backoff.max.ms must not be lower than retry.backoff.ms",
        {"retry.backoff.ms": 500, "retry.backoff.max.ms": 100},
    ),
    (
        "a key and its other name cannot both be given",
        {"metadata.max.age.ms": 1000, "topic.metadata.refresh.interval.ms": 1000},
    ),
    (
        "fetch.message.max.bytes and max.partition.fetch.bytes are one librdkafka option",
        {"fetch.message.max.bytes": 1048576, "max.partition.fetch.bytes": 1048576},
    ),
    (
        "receive.message.max.bytes must be at least fetch.max.bytes + 512",
        {"fetch.max.bytes": 2000000, "receive.message.max.bytes": 2000000},
    ),
    (
        "the assignors must share a rebalance protocol (KIP-429)",
        {"partition.assignment.strategy": [_CooperativeOnly, "range"]},
    ),
    (
        "TLS settings need security.protocol ssl or sasl_ssl",
        {"ssl.ca.location": "ca.pem"},
    ),
    (
        "SASL settings need security.protocol sasl_plaintext or sasl_ssl",
        {"security.protocol": "ssl", "sasl.username": "alice"},
    ),
    (
        "a SASL protocol needs a supported sasl.mechanism (GSSAPI is not)",
        {"security.protocol": "sasl_ssl"},
    ),
    (
        "PLAIN and SCRAM need sasl.username and sasl.password",
        {"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "a"},
    ),
    (
        "OAUTHBEARER needs oauth_cb or sasl.oauthbearer.method=oidc",
        {"security.protocol": "sasl_ssl", "sasl.mechanism": "OAUTHBEARER"},
    ),
    (
        "oauth_cb and sasl.oauthbearer.method=oidc exclude each other",
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": print,
            "sasl.oauthbearer.method": "oidc",
        },
    ),
    (
        "OIDC needs the client id, secret and token endpoint",
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
        },
    ),
    (
        "a client certificate needs its key (and the key its certificate)",
        {"security.protocol": "ssl", "ssl.certificate.location": "client.pem"},
    ),
    (
        "a file and PEM text for the same item exclude each other",
        {
            "security.protocol": "ssl",
            "ssl.ca.location": "ca.pem",
            "ssl.ca.pem": "-----BEGIN CERTIFICATE-----",
        },
    ),
)

#: librdkafka keys the consumer manages itself; the parser refuses them with a reason.
_REFUSED = (
    "enable.auto.offset.store",
    "enable.partition.eof",
    "group.protocol",
    "group.remote.assignor",
    "sasl.jaas.config",
    "ssl.truststore.location",
    "ssl.keystore.location",
    "sasl.kerberos.service.name",
    "enable.sasl.oauthbearer.unsecure.jwt",
)


class _Unacceptable:
    """A value of a type no configuration parser accepts."""

    def __repr__(self) -> str:
        return "<unacceptable>"


def _error(settings: Mapping[str, object]) -> str | None:
    try:
        ConsumerConfig.from_mapping(settings)
    except ConfigurationError as exc:
        return str(exc)
    return None


def _allowed_from(message: str | None) -> str:
    if message is None:
        return "any value"
    for marker in (": expected ", "; expected "):
        _, sep, allowed = message.partition(marker)
        if sep:
            return allowed
    # Messages that do not follow the "invalid value ...: expected X" form (a custom
    # refusal) are quoted after the key name.
    return message.split(": ", 1)[-1] if ": " in message else message


def allowed_values(key: str) -> str:
    """What the parser says it accepts for ``key``, from the error it raises."""
    probe = _Unacceptable()
    if key in FETCHER_PASSTHROUGH_KEYS:
        try:
            FETCHER_PASSTHROUGH_KEYS[key](key, probe)
        except ConfigurationError as exc:
            return _allowed_from(str(exc))
        return "any value"
    settings = dict(_BASE)
    settings[key] = probe
    return _allowed_from(_error(settings))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return lines


def render() -> str:
    """The full text of docs/configuration.md."""
    keys = documented_keys()
    own: list[list[str]] = []
    security: list[list[str]] = []
    aliases: list[list[str]] = []
    passthrough: list[list[str]] = []
    for row in keys:
        if row.key in FETCHER_PASSTHROUGH_KEYS:
            default = _FETCHER_DEFAULTS.get(row.key, "librdkafka's")
            passthrough.append([f"`{row.key}`", default, allowed_values(row.key), row.description])
        elif row.default.startswith("see "):
            target = row.default[len("see ") :]
            aliases.append([f"`{row.key}`", f"`{target}`", row.description])
        else:
            default = row.default if row.default.startswith("(") else f"`{row.default}`"
            table = security if row.key in SECURITY_KEYS else own
            table.append([f"`{row.key}`", default, allowed_values(row.key), row.description])

    relations: list[list[str]] = []
    for rule, broken in _RELATIONS:
        message = _error({**_BASE, **broken})
        if message is None:
            raise SystemExit(f"cross-key rule no longer enforced, update this script: {rule}")
        relations.append([rule, message])

    refused: list[list[str]] = []
    for key in _REFUSED:
        message = _error({**_BASE, key: "x"})
        if message is None:
            raise SystemExit(f"{key!r} is accepted now, update this script")
        refused.append([f"`{key}`", message])

    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by docs/gen_config_reference.py from coopconsumer's config parser. -->",
        "<!-- Do not edit by hand: run `python docs/gen_config_reference.py`. -->",
        "",
        "`Consumer(config)` takes a mapping of Kafka-style keys. Values may be native",
        '(`45000`, `True`) or strings (`"45000"`, `"true"`); `None` means "use the default".',
        "Everything is checked when the `Consumer` is built, before any thread or socket",
        "starts: an unknown key, a bad value or a broken rule between keys raises",
        "`coopconsumer.ConfigurationError` naming the key, the value and what is allowed",
        "(for an unknown key it suggests the closest valid one). Times are milliseconds.",
        "",
        "The *Allowed values* column quotes the parser's own error messages.",
        "",
        "## Consumer keys",
        "",
        *_table(["Key", "Default", "Allowed values", "Description"], own),
        "",
        "## Security keys (TLS and SASL)",
        "",
        "librdkafka's names and defaults. One setting secures every connection: the group",
        "member's own, the librdkafka fetcher's (the keys are passed to it) and, given the",
        "same keys, `KafkaWriter`'s producer. Secrets are never shown in errors, logs or",
        "`repr`. See [security.md](security.md) for ready-made configurations.",
        "",
        *_table(["Key", "Default", "Allowed values", "Description"], security),
        "",
        "## Other names for the same keys",
        "",
        "Accepted so that configurations written for librdkafka or Java work unchanged.",
        "",
        *_table(["Key", "Same as", "Description"], aliases),
        "",
        "## Fetcher keys (passed to librdkafka)",
        "",
        "Records are fetched by a confluent-kafka consumer in manual-assignment mode. These",
        "librdkafka properties tune that fetcher only; they are type- and range-checked here",
        "and passed through unchanged. When not given, librdkafka's default applies, except",
        "where the *Default* column gives coopconsumer's own.",
        "",
        *_table(["Key", "Default", "Allowed values", "Description"], passthrough),
        "",
        "## Rules between keys",
        "",
        *_table(["Rule", "Error raised when broken (example)"], relations),
        "",
        "## Keys that are refused",
        "",
        "Settings that would fight coopconsumer's own group member, and security settings of",
        "Java clients or of librdkafka features not supported here, raise",
        "`ConfigurationError` (naming what to use instead):",
        "",
        *_table(["Key", "Error"], refused),
        "",
    ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the reference, or with ``--check`` report whether it is up to date."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is out of date: run python docs/gen_config_reference.py")
            return 1
        print(f"{OUTPUT} is up to date")
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
