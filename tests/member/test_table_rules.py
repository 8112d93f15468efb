"""The transition table is the rule: moves it does not list raise, predecessors come
from it, and every state change goes through the one checked door (``enter``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from _coord_assignors import EagerTestAssignor
from _coord_script import MAX_POLL_S, config, in_state, tps
from test_transition_table import EXPECTED

from coopconsumer._errors import CoopConsumerError
from coopconsumer._member import (
    IllegalTransition,
    MemberState,
    PollCalled,
    Subscribe,
    Tick,
)
from coopconsumer._member.classic._core import MemberCore
from coopconsumer._member.classic._table import (
    IGNORED,
    INITIAL_STATE,
    INPUT_TYPES,
    REJECTED,
    TRANSITIONS,
    moves,
    predecessors,
)

S = MemberState
COORDINATOR = Path(__file__).resolve().parents[2] / "src" / "coopconsumer" / "_member"


def test_every_expected_move_is_allowed_by_its_row() -> None:
    """The canonical transcripts of test_transition_table end where their rows allow."""
    for (state, input_type), after in EXPECTED.items():
        row = TRANSITIONS[(state, input_type)]
        assert after is state or after in row.next_states, (state, input_type, after)


def test_the_table_covers_exactly_the_dispatched_input_types() -> None:
    seen = {t for (_, t) in [*TRANSITIONS, *IGNORED, *REJECTED]}
    assert seen == set(INPUT_TYPES)


def test_terminal_states_lead_nowhere_but_closed() -> None:
    for (state, _), row in TRANSITIONS.items():
        if state is S.CLOSED:
            assert row.next_states == frozenset()
        if state is S.FATAL:
            assert row.next_states <= {S.CLOSED}


def test_predecessors_are_derived_from_the_rows() -> None:
    assert predecessors(S.STABLE) == {S.ASSIGNING}
    assert predecessors(S.ASSIGNING) == {S.AWAITING_SYNC}
    assert predecessors(S.LEADER_AWAITING_METADATA) == {S.JOINING}
    assert predecessors(S.AWAITING_SYNC) == {S.JOINING, S.LEADER_AWAITING_METADATA}
    assert S.CLOSED not in {source for (source, _) in moves()}
    for state in MemberState:
        derived = {
            source
            for (source, input_type), row in TRANSITIONS.items()
            if state in row.next_states and source is not state
        }
        assert predecessors(state) == derived
    assert not predecessors(INITIAL_STATE) & {S.CLOSED, S.FATAL}


def test_a_move_outside_the_row_raises_naming_state_input_and_target() -> None:
    core = MemberCore(config(), [EagerTestAssignor()])
    core.begin(Tick, frozenset({S.PREPARING_JOIN, S.JOINING}))
    with pytest.raises(IllegalTransition) as info:
        core.enter(S.STABLE)
    error = info.value
    assert isinstance(error, CoopConsumerError)
    assert (error.state, error.input_type, error.target) == (S.UNJOINED, Tick, S.STABLE)
    assert "UNJOINED" in str(error)
    assert "Tick" in str(error)
    assert "STABLE" in str(error)
    unchanged = core.state
    assert unchanged is S.UNJOINED
    core.enter(S.PREPARING_JOIN)  # allowed by the row
    core.enter(S.PREPARING_JOIN)  # staying is no move
    assert core.state is S.PREPARING_JOIN


def test_a_rejected_input_names_no_target() -> None:
    script = in_state(S.CLOSED)
    with pytest.raises(IllegalTransition) as info:
        script.member.handle(Subscribe(topics=frozenset({"t"})), script.now)
    assert info.value.target is None


def test_handle_checks_each_move_against_the_row_of_its_input() -> None:
    """A member whose poll timed out rejoins on the next poll, as its row allows."""
    script = in_state(S.STABLE)
    script.feed(Tick(), at=script.now + MAX_POLL_S + 1.0)
    assert script.state() is S.POLL_EXPIRED
    assert script.member.owned_partitions == frozenset()
    row = TRANSITIONS[(S.POLL_EXPIRED, PollCalled)]
    script.feed(PollCalled())
    assert script.state() in row.next_states
    assert tps("t-0").isdisjoint(script.member.owned_partitions)


def _state_stores(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "_state"
        and isinstance(node.ctx, ast.Store)
    ]


def test_only_enter_changes_the_state() -> None:
    """No phase module assigns the state (``MemberBase.state`` is read-only, for both
    members' cores): every move passes the table's check."""
    for path in sorted(COORDINATOR.rglob("*.py")):
        stores = _state_stores(path)
        if path.name == "_base.py":
            assert len(stores) == 2, stores  # __init__ and enter
        else:
            assert stores == [], (path.name, stores)
