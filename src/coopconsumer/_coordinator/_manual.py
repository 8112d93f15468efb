"""Manual assignment: MANUAL, the state of a consumer that assigned partitions itself.

``AssignRequested`` replaces, extends or shrinks the assignment (confluent-kafka's
``assign``, ``incremental_assign``, ``incremental_unassign``) with ``Assign``/``Unassign``
effects and no group membership at all: no JoinGroup, heartbeat, LeaveGroup or
listener. The coordinator is still looked up at once, since commits and committed
offsets go through it (``_commit.commit_manual``, ``_fetch``); a commit asked for
before it is found waits for it (``drive_waiting_commits``). An empty assignment is
no mode: the member is back in UNJOINED, free to subscribe (Java's ``assign(empty)``
is ``unsubscribe()``). ``_table.py`` says which state and input each handler serves;
mixing with ``Subscribe`` is rejected there (docs/architecture.md, "Manual
assignment").

Pure: imports only the core; never I/O, threads or clocks.
"""

from __future__ import annotations

from .._errors import CommitFailedError, ConfigurationError, CoopConsumerError
from .._protocol import errors
from .._types import TopicPartition
from ._core import NO_GENERATION, MemberCore
from ._effects import Assign, CommitDone, Unassign
from ._error_actions import Api
from ._inputs import AssignmentChange, AssignRequested, CloseRequested, LeaveRequested
from ._states import MemberState


def _names(partitions: frozenset[TopicPartition]) -> str:
    return ", ".join(map(str, sorted(partitions)))


def assign(m: MemberCore, event: AssignRequested, now: float) -> None:
    """UNJOINED and MANUAL: change the manual assignment. Checks everything before
    changing anything, so a refused change leaves the member as it was."""
    asked = event.partitions
    unknown = frozenset(event.starts) - asked
    if unknown:
        raise ConfigurationError(f"start offsets given for partitions not asked: {_names(unknown)}")
    owned = frozenset(m.owned)
    if event.change is AssignmentChange.ADD:
        twice = asked & owned
        if twice:
            raise ConfigurationError(
                f"incremental_assign() of partitions already assigned: {_names(twice)}"
            )
        removed: frozenset[TopicPartition] = frozenset()
        added = asked
    elif event.change is AssignmentChange.REMOVE:
        missing = asked - owned
        if missing:
            raise ConfigurationError(
                f"incremental_unassign() of partitions not assigned: {_names(missing)}"
            )
        if event.starts:
            raise ConfigurationError("incremental_unassign() takes no start offsets")
        removed = asked
        added = frozenset()
    else:
        # librdkafka's assign() drops the whole old assignment before the new one, so
        # a partition assigned again restarts from its committed (or given) offset.
        removed = owned
        added = asked
    if removed:
        m.owned -= removed
        m.emit(Unassign(partitions=removed))
    if added:
        m.owned |= added
        m.emit(Assign(partitions=added, starts=event.starts))
    if m.owned:
        m.enter(MemberState.MANUAL)
        m.ensure_coordinator_if_unknown(now)  # commits and offset fetches need it
    else:
        m.enter(MemberState.UNJOINED)


def unassign_all(m: MemberCore, event: LeaveRequested, now: float) -> None:
    """MANUAL, ``unsubscribe()``: drop the manual assignment (no LeaveGroup: the
    member never joined)."""
    _drop_all(m)
    m.enter(MemberState.UNJOINED)


def close_manual(m: MemberCore, event: CloseRequested, now: float) -> None:
    """MANUAL, ``close()``: drop the assignment and close. Commits still in flight are
    answered now (the consumer commits what it consumed before asking to close)."""
    _drop_all(m)
    m.fail_commits(CommitFailedError("the consumer was closed"))
    m.fail_fetches(CoopConsumerError("the consumer was closed"))
    m.pending.clear()
    m.enter(MemberState.CLOSED)


def _drop_all(m: MemberCore) -> None:
    if m.owned:
        owned = frozenset(m.owned)
        m.owned.clear()
        m.emit(Unassign(partitions=owned))


def drive_waiting_commits(m: MemberCore, now: float) -> None:
    """Send the commits that waited for the coordinator, in order, once it is known;
    fail those whose deadline passed first (retriable: the coordinator may come)."""
    if not m.waiting_commits:
        return
    if m.coordinator_id is not None:
        waiting, m.waiting_commits = m.waiting_commits, []
        for commit in waiting:
            m.send_commit(commit.event, now, generation_id=NO_GENERATION, member_id="")
        return
    late = [w for w in m.waiting_commits if now >= w.deadline]
    if late:
        m.waiting_commits = [w for w in m.waiting_commits if now < w.deadline]
        for commit in late:
            m.emit(
                CommitDone(
                    token=commit.event.token,
                    error=m.kafka_error(errors.COORDINATOR_NOT_AVAILABLE, Api.OFFSET_COMMIT),
                )
            )
