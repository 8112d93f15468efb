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
from .._manual import change_assignment, drop_all
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
    """MANUAL, ``close()``: drop the assignment and close. Commits and committed-offset
    fetches still under way are answered now (the consumer commits what it consumed
    before asking to close)."""
    drop_all(m)
    m.fail_commits(CommitFailedError("the consumer was closed"))
    m.fail_fetches(CoopConsumerError("the consumer was closed"))
    m.enter(ConsumerMemberState.CLOSED)
