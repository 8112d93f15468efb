"""``KafkaClient``: the cluster-wide, single-threaded Kafka wire client.

Keeps one ``BrokerConnection`` per broker node, all driven by one ``selectors`` loop in
``poll()``; learns the cluster from Metadata (bootstrap servers first), reconnects with
exponential backoff and jitter, gives group coordinators connections of their own, and
offers blocking conveniences (``request``, ``request_any``, ``metadata``) for tools,
tests and admin code (the group member looks its coordinator up itself). Response
error codes are data, not exceptions: callers map them to actions (``raise_for_error``
is there for simple callers).

Every connection is secured as ``ClientConfig.security`` says (TLS, SASL): the TLS
context and the SASL setup are built once, when the client is created, so a bad
certificate file or key password is a ``ConfigurationError`` then. A connection that
fails to authenticate marks its node: requests for it fail at once with the
``AuthenticationError`` (no silent retry loop) until a later attempt succeeds.

General-purpose on purpose (later admin APIs ride on it): no consumer-group state lives
here. Its settings are ``_client_config.ClientConfig``; what it keeps per broker node,
and decides on one node alone (backoff, parked requests, rank), is ``_nodes.Node``.
Imports the standard library, ``_errors``, ``_protocol``, the security package's TLS
context and SASL setup (``_security._tls``, ``_security._credentials``) and the sibling
``_io`` modules ``_backoff``, ``_client_config``, ``_connection``, ``_future`` and
``_nodes``; never ``confluent_kafka``.
"""

from __future__ import annotations

import logging
import random
import selectors
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Final

from .._errors import (
    BrokerConnectionError,
    ConfigurationError,
    RequestTimeoutError,
)
from .._protocol._schema import Request
from .._protocol.cluster import BrokerInfo, ClusterSnapshot, PartitionInfo, TopicInfo
from .._protocol.messages import (
    ALL_REQUESTS,
    MetadataRequest,
)
from .._protocol.queries import (
    CoordinatorAnswer,
    MetadataQuery,
    coordinator_answer,
)
from .._security._credentials import SaslSetup
from .._security._tls import build_ssl_context
from ._backoff import ExponentialBackoff
from ._client_config import ClientConfig
from ._connection import BrokerConnection, ConnectionState
from ._future import PendingRequest
from ._nodes import Node

__all__ = [
    "BrokerInfo",
    "ClientConfig",
    "ClusterSnapshot",
    "CoordinatorAnswer",
    "KafkaClient",
    "PartitionInfo",
    "TopicInfo",
    "coordinator_answer",
]

log = logging.getLogger(__name__)

#: Coordinator connections get the node id ``_COORDINATOR_ID_BASE - node_id``, as in
#: Java's AbstractCoordinator (``Integer.MAX_VALUE - nodeId``).
_COORDINATOR_ID_BASE: Final = 2**31 - 1


class KafkaClient:
    """A Kafka wire client for the whole cluster, driven by one thread.

    Only ``wakeup()`` may be called from another thread. ``send`` and ``poll`` are the
    non-blocking core; ``request``, ``request_any``, ``metadata`` and
    ``negotiated_version`` block (by polling) until done or timed out.

    Errors: I/O problems come back as ``BrokerConnectionError``, ``RequestTimeoutError``
    or ``ProtocolError`` on the request's ``PendingRequest``; error codes inside a
    response are not raised. After ``close()`` requests fail with
    ``BrokerConnectionError``; the client cannot be reopened.
    """

    #: The protected surface the asyncio host's ``aio._loop_client.LoopKafkaClient``
    #: uses: the selector it replaces with one on the event loop's readiness callbacks,
    #: ``wakeup`` (which wakes the loop instead) and the wake-up socket it unregisters.
    #: tests/aio/test_aio_hooks.py checks the list against both sides;
    #: docs/architecture.md, "The asyncio host's hooks".
    _ASYNCIO_HOST_SURFACE: ClassVar[frozenset[str]] = frozenset({"_selector", "_wake_r", "wakeup"})

    def __init__(
        self,
        config: ClientConfig,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._reconnect_backoff = ExponentialBackoff(
            config.reconnect_backoff_ms, config.reconnect_backoff_max_ms, rng=self._rng
        )
        security = config.security
        # Built once: a bad certificate, key or password fails here, at construction.
        self._ssl_context = build_ssl_context(security) if security.uses_tls else None
        self._sasl = SaslSetup(security) if security.uses_sasl else None
        self._selector = selectors.DefaultSelector()
        self._closed = False
        self._completed: list[PendingRequest[Any]] = []
        # Bootstrap servers get negative ids (-1, -2, ...) as in Java, so they never
        # collide with real broker ids.
        self._bootstrap_nodes: dict[int, Node] = {
            -(i + 1): Node(-(i + 1), host, port, "bootstrap")
            for i, (host, port) in enumerate(config.bootstrap_servers)
        }
        self._nodes: dict[int, Node] = dict(self._bootstrap_nodes)
        #: Node ids of dedicated coordinator connections (see ``add_coordinator``).
        self._coordinator_ids: set[int] = set()
        self._cluster: ClusterSnapshot | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        try:
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        except BaseException:
            self._wake_r.close()
            self._wake_w.close()
            self._selector.close()
            raise

    # ------------------------------------------------------------------ properties

    @property
    def config(self) -> ClientConfig:
        """The configuration this client was built with."""
        return self._config

    @property
    def cluster(self) -> ClusterSnapshot | None:
        """The last Metadata answer, None before the first ``metadata()``."""
        return self._cluster

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def brokers(self) -> dict[int, BrokerInfo]:
        """Known brokers by node id (bootstrap and coordinator entries excluded)."""
        return {
            n.node_id: BrokerInfo(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
            for n in self._nodes.values()
            if n.node_id >= 0 and n.node_id not in self._coordinator_ids
        }

    def broker_name(self, node_id: int) -> str:
        """``host:port (node N)`` for error messages; raises ``KeyError`` if unknown."""
        return self._nodes[node_id].broker

    def add_broker(self, node_id: int, host: str, port: int) -> None:
        """Teach the client a broker address (FindCoordinator does this itself).

        If the address of a known node changed, its connection is closed.
        """
        node = self._nodes.get(node_id)
        if node is None:
            self._nodes[node_id] = Node(node_id, host, port)
        else:
            node.move_to(host, port)

    def add_coordinator(self, node_id: int, host: str, port: int) -> int:
        """Register broker ``node_id`` as a group coordinator on a connection of its own.

        Returns the node id to send group requests to. A broker handles one request
        per connection at a time, and the coordinator parks JoinGroup and SyncGroup
        for up to the rebalance timeout; on a shared connection a Metadata or
        ListOffsets request would wait behind them, time out, and take the parked
        request down with the connection. Java keeps the coordinator on a separate
        connection for this reason (node id ``Integer.MAX_VALUE - nodeId``); so does
        this. The coordinator id is never chosen by ``least_loaded_node`` and is not
        listed by ``brokers()``.
        """
        if not 0 <= node_id < _COORDINATOR_ID_BASE // 2:
            raise ConfigurationError(f"coordinator node id {node_id} is out of range")
        coordinator_id = _COORDINATOR_ID_BASE - node_id
        self._coordinator_ids.add(coordinator_id)
        self.add_broker(coordinator_id, host, port)
        self._nodes[coordinator_id].label = f"coordinator, node {node_id}"
        return coordinator_id

    # ------------------------------------------------------------------ non-blocking core

    def send(
        self,
        node_id: int,
        request: Request,
        *,
        timeout_ms: float | None = None,
        api_version: int | None = None,
    ) -> PendingRequest[Any]:
        """Send ``request`` to broker ``node_id``; never blocks, never raises for I/O.

        Connects if needed (respecting reconnect backoff). The ``PendingRequest``
        completes inside ``poll()`` with the decoded response or a typed error. The
        timeout (default ``request_timeout_ms``) counts from now. ``api_version`` pins
        a version; by default the highest common one is used.
        """
        timeout_s = (self._config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000.0
        node = self._nodes.get(node_id)
        broker = node.broker if node is not None else f"node {node_id}"
        future: PendingRequest[Any] = PendingRequest(
            request,
            node_id=node_id,
            broker=broker,
            deadline=self._clock() + timeout_s,
            api_version=api_version,
        )
        if self._closed:
            self._fail(future, BrokerConnectionError("client is closed", broker=broker))
        elif node is None:
            self._fail(
                future,
                BrokerConnectionError(f"unknown broker node id {node_id}", broker=broker),
            )
        else:
            conn = self._connection_for(node)
            if conn is None and node.auth_failure is not None:
                # The last attempt could not authenticate: say so now rather than park
                # the request until the next attempt fails the same way.
                self._fail(future, node.auth_failure)
            elif conn is None:
                node.waiting.append(future)
            else:
                conn.enqueue(future)
        return future

    def poll(self, timeout_s: float) -> None:
        """Drive every socket for up to ``timeout_s`` seconds.

        Returns early when something completed, a deadline passed or ``wakeup()`` was
        called. Completes futures, expires timeouts, reconnects nodes whose backoff
        ended and that have waiting requests, closes idle connections, then runs the
        completed requests' callbacks.
        """
        if self._closed:
            return
        now = self._clock()
        self._start_due_connections(now)
        wait = max(0.0, timeout_s)
        deadline = self._next_deadline()
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - now))
        if self._completed:
            wait = 0.0  # callbacks are due: do not sleep before running them
        for key, mask in self._selector.select(wait):
            if key.data is None:
                self._drain_wakeups()
            else:
                conn: BrokerConnection = key.data
                conn.handle_io(mask)
        now = self._clock()
        for node in self._nodes.values():
            if node.connection is not None:
                node.connection.expire(now)
            self._expire_waiting(node, now)
        self._reap(now)
        self._start_due_connections(now)
        self._run_callbacks()

    def wakeup(self) -> None:
        """Make a concurrent or the next ``poll()`` return promptly. Thread-safe."""
        try:
            self._wake_w.send(b"\x00")
        except (BlockingIOError, InterruptedError):
            pass  # the pipe is full: a wakeup is already pending
        except OSError:
            pass  # closed: nothing to wake

    def ready(self, node_id: int) -> bool:
        """Whether ``node_id`` has a negotiated connection; starts connecting if not.

        Non-blocking; drive ``poll()`` and ask again. Raises ``KeyError`` for an unknown
        node.
        """
        node = self._nodes[node_id]
        if self._closed:
            return False
        conn = self._connection_for(node)
        return conn is not None and conn.state is ConnectionState.READY

    def ready_now(self, node_id: int) -> bool:
        """Whether ``node_id`` has a negotiated connection, without connecting."""
        conn = self._nodes[node_id].connection
        return conn is not None and conn.state is ConnectionState.READY

    def in_flight_count(self, node_id: int | None = None) -> int:
        """Requests sent and not yet answered, for one node or all."""
        nodes = self._nodes.values() if node_id is None else [self._nodes[node_id]]
        return sum(
            (n.connection.in_flight_count + n.connection.queued_count if n.connection else 0)
            + len(n.waiting)
            for n in nodes
        )

    def reconnect_delay_ms(self, node_id: int) -> float:
        """Remaining reconnect backoff of ``node_id`` (0 if it may connect now)."""
        node = self._nodes[node_id]
        return max(0.0, (node.next_attempt - self._clock()) * 1000.0)

    def last_reconnect_backoff_ms(self, node_id: int) -> float:
        """The backoff chosen after ``node_id``'s last connection loss (0 if none)."""
        return self._nodes[node_id].last_backoff_ms

    def connection_losses(self, node_id: int) -> int:
        """How many connections to ``node_id`` closed on an error (lost, refused,
        failed), ever; a deliberate close (idle, ``close()``) does not count. A caller
        that must know when the broker may have dropped its per-connection state (a
        KIP-848 member, whose coordinator may forget what it owns) compares counts."""
        return self._nodes[node_id].losses

    def connection_failures(self, node_id: int) -> int:
        """Consecutive failed connections to ``node_id`` since its last good one."""
        return self._nodes[node_id].failures

    def try_negotiated_version(self, node_id: int, api_key: int | type[Request]) -> int | None:
        """Non-blocking ``negotiated_version``: None while not yet connected.

        Raises the node's ``AuthenticationError`` when its last connection could not
        authenticate (TLS or SASL) and no new attempt is under way: a caller polling
        for readiness learns it at once instead of waiting for a timeout.
        """
        node = self._nodes[node_id]
        conn = self._connection_for(node)
        if conn is None and node.auth_failure is not None:
            raise node.auth_failure
        if conn is None or conn.state is not ConnectionState.READY:
            return None
        return conn.negotiated_version(_request_type(api_key))

    # ------------------------------------------------------------------ blocking helpers

    def request(
        self,
        node_id: int,
        request: Request,
        *,
        timeout_ms: float | None = None,
        api_version: int | None = None,
    ) -> Any:
        """Send and poll until answered; returns the decoded response.

        Raises the request's typed error (``BrokerConnectionError``,
        ``RequestTimeoutError``, ``ProtocolError``, ``KafkaError`` UNSUPPORTED_VERSION);
        error codes in the response are returned, not raised.
        """
        future = self.send(node_id, request, timeout_ms=timeout_ms, api_version=api_version)
        self._wait(future)
        return future.result()

    def request_any(
        self,
        request: Request,
        *,
        timeout_ms: float | None = None,
        api_version: int | None = None,
    ) -> Any:
        """``request`` to the least-loaded reachable broker (bootstrap ones if no
        metadata yet); on a connection error the next candidate is tried within the
        same timeout."""
        timeout_s = (self._config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000.0
        deadline = self._clock() + timeout_s
        last_error: BaseException | None = None
        for node_id in self._candidates():
            remaining_ms = (deadline - self._clock()) * 1000.0
            if remaining_ms <= 0:
                break
            try:
                return self.request(
                    node_id, request, timeout_ms=remaining_ms, api_version=api_version
                )
            except BrokerConnectionError as exc:
                last_error = exc
        if last_error is not None:
            raise last_error
        raise RequestTimeoutError(
            f"no broker answered {type(request).__name__} within the timeout",
            api_key=type(request).API_KEY,
        )

    def least_loaded_node(self) -> int | None:
        """The node to prefer for a request any broker can answer, or None.

        Ready connections with the fewest outstanding requests first, then nodes that
        may connect now, then the one whose backoff ends soonest (Java's
        ``leastLoadedNode`` in spirit).
        """
        candidates = self._candidates()
        return candidates[0] if candidates else None

    def negotiated_version(
        self, node_id: int, api_key: int | type[Request], *, timeout_ms: float | None = None
    ) -> int:
        """The version used with ``node_id`` for an API (connecting first if needed).

        Raises ``KafkaError`` UNSUPPORTED_VERSION if there is no common version, and
        ``BrokerConnectionError``/``RequestTimeoutError`` if the broker is unreachable.
        """
        request_type = _request_type(api_key)
        self._await_ready(node_id, timeout_ms)
        conn = self._nodes[node_id].connection
        assert conn is not None
        return conn.negotiated_version(request_type)

    def api_versions(
        self, node_id: int, *, timeout_ms: float | None = None
    ) -> dict[int, tuple[int, int]]:
        """The broker's advertised ``{api_key: (min, max)}`` (connecting if needed)."""
        self._await_ready(node_id, timeout_ms)
        conn = self._nodes[node_id].connection
        assert conn is not None
        return conn.api_versions

    def metadata(
        self,
        topics: Iterable[str] | None = None,
        *,
        allow_auto_topic_creation: bool = False,
        timeout_ms: float | None = None,
    ) -> ClusterSnapshot:
        """Fetch Metadata for ``topics`` (None: every topic) from the least-loaded
        broker, update the broker table, and return the snapshot.

        Topic-level error codes are in the snapshot, not raised.
        """
        timeout_s = (self._config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000.0
        deadline = self._clock() + timeout_s
        names = None if topics is None else tuple(dict.fromkeys(topics))
        last_error: BaseException | None = None
        for node_id in self._candidates():
            remaining_ms = (deadline - self._clock()) * 1000.0
            if remaining_ms <= 0:
                break
            try:
                version = self.negotiated_version(node_id, MetadataRequest, timeout_ms=remaining_ms)
                request = MetadataQuery(
                    topics=names, allow_auto_topic_creation=allow_auto_topic_creation
                ).build(version)
                remaining_ms = max(1.0, (deadline - self._clock()) * 1000.0)
                response = self.request(
                    node_id, request, timeout_ms=remaining_ms, api_version=version
                )
            except BrokerConnectionError as exc:
                last_error = exc
                continue
            snapshot = ClusterSnapshot.from_response(response)
            self._learn(snapshot)
            return snapshot
        if last_error is not None:
            raise last_error
        raise RequestTimeoutError(
            "no broker answered Metadata within the timeout", api_key=MetadataRequest.API_KEY
        )

    def close(self) -> None:
        """Close every connection; outstanding requests fail with
        ``BrokerConnectionError`` and their callbacks run. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            for node in self._nodes.values():
                if node.connection is not None:
                    node.connection.close()
                    node.connection = None
                waiting, node.waiting = node.waiting, []
                for future in waiting:
                    self._fail(future, BrokerConnectionError("client closed", broker=node.broker))
            self._run_callbacks()
        finally:
            try:
                self._selector.close()
            finally:
                self._wake_r.close()
                self._wake_w.close()

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._nodes)} nodes"
        return f"<KafkaClient {self._config.client_id!r} {state}>"

    # ------------------------------------------------------------------ internals

    def _connection_for(self, node: Node) -> BrokerConnection | None:
        """The node's live connection, a new one if allowed, None in backoff."""
        conn = node.connection
        if conn is not None and conn.state is not ConnectionState.CLOSED:
            return conn
        if conn is not None:
            self._on_connection_closed(node, conn, self._clock())
        if self._clock() < node.next_attempt:
            return None
        return self._connect(node)

    def _connect(self, node: Node) -> BrokerConnection:
        cfg = self._config
        conn = BrokerConnection(
            node.host,
            node.port,
            node_id=node.node_id,
            client_id=cfg.client_id,
            request_timeout_ms=cfg.request_timeout_ms,
            connection_setup_timeout_ms=cfg.socket_connection_setup_timeout_ms,
            max_response_bytes=cfg.receive_message_max_bytes,
            selector=self._selector,
            on_complete=self._completed.append,
            clock=self._clock,
            label=node.label,
            ssl_context=self._ssl_context,
            sasl=self._sasl,
            rng=self._rng,
        )
        node.connection = conn
        if conn.state is ConnectionState.CLOSED:  # failed synchronously (e.g. DNS)
            return conn
        waiting, node.waiting = node.waiting, []
        for future in waiting:
            conn.enqueue(future)
        return conn

    def _on_connection_closed(self, node: Node, conn: BrokerConnection, now: float) -> None:
        """Bookkeeping once a connection is CLOSED: backoff, waiting requests."""
        for future, error in node.after_close(conn, now, self._reconnect_backoff):
            self._fail(future, error)

    def _reap(self, now: float) -> None:
        idle_s = self._config.connections_max_idle_ms / 1000.0
        for node in self._nodes.values():
            conn = node.connection
            if conn is None:
                continue
            if conn.state is ConnectionState.CLOSED:
                self._on_connection_closed(node, conn, now)
                continue
            if conn.was_ready and node.failures:
                # Java's ClusterConnectionStates.ready(): a good connection resets the
                # exponential reconnect backoff.
                node.failures = 0
            if (
                conn.state is ConnectionState.READY
                and conn.in_flight_count == 0
                and conn.queued_count == 0
                and now - conn.last_activity >= idle_s
            ):
                log.debug("closing idle connection to %s", node.broker)
                conn.close()
                self._on_connection_closed(node, conn, now)

    def _start_due_connections(self, now: float) -> None:
        for node in self._nodes.values():
            if node.waiting and node.connection is None and now >= node.next_attempt:
                self._connect(node)

    def _expire_waiting(self, node: Node, now: float) -> None:
        for future, error in node.expire_waiting(now):
            self._fail(future, error)

    def _next_deadline(self) -> float | None:
        deadlines = [d for node in self._nodes.values() if (d := node.next_deadline()) is not None]
        return min(deadlines) if deadlines else None

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _fail(self, future: PendingRequest[Any], error: BaseException) -> None:
        if future._set_exception(error):
            self._completed.append(future)

    def _run_callbacks(self) -> None:
        while self._completed:
            batch = list(self._completed)
            self._completed.clear()
            for future in batch:
                future._run_callbacks()

    def _wait(self, future: PendingRequest[Any]) -> None:
        while not future.done():
            if self._closed:
                raise BrokerConnectionError("client is closed", broker=future.broker)
            self.poll(max(0.0, future.deadline - self._clock()))

    def _await_ready(self, node_id: int, timeout_ms: float | None) -> None:
        if self._closed:
            raise BrokerConnectionError("client is closed")
        node = self._nodes.get(node_id)
        if node is None:
            raise BrokerConnectionError(f"unknown broker node id {node_id}")
        timeout_s = (self._config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000.0
        deadline = self._clock() + timeout_s
        attempt: BrokerConnection | None = None
        while True:
            conn = self._connection_for(node)
            if conn is not None:
                attempt = conn
            if attempt is not None and attempt.state is ConnectionState.READY:
                return
            if attempt is not None and attempt.state is ConnectionState.CLOSED:
                if node.connection is attempt:
                    self._on_connection_closed(node, attempt, self._clock())
                raise attempt.close_error or BrokerConnectionError(
                    "connection closed", broker=node.broker
                )
            now = self._clock()
            if now >= deadline:
                raise RequestTimeoutError(
                    f"no ready connection to {node.broker} within the timeout"
                    + (f" (last error: {node.last_error})" if node.last_error else ""),
                    broker=node.broker,
                )
            wake = deadline if conn is not None else min(deadline, node.next_attempt)
            self.poll(max(0.0, wake - now))

    def _candidates(self) -> list[int]:
        """Node ids to try for any-broker requests, best first."""
        now = self._clock()
        # Known brokers first; the bootstrap servers stay in the pool as a last resort
        # for when every known broker is unreachable (the idea of KIP-899 re-bootstrap).
        pool = [
            n
            for n in self._nodes.values()
            if n.node_id >= 0 and n.node_id not in self._coordinator_ids
        ]
        pool.extend(self._bootstrap_nodes.values())
        ordered = sorted(pool, key=lambda node: node.rank(now))  # stable: config order breaks ties
        return [n.node_id for n in ordered]

    def _learn(self, snapshot: ClusterSnapshot) -> None:
        self._cluster = snapshot
        for broker in snapshot.brokers.values():
            self.add_broker(broker.node_id, broker.host, broker.port)
            self._nodes[broker.node_id].rack = broker.rack
        if snapshot.brokers:
            # The cluster is known: bootstrap connections have done their job.
            for node in self._bootstrap_nodes.values():
                conn = node.connection
                if conn is not None and conn.in_flight_count == 0 and conn.queued_count == 0:
                    conn.close()
                    node.connection = None


def _request_type(api_key: int | type[Request]) -> type[Request]:
    if isinstance(api_key, type):
        return api_key
    request_type = ALL_REQUESTS.get(api_key)
    if request_type is None:
        raise ConfigurationError(f"no request class for api_key {api_key}")
    return request_type
