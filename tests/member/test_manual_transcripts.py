"""Transcripts: manual assignment (MANUAL), a member that never joins its group.

``AssignRequested`` replaces, adds or removes partitions with ``Assign``/``Unassign``
effects and nothing else of the group protocol; the coordinator is looked up for the
commits (generation -1, no member id) and committed-offset fetches; the two modes
refuse each other and an empty assignment is neither mode.
"""

from __future__ import annotations

import pytest
from _coord_script import Script, in_state, tps
from test_member_transcripts import commit_response

from coopconsumer._errors import CommitFailedError, ConfigurationError, KafkaError
from coopconsumer._member import (
    Assign,
    AssignmentChange,
    AssignRequested,
    CloseRequested,
    CommitDone,
    CommitRequested,
    CommittedOffsetsDone,
    CommittedOffsetsRequested,
    CoordinatorFound,
    Effect,
    FindCoordinator,
    IllegalTransition,
    InvokeListener,
    LeaveRequested,
    MemberState,
    OffsetAndMetadata,
    PollCalled,
    Send,
    Subscribe,
    Tick,
    Unassign,
)
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import (
    OffsetCommitRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from coopconsumer._protocol.queries import OffsetFetchQuery

S = MemberState
REPLACE, ADD, REMOVE = AssignmentChange.REPLACE, AssignmentChange.ADD, AssignmentChange.REMOVE
TP0, TP1, TP2 = sorted(tps("t-0", "t-1", "t-2"))


def _kinds(effects: list[Effect]) -> list[type]:
    return [type(e) for e in effects if type(e).__name__ not in ("Log", "Observe")]


def _manual() -> Script:
    s = Script()
    s.feed(AssignRequested(partitions={TP0, TP1}, starts={TP0: 5}))
    s.feed(CoordinatorFound(node_id=1))
    return s


def test_assign_emits_assign_with_starts_and_looks_up_the_coordinator() -> None:
    s = Script()
    effects = s.feed(AssignRequested(partitions={TP0, TP1}, starts={TP0: -2}))
    assert s.state() is S.MANUAL
    assigns = [e for e in effects if isinstance(e, Assign)]
    assert assigns == [Assign(partitions={TP0, TP1}, starts={TP0: -2})]
    assert [e.group_id for e in effects if isinstance(e, FindCoordinator)] == ["g"]
    assert s.member.owned_partitions == {TP0, TP1}
    assert s.member.generation_id == -1
    assert s.member.member_id == ""


def test_no_group_request_listener_or_timer_ever() -> None:
    s = _manual()
    s.feed(PollCalled(), at=1.0)
    s.feed(Tick(), at=3600.0)  # far past every session, heartbeat and poll interval
    s.feed(AssignRequested(partitions={TP2}, change=ADD), at=3601.0)
    s.feed(AssignRequested(partitions={TP0}, change=REMOVE), at=3602.0)
    assert s.state() is S.MANUAL
    assert s.member.next_deadline is None
    assert not any(isinstance(e, InvokeListener | Send) for e in s.history)


def test_replace_drops_everything_first_then_assigns() -> None:
    s = _manual()
    effects = s.feed(AssignRequested(partitions={TP1, TP2}))
    assert [e for e in effects if isinstance(e, Assign | Unassign)] == [
        Unassign(partitions={TP0, TP1}),
        Assign(partitions={TP1, TP2}),
    ]
    assert s.member.owned_partitions == {TP1, TP2}


@pytest.mark.parametrize(
    "event",
    [
        AssignRequested(partitions=set(), change=REPLACE),
        AssignRequested(partitions={TP0, TP1}, change=REMOVE),
        LeaveRequested(),
    ],
    ids=["assign-empty", "remove-all", "unsubscribe"],
)
def test_an_empty_assignment_is_neither_mode(event: object) -> None:
    s = _manual()
    effects = s.feed(event)
    assert [e for e in effects if isinstance(e, Unassign)] == [Unassign(partitions={TP0, TP1})]
    assert s.state() is S.UNJOINED
    assert s.member.owned_partitions == frozenset()
    s.feed(Subscribe(topics=frozenset({"t"})))  # free to join a group now
    assert s.state() is S.JOINING


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (AssignRequested(partitions={TP1}, change=ADD), "already assigned"),
        (AssignRequested(partitions={TP2}, change=REMOVE), "not assigned"),
        (AssignRequested(partitions={TP2}, starts={TP1: 3}), "not asked"),
    ],
    ids=["add-twice", "remove-unassigned", "start-of-another"],
)
def test_a_refused_change_changes_nothing(event: AssignRequested, message: str) -> None:
    s = _manual()
    with pytest.raises(ConfigurationError, match=message):
        s.feed(event)
    assert s.state() is S.MANUAL
    assert s.member.owned_partitions == {TP0, TP1}


def test_subscribe_is_rejected_while_manual_and_assign_while_subscribed() -> None:
    s = _manual()
    with pytest.raises(IllegalTransition) as info:
        s.feed(Subscribe(topics=frozenset({"t"})))
    assert (info.value.state, info.value.target) == (S.MANUAL, None)
    assert s.member.owned_partitions == {TP0, TP1}
    for state in (S.JOINING, S.STABLE, S.LEAVING):
        member = in_state(state)
        owned = member.member.owned_partitions
        with pytest.raises(IllegalTransition):
            member.feed(AssignRequested(partitions={TP2}))
        assert member.state() is state
        assert member.member.owned_partitions == owned


def test_commit_carries_no_generation_and_no_member_id() -> None:
    s = Script(group_instance_id="static-1")
    s.feed(AssignRequested(partitions={TP0}))
    s.feed(CoordinatorFound(node_id=1))
    s.feed(CommitRequested(offsets={TP0: OffsetAndMetadata(offset=7)}, token="c"))
    request = s.request(OffsetCommitRequest).request
    assert isinstance(request, OffsetCommitRequest)
    assert (request.generation_id, request.member_id, request.group_instance_id) == (-1, "", None)
    effects = s.answer(OffsetCommitRequest, commit_response(error_codes.NONE))
    assert [e for e in effects if isinstance(e, CommitDone)] == [CommitDone(token="c")]
    assert s.state() is S.MANUAL


@pytest.mark.parametrize("code", [error_codes.ILLEGAL_GENERATION, error_codes.UNKNOWN_MEMBER_ID])
def test_a_commit_refused_for_a_group_with_members_fails_for_good(code: int) -> None:
    s = _manual()
    s.feed(CommitRequested(offsets={TP0: OffsetAndMetadata(offset=7)}, token="c"))
    effects = s.answer(OffsetCommitRequest, commit_response(code))
    (done,) = [e for e in effects if isinstance(e, CommitDone)]
    assert isinstance(done.error, CommitFailedError)
    assert "active members" in str(done.error)
    assert s.state() is S.MANUAL
    assert _kinds(effects) == [CommitDone]  # no rejoin, no reset: there is no group


def test_a_commit_before_the_coordinator_is_known_waits_for_it_in_order() -> None:
    s = Script()
    s.feed(AssignRequested(partitions={TP0}))
    for token, offset in (("a", 3), ("b", 4)):
        effects = s.feed(
            CommitRequested(offsets={TP0: OffsetAndMetadata(offset=offset)}, token=token)
        )
        assert not any(isinstance(e, CommitDone | Send) for e in effects)
    assert s.member.next_deadline == pytest.approx(30.0)  # request.timeout.ms
    s.feed(CoordinatorFound(node_id=1), at=0.5)
    offsets = [
        send.request.topics[0].partitions[0].committed_offset
        for send in s.sent(OffsetCommitRequest)
        if isinstance(send.request, OffsetCommitRequest)
    ]
    assert offsets == [3, 4]


def test_a_commit_waiting_for_the_coordinator_fails_retriably_at_its_deadline() -> None:
    s = Script()
    s.feed(AssignRequested(partitions={TP0}))
    s.feed(CommitRequested(offsets={TP0: OffsetAndMetadata(offset=3)}, token="a"))
    assert not [e for e in s.feed(Tick(), at=29.9) if isinstance(e, CommitDone)]
    (done,) = [e for e in s.feed(Tick(), at=30.0) if isinstance(e, CommitDone)]
    assert isinstance(done.error, KafkaError)
    assert done.error.retriable
    assert s.sent(OffsetCommitRequest) == []


def test_close_fails_a_commit_still_waiting_for_the_coordinator() -> None:
    s = Script()
    s.feed(AssignRequested(partitions={TP0}))
    s.feed(CommitRequested(offsets={TP0: OffsetAndMetadata(offset=3)}, token="a"))
    (done,) = [e for e in s.feed(CloseRequested()) if isinstance(e, CommitDone)]
    assert isinstance(done.error, CommitFailedError)
    assert s.state() is S.CLOSED


def test_committed_offsets_are_fetched_through_the_coordinator() -> None:
    s = _manual()
    s.feed(CommittedOffsetsRequested(partitions={TP0}, token="f", timeout_s=5.0))
    query = s.request(OffsetFetchQuery).request
    assert isinstance(query, OffsetFetchQuery)
    answer = OffsetFetchResponse(
        topics=(
            OffsetFetchResponseTopic(
                name="t",
                partitions=(OffsetFetchResponsePartition(partition_index=0, committed_offset=4),),
            ),
        )
    )
    effects = s.answer(OffsetFetchQuery, answer)
    (done,) = [e for e in effects if isinstance(e, CommittedOffsetsDone)]
    assert done.error is None
    assert done.offsets[TP0] == OffsetAndMetadata(offset=4)


def test_close_drops_the_assignment_without_leave_group() -> None:
    s = _manual()
    effects = s.feed(CloseRequested())
    assert _kinds(effects) == [Unassign]
    assert s.state() is S.CLOSED
