"""Leaving the group: LEAVING, POLL_EXPIRED and the way back to UNJOINED or CLOSED.

Unsubscribe and close (REVOKED or LOST first, as Java's ``onLeavePrepare``, then
LeaveGroup unless a static member keeps its place), the poll-timeout leave
(``max.poll.interval.ms``) and the rejoin on the next poll. ``_table.py`` says which
state and input each handler serves and where it may move the member.

Pure: imports the core and the join phase; never I/O, threads or clocks.
"""

from __future__ import annotations

import logging

import attrs

from ..._errors import CommitFailedError, CoopConsumerError
from ..._protocol import error_codes
from ..._protocol.messages import LeaveGroupRequest, MemberIdentity
from .._error_actions import Api
from .._inputs import CloseRequested, LeaveRequested, ListenerDone, PollCalled
from .._outcomes import LeaveGroupOutcome
from ._core import MemberCore, PendingLeave
from ._join import enter_prepare
from ._states import JOIN_STAGE_STATES, MemberState


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
    if m.leave_pending is not None:
        return  # already leaving once the SyncGroup answers
    if not defer_leave(m, MemberState.UNJOINED, None, event.reason, event.commit_wait_s, now):
        enter_leaving(m, MemberState.UNJOINED, None, event.reason, now)


def close(m: MemberCore, event: CloseRequested, now: float) -> None:
    pending = m.leave_pending
    if pending is not None:  # an unsubscribe waiting for the SyncGroup answer: close
        leave_group = pending.leave_group if event.leave_group is None else event.leave_group
        m.leave_pending = attrs.evolve(
            pending, then=MemberState.CLOSED, leave_group=leave_group, reason=event.reason
        )
        return
    if not defer_leave(
        m, MemberState.CLOSED, event.leave_group, event.reason, event.commit_wait_s, now
    ):
        enter_leaving(m, MemberState.CLOSED, event.leave_group, event.reason, now)


def defer_leave(
    m: MemberCore,
    then: MemberState,
    leave_group: bool | None,
    reason: str,
    wait_s: float,
    now: float,
) -> bool:
    """Leaving now, in the middle of a join, would report the owned partitions lost
    and commit nothing (Java's ``onLeavePrepare``), although a cooperative member kept
    returning their records all along (KIP-429); a commit cannot be slipped in either,
    since it would queue behind the parked JoinGroup/SyncGroup and reach a generation
    that is gone. With auto-commit, wait up to ``wait_s`` for the SyncGroup answer and
    leave from there, committing first (docs/architecture.md, "Leaving in the middle
    of a rebalance"). True if the leave now waits."""
    if not (wait_s > 0 and m.config.enable_auto_commit and m.leave_worth_waiting()):
        return False
    m.leave_pending = PendingLeave(
        then=then, leave_group=leave_group, reason=reason, asked_at=now, deadline=now + wait_s
    )
    m.log(
        logging.INFO,
        f"leaving once the rebalance under way reaches the SyncGroup answer (at most "
        f"{wait_s:.1f}s), to commit the positions of "
        f"{len(m.owned)} partition(s) first",
    )
    return True


def leave_if_pending(m: MemberCore, now: float, *, synced: bool = False) -> bool:
    """Carry out a pending leave that is due: at the SyncGroup answer (``synced``: the
    generation is valid and no join is under way, so the partitions are revoked with a
    commit), at its deadline, or once waiting can commit nothing. True if it left."""
    pending = m.leave_pending
    if pending is None:
        return False
    if not synced and now < pending.deadline and m.leave_worth_waiting():
        return False
    if not synced and m.leave_worth_waiting():
        m.log(
            logging.WARNING,
            f"leaving in the middle of a rebalance: {len(m.owned)} partition(s) left "
            f"uncommitted; their next owner may process records again",
        )
    enter_leaving(m, pending.then, pending.leave_group, pending.reason, now, rebalancing=not synced)
    return True


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
    m: MemberCore,
    then: MemberState,
    leave_group: bool | None,
    reason: str,
    now: float,
    *,
    rebalancing: bool = True,
) -> None:
    """Leave: REVOKED, or LOST as Java's ``onLeavePrepare`` when the generation is gone
    or (unless not ``rebalancing``: the SyncGroup just answered) a JoinGroup/SyncGroup
    is under way; then LeaveGroup."""
    lost = (
        not m.has_generation()
        or m.state is MemberState.POLL_EXPIRED
        or (rebalancing and m.state in JOIN_STAGE_STATES)
    )
    m.leave_pending = None
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
    elif event.response is not None and event.response.error_code != error_codes.NONE:
        name = error_codes.info(event.response.error_code).name
        m.log(logging.DEBUG, f"LeaveGroup answered {name} (ignored)")
    finish_leave(m, now)


def finish_leave(m: MemberCore, now: float) -> None:
    m.reset_generation(clear_member_id=True)
    m.joined_subscription = None
    m.join_started_counts = None  # the next join starts afresh
    m.rebalance_started_at = None
    m.leave_pending = None
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
