"""The admin side's state machines on the table kit: each table's derived predecessors
are the hand-written ones they replaced (issue 22, item 3), and a move a row does not
allow raises the kit's one ``IllegalTransition``."""

from __future__ import annotations

import pytest

from coopconsumer._transition_table import IllegalTransition, check_move, predecessors
from coopconsumer.admin.heal._core import CHUNK_MOVES, ChunkResult, ChunkState, ClusterSeen
from coopconsumer.admin.reassign._executor import INPUT_TYPES, MOVES, MoveState

Q, S, IF, C = MoveState.QUEUED, MoveState.SUBMITTING, MoveState.IN_FLIGHT, MoveState.CANCELLING
D, X, F, K = MoveState.DONE, MoveState.CANCELLED, MoveState.FAILED, MoveState.CONFLICT

#: The executor's predecessor map as it was written by hand before the table.
OLD_MOVE_PREDECESSORS = {
    Q: {S},
    S: {Q, IF, C},
    IF: {S},
    C: {S, IF},
    D: {Q, S, IF, C},
    X: {Q, S, IF, C},
    F: {Q, S, IF, C},
    K: {Q, S, IF},
}

OLD_CHUNK_PREDECESSORS = {
    ChunkState.QUEUED: set(),
    ChunkState.RUNNING: {ChunkState.QUEUED},
    ChunkState.DONE: {ChunkState.RUNNING},
    ChunkState.SKIPPED: {ChunkState.QUEUED},
    ChunkState.CANCELLED: {ChunkState.QUEUED},
}


@pytest.mark.parametrize("state", list(MoveState), ids=lambda s: s.name)
def test_the_executor_table_allows_exactly_the_old_moves(state: MoveState) -> None:
    derived = predecessors(MOVES, MoveState, INPUT_TYPES, state)
    assert derived == OLD_MOVE_PREDECESSORS[state]


@pytest.mark.parametrize("state", list(ChunkState), ids=lambda s: s.name)
def test_the_chunk_table_allows_exactly_the_old_moves(state: ChunkState) -> None:
    derived = predecessors(CHUNK_MOVES, ChunkState, (ClusterSeen, ChunkResult), state)
    assert derived == OLD_CHUNK_PREDECESSORS[state]


def test_a_move_its_row_does_not_allow_is_the_one_illegal_transition() -> None:
    from coopconsumer.admin.reassign._executor import CancelRequested, Submitted

    check_move(MOVES, Q, CancelRequested, X, machine="move")
    with pytest.raises(IllegalTransition, match="Submitted in state QUEUED may not move the move"):
        check_move(MOVES, Q, Submitted, X, machine="move", detail="t-0")
    with pytest.raises(IllegalTransition, match="may not move the chunk to DONE"):
        check_move(CHUNK_MOVES, ChunkState.QUEUED, ClusterSeen, ChunkState.DONE, machine="chunk")
