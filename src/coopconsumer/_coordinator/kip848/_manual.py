"""Manual assignment of a KIP-848 consumer: the MANUAL state's handlers.

The rules are the classic member's (``.._manual``: what an ``AssignRequested`` changes,
the "simple consumer" commit with epoch -1 and no member id, commits waiting for the
coordinator); only the states differ: UNSUBSCRIBED is where an empty assignment
returns. Java's ``AsyncKafkaConsumer.assign`` works the same with
``group.protocol=consumer``.

Pure: imports the core and the shared rules; never I/O, threads or clocks.
"""

from __future__ import annotations

from ..._errors import CommitFailedError, CoopConsumerError
from .._inputs import AssignRequested, CloseRequested, LeaveRequested
from .._manual import change_assignment, drop_all, fail_waiting_commits
from ._core import MemberCore
from ._states import ConsumerMemberState


def assign(m: MemberCore, event: AssignRequested, now: float) -> None:
    """UNSUBSCRIBED and MANUAL: change the manual assignment."""
    if change_assignment(m, event, now):
        m.enter(ConsumerMemberState.MANUAL)
    else:
        m.enter(ConsumerMemberState.UNSUBSCRIBED)


def unassign_all(m: MemberCore, event: LeaveRequested, now: float) -> None:
    """MANUAL, ``unsubscribe()``: drop the manual assignment (nothing to leave)."""
    drop_all(m)
    m.enter(ConsumerMemberState.UNSUBSCRIBED)


def close_manual(m: MemberCore, event: CloseRequested, now: float) -> None:
    """MANUAL, ``close()``: drop the assignment and close. Commits that still wait for
    the coordinator and committed-offset fetches are answered now (the consumer commits
    what it consumed before asking to close)."""
    drop_all(m)
    fail_waiting_commits(m, CommitFailedError("the consumer was closed"))
    for fetch_id in list(m.fetches):
        m.finish_fetch(fetch_id, error=CoopConsumerError("the consumer was closed"))
    m.enter(ConsumerMemberState.CLOSED)
