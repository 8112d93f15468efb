"""``Node``: what ``KafkaClient`` keeps per broker node, and the decisions on it alone.

The live connection, the reconnect backoff (Java's ``ClusterConnectionStates``: a good
connection resets the failure count, a failed one grows the delay), the requests parked
while the node backs off, why its last connection could not authenticate, and its rank
for a request any broker can answer. The client owns the nodes and the selector; a node
only reads its connection's state and says which parked requests fail, and why.

Imports the errors and the sibling ``_io`` modules ``_backoff``, ``_connection`` and
``_future``; opens nothing.
"""

from __future__ import annotations

from typing import Any

from .._errors import AuthenticationError, BrokerConnectionError, RequestTimeoutError
from ._backoff import ExponentialBackoff
from ._connection import BrokerConnection, ConnectionState
from ._future import PendingRequest

__all__ = ["Failures", "Node"]

#: Parked requests to fail, each with its error (the client completes them).
Failures = list[tuple[PendingRequest[Any], BaseException]]


class Node:
    """Per-node connection bookkeeping: the live connection, backoff, waiting requests."""

    __slots__ = (
        "auth_failure",
        "connection",
        "failures",
        "host",
        "label",
        "last_backoff_ms",
        "last_error",
        "losses",
        "next_attempt",
        "node_id",
        "port",
        "rack",
        "waiting",
    )

    def __init__(self, node_id: int, host: str, port: int, label: str | None = None) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.label = label
        self.rack: str | None = None
        self.connection: BrokerConnection | None = None
        #: Connections to this node that closed on an error (see ``connection_losses``).
        self.losses = 0
        #: Consecutive connection failures since the last READY connection.
        self.failures = 0
        self.last_backoff_ms = 0.0
        self.next_attempt = 0.0
        self.last_error: BaseException | None = None
        #: Why the last connection could not authenticate; cleared by a good one.
        self.auth_failure: AuthenticationError | None = None
        #: Requests sent while the node was in reconnect backoff.
        self.waiting: list[PendingRequest[Any]] = []

    @property
    def broker(self) -> str:
        return f"{self.host}:{self.port} ({self.label or f'node {self.node_id}'})"

    def move_to(self, host: str, port: int) -> None:
        """The node's address changed: its connection closes and the backoff restarts."""
        if (self.host, self.port) == (host, port):
            return
        if self.connection is not None:
            self.connection.close()
            self.connection = None
        self.host, self.port = host, port
        self.failures = 0
        self.next_attempt = 0.0

    def after_close(
        self, conn: BrokerConnection, now: float, backoff: ExponentialBackoff
    ) -> Failures:
        """Bookkeeping once ``conn`` is CLOSED: backoff, and the waiting requests to fail."""
        self.connection = None
        self.last_error = conn.close_error
        if isinstance(conn.close_error, AuthenticationError):
            self.auth_failure = conn.close_error
        elif conn.was_ready:
            self.auth_failure = None
        if conn.was_ready:
            # A good connection resets the failure count (Java's
            # ClusterConnectionStates.ready); its loss still waits the base backoff.
            self.failures = 0
        if conn.close_error is not None:
            self.losses += 1
        if conn.close_error is None and conn.was_ready:
            # Deliberate close (idle): reconnect freely.
            self.last_backoff_ms = 0.0
            self.next_attempt = now
            return []
        delay_ms = backoff.delay_ms(self.failures)
        if not conn.was_ready:
            self.failures += 1
        self.last_backoff_ms = delay_ms
        self.next_attempt = now + delay_ms / 1000.0
        # Requests that arrived while the connection was dying and were parked never
        # reached it; the connection failed them itself otherwise.
        error = conn.close_error or BrokerConnectionError("connection closed", broker=self.broker)
        waiting, self.waiting = self.waiting, []
        failures: Failures = []
        for future in waiting:
            failure = BrokerConnectionError(
                f"{future.api_name}: broker unreachable: {error}", broker=self.broker
            )
            failure.__cause__ = error
            failures.append((future, failure))
        return failures

    def expire_waiting(self, now: float) -> Failures:
        """The parked requests whose deadline passed (no longer parked)."""
        if not self.waiting:
            return []
        keep: list[PendingRequest[Any]] = []
        expired: Failures = []
        for future in self.waiting:
            if future.deadline <= now:
                error = RequestTimeoutError(
                    f"{future.api_name} to {self.broker}: not sent within the request timeout"
                    f" (reconnect backoff; last error: {self.last_error})",
                    api_key=future.api_key,
                    api_version=future.api_version,
                    broker=self.broker,
                )
                expired.append((future, error))
            else:
                keep.append(future)
        self.waiting = keep
        return expired

    def next_deadline(self) -> float | None:
        """When the client must look at this node again: its connection's deadline, a
        parked request's, or the end of its backoff when requests wait for it."""
        deadlines: list[float] = []
        if self.connection is not None:
            d = self.connection.next_deadline()
            if d is not None:
                deadlines.append(d)
        if self.waiting:
            deadlines.append(min(f.deadline for f in self.waiting))
            if self.connection is None:
                deadlines.append(self.next_attempt)
        return min(deadlines) if deadlines else None

    def rank(self, now: float) -> tuple[int, float, int]:
        """Order for a request any broker can answer, lowest first: ready with the
        fewest outstanding requests, connecting, may connect now, backing off (the
        soonest end first); Java's ``leastLoadedNode`` in spirit."""
        conn = self.connection
        if conn is not None and conn.state is ConnectionState.READY:
            return (0, float(conn.in_flight_count + conn.queued_count), 0)
        if conn is not None and conn.state is not ConnectionState.CLOSED:
            return (1, 0.0, 0)
        if now >= self.next_attempt:
            return (2, 0.0, 0)
        return (3, self.next_attempt, 0)
