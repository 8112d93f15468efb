"""Leaving the group: LEAVING, POLL_EXPIRED and the way back to UNJOINED or CLOSED.

Unsubscribe and close (REVOKED or LOST first, as Java's ``onLeavePrepare``, then
LeaveGroup unless a static member keeps its place), the poll-timeout leave
(``max.poll.interval.ms``) and the rejoin on the next poll. ``_table.py`` says which
state and input each handler serves and where it may move the member.

Pure: imports the core and the join phase; never I/O, threads or clocks.
"""

from __future__ import annotations

import logging

from .._errors import CommitFailedError, CoopConsumerError
from .._protocol import errors
from .._protocol.messages import LeaveGroupRequest, MemberIdentity
from ._core import MemberCore
from ._error_actions import Api
from ._inputs import CloseRequested, LeaveRequested, ListenerDone, PollCalled
from ._join import enter_prepare
from ._outcomes import LeaveGroupOutcome
from ._states import MemberState


def poll_expired(m: MemberCore, now: float) -> None:
    """max.poll.interval.ms passed: leave proactively (Java's ``maybeLeaveGroup``);
    partitions are dropped now and reported LOST."""
    reason = (
        f"consumer poll timeout has expired: no poll() within max.poll.interval.ms "
        f"({m.config.max_poll_interval_ms} ms)"
    )
    m.log(logging.WARNING, reason)
    m.cancel(Api.HEARTBEAT, Api.JOIN_GROUP, Api.SYNC_GROUP)
    m.lose()
    send_leave_if_dynamic(m, reason, now)
    m.reset_generation(clear_member_id=True)
    m.enter(MemberState.POLL_EXPIRED)


def send_leave_if_dynamic(
    m: MemberCore, reason: str, now: float, force: bool | None = None
) -> bool:
    leave = force if force is not None else m.config.group_instance_id is None
    if not (leave and m.coordinator_id is not None and m.member_id):
        return False
    m.send(
        Api.LEAVE_GROUP,
        LeaveGroupRequest(
            group_id=m.config.group_id,
            member_id=m.member_id,
            members=(
                MemberIdentity(
                    member_id=m.member_id,
                    group_instance_id=m.config.group_instance_id,
                    reason=reason,
                ),
            ),
        ),
        now,
    )
    return True


def rejoin_after_poll(m: MemberCore, event: PollCalled, now: float) -> None:
    enter_prepare(m, "rejoining after the poll timeout expired", now)


def unsubscribe(m: MemberCore, event: LeaveRequested, now: float) -> None:
    enter_leaving(m, MemberState.UNJOINED, None, event.reason, now)


def close(m: MemberCore, event: CloseRequested, now: float) -> None:
    enter_leaving(m, MemberState.CLOSED, event.leave_group, event.reason, now)


def close_while_leaving(m: MemberCore, event: CloseRequested, now: float) -> None:
    m.leave_then = MemberState.CLOSED
    if event.leave_group is not None:
        m.leave_group = event.leave_group


def close_fatal(m: MemberCore, event: CloseRequested, now: float) -> None:
    m.enter(MemberState.CLOSED)


def close_unjoined(m: MemberCore, event: CloseRequested, now: float) -> None:
    m.fail_commits(CommitFailedError("the consumer was closed"))
    m.fail_fetches(CoopConsumerError("the consumer was closed"))
    m.pending.clear()
    m.enter(MemberState.CLOSED)


def enter_leaving(
    m: MemberCore, then: MemberState, leave_group: bool | None, reason: str, now: float
) -> None:
    # Java's onLeavePrepare: LOST when the generation is gone or a rebalance is in
    # progress (JoinGroup/SyncGroup stage), REVOKED otherwise.
    lost = not m.has_generation() or m.state in (
        MemberState.JOINING,
        MemberState.AWAITING_SYNC,
        MemberState.LEADER_AWAITING_METADATA,
        MemberState.POLL_EXPIRED,
    )
    m.cancel(Api.JOIN_GROUP, Api.SYNC_GROUP, Api.HEARTBEAT)
    m.enter(MemberState.LEAVING)
    m.leave_then = then
    m.leave_group = leave_group
    m.leave_reason = reason
    m.assignment_to_apply = None
    m.follow_up_reason = None
    if lost:
        m.lose()
    else:
        remaining = frozenset(m.owned) - m.revoking()
        if remaining:
            m.revoke(remaining)
    leave_step(m, now)


def leave_step(m: MemberCore, now: float) -> None:
    if m.listeners or m.in_flight(Api.LEAVE_GROUP):
        return
    if send_leave_if_dynamic(m, m.leave_reason, now, m.leave_group):
        return
    finish_leave(m, now)


def leave_listener_done(m: MemberCore, event: ListenerDone, now: float) -> None:
    leave_step(m, now)


def leave_outcome(m: MemberCore, event: LeaveGroupOutcome, now: float) -> None:
    if event.error is not None:
        m.log(logging.DEBUG, f"LeaveGroup failed (ignored): {event.error}")
    elif event.response is not None and event.response.error_code != errors.NONE:
        name = errors.info(event.response.error_code).name
        m.log(logging.DEBUG, f"LeaveGroup answered {name} (ignored)")
    finish_leave(m, now)


def finish_leave(m: MemberCore, now: float) -> None:
    m.reset_generation(clear_member_id=True)
    m.joined_subscription = None
    m.join_started_counts = None  # the next join starts afresh
    m.rebalance_started_at = None
    if m.leave_then is MemberState.CLOSED:
        m.fail_commits(CommitFailedError("the consumer was closed"))
        m.fail_fetches(CoopConsumerError("the consumer was closed"))
        m.pending.clear()
        m.enter(MemberState.CLOSED)
    else:
        m.subscription = None
        m.subscribed = frozenset()
        m.enter(MemberState.UNJOINED)


def ignore_leave_outcome(m: MemberCore, event: LeaveGroupOutcome, now: float) -> None:
    return
