"""The KIP-848 member's transition table: complete, consistent and enforced."""

from __future__ import annotations

import pytest
from _kip848_script import (
    COORDINATOR,
    MAX_POLL_S,
    Member,
    assignment,
    failed,
    heartbeat,
    joined,
    metadata,
    ok,
)

from coopconsumer._errors import BrokerConnectionError
from coopconsumer._member import (
    AssignRequested,
    CloseRequested,
    CommitRequested,
    CommittedOffsetsRequested,
    ConnectionLost,
    CoordinatorFound,
    CoordinatorUnavailable,
    IllegalTransition,
    LeaveRequested,
    ListenerDone,
    ListenerKind,
    Log,
    MetadataUpdate,
    Observe,
    OffsetAndMetadata,
    PollCalled,
    Subscribe,
    Tick,
    Unassign,
)
from coopconsumer._member._error_actions import Api
from coopconsumer._member._outcomes import (
    FindCoordinatorOutcome,
    OffsetCommitOutcome,
    OffsetFetchOutcome,
    Pending,
)
from coopconsumer._member.kip848 import (
    ConsumerGroupMember,
    ConsumerMemberConfig,
    ConsumerMemberState,
    HeartbeatOutcome,
)
from coopconsumer._member.kip848._table import (
    IGNORED,
    INITIAL_STATE,
    INPUT_TYPES,
    REJECTED,
    TRANSITIONS,
    predecessors,
)
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import OffsetCommitResponse
from coopconsumer._types import TopicPartition

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


# ---------------------------------------------------------------------- every pair, run


def _member_in(state: ConsumerMemberState) -> Member:
    m = Member()
    if state is S.UNSUBSCRIBED:
        return m
    if state is S.CLOSED:
        m.feed(CloseRequested())
        return m
    if state is S.MANUAL:
        m.feed(AssignRequested(partitions={TopicPartition("t", 0)}))
        return m
    if state is S.JOINING:
        m.join()
        return m
    if state in (S.RECONCILING, S.ACKNOWLEDGING):
        request_id, _ = m.join()
        m.answer(request_id, joined(1, assignment(t=[0])))
        if state is S.ACKNOWLEDGING:
            m.feed(ListenerDone(invocation_id=1, kind=ListenerKind.ASSIGNED))
        return m
    m.stable(0)
    if state is S.STABLE:
        return m
    if state in (S.FENCED, S.FATAL):
        request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
        code = (
            error_codes.FENCED_MEMBER_EPOCH
            if state is S.FENCED
            else error_codes.GROUP_AUTHORIZATION_FAILED
        )
        m.answer(request_id, failed(code))
        return m
    if state is S.STALE:
        m.feed(Tick(), after=MAX_POLL_S)
        return m
    m.feed(CloseRequested())
    if state is S.LEAVING:
        m.feed(ListenerDone(invocation_id=2, kind=ListenerKind.REVOKED))
    return m


def _pending(api: Api, m: Member) -> Pending:
    return Pending(
        api=api, sent_at=m.now, generation_id=m.member.member_epoch, member_id="m-1", token=999
    )


def _canonical(input_type: type, m: Member) -> object | None:
    """An input of ``input_type`` the member in its state can be fed (None: none can,
    as a ListenerDone without an outstanding listener)."""
    tp = TopicPartition("t", 0)
    inputs: dict[type, object] = {
        Subscribe: Subscribe(topics={"t"}),
        MetadataUpdate: metadata("t"),
        CoordinatorFound: CoordinatorFound(node_id=COORDINATOR),
        CoordinatorUnavailable: CoordinatorUnavailable(),
        ConnectionLost: ConnectionLost(node_id=COORDINATOR),
        Tick: Tick(),
        PollCalled: PollCalled(),
        CommitRequested: CommitRequested(offsets={tp: OffsetAndMetadata(offset=1)}, token=1),
        LeaveRequested: LeaveRequested(),
        CloseRequested: CloseRequested(),
        AssignRequested: AssignRequested(partitions={TopicPartition("t", 1)}),
        CommittedOffsetsRequested: CommittedOffsetsRequested(
            partitions={tp}, token=2, timeout_s=5.0
        ),
        HeartbeatOutcome: HeartbeatOutcome(
            pending=_pending(Api.CONSUMER_GROUP_HEARTBEAT, m), response=ok(1)
        ),
        OffsetCommitOutcome: OffsetCommitOutcome(
            pending=_pending(Api.OFFSET_COMMIT, m), response=OffsetCommitResponse()
        ),
        FindCoordinatorOutcome: FindCoordinatorOutcome(
            pending=_pending(Api.FIND_COORDINATOR, m), error=BrokerConnectionError("down")
        ),
        OffsetFetchOutcome: OffsetFetchOutcome(
            pending=_pending(Api.OFFSET_FETCH, m), error=BrokerConnectionError("down")
        ),
    }
    if input_type is ListenerDone:
        outstanding = m.member._core.listeners
        if not outstanding:
            return None
        return ListenerDone(invocation_id=min(outstanding), kind=ListenerKind.REVOKED)
    return inputs[input_type]


@pytest.mark.parametrize("state", list(ConsumerMemberState), ids=lambda s: s.name)
def test_every_pair_runs_as_the_table_says(state: ConsumerMemberState) -> None:
    for input_type in INPUT_TYPES:
        m = _member_in(state)
        assert m.state() is state
        event = _canonical(input_type, m)
        if event is None:
            continue
        key = (state, input_type)
        if key in REJECTED:
            with pytest.raises(IllegalTransition):
                m.feed(event)
            assert m.state() is state
            continue
        fx = m.feed(event)
        if key in IGNORED:
            assert m.state() is state, input_type.__name__
            assert [e for e in fx if not isinstance(e, Log | Observe | Unassign)] == [], (
                state.name,
                input_type.__name__,
            )
        else:
            assert m.state() in TRANSITIONS[key].next_states | {state}
