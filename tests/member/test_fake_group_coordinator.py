"""The fake coordinator itself behaves like Kafka's classic group coordinator."""

from __future__ import annotations

from fake_group_coordinator import (
    Delivery,
    FakeGroupCoordinator,
    GroupPhase,
    MockGroupState,
    MockTimingCoordinator,
)

from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)


def join(
    member_id: str = "", protocols: tuple[str, ...] = ("p",), session_timeout_ms: int = 10_000
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=20_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=tuple(JoinGroupRequestProtocol(name=p, metadata=p.encode()) for p in protocols),
    )


def phase(fake: FakeGroupCoordinator) -> GroupPhase:
    """The group phase (a call, so mypy does not narrow it across requests)."""
    return fake.phase


def take(fake: FakeGroupCoordinator) -> list[Delivery]:
    out, fake.outbox = fake.outbox, []
    return out


def joined(fake: FakeGroupCoordinator, client: str, now: float = 0.0) -> str:
    """Run the MEMBER_ID_REQUIRED round trip; return the member id."""
    fake.submit(client, 1, 1, join(), now)
    (first,) = take(fake)
    assert isinstance(first.response, JoinGroupResponse)
    assert first.response.error_code == error_codes.MEMBER_ID_REQUIRED
    fake.submit(client, 1, 2, join(first.response.member_id), now)
    return first.response.member_id


def commit(member_id: str, generation_id: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id="g",
        generation_id=generation_id,
        member_id=member_id,
        topics=(
            OffsetCommitRequestTopic(
                name="t",
                partitions=(OffsetCommitRequestPartition(partition_index=0, committed_offset=9),),
            ),
        ),
    )


def test_single_member_group_forms_with_member_id_required_then_generation_one() -> None:
    fake = FakeGroupCoordinator("g")
    member_id = joined(fake, "a")
    (answer,) = take(fake)
    assert isinstance(answer.response, JoinGroupResponse)
    assert (answer.response.generation_id, answer.response.leader) == (1, member_id)
    assert [m.member_id for m in answer.response.members] == [member_id]
    assert phase(fake) is GroupPhase.COMPLETING_REBALANCE
    fake.submit(
        "a",
        1,
        3,
        SyncGroupRequest(
            group_id="g",
            generation_id=1,
            member_id=member_id,
            assignments=(SyncGroupRequestAssignment(member_id=member_id, assignment=b"x"),),
        ),
        0.0,
    )
    (sync,) = take(fake)
    assert isinstance(sync.response, SyncGroupResponse)
    assert sync.response.assignment == b"x"
    assert phase(fake) is GroupPhase.STABLE


def test_join_waits_for_known_members_until_the_rebalance_timeout() -> None:
    fake = FakeGroupCoordinator("g")
    a = joined(fake, "a")
    take(fake)
    fake.submit("a", 1, 3, SyncGroupRequest(group_id="g", generation_id=1, member_id=a), 0.0)
    take(fake)
    b = joined(fake, "b", now=1.0)
    assert take(fake) == []  # b's join is held: a has not rejoined
    assert phase(fake) is GroupPhase.PREPARING_REBALANCE
    fake.submit("a", 1, 4, HeartbeatRequest(group_id="g", generation_id=1, member_id=a), 2.0)
    (hb,) = take(fake)
    assert hb.response == HeartbeatResponse(error_code=error_codes.REBALANCE_IN_PROGRESS)
    # a never rejoins: after the rebalance timeout it is dropped and b's join completes.
    fake.advance(1.0 + 20.0)
    (answer,) = take(fake)
    assert answer.client == "b"
    assert isinstance(answer.response, JoinGroupResponse)
    assert answer.response.generation_id == 2
    assert answer.response.leader == b
    assert a not in fake.members


def test_commits_check_member_and_generation() -> None:
    fake = FakeGroupCoordinator("g")
    a = joined(fake, "a")
    take(fake)
    fake.submit("a", 1, 3, SyncGroupRequest(group_id="g", generation_id=1, member_id=a), 0.0)
    take(fake)
    for member_id, generation, code in [
        (a, 1, error_codes.NONE),
        (a, 0, error_codes.ILLEGAL_GENERATION),
        ("nobody", 1, error_codes.UNKNOWN_MEMBER_ID),
    ]:
        fake.submit("a", 1, 9, commit(member_id, generation), 0.0)
        (answer,) = take(fake)
        assert isinstance(answer.response, OffsetCommitResponse)
        assert answer.response.topics[0].partitions[0].error_code == code
    fake.submit(
        "a",
        1,
        10,
        OffsetFetchRequest(
            group_id="g", topics=(OffsetFetchRequestTopic(name="t", partition_indexes=(0, 1)),)
        ),
        0.0,
    )
    (fetched,) = take(fake)
    assert isinstance(fetched.response, OffsetFetchResponse)
    assert [p.committed_offset for p in fetched.response.topics[0].partitions] == [9, -1]


def test_session_expiry_removes_a_silent_member() -> None:
    fake = FakeGroupCoordinator("g")
    a = joined(fake, "a")
    take(fake)
    fake.submit("a", 1, 3, SyncGroupRequest(group_id="g", generation_id=1, member_id=a), 0.0)
    take(fake)
    fake.advance(9.9)
    assert a in fake.members
    fake.advance(10.0)
    assert a not in fake.members
    assert phase(fake) is GroupPhase.EMPTY


def test_fault_injection_and_coordinator_moves() -> None:
    fake = FakeGroupCoordinator("g")
    fake.fail_next(11, error_codes.COORDINATOR_LOAD_IN_PROGRESS)
    fake.submit("a", 1, 1, join(), 0.0)
    (answer,) = take(fake)
    assert isinstance(answer.response, JoinGroupResponse)
    assert answer.response.error_code == error_codes.COORDINATOR_LOAD_IN_PROGRESS
    fake.drop_next(11)
    fake.submit("a", 1, 2, join(), 0.0)
    assert take(fake) == []
    fake.move_coordinator(2)
    fake.submit("a", 1, 3, join(), 0.0)
    (moved,) = take(fake)
    assert isinstance(moved.response, JoinGroupResponse)
    assert moved.response.error_code == error_codes.NOT_COORDINATOR


def test_members_without_a_common_protocol_are_refused() -> None:
    fake = FakeGroupCoordinator("g")
    joined(fake, "a")
    take(fake)
    fake.submit("b", 1, 5, join(protocols=("q",)), 0.0)
    (answer,) = take(fake)
    assert isinstance(answer.response, JoinGroupResponse)
    assert answer.response.error_code == error_codes.INCONSISTENT_GROUP_PROTOCOL


# ---------------------------------------------------------------------- mock timing


def mock_state(fake: MockTimingCoordinator) -> MockGroupState:
    return fake.state


def sync(member_id: str, generation: int, *assigned: str) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id="g",
        generation_id=generation,
        member_id=member_id,
        assignments=tuple(
            SyncGroupRequestAssignment(member_id=m, assignment=b"x") for m in assigned
        ),
    )


def test_mock_timing_first_join_elects_at_once_and_gives_member_ids() -> None:
    fake = MockTimingCoordinator("g")
    fake.submit("a", 1, 1, join(session_timeout_ms=2000), 0.0)
    assert take(fake) == []  # held until the timer, even with no delay
    fake.advance(0.0)
    (answer,) = take(fake)
    assert isinstance(answer.response, JoinGroupResponse)
    assert answer.response.error_code == error_codes.NONE  # no MEMBER_ID_REQUIRED
    assert answer.response.generation_id == 2
    assert mock_state(fake) is MockGroupState.SYNCING


def test_mock_timing_completes_on_the_leader_sync_and_refuses_later_followers() -> None:
    fake = MockTimingCoordinator("g")
    fake.submit("a", 1, 1, join(session_timeout_ms=2000), 0.0)
    fake.submit("b", 1, 1, join(session_timeout_ms=2000), 0.0)
    fake.advance(0.0)
    ids = {
        a.client: a.response.member_id
        for a in take(fake)
        if isinstance(a.response, JoinGroupResponse)
    }
    assert fake.leader_id == ids["a"]
    fake.submit("a", 1, 2, sync(ids["a"], 2, ids["a"], ids["b"]), 0.0)
    (leader,) = take(fake)
    assert isinstance(leader.response, SyncGroupResponse)
    assert leader.response.assignment == b"x"
    assert mock_state(fake) is MockGroupState.UP
    fake.submit("b", 1, 2, sync(ids["b"], 2), 0.001)
    (late,) = take(fake)
    assert late.response == SyncGroupResponse(error_code=error_codes.INVALID_REQUEST)
    assert fake.late_syncs == [("b", error_codes.INVALID_REQUEST)]


def test_mock_timing_every_join_restarts_a_round_of_a_fixed_length() -> None:
    fake = MockTimingCoordinator("g")
    fake.submit("a", 1, 1, join(session_timeout_ms=2000), 0.0)
    fake.advance(0.0)
    (answer,) = take(fake)
    assert isinstance(answer.response, JoinGroupResponse)
    a = answer.response.member_id
    fake.submit("a", 1, 2, sync(a, 2, a), 0.0)
    take(fake)
    # An unchanged rejoin of the only member restarts the group (Kafka would answer it
    # at once); commits and heartbeats of the current generation are then refused.
    fake.submit("a", 1, 3, join(a, session_timeout_ms=2000), 5.0)
    assert mock_state(fake) is MockGroupState.JOINING
    fake.submit("a", 1, 4, commit(a, 2), 5.1)
    (refused,) = take(fake)
    assert isinstance(refused.response, OffsetCommitResponse)
    assert refused.response.topics[0].partitions[0].error_code == error_codes.REBALANCE_IN_PROGRESS
    fake.advance(5.99)
    assert take(fake) == []  # every member has rejoined, yet the phase lasts 1 s
    fake.advance(6.0)
    (again,) = take(fake)
    assert isinstance(again.response, JoinGroupResponse)
    assert again.response.generation_id == 3
