"""The stable phase and what every live state watches: heartbeats, timers, the
subscription and cluster metadata.

``drive`` runs whatever is due at ``now`` (offset fetches, coordinator lookups, session
and poll expiry, heartbeats, JoinGroup retries); subscription and metadata changes decide whether a
STABLE member must rejoin (Java's ``rejoinNeededOrPending``). ``_table.py`` says which
state and input each handler serves and where it may move the member.

Pure: imports the core, the offset fetches and the join and leave phases; never I/O,
threads or clocks.
"""

from __future__ import annotations

import logging

from ..._protocol import error_codes
from ..._protocol.messages import HeartbeatRequest
from .._base import CoordinatorLookup, ms
from .._effects import Observation
from .._error_actions import Api, ErrorAction, action_for
from .._fetch import drive_fetches
from .._inputs import CoordinatorFound, MetadataUpdate, PollCalled, Subscribe
from .._manual import drive_waiting_commits
from .._metadata import want_metadata
from .._outcomes import HeartbeatOutcome
from ._core import MemberCore
from ._join import enter_prepare, leader_assign, maybe_send_join, send_leader_sync
from ._leave import leave_if_pending, poll_expired
from ._states import MemberState


def apply_subscription(m: MemberCore) -> bool:
    """Recompute the subscribed topic set; True if it changed."""
    sub = m.subscription
    if sub is None:
        topics: frozenset[str] = frozenset()
    elif sub.pattern is None:
        topics = sub.topics
    elif m.metadata is None:
        topics = frozenset()
    else:
        pattern = sub.pattern
        internal = m.internal_topics
        topics = frozenset(
            t
            for t in m.metadata.partition_counts
            if t not in internal and pattern.fullmatch(t) is not None
        )
    changed = topics != m.subscribed
    m.subscribed = topics
    return changed


def on_subscribe(m: MemberCore, event: Subscribe, now: float) -> None:
    m.subscription = event
    apply_subscription(m)
    want_metadata(m, None if event.pattern is not None else event.topics, now)


def subscribe_unjoined(m: MemberCore, event: Subscribe, now: float) -> None:
    on_subscribe(m, event, now)
    m.last_poll = now
    m.ensure_coordinator(now)
    enter_prepare(m, f"subscribed to {describe_subscription(m)}", now)


def subscribe_stable(m: MemberCore, event: Subscribe, now: float) -> None:
    on_subscribe(m, event, now)
    check_rejoin_needed(m, now)


def describe_subscription(m: MemberCore) -> str:
    sub = m.subscription
    if sub is not None and sub.pattern is not None:
        return f"pattern {sub.pattern.pattern!r}"
    return f"topics [{', '.join(sorted(m.subscribed))}]"


def on_metadata(m: MemberCore, event: MetadataUpdate, now: float) -> None:
    m.metadata = event.metadata
    m.internal_topics = event.internal_topics
    apply_subscription(m)


def metadata_stable(m: MemberCore, event: MetadataUpdate, now: float) -> None:
    on_metadata(m, event, now)
    check_rejoin_needed(m, now)


def metadata_leader(m: MemberCore, event: MetadataUpdate, now: float) -> None:
    on_metadata(m, event, now)
    if m.metadata_refresh.in_flight is not None:
        # An answer to a request sent before the leader asked for the group's topics:
        # the request that asks for them is out (_metadata.py); assign from its answer.
        return
    leader_assign(m, now, metadata_refreshed=True)


def check_rejoin_needed(m: MemberCore, now: float) -> None:
    """STABLE: rejoin if the subscription changed since the join, or (leader) the
    metadata it assigned from changed (Java's ``rejoinNeededOrPending``)."""
    if m.joined_subscription is not None and m.joined_subscription != m.subscribed:
        added = m.subscribed - m.joined_subscription
        removed = m.joined_subscription - m.subscribed
        enter_prepare(
            m,
            f"subscription changed since the last join (added [{', '.join(sorted(added))}], "
            f"removed [{', '.join(sorted(removed))}])",
            now,
        )
        return
    snapshot = m.assignment_snapshot
    if m.is_leader and snapshot is not None:
        for topic in m.snapshot_unknown:
            count = m.metadata.partition_count(topic) if m.metadata else None
            if count is not None:
                snapshot[topic] = count
                m.snapshot_unknown -= {topic}
        current = m.metadata_snapshot(frozenset(snapshot))
        if current != snapshot:
            changed = sorted(t for t in snapshot if snapshot[t] != current[t])
            enter_prepare(
                m,
                f"partition metadata of topics [{', '.join(changed)}] changed since the "
                f"leader assigned them",
                now,
            )


def on_tick(m: MemberCore, event: object, now: float) -> None:
    drive(m, now)


def drive(m: MemberCore, now: float) -> None:
    """Do whatever is due at ``now``: offset fetches, a pending leave, lookups,
    session/poll expiry, heartbeats and (re)sending JoinGroup."""
    drive_waiting_commits(m, now)  # before fetches: a fetch may read these commits back
    drive_fetches(m, now)
    if leave_if_pending(m, now):
        return
    if m.lookup is CoordinatorLookup.BACKING_OFF:
        m.ensure_coordinator(now)
    # Checked even while the coordinator is unknown (Java checks only when it is
    # known): the broker expires us either way and may hand our partitions to
    # another member, so losing them here keeps ownership exclusive.
    if m.session_timed() and now >= m.session_deadline():
        if m.heartbeating():
            reason = "the session timed out without a successful heartbeat response"
        else:
            reason = (
                "the session timed out while rejoining with no JoinGroup or "
                "SyncGroup held by the coordinator"
            )
        session_lapsed(m, reason, now)
        return
    if m.heartbeating():
        # An application waiting in close() or unsubscribe() for the SyncGroup answer
        # is not failing to poll: the leave it asked for, bounded by its own deadline,
        # must not turn into a poll-timeout leave that commits nothing.
        if m.leave_pending is None and now >= m.last_poll + ms(m.config.max_poll_interval_ms):
            poll_expired(m, now)
            return
        if (
            m.coordinator_id is not None
            and not m.in_flight(Api.HEARTBEAT)
            and (m.heartbeat_due is None or now >= m.heartbeat_due)
        ):
            m.send(
                Api.HEARTBEAT,
                HeartbeatRequest(
                    group_id=m.config.group_id,
                    generation_id=m.generation_id,
                    member_id=m.member_id,
                    group_instance_id=m.config.group_instance_id,
                ),
                now,
            )
            m.observe(Observation.HEARTBEAT_SENT, now)
            m.heartbeat_due = now + ms(m.config.heartbeat_interval_ms)
    if m.state is MemberState.JOINING:
        maybe_send_join(m, now)
    elif m.state is MemberState.LEADER_AWAITING_METADATA:
        send_leader_sync(m, now)


def on_coordinator_found(m: MemberCore, event: CoordinatorFound, now: float) -> None:
    if event.node_id != m.live_node:
        m.live_node = None
    m.coordinator_found(event.node_id, now)
    if m.heartbeating():
        m.heartbeat_due = max(now, m.heartbeat_retry_at)
    drive(m, now)


def on_poll(m: MemberCore, event: PollCalled, now: float) -> None:
    # _last_poll is updated by handle() before dispatch.
    return


def session_lapsed(m: MemberCore, reason: str, now: float) -> None:
    """The coordinator may have expired the member: its partitions are lost (the
    broker may have handed them to others already) and it rejoins afresh."""
    m.reset_generation(clear_member_id=True)
    m.coordinator_dead("the session timed out", now)
    enter_prepare(m, reason, now)


def heartbeat_outcome(m: MemberCore, event: HeartbeatOutcome, now: float) -> None:
    if event.error is not None or event.response is None:
        m.coordinator_dead(f"heartbeat failed: {event.error}", now)
        m.heartbeat_due = m.heartbeat_failed(now)
        return
    # The coordinator saw the member no later than when this heartbeat left, so the
    # session counts from then, not from when the answer is read: a member stopped
    # (SIGSTOP, a long pause) right after sending reads an old answer on waking, and
    # must not take it as proof that a session the broker expired meanwhile is alive.
    sent_at = event.pending.sent_at
    if m.session_timed() and now >= sent_at + ms(m.config.session_timeout_ms):
        session_lapsed(
            m,
            "the session timed out: the heartbeat answer came "
            f"{now - sent_at:.1f} s after its request, longer than the session",
            now,
        )
        return
    code = event.response.error_code
    if code == error_codes.NONE:
        m.session_ok_at = max(m.session_ok_at, sent_at)
        return
    name = error_codes.info(code).name
    action = action_for(Api.HEARTBEAT, code)
    if action is ErrorAction.FIND_COORDINATOR:
        m.coordinator_dead(f"{name} from Heartbeat", now)
        m.heartbeat_due = m.heartbeat_failed(now)
    elif action is ErrorAction.REJOIN:
        m.session_ok_at = max(m.session_ok_at, sent_at)  # alive when the request left
        request_rejoin(m, "the group is rebalancing (REBALANCE_IN_PROGRESS from Heartbeat)", now)
    elif action is ErrorAction.RESET_AND_REJOIN:
        m.reset_generation(clear_member_id=code == error_codes.UNKNOWN_MEMBER_ID)
        enter_prepare(m, f"encountered {name} from Heartbeat", now)
    elif action is ErrorAction.FATAL:
        m.fatal(m.kafka_error(code, Api.HEARTBEAT), now)
    else:  # RETRY: Java's heartbeat thread logs it and tries at the next interval
        m.log(logging.WARNING, f"heartbeat answered {name}; retrying at the next interval")


def request_rejoin(m: MemberCore, reason: str, now: float) -> None:
    """A rebalance is wanted: STABLE rejoins now, ASSIGNING after its listeners;
    states already (re)joining need nothing more."""
    if m.state is MemberState.STABLE:
        enter_prepare(m, reason, now)
    elif m.state is MemberState.ASSIGNING and m.follow_up_reason is None:
        m.follow_up_reason = reason
