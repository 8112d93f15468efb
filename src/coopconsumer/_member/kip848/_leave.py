"""Leaving the group and closing (KIP-848).

A member in the group revokes what it owns first (commit before revoke,
``on_partitions_revoked``), then sends the leave heartbeat: member epoch -1, or -2 for
a static member (``group.instance.id``) closing without ``leave_group``, which tells
the coordinator it will come back (its assignment is kept until its session
expires). ``leave_group=False`` stays in the group. A member that is not in the group
(joining, fenced, stale) has nothing to revoke. ``_table.py`` says which state and input
each handler serves and where it may move the member.

Pure: imports the core and the heartbeat phase; never I/O, threads or clocks.
"""

from __future__ import annotations

import logging

from .._error_actions import Api
from .._inputs import CloseRequested, LeaveRequested, ListenerDone
from ._core import HeartbeatOutcome, MemberCore
from ._heartbeat import leave_epoch, reset, send_leave
from ._states import ConsumerMemberState

UNSUBSCRIBED = ConsumerMemberState.UNSUBSCRIBED
PREPARE_LEAVING = ConsumerMemberState.PREPARE_LEAVING
LEAVING = ConsumerMemberState.LEAVING
CLOSED = ConsumerMemberState.CLOSED


def unsubscribe(m: MemberCore, event: LeaveRequested, now: float) -> None:
    _start(m, UNSUBSCRIBED, True, event.reason, now)


def close(m: MemberCore, event: CloseRequested, now: float) -> None:
    _start(m, CLOSED, event.leave_group, event.reason, now)


def close_unsubscribed(m: MemberCore, event: CloseRequested, now: float) -> None:
    m.enter(CLOSED)


def close_while_leaving(m: MemberCore, event: CloseRequested, now: float) -> None:
    m.leave_then = CLOSED


def close_fatal(m: MemberCore, event: CloseRequested, now: float) -> None:
    m.enter(CLOSED)


def _start(
    m: MemberCore, then: ConsumerMemberState, leave_group: bool | None, reason: str, now: float
) -> None:
    m.log(logging.INFO, f"leaving group {m.config.group_id!r}: {reason}")
    in_group = m.in_group()
    m.leave_then = then
    joined = in_group or _join_sent(m)
    m.leave_epoch = leave_epoch(m, leave_group) if joined else None
    m.to_add = None
    if m.rebalance_started_at is not None:
        m.rebalance_started_at = None
    m.enter(PREPARE_LEAVING)
    m.cancel(Api.CONSUMER_GROUP_HEARTBEAT)  # the leave heartbeat decides now
    keep = frozenset(m.owned) - m.revoking()
    if keep:
        if in_group:
            m.revoke(keep)
        else:
            m.lose()
    if not m.listeners:
        _send_or_finish(m, now)


def _join_sent(m: MemberCore) -> bool:
    """A join heartbeat is in flight: the coordinator may have made the member."""
    return m.in_flight(Api.CONSUMER_GROUP_HEARTBEAT)


def leave_listener_done(m: MemberCore, event: ListenerDone, now: float) -> None:
    if not m.listeners:
        _send_or_finish(m, now)


def _send_or_finish(m: MemberCore, now: float) -> None:
    if send_leave(m, m.leave_epoch, now):
        m.enter(LEAVING)
    else:
        _finish(m)


def leave_outcome(m: MemberCore, event: HeartbeatOutcome, now: float) -> None:
    """Whatever the answer, the member is out of the group (or will be when its
    session expires)."""
    if event.error is not None:
        m.log(logging.DEBUG, f"the leave heartbeat failed: {event.error}")
    _finish(m)


def _finish(m: MemberCore) -> None:
    reset(m)
    m.heartbeat_due = None
    if m.leave_then is UNSUBSCRIBED:
        m.subscription = None
        m.subscribed = frozenset()
    m.enter(m.leave_then)
