"""Inputs: the facts a driver feeds to ``GroupMember.handle``.

Pure data (frozen attrs classes). Must not import sockets, threads, clocks,
``confluent_kafka`` or ``coopconsumer._io``.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Iterable, Mapping
from types import MappingProxyType

import attrs

from .._errors import ConfigurationError, CoopConsumerError
from .._types import TopicPartition
from ..assignors._api import ClusterMetadata
from ._effects import ListenerKind, OffsetAndMetadata

__all__ = [
    "AssignRequested",
    "AssignmentChange",
    "CloseRequested",
    "CommitRequested",
    "CommittedOffsetsRequested",
    "ConnectionLost",
    "CoordinatorFound",
    "CoordinatorUnavailable",
    "Input",
    "LeaveRequested",
    "ListenerDone",
    "MetadataUpdate",
    "OffsetAndMetadata",
    "PollCalled",
    "RequestFailed",
    "ResponseReceived",
    "RetriedCommitRequested",
    "Subscribe",
    "Tick",
]


def _topics(values: Iterable[str]) -> frozenset[str]:
    if isinstance(values, str):
        raise ConfigurationError(f"topics must be a collection of names, not the string {values!r}")
    return frozenset(values)


def _check_subscription(instance: Subscribe, attribute: object, value: str | None) -> None:
    kinds = sum((bool(instance.topics), instance.pattern is not None, instance.regex is not None))
    if kinds > 1:
        raise ConfigurationError("subscribe to topics or to a pattern, not both")
    if instance.regex is not None and not instance.regex:
        raise ConfigurationError("a broker-side regular expression must not be empty")
    if kinds == 0:
        # Java's subscribe(emptyList) means unsubscribe(): say so explicitly.
        raise ConfigurationError("an empty subscription is an unsubscribe: use LeaveRequested")


@attrs.frozen(kw_only=True)
class Subscribe:
    """The application (re)subscribed: to ``topics``, or to every topic whose whole
    name matches ``pattern`` (computed from ``MetadataUpdate`` topic names, internal
    topics excluded, as Java's ``Pattern.matcher(topic).matches()``), or (KIP-848
    members only) to the topics the coordinator matches with ``regex``
    (``SubscribedTopicRegex``, ConsumerGroupHeartbeat v1+: the broker's RE2J syntax,
    whole names; Java's ``subscribe(SubscriptionPattern)``, librdkafka's ``^`` topics
    under ``group.protocol=consumer``)."""

    topics: frozenset[str] = attrs.field(default=frozenset(), converter=_topics)
    pattern: re.Pattern[str] | None = attrs.field(default=None)
    regex: str | None = attrs.field(default=None, validator=_check_subscription)


def _internal(values: Iterable[str]) -> frozenset[str]:
    return frozenset(values)


def _topic_ids(values: Mapping[str, uuid.UUID]) -> Mapping[str, uuid.UUID]:
    return MappingProxyType(dict(values))


@attrs.frozen(kw_only=True)
class MetadataUpdate:
    """Fresh cluster metadata: every known topic's partition count (and racks).
    ``internal_topics`` names topics a pattern subscription must skip. ``topic_ids``
    maps topic names to their ids (Metadata v10+; KIP-848 assignments name topics by
    id), empty when the broker did not say."""

    metadata: ClusterMetadata
    internal_topics: frozenset[str] = attrs.field(default=frozenset(), converter=_internal)
    topic_ids: Mapping[str, uuid.UUID] = attrs.field(
        factory=lambda: MappingProxyType({}), converter=_topic_ids
    )


@attrs.frozen(kw_only=True)
class CoordinatorFound:
    """The group coordinator is reachable as node ``node_id`` (the driver's answer to
    ``AddCoordinator``, or a test harness answering ``FindCoordinator`` itself)."""

    node_id: int


@attrs.frozen(kw_only=True)
class CoordinatorUnavailable:
    """The coordinator could not be found (a harness answering ``FindCoordinator``
    itself says so with this; the member reads the driver's raw answers itself). The
    member retries after ``retry.backoff.ms``."""

    error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class ConnectionLost:
    """The connection to node ``node_id`` closed on an error, whether or not a request
    of the member was on it. The member's coordinator connection is then unproven, and
    a KIP-848 member tells a coordinator that may have forgotten its per-connection
    state everything again in its next heartbeat (Java resets its sent fields on any
    failure; a lost connection with nothing in flight fails nothing)."""

    node_id: int


@attrs.frozen(kw_only=True)
class ResponseReceived:
    """The answer to ``Send(request_id, ...)`` or ``FindCoordinator(request_id, ...)``:
    a ``_protocol.messages`` response, read at ``api_version`` (None: not said; an
    answer whose layout depends on the version is then read by the layout it has)."""

    request_id: int
    response: object
    api_version: int | None = None


@attrs.frozen(kw_only=True)
class RequestFailed:
    """``Send(request_id, ...)`` got no answer: connection failure or timeout."""

    request_id: int
    error: CoopConsumerError


@attrs.frozen(kw_only=True)
class Tick:
    """Time passed; feed at ``next_deadline`` (extra ticks are harmless)."""


@attrs.frozen(kw_only=True)
class PollCalled:
    """The application called ``poll()``: restarts ``max.poll.interval.ms``."""


@attrs.frozen(kw_only=True)
class ListenerDone:
    """The callback of ``InvokeListener(invocation_id, kind, ...)`` returned (or
    raised: the invoker keeps the exception; KIP-429 treats it as done)."""

    invocation_id: int
    kind: ListenerKind


def _offsets(
    values: Mapping[TopicPartition, OffsetAndMetadata],
) -> Mapping[TopicPartition, OffsetAndMetadata]:
    return MappingProxyType(dict(values))


@attrs.frozen(kw_only=True)
class CommitRequested:
    """Commit ``offsets``; the answer is ``CommitDone(token, error)`` (always exactly
    one per token)."""

    offsets: Mapping[TopicPartition, OffsetAndMetadata] = attrs.field(converter=_offsets)
    token: object


@attrs.frozen(kw_only=True)
class RetriedCommitRequested:
    """Commit ``offsets`` and retry what a retry can cure until ``timeout_s`` from now
    (the commit before revoking, and at the close of a manual assignment); the answer
    is exactly one ``CommitDone(token, error)``: None, the last failure, or
    ``RequestTimeoutError`` when an attempt was still unanswered at the deadline.
    ``purpose`` names the commit in the log line of a retry."""

    offsets: Mapping[TopicPartition, OffsetAndMetadata] = attrs.field(converter=_offsets)
    token: object
    timeout_s: float
    purpose: str = "commit"


def _partitions(values: Iterable[TopicPartition]) -> frozenset[TopicPartition]:
    return frozenset(values)


@attrs.frozen(kw_only=True)
class CommittedOffsetsRequested:
    """The application asked for the group's committed offsets of ``partitions``; the
    answer is exactly one ``CommittedOffsetsDone(token, ...)`` within ``timeout_s``
    (OffsetFetch through the coordinator, retried on retriable errors until then)."""

    partitions: frozenset[TopicPartition] = attrs.field(converter=_partitions)
    token: object
    timeout_s: float


@attrs.frozen(kw_only=True)
class LeaveRequested:
    """Unsubscribe: leave the group (listeners first) and return to UNJOINED.

    ``commit_wait_s``: with ``enable_auto_commit``, a member whose JoinGroup/SyncGroup
    is under way waits up to this long for the SyncGroup answer, so that it can commit
    the positions of its partitions (``CommitBeforeRevoke``) before leaving instead of
    reporting them lost uncommitted (docs/architecture.md, "Leaving in the middle of a
    rebalance"); 0 leaves at once, as Java's ``onLeavePrepare``."""

    reason: str = "the consumer unsubscribed"
    commit_wait_s: float = 0.0


@attrs.frozen(kw_only=True)
class CloseRequested:
    """Close: listeners, LeaveGroup, CLOSED. ``leave_group`` None means Java's default:
    a dynamic member leaves, a static member (``group.instance.id``) does not.
    ``commit_wait_s`` as for ``LeaveRequested``."""

    leave_group: bool | None = None
    reason: str = "the consumer is being closed"
    commit_wait_s: float = 0.0


class AssignmentChange(enum.Enum):
    """How ``AssignRequested`` changes a manual assignment (confluent-kafka's calls)."""

    REPLACE = "replace"
    """``assign()``: the assignment becomes exactly the partitions given (every old
    one is unassigned first, as librdkafka does; empty: back to UNJOINED)."""

    ADD = "add"
    """``incremental_assign()``: add partitions not assigned yet."""

    REMOVE = "remove"
    """``incremental_unassign()``: remove assigned partitions (none left: UNJOINED)."""


def _starts(values: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
    return MappingProxyType(dict(values))


@attrs.frozen(kw_only=True)
class AssignRequested:
    """The application changed its manual assignment (``change``) by ``partitions``.

    ``starts`` gives the start offset of some of them (a real offset, or librdkafka's
    logical -2 beginning / -1 end); the others start at the group's committed offset,
    else ``auto.offset.reset``. Only UNJOINED and MANUAL accept it; a partition added
    twice or removed without being assigned raises ``ConfigurationError`` and changes
    nothing."""

    partitions: frozenset[TopicPartition] = attrs.field(converter=_partitions)
    change: AssignmentChange = AssignmentChange.REPLACE
    starts: Mapping[TopicPartition, int] = attrs.field(
        factory=lambda: MappingProxyType({}), converter=_starts
    )


Input = (
    AssignRequested
    | Subscribe
    | MetadataUpdate
    | CoordinatorFound
    | CoordinatorUnavailable
    | ConnectionLost
    | ResponseReceived
    | RequestFailed
    | Tick
    | PollCalled
    | ListenerDone
    | CommitRequested
    | CommittedOffsetsRequested
    | LeaveRequested
    | CloseRequested
)
