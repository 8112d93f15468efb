"""A tiny in-process Kafka broker for the wire-client unit tests.

A listening socket on 127.0.0.1 served by threads that speak length-prefixed frames. Each
request is decoded with ``coopconsumer._protocol.decode_request`` and handed to a
handler, which may answer with a message, raw bytes, nothing, or hang up. The default
handler answers ApiVersions, Metadata, FindCoordinator and Heartbeat like a one-broker
cluster; tests override behaviour per API with ``on(api_key, handler)``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from coopconsumer._protocol import RequestHeader, decode_request, encode_response
from coopconsumer._protocol._schema import Request, Response
from coopconsumer._protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
    HeartbeatRequest,
    HeartbeatResponse,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

Handler = Callable[["FakeConn", RequestHeader, Request], None]

#: What the fake advertises unless a test says otherwise: v0-only Heartbeat keeps the
#: hand-made garbage simple; the rest is what we declare.
DEFAULT_VERSIONS: dict[int, tuple[int, int]] = {
    ApiVersionsRequest.API_KEY: (0, 3),
    MetadataRequest.API_KEY: (0, 12),
    FindCoordinatorRequest.API_KEY: (0, 6),
    HeartbeatRequest.API_KEY: (0, 4),
}


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its int32 size."""
    return struct.pack(">i", len(payload)) + payload


class ManualClock:
    """A monotonic clock the test moves by hand (sockets still run in real time).

    Deadlines then fire when the test says so, not when a loaded machine happens to
    stall: outcomes stay independent of scheduling.
    """

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeConn:
    """The broker side of one accepted connection."""

    def __init__(self, broker: FakeBroker, sock: socket.socket) -> None:
        self.broker = broker
        self.sock = sock
        self.closed = False
        #: Requests received but not answered yet (for handlers that answer later).
        self.held: list[tuple[RequestHeader, Request]] = []

    def reply(self, header: RequestHeader, response: Response) -> None:
        """Answer ``header``'s request with ``response`` at the request's version."""
        self.send_raw(frame(self.encode(header, response)))

    def encode(self, header: RequestHeader, response: Response) -> bytes:
        """``response`` as an unframed payload for ``header``'s request."""
        return encode_response(
            response, api_version=header.api_version, correlation_id=header.correlation_id
        )

    def send_raw(self, data: bytes, *, chunk: int | None = None) -> None:
        """Write raw bytes; ``chunk`` splits them into small separate writes."""
        if self.closed:
            return
        try:
            if chunk is None:
                self.sock.sendall(data)
            else:
                for start in range(0, len(data), chunk):
                    self.sock.sendall(data[start : start + chunk])
                    # Give the client a chance to read each piece on its own, so the
                    # test exercises reassembly (not a timing assertion).
                    threading.Event().wait(0.001)
        except OSError:
            self.closed = True

    def close(self) -> None:
        """Hang up."""
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
            self.sock.close()


class FakeBroker:
    """A scripted Kafka broker on a thread; use as a context manager."""

    def __init__(
        self,
        *,
        node_id: int = 1,
        versions: dict[int, tuple[int, int]] | None = None,
        api_versions_max: int = 3,
        advertise_api_versions_on_error: bool = False,
        port: int = 0,
    ) -> None:
        self.node_id = node_id
        self.versions = dict(DEFAULT_VERSIONS if versions is None else versions)
        #: Highest ApiVersions version this fake understands; above it, it answers a
        #: v0 body with UNSUPPORTED_VERSION as Kafka brokers do (KIP-511).
        self.api_versions_max = api_versions_max
        self.advertise_api_versions_on_error = advertise_api_versions_on_error
        self.topics: dict[str, int] = {}
        self.handlers: dict[int, Handler] = {}
        self.received: list[RequestHeader] = []
        self.connections = 0
        self._lock = threading.Lock()
        self._conns: list[FakeConn] = []
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(16)
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True)

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:port``."""
        return f"127.0.0.1:{self.port}"

    def on(self, api_key: int, handler: Handler) -> None:
        """Answer requests of ``api_key`` with ``handler`` instead of the default."""
        self.handlers[api_key] = handler

    def received_keys(self) -> list[tuple[int, int]]:
        """``(api_key, api_version)`` of every request received so far."""
        with self._lock:
            return [(h.api_key, h.api_version) for h in self.received]

    def drop_connections(self) -> None:
        """Hang up every open connection (the listener stays)."""
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            conn.close()

    def __enter__(self) -> FakeBroker:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop accepting, hang up, and join every thread (all sockets closed)."""
        self._stopping.set()
        if self._acceptor.is_alive():
            self._acceptor.join()
        self._listener.close()
        self.drop_connections()
        for thread in list(self._threads):
            thread.join()

    # ------------------------------------------------------------------ serving

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(0.05)
            conn = FakeConn(self, sock)
            with self._lock:
                self.connections += 1
                self._conns.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _recv_exact(self, conn: FakeConn, size: int) -> bytes | None:
        data = bytearray()
        while len(data) < size:
            if self._stopping.is_set() or conn.closed:
                return None
            try:
                chunk = conn.sock.recv(size - len(data))
            except TimeoutError:
                continue
            except OSError:
                return None
            if not chunk:
                return None
            data += chunk
        return bytes(data)

    def _serve(self, conn: FakeConn) -> None:
        try:
            while True:
                head = self._recv_exact(conn, 4)
                if head is None:
                    return
                (size,) = struct.unpack(">i", head)
                body = self._recv_exact(conn, size)
                if body is None:
                    return
                api_key, api_version, correlation_id = struct.unpack_from(">hhi", body)
                if api_key == ApiVersionsRequest.API_KEY and api_version > self.api_versions_max:
                    header = RequestHeader(
                        api_key=api_key,
                        api_version=api_version,
                        correlation_id=correlation_id,
                        client_id=None,
                    )
                    with self._lock:
                        self.received.append(header)
                    self._reject_api_versions(conn, header)
                    continue
                header, request = decode_request(body)
                with self._lock:
                    self.received.append(header)
                handler = self.handlers.get(header.api_key, self.default_handle)
                handler(conn, header, request)
        finally:
            conn.close()

    def _reject_api_versions(self, conn: FakeConn, header: RequestHeader) -> None:
        keys: tuple[ApiVersionsResponseApiVersion, ...] = ()
        if self.advertise_api_versions_on_error:
            keys = (
                ApiVersionsResponseApiVersion(
                    api_key=ApiVersionsRequest.API_KEY,
                    min_version=0,
                    max_version=self.api_versions_max,
                ),
            )
        body = ApiVersionsResponse(error_code=35, api_keys=keys)
        payload = encode_response(body, api_version=0, correlation_id=header.correlation_id)
        conn.send_raw(frame(payload))

    # ------------------------------------------------------------------ defaults

    def default_handle(self, conn: FakeConn, header: RequestHeader, request: Request) -> None:
        """One-broker-cluster answers for the APIs the client itself uses."""
        response: Any
        if isinstance(request, ApiVersionsRequest):
            response = ApiVersionsResponse(
                api_keys=tuple(
                    ApiVersionsResponseApiVersion(api_key=k, min_version=lo, max_version=hi)
                    for k, (lo, hi) in sorted(self.versions.items())
                )
            )
        elif isinstance(request, MetadataRequest):
            response = MetadataResponse(
                brokers=(
                    MetadataResponseBroker(node_id=self.node_id, host="127.0.0.1", port=self.port),
                ),
                controller_id=self.node_id,
                topics=tuple(
                    MetadataResponseTopic(
                        name=name,
                        partitions=tuple(
                            MetadataResponsePartition(
                                partition_index=i,
                                leader_id=self.node_id,
                                replica_nodes=(self.node_id,),
                                isr_nodes=(self.node_id,),
                            )
                            for i in range(count)
                        ),
                    )
                    for name, count in sorted(self.topics.items())
                    if request.topics is None
                    or (not request.topics and header.api_version == 0)
                    or name in {t.name for t in request.topics}
                ),
            )
        elif isinstance(request, FindCoordinatorRequest):
            response = self.coordinator_response(header, request, error_code=0)
        elif isinstance(request, HeartbeatRequest):
            response = HeartbeatResponse(error_code=0)
        else:
            raise AssertionError(f"fake broker has no default for {type(request).__name__}")
        conn.reply(header, response)

    def coordinator_response(
        self, header: RequestHeader, request: FindCoordinatorRequest, *, error_code: int
    ) -> FindCoordinatorResponse:
        """A FindCoordinator answer naming this broker (or ``error_code``)."""
        if header.api_version >= 4:
            return FindCoordinatorResponse(
                coordinators=tuple(
                    FindCoordinatorResponseCoordinator(
                        key=key,
                        node_id=self.node_id if error_code == 0 else -1,
                        host="127.0.0.1" if error_code == 0 else "",
                        port=self.port if error_code == 0 else -1,
                        error_code=error_code,
                    )
                    for key in request.coordinator_keys
                )
            )
        return FindCoordinatorResponse(
            error_code=error_code,
            node_id=self.node_id if error_code == 0 else -1,
            host="127.0.0.1" if error_code == 0 else "",
            port=self.port if error_code == 0 else -1,
        )
