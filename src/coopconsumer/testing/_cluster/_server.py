"""The test cluster on the wire: one loopback port per broker, one server thread.

:class:`ReplicationCluster` owns a ``ClusterModel`` and serves it with Kafka's wire
protocol. Every socket lives on one thread running a ``selectors`` loop; test code
changes the cluster (kill, pause, revive, sizes, time) through :meth:`_call`, which runs
the change on that thread and waits for it, so no socket is touched from two threads.

A dead broker's port is closed (connections reset, new ones refused) and reopened on
the same port when it is revived; a paused broker keeps its connections but reads
nothing until revived, like a stalled process.

Imports the standard library, attrs, ``coopconsumer._protocol`` and the siblings.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from ..._errors import ConfigurationError, ProtocolError
from ..._protocol import Request, decode, encode_response, request_header_version
from ..._protocol._codec import _Malformed, skip_header_tags
from ..._protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from ._cluster_api import ClusterCommandError, ReplicationCluster
from ._handlers import SUPPORTED_APIS, Endpoint, handle, supported_api_versions
from ._model import (
    UNKNOWN_TOPIC_OR_PARTITION,
    BrokerSpec,
    BrokerState,
    BrokerView,
    ClusterModel,
    Command,
    CreateTopic,
    KillBroker,
    Outcome,
    PartitionView,
    PauseBroker,
    Produce,
    ReviveBroker,
    SetByteRate,
    SetProduceRate,
    SetSize,
)

__all__ = ["InProcessCluster", "ManualClock"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_SIZE: Final = struct.Struct(">i")
_HEADER: Final = struct.Struct(">hhi")
_I16: Final = struct.Struct(">h")
_MAX_FRAME: Final = 100 * 1024 * 1024
_UNSUPPORTED_VERSION: Final = 35


class ManualClock:
    """A clock that moves only when told: ``ReplicationCluster(clock=ManualClock())``
    makes replication progress exactly as far as ``advance_time`` says."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        with self._lock:
            self._now += seconds


class _Connection:
    __slots__ = ("inbuf", "node_id", "outbuf", "sock")

    def __init__(self, sock: socket.socket, node_id: int) -> None:
        self.sock = sock
        self.node_id = node_id
        self.inbuf = bytearray()
        self.outbuf = bytearray()


class InProcessCluster(ReplicationCluster):
    """The replication test cluster served by a thread of this process (see
    :class:`ReplicationCluster` for the methods)."""

    def __init__(
        self,
        brokers: Sequence[BrokerSpec],
        *,
        host: str = "127.0.0.1",
        clock: Callable[[], float] = time.monotonic,
        replica_lag_time_max_s: float = 30.0,
        cluster_id: str = "coopconsumer-test-cluster",
    ) -> None:
        self._clock = clock
        self._start = clock()
        self._model = ClusterModel(
            brokers,
            cluster_id=cluster_id,
            replica_lag_time_max_s=replica_lag_time_max_s,
        )
        self._host = host
        self._selector = selectors.DefaultSelector()
        self._listeners: dict[int, socket.socket] = {}
        self._endpoints: dict[int, Endpoint] = {}
        self._connections: dict[socket.socket, _Connection] = {}
        self._tasks: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] = (
            queue.SimpleQueue()
        )
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._requests: dict[str, int] = {}
        self._response_bytes: dict[str, int] = {}
        try:
            for spec in brokers:
                self._listen(spec.node_id, 0)
        except BaseException:
            self._close_all()
            raise

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> InProcessCluster:
        """Start serving (idempotent); returns self."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="coopconsumer-test-cluster", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Close every port and stop the server thread (idempotent)."""
        if self._thread is None:
            self._close_all()
            return
        if not self._stopping:
            self._stopping = True
            self._wake()
            self._thread.join(timeout=10)
        self._close_all()

    def __enter__(self) -> InProcessCluster:
        return self.start()

    # ------------------------------------------------------------------ reading

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of every broker, for ``bootstrap.servers``."""
        return ",".join(f"{e.host}:{e.port}" for e in self._endpoints.values())

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(self._endpoints)

    def address(self, node_id: int) -> tuple[str, int]:
        """Where broker ``node_id`` listens (also while it is dead)."""
        endpoint = self._endpoints[node_id]
        return endpoint.host, endpoint.port

    @property
    def now(self) -> float:
        """Seconds since the cluster started, on its clock."""
        return self._clock() - self._start

    def brokers(self) -> list[BrokerView]:
        return self._call(lambda: self._read_model(lambda m: m.brokers()))

    def partition(self, topic: str, partition: int) -> PartitionView:
        """A snapshot of one partition (``KeyError``/``IndexError`` if unknown)."""
        return self._call(lambda: self._read_model(lambda m: m.partition(topic, partition)))

    def partitions(self, topic: str) -> list[PartitionView]:
        return self._call(lambda: self._read_model(lambda m: m.partitions(topic)))

    def topics(self) -> list[str]:
        return self._call(self._model.topics)

    def topics_being_deleted(self) -> dict[str, list[tuple[int, int]]]:
        return self._call(lambda: self._read_model(lambda m: m.topics_being_deleted()))

    def request_counts(self) -> dict[str, int]:
        return self._call(lambda: dict(self._requests))

    def response_bytes(self) -> dict[str, int]:
        return self._call(lambda: dict(self._response_bytes))

    def reset_request_counts(self) -> None:
        def reset() -> None:
            self._requests.clear()
            self._response_bytes.clear()

        self._call(reset)

    @property
    def unclean_elections(self) -> int:
        return self._model.unclean_elections

    # ------------------------------------------------------------------ changing

    def create_topic(
        self,
        name: str,
        assignment: Sequence[Sequence[int]],
        *,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic directly (no wire): partition ``i`` on ``assignment[i]``."""
        self._command(CreateTopic(name=name, assignment=assignment, configs=configs or {}))

    def kill_broker(self, node_id: int) -> None:
        """The broker dies: its port closes, its replicas go offline, leaderships move."""
        self._command(KillBroker(node_id=node_id))

    def pause_broker(self, node_id: int) -> None:
        """The broker stalls: it answers nothing and fetches nothing until revived."""
        self._command(PauseBroker(node_id=node_id))

    def revive_broker(self, node_id: int) -> None:
        """A dead or paused broker returns (same port, the bytes it had)."""
        self._command(ReviveBroker(node_id=node_id))

    def set_partition_size(self, topic: str, partition: int, size_bytes: int) -> None:
        """The leader (and in-sync followers) now hold ``size_bytes``."""
        self._command(SetSize(topic=topic, partition=partition, size_bytes=size_bytes))

    def grow_partition(self, topic: str, partition: int, num_bytes: int) -> None:
        """Append ``num_bytes`` with acks=all (``ClusterCommandError`` if not
        acknowledged, e.g. NOT_ENOUGH_REPLICAS)."""
        self._command(Produce(topic=topic, partition=partition, num_bytes=num_bytes))

    def set_replication_rate(self, node_id: int, bytes_per_s: float) -> None:
        """How fast broker ``node_id``'s followers copy, all together."""
        self._command(SetByteRate(node_id=node_id, replication_bytes_per_s=bytes_per_s))

    def set_produce_rate(self, topic: str, partition: int, bytes_per_s: float) -> None:
        """Producers write ``bytes_per_s`` to the partition with acks=all (0 stops)."""
        self._command(SetProduceRate(topic=topic, partition=partition, bytes_per_s=bytes_per_s))

    def advance_time(self, seconds: float) -> None:
        """Move a :class:`ManualClock` forward (``ConfigurationError`` on a real clock)."""
        if not isinstance(self._clock, ManualClock):
            raise ConfigurationError("advance_time needs a cluster started with manual_clock")
        self._clock.advance(seconds)
        self._call(self._advance)

    # ------------------------------------------------------------------ server thread

    def _command(self, command: Command) -> None:
        outcome = self._call(lambda: self._apply(command))
        if not outcome.ok:
            raise ClusterCommandError(outcome)

    def _apply(self, command: Command) -> Outcome:
        outcome = self._model.apply(command, self.now)
        self._sync_sockets()
        self._serve_pending()
        return outcome

    def _advance(self) -> None:
        self._model.advance(self.now)

    def _read_model(self, read: Callable[[ClusterModel], T]) -> T:
        self._advance()
        try:
            return read(self._model)
        except (KeyError, IndexError) as exc:
            raise ClusterCommandError(
                Outcome(error_code=UNKNOWN_TOPIC_OR_PARTITION, message=f"unknown: {exc}")
            ) from None

    def _call(self, fn: Callable[[], T]) -> T:
        if self._thread is None or self._stopping or threading.current_thread() is self._thread:
            return fn()
        done = threading.Event()
        box: list[Any] = []
        self._tasks.put((fn, box, done))
        self._wake()
        if not done.wait(timeout=30):
            raise TimeoutError("the test cluster's server thread did not answer")
        if box and isinstance(box[0], BaseException):
            raise box[0]
        return box[1]  # type: ignore[no-any-return]

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _run(self) -> None:
        try:
            while not self._stopping:
                for key, events in self._selector.select(timeout=1.0):
                    if key.data is None:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                    elif isinstance(key.data, int):
                        self._accept(key.data)
                    else:
                        conn: _Connection = key.data
                        if events & selectors.EVENT_READ:
                            self._read(conn)
                        if events & selectors.EVENT_WRITE and conn.sock in self._connections:
                            self._flush(conn)
                self._run_tasks()
        except Exception:
            log.exception("test cluster server thread failed")
        finally:
            self._run_tasks()

    def _run_tasks(self) -> None:
        while True:
            try:
                fn, box, done = self._tasks.get_nowait()
            except queue.Empty:
                return
            try:
                box[:] = [None, fn()]
            except BaseException as exc:
                box[:] = [exc]
            done.set()

    def _listen(self, node_id: int, port: int) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self._host, port))
            sock.listen(64)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._listeners[node_id] = sock
        self._endpoints[node_id] = Endpoint(host=self._host, port=sock.getsockname()[1])
        self._selector.register(sock, selectors.EVENT_READ, node_id)

    def _accept(self, node_id: int) -> None:
        listener = self._listeners.get(node_id)
        if listener is None:
            return
        try:
            sock, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Connection(sock, node_id)
        self._connections[sock] = conn
        self._selector.register(sock, selectors.EVENT_READ, conn)

    def _read(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        conn.inbuf += data
        self._serve(conn)

    def _serve(self, conn: _Connection) -> None:
        while self._model.broker_state(conn.node_id) is BrokerState.ONLINE:
            if len(conn.inbuf) < 4:
                return
            (size,) = _SIZE.unpack_from(conn.inbuf, 0)
            if size < 0 or size > _MAX_FRAME:
                self._close(conn)
                return
            if len(conn.inbuf) < 4 + size:
                return
            frame = bytes(conn.inbuf[4 : 4 + size])
            del conn.inbuf[: 4 + size]
            reply = self._answer(conn.node_id, frame)
            if reply is None:
                self._close(conn)
                return
            conn.outbuf += _SIZE.pack(len(reply)) + reply
            self._flush(conn)
            if conn.sock not in self._connections:
                return

    def _answer(self, node_id: int, frame: bytes) -> bytes | None:
        """The response frame (without size) or None to close the connection."""
        if len(frame) < _HEADER.size:
            return None
        api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
        if api_key == ApiVersionsRequest.API_KEY and api_version > ApiVersionsRequest.MAX_VERSION:
            # KIP-511: answer an ApiVersions version we do not know in v0, with the error
            # and our versions, so the client retries with one we support.
            refusal = ApiVersionsResponse(
                error_code=_UNSUPPORTED_VERSION, api_keys=supported_api_versions()
            )
            return encode_response(refusal, api_version=0, correlation_id=correlation_id)
        try:
            request = _decode_request_body(frame, api_key, api_version)
        except ProtocolError as exc:
            log.info("test cluster broker %d: closing on a bad request: %s", node_id, exc)
            return None
        name = type(request).__name__
        self._requests[name] = self._requests.get(name, 0) + 1
        response = handle(self._model, node_id, request, api_version, self.now, self._endpoints)
        reply = encode_response(response, api_version=api_version, correlation_id=correlation_id)
        self._response_bytes[name] = self._response_bytes.get(name, 0) + len(reply)
        return reply

    def _flush(self, conn: _Connection) -> None:
        try:
            while conn.outbuf:
                sent = conn.sock.send(conn.outbuf)
                del conn.outbuf[:sent]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._close(conn)
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbuf else 0)
        self._selector.modify(conn.sock, events, conn)

    def _close(self, conn: _Connection) -> None:
        if self._connections.pop(conn.sock, None) is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        conn.sock.close()

    def _sync_sockets(self) -> None:
        """Dead brokers lose their port and connections; revived ones get them back."""
        for node_id, endpoint in self._endpoints.items():
            dead = self._model.broker_state(node_id) is BrokerState.DEAD
            listener = self._listeners.get(node_id)
            if dead and listener is not None:
                self._selector.unregister(listener)
                listener.close()
                del self._listeners[node_id]
                for conn in [c for c in self._connections.values() if c.node_id == node_id]:
                    self._close(conn)
            elif not dead and listener is None:
                self._listen(node_id, endpoint.port)

    def _serve_pending(self) -> None:
        for conn in list(self._connections.values()):
            if conn.inbuf:
                self._serve(conn)

    def _close_all(self) -> None:
        for conn in list(self._connections.values()):
            self._close(conn)
        for listener in self._listeners.values():
            listener.close()
        self._listeners.clear()
        for sock in (self._wake_r, self._wake_w):
            sock.close()
        with contextlib.suppress(Exception):
            self._selector.close()


def _decode_request_body(frame: bytes, api_key: int, api_version: int) -> Request:
    """The request in ``frame`` (header included), ignoring bytes after its body.

    Kafka brokers read a request's fields and ignore what follows; librdkafka 2.x
    sends Metadata v12 with bytes after the body, so a strict decoder would refuse a
    client Kafka accepts.
    """
    cls = SUPPORTED_APIS.get(api_key)
    if cls is None:
        raise ProtocolError("unknown API key", api_key=api_key, api_version=api_version)
    pos = _HEADER.size
    if len(frame) < pos + 2:
        raise ProtocolError("request shorter than its header", api_key=api_key)
    (client_id_length,) = _I16.unpack_from(frame, pos)
    pos += 2 + max(client_id_length, 0)
    if pos > len(frame):
        raise ProtocolError("client_id longer than the request", api_key=api_key)
    if request_header_version(cls, api_version) >= 2:
        try:
            _tags, pos = skip_header_tags(frame, pos)
        except _Malformed as exc:
            raise ProtocolError(f"malformed request header: {exc}", api_key=api_key) from None
    return decode(cls, frame[pos:], api_version)
