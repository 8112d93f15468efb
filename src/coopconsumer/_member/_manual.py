"""Manual assignment: MANUAL, the state of a consumer that assigned partitions itself.

``AssignRequested`` replaces, extends or shrinks the assignment (confluent-kafka's
``assign``, ``incremental_assign``, ``incremental_unassign``) with ``Assign``/``Unassign``
effects and no group membership at all: no JoinGroup, heartbeat, LeaveGroup or
listener. The coordinator is still looked up at once, since commits and committed
offsets go through it (``commit_manual``, ``_fetch``); a commit asked for before it is
found waits for it (``drive_waiting_commits``). Commits are Kafka's "simple consumer"
commit, generation (or member epoch) -1 and no member id, whichever group protocol the
consumer speaks: a Kafka 4.0 coordinator accepts it from a KIP-848 consumer too, while
the group has no members. An empty assignment is no mode: the member is back in its
initial state, free to subscribe (Java's ``assign(empty)`` is ``unsubscribe()``).

The rules here serve both members (``GroupHost``); each member's table says which of
its states and inputs they serve. The handlers that move a member in and out of
MANUAL are each protocol's own (``_classic_manual.py``, ``kip848/_manual.py``).
Mixing with ``Subscribe`` is rejected in the tables (docs/architecture.md, "Manual
assignment").

Pure: imports only the shared base; never I/O, threads or clocks.
"""

from __future__ import annotations

from .._errors import CommitFailedError, ConfigurationError
from .._protocol import error_codes
from .._types import TopicPartition
from ._base import NO_GENERATION, GroupHost, ms, offset_commit_request
from ._effects import Assign, CommitDone, Unassign
from ._error_actions import Api, ErrorAction, action_for
from ._inputs import (
    AssignmentChange,
    AssignRequested,
    CommitRequested,
)
from ._metadata import want_metadata
from ._offset_jobs import WaitingCommit
from ._outcomes import OffsetCommitOutcome


def _names(partitions: frozenset[TopicPartition]) -> str:
    return ", ".join(map(str, sorted(partitions)))


def change_assignment(m: GroupHost, event: AssignRequested, now: float) -> bool:
    """Apply ``event`` to the manual assignment; whether anything is assigned after
    it. Checks everything before changing anything, so a refused change
    (``ConfigurationError``) leaves the member as it was."""
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
        # Metadata of the assigned topics, to say so when one does not exist
        # (_metadata.check_missing_topics): librdkafka fetches from it in silence.
        want_metadata(m, frozenset(tp.topic for tp in added), now)
    if m.owned and m.coordinator_id is None:
        m.ensure_coordinator(now)  # commits and offset fetches need it
    return bool(m.owned)


def drop_all(m: GroupHost) -> None:
    """Unassign everything (no listener: nothing was given by a group)."""
    if m.owned:
        owned = frozenset(m.owned)
        m.owned.clear()
        m.emit(Unassign(partitions=owned))


def commit_manual(m: GroupHost, event: CommitRequested, now: float) -> None:
    """MANUAL: Kafka's "simple consumer" commit, generation -1 and no member id (Java's
    ``ConsumerCoordinator`` sends ``Generation.NO_GENERATION`` when it has no group
    membership); the coordinator accepts it only while the group has no members."""
    if not event.offsets:
        m.emit(CommitDone(token=event.token))
        return
    if m.coordinator_id is None or m.waiting_commits:
        # Right after assign() the lookup is still under way: wait for it (in order)
        # rather than fail a commit the application could not have timed better.
        m.ensure_coordinator(now)
        m.waiting_commits.append(
            WaitingCommit(event=event, deadline=now + ms(m.config.request_timeout_ms))
        )
        return
    _send_simple_commit(m, event, now)


def _send_simple_commit(m: GroupHost, event: CommitRequested, now: float) -> None:
    request = offset_commit_request(
        group_id=m.config.group_id,
        generation_id=NO_GENERATION,
        member_id="",
        group_instance_id=None,  # committing as nobody carries no static identity
        offsets=event.offsets,
    )
    m.send(Api.OFFSET_COMMIT, request, now, token=event.token, generation=NO_GENERATION)


def refuse_simple_commit(m: GroupHost, event: OffsetCommitOutcome, code: int) -> bool:
    """An answer to a simple commit (generation -1, see ``commit_manual``) that the
    group refused because it has members (UNKNOWN_MEMBER_ID and the like): answer the
    commit with the ``CommitFailedError`` that says so, and return True; no rejoin or
    retry can help while they are there. False for any other answer. Both members'
    ``commit_outcome`` ask this first."""
    if event.pending.generation_id != NO_GENERATION:
        return False
    if action_for(Api.OFFSET_COMMIT, code) not in (
        ErrorAction.RESET_AND_REJOIN,
        ErrorAction.REJOIN,
    ):
        return False
    m.emit(
        CommitDone(
            token=event.pending.token,
            error=CommitFailedError(
                f"the commit failed with {error_codes.info(code).name}: the group "
                f"{m.config.group_id!r} has active members, and a consumer with a manual "
                f"assignment may only commit for a group nobody is subscribed to"
            ),
        )
    )
    return True


def drive_waiting_commits(m: GroupHost, now: float) -> None:
    """Send the commits that waited for the coordinator, in order, once it is known;
    fail those whose deadline passed first (retriable: the coordinator may come)."""
    if not m.waiting_commits:
        return
    if m.coordinator_id is not None:
        waiting, m.waiting_commits = m.waiting_commits, []
        for commit in waiting:
            _send_simple_commit(m, commit.event, now)
        return
    late = [w for w in m.waiting_commits if now >= w.deadline]
    if late:
        m.waiting_commits = [w for w in m.waiting_commits if now < w.deadline]
        for commit in late:
            m.emit(
                CommitDone(
                    token=commit.event.token,
                    error=error_codes.to_exception(
                        error_codes.COORDINATOR_NOT_AVAILABLE, api_key=Api.OFFSET_COMMIT.value
                    ),
                )
            )
