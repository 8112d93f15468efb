"""Admin messages: every version round-trips, decoders only raise ProtocolError on junk,
and the registries list each class under its spec API key."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocol"))
from _protocol_strategies import instances

from coopconsumer._errors import ProtocolError
from coopconsumer._protocol import (
    Request,
    Struct,
    decode,
    decode_request,
    encode,
    encode_request,
)
from coopconsumer._protocol._shapes import for_version
from coopconsumer._protocol.admin_messages import (
    ADMIN_REQUESTS,
    ADMIN_RESPONSES,
    REQUESTS_BY_KEY,
)
from coopconsumer._protocol.messages import ALL_REQUESTS

SPEC_KEYS = {
    "CreateTopicsRequest": 19,
    "DeleteTopicsRequest": 20,
    "DescribeConfigsRequest": 32,
    "AlterReplicaLogDirsRequest": 34,
    "DescribeLogDirsRequest": 35,
    "CreatePartitionsRequest": 37,
    "ElectLeadersRequest": 43,
    "IncrementalAlterConfigsRequest": 44,
    "AlterPartitionReassignmentsRequest": 45,
    "ListPartitionReassignmentsRequest": 46,
    "DescribeClusterRequest": 60,
}

CLASS_VERSIONS = [
    (cls, version)
    for cls in [*ADMIN_REQUESTS.values(), *ADMIN_RESPONSES.values()]
    for version in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)
]


def test_registries_use_the_spec_keys() -> None:
    assert {cls.__name__: key for key, cls in ADMIN_REQUESTS.items()} == SPEC_KEYS
    for key, response in ADMIN_RESPONSES.items():
        assert key == response.API_KEY
        assert response.__name__ == ADMIN_REQUESTS[key].__name__.replace("Request", "Response")
    assert not set(ADMIN_REQUESTS) & set(ALL_REQUESTS)
    assert REQUESTS_BY_KEY == {**ALL_REQUESTS, **ADMIN_REQUESTS}


@pytest.mark.parametrize(
    ("cls", "version"), CLASS_VERSIONS, ids=[f"{c.__name__}-v{v}" for c, v in CLASS_VERSIONS]
)
@settings(max_examples=20)
@given(data=st.data())
def test_round_trip(cls: type[Struct], version: int, data: st.DataObject) -> None:
    message = data.draw(instances(cls, version))
    if isinstance(message, Request):
        message = for_version(message, version)
    assert decode(cls, encode(message, version), version) == message


@pytest.mark.parametrize(
    ("cls", "version"), CLASS_VERSIONS, ids=[f"{c.__name__}-v{v}" for c, v in CLASS_VERSIONS]
)
@settings(max_examples=20)
@given(junk=st.binary(max_size=64))
def test_decoders_raise_only_protocol_error(cls: type[Struct], version: int, junk: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode(cls, junk, version)


@pytest.mark.parametrize(
    "cls", list(ADMIN_REQUESTS.values()), ids=[c.__name__ for c in ADMIN_REQUESTS.values()]
)
def test_brokers_decode_admin_requests_with_the_merged_registry(cls: type[Request]) -> None:
    request = cls()
    frame = encode_request(request, api_version=cls.MAX_VERSION, correlation_id=3, client_id="x")
    header, decoded = decode_request(frame, request_types=REQUESTS_BY_KEY)
    assert (header.api_key, header.api_version) == (cls.API_KEY, cls.MAX_VERSION)
    assert decoded == request
    with pytest.raises(ProtocolError, match="unknown API key"):
        decode_request(frame)  # the consumer-only registry does not know admin keys


# --------------------------------------------------------------------------- layering

_PKG = Path(__file__).resolve().parents[2] / "src" / "coopconsumer"
_BLOCKING = {"socket", "selectors", "threading", "time", "asyncio", "subprocess"}


def _imported(path: Path) -> set[str]:
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level:
            names.add("." * node.level + (node.module or ""))
    return names


@pytest.mark.parametrize(
    "path",
    [
        _PKG / "admin" / "_replica_assignor.py",
        _PKG / "admin" / "_zookeeper.py",
        _PKG / "admin" / "_kraft.py",
        _PKG / "admin" / "_balanced.py",
        _PKG / "admin" / "_admin_types.py",
        _PKG / "testing" / "_cluster" / "_model.py",
        _PKG / "testing" / "_cluster" / "_handlers.py",
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_assignors_and_the_cluster_model_are_sans_io(path: Path) -> None:
    imported = _imported(path)
    assert not imported & _BLOCKING, imported & _BLOCKING
    assert not any(name.startswith(("..._io", ".._io", "confluent_kafka")) for name in imported)
