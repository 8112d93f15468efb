"""Keeping cluster metadata fresh, for both group protocols.

A member wants metadata for its subscription (every topic for a pattern), and a
classic leader for the whole group's subscription too. ``want_metadata`` records the
topics and asks at once; afterwards the member refreshes every ``metadata.max.age.ms``
and retries a failed refresh after ``retry.backoff.ms``. The request goes to any ready
broker (``MetadataNeeded``); the member reads the answer itself
(``_protocol.cluster.ClusterSnapshot``, the one reader of Metadata), tells the driver
which brokers exist (``AddBrokers``) and handles the ``MetadataUpdate`` it makes of the
answer as if it had been fed one, through its transition table
(docs/architecture.md, "Where each Kafka rule lives").

Every refresh asks for every topic ever wanted: a leader's view covers the whole
group's topics and must not see them vanish from a narrower answer. A topic wanted
while a refresh is in flight that the refresh does not cover is asked for as soon as
the answer arrives (the driver used to wait ``metadata.max.age.ms`` for it); the same
topics asked for again wait ``retry.backoff.ms`` after the last answer, as Java's
metadata backoff does.

Pure: no sockets, threads or clocks; time is the ``now`` argument.
"""

from __future__ import annotations

import logging
from typing import Final, Protocol

import attrs

from .._errors import CoopConsumerError
from .._protocol._schema import ZERO_UUID
from .._protocol.cluster import ClusterSnapshot
from .._protocol.messages import MetadataResponse
from .._types import TopicPartition
from ..assignors._api import ClusterMetadata
from ._effects import AddBrokers, Effect, MetadataNeeded, TopicsMissing
from ._error_actions import Api
from ._inputs import MetadataUpdate, Subscribe

__all__ = [
    "MetadataHost",
    "MetadataRefresh",
    "answered_directly",
    "check_missing_topics",
    "metadata_answer",
    "metadata_update",
    "needed_topics",
    "refresh_metadata",
    "want_metadata",
]


@attrs.define(kw_only=True)
class MetadataRefresh:
    """Which topics to keep fresh, when to ask next, and the request in flight."""

    max_age_s: float
    retry_backoff_s: float
    #: Every topic wanted so far (None: every topic in the cluster).
    topics: frozenset[str] | None = frozenset()
    #: Asked for since the last request was sent (that request may predate the need).
    wanted: bool = False
    #: When the next request is due (None: nothing to refresh).
    due_at: float | None = None
    #: The request in flight (its id), if any.
    in_flight: int | None = None
    #: The topics the last request sent asked for, and when its answer came.
    asked: frozenset[str] | None = frozenset()
    answered_at: float | None = None
    #: No more refreshes (the member is closed or failed).
    stopped: bool = False
    #: Topics the member needs that the last answer lacked, and when it last said so.
    missing: frozenset[str] = frozenset()
    missing_reported_at: float | None = None

    @property
    def deadline(self) -> float | None:
        """When the member must be ticked to send the next request."""
        if self.stopped or self.in_flight is not None:
            return None
        return self.due_at

    def covered(self) -> bool:
        """Whether the last request asked for every topic wanted now."""
        if self.asked is None:
            return True
        return self.topics is not None and self.topics <= self.asked

    def soonest(self, now: float) -> float:
        """Now for topics the last request did not ask for; the same topics again no
        sooner than ``retry.backoff.ms`` after its answer (Java's metadata refresh
        backoff: a member whose target names a topic id the last answer lacked must
        not ask in a loop)."""
        if self.answered_at is None or not self.covered():
            return now
        return max(now, self.answered_at + self.retry_backoff_s)

    def want(self, topics: frozenset[str] | None, now: float, *, fresh: bool = False) -> None:
        if topics is None or self.topics is None:
            self.topics = None
        else:
            self.topics = self.topics | topics
        self.wanted = True
        if self.in_flight is None:
            self.due_at = now if fresh else self.soonest(now)

    def sent(self, request_id: int) -> None:
        self.wanted = False
        self.asked = self.topics
        self.in_flight = request_id

    def answered(self, now: float) -> None:
        self.in_flight = None
        self.answered_at = now
        # Wanted while the request was out: that request may predate the need.
        self.due_at = self.soonest(now) if self.wanted else now + self.max_age_s

    def failed(self, now: float) -> None:
        self.in_flight = None
        self.wanted = True
        self.due_at = now + self.retry_backoff_s

    def stop(self) -> None:
        self.stopped = True
        self.due_at = None


#: While a topic the member needs is missing, how often it says so again (the first
#: time at once): slow enough not to bury other lines, often enough to be seen.
MISSING_TOPICS_REPORT_S: Final = 30.0
#: While a topic the member needs is missing, how soon metadata is asked again, so a
#: topic created meanwhile is consumed within about a second (Java retries its
#: metadata at ``retry.backoff.ms``, up to ``retry.backoff.max.ms``, 1 s).
MISSING_TOPICS_REFRESH_S: Final = 1.0


class MetadataHost(Protocol):
    """A member core, as the metadata refresh sees it (both members' cores are)."""

    metadata_refresh: MetadataRefresh
    #: What the application subscribed to (None: not subscribed).
    subscription: Subscribe | None
    #: The partitions it owns (under a manual assignment: the ones it assigned).
    owned: set[TopicPartition]

    def track(self, api: Api, now: float, *, token: object, node_id: int | None) -> int: ...

    def emit(self, effect: Effect) -> None: ...

    def log(self, level: int, message: str) -> None: ...


def want_metadata(
    m: MetadataHost, topics: frozenset[str] | None, now: float, *, fresh: bool = False
) -> None:
    """Metadata of ``topics`` is needed (None: every topic): ask now, unless a
    request is in flight (its answer decides whether to ask again at once). The same
    topics are asked again no sooner than ``retry.backoff.ms`` after the last answer,
    unless ``fresh`` (a leader about to assign asks once per JoinGroup answer: no loop
    to guard against)."""
    m.metadata_refresh.want(topics, now, fresh=fresh)
    refresh_metadata(m, now)


def refresh_metadata(m: MetadataHost, now: float) -> None:
    """Send the next Metadata request if one is due (called on every ``Tick``)."""
    refresh = m.metadata_refresh
    due = refresh.deadline
    if due is None or now < due:
        return
    if not refresh.wanted and refresh.topics == frozenset():
        refresh.due_at = None  # nothing subscribed: nothing to refresh
        return
    request_id = m.track(Api.METADATA, now, token=None, node_id=None)
    refresh.sent(request_id)
    m.emit(MetadataNeeded(request_id=request_id, topics=refresh.topics))


def metadata_answer(
    m: MetadataHost,
    response: MetadataResponse | None,
    error: CoopConsumerError | None,
    now: float,
) -> MetadataUpdate | None:
    """Read the answer to our Metadata request: the ``MetadataUpdate`` the member then
    handles, or None after a failure (retried after ``retry.backoff.ms``)."""
    refresh = m.metadata_refresh
    if error is not None or response is None:
        refresh.failed(now)
        m.log(logging.DEBUG, f"metadata refresh failed, retrying: {error}")
        return None
    snapshot = ClusterSnapshot.from_response(response)
    if snapshot.brokers:
        m.emit(AddBrokers(brokers=snapshot.brokers.values()))
    refresh.answered(now)
    check_missing_topics(m, frozenset(snapshot.partition_counts()), now)
    refresh_metadata(m, now)  # a topic wanted meanwhile that it did not ask for
    return metadata_update(snapshot)


def needed_topics(m: MetadataHost) -> frozenset[str]:
    """The topics the member itself needs by name: its subscription's topics (not a
    pattern's: no name to miss), or the topics of a manual assignment."""
    sub = m.subscription
    if sub is not None:
        return sub.topics if sub.pattern is None and sub.regex is None else frozenset()
    return frozenset(tp.topic for tp in m.owned)


def check_missing_topics(m: MetadataHost, present: frozenset[str], now: float) -> None:
    """Say (``TopicsMissing``) which needed topics an answer lacks: at once when that
    changes, again every ``MISSING_TOPICS_REPORT_S`` while some stay missing, and once
    more (empty) when they all exist. Meanwhile metadata is asked every
    ``MISSING_TOPICS_REFRESH_S``: the member keeps waiting for them (issue 35; Java
    warns at every metadata answer, librdkafka once)."""
    refresh = m.metadata_refresh
    absent = needed_topics(m) - present
    if absent and refresh.due_at is not None:
        soon = now + max(refresh.retry_backoff_s, MISSING_TOPICS_REFRESH_S)
        refresh.due_at = min(refresh.due_at, soon)
    last = refresh.missing_reported_at
    repeat = bool(absent) and (last is None or now - last >= MISSING_TOPICS_REPORT_S)
    if absent == refresh.missing and not repeat:
        return
    refresh.missing = absent
    refresh.missing_reported_at = now if absent else None
    m.emit(TopicsMissing(topics=absent))


def answered_directly(m: MetadataHost, now: float) -> int | None:
    """A ``MetadataUpdate`` fed by a test harness answers the request in flight, as a
    harness's ``CoordinatorFound`` answers the lookup; returns that request's id (for
    the member to forget), None when none was in flight."""
    request_id = m.metadata_refresh.in_flight
    if request_id is not None:
        m.metadata_refresh.answered(now)
        refresh_metadata(m, now)
    return request_id


def metadata_update(snapshot: ClusterSnapshot) -> MetadataUpdate:
    """The member's input for ``snapshot``: partition counts and racks of the topics
    without error, the internal topics, and the topic ids the broker gave."""
    metadata = ClusterMetadata(
        partition_counts=snapshot.partition_counts(),
        partition_racks={
            TopicPartition(topic, partition): racks
            for (topic, partition), racks in snapshot.partition_racks().items()
            if racks
        },
    )
    internal = frozenset(name for name, info in snapshot.topics.items() if info.is_internal)
    topic_ids = {
        name: info.topic_id for name, info in snapshot.topics.items() if info.topic_id != ZERO_UUID
    }
    return MetadataUpdate(metadata=metadata, internal_topics=internal, topic_ids=topic_ids)
