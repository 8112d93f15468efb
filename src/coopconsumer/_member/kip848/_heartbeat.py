"""Joining, heartbeating and being fenced (KIP-848).

A member joins by heartbeating with epoch 0 and every field filled in; afterwards a
heartbeat leaves a field null when it did not change since the last answered one
(``SentFields``), and goes out at the interval the coordinator returned, counted from
when the previous one left. Each answer
carries the member's epoch and, when it changed, its target assignment, which
``_reconcile`` applies. Errors map to actions through the shared table
(``_error_actions``): a fenced or unknown member loses its partitions and rejoins at
epoch 0 with the same member id; an error no retry can cure is fatal. ``_table.py``
says which state and input each handler serves and where it may move the member.

Pure: imports the core and the shared phases; never I/O, threads or clocks.
"""

from __future__ import annotations

import logging

from ..._errors import ConfigurationError, KafkaError
from ..._protocol import error_codes
from ..._protocol.group_messages import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupHeartbeatQuery,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
)
from ..._types import TopicPartition
from .._base import ms
from .._effects import Observation
from .._error_actions import Api, ErrorAction, action_for
from .._fetch import drive_fetches
from .._inputs import (
    CoordinatorFound,
    ListenerDone,
    MetadataUpdate,
    PollCalled,
    Subscribe,
    Tick,
)
from .._manual import drive_waiting_commits
from .._metadata import want_metadata
from . import _reconcile
from ._commit import drive_stale_commits
from ._core import (
    RECONCILING_HEARTBEATS_PER_INTERVAL,
    HeartbeatOutcome,
    MemberCore,
    SentFields,
)
from ._reconcile import maybe_reconcile
from ._states import ConsumerMemberState

JOINING = ConsumerMemberState.JOINING
RECONCILING = ConsumerMemberState.RECONCILING
ACKNOWLEDGING = ConsumerMemberState.ACKNOWLEDGING
STABLE = ConsumerMemberState.STABLE
FENCED = ConsumerMemberState.FENCED
STALE = ConsumerMemberState.STALE


# ---------------------------------------------------------------------- subscription


def subscribe_unsubscribed(m: MemberCore, event: Subscribe, now: float) -> None:
    set_subscription(m, event, now)
    m.last_poll = now
    rejoin(m, "the consumer subscribed", now)


def on_subscribe(m: MemberCore, event: Subscribe, now: float) -> None:
    """A new subscription while in the group: the next heartbeat, sent at once, carries
    it; the coordinator answers with a new target assignment."""
    set_subscription(m, event, now)
    if m.heartbeating():
        m.heartbeat_due = now
        drive(m, now)


def set_subscription(m: MemberCore, event: Subscribe, now: float) -> None:
    m.subscription = event
    m.subscribed = _matching(m) if event.pattern is not None else event.topics
    # A pattern is matched here against every topic; a broker-side regex is matched by
    # the coordinator, whose target then names topics by id: both need every topic.
    local = event.pattern is None and event.regex is None
    want_metadata(m, event.topics if local else None, now)


def _matching(m: MemberCore) -> frozenset[str]:
    sub = m.subscription
    if sub is None or sub.pattern is None:
        return m.subscribed
    pattern = sub.pattern
    return frozenset(t for t in m.all_topics if t not in m.internal_topics and pattern.fullmatch(t))


def on_metadata(m: MemberCore, event: MetadataUpdate, now: float) -> None:
    """Topic ids (to read target assignments) and, for a pattern, the matching topics.
    A target waiting for a topic id is reconciled once the id is known."""
    for name, topic_id in event.topic_ids.items():
        m.topic_ids[name] = topic_id
        m.topic_names[topic_id] = name
    m.all_topics = frozenset(event.metadata.partition_counts)
    m.internal_topics = event.internal_topics
    if m.subscription is not None and m.subscription.pattern is not None:
        matching = _matching(m)
        if matching != m.subscribed:
            m.subscribed = matching
            if m.heartbeating():
                m.heartbeat_due = now
    maybe_reconcile(m, now)
    drive(m, now)


# ---------------------------------------------------------------------- timers and polls


def on_coordinator_found(m: MemberCore, event: CoordinatorFound, now: float) -> None:
    if event.node_id != m.live_node:
        m.live_node = None
    m.coordinator_found(event.node_id, now)
    if m.heartbeating():
        m.heartbeat_due = max(now, m.heartbeat_retry_at)
    drive(m, now)


def on_tick(m: MemberCore, event: Tick, now: float) -> None:
    drive(m, now)


def on_poll(m: MemberCore, event: PollCalled, now: float) -> None:
    """``last_poll`` is recorded by the member for every state; nothing else to do."""


def rejoin_after_poll(m: MemberCore, event: PollCalled, now: float) -> None:
    rejoin(m, "the consumer polled again after max.poll.interval.ms expired", now)


def drive(m: MemberCore, now: float) -> None:
    """Everything timers decide: commits of a manual assignment waiting for the
    coordinator, commits waiting for a new epoch, committed-offset fetches, the poll
    timeout, the next heartbeat, and a coordinator lookup when one is needed."""
    drive_waiting_commits(m, now)  # before fetches: a fetch may read these commits back
    drive_stale_commits(m, now)
    drive_fetches(m, now)
    if (
        m.heartbeating()
        and m.member_epoch > 0
        and now >= m.last_poll + ms(m.config.max_poll_interval_ms)
    ):
        poll_expired(m, now)
        return
    if not m.heartbeating():
        return
    if m.coordinator_id is None:
        m.ensure_coordinator(now)
        return
    if (
        m.heartbeat_due is not None
        and now >= m.heartbeat_due
        and not m.in_flight(Api.CONSUMER_GROUP_HEARTBEAT)
    ):
        send_heartbeat(m, now)


def poll_expired(m: MemberCore, now: float) -> None:
    """``max.poll.interval.ms`` passed: leave the group (so the coordinator reassigns
    at once rather than after the session timeout), report the partitions LOST and wait
    for the next poll (Java's ``transitionToSendingLeaveGroup(dueToExpiredPollTimer)``)."""
    m.log(
        logging.WARNING,
        "max.poll.interval.ms expired without a poll: leaving the group; the next poll "
        "rejoins (increase max.poll.interval.ms or return from poll() sooner)",
    )
    m.cancel(Api.CONSUMER_GROUP_HEARTBEAT)
    if send_leave(m, leave_epoch(m, None), now):
        # Its answer changes nothing: dropped (and timed) as a superseded request, so
        # that a quick rejoin does not read it as the answer to its join.
        m.cancel(Api.CONSUMER_GROUP_HEARTBEAT)
    reset(m)
    m.lose()
    m.enter(STALE)


# ---------------------------------------------------------------------- joining


def rejoin(m: MemberCore, reason: str, now: float) -> None:
    """Join (again) at epoch 0, telling the coordinator everything."""
    m.reason = reason
    m.log(logging.INFO, f"joining group {m.config.group_id!r}: {reason}")
    reset(m)
    m.enter(JOINING)
    m.heartbeat_due = now
    drive(m, now)


def reset(m: MemberCore) -> None:
    """Forget the epoch and the target; the member id stays (KIP-1082)."""
    m.member_epoch = JOIN_EPOCH
    m.reconciled = frozenset()
    m.target = None
    m.to_add = None
    m.sent = None
    m.reconciling_until = None


def leave_epoch(m: MemberCore, leave_group: bool | None) -> int | None:
    """The leave heartbeat's epoch: ``leave_group`` None is Java's default (a dynamic
    member leaves, a static member says it will come back), False stays in the group."""
    if leave_group is False:
        return None
    if leave_group is None and m.config.group_instance_id is not None:
        return STATIC_LEAVE_EPOCH
    return LEAVE_EPOCH


def send_leave(m: MemberCore, epoch: int | None, now: float) -> bool:
    """Send the leave heartbeat with ``epoch``; False when there is nothing to send."""
    if epoch is None or m.coordinator_id is None or not m.member_id:
        return False
    request = ConsumerGroupHeartbeatRequest(
        group_id=m.config.group_id,
        member_id=m.member_id,
        member_epoch=epoch,
        instance_id=m.config.group_instance_id,
    )
    m.send(Api.CONSUMER_GROUP_HEARTBEAT, ConsumerGroupHeartbeatQuery(request=request), now)
    return True


# ---------------------------------------------------------------------- heartbeats


def send_heartbeat(m: MemberCore, now: float) -> None:
    request, fields = heartbeat_request(m)
    m.heartbeat_due = None
    query = ConsumerGroupHeartbeatQuery(request=request)
    m.send(Api.CONSUMER_GROUP_HEARTBEAT, query, now, token=fields)
    m.observe(Observation.HEARTBEAT_SENT, now)


def heartbeat_request(m: MemberCore) -> tuple[ConsumerGroupHeartbeatRequest, SentFields]:
    """The next heartbeat, and what it tells the coordinator. Joining, and after any
    failure, every field is sent; otherwise only what changed (KIP-848)."""
    config = m.config
    regex = m.subscription.regex if m.subscription is not None else None
    # With a broker-side regex the names are empty: the coordinator takes the union.
    subscribed = () if regex is not None else tuple(sorted(m.subscribed))
    owned = m.reconciled
    fields = SentFields(
        subscribed_topic_names=subscribed, owned=owned, subscribed_topic_regex=regex
    )
    last = m.sent if m.member_epoch != JOIN_EPOCH else None
    full = last is None
    changed = last is None or (
        last.subscribed_topic_names != subscribed or last.subscribed_topic_regex != regex
    )
    request = ConsumerGroupHeartbeatRequest(
        group_id=config.group_id,
        member_id=m.member_id,
        member_epoch=m.member_epoch,
        instance_id=config.group_instance_id if full else None,
        rack_id=config.client_rack if full else None,
        rebalance_timeout_ms=config.max_poll_interval_ms if full else -1,
        # Names and regex travel together (librdkafka's mock requires it); a regex of
        # "" (set by the query at v1+) drops a previous one.
        subscribed_topic_names=subscribed if changed else None,
        subscribed_topic_regex=regex if changed else None,
        server_assignor=config.server_assignor if full else None,
        topic_partitions=(
            owned_by_topic_id(m, owned) if last is None or last.owned != owned else None
        ),
    )
    return request, fields


def owned_by_topic_id(
    m: MemberCore, partitions: frozenset[TopicPartition]
) -> tuple[ConsumerGroupHeartbeatRequestTopicPartitions, ...]:
    """Partitions grouped by topic id, in order. Everything owned came from a target
    assignment whose ids were resolved, so every id is known."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return tuple(
        ConsumerGroupHeartbeatRequestTopicPartitions(
            topic_id=m.topic_ids[topic], partitions=tuple(parts)
        )
        for topic, parts in by_topic.items()
    )


def heartbeat_outcome(m: MemberCore, event: HeartbeatOutcome, now: float) -> None:
    response = event.response
    error = event.error
    if isinstance(error, KafkaError) and error.code == error_codes.UNSUPPORTED_VERSION:
        # A broker without KIP-848 (before Kafka 4.0, or one that does not enable it):
        # no retry can help.
        m.fatal(
            ConfigurationError(
                f"group.protocol=consumer needs a broker that supports KIP-848's "
                f"ConsumerGroupHeartbeat (Kafka 4.0+); this one does not ({error}); "
                f"use group.protocol=classic"
            ),
            now,
        )
        return
    if error is not None or response is None:
        m.coordinator_dead(f"ConsumerGroupHeartbeat failed: {error}", now)
        m.heartbeat_due = m.heartbeat_failed(now)
        return
    code = response.error_code
    if code != error_codes.NONE:
        _heartbeat_error(m, code, response.error_message, now)
        return
    fields = event.pending.token
    if isinstance(fields, SentFields):
        m.sent = fields
    if response.member_id:
        m.member_id = response.member_id
    # A join is a change too: the coordinator may answer it at epoch 0 and without an
    # assignment while other members still own this one's partitions (librdkafka's mock).
    changed = m.state is JOINING or response.member_epoch != m.member_epoch
    m.member_epoch = response.member_epoch
    if response.heartbeat_interval_ms > 0:
        m.heartbeat_interval_s = ms(response.heartbeat_interval_ms)
    if response.assignment is not None:
        target = frozenset(
            (topic.topic_id, partition)
            for topic in response.assignment.topic_partitions
            for partition in topic.partitions
        )
        changed = changed or target != m.target
        m.target = target
    if changed:
        m.reconciling_until = now + m.heartbeat_interval_s
    elif m.reconciling_until is not None and now >= m.reconciling_until:
        m.reconciling_until = None
    m.heartbeat_due = max(now, next_heartbeat_at(m, event.pending.sent_at, now))
    if m.state is ACKNOWLEDGING:
        if isinstance(fields, SentFields) and fields.owned == m.reconciled:
            m.enter(STABLE)
        else:
            m.heartbeat_due = now  # this one left before the reconciliation ended
    maybe_reconcile(m, now)
    drive(m, now)


def next_heartbeat_at(m: MemberCore, sent_at: float, now: float) -> float:
    """When the heartbeat after one sent at ``sent_at`` and answered at ``now`` is due.

    The interval counts from when that heartbeat left, as Java's heartbeat timer,
    librdkafka's and the classic member's do: the round trip does not shift the
    member's phase. For one interval after its epoch or assignment changed, the
    member heartbeats ``RECONCILING_HEARTBEATS_PER_INTERVAL`` times as often: the
    other members learn of the same change at their own next heartbeats and release
    partitions for this one as they reconcile, and the coordinator hands a partition
    over only in the answer to its new owner's heartbeat, so at the regular pace a
    member that heartbeated just before its giver acknowledged waits a whole interval
    more (docs/architecture.md, "Rebalance timing")."""
    interval = m.heartbeat_interval_s
    if m.reconciling_until is not None and now < m.reconciling_until:
        return sent_at + interval / RECONCILING_HEARTBEATS_PER_INTERVAL
    return sent_at + interval


def _heartbeat_error(m: MemberCore, code: int, message: str | None, now: float) -> None:
    name = error_codes.info(code).name
    action = action_for(Api.CONSUMER_GROUP_HEARTBEAT, code)
    m.sent = None  # the coordinator may have missed the last change: say everything
    if action is ErrorAction.RESET_AND_REJOIN:
        fence(m, f"encountered {name} from ConsumerGroupHeartbeat", now)
    elif action is ErrorAction.FIND_COORDINATOR:
        m.coordinator_dead(f"{name} from ConsumerGroupHeartbeat", now)
        m.heartbeat_due = m.heartbeat_failed(now)
    elif action is ErrorAction.FATAL:
        m.fatal(
            error_codes.to_exception(
                code, api_key=Api.CONSUMER_GROUP_HEARTBEAT.value, message=message
            ),
            now,
        )
    else:
        m.log(logging.DEBUG, f"ConsumerGroupHeartbeat: {name}; retrying")
        m.heartbeat_due = now + ms(m.config.retry_backoff_ms)


def fence(m: MemberCore, reason: str, now: float) -> None:
    """The coordinator no longer counts this epoch: what is owned is LOST (another
    member may own it now), then the member rejoins at epoch 0 once no listener runs."""
    m.log(logging.INFO, f"fenced: {reason}")
    m.cancel(Api.CONSUMER_GROUP_HEARTBEAT)
    if m.state is RECONCILING:
        m.observe(Observation.REBALANCE_FAILED, now)
        m.rebalance_started_at = None
    reset(m)
    drive_stale_commits(m, now)  # out of the group: no new epoch will send them
    m.reason = reason
    m.lose()
    m.enter(FENCED)
    if not m.listeners:
        rejoin(m, reason, now)


def fenced_listener_done(m: MemberCore, event: object, now: float) -> None:
    if not m.listeners:
        rejoin(m, m.reason, now)


def reconcile_listener_done(m: MemberCore, event: ListenerDone, now: float) -> None:
    """RECONCILING: a listener returned; acknowledge at once when the reconciliation
    is complete."""
    _reconcile.reconcile_listener_done(m, event, now)
    drive(m, now)
