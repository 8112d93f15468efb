"""The hand-built ApiVersions v0 probe and the small helpers of coopconsumer.testing.

A throwaway socket server plays the broker, so every branch (good answer, wrong
correlation id, error code, hang-up, silence) runs without a real broker.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coopconsumer import (
    BrokerConnectionError,
    ConfigurationError,
    ProtocolError,
    RequestTimeoutError,
)
from coopconsumer.testing import embedded_broker, free_port, probe_api_versions, unique_name
from coopconsumer.testing._ports import split_address

Responder = Callable[[socket.socket, bytes], None]


@pytest.fixture
def fake_broker() -> Iterator[Callable[[Responder], str]]:
    """Start a one-connection server running ``respond(conn, request_frame)``."""
    servers: list[tuple[socket.socket, threading.Thread]] = []

    def start(respond: Responder) -> str:
        server = socket.create_server(("127.0.0.1", 0))

        def serve() -> None:
            conn, _ = server.accept()
            with conn:
                (size,) = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))
                respond(conn, conn.recv(size, socket.MSG_WAITALL))

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"127.0.0.1:{server.getsockname()[1]}"

    yield start
    for server, thread in servers:
        server.close()
        thread.join(5)


def _response(correlation_id: int, error_code: int, keys: list[tuple[int, int, int]]) -> bytes:
    body = struct.pack(">ihi", correlation_id, error_code, len(keys))
    body += b"".join(struct.pack(">hhh", *key) for key in keys)
    return struct.pack(">i", len(body)) + body


def _correlation_id(request: bytes) -> int:
    correlation_id: int = struct.unpack_from(">i", request, 4)[0]
    return correlation_id


def test_request_is_an_api_versions_v0_frame(fake_broker: Callable[[Responder], str]) -> None:
    seen: list[bytes] = []

    def respond(conn: socket.socket, request: bytes) -> None:
        seen.append(request)
        conn.sendall(_response(_correlation_id(request), 0, [(18, 0, 3)]))

    probe_api_versions(fake_broker(respond))
    api_key, api_version, _, client_id_len = struct.unpack_from(">hhih", seen[0])
    assert (api_key, api_version) == (18, 0)
    assert seen[0][10:] == b"coopconsumer-testing-probe"
    assert client_id_len == len(seen[0]) - 10


def test_answer_maps_api_keys_to_version_ranges(fake_broker: Callable[[Responder], str]) -> None:
    keys = [(11, 0, 9), (14, 0, 5), (18, 0, 4)]
    address = fake_broker(lambda conn, req: conn.sendall(_response(_correlation_id(req), 0, keys)))
    assert probe_api_versions(address) == {11: (0, 9), 14: (0, 5), 18: (0, 4)}


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda cid: _response(cid + 1, 0, []), "correlation id"),
        (lambda cid: _response(cid, 35, []), "error code 35"),
        (lambda cid: struct.pack(">i", 4) + b"\0\0\0\0", "implausible response size"),
        (lambda cid: _response(cid, 0, [])[:-4] + struct.pack(">i", 99), "does not fit"),
    ],
)
def test_malformed_answers_are_protocol_errors(
    fake_broker: Callable[[Responder], str], make: Callable[[int], bytes], match: str
) -> None:
    address = fake_broker(lambda conn, req: conn.sendall(make(_correlation_id(req))))
    with pytest.raises(ProtocolError, match=match) as info:
        probe_api_versions(address)
    assert info.value.api_key == 18


def test_hang_up_is_a_connection_error(fake_broker: Callable[[Responder], str]) -> None:
    address = fake_broker(lambda conn, req: None)
    with pytest.raises(BrokerConnectionError):
        probe_api_versions(address)


def test_silence_is_a_request_timeout(fake_broker: Callable[[Responder], str]) -> None:
    answered = threading.Event()

    def stay_silent(conn: socket.socket, request: bytes) -> None:
        answered.wait(10)

    address = fake_broker(stay_silent)
    try:
        with pytest.raises(RequestTimeoutError):
            probe_api_versions(address, timeout_s=0.3)
    finally:
        answered.set()


def test_closed_port_is_a_connection_error() -> None:
    with pytest.raises(BrokerConnectionError):
        probe_api_versions(f"127.0.0.1:{free_port()}", timeout_s=2.0)


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.create_server(("127.0.0.1", port)):
        pass


@pytest.mark.parametrize(
    ("address", "expected"),
    [("127.0.0.1:9092", ("127.0.0.1", 9092)), ("[::1]:19092", ("::1", 19092))],
)
def test_split_address(address: str, expected: tuple[str, int]) -> None:
    assert split_address(address) == expected


@pytest.mark.parametrize("bad", ["", "localhost", ":9092", "host:", "host:0", "host:65536"])
def test_split_address_rejects(bad: str) -> None:
    with pytest.raises(ConfigurationError):
        split_address(bad)


@given(st.text(max_size=400))
def test_unique_name_is_always_a_valid_topic_name(prefix: str) -> None:
    name = unique_name(prefix)
    assert 0 < len(name) <= 249
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    assert name not in (".", "..")
    assert unique_name(prefix) != name


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "redpanda"}, "kind must be"),
        ({"kind": "mock", "tls": object()}, "tls and sasl need"),
        ({"kind": "kafka", "transactions": True}, "Kafka has transactions of its own"),
        ({"kind": "tansu", "version": "4.4.0"}, "version needs kind='kafka'"),
        ({"kind": "tansu", "num_brokers": 2}, "single broker"),
        ({"kind": "mock", "num_brokers": 0}, "num_brokers"),
        ({"kind": "mock", "startup_timeout_s": 0}, "startup_timeout_s"),
    ],
)
def test_embedded_broker_rejects_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match), embedded_broker(**kwargs):  # type: ignore[arg-type]
        pytest.fail("must not start")
