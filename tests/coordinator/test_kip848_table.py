"""The KIP-848 member's transition table: complete, consistent and enforced."""

from __future__ import annotations

import pytest

from coopconsumer._coordinator import CloseRequested, IllegalTransition, Subscribe
from coopconsumer._coordinator.kip848 import (
    ConsumerGroupMember,
    ConsumerMemberConfig,
    ConsumerMemberState,
)
from coopconsumer._coordinator.kip848._table import (
    IGNORED,
    INITIAL_STATE,
    INPUT_TYPES,
    REJECTED,
    TRANSITIONS,
    predecessors,
)

S = ConsumerMemberState


@pytest.mark.parametrize("state", list(ConsumerMemberState), ids=lambda s: s.name)
def test_every_pair_is_handled_ignored_or_rejected_exactly_once(
    state: ConsumerMemberState,
) -> None:
    for input_type in INPUT_TYPES:
        key = (state, input_type)
        found = [key in TRANSITIONS, key in IGNORED, key in REJECTED]
        assert found.count(True) == 1, (state.name, input_type.__name__, found)


def test_every_state_but_the_first_is_reachable() -> None:
    for state in ConsumerMemberState:
        if state is not INITIAL_STATE:
            assert predecessors(state), state.name


def test_closed_and_fatal_are_left_only_by_closing() -> None:
    assert predecessors(S.CLOSED) >= {S.UNSUBSCRIBED, S.FATAL, S.LEAVING}
    for (source, _), row in TRANSITIONS.items():
        if source is S.CLOSED:
            assert not row.next_states
        if source is S.FATAL:
            assert row.next_states <= {S.CLOSED}


def test_a_rejected_input_raises_and_changes_nothing() -> None:
    member = ConsumerGroupMember(ConsumerMemberConfig(group_id="g"))
    member.handle(Subscribe(topics={"t"}), 0.0)
    member.handle(CloseRequested(), 0.0)
    assert member.state is S.CLOSED
    with pytest.raises(IllegalTransition, match="Subscribe is not allowed in state CLOSED"):
        member.handle(Subscribe(topics={"t"}), 1.0)
    assert member.state is S.CLOSED
