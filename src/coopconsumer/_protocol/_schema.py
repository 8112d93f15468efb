"""Field metadata for schema-driven protocol messages, and the message base classes.

A message is a frozen, keyword-only attrs class; each field carries a ``FieldMeta``
built by :func:`kf` with the version ranges spelled as in Kafka's JSON message specs
(``"0+"``, ``"3-4"``, ``"1"``). The generic codec (``_codec``) walks this metadata.

Imports only the standard library and attrs.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, Final

import attrs

__all__ = [
    "PRIMITIVE_TYPES",
    "ZERO_UUID",
    "FieldMeta",
    "Request",
    "Response",
    "Struct",
    "VersionRange",
    "kf",
    "redacted_bytes",
]

#: Kafka's all-zero UUID (``Uuid.ZERO_UUID``), the default of every uuid field.
ZERO_UUID: Final = uuid.UUID(int=0)

#: Primitive type names as spelled in the JSON specs. ``records`` is carried as
#: nullable bytes.
PRIMITIVE_TYPES: Final = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "uint16",
        "int32",
        "int64",
        "float64",
        "string",
        "bytes",
        "records",
        "uuid",
    }
)

_META_KEY: Final = "kafka"


@attrs.frozen
class VersionRange:
    """An inclusive version range; ``high`` is None for an open range (``"5+"``)."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        """Parse ``"0+"``, ``"3-4"`` or ``"1"`` (Kafka's spelling)."""
        text = text.strip()
        try:
            if text.endswith("+"):
                return cls(int(text[:-1]), None)
            if "-" in text:
                low, high = text.split("-", 1)
                return cls(int(low), int(high))
            return cls(int(text), int(text))
        except ValueError:
            raise ValueError(f"bad version range {text!r}") from None

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return version >= self.low and (self.high is None or version <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"{self.low}+"
        if self.high == self.low:
            return str(self.low)
        return f"{self.low}-{self.high}"


@attrs.frozen
class FieldMeta:
    """How one attrs field maps to the wire.

    ``type`` is a primitive name (``"int32"``, ``"string"``...) or a ``Struct``
    subclass; ``array`` says the field is an array of that type. ``nullable`` is the
    ``nullableVersions`` range, ``tagged``/``tag`` the ``taggedVersions`` and tag of a
    tagged field. An ``ignorable`` field may hold a non-default value at a version that
    lacks it: it is silently dropped instead of raising.
    """

    versions: VersionRange
    type: str | type[Struct]
    array: bool = False
    nullable: VersionRange | None = None
    tagged: VersionRange | None = None
    tag: int | None = None
    ignorable: bool = False


def kf(
    versions: str,
    type_: str | type[Struct],
    *,
    nullable: str | None = None,
    tagged: str | None = None,
    tag: int | None = None,
    ignorable: bool = False,
    array: bool = False,
) -> dict[str, Any]:
    """Build the ``metadata`` dict of an ``attrs.field`` for a Kafka message field.

    ``type_`` is the spec's type: a primitive name, ``"[]int32"`` for an array of
    primitives, or a ``Struct`` class (with ``array=True`` for ``[]SomeStruct``).
    """
    if isinstance(type_, str):
        if type_.startswith("[]"):
            array = True
            type_ = type_[2:]
        if type_ not in PRIMITIVE_TYPES:
            raise ValueError(f"unknown Kafka field type {type_!r}")
    elif not (isinstance(type_, type) and issubclass(type_, Struct)):
        raise TypeError(f"field type must be a primitive name or a Struct class: {type_!r}")
    if (tag is None) != (tagged is None):
        raise ValueError("a tagged field needs both tag and tagged (taggedVersions)")
    meta = FieldMeta(
        versions=VersionRange.parse(versions),
        type=type_,
        array=array,
        nullable=VersionRange.parse(nullable) if nullable is not None else None,
        tagged=VersionRange.parse(tagged) if tagged is not None else None,
        tag=tag,
        ignorable=ignorable,
    )
    return {_META_KEY: meta}


def field_meta(field: attrs.Attribute[Any]) -> FieldMeta | None:
    """The ``FieldMeta`` of an attrs field, or None for a field that is not on the wire."""
    meta = field.metadata.get(_META_KEY)
    return meta if isinstance(meta, FieldMeta) else None


class Struct:
    """Base of every protocol struct (top-level messages and nested structs).

    Subclasses are ``attrs.frozen(kw_only=True)`` classes whose fields carry
    :func:`kf` metadata, in wire order.
    """

    __slots__ = ()

    #: Versions this schema (or, for a nested struct, its parent) is declared for.
    MIN_VERSION: ClassVar[int] = 0
    MAX_VERSION: ClassVar[int] = 0
    #: First flexible version (compact encodings and tagged fields), None if never.
    FLEXIBLE_VERSION: ClassVar[int | None] = None


class Response(Struct):
    """Base of response bodies. ``API_KEY`` is the Kafka API key."""

    __slots__ = ()

    API_KEY: ClassVar[int] = -1


class Request(Struct):
    """Base of request bodies; ``RESPONSE_TYPE`` is the matching response class."""

    __slots__ = ()

    API_KEY: ClassVar[int] = -1
    RESPONSE_TYPE: ClassVar[type[Response]] = Response


def redacted_bytes(value: bytes) -> str:
    """The repr of a field holding a secret (a SASL PLAIN message holds the password;
    SCRAM's ``salted_password``): its length only."""
    return f"<{len(value)} bytes redacted>"
