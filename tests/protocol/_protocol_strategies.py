"""Hypothesis strategies generated from the protocol field metadata.

``instances(cls, version)`` draws messages that only set fields existing at ``version``
(the rest keep their defaults) and use None only where the field is nullable at that
version, so every draw must round-trip exactly.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, TypeVar

import attrs
from hypothesis import strategies as st

from coopconsumer._protocol import group_messages, messages
from coopconsumer._protocol._schema import FieldMeta, Struct, field_meta
from coopconsumer._protocol.consumer_protocol_schemas import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    CooperativeStickyAssignorUserData,
    StickyAssignorUserData,
)

S = TypeVar("S", bound=Struct)

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

REQUESTS = sorted(
    [*messages.ALL_REQUESTS.values(), *group_messages.GROUP_REQUESTS.values()],
    key=lambda c: c.API_KEY,
)
RESPONSES = sorted(
    [*messages.ALL_RESPONSES.values(), *group_messages.GROUP_RESPONSES.values()],
    key=lambda c: c.API_KEY,
)
CONSUMER_SCHEMAS: list[type[Struct]] = [
    ConsumerProtocolSubscription,
    ConsumerProtocolAssignment,
    StickyAssignorUserData,
    CooperativeStickyAssignorUserData,
]
ALL_TOP_LEVEL: list[type[Struct]] = [*REQUESTS, *RESPONSES, *CONSUMER_SCHEMAS]


def versions(cls: type[Struct]) -> range:
    return range(cls.MIN_VERSION, cls.MAX_VERSION + 1)


def class_versions(classes: Sequence[type[S]]) -> list[tuple[type[S], int]]:
    return [(cls, v) for cls in classes for v in versions(cls)]


def wire_fields(cls: type[Struct]) -> list[tuple[attrs.Attribute[Any], FieldMeta]]:
    out = []
    for field in attrs.fields(cls):  # type: ignore[arg-type]
        meta = field_meta(field)
        if meta is not None:
            out.append((field, meta))
    return out


def _scalar(type_: str | type[Struct], version: int) -> st.SearchStrategy[Any]:
    if not isinstance(type_, str):
        return instances(type_, version)
    if type_ in INT_RANGES:
        low, high = INT_RANGES[type_]
        return st.integers(low, high)
    if type_ == "float64":
        return st.floats(allow_nan=False)
    if type_ == "bool":
        return st.booleans()
    if type_ == "string":
        return st.text(max_size=12)
    if type_ in ("bytes", "records"):
        return st.binary(max_size=12)
    if type_ == "uuid":
        return st.uuids().map(lambda u: uuid.UUID(int=u.int))
    raise AssertionError(type_)


def _field_strategy(meta: FieldMeta, version: int) -> st.SearchStrategy[Any]:
    base = _scalar(meta.type, version)
    if meta.array:
        base = st.lists(base, max_size=3).map(tuple)
    nullable = (meta.nullable is not None and version in meta.nullable) or (
        meta.type == "records" and not meta.array
    )
    return st.none() | base if nullable else base


def instances(cls: type[Struct], version: int) -> st.SearchStrategy[Any]:
    """Instances of ``cls`` valid at ``version``."""
    kwargs = {
        field.name: _field_strategy(meta, version)
        for field, meta in wire_fields(cls)
        if version in meta.versions
    }
    return st.builds(cls, **kwargs)


def non_default_value(meta: FieldMeta, default: Any) -> Any:
    """A value different from ``default`` that is valid for the field's type."""
    if meta.array:
        if isinstance(meta.type, str):
            return ("x",) if meta.type == "string" else (1,)
        return (meta.type(),)
    if not isinstance(meta.type, str):
        raise AssertionError("single nested structs are not used")
    if meta.type in INT_RANGES:
        return default + 1 if isinstance(default, int) and default < 100 else 0
    if meta.type == "float64":
        return float(default) + 1.0
    if meta.type == "bool":
        return not default
    if meta.type == "string":
        return "x"
    if meta.type in ("bytes", "records"):
        return b"x"
    if meta.type == "uuid":
        return uuid.UUID(int=1)
    raise AssertionError(meta.type)


def build_with(
    cls: type[Struct], version: int, target: type[Struct], name: str, value: Any
) -> Any | None:
    """An instance of ``cls`` whose (possibly nested) ``target.name`` is ``value``, reached
    only through fields present at ``version``; None when unreachable."""
    if cls is target:
        return cls(**{name: value})
    for field, meta in wire_fields(cls):
        if isinstance(meta.type, str) or version not in meta.versions:
            continue
        inner = build_with(meta.type, version, target, name, value)
        if inner is not None:
            return cls(**{field.name: (inner,) if meta.array else inner})
    return None


def reachable_structs(cls: type[Struct], version: int) -> list[type[Struct]]:
    """``cls`` and every nested struct reachable through fields present at ``version``."""
    found = [cls]
    for _field, meta in wire_fields(cls):
        if not isinstance(meta.type, str) and version in meta.versions:
            for sub in reachable_structs(meta.type, version):
                if sub not in found:
                    found.append(sub)
    return found
