"""The generic encoder/decoder that walks ``_schema`` field metadata.

Classic encoding (int16-length strings, int32-length bytes and arrays) and flexible
encoding (KIP-482: unsigned-varint length+1 "compact" strings/bytes/arrays and a
tagged-field section after every struct). Each (class, version, flexible) gets a plan:
an encode and a decode function generated once from the metadata (as attrs generates
``__init__``) and cached, so a call does not re-walk metadata. Arrays of fixed-width
numbers are packed and unpacked with one ``struct`` call.

Decoding is lenient in two ways, both for real brokers: null in a field that is not
nullable at that version reads as the empty value (librdkafka's mock cluster sends a
null SyncGroup assignment with error responses; Java would reject it), and bytes after
a response body are ignored (the mock appends a stray byte to flexible Metadata
responses; Java's client does not check either). Encoding stays strict.

Decoding never lets ``IndexError``/``struct.error``/``UnicodeDecodeError`` escape:
malformed input raises :class:`~coopconsumer._errors.ProtocolError`. A declared
length or element count larger than the bytes left is rejected before anything is
allocated (as Java's ``ByteBufferAccessor`` does), so garbage cannot exhaust memory or
spin.

Imports only the standard library, attrs, ``coopconsumer._errors`` and ``_schema``.
"""

from __future__ import annotations

import operator
import struct
import uuid
from collections.abc import Callable
from typing import Any, Final, TypeVar

import attrs

from .._errors import ProtocolError
from ._schema import FieldMeta, Struct, field_meta

__all__ = [
    "EncodeError",
    "check_version",
    "decode",
    "decode_struct_at",
    "encode",
    "encode_into",
    "is_flexible",
    "read_uvarint",
    "skip_header_tags",
    "uvarint",
]

S = TypeVar("S", bound=Struct)

Writer = Callable[[bytearray, Any], None]
Reader = Callable[[bytes, int], tuple[Any, int]]


class EncodeError(ProtocolError, ValueError):
    """A message cannot be written at the requested version.

    Raised for a version outside the class's supported range, a non-default,
    non-ignorable field at a version that lacks it (Java's
    ``UnsupportedVersionException``), None in a field that is not nullable at that
    version, or a value that does not fit its wire type. Nothing was written.
    """


class _Malformed(Exception):
    """Internal: input bytes do not parse. Turned into ProtocolError at the API edge."""


_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
#: Longest string Kafka reads or writes, compact strings included (its generated code
#: checks ``length > 0x7fff`` for every string field, whatever the encoding).
_MAX_STRING_BYTES: Final = 0x7FFF
_SMALL_VARINTS: Final = tuple(bytes((i,)) for i in range(128))

# Fixed-width numeric types: struct format letter and size, for bulk array coding.
_FIXED: Final = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
}


def is_flexible(cls: type[Struct], version: int) -> bool:
    """Whether ``version`` of ``cls`` uses the flexible (KIP-482) encoding."""
    first = cls.FLEXIBLE_VERSION
    return first is not None and version >= first


# --------------------------------------------------------------------------- varints


def uvarint(value: int) -> bytes:
    """Unsigned varint encoding of a non-negative int (at most 32 bits)."""
    if 0 <= value < 0x80:
        return _SMALL_VARINTS[value]
    if not 0 <= value <= 0xFFFFFFFF:
        # Java reads at most 5 varint bytes into an int: anything wider is garbage to it.
        raise OverflowError(f"varint {value} does not fit in 32 bits")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (Java's ``readUnsignedVarint``)."""
    if pos >= len(data):
        raise _Malformed("truncated varint")
    b = data[pos]
    pos += 1
    if b < 0x80:
        return b, pos
    value = b & 0x7F
    shift = 7
    while True:
        if pos >= len(data):
            raise _Malformed("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise _Malformed("varint longer than 5 bytes")


# --------------------------------------------------------------------------- lengths


def _read_len_compact(data: bytes, pos: int) -> tuple[int, int]:
    n, pos = read_uvarint(data, pos)
    return n - 1, pos


# --------------------------------------------------------------------------- primitives


def _read_bool(data: bytes, pos: int) -> tuple[bool, int]:
    return data[pos] != 0, pos + 1


def _write_bool(out: bytearray, value: Any) -> None:
    out.append(1 if value else 0)


def _read_uuid(data: bytes, pos: int) -> tuple[Any, int]:
    end = pos + 16
    if end > len(data):
        raise _Malformed("truncated uuid")
    return uuid.UUID(bytes=data[pos:end]), end


def _write_uuid(out: bytearray, value: Any) -> None:
    out += value.bytes


def _length_reader(flexible: bool, classic: struct.Struct) -> Reader:
    if flexible:
        return _read_len_compact
    unpack = classic.unpack_from
    size = classic.size

    def read(data: bytes, pos: int) -> tuple[int, int]:
        n: int = unpack(data, pos)[0]
        return n, pos + size

    return read


def _blob_reader(
    flexible: bool, classic: struct.Struct, text: bool, nullable: bool, what: str
) -> Reader:
    # The length read is inlined (no nested call): strings dominate decode time for
    # messages with many topics.
    unpack = classic.unpack_from
    size = classic.size
    empty: str | bytes = "" if text else b""
    limit = _MAX_STRING_BYTES if text else 2**31 - 1

    def finish(data: bytes, pos: int, n: int) -> tuple[Any, int]:
        if n < 0:
            if n == -1:
                return (None if nullable else empty), pos
            _bad_length(n, what)
        if n > limit:
            raise _Malformed(f"{what}: length {n} exceeds the {limit} bytes Kafka allows")
        end = pos + n
        if end > len(data):
            raise _Malformed(f"{what}: length {n} exceeds the {len(data) - pos} bytes left")
        if text:
            return data[pos:end].decode("utf-8"), end
        return data[pos:end], end

    def read_classic(data: bytes, pos: int) -> tuple[Any, int]:
        n: int = unpack(data, pos)[0]
        pos += size
        if n >= 0:
            end = pos + n
            if end <= len(data):
                return (data[pos:end].decode("utf-8") if text else data[pos:end]), end
        return finish(data, pos, n)

    def read_compact(data: bytes, pos: int) -> tuple[Any, int]:
        b = data[pos]
        if b < 0x80:
            n = b - 1
            pos += 1
        else:
            n, pos = read_uvarint(data, pos)
            n -= 1
        if 0 <= n <= limit:
            end = pos + n
            if end <= len(data):
                return (data[pos:end].decode("utf-8") if text else data[pos:end]), end
        return finish(data, pos, n)

    return read_compact if flexible else read_classic


def _bad_length(n: int, what: str) -> None:
    raise _Malformed(f"{what}: bad length {n}")


def _blob_writer(flexible: bool, classic: struct.Struct, text: bool, what: str) -> Writer:
    # Checked here for both encodings: a compact length has no width that would refuse
    # an oversized value by itself, and the error can name the field.
    limit = _MAX_STRING_BYTES if text else 2**31 - 1
    if flexible:
        null = b"\x00"

        def write_len(out: bytearray, n: int) -> None:
            out += uvarint(n + 1)

    else:
        null = classic.pack(-1)
        pack = classic.pack

        def write_len(out: bytearray, n: int) -> None:
            out += pack(n)

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            out += null
            return
        raw = value.encode("utf-8") if text else value
        if len(raw) > limit:
            raise EncodeError(f"{what}: {len(raw)} bytes exceed the {limit} Kafka allows")
        write_len(out, len(raw))
        out += raw

    return write


# --------------------------------------------------------------------------- plans


@attrs.frozen
class _Plan:
    """The compiled codec of one struct class at one version.

    ``encode``/``decode`` are generated once per plan (as attrs generates ``__init__``)
    so that a call is a straight run of reads or writes, with no metadata walk.
    """

    cls: type[Struct]
    version: int
    flexible: bool
    encode: Callable[[Any, bytearray], None]
    decode: Callable[[bytes, int], tuple[Any, int]]


_PLANS: dict[tuple[type[Struct], int, bool], _Plan] = {}


def _plan(cls: type[Struct], version: int, flexible: bool) -> _Plan:
    key = (cls, version, flexible)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _build_plan(cls, version, flexible)
    return plan


def _is_default_fn(default: Any) -> Callable[[Any], bool]:
    if default is None:
        return lambda value: value is None
    if isinstance(default, tuple) and not default:
        return lambda value: value is not None and len(value) == 0
    return lambda value: bool(value == default)


def _absent_error(cls: type[Struct], name: str, version: int) -> EncodeError:
    return EncodeError(
        f"{cls.__name__}.{name} has a non-default value but does not exist at version {version}"
    )


def _build_plan(cls: type[Struct], version: int, flexible: bool) -> _Plan:
    if getattr(cls, "__attrs_attrs__", None) is None:
        raise TypeError(f"{cls.__name__} is not an attrs protocol struct")
    ns: dict[str, Any] = {
        "cls": cls,
        "version": version,
        "absent_error": _absent_error,
        "EMPTY": {},
    }
    enc = ["def encode(obj, out):"]
    dec = ["def decode(data, pos):"]
    kwargs: list[str] = []
    tagged: list[tuple[int, str, Writer, Reader, Callable[[Any], bool]]] = []
    for i, field in enumerate(attrs.fields(cls)):  # type: ignore[arg-type]
        meta = field_meta(field)
        if meta is None:
            continue
        name = field.name
        if field.default is attrs.NOTHING or isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            raise TypeError(f"{cls.__name__}.{name} needs a plain default")
        is_default = _is_default_fn(field.default)
        if version not in meta.versions:
            # Decoding leaves it to the attrs default; encoding checks it is default.
            if not meta.ignorable:
                ns[f"d{i}"] = is_default
                enc.append(
                    f"    if not d{i}(obj.{name}): raise absent_error(cls, {name!r}, version)"
                )
            continue
        nullable = meta.nullable is not None and version in meta.nullable
        what = f"{cls.__name__}.{name}"
        if meta.tagged is not None and version in meta.tagged:
            if not flexible:
                raise TypeError(f"{what}: tagged field at non-flexible version {version}")
            assert meta.tag is not None
            writer = _field_writer(meta, version, True, nullable, what)
            reader = _field_reader(meta, version, True, nullable, what)
            tagged.append((meta.tag, name, writer, reader, is_default))
            continue
        kwargs.append(f"{name}=v{i}")
        type_ = meta.type
        if not meta.array and isinstance(type_, str) and type_ in _FIXED:
            s = struct.Struct(">" + _FIXED[type_][0])
            ns[f"u{i}"] = s.unpack_from
            ns[f"p{i}"] = s.pack
            dec.append(f"    v{i} = u{i}(data, pos)[0]; pos += {s.size}")
            enc.append(f"    out += p{i}(obj.{name})")
        elif not meta.array and type_ == "bool":
            dec.append(f"    v{i} = data[pos] != 0; pos += 1")
            enc.append(f"    out.append(1 if obj.{name} else 0)")
        else:
            ns[f"r{i}"] = _field_reader(meta, version, flexible, nullable, what)
            ns[f"w{i}"] = _field_writer(meta, version, flexible, nullable, what)
            dec.append(f"    v{i}, pos = r{i}(data, pos)")
            enc.append(f"    w{i}(out, obj.{name})")
    call = f"cls({', '.join(kwargs)}"
    if flexible:
        tagged.sort(key=operator.itemgetter(0))
        ns["read_tagged"] = _tagged_reader(cls.__name__, tagged)
        ns["write_tagged"] = _tagged_writer(tagged)
        dec.append("    if data[pos] == 0:")
        dec.append("        pos += 1; tagged = EMPTY")
        dec.append("    else:")
        dec.append("        tagged, pos = read_tagged(data, pos)")
        dec.append(f"    return {call}{', ' if kwargs else ''}**tagged), pos")
        enc.append("    write_tagged(obj, out)")
    else:
        dec.append(f"    return {call}), pos")
    if len(enc) == 1:
        enc.append("    pass")
    source = "\n".join(enc) + "\n\n" + "\n".join(dec) + "\n"
    exec(compile(source, f"<kafka codec {cls.__name__} v{version}>", "exec"), ns)
    return _Plan(
        cls=cls, version=version, flexible=flexible, encode=ns["encode"], decode=ns["decode"]
    )


def _tagged_reader(
    owner: str, tagged: list[tuple[int, str, Writer, Reader, Callable[[Any], bool]]]
) -> Callable[[bytes, int], tuple[dict[str, Any], int]]:
    """Reader of a tagged-field section; tags not in ``tagged`` are skipped (KIP-482)."""
    by_tag = {tag: (name, reader) for tag, name, _w, reader, _d in tagged}

    def read(data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        count, pos = read_uvarint(data, pos)
        if count > len(data) - pos:
            raise _Malformed(f"{owner}: {count} tagged fields exceed the input")
        found: dict[str, Any] = {}
        for _ in range(count):
            tag, pos = read_uvarint(data, pos)
            size, pos = read_uvarint(data, pos)
            end = pos + size
            if end > len(data):
                raise _Malformed(f"{owner}: tagged field {tag} is truncated")
            known = by_tag.get(tag)
            if known is not None:
                name, reader = known
                value, used = reader(data, pos)
                if used != end:
                    raise _Malformed(
                        f"{owner}: tagged field {tag} has size {size} but its value "
                        f"took {used - pos} bytes"
                    )
                found[name] = value
            # Unknown tags are skipped: peers may add tagged fields freely (KIP-482).
            pos = end
        return found, pos

    return read


def _tagged_writer(
    tagged: list[tuple[int, str, Writer, Reader, Callable[[Any], bool]]],
) -> Callable[[Any, bytearray], None]:
    if not tagged:

        def write_none(obj: Any, out: bytearray) -> None:
            out.append(0)

        return write_none
    fields = [(tag, name, writer, is_default) for tag, name, writer, _r, is_default in tagged]

    def write(obj: Any, out: bytearray) -> None:
        present = []
        for tag, name, writer, is_default in fields:
            value = getattr(obj, name)
            if not is_default(value):
                buf = bytearray()
                writer(buf, value)
                present.append((tag, buf))
        out += uvarint(len(present))
        for tag, buf in present:
            out += uvarint(tag)
            out += uvarint(len(buf))
            out += buf

    return write


def _not_null(writer: Writer, what: str, version: int) -> Writer:
    def write(out: bytearray, value: Any) -> None:
        if value is None:
            raise EncodeError(f"{what} is None but is not nullable at version {version}")
        writer(out, value)

    return write


def _nullable_struct_writer(writer: Writer) -> Writer:
    # A nullable struct is an int8 marker, -1 for null or 1 before the struct, as in
    # the code Kafka generates from its specs (ConsumerGroupHeartbeatResponse.Assignment).
    def write(out: bytearray, value: Any) -> None:
        if value is None:
            out.append(0xFF)
            return
        out.append(1)
        writer(out, value)

    return write


def _nullable_struct_reader(decode: Reader, what: str) -> Reader:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        if pos >= len(data):
            raise _Malformed(f"{what}: truncated before its null marker")
        marker = data[pos]
        if marker >= 0x80:
            return None, pos + 1
        return decode(data, pos + 1)

    return read


def _field_writer(
    meta: FieldMeta, version: int, flexible: bool, nullable: bool, what: str
) -> Writer:
    if meta.array:
        return _array_writer(meta, version, flexible, nullable, what)
    return _scalar_writer(meta.type, version, flexible, nullable, what)


def _field_reader(
    meta: FieldMeta, version: int, flexible: bool, nullable: bool, what: str
) -> Reader:
    if meta.array:
        return _array_reader(meta, version, flexible, nullable, what)
    return _scalar_reader(meta.type, version, flexible, nullable, what)


def _scalar_writer(
    type_: str | type[Struct], version: int, flexible: bool, nullable: bool, what: str
) -> Writer:
    if not isinstance(type_, str):
        struct_writer = _struct_writer(_plan(type_, version, flexible), what)
        if nullable:
            return _nullable_struct_writer(struct_writer)
        return _not_null(struct_writer, what, version)
    if type_ in _FIXED:
        pack = struct.Struct(">" + _FIXED[type_][0]).pack

        def write_fixed(out: bytearray, value: Any) -> None:
            out += pack(value)

        return write_fixed
    if type_ == "bool":
        return _write_bool
    if type_ == "uuid":
        return _write_uuid
    if type_ == "string":
        writer = _blob_writer(flexible, _I16, True, what)
    else:  # bytes, and records (always nullable bytes)
        writer = _blob_writer(flexible, _I32, False, what)
        nullable = nullable or type_ == "records"
    return writer if nullable else _not_null(writer, what, version)


def _scalar_reader(
    type_: str | type[Struct], version: int, flexible: bool, nullable: bool, what: str
) -> Reader:
    if not isinstance(type_, str):
        decode = _plan(type_, version, flexible).decode
        return _nullable_struct_reader(decode, what) if nullable else decode
    if type_ in _FIXED:
        s = struct.Struct(">" + _FIXED[type_][0])
        unpack, size = s.unpack_from, s.size

        def read_fixed(data: bytes, pos: int) -> tuple[Any, int]:
            return unpack(data, pos)[0], pos + size

        return read_fixed
    if type_ == "bool":
        return _read_bool
    if type_ == "uuid":
        return _read_uuid
    if type_ == "string":
        return _blob_reader(flexible, _I16, True, nullable, what)
    return _blob_reader(flexible, _I32, False, nullable or type_ == "records", what)


def _array_writer(
    meta: FieldMeta, version: int, flexible: bool, nullable: bool, what: str
) -> Writer:
    if flexible:
        null = b"\x00"

        def write_len(out: bytearray, n: int) -> None:
            out += uvarint(n + 1)

    else:
        null = b"\xff\xff\xff\xff"
        pack32 = _I32.pack

        def write_len(out: bytearray, n: int) -> None:
            out += pack32(n)

    type_ = meta.type
    writer: Writer
    if isinstance(type_, str) and type_ in _FIXED:
        letter = _FIXED[type_][0]

        def write_fixed(out: bytearray, value: Any) -> None:
            if value is None:
                out += null
                return
            n = len(value)
            write_len(out, n)
            if n:
                out += struct.pack(f">{n}{letter}", *value)

        writer = write_fixed
    else:
        elem = _scalar_writer(type_, version, flexible, False, what + "[]")

        def write_items(out: bytearray, value: Any) -> None:
            if value is None:
                out += null
                return
            write_len(out, len(value))
            for item in value:
                elem(out, item)

        writer = write_items
    return writer if nullable else _not_null(writer, what, version)


def _array_reader(
    meta: FieldMeta, version: int, flexible: bool, nullable: bool, what: str
) -> Reader:
    read_len = _length_reader(flexible, _I32)
    type_ = meta.type
    if isinstance(type_, str) and type_ in _FIXED:
        letter, size = _FIXED[type_]

        def read_fixed(data: bytes, pos: int) -> tuple[Any, int]:
            n, pos = read_len(data, pos)
            if n < 0:
                if n == -1:
                    return (None if nullable else ()), pos
                _bad_length(n, what)
            end = pos + n * size
            if end > len(data):
                raise _Malformed(f"{what}: {n} elements exceed the {len(data) - pos} bytes left")
            unpack = cache.get(n)
            if unpack is None:
                unpack = struct.Struct(f">{n}{letter}").unpack_from
                if len(cache) < 4096:
                    cache[n] = unpack
            return unpack(data, pos), end

        cache: dict[int, Callable[[bytes, int], tuple[Any, ...]]] = {}
        return read_fixed
    elem = _scalar_reader(type_, version, flexible, False, what + "[]")

    def read_items(data: bytes, pos: int) -> tuple[Any, int]:
        n, pos = read_len(data, pos)
        if n < 0:
            if n == -1:
                return (None if nullable else ()), pos
            _bad_length(n, what)
        # Every element takes at least one byte, so a count above the bytes left is
        # garbage; Java checks the same before allocating.
        if n > len(data) - pos:
            raise _Malformed(f"{what}: {n} elements exceed the {len(data) - pos} bytes left")
        items: list[Any] = []
        append = items.append
        for _ in range(n):
            item, pos = elem(data, pos)
            append(item)
        return tuple(items), pos

    return read_items


def _struct_writer(plan: _Plan, what: str) -> Writer:
    cls = plan.cls
    encode_struct = plan.encode

    def write(out: bytearray, value: Any) -> None:
        if type(value) is not cls:
            raise EncodeError(f"{what}: expected {cls.__name__}, got {type(value).__name__}")
        encode_struct(value, out)

    return write


#: Reads (and skips) the tagged-field section of a flexible request/response header.
skip_header_tags: Final = _tagged_reader("header", [])

# --------------------------------------------------------------------------- public


def _api_key(cls: type[Struct]) -> int | None:
    key = getattr(cls, "API_KEY", None)
    return key if isinstance(key, int) and key >= 0 else None


def check_version(cls: type[Struct], version: int, error: type[ProtocolError]) -> None:
    """Raise ``error`` unless ``cls`` supports ``version``."""
    if not (cls.MIN_VERSION <= version <= cls.MAX_VERSION):
        raise error(
            f"{cls.__name__} supports versions {cls.MIN_VERSION}-{cls.MAX_VERSION}, not {version}",
            api_key=_api_key(cls),
            api_version=version,
        )


def encode_into(out: bytearray, msg: Struct, version: int) -> None:
    """Append the body of ``msg`` at ``version`` to ``out``.

    Raises :class:`EncodeError` (and leaves ``out`` as it was) when the message cannot
    be written at that version.
    """
    cls = type(msg)
    check_version(cls, version, EncodeError)
    plan = _plan(cls, version, is_flexible(cls, version))
    mark = len(out)
    try:
        plan.encode(msg, out)
    except EncodeError as exc:
        del out[mark:]
        if exc.api_version is None:
            raise EncodeError(str(exc), api_key=_api_key(cls), api_version=version) from None
        raise
    except (struct.error, OverflowError, UnicodeEncodeError, TypeError, AttributeError) as exc:
        del out[mark:]
        raise EncodeError(
            f"cannot encode {cls.__name__}: {exc}", api_key=_api_key(cls), api_version=version
        ) from exc


def encode(msg: Struct, version: int) -> bytes:
    """Encode the body of ``msg`` (no header, no size prefix) at ``version``.

    Raises :class:`EncodeError` when ``version`` is outside the class's range, a
    non-default non-ignorable field does not exist at ``version``, a non-nullable field
    is None, or a value does not fit its wire type.
    """
    out = bytearray()
    encode_into(out, msg, version)
    return bytes(out)


def decode_struct_at(
    cls: type[S], data: bytes, pos: int, version: int, *, flexible: bool | None = None
) -> tuple[S, int]:
    """Decode ``cls`` at ``version`` from ``data[pos:]``; return it and the end offset.

    Raises ProtocolError on malformed input.
    """
    check_version(cls, version, ProtocolError)
    if flexible is None:
        flexible = is_flexible(cls, version)
    plan = _plan(cls, version, flexible)
    try:
        obj, end = plan.decode(data, pos)
    except (_Malformed, struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(
            f"malformed {cls.__name__}: {exc or type(exc).__name__}",
            api_key=_api_key(cls),
            api_version=version,
        ) from None
    return obj, end


def decode(
    cls: type[S], data: bytes | bytearray | memoryview, version: int, *, exact: bool = False
) -> S:
    """Decode a body of ``cls`` at ``version``.

    Trailing bytes after the body are ignored unless ``exact`` is true: Java's client
    does not check for them in responses either, and the consumer protocol relies on
    it (newer versions only append fields). Raises ProtocolError on malformed input,
    naming the API key and version when ``cls`` has one.
    """
    buf = data if isinstance(data, bytes) else bytes(data)
    obj, end = decode_struct_at(cls, buf, 0, version)
    if exact and end != len(buf):
        raise ProtocolError(
            f"{len(buf) - end} trailing bytes after {cls.__name__}",
            api_key=_api_key(cls),
            api_version=version,
        )
    return obj
