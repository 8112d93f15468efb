"""The group member's transition table: ``(state, input type) -> (handler, next states)``.

Every ``(MemberState, input type)`` pair is in exactly one of ``TRANSITIONS`` (a
handler, and the states it may move the member to), ``IGNORED`` (legal, nothing to
do) or ``REJECTED`` (only a driver bug can produce it: ``IllegalTransition``).
``GroupMember.handle`` looks the pair up; ``MemberCore.enter`` refuses any move the
row does not list, so the table is the rule, not a comment. The predecessors of each
state are derived from it (``predecessors``), and docs/architecture.md draws it
(``docs/gen_architecture.py``).

A row's next states are every state the handler may pass through or end in while
handling one input (PREPARING_JOIN -> JOINING happens within one input when no
listener is outstanding). Staying in the arrival state is not a move.

Pure: imports the phase modules and the input types; never I/O, threads or clocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from ... import _transition_table
from .. import _discovery, _fetch
from .. import _manual as _shared_manual
from .._inputs import (
    AssignRequested,
    CloseRequested,
    CommitRequested,
    CommittedOffsetsRequested,
    ConnectionLost,
    CoordinatorFound,
    CoordinatorUnavailable,
    LeaveRequested,
    ListenerDone,
    MetadataUpdate,
    PollCalled,
    Subscribe,
    Tick,
)
from .._outcomes import (
    FindCoordinatorOutcome,
    HeartbeatOutcome,
    JoinGroupOutcome,
    LeaveGroupOutcome,
    OffsetCommitOutcome,
    OffsetFetchOutcome,
    SyncGroupOutcome,
)
from . import _commit, _join, _leave, _manual, _stable, _sync
from ._core import MemberCore
from ._states import MemberState

__all__ = [
    "IGNORED",
    "INITIAL_STATE",
    "INPUT_TYPES",
    "REJECTED",
    "TRANSITIONS",
    "Handler",
    "Transition",
    "moves",
    "predecessors",
]

#: A phase handler: ``handler(member, input, now)``; it emits effects on the member.
Handler = Callable[[MemberCore, Any, float], None]
#: One row of the table, as the table kit's ``Transition`` holds it.
Transition = _transition_table.Transition[MemberState]


#: The state of a new member.
INITIAL_STATE: Final = MemberState.UNJOINED

#: The input types the table dispatches on: the driver's inputs, with
#: ``ResponseReceived``/``RequestFailed`` routed to the per-API outcomes first.
INPUT_TYPES: tuple[type, ...] = (
    Subscribe,
    MetadataUpdate,
    CoordinatorFound,
    CoordinatorUnavailable,
    ConnectionLost,
    Tick,
    PollCalled,
    ListenerDone,
    CommitRequested,
    LeaveRequested,
    CloseRequested,
    JoinGroupOutcome,
    SyncGroupOutcome,
    HeartbeatOutcome,
    LeaveGroupOutcome,
    OffsetCommitOutcome,
    CommittedOffsetsRequested,
    FindCoordinatorOutcome,
    OffsetFetchOutcome,
    AssignRequested,
)

UNJOINED = MemberState.UNJOINED
MANUAL = MemberState.MANUAL
PREPARING_JOIN = MemberState.PREPARING_JOIN
JOINING = MemberState.JOINING
LEADER_AWAITING_METADATA = MemberState.LEADER_AWAITING_METADATA
AWAITING_SYNC = MemberState.AWAITING_SYNC
ASSIGNING = MemberState.ASSIGNING
STABLE = MemberState.STABLE
POLL_EXPIRED = MemberState.POLL_EXPIRED
LEAVING = MemberState.LEAVING
CLOSED = MemberState.CLOSED
FATAL = MemberState.FATAL

_LIVE = tuple(s for s in MemberState if s not in (CLOSED, FATAL))
_IN_GROUP = (
    PREPARING_JOIN,
    JOINING,
    LEADER_AWAITING_METADATA,
    AWAITING_SYNC,
    ASSIGNING,
    STABLE,
    POLL_EXPIRED,
)
#: States whose heartbeats may still be answered (a heartbeat is cancelled when the
#: member leaves them; see IGNORED).
_HEARTBEAT_OUTCOME_STATES = (PREPARING_JOIN, LEADER_AWAITING_METADATA, ASSIGNING, STABLE)
#: A rejoin: PREPARING_JOIN, and JOINING at once when no listener is outstanding.
_REJOIN = (PREPARING_JOIN, JOINING)
#: A leave carried out within one input: LEAVING, and UNJOINED or CLOSED at once when
#: no listener and no LeaveGroup is needed.
_LEAVE = (LEAVING, UNJOINED, CLOSED)
#: What timers (``drive``: session and poll expiry, a leave waiting for the SyncGroup
#: answer, see _leave.defer_leave) may do in each state.
_DRIVE: Mapping[MemberState, tuple[MemberState, ...]] = {
    UNJOINED: (),
    MANUAL: (),
    PREPARING_JOIN: (JOINING, POLL_EXPIRED, *_LEAVE),
    JOINING: (*_REJOIN, *_LEAVE),
    LEADER_AWAITING_METADATA: (*_REJOIN, AWAITING_SYNC, POLL_EXPIRED, *_LEAVE),
    AWAITING_SYNC: (*_REJOIN, *_LEAVE),
    ASSIGNING: (*_REJOIN, POLL_EXPIRED),
    STABLE: (*_REJOIN, POLL_EXPIRED),
    # A leave that waited for a SyncGroup answer that a poll timeout overtook.
    POLL_EXPIRED: _LEAVE,
    LEAVING: (),
}

#: (states, input type, handler, next states), one line per handler and its states.
_ROWS: tuple[tuple[Iterable[MemberState], type, Handler, Iterable[MemberState]], ...] = (
    # The subscription and cluster metadata.
    ((UNJOINED,), Subscribe, _stable.subscribe_unjoined, _REJOIN),
    (
        (PREPARING_JOIN, JOINING, LEADER_AWAITING_METADATA, AWAITING_SYNC, ASSIGNING),
        Subscribe,
        _stable.on_subscribe,
        (),
    ),
    ((POLL_EXPIRED,), Subscribe, _stable.on_subscribe, ()),
    ((STABLE,), Subscribe, _stable.subscribe_stable, _REJOIN),
    (
        (s for s in _LIVE if s not in (STABLE, LEADER_AWAITING_METADATA)),
        MetadataUpdate,
        _stable.on_metadata,
        (),
    ),
    ((STABLE,), MetadataUpdate, _stable.metadata_stable, _REJOIN),
    (
        (LEADER_AWAITING_METADATA,),
        MetadataUpdate,
        _stable.metadata_leader,
        (AWAITING_SYNC, JOINING),
    ),
    # The coordinator, timers and polls.
    *(((s,), CoordinatorFound, _stable.on_coordinator_found, _DRIVE[s]) for s in _LIVE),
    (_LIVE, CoordinatorUnavailable, _discovery.on_coordinator_unavailable, (FATAL,)),
    (_LIVE, FindCoordinatorOutcome, _discovery.lookup_outcome, (FATAL,)),
    *(((s,), Tick, _stable.on_tick, _DRIVE[s]) for s in _LIVE),
    ((s for s in _LIVE if s is not POLL_EXPIRED), PollCalled, _stable.on_poll, ()),
    ((POLL_EXPIRED,), PollCalled, _leave.rejoin_after_poll, _REJOIN),
    (_HEARTBEAT_OUTCOME_STATES, HeartbeatOutcome, _stable.heartbeat_outcome, (*_REJOIN, FATAL)),
    # Joining, syncing and applying the assignment.
    ((PREPARING_JOIN,), ListenerDone, _join.prepare_listener_done, (JOINING,)),
    (
        (JOINING,),
        JoinGroupOutcome,
        _join.join_outcome,
        (*_REJOIN, LEADER_AWAITING_METADATA, AWAITING_SYNC, FATAL),
    ),
    (
        (AWAITING_SYNC,),
        SyncGroupOutcome,
        _sync.sync_outcome,
        (*_REJOIN, ASSIGNING, FATAL, *_LEAVE),
    ),
    ((ASSIGNING,), ListenerDone, _sync.assign_listener_done, (*_REJOIN, STABLE)),
    # Commits.
    ((STABLE, ASSIGNING, PREPARING_JOIN, LEAVING), CommitRequested, _commit.commit_send, ()),
    (
        (JOINING, LEADER_AWAITING_METADATA, AWAITING_SYNC),
        CommitRequested,
        _commit.commit_rebalancing,
        (),
    ),
    ((UNJOINED, POLL_EXPIRED, CLOSED), CommitRequested, _commit.commit_not_member, ()),
    ((MANUAL,), CommitRequested, _shared_manual.commit_manual, ()),
    ((FATAL,), CommitRequested, _commit.commit_fatal, ()),
    (
        (UNJOINED, MANUAL, POLL_EXPIRED, LEAVING),
        OffsetCommitOutcome,
        _commit.commit_outcome,
        (FATAL,),
    ),
    (
        (PREPARING_JOIN, JOINING, LEADER_AWAITING_METADATA, AWAITING_SYNC, ASSIGNING, STABLE),
        OffsetCommitOutcome,
        _commit.commit_outcome,
        (*_REJOIN, FATAL),
    ),
    # Committed offsets.
    (_LIVE, CommittedOffsetsRequested, _fetch.fetch_committed, ()),
    ((FATAL,), CommittedOffsetsRequested, _fetch.fetch_fatal, ()),
    ((CLOSED,), CommittedOffsetsRequested, _fetch.fetch_closed, ()),
    (_LIVE, OffsetFetchOutcome, _fetch.fetch_outcome, ()),
    # Leaving and closing.
    (_IN_GROUP, LeaveRequested, _leave.unsubscribe, (LEAVING, UNJOINED)),
    (_IN_GROUP, CloseRequested, _leave.close, (LEAVING, CLOSED)),
    ((UNJOINED,), CloseRequested, _leave.close_unjoined, (CLOSED,)),
    ((LEAVING,), CloseRequested, _leave.close_while_leaving, ()),
    ((FATAL,), CloseRequested, _leave.close_fatal, (CLOSED,)),
    # Manual assignment: no group membership (docs/architecture.md, "Manual assignment").
    ((UNJOINED, MANUAL), AssignRequested, _manual.assign, (MANUAL, UNJOINED)),
    ((MANUAL,), LeaveRequested, _manual.unassign_all, (UNJOINED,)),
    ((MANUAL,), CloseRequested, _manual.close_manual, (CLOSED,)),
    ((LEAVING,), ListenerDone, _leave.leave_listener_done, (UNJOINED, CLOSED)),
    ((LEAVING,), LeaveGroupOutcome, _leave.leave_outcome, (UNJOINED, CLOSED)),
    ((s for s in _LIVE if s is not LEAVING), LeaveGroupOutcome, _leave.ignore_leave_outcome, ()),
)


#: The transition table (see the module docstring).
TRANSITIONS: Mapping[tuple[MemberState, type], Transition] = _transition_table.build(_ROWS)

#: Pairs that are legal and do nothing.
IGNORED: frozenset[tuple[MemberState, type]] = frozenset(
    {
        # Bookkeeping only (the coordinator's connection is unproven; see _dispatch).
        *((s, ConnectionLost) for s in MemberState),
        *((s, ListenerDone) for s in MemberState if s not in (PREPARING_JOIN, ASSIGNING, LEAVING)),
        (UNJOINED, LeaveRequested),
        (LEAVING, LeaveRequested),
        (FATAL, LeaveRequested),
        (CLOSED, LeaveRequested),
        (CLOSED, CloseRequested),
        (FATAL, Subscribe),
        (FATAL, AssignRequested),
        # Heartbeats are cancelled on leaving the heartbeating states; a driver that
        # still delivers one (or a same-generation answer racing a state change) is
        # harmless: the JoinGroup/SyncGroup/LeaveGroup answer decides.
        *((s, HeartbeatOutcome) for s in _LIVE if s not in _HEARTBEAT_OUTCOME_STATES),
        *(
            (s, t)
            for s in (CLOSED, FATAL)
            for t in (
                MetadataUpdate,
                CoordinatorFound,
                CoordinatorUnavailable,
                Tick,
                PollCalled,
                JoinGroupOutcome,
                SyncGroupOutcome,
                HeartbeatOutcome,
                LeaveGroupOutcome,
                OffsetCommitOutcome,
                FindCoordinatorOutcome,
                OffsetFetchOutcome,
            )
        ),
    }
)

#: Pairs that raise ``IllegalTransition`` and leave the member unchanged: answers that
#: only a driver bug could deliver (an answer to a request this state cancelled cannot
#: arrive: ``MemberCore.route`` drops it), and the two modes mixed: ``Subscribe`` while
#: MANUAL, ``AssignRequested`` while in (or leaving) the group. The consumer reports
#: the latter as ``IllegalStateError`` (Java's "Subscription to topics, partitions and
#: pattern are mutually exclusive").
REJECTED: frozenset[tuple[MemberState, type]] = frozenset(
    {
        (LEAVING, Subscribe),
        (CLOSED, Subscribe),
        (MANUAL, Subscribe),
        *((s, AssignRequested) for s in (*_IN_GROUP, LEAVING, CLOSED)),
        *((s, JoinGroupOutcome) for s in _LIVE if s is not JOINING),
        *((s, SyncGroupOutcome) for s in _LIVE if s is not AWAITING_SYNC),
    }
)


def moves() -> dict[tuple[MemberState, MemberState], tuple[type, ...]]:
    """Every move the table allows, ``(from, to) -> input types`` that may cause it,
    in ``MemberState`` and ``INPUT_TYPES`` order."""
    return _transition_table.moves(TRANSITIONS, MemberState, INPUT_TYPES)


def predecessors(state: MemberState) -> frozenset[MemberState]:
    """The states from which one input may move a member to ``state``."""
    return _transition_table.predecessors(TRANSITIONS, MemberState, INPUT_TYPES, state)
