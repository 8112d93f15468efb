"""Cooperative groups on a coordinator with librdkafka's mock cluster's timing (issue 24).

``MockTimingCoordinator`` completes a rebalance round on the leader's SyncGroup and
answers a follower's later SyncGroup INVALID_REQUEST; every JoinGroup then starts a new
round of a fixed length (docs/testing.md, "Quirks of the embedded brokers"). A leader
that synced at once won that race every round: the followers rejoined, the group
restarted, and it never settled. The leader now assigns from fresh metadata and sends
its SyncGroup ``LEADER_SYNC_DELAY_S`` after its JoinGroup answer, so followers that
read their answers a little later than the leader still sync first.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _coord_harness import GroupHarness
from fake_group_coordinator import MockTimingCoordinator

from coopconsumer._member import ListenerKind, MemberState
from coopconsumer._member.classic._core import LEADER_SYNC_DELAY_S
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import JoinGroupResponse
from coopconsumer.assignors import CooperativeStickyAssignor

PARTITIONS = 24
#: The benchmark's settings (benchmarks/rebalance.py): the mock's join phase lasts the
#: session timeout minus one second.
SESSION_MS, HEARTBEAT_MS = 2000, 200
#: Two rounds of one second each, plus heartbeats and syncs: a joiner is absorbed in
#: about two seconds; a group that restarts round after round never is.
PATIENCE_S = 10.0


def follower_lag(lag_s: float) -> Callable[[str, object], float]:
    """Followers read their JoinGroup answers ``lag_s`` after the leader reads its own."""

    def lag(client: str, response: object) -> float:
        if isinstance(response, JoinGroupResponse) and response.leader != response.member_id:
            return lag_s
        return 0.0

    return lag


def harness(lag_s: float = 0.0) -> tuple[GroupHarness, MockTimingCoordinator]:
    fake = MockTimingCoordinator("g")
    h = GroupHarness(
        {"t": PARTITIONS},
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        coordinator=fake,
        answer_lag=follower_lag(lag_s) if lag_s else None,
    )
    return h, fake


def settled(h: GroupHarness) -> bool:
    counts = [len(hm.owned) for hm in h.live()]
    return (
        all(hm.member.state is MemberState.STABLE for hm in h.live())
        and sum(counts) == PARTITIONS
        and max(counts) - min(counts) <= 1
    )


def settle(h: GroupHarness) -> float:
    """Advance until the group settles; the time it took (fails after PATIENCE_S)."""
    start = h.now
    while not settled(h):
        assert h.now - start < PATIENCE_S, (
            f"not settled after {PATIENCE_S} s: owned "
            f"{[len(hm.owned) for hm in h.live()]}, generation {h.fake.generation_id}"
        )
        h.advance(0.05)
    return h.now - start


@pytest.mark.parametrize("size", [4, 8])
@pytest.mark.parametrize("lag_s", [0.0, LEADER_SYNC_DELAY_S / 2], ids=["no-lag", "followers-lag"])
def test_cooperative_group_forms_and_absorbs_a_joiner(size: int, lag_s: float) -> None:
    h, fake = harness(lag_s)
    for i in range(size):
        h.add_member(f"m{i}", [CooperativeStickyAssignor()])
    settle(h)
    before = {name: frozenset(hm.owned) for name, hm in h.members.items()}
    rounds_before = fake.rebalances
    h.callbacks.clear()
    h.add_member(f"m{size}", [CooperativeStickyAssignor()])
    took = settle(h)
    # No follower missed a round, so the join took KIP-429's two rounds, no more.
    assert fake.late_syncs == []
    assert fake.rebalances - rounds_before == 2
    assert took < 2 * (SESSION_MS / 1000 - 1) + 0.5
    # Each old member gave up exactly what moved to the joiner, once (the harness
    # fails any REVOKED of a partition the member's new assignment keeps).
    joiner = frozenset(h.members[f"m{size}"].owned)
    for name, owned in before.items():
        revoked = [c.partitions for c in h.callbacks_of(name, ListenerKind.REVOKED)]
        moved = owned - frozenset(h.members[name].owned)
        assert moved <= joiner
        assert revoked == ([moved] if moved else [])
        assert h.callbacks_of(name, ListenerKind.LOST) == []


def test_a_follower_that_misses_a_round_keeps_its_partitions_and_the_group_settles() -> None:
    """A follower slower than the delay once (a busy thread) syncs after the leader's
    round is over: it keeps what it owns (KIP-429: a cooperative member rejoins
    with its partitions), rejoins, and the join takes one round more."""
    h, fake = harness()
    for i in range(4):
        h.add_member(f"m{i}", [CooperativeStickyAssignor()])
    settle(h)
    before = {name: frozenset(hm.owned) for name, hm in h.members.items()}
    slow: list[str] = ["m3"]  # m3 reads the first JoinGroup answer of the join late

    def lag(client: str, response: object) -> float:
        if client in slow and isinstance(response, JoinGroupResponse):
            slow.remove(client)
            return LEADER_SYNC_DELAY_S * 2
        return 0.0

    h.answer_lag = lag
    rounds_before = fake.rebalances
    h.callbacks.clear()
    h.add_member("m4", [CooperativeStickyAssignor()])
    settle(h)
    # Refused because the round had restarted: the members that revoked rejoined at once.
    assert fake.late_syncs == [("m3", error_codes.REBALANCE_IN_PROGRESS)]
    assert fake.rebalances - rounds_before == 3
    for name, owned in before.items():
        assert h.callbacks_of(name, ListenerKind.LOST) == []
        revoked = frozenset().union(
            *(c.partitions for c in h.callbacks_of(name, ListenerKind.REVOKED))
        )
        assert revoked == owned - frozenset(h.members[name].owned)
