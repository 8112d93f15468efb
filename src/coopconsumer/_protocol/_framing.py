"""Request and response headers around message bodies.

Request header v1 (api_key, api_version, correlation_id, client_id as a classic
nullable string) for non-flexible versions, v2 (v1 plus an empty tagged-field
section) for flexible ones. Response header v0 (correlation_id), v1 (plus tagged
fields) for flexible versions -- except ApiVersions, whose response header is always
v0 (KIP-511). The 4-byte size prefix of a frame is the connection's business.

Imports only the standard library, attrs, ``coopconsumer._errors`` and siblings.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Final, TypeVar, overload

import attrs

from .._errors import ProtocolError
from ._codec import (
    EncodeError,
    _Malformed,
    check_version,
    decode_struct_at,
    encode_into,
    is_flexible,
    skip_header_tags,
)
from ._schema import Request, Response
from ._shapes import for_version

__all__ = [
    "RequestHeader",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "peek_correlation_id",
    "request_header_version",
    "response_header_version",
]

R = TypeVar("R", bound=Response)

_API_VERSIONS_KEY: Final = 18
_REQ_HDR: Final = struct.Struct(">hhi")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


@attrs.frozen(kw_only=True)
class RequestHeader:
    """A decoded request header (used by in-process fake brokers and tests)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def request_header_version(cls: type[Request], api_version: int) -> int:
    """1 for classic versions, 2 for flexible ones."""
    return 2 if is_flexible(cls, api_version) else 1


def response_header_version(cls: type[Response], api_version: int) -> int:
    """0 for classic versions and for every ApiVersions response, else 1."""
    if cls.API_KEY == _API_VERSIONS_KEY:
        return 0
    return 1 if is_flexible(cls, api_version) else 0


def encode_request(
    request: Request, *, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """Request header plus body, without the 4-byte size prefix.

    Raises :class:`EncodeError` when the request cannot be written at ``api_version``.
    """
    cls = type(request)
    check_version(cls, api_version, EncodeError)
    request = for_version(request, api_version)
    out = bytearray()
    try:
        out += _REQ_HDR.pack(cls.API_KEY, api_version, correlation_id)
    except struct.error as exc:
        raise EncodeError(
            f"bad header value: {exc}", api_key=cls.API_KEY, api_version=api_version
        ) from None
    # client_id stays a classic (int16-length) nullable string even in header v2.
    if client_id is None:
        out += b"\xff\xff"
    else:
        raw = client_id.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise EncodeError("client_id too long", api_key=cls.API_KEY, api_version=api_version)
        out += _I16.pack(len(raw))
        out += raw
    if request_header_version(cls, api_version) >= 2:
        out.append(0)  # no tagged fields
    encode_into(out, request, api_version)
    return bytes(out)


def encode_response(response: Response, *, api_version: int, correlation_id: int) -> bytes:
    """Response header plus body, without the size prefix (for fake brokers)."""
    cls = type(response)
    check_version(cls, api_version, EncodeError)
    out = bytearray(_I32.pack(correlation_id))
    if response_header_version(cls, api_version) >= 1:
        out.append(0)
    encode_into(out, response, api_version)
    return bytes(out)


def peek_correlation_id(data: bytes | bytearray | memoryview) -> int:
    """The correlation id at the start of a response frame (after the size prefix)."""
    if len(data) < 4:
        raise ProtocolError(f"response of {len(data)} bytes has no correlation id")
    value: int = _I32.unpack_from(data, 0)[0]
    return value


@overload
def decode_response(
    type_: type[R], data: bytes | bytearray | memoryview, *, api_version: int
) -> tuple[int, R]: ...


@overload
def decode_response(
    type_: type[Request], data: bytes | bytearray | memoryview, *, api_version: int
) -> tuple[int, Response]: ...


def decode_response(
    type_: type[Request] | type[Response],
    data: bytes | bytearray | memoryview,
    *,
    api_version: int,
) -> tuple[int, Response]:
    """Decode a response frame (header + body, no size prefix).

    ``type_`` is the request class (its ``RESPONSE_TYPE`` is used) or the response
    class. Returns ``(correlation_id, response)``. Bytes after the body are ignored, as
    Java's client does. An ApiVersions response that does not parse at ``api_version``
    is read as v0: that is how a broker answers a version it does not support
    (error UNSUPPORTED_VERSION plus the versions it does). Raises ProtocolError on
    malformed input.
    """
    cls: type[Response] = type_.RESPONSE_TYPE if issubclass(type_, Request) else type_
    check_version(cls, api_version, ProtocolError)
    buf = data if isinstance(data, bytes) else bytes(data)
    correlation_id = peek_correlation_id(buf)
    pos = 4
    if response_header_version(cls, api_version) >= 1:
        try:
            _tags, pos = skip_header_tags(buf, pos)
        except _Malformed as exc:
            raise ProtocolError(
                f"malformed response header: {exc}", api_key=cls.API_KEY, api_version=api_version
            ) from None
    try:
        response, _end = decode_struct_at(cls, buf, pos, api_version)
    except ProtocolError:
        if cls.API_KEY != _API_VERSIONS_KEY or api_version == 0:
            raise
        # A broker that does not support our ApiVersions version answers
        # UNSUPPORTED_VERSION in the v0 format (KIP-511); Java's
        # ApiVersionsResponse.parse falls back to v0 the same way.
        response, _end = decode_struct_at(cls, buf, pos, 0)
    return correlation_id, response


def decode_request(
    data: bytes | bytearray | memoryview,
    *,
    request_types: Mapping[int, type[Request]] | None = None,
) -> tuple[RequestHeader, Request]:
    """Decode a request frame (header + body, no size prefix); for fake brokers.

    ``request_types`` maps API keys to classes (default: every message declared in
    ``messages``). Raises ProtocolError for an unknown key, an unsupported version or
    malformed bytes; trailing bytes after the body are an error, as on a broker.
    """
    if request_types is None:
        from .messages import ALL_REQUESTS

        request_types = ALL_REQUESTS
    buf = data if isinstance(data, bytes) else bytes(data)
    if len(buf) < _REQ_HDR.size + 2:
        raise ProtocolError(f"request of {len(buf)} bytes is shorter than its header")
    api_key, api_version, correlation_id = _REQ_HDR.unpack_from(buf, 0)
    cls = request_types.get(api_key)
    if cls is None:
        raise ProtocolError("unknown API key", api_key=api_key, api_version=api_version)
    check_version(cls, api_version, ProtocolError)
    pos = _REQ_HDR.size
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    client_id: str | None = None
    try:
        if n >= 0:
            if n > len(buf) - pos:
                raise _Malformed("client_id longer than the request")
            client_id = buf[pos : pos + n].decode("utf-8")
            pos += n
        elif n != -1:
            raise _Malformed(f"bad client_id length {n}")
        if request_header_version(cls, api_version) >= 2:
            _tags, pos = skip_header_tags(buf, pos)
    except (_Malformed, UnicodeDecodeError) as exc:
        raise ProtocolError(
            f"malformed request header: {exc}", api_key=api_key, api_version=api_version
        ) from None
    request, end = decode_struct_at(cls, buf, pos, api_version)
    if end != len(buf):
        raise ProtocolError(
            f"{len(buf) - end} trailing bytes after the request",
            api_key=api_key,
            api_version=api_version,
        )
    header = RequestHeader(
        api_key=api_key, api_version=api_version, correlation_id=correlation_id, client_id=client_id
    )
    return header, request
