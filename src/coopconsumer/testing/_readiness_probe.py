"""Kafka-protocol readiness probe: one hand-built ApiVersions v0 request.

Deliberately independent of ``coopconsumer._protocol`` (the library's wire client is what
the test brokers exist to test, so the harness must not rely on it). Imports only the
standard library and ``coopconsumer._errors``.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import time
from collections.abc import Callable, Mapping

from .._errors import BrokerConnectionError, ProtocolError, RequestTimeoutError
from ._ports import split_address

__all__ = ["API_VERSIONS_KEY", "probe_api_versions", "probe_broker_ids", "wait_until_answering"]

API_VERSIONS_KEY = 18
METADATA_KEY = 3
_CLIENT_ID = b"coopconsumer-testing-probe"
_CORRELATION_ID = 0x636F6F70  # arbitrary, checked on the way back


def _api_versions_v0_frame() -> bytes:
    # RequestHeader v1: api_key int16, api_version int16, correlation_id int32,
    # client_id nullable string (int16 length). ApiVersionsRequest v0 has no body.
    header = struct.pack(">hhih", API_VERSIONS_KEY, 0, _CORRELATION_ID, len(_CLIENT_ID))
    payload = header + _CLIENT_ID
    return struct.pack(">i", len(payload)) + payload


def _metadata_v1_frame() -> bytes:
    # RequestHeader v1, then MetadataRequest v1: topics = [] (no topics: brokers only;
    # a null array would ask for every topic).
    header = struct.pack(">hhih", METADATA_KEY, 1, _CORRELATION_ID, len(_CLIENT_ID))
    payload = header + _CLIENT_ID + struct.pack(">i", 0)
    return struct.pack(">i", len(payload)) + payload


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed before the response was complete")
        chunks += chunk
    return bytes(chunks)


def probe_api_versions(
    address: str, *, timeout_s: float = 5.0, ssl_context: ssl.SSLContext | None = None
) -> Mapping[int, tuple[int, int]]:
    """Send ApiVersions v0 to ``address`` ("host:port") and return its answer.

    ``ssl_context`` speaks TLS first (for a TLS listener).

    The result maps each API key the broker advertises to its ``(min_version,
    max_version)``. Raises :class:`~coopconsumer.BrokerConnectionError` when the
    broker cannot be reached or hangs up, :class:`~coopconsumer.RequestTimeoutError`
    when it does not answer within ``timeout_s``, and :class:`~coopconsumer.ProtocolError`
    when the answer is not an ApiVersions v0 response.
    """
    body = _exchange(address, _api_versions_v0_frame(), API_VERSIONS_KEY, 0, timeout_s, ssl_context)
    return _parse_api_versions_v0(body, address)


def _exchange(
    address: str,
    frame: bytes,
    api_key: int,
    api_version: int,
    timeout_s: float,
    ssl_context: ssl.SSLContext | None,
) -> bytes:
    """Send one request frame on a fresh connection and return the response body."""
    host, port = split_address(address)
    try:
        with contextlib.ExitStack() as stack:
            sock = stack.enter_context(socket.create_connection((host, port), timeout=timeout_s))
            if ssl_context is not None:
                sock = stack.enter_context(ssl_context.wrap_socket(sock, server_hostname=host))
            sock.sendall(frame)
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            if size < 10 or size > 1 << 20:
                raise ProtocolError(
                    f"implausible response size {size}",
                    api_key=api_key,
                    api_version=api_version,
                    broker=address,
                )
            body = _recv_exact(sock, size)
    except TimeoutError as exc:
        raise RequestTimeoutError(
            f"no answer to API {api_key} within {timeout_s} s",
            api_key=api_key,
            api_version=api_version,
            broker=address,
        ) from exc
    except OSError as exc:
        raise BrokerConnectionError(
            f"probe of API {api_key} failed: {exc}", broker=address
        ) from exc
    return body


def probe_broker_ids(
    address: str, *, timeout_s: float = 5.0, ssl_context: ssl.SSLContext | None = None
) -> frozenset[int]:
    """Send Metadata v1 (no topics) to ``address`` and return the broker ids it lists.

    A KRaft broker answers Metadata only once it has caught up with the cluster's
    metadata, so an answer listing every expected id means the cluster is usable.
    Raises like :func:`probe_api_versions`.
    """
    body = _exchange(address, _metadata_v1_frame(), METADATA_KEY, 1, timeout_s, ssl_context)
    try:
        correlation_id, count = struct.unpack_from(">ii", body, 0)
        if correlation_id != _CORRELATION_ID or count < 0:
            raise ValueError(f"correlation id {correlation_id}, {count} brokers")
        pos, ids = 8, set()
        for _ in range(count):
            (node_id, host_len) = struct.unpack_from(">ih", body, pos)
            pos += 6 + max(host_len, 0) + 4
            (rack_len,) = struct.unpack_from(">h", body, pos)
            pos += 2 + max(rack_len, 0)
            ids.add(node_id)
    except (struct.error, ValueError) as exc:
        raise ProtocolError(
            f"not a Metadata v1 response: {exc}",
            api_key=METADATA_KEY,
            api_version=1,
            broker=address,
        ) from exc
    return frozenset(ids)


def _parse_api_versions_v0(body: bytes, address: str) -> Mapping[int, tuple[int, int]]:
    def fail(why: str) -> ProtocolError:
        return ProtocolError(why, api_key=API_VERSIONS_KEY, api_version=0, broker=address)

    # ResponseHeader v0 (ApiVersions always answers with header v0, KIP-511) then
    # error_code int16, api_keys [api_key int16, min int16, max int16].
    correlation_id, error_code, count = struct.unpack_from(">ihi", body, 0)
    if correlation_id != _CORRELATION_ID:
        raise fail(f"correlation id {correlation_id} does not match the request")
    if error_code != 0:
        raise fail(f"ApiVersions v0 answered with error code {error_code}")
    if count < 0 or 10 + 6 * count > len(body):
        raise fail(f"api_keys count {count} does not fit in {len(body)} bytes")
    versions: dict[int, tuple[int, int]] = {}
    for index in range(count):
        key, low, high = struct.unpack_from(">hhh", body, 10 + 6 * index)
        versions[key] = (low, high)
    return versions


def wait_until_answering(
    addresses: list[str],
    *,
    timeout_s: float,
    still_starting: Callable[[], str | None],
    ssl_context: ssl.SSLContext | None = None,
) -> dict[str, Mapping[int, tuple[int, int]]]:
    """Poll every address with ApiVersions v0 until all answer.

    ``still_starting`` returns ``None`` while the broker process is alive, or a reason
    string once it has died (the wait then stops at once). Raises
    :class:`TimeoutError` with the last probe error when the deadline passes.
    """
    deadline = time.monotonic() + timeout_s
    answers: dict[str, Mapping[int, tuple[int, int]]] = {}
    last_error: Exception | None = None
    delay = 0.005
    while True:
        for address in addresses:
            if address in answers:
                continue
            try:
                answers[address] = probe_api_versions(
                    address, timeout_s=1.0, ssl_context=ssl_context
                )
            except (BrokerConnectionError, RequestTimeoutError, ProtocolError) as exc:
                last_error = exc
        if len(answers) == len(addresses):
            return answers
        died = still_starting()
        if died is not None:
            raise ChildProcessError(died)
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"broker did not answer ApiVersions within {timeout_s} s: {last_error}"
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
