"""The admin side's state machines on the table kit: each table's derived predecessors
are the hand-written ones they replaced (issue 22, item 3), and a move a row does not
allow raises the kit's one ``IllegalTransition``."""

from __future__ import annotations

import pytest

from coopconsumer._transition_table import IllegalTransition, check_move, predecessors
from coopconsumer.admin.heal._heal_core import CHUNK_MOVES, ChunkResult, ChunkState, ClusterSeen
from coopconsumer.admin.reassign._executor import INPUT_TYPES, MOVES, MoveState
from coopconsumer.testing._cluster._model import (
    PARTITION_PREDECESSORS,
    REPLICA_MOVES,
    REPLICA_PREDECESSORS,
    ModelStep,
    PartitionState,
    ReplicaState,
)

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


#: The cluster model's replica and partition predecessor maps as written by hand before
#: their tables (src/coopconsumer/testing/_cluster/_model.py).
_RS, _PS = ReplicaState, PartitionState
OLD_REPLICA_PREDECESSORS = {
    _RS.NEW: {_RS.NON_EXISTENT},
    _RS.ONLINE: {_RS.NEW, _RS.ONLINE, _RS.OFFLINE},
    _RS.OFFLINE: {_RS.NEW, _RS.ONLINE, _RS.OFFLINE},
    _RS.DELETING: {_RS.OFFLINE},
    _RS.NON_EXISTENT: {_RS.DELETING},
}
OLD_PARTITION_PREDECESSORS = {
    _PS.NEW: {_PS.NON_EXISTENT},
    _PS.ONLINE: {_PS.NEW, _PS.ONLINE, _PS.OFFLINE},
    _PS.OFFLINE: {_PS.NEW, _PS.ONLINE, _PS.OFFLINE},
    _PS.NON_EXISTENT: {_PS.OFFLINE},
}


def test_the_cluster_model_tables_allow_exactly_the_old_moves() -> None:
    assert REPLICA_PREDECESSORS == OLD_REPLICA_PREDECESSORS
    assert PARTITION_PREDECESSORS == OLD_PARTITION_PREDECESSORS
    with pytest.raises(IllegalTransition, match="may not move the replica to NON_EXISTENT"):
        check_move(REPLICA_MOVES, _RS.ONLINE, ModelStep, _RS.NON_EXISTENT, machine="replica")
