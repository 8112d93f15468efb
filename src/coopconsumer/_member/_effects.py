"""Effects: the imperatives a ``GroupMember`` returns for the driver to execute.

Pure data (frozen attrs classes). Must not import sockets, threads, clocks,
``confluent_kafka`` or ``coopconsumer._io``. The driver executes a batch in order.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from types import MappingProxyType

import attrs

from .._errors import CoopConsumerError
from .._protocol.cluster import BrokerInfo
from .._protocol.queries import MetadataQuery
from .._types import OffsetAndMetadata, TopicPartition

__all__ = [
    "AddBrokers",
    "AddCoordinator",
    "Assign",
    "AutoCommitDue",
    "CommitBeforeRevoke",
    "CommitDone",
    "CommittedOffsetsDone",
    "Effect",
    "Fatal",
    "FindCoordinator",
    "InvokeListener",
    "ListenerKind",
    "Log",
    "MetadataNeeded",
    "Observation",
    "Observe",
    "OffsetAndMetadata",
    "ReportError",
    "Send",
    "TopicsMissing",
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


def _start_offsets(values: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
    return MappingProxyType(dict(values))


@attrs.frozen(kw_only=True)
class Send:
    """Send ``request`` to broker ``node_id`` (always the group coordinator): a
    ``coopconsumer._protocol.messages`` request sent at the negotiated version, or a
    ``_protocol.queries`` query whose ``build(version)`` writes it once the version is
    known. Answer with ``ResponseReceived(request_id, response, api_version)`` or
    ``RequestFailed(request_id, error)``; ``timeout_s`` (None = the client's
    ``request.timeout.ms``) is how long to wait before failing it with
    ``RequestTimeoutError``."""

    request_id: int
    request: object
    node_id: int
    timeout_s: float | None = None


@attrs.frozen(kw_only=True)
class FindCoordinator:
    """Look up the group coordinator: send ``FindCoordinatorQuery(key=group_id)``
    (``_protocol.queries``, built at the negotiated version) to any ready broker and
    feed ``ResponseReceived(request_id, response, api_version)`` or
    ``RequestFailed(request_id, error)``; the member reads the answer and asks for
    ``AddCoordinator``. (A test harness may instead answer ``CoordinatorFound`` or
    ``CoordinatorUnavailable`` directly.)"""

    group_id: str
    request_id: int


@attrs.frozen(kw_only=True)
class AddCoordinator:
    """FindCoordinator named broker ``node_id`` at ``host:port``: open a connection of
    its own for group traffic (the coordinator parks JoinGroup/SyncGroup, and nothing
    may queue behind them) and feed ``CoordinatorFound`` with that connection's id."""

    node_id: int
    host: str
    port: int


@attrs.frozen(kw_only=True)
class MetadataNeeded:
    """Send ``query`` (Metadata of ``topics``; None: every topic, for a pattern
    subscription) to any ready broker, built at the negotiated version, and feed
    ``ResponseReceived(request_id, response, api_version)`` or ``RequestFailed``; the
    member reads the answer itself (``AddBrokers``, then its ``MetadataUpdate``). The
    member decides when to refresh (``metadata.max.age.ms``, retries; see
    ``_metadata.py``). A test harness may instead feed ``MetadataUpdate`` directly,
    which answers the refresh in flight."""

    request_id: int
    topics: frozenset[str] | None = attrs.field(converter=_optional_topics)

    @property
    def query(self) -> MetadataQuery:
        """The request, topics in name order."""
        return MetadataQuery(topics=None if self.topics is None else sorted(self.topics))


def _brokers(values: Iterable[BrokerInfo]) -> tuple[BrokerInfo, ...]:
    return tuple(values)


@attrs.frozen(kw_only=True)
class AddBrokers:
    """A Metadata answer named these brokers: make each reachable by its node id (the
    bootstrap addresses are not node ids), without dropping connections."""

    brokers: tuple[BrokerInfo, ...] = attrs.field(converter=_brokers)


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
    """Start fetching ``partitions`` (incremental: add them to the fetcher).

    ``starts``: start offsets the application gave with a manual assignment (real or
    librdkafka's logical ones); every other partition starts at the group's committed
    offset, else ``auto.offset.reset``."""

    partitions: frozenset[TopicPartition] = attrs.field(converter=_tp_frozenset)
    starts: Mapping[TopicPartition, int] = attrs.field(
        factory=lambda: MappingProxyType({}), converter=_start_offsets
    )


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
class AutoCommitDue:
    """Only with ``enable_auto_commit``: ``auto.commit.interval.ms`` has passed; the
    ``poll()`` thread commits the consumed offsets not committed yet (Java's
    auto-commit in ``poll()``). At most one is outstanding until the next
    ``PollCalled``."""


@attrs.frozen(kw_only=True)
class CommitDone:
    """The commit identified by ``token`` finished: ``error`` is None on success,
    else ``RebalanceInProgressError`` (retriable), ``CommitFailedError`` (generation
    gone), or a ``KafkaError``/``BrokerConnectionError`` (see ``error.retriable``)."""

    token: object
    error: CoopConsumerError | None = None


def _offsets(
    values: Mapping[TopicPartition, OffsetAndMetadata | None],
) -> Mapping[TopicPartition, OffsetAndMetadata | None]:
    return MappingProxyType(dict(values))


@attrs.frozen(kw_only=True)
class CommittedOffsetsDone:
    """The committed-offsets request ``token`` finished: ``offsets`` maps every asked
    partition to its ``OffsetAndMetadata`` (None: nothing committed), or ``error``
    says why not (``KafkaError``, ``RequestTimeoutError``, ...)."""

    token: object
    offsets: Mapping[TopicPartition, OffsetAndMetadata | None] = attrs.field(
        factory=lambda: MappingProxyType({}), converter=_offsets
    )
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
class TopicsMissing:
    """Topics this member needs (subscribed to by name, or assigned manually) that the
    cluster's metadata does not have: a typo, or a topic not created yet. The member
    keeps waiting for them (and asks for metadata every second meanwhile). Emitted
    when the set changes and again every ``MISSING_TOPICS_REPORT_S`` while it stays
    non-empty; empty once every topic exists. The consumer hands it to ``error_cb``
    (``UNKNOWN_TOPIC_OR_PARTITION``) or logs a warning, and counts it in its metrics."""

    topics: frozenset[str]


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
    | AddCoordinator
    | MetadataNeeded
    | AddBrokers
    | InvokeListener
    | Assign
    | Unassign
    | CommitBeforeRevoke
    | AutoCommitDue
    | CommitDone
    | CommittedOffsetsDone
    | Observe
    | Log
    | TopicsMissing
    | ReportError
    | Fatal
)
