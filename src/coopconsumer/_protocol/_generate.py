"""Generate the message modules from Kafka's JSON message specs (issue 31).

    python -m coopconsumer._protocol._generate --jar PATH/kafka-clients-4.4.0.jar
    python -m coopconsumer._protocol._generate --jar PATH --check   # exit 1 when stale

Reads ``common/message/<Name>.json`` out of the ``kafka-clients`` jar (nothing is
copied into the repository) and writes ``messages.py`` and ``admin_messages.py`` beside
this file: one frozen attrs class per message covering all its versions, one per
nested struct, fields in wire order with the spec's ``versions``, ``nullableVersions``,
``taggedVersions`` and ``tag`` spelled as in the spec (STYLE.md section 3). franz-go's
``kmsg`` is generated the same way.

What the specs do not say is written here, in the tables below, each entry with its
reason: the versions *we* support (``Api.versions``, may be narrower than the spec's
``validVersions``; ``_session`` negotiates within them), class names where ours predate
the generator, one field name, fields the newer specs dropped for versions we still
speak, defaults that differ from Kafka's, and the repr of secrets. Requests whose data
moved between fields across versions convert in ``_shapes``, above the generated
modules, which never import it. A field is generated when its
versions meet ours; a table entry that matches nothing fails the generation.

``tests/protocol/test_generated_messages.py`` regenerates from the jar that
``coopconsumer.testing.kafka_distribution()`` resolves and asserts the committed modules
are byte-identical. Standard library only; not imported at run time.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["MODULES", "generate", "main", "read_specs"]

#: The Kafka release whose ``kafka-clients`` jar the committed modules come from.
SPEC_VERSION = "4.4.0"

_LINE = 100
_HERE = Path(__file__).resolve().parent


class Api(NamedTuple):
    """One API: its spec name without Request/Response and the versions we speak."""

    name: str
    versions: str
    request_doc: str = ""
    response_doc: str = ""


class Module(NamedTuple):
    """One generated module: what it declares and the hand-written text around it."""

    filename: str
    docstring: str
    imports: str
    apis: tuple[Api, ...]
    registry: str
    trailer: str
    exports: tuple[str, ...]


# ------------------------------------------------------------------ what the specs do not say

#: Nested struct names that predate the generator (ours are prefixed where the spec's
#: name is generic); every other struct keeps the spec's name.
STRUCT_NAMES: Mapping[tuple[str, str], str] = {
    ("ApiVersionsResponse", "ApiVersion"): "ApiVersionsResponseApiVersion",
    ("ApiVersionsResponse", "SupportedFeatureKey"): "ApiVersionsResponseSupportedFeatureKey",
    ("ApiVersionsResponse", "FinalizedFeatureKey"): "ApiVersionsResponseFinalizedFeatureKey",
    ("FindCoordinatorResponse", "Coordinator"): "FindCoordinatorResponseCoordinator",
    ("ElectLeadersRequest", "TopicPartitions"): "ElectionTopicPartitions",
    ("ElectLeadersResponse", "PartitionResult"): "ElectionPartitionResult",
}

#: Field names that differ from the spec's in snake_case. OffsetCommit's
#: ``GenerationIdOrMemberEpoch`` (renamed for KIP-848) keeps its classic name: in the
#: classic protocol it is the generation, and the KIP-848 member passes its epoch.
FIELD_NAMES: Mapping[tuple[str, str], str] = {
    ("OffsetCommitRequest", "GenerationIdOrMemberEpoch"): "generation_id",
}

#: Fields Kafka 4.x's specs dropped with the versions KIP-896 removed, which we still
#: speak to older brokers: (message, struct or message holding it, the field it follows
#: or None for the first) -> the field as Kafka 3.9's spec declared it.
OLD_FIELDS: Mapping[tuple[str, str, str | None], Mapping[str, Any]] = {
    # DescribeConfigs v0 (removed in 4.0): a default value is flagged, not sourced.
    ("DescribeConfigsResponse", "DescribeConfigsResourceResult", "ReadOnly"): {
        "name": "IsDefault",
        "type": "bool",
        "versions": "0",
        "about": "True if the configuration is not set.",
    },
}

#: Defaults that differ from Kafka's (the spec's ``default``, else zero, empty or
#: ``""``), as the hand-written classes had them; Python expressions. Besides these, a
#: field nullable in every version it exists defaults to None: absent means absent
#: (DescribeConfigs' ``configuration_keys`` None asks for every key).
DEFAULTS: Mapping[tuple[str, str], str] = {
    # A consumer's replica id: Java's ListOffsetsRequest.CONSUMER_REPLICA_ID.
    ("ListOffsetsRequest", "ReplicaId"): "-1",
    # No committed offset (Java's OffsetFetchResponse.INVALID_OFFSET).
    ("OffsetFetchResponsePartition", "CommittedOffset"): "-1",
    ("OffsetFetchResponsePartitions", "CommittedOffset"): "-1",
    # The broker's defaults (KIP-464, v4+): what a topic without explicit values asks.
    ("CreatableTopic", "NumPartitions"): "-1",
    ("CreatableTopic", "ReplicationFactor"): "-1",
    # Kafka's "" where the spec allows null from the start: what Java sends.
    ("OffsetCommitRequestPartition", "CommittedMetadata"): '""',
    ("OffsetFetchResponsePartitions", "Metadata"): '""',
    ("OffsetFetchResponsePartition", "Metadata"): '""',
    # Null would ask for every topic of the group; a caller names them.
    ("OffsetFetchRequestGroup", "Topics"): "()",
    ("CreatableTopicResult", "Configs"): "()",
}

#: Fields whose repr must not show their value (credentials).
REDACTED: frozenset[tuple[str, str]] = frozenset(
    {
        ("SaslAuthenticateRequest", "AuthBytes"),
        ("SaslAuthenticateResponse", "AuthBytes"),
        ("ScramCredentialUpsertion", "SaltedPassword"),
    }
)

_MESSAGES_DOC = """\
Kafka request and response messages, one class per message covering all versions.

Generated by ``python -m coopconsumer._protocol._generate`` from the JSON message specs
in Kafka {spec}'s ``kafka-clients`` jar; do not edit (tables and reasons in
``_generate``). Field order is wire order, names are the spec's in snake_case,
``versions``/``nullableVersions``/``taggedVersions`` are spelled as in the spec.
``MIN_VERSION``/``MAX_VERSION`` are the versions *we* support, which may be narrower
than the spec's ``validVersions``; a field outside them is not declared.

Imports only the standard library, attrs and the ``_protocol`` siblings.
"""

_ADMIN_DOC = """\
Kafka admin API messages, one class per message covering all its versions.

Generated by ``python -m coopconsumer._protocol._generate`` like ``messages``, from
Kafka {spec}'s JSON message specs; do not edit. Nested struct classes carry the spec's
struct names (``CreatableTopic``, ``ReassignableTopic``...), unique across these
messages. DeleteTopics is built with ``topic_names`` or ``topics`` and converted to the
negotiated version's shape (``_shapes.for_version``).

``ADMIN_REQUESTS``/``ADMIN_RESPONSES`` list them by API key; ``REQUESTS_BY_KEY`` is
the union with the consumer messages, for code that decodes any request (test
brokers).

Imports only the standard library, attrs and the ``_protocol`` siblings.
"""

_MESSAGES_IMPORTS = """\
import uuid

import attrs

from ._schema import ZERO_UUID, Request, Response, Struct, kf{redacted}

#: Kafka's "no authorized operations reported" sentinel (INT32_MIN).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
"""

_ADMIN_IMPORTS = """\
import uuid

import attrs

from ._schema import ZERO_UUID, Request, Response, Struct, kf{redacted}
from .messages import ALL_REQUESTS

#: Kafka's "no authorized operations reported" sentinel (INT32_MIN).
CLUSTER_AUTHORIZED_OPERATIONS_OMITTED = -2147483648
"""

#: The registries at the end of a module: {name} ALL or ADMIN, {what} "" or "admin ".
_REGISTRY = """\
#: Every {what}request class declared here, by API key.
{name}_REQUESTS: dict[int, type[Request]] = {{
    cls.API_KEY: cls
    for cls in (
{requests}
    )
}}

#: Every {what}response class declared here, by API key.
{name}_RESPONSES: dict[int, type[Response]] = {{
    key: cls.RESPONSE_TYPE for key, cls in {name}_REQUESTS.items()
}}
"""

_ADMIN_TRAILER = """\

#: The consumer and admin requests together, for decoders of any request.
REQUESTS_BY_KEY: dict[int, type[Request]] = {**ALL_REQUESTS, **ADMIN_REQUESTS}
"""

_MESSAGE_APIS = (
    # Spec 0-5: v4 has v3's schema and only lets a broker report a feature MinVersion
    # of 0 (KAFKA-17011); v5 is a newer broker's. The session asks v3 first (KIP-511).
    Api(
        "ApiVersions",
        "0-3",
        request_doc="v3+ names the client software (KIP-511).",
        response_doc=(
            "Its response header is always v0, even at flexible versions: a client must parse it "
            "before it knows the broker's versions."
        ),
    ),
    # Spec 0-13: v13 only adds a top-level ErrorCode for KIP-1102 re-bootstrap; 0-12
    # covers Kafka 2.x..4.x brokers.
    Api(
        "Metadata",
        "0-12",
        request_doc=(
            "``topics=None`` (v1+) asks for every topic; an empty tuple asks for none (brokers "
            "only)."
        ),
        response_doc="",
    ),
    Api(
        "FindCoordinator",
        "0-6",
        request_doc=(
            "Up to v3 one ``key``; v4+ a batch of ``coordinator_keys`` (KIP-699). ``key_type`` 0 = "
            "group, 1 = transaction."
        ),
        response_doc="",
    ),
    Api(
        "JoinGroup",
        "0-9",
        request_doc=(
            "v4+: a new member first gets MEMBER_ID_REQUIRED and rejoins with the id (KIP-394); v5+"
            " static membership (KIP-345); v8+ reason (KIP-800)."
        ),
        response_doc=(
            "v7+ echoes the protocol type (KIP-559); v9 adds ``skip_assignment`` (KIP-814)."
        ),
    ),
    Api(
        "SyncGroup",
        "0-5",
        request_doc="v5+ carries protocol type and name (KIP-559).",
        response_doc="",
    ),
    Api(
        "Heartbeat",
        "0-4",
        request_doc="",
        response_doc="",
    ),
    Api(
        "LeaveGroup",
        "0-5",
        request_doc="Up to v2 one ``member_id``; v3+ ``members``.",
        response_doc="",
    ),
    # Spec 2-10 (0-1 removed in Kafka 4.0): v10 names topics by id (KIP-848).
    Api(
        "OffsetCommit",
        "2-9",
        request_doc=(
            "Kafka 4.0 removed v0-1; we support 2-9.\n\n"
            "``generation_id`` is the spec's ``GenerationIdOrMemberEpoch`` (called ``GenerationId``"
            " before KIP-848)."
        ),
        response_doc="",
    ),
    # Spec 1-10 (0 removed in 4.0): v10 names topics by id.
    Api(
        "OffsetFetch",
        "1-9",
        request_doc=(
            "v1-7: one ``group_id`` and ``topics`` (None = all, v2+); v8+: ``groups``. v7+ "
            "``require_stable`` (KIP-447)."
        ),
        response_doc="v1-7: ``topics`` and (v2+) a top-level ``error_code``; v8+: ``groups``.",
    ),
    # Spec 0-6: v6 adds a per-group ErrorMessage.
    Api(
        "DescribeGroups",
        "0-5",
        request_doc="",
        response_doc="",
    ),
    Api(
        "ListGroups",
        "0-5",
        request_doc="v4+ filters by state (KIP-518), v5+ by type (KIP-848).",
        response_doc="",
    ),
    # Spec 1-11 (0 removed in 4.0): v10 adds TimeoutMs, v11 early-tiered offsets.
    Api(
        "ListOffsets",
        "1-9",
        request_doc=(
            "``replica_id`` -1 for consumers; ``isolation_level`` 0 = read_uncommitted, 1 = "
            "read_committed (v2+)."
        ),
        response_doc="",
    ),
    Api(
        "SaslHandshake",
        "0-1",
        request_doc=(
            "v1 means SaslAuthenticate requests follow (v0's raw, unframed SASL tokens are not "
            "spoken)."
        ),
        response_doc="SaslHandshakeResponse (key 17): the mechanisms the broker enables.",
    ),
    Api(
        "SaslAuthenticate",
        "0-2",
        request_doc="SaslAuthenticateRequest (key 36): one SASL message from the client.",
        response_doc=(
            "v1+ ``session_lifetime_ms``: re-authenticate before it runs out (KIP-368); 0 means no "
            "limit."
        ),
    ),
    Api(
        "AlterUserScramCredentials",
        "0-0",
        request_doc="AlterUserScramCredentialsRequest (key 51, KIP-554).",
        response_doc="",
    ),
)

# Kafka 4.0 removed CreateTopics 0-1, DeleteTopics 0, DescribeConfigs 0,
# AlterReplicaLogDirs 0 and DescribeLogDirs 0 (KIP-896); we keep them for 2.x/3.x
# brokers. Their fields are still in the specs, but DescribeConfigs' IsDefault
# (OLD_FIELDS).
_ADMIN_APIS = (
    Api(
        "CreateTopics",
        "0-7",
        request_doc=(
            "v1+ ``validate_only``; v4+ -1 means the broker default for partitions/replication "
            "factor (KIP-464); v5 flexible."
        ),
        response_doc="",
    ),
    Api(
        "DeleteTopics",
        "0-6",
        request_doc=(
            "Give ``topic_names`` or ``topics``; the request is converted to the negotiated "
            "version's shape (see the module docstring)."
        ),
        response_doc="",
    ),
    Api(
        "DescribeConfigs",
        "0-4",
        request_doc="",
        response_doc="",
    ),
    Api(
        "AlterReplicaLogDirs",
        "0-2",
        request_doc=(
            "AlterReplicaLogDirsRequest (key 34, KIP-113): sent to the broker that hosts the "
            "replicas. v1 is v0; v2 is flexible."
        ),
        response_doc="",
    ),
    Api(
        "DescribeLogDirs",
        "0-4",
        request_doc="``topics=None`` asks for every partition the broker hosts.",
        response_doc="v3+ has a top-level error code.",
    ),
    Api(
        "CreatePartitions",
        "0-3",
        request_doc="",
        response_doc="",
    ),
    Api(
        "ElectLeaders",
        "0-2",
        request_doc=(
            "``election_type`` 0 = preferred, 1 = unclean (v1+, KIP-460); ``topic_partitions=None``"
            " means every partition."
        ),
        response_doc="v1+ has a top-level error code.",
    ),
    Api(
        "IncrementalAlterConfigs",
        "0-1",
        request_doc="IncrementalAlterConfigsRequest (key 44, KIP-339).",
        response_doc="",
    ),
    Api(
        "AlterPartitionReassignments",
        "0-0",
        request_doc="AlterPartitionReassignmentsRequest (key 45, KIP-455).",
        response_doc="",
    ),
    Api(
        "ListPartitionReassignments",
        "0-0",
        request_doc=(
            "ListPartitionReassignmentsRequest (key 46); ``topics=None`` lists every ongoing "
            "reassignment."
        ),
        response_doc="",
    ),
    Api(
        "DescribeCluster",
        "0-2",
        request_doc=(
            "DescribeClusterRequest (key 60, KIP-700). v1 adds ``endpoint_type`` (KIP-919): 1 = "
            "brokers, 2 = controllers; v2 ``include_fenced_brokers`` (KIP-1073, Kafka 4.0)."
        ),
        response_doc="",
    ),
)

#: The generated modules.
MODULES = (
    Module(
        "messages.py",
        _MESSAGES_DOC,
        _MESSAGES_IMPORTS,
        _MESSAGE_APIS,
        "ALL",
        "",
        ("ALL_REQUESTS", "ALL_RESPONSES"),
    ),
    Module(
        "admin_messages.py",
        _ADMIN_DOC,
        _ADMIN_IMPORTS,
        _ADMIN_APIS,
        "ADMIN",
        _ADMIN_TRAILER,
        (
            "ADMIN_REQUESTS",
            "ADMIN_RESPONSES",
            "CLUSTER_AUTHORIZED_OPERATIONS_OMITTED",
            "REQUESTS_BY_KEY",
        ),
    ),
)

# ------------------------------------------------------------------ reading the specs


def read_specs(jar: Path) -> dict[str, dict[str, Any]]:
    """Every ``common/message/*.json`` in ``jar``, by message name (comments dropped)."""
    specs: dict[str, dict[str, Any]] = {}
    with zipfile.ZipFile(jar) as archive:
        for info in archive.infolist():
            match = re.fullmatch(r"common/message/(\w+)\.json", info.filename)
            if match is None:
                continue
            text = archive.read(info).decode()
            text = re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)
            specs[match.group(1)] = json.loads(text)
    if not specs:
        raise SystemExit(f"{jar}: no common/message/*.json (not a kafka-clients jar?)")
    return specs


class _Range(NamedTuple):
    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str) -> _Range | None:
        text = text.strip()
        if text == "none":
            return None
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def meets(self, other: _Range) -> bool:
        return (self.high is None or self.high >= other.low) and (
            other.high is None or other.high >= self.low
        )


# ------------------------------------------------------------------ writing Python

_PY_TYPES = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "int64": "int",
    "float64": "float",
    "string": "str",
    "bytes": "bytes",
    "records": "bytes",
    "uuid": "uuid.UUID",
}
_ZEROS = {
    "bool": "False",
    "float64": "0.0",
    "string": '""',
    "bytes": 'b""',
    "records": "None",
    "uuid": "ZERO_UUID",
}


def snake(name: str) -> str:
    """``GenerationIdOrMemberEpoch`` -> ``generation_id_or_member_epoch``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _docstring(text: str, indent: str) -> list[str]:
    width = _LINE - len(indent)
    paragraphs = [textwrap.wrap(p, width - 3) for p in text.split("\n\n")]
    if len(paragraphs) == 1 and len(paragraphs[0]) == 1 and len(text) + 6 > width:
        paragraphs = [textwrap.wrap(text, width - 7)]  # ruff joins a one-line docstring
    lines: list[str] = []
    for i, para in enumerate(paragraphs):
        if i:
            lines.append("")
        lines.extend(para)
    if len(lines) == 1 and len(lines[0]) + 6 <= width:
        return [f'{indent}"""{lines[0]}"""']
    lines[0] = '"""' + lines[0]
    out = [indent + line if line else "" for line in lines]
    if len(out[-1]) + 3 <= _LINE:
        out[-1] += '"""'
    else:
        out.append(indent + '"""')
    return out


def _default(field: Mapping[str, Any], kind: str, array: bool, nullable: bool) -> str:
    given = field.get("default")
    nullable_range = _Range.parse(field.get("nullableVersions", "none"))
    versions = _Range.parse(field["versions"])
    assert versions is not None
    if given is None and nullable_range is not None and nullable_range.low <= versions.low:
        given = "null"
    if array or kind not in _PY_TYPES:
        if given == "null":
            return "None"
        return "()" if array else f"{kind}()"
    if given is None:
        return _ZEROS.get(kind, "0")
    if given == "null":
        if not nullable:
            raise ValueError(f"{field['name']}: default null on a non-nullable field")
        return "None"
    if kind == "bool":
        return {"true": "True", "false": "False"}[given.lower()]
    if kind == "string":
        return json.dumps(given)
    if kind == "float64":
        return repr(float(given))
    return str(int(given, 0))


class _Call(NamedTuple):
    """``prefix + func(args)``: a call to lay out, its arguments plain text or calls."""

    prefix: str
    func: str
    args: tuple[str | _Call, ...]

    def flat(self) -> str:
        return f"{self.prefix}{self.func}({', '.join(_flat(a) for a in self.args)})"


def _flat(arg: str | _Call) -> str:
    return arg if isinstance(arg, str) else arg.flat()


def _layout(call: _Call, indent: str, suffix: str = "") -> list[str]:
    """``call`` as ruff format lays it out within ``_LINE`` columns."""
    one = f"{indent}{call.flat()}{suffix}"
    if len(one) <= _LINE:
        return [one]
    head = f"{indent}{call.prefix}{call.func}("
    inner = indent + "    "
    middle = inner + ", ".join(_flat(a) for a in call.args)
    if len(middle) <= _LINE:
        return [head, middle, f"{indent}){suffix}"]
    lines = [head]
    for arg in call.args:
        if isinstance(arg, _Call):
            lines += _layout(arg, inner, ",")
        else:
            lines.append(f"{inner}{arg},")
    if any(len(line) > _LINE for line in lines):
        raise ValueError(f"cannot lay out {call.flat()!r} within {_LINE} columns")
    return [*lines, f"{indent}){suffix}"]


class _Writer:
    """Turns one message's spec into class definitions, nested structs first."""

    def __init__(self, message: str, ours: _Range, structs: dict[str, str]) -> None:
        self.message = message
        self.ours = ours
        self.structs = structs  # class name -> the message that declared it
        self.blocks: list[list[str]] = []

    def struct(self, spec_name: str, fields: Sequence[Mapping[str, Any]], about: str) -> str:
        _used.add((self.message, spec_name))
        name = STRUCT_NAMES.get((self.message, spec_name), spec_name)
        if name in self.structs:
            raise ValueError(f"struct {name} of {self.message} already in {self.structs[name]}")
        self.structs[name] = self.message
        body = self.fields(name, fields)
        self.blocks.append(
            [
                "@attrs.frozen(kw_only=True)",
                f"class {name}(Struct):",
                *_docstring(about, "    "),
                "",
                *body,
            ]
        )
        return name

    def fields(self, owner: str, fields: Sequence[Mapping[str, Any]]) -> list[str]:
        fields = list(self._with_old_fields(owner, fields))
        lines: list[str] = []
        for field in fields:
            versions = _Range.parse(field["versions"])
            if versions is None or not versions.meets(self.ours):
                continue
            lines.extend(self.field(owner, field))
        return lines

    def _with_old_fields(
        self, owner: str, fields: Sequence[Mapping[str, Any]]
    ) -> Iterator[Mapping[str, Any]]:
        extra = {
            after: field
            for (message, holder, after), field in OLD_FIELDS.items()
            if message == self.message and holder == owner
        }
        if None in extra:
            yield extra[None]
        for field in fields:
            yield field
            if field["name"] in extra:
                yield extra[field["name"]]

    def field(self, owner: str, field: Mapping[str, Any]) -> list[str]:
        spec_type: str = field["type"]
        array = spec_type.startswith("[]")
        kind = spec_type[2:] if array else spec_type
        nullable_range = _Range.parse(field.get("nullableVersions", "none"))
        nullable = nullable_range is not None and nullable_range.meets(self.ours)
        if kind in _PY_TYPES:
            py = _PY_TYPES[kind]
            kf_type = json.dumps(spec_type)
        else:
            about = field.get("about", "")
            kind = self.struct(kind, field["fields"], about)
            py = kind
            kf_type = kind
        annotation = f"tuple[{py}, ...]" if array else py
        if nullable or kind == "records":
            annotation += " | None"
        kf_args = [json.dumps(field["versions"]), kf_type]
        if array and kind not in _PY_TYPES:
            kf_args.append("array=True")
        if "nullableVersions" in field:
            kf_args.append(f"nullable={json.dumps(field['nullableVersions'])}")
        if field.get("ignorable"):
            kf_args.append("ignorable=True")
        if "taggedVersions" in field:
            kf_args.append(f"tagged={json.dumps(field['taggedVersions'])}")
            kf_args.append(f"tag={field['tag']}")
        _used.add((owner, field["name"]))
        default = DEFAULTS.get((owner, field["name"])) or _default(field, kind, array, nullable)
        args: list[str | _Call] = [f"default={default}"]
        if (owner, field["name"]) in REDACTED:
            args.append("repr=redacted_bytes")
        args.append(_Call("metadata=", "kf", tuple(kf_args)))
        name = FIELD_NAMES.get((owner, field["name"]), snake(field["name"]))
        return _layout(_Call(f"{name}: {annotation} = ", "attrs.field", tuple(args)), "    ")

    def message_class(self, spec: Mapping[str, Any], doc: str) -> None:
        name: str = spec["name"]
        base = "Request" if spec["type"] == "request" else "Response"
        flexible = _Range.parse(spec["flexibleVersions"])
        head = f"{name} (key {spec['apiKey']})."
        body = self.fields(name, spec["fields"])
        lines = [
            "@attrs.frozen(kw_only=True)",
            f"class {name}({base}):",
            *_docstring(f"{head} {doc}".strip(), "    "),
            "",
            f"    API_KEY = {spec['apiKey']}",
            f"    MIN_VERSION = {self.ours.low}",
            f"    MAX_VERSION = {self.ours.high}",
            f"    FLEXIBLE_VERSION = {flexible.low if flexible else None}",
        ]
        if body:
            lines += ["", *body]
        _used.add(name)
        self.blocks.append(lines)


def _module(module: Module, specs: Mapping[str, Mapping[str, Any]]) -> str:
    structs: dict[str, str] = {}
    sections: list[str] = []
    names: list[str] = []
    requests: list[str] = []
    for api in module.apis:
        ours = _Range.parse(api.versions)
        assert ours is not None, api
        assert ours.high is not None, api
        request, response = specs[f"{api.name}Request"], specs[f"{api.name}Response"]
        valid = _Range.parse(request["validVersions"])
        assert valid is not None
        if valid.high is not None and ours.high > valid.high:
            raise ValueError(f"{api.name}: we declare {api.versions}, the spec {valid}")
        blocks: list[list[str]] = []
        for spec, doc in ((request, api.request_doc), (response, api.response_doc)):
            writer = _Writer(spec["name"], ours, structs)
            writer.message_class(spec, doc)
            blocks += writer.blocks
        label = f"{api.name} ({request['apiKey']})"
        rule = f"# {'-' * (96 - len(label))} {label}"
        section = [rule, "", "", "\n\n\n".join("\n".join(b) for b in blocks)]
        section += ["", "", f"{request['name']}.RESPONSE_TYPE = {response['name']}"]
        sections.append("\n".join(section))
        names += [line.split()[1].split("(")[0] for b in blocks for line in b[1:2]]
        requests.append(request["name"])
    all_names = sorted({*names, *module.exports}, key=lambda n: (not n.isupper(), n))
    listed = "\n".join(f'    "{n}",' for n in all_names)
    trailer = _REGISTRY.format(
        name=module.registry,
        what="" if module.registry == "ALL" else "admin ",
        requests="\n".join(f"        {r}," for r in requests),
    )
    trailer += module.trailer
    doc = module.docstring.format(spec=SPEC_VERSION)
    # The secrets' repr is imported where a field of this module carries one.
    secret = any("repr=redacted_bytes" in section for section in sections)
    imports = module.imports.format(redacted=", redacted_bytes" if secret else "")
    return (
        f'"""{doc}"""\n\nfrom __future__ import annotations\n\n{imports}\n'
        f"__all__ = [\n{listed}\n]\n\n\n"
        + "\n\n\n".join(sections)
        + f"\n\n\n# {'-' * 85} registries\n\n"
        + trailer
    )


#: Every table key the last generation consulted, to find entries nothing uses.
_used: set[object] = set()


def generate(jar: Path) -> dict[str, str]:
    """File name -> the generated module's text. Raises ``ValueError`` when an entry
    of the tables above matches nothing in the specs (a renamed field, a dropped API)."""
    specs = read_specs(jar)
    _used.clear()
    modules = {module.filename: _module(module, specs) for module in MODULES}
    tables: tuple[Iterable[object], ...] = (
        STRUCT_NAMES,
        FIELD_NAMES,
        DEFAULTS,
        REDACTED,
    )
    stale = [key for table in tables for key in table if key not in _used]
    stale += [key for key in OLD_FIELDS if key[2] is not None and key[1:] not in _used]
    if stale:
        raise ValueError(f"table entries that match nothing in the specs: {stale}")
    return modules


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jar", type=Path, required=True, help="the kafka-clients jar")
    parser.add_argument("--check", action="store_true", help="exit 1 if a module is stale")
    parser.add_argument("--out", type=Path, default=_HERE, help="where the modules go")
    args = parser.parse_args(argv)
    stale = []
    for filename, text in generate(args.jar).items():
        path = args.out / filename
        if path.exists() and path.read_text() == text:
            continue
        stale.append(filename)
        if not args.check:
            path.write_text(text)
    verb = "stale" if args.check else "written"
    print(f"{verb}: {', '.join(stale) or 'none'}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
