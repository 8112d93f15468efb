"""What each member's state says of itself to the facade, in both group protocols."""

from __future__ import annotations

from coopconsumer._member import MemberState
from coopconsumer._member.kip848 import ConsumerMemberState


def _where(states: list[MemberState] | list[ConsumerMemberState], fact: str) -> set[str]:
    return {state.name for state in states if getattr(state, fact)}


def test_the_classic_states_facts() -> None:
    states = list(MemberState)
    assert _where(states, "stopped") == {"CLOSED", "FATAL"}
    assert _where(states, "unjoined") == {"UNJOINED"}
    assert _where(states, "manual") == {"MANUAL"}
    assert _where(states, "quiet") == {"STABLE", "MANUAL"}
    assert _where(states, "rejoining") == {
        "PREPARING_JOIN",
        "JOINING",
        "LEADER_AWAITING_METADATA",
        "AWAITING_SYNC",
    }


def test_the_kip848_states_facts() -> None:
    states = list(ConsumerMemberState)
    assert _where(states, "stopped") == {"CLOSED", "FATAL"}
    assert _where(states, "unjoined") == {"UNSUBSCRIBED"}
    assert _where(states, "manual") == {"MANUAL"}
    # Not STABLE: a heartbeat answer there can carry a revocation queued at once.
    assert _where(states, "quiet") == {"MANUAL"}
    assert _where(states, "rejoining") == set()
