"""The KIP-848 member's transition table: ``(state, input type) -> (handler, next states)``.

The same rules as the classic member's table (``.._table``): every
``(ConsumerMemberState, input type)`` pair is in exactly one of ``TRANSITIONS``,
``IGNORED`` or ``REJECTED``; ``MemberCore.enter`` refuses any move a row does not list.
A row's next states are every state the handler may pass through or end in while
handling one input (FENCED -> JOINING happens within one input when no listener runs).

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
from .._outcomes import FindCoordinatorOutcome, OffsetCommitOutcome, OffsetFetchOutcome
from . import _commit as _commit
from . import _heartbeat
from . import _leave as _leave
from . import _manual as _manual
from ._core import HeartbeatOutcome, MemberCore
from ._states import ConsumerMemberState

__all__ = [
    "IGNORED",
    "INITIAL_STATE",
    "INPUT_TYPES",
    "REJECTED",
    "TRANSITIONS",
    "Transition",
    "moves",
    "predecessors",
]

#: A phase handler: ``handler(member, input, now)``; it emits effects on the member.
Handler = Callable[[MemberCore, Any, float], None]
#: One row of the table, as the table kit's ``Transition`` holds it.
Transition = _transition_table.Transition[ConsumerMemberState]


#: The state of a new member.
INITIAL_STATE: Final = ConsumerMemberState.UNSUBSCRIBED

#: The input types the table dispatches on (answers routed to per-API outcomes first).
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
    HeartbeatOutcome,
    OffsetCommitOutcome,
    CommittedOffsetsRequested,
    FindCoordinatorOutcome,
    OffsetFetchOutcome,
    AssignRequested,
)

UNSUBSCRIBED = ConsumerMemberState.UNSUBSCRIBED
JOINING = ConsumerMemberState.JOINING
RECONCILING = ConsumerMemberState.RECONCILING
ACKNOWLEDGING = ConsumerMemberState.ACKNOWLEDGING
STABLE = ConsumerMemberState.STABLE
FENCED = ConsumerMemberState.FENCED
STALE = ConsumerMemberState.STALE
PREPARE_LEAVING = ConsumerMemberState.PREPARE_LEAVING
LEAVING = ConsumerMemberState.LEAVING
CLOSED = ConsumerMemberState.CLOSED
FATAL = ConsumerMemberState.FATAL
MANUAL = ConsumerMemberState.MANUAL

_LIVE = tuple(s for s in ConsumerMemberState if s not in (CLOSED, FATAL))
_HEARTBEAT = (JOINING, RECONCILING, ACKNOWLEDGING, STABLE)
_IN_GROUP = (*_HEARTBEAT, FENCED, STALE)
#: A heartbeat answer: reconcile (acknowledging at once when nothing is added or
#: revoked), settle, be fenced (and rejoin), fail, or find the poll timeout expired.
_HEARTBEAT_MOVES = (RECONCILING, ACKNOWLEDGING, STABLE, FENCED, JOINING, FATAL, STALE)

#: (states, input type, handler, next states), one line per handler and its states.
_ROWS: tuple[
    tuple[Iterable[ConsumerMemberState], type, Handler, Iterable[ConsumerMemberState]], ...
] = (
    # The subscription and cluster metadata.
    ((UNSUBSCRIBED,), Subscribe, _heartbeat.subscribe_unsubscribed, (JOINING,)),
    (_IN_GROUP, Subscribe, _heartbeat.on_subscribe, (STALE,)),
    (_LIVE, MetadataUpdate, _heartbeat.on_metadata, (RECONCILING, ACKNOWLEDGING, STALE)),
    # The coordinator, timers and polls.
    (_LIVE, CoordinatorFound, _heartbeat.on_coordinator_found, (STALE,)),
    (_LIVE, CoordinatorUnavailable, _discovery.on_coordinator_unavailable, (FATAL,)),
    (_LIVE, FindCoordinatorOutcome, _discovery.lookup_outcome, (FATAL,)),
    (_LIVE, Tick, _heartbeat.on_tick, (STALE,)),
    ((s for s in _LIVE if s is not STALE), PollCalled, _heartbeat.on_poll, ()),
    ((STALE,), PollCalled, _heartbeat.rejoin_after_poll, (JOINING,)),
    # Heartbeats, reconciliation and fencing.
    (_HEARTBEAT, HeartbeatOutcome, _heartbeat.heartbeat_outcome, _HEARTBEAT_MOVES),
    ((RECONCILING,), ListenerDone, _heartbeat.reconcile_listener_done, (ACKNOWLEDGING, STALE)),
    ((FENCED,), ListenerDone, _heartbeat.fenced_listener_done, (JOINING,)),
    # Commits.
    (
        (RECONCILING, ACKNOWLEDGING, STABLE, PREPARE_LEAVING),
        CommitRequested,
        _commit.commit_send,
        (),
    ),
    ((JOINING, FENCED), CommitRequested, _commit.commit_rejoining, ()),
    ((UNSUBSCRIBED, STALE, LEAVING, CLOSED), CommitRequested, _commit.commit_not_member, ()),
    ((FATAL,), CommitRequested, _commit.commit_fatal, ()),
    ((MANUAL,), CommitRequested, _shared_manual.commit_manual, ()),
    (_LIVE, OffsetCommitOutcome, _commit.commit_outcome, ()),
    # Committed offsets (the classic member's handlers).
    (_LIVE, CommittedOffsetsRequested, _fetch.fetch_committed, ()),
    ((FATAL,), CommittedOffsetsRequested, _fetch.fetch_fatal, ()),
    ((CLOSED,), CommittedOffsetsRequested, _fetch.fetch_closed, ()),
    (_LIVE, OffsetFetchOutcome, _fetch.fetch_outcome, ()),
    # Leaving and closing.
    (
        _IN_GROUP,
        LeaveRequested,
        _leave.unsubscribe,
        (PREPARE_LEAVING, LEAVING, UNSUBSCRIBED),
    ),
    (_IN_GROUP, CloseRequested, _leave.close, (PREPARE_LEAVING, LEAVING, CLOSED)),
    ((UNSUBSCRIBED,), CloseRequested, _leave.close_unsubscribed, (CLOSED,)),
    ((PREPARE_LEAVING, LEAVING), CloseRequested, _leave.close_while_leaving, ()),
    ((FATAL,), CloseRequested, _leave.close_fatal, (CLOSED,)),
    (
        (PREPARE_LEAVING,),
        ListenerDone,
        _leave.leave_listener_done,
        (LEAVING, UNSUBSCRIBED, CLOSED),
    ),
    ((LEAVING,), HeartbeatOutcome, _leave.leave_outcome, (UNSUBSCRIBED, CLOSED)),
    # Manual assignment: no group membership (docs/architecture.md, "Manual assignment").
    ((UNSUBSCRIBED, MANUAL), AssignRequested, _manual.assign, (MANUAL, UNSUBSCRIBED)),
    ((MANUAL,), LeaveRequested, _manual.unassign_all, (UNSUBSCRIBED,)),
    ((MANUAL,), CloseRequested, _manual.close_manual, (CLOSED,)),
)


#: The transition table (see the module docstring).
TRANSITIONS: Mapping[tuple[ConsumerMemberState, type], Transition] = _transition_table.build(_ROWS)

#: Pairs that are legal and do nothing.
IGNORED: frozenset[tuple[ConsumerMemberState, type]] = frozenset(
    {
        # Bookkeeping only (the coordinator's connection is unproven; see _dispatch).
        *((s, ConnectionLost) for s in ConsumerMemberState),
        # A listener that is not part of a reconciliation, fencing or leave: LOST
        # after a poll timeout, or one still running when the member moved on. The
        # member releases its partitions whatever the state (``handle``).
        *(
            (s, ListenerDone)
            for s in ConsumerMemberState
            if s not in (RECONCILING, FENCED, PREPARE_LEAVING)
        ),
        (UNSUBSCRIBED, LeaveRequested),
        (PREPARE_LEAVING, LeaveRequested),
        (LEAVING, LeaveRequested),
        (FATAL, LeaveRequested),
        (CLOSED, LeaveRequested),
        (CLOSED, CloseRequested),
        (FATAL, Subscribe),
        (FATAL, AssignRequested),
        # Heartbeats are cancelled on leaving the heartbeating states; one a driver
        # still delivers changes nothing.
        *((s, HeartbeatOutcome) for s in (UNSUBSCRIBED, FENCED, STALE, PREPARE_LEAVING, MANUAL)),
        *(
            (s, t)
            for s in (CLOSED, FATAL)
            for t in (
                MetadataUpdate,
                CoordinatorFound,
                CoordinatorUnavailable,
                Tick,
                PollCalled,
                HeartbeatOutcome,
                OffsetCommitOutcome,
                FindCoordinatorOutcome,
                OffsetFetchOutcome,
            )
        ),
    }
)

#: Pairs that raise ``IllegalTransition`` and leave the member unchanged: what only a
#: driver bug could deliver, and the two modes mixed (``Subscribe`` while MANUAL,
#: ``AssignRequested`` while in or leaving the group), which the consumer reports as
#: ``IllegalStateError``.
REJECTED: frozenset[tuple[ConsumerMemberState, type]] = frozenset(
    {
        (PREPARE_LEAVING, Subscribe),
        (LEAVING, Subscribe),
        (CLOSED, Subscribe),
        (MANUAL, Subscribe),
        *((s, AssignRequested) for s in (*_IN_GROUP, PREPARE_LEAVING, LEAVING, CLOSED)),
    }
)


def moves() -> dict[tuple[ConsumerMemberState, ConsumerMemberState], tuple[type, ...]]:
    """Every move the table allows, ``(from, to) -> input types`` that may cause it,
    in ``ConsumerMemberState`` and ``INPUT_TYPES`` order."""
    return _transition_table.moves(TRANSITIONS, ConsumerMemberState, INPUT_TYPES)


def predecessors(state: ConsumerMemberState) -> frozenset[ConsumerMemberState]:
    """The states from which one input may move a member to ``state``."""
    return _transition_table.predecessors(TRANSITIONS, ConsumerMemberState, INPUT_TYPES, state)
