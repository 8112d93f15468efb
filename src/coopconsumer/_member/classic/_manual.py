"""The classic member's manual assignment: the handlers that move it between UNJOINED,
MANUAL and CLOSED. What both group protocols do with a manual assignment (change it,
drop it, commit it) is in the shared ``.._manual``.

Pure: never I/O, threads or clocks.
"""

from __future__ import annotations

from ..._errors import CommitFailedError, CoopConsumerError
from .._inputs import AssignRequested, CloseRequested, LeaveRequested
from .._manual import change_assignment, drop_all
from ._core import MemberCore
from ._states import MemberState

__all__ = ["assign", "close_manual", "unassign_all"]


def assign(m: MemberCore, event: AssignRequested, now: float) -> None:
    """UNJOINED and MANUAL: change the manual assignment."""
    if change_assignment(m, event, now):
        m.enter(MemberState.MANUAL)
    else:
        m.enter(MemberState.UNJOINED)


def unassign_all(m: MemberCore, event: LeaveRequested, now: float) -> None:
    """MANUAL, ``unsubscribe()``: drop the manual assignment (no LeaveGroup: the
    member never joined)."""
    drop_all(m)
    m.enter(MemberState.UNJOINED)


def close_manual(m: MemberCore, event: CloseRequested, now: float) -> None:
    """MANUAL, ``close()``: drop the assignment and close. Commits still in flight are
    answered now (the consumer commits what it consumed before asking to close)."""
    drop_all(m)
    m.fail_commits(CommitFailedError("the consumer was closed"))
    m.fail_fetches(CoopConsumerError("the consumer was closed"))
    m.pending.clear()
    m.enter(MemberState.CLOSED)
