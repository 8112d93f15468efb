"""Effects: the imperatives a ``GroupMember`` returns for the driver to execute.

Pure data (frozen attrs classes). Must not import sockets, threads, clocks,
``confluent_kafka`` or ``coopconsumer._io``. The driver executes a batch in order.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from .._errors import CoopConsumerError
from .._types import TopicPartition

__all__ = [
    "Assign",
    "CommitBeforeRevoke",
    "CommitDone",
    "Effect",
    "Fatal",
    "FindCoordinator",
    "InvokeListener",
    "ListenerKind",
    "Log",
    "MetadataNeeded",
    "Observation",
    "Observe",
    "ReportError",
    "Send",
    "Unassign",
]


class ListenerKind(enum.Enum):
    """Which rebalance listener callback to run (Java's ``ConsumerRebalanceListener``)."""

    REVOKED = "revoked"
    """``on_partitions_revoked``: the partitions are still assigned while it runs."""

    ASSIGNED = "assigned"
    """``on_partitions_assigned``: the partitions are already assigned when it runs."""

    LOST = "lost"
    """``on_partitions_lost``: the partitions are already gone (generation lost)."""


class Observation(enum.Enum):
    """Metric observations; the driver forwards each to ``CoordinatorMetrics``."""

    REBALANCE_STARTED = "rebalance_started"
    """-> ``rebalance_started(now)``."""

    REBALANCE_COMPLETED = "rebalance_completed"
    """-> ``rebalance_completed(now, latency_s)`` (emitted when the assignment is applied,
    callbacks included; ``latency_s`` is the member's own measurement since
    ``REBALANCE_STARTED``, None if it saw no start)."""

    REBALANCE_FAILED = "rebalance_failed"
    """-> ``rebalance_failed(now)``."""

    JOIN_COMPLETED = "join_completed"
    """-> ``join_completed(latency_s, now)``."""

    SYNC_COMPLETED = "sync_completed"
    """-> ``sync_completed(latency_s, now)``."""

    HEARTBEAT_SENT = "heartbeat_sent"
    """-> ``heartbeat_sent(now)``."""

    HEARTBEAT_COMPLETED = "heartbeat_completed"
    """-> ``heartbeat_completed(latency_s, now)``."""

    COMMIT_COMPLETED = "commit_completed"
    """-> ``commit_completed(latency_s, now)``."""


def _tp_frozenset(values: Iterable[TopicPartition]) -> frozenset[TopicPartition]:
    return frozenset(values)


def _optional_topics(values: Iterable[str] | None) -> frozenset[str] | None:
    return None if values is None else frozenset(values)


@attrs.frozen(kw_only=True)
class Send:
    """Send ``request`` (a ``coopconsumer._protocol.messages`` request object) to broker
    ``node_id`` (always the group coordinator). The I/O layer picks the negotiated
    version. Answer with ``ResponseReceived(request_id, response)`` or
    ``RequestFailed(request_id, error)``; ``timeout_s`` (None = the client's
    ``request.timeout.ms``) is how long to wait before failing it with
    ``RequestTimeoutError``."""

    request_id: int
    request: object
    node_id: int
    timeout_s: float | None = None


@attrs.frozen(kw_only=True)
class FindCoordinator:
    """Look up the group coordinator (FindCoordinator, key type GROUP); answer with
    ``CoordinatorFound(node_id)`` or ``CoordinatorUnavailable(error)``."""

    group_id: str


@attrs.frozen(kw_only=True)
class MetadataNeeded:
    """Fetch cluster metadata for ``topics`` (None: every topic, for a pattern
    subscription) and answer with ``MetadataUpdate``."""

    topics: frozenset[str] | None = attrs.field(converter=_optional_topics)


@attrs.frozen(kw_only=True)
class InvokeListener:
    """Run the listener callback ``kind`` with ``partitions`` on the thread calling
    ``poll()``, then feed ``ListenerDone(invocation_id, kind)``. Exceptions are the
    listener invoker's to keep (KIP-429: first one raised from ``poll()``); the member
    treats the callback as done either way."""

    invocation_id: int
    kind: ListenerKind
    partitions: frozenset[TopicPartition] = attrs.field(converter=_tp_frozenset)


@attrs.frozen(kw_only=True)
class Assign:
    """Start fetching ``partitions`` (incremental: add them to the fetcher)."""

    partitions: frozenset[TopicPartition] = attrs.field(converter=_tp_frozenset)


@attrs.frozen(kw_only=True)
class Unassign:
    """Stop fetching ``partitions`` (incremental: remove them from the fetcher) and
    stop returning their buffered records."""

    partitions: frozenset[TopicPartition] = attrs.field(converter=_tp_frozenset)


@attrs.frozen(kw_only=True)
class CommitBeforeRevoke:
    """Only with ``enable_auto_commit``: commit the consumed offsets of ``partitions``
    (through ``CommitRequested``) before running the REVOKED listener that follows
    (Java's auto-commit in ``onJoinPrepare``/``onLeavePrepare``). The member accepts
    commits in the state that emits this."""

    partitions: frozenset[TopicPartition] = attrs.field(converter=_tp_frozenset)


@attrs.frozen(kw_only=True)
class CommitDone:
    """The commit identified by ``token`` finished: ``error`` is None on success,
    else ``RebalanceInProgressError`` (retriable), ``CommitFailedError`` (generation
    gone), or a ``KafkaError``/``BrokerConnectionError`` (see ``error.retriable``)."""

    token: object
    error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class Observe:
    """A metrics observation (see ``Observation`` for the ``CoordinatorMetrics`` call)."""

    event: Observation
    now: float
    latency_s: float | None = None


@attrs.frozen(kw_only=True)
class Log:
    """A log line for the driver's logger (``level`` is a ``logging`` level number)."""

    level: int
    message: str


@attrs.frozen(kw_only=True)
class ReportError:
    """Raise ``error`` from the next ``poll()``; the member carries on (for example an
    assignor that raised: the member rejoins after a backoff, ownership unchanged)."""

    error: CoopConsumerError


@attrs.frozen(kw_only=True)
class Fatal:
    """The member is in FATAL: raise ``error`` from ``poll()`` and every later call."""

    error: CoopConsumerError


Effect = (
    Send
    | FindCoordinator
    | MetadataNeeded
    | InvokeListener
    | Assign
    | Unassign
    | CommitBeforeRevoke
    | CommitDone
    | Observe
    | Log
    | ReportError
    | Fatal
)
