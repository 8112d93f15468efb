"""Transcripts of one KIP-848 ``ConsumerGroupMember``: feed inputs, assert effects and state.

No broker: the tests answer each ConsumerGroupHeartbeat by hand, so every effect the
member emits at each step is visible. Scenarios follow KIP-848 and Java's
``ConsumerMembershipManager``.
"""

from __future__ import annotations

import logging
import re

import pytest
from _kip848_script import (
    COORDINATOR,
    MAX_POLL_S,
    T_ID,
    Member,
    S,
    assignment,
    failed,
    heartbeat,
    joined,
    listeners,
    metadata,
    ok,
    quiet,
    sends,
    tps,
)
from test_member_transcripts import commit_response

from coopconsumer._errors import (
    BrokerConnectionError,
    CommitFailedError,
    ConfigurationError,
    KafkaError,
    RebalanceInProgressError,
)
from coopconsumer._member import (
    Assign,
    AssignRequested,
    CloseRequested,
    CommitBeforeRevoke,
    CommitDone,
    CommitRequested,
    ConnectionLost,
    CoordinatorFound,
    Effect,
    Fatal,
    FindCoordinator,
    InvokeListener,
    LeaveRequested,
    ListenerDone,
    ListenerKind,
    Log,
    MetadataNeeded,
    OffsetAndMetadata,
    PollCalled,
    RequestFailed,
    ResponseReceived,
    Send,
    Subscribe,
    Tick,
    Unassign,
)
from coopconsumer._member.kip848 import (
    ConsumerMemberConfig,
)
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.group_messages import (
    ConsumerGroupHeartbeatQuery,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
    ConsumerGroupHeartbeatResponse,
)
from coopconsumer._protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from coopconsumer._types import TopicPartition

# ---------------------------------------------------------------------- joining

#: ConsumerMemberConfig's default retry.backoff.ms, in seconds.
BACKOFF_S = 0.1


def test_join_sends_epoch_zero_with_every_field() -> None:
    m = Member(server_assignor="uniform", client_rack="r1", group_instance_id="i-1")
    _, request = m.join()
    assert request == ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="m-1",
        member_epoch=0,
        instance_id="i-1",
        rack_id="r1",
        rebalance_timeout_ms=300_000,
        subscribed_topic_names=("t",),
        server_assignor="uniform",
        topic_partitions=(),
    )


def test_first_assignment_assigns_then_acknowledges_then_is_stable() -> None:
    m = Member()
    request_id, _ = m.join()
    fx = m.answer(request_id, joined(1, assignment(t=[0, 1])))
    assert m.state() is S.RECONCILING
    assert m.member.member_epoch == 1
    assert quiet(fx) == [
        Assign(partitions=tps("t-0", "t-1")),
        InvokeListener(invocation_id=1, kind=ListenerKind.ASSIGNED, partitions=tps("t-0", "t-1")),
    ]
    fx = m.feed(ListenerDone(invocation_id=1, kind=ListenerKind.ASSIGNED))
    assert m.state() is S.ACKNOWLEDGING
    ack_id, ack = heartbeat(fx)  # sent at once, not at the interval
    assert ack.member_epoch == 1
    assert ack.topic_partitions == (
        ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=T_ID, partitions=(0, 1)),
    )
    # Unchanged since the answered join: left null.
    assert ack.subscribed_topic_names is None
    assert ack.rebalance_timeout_ms == -1
    m.answer(ack_id, ok(1))
    assert m.state() is S.STABLE
    assert m.member.owned_partitions == tps("t-0", "t-1")
    assert m.member.group_metadata.generation_id == 1


def test_an_empty_first_assignment_still_calls_on_partitions_assigned() -> None:
    m = Member()
    request_id, _ = m.join()
    fx = m.answer(request_id, joined(1, assignment()))
    assert listeners(fx) == [
        InvokeListener(invocation_id=1, kind=ListenerKind.ASSIGNED, partitions=frozenset())
    ]


def _past_the_reconciliation(m: Member) -> None:
    """Heartbeat (unchanged answers) until the quick heartbeats that follow the join
    are over: one interval (2 s) after the answer that brought the assignment."""
    for _ in range(8):
        if m.member._core.reconciling_until is None:
            return
        deadline = m.member.next_deadline
        assert deadline is not None
        request_id, _ = heartbeat(m.feed(Tick(), after=deadline - m.now))
        m.answer(request_id, ok(1))
    raise AssertionError("the member kept heartbeating quickly")


def test_heartbeats_at_the_interval_the_broker_returns() -> None:
    m = Member()
    m.stable(0)
    _past_the_reconciliation(m)
    assert m.member.next_deadline == pytest.approx(m.now + 2.0)
    assert sends(m.feed(Tick(), after=1.9)) == []
    _, request = heartbeat(m.feed(Tick(), after=0.1))
    # Nothing changed: every optional field is null.
    assert request == ConsumerGroupHeartbeatRequest(group_id="g", member_id="m-1", member_epoch=1)


def test_while_its_change_reconciles_a_member_heartbeats_four_times_an_interval() -> None:
    """The coordinator hands a partition to its new owner only in the answer to that
    owner's heartbeat after the previous owner released it; the other members release
    as they learn of the change, at their own heartbeats. For one interval after its
    assignment changed the member heartbeats every quarter interval, so a partition
    released just after its acknowledgement reaches it within 0.5 s, not 2 s (issue 24:
    the chain of hand-overs on a join or leave)."""
    m = Member()
    m.stable(0)
    _past_the_reconciliation(m)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    fx = m.answer(request_id, ok(2, assignment(t=[0, 1])), after=0.01)
    (assigned,) = listeners(fx)
    fx = m.feed(ListenerDone(invocation_id=assigned.invocation_id, kind=assigned.kind))
    ack_id, _ = heartbeat(fx)  # the acknowledgement: at once
    ack_sent = m.now
    m.answer(ack_id, ok(2), after=0.01)
    # Another member released t-2 meanwhile: the next heartbeat, a quarter interval
    # after the acknowledgement left, brings it.
    assert m.member.next_deadline == pytest.approx(ack_sent + 0.5)
    assert sends(m.feed(Tick(), after=0.48)) == []
    request_id, _ = heartbeat(m.feed(Tick(), after=0.01))
    fx = m.answer(request_id, ok(3, assignment(t=[0, 1, 2])), after=0.01)
    (assigned,) = listeners(fx)
    assert assigned.partitions == tps("t-2")
    ack_id, _ = heartbeat(
        m.feed(ListenerDone(invocation_id=assigned.invocation_id, kind=assigned.kind))
    )
    m.answer(ack_id, ok(3), after=0.01)
    # Each change starts a new interval of quick heartbeats; unchanged answers end it.
    changed_at = m.now - 0.01 - 0.01
    quick = 0
    while True:
        deadline = m.member.next_deadline
        assert deadline is not None
        request_id, _ = heartbeat(m.feed(Tick(), after=deadline - m.now))
        m.answer(request_id, ok(3))
        if m.member._core.reconciling_until is None:
            break
        quick += 1
    assert quick == 3
    assert m.now == pytest.approx(changed_at + 2.0, abs=0.05)
    sent = m.now
    assert m.member.next_deadline == pytest.approx(sent + 2.0)


def test_an_epoch_bump_without_new_partitions_starts_the_quick_heartbeats() -> None:
    """Kafka moves a member waiting for partitions other members still own to the new
    epoch and leaves its assignment as it is (its next answers bring them)."""
    m = Member()
    m.stable(0)
    _past_the_reconciliation(m)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    sent = m.now
    m.answer(request_id, ok(2), after=0.01)
    assert m.member.next_deadline == pytest.approx(sent + 0.5)


def test_a_join_answered_without_an_assignment_heartbeats_again_quickly() -> None:
    """librdkafka's mock answers a joining member whose partitions other members still
    own at epoch 0 and without an assignment; they arrive as the others release them."""
    m = Member()
    request_id, _ = m.join()
    sent = m.now
    m.answer(request_id, joined(0, None), after=0.01)
    assert m.state() is S.JOINING
    assert m.member.next_deadline == pytest.approx(sent + 0.5)


def test_an_unchanged_answer_keeps_the_interval() -> None:
    m = Member()
    m.stable(0)
    _past_the_reconciliation(m)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    sent = m.now
    m.answer(request_id, ok(1, assignment(t=[0])), after=0.01)  # the same assignment
    assert m.member.next_deadline == pytest.approx(sent + 2.0)


def test_the_interval_counts_from_when_the_heartbeat_left() -> None:
    """As librdkafka, Java and the classic member: a slow answer does not push the
    next heartbeat back by its round trip, so members keep their phase (issue 24)."""
    m = Member()
    m.stable(0)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    sent_at = m.now
    m.answer(request_id, ok(1), after=0.3)
    assert m.member.next_deadline == pytest.approx(sent_at + 2.0)
    assert sends(m.feed(Tick(), after=1.6)) == []
    heartbeat(m.feed(Tick(), after=0.2))  # 2.1 s after it left, 1.8 s after its answer


def test_an_answer_slower_than_the_interval_heartbeats_again_at_once() -> None:
    m = Member()
    m.stable(0)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    heartbeat(m.answer(request_id, ok(1), after=2.5))


def test_a_broker_chosen_member_id_is_kept() -> None:
    m = Member(member_id="")
    request_id, request = m.join()
    assert request.member_id == ""
    m.answer(
        request_id,
        ConsumerGroupHeartbeatResponse(member_id="chosen", member_epoch=1, assignment=assignment()),
    )
    assert m.member.member_id == "chosen"


# ---------------------------------------------------------------------- reconciliation


def test_revoke_first_then_assign_then_acknowledge() -> None:
    m = Member(enable_auto_commit=True)
    m.stable(0, 1)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    fx = m.answer(request_id, ok(2, assignment(t=[1, 2])))
    assert m.state() is S.RECONCILING
    assert quiet(fx) == [
        CommitBeforeRevoke(partitions=tps("t-0")),
        InvokeListener(invocation_id=2, kind=ListenerKind.REVOKED, partitions=tps("t-0")),
    ]
    # The REVOKED listener may commit, with the new epoch as generation.
    token = object()
    fx = m.feed(
        CommitRequested(offsets={TopicPartition("t", 0): OffsetAndMetadata(offset=5)}, token=token)
    )
    (commit,) = sends(fx)
    assert isinstance(commit.request, OffsetCommitRequest)
    assert commit.request.generation_id == 2
    assert commit.request.member_id == "m-1"
    fx = m.feed(ListenerDone(invocation_id=2, kind=ListenerKind.REVOKED))
    assert quiet(fx) == [
        Unassign(partitions=tps("t-0")),
        Assign(partitions=tps("t-2")),
        InvokeListener(invocation_id=3, kind=ListenerKind.ASSIGNED, partitions=tps("t-2")),
    ]
    fx = m.feed(ListenerDone(invocation_id=3, kind=ListenerKind.ASSIGNED))
    ack_id, ack = heartbeat(fx)
    assert ack.topic_partitions == (
        ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=T_ID, partitions=(1, 2)),
    )
    m.answer(ack_id, ok(2))
    assert m.state() is S.STABLE
    assert m.member.owned_partitions == tps("t-1", "t-2")


def test_a_revocation_only_reconciliation_acknowledges_once_the_partitions_are_released() -> None:
    """Nothing added: the partitions released wait for the acknowledgement before the
    coordinator gives them to another member, so it goes out with the (empty)
    on_partitions_assigned, not after that returns (issue 24)."""
    m = Member(enable_auto_commit=True)
    m.stable(0, 1)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    m.answer(request_id, ok(1, assignment(t=[1])))
    fx = m.feed(ListenerDone(invocation_id=2, kind=ListenerKind.REVOKED))
    ack_id, ack = heartbeat(fx)
    assert quiet(fx)[:2] == [
        Unassign(partitions=tps("t-0")),
        InvokeListener(invocation_id=3, kind=ListenerKind.ASSIGNED, partitions=frozenset()),
    ]
    assert ack.topic_partitions == (
        ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=T_ID, partitions=(1,)),
    )
    assert m.state() is S.ACKNOWLEDGING
    m.answer(ack_id, ok(2))
    assert m.state() is S.STABLE
    # The empty callback returns later: nothing left to do.
    assert quiet(m.feed(ListenerDone(invocation_id=3, kind=ListenerKind.ASSIGNED))) == []
    assert m.state() is S.STABLE


def test_a_target_that_arrives_while_reconciling_waits_for_the_acknowledgement() -> None:
    m = Member()
    m.stable(0)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    m.answer(request_id, ok(2, assignment(t=[0, 1])))
    assert m.state() is S.RECONCILING
    # A heartbeat during the reconciliation brings a newer target.
    request_id, during = heartbeat(m.feed(Tick(), after=2.0))
    assert during.topic_partitions is None  # owned has not changed yet
    fx = m.answer(request_id, ok(3, assignment(t=[0, 1, 2])))
    assert listeners(fx) == []  # one reconciliation at a time
    fx = m.feed(ListenerDone(invocation_id=2, kind=ListenerKind.ASSIGNED))
    ack_id, _ = heartbeat(fx)
    fx = m.answer(ack_id, ok(3))
    assert m.state() is S.RECONCILING
    assert quiet(fx)[:2] == [
        Assign(partitions=tps("t-2")),
        InvokeListener(invocation_id=3, kind=ListenerKind.ASSIGNED, partitions=tps("t-2")),
    ]


def test_unknown_topic_ids_wait_for_metadata() -> None:
    m = Member()
    fx = m.feed(Subscribe(topics={"t", "u"}))
    m.feed(metadata("t"))
    request_id, _ = heartbeat(m.feed(CoordinatorFound(node_id=COORDINATOR)))
    fx = m.answer(request_id, joined(1, assignment(t=[0], u=[0])))
    # The last answer asked for both topics and is not retry.backoff.ms old: asking
    # again at once could loop; the refresh is due when the backoff ends.
    assert not [e for e in fx if isinstance(e, MetadataNeeded)]
    assert m.member.next_deadline == pytest.approx(m.now + 0.1)
    assert Assign(partitions=tps("t-0")) in fx  # the resolvable part now
    fx = m.feed(Tick(), after=0.1)
    assert [e.topics for e in fx if isinstance(e, MetadataNeeded)] == [frozenset({"t", "u"})]
    fx = m.feed(ListenerDone(invocation_id=1, kind=ListenerKind.ASSIGNED))
    ack_id, _ = heartbeat(fx)
    m.answer(ack_id, ok(1))
    assert m.state() is S.STABLE
    fx = m.feed(metadata("t", "u"))
    assert m.state() is S.RECONCILING
    assert Assign(partitions=tps("u-0")) in fx


def test_a_new_subscription_is_sent_at_once() -> None:
    m = Member()
    m.stable(0)
    _, request = heartbeat(m.feed(Subscribe(topics={"t", "u"})))
    assert request.subscribed_topic_names == ("t", "u")


def test_pattern_subscription_sends_the_matching_names() -> None:
    m = Member()
    m.feed(Subscribe(pattern=re.compile("t|u")))
    m.feed(metadata("t", "u"))
    _, request = heartbeat(m.feed(CoordinatorFound(node_id=COORDINATOR)))
    assert request.subscribed_topic_names == ("t", "u")


# ---------------------------------------------------------------------- fencing


@pytest.mark.parametrize("code", [error_codes.FENCED_MEMBER_EPOCH, error_codes.UNKNOWN_MEMBER_ID])
def test_fenced_member_loses_its_partitions_and_rejoins_at_epoch_zero(code: int) -> None:
    m = Member()
    m.stable(0, 1)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    fx = m.answer(request_id, failed(code))
    assert m.state() is S.FENCED
    assert quiet(fx) == [
        Unassign(partitions=tps("t-0", "t-1")),
        InvokeListener(invocation_id=2, kind=ListenerKind.LOST, partitions=tps("t-0", "t-1")),
    ]
    token = object()
    fx = m.feed(
        CommitRequested(offsets={TopicPartition("t", 0): OffsetAndMetadata(offset=1)}, token=token)
    )
    (done,) = quiet(fx)
    assert isinstance(done, CommitDone)
    assert isinstance(done.error, RebalanceInProgressError)
    fx = m.feed(ListenerDone(invocation_id=2, kind=ListenerKind.LOST))
    assert m.state() is S.JOINING
    _, rejoin = heartbeat(fx)
    assert rejoin.member_epoch == 0
    assert rejoin.member_id == "m-1"  # kept (KIP-1082)
    assert rejoin.subscribed_topic_names == ("t",)
    assert rejoin.topic_partitions == ()


def test_fenced_while_revoking_reports_only_what_is_not_being_revoked() -> None:
    m = Member()
    m.stable(0, 1)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    m.answer(request_id, ok(2, assignment(t=[1])))
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    fx = m.answer(request_id, failed(error_codes.FENCED_MEMBER_EPOCH))
    assert listeners(fx) == [
        InvokeListener(invocation_id=3, kind=ListenerKind.LOST, partitions=tps("t-1"))
    ]
    m.feed(ListenerDone(invocation_id=3, kind=ListenerKind.LOST))
    assert m.state() is S.FENCED  # the REVOKED listener still runs
    fx = m.feed(ListenerDone(invocation_id=2, kind=ListenerKind.REVOKED))
    assert Unassign(partitions=tps("t-0")) in fx
    assert m.state() is S.JOINING


def test_coordinator_errors_look_the_coordinator_up_again() -> None:
    m = Member()
    m.stable(0)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    fx = m.answer(request_id, failed(error_codes.NOT_COORDINATOR))
    assert any(isinstance(e, FindCoordinator) for e in fx)
    assert sends(m.feed(CoordinatorFound(node_id=COORDINATOR))) == []
    # The failed heartbeat is retried after retry.backoff.ms (Java's failHeartbeat).
    _, request = heartbeat(m.feed(Tick(), after=BACKOFF_S))
    assert request.subscribed_topic_names == ("t",)  # a new coordinator hears everything
    assert m.member.owned_partitions == tps("t-0")


def test_a_lost_connection_retries_with_every_field() -> None:
    m = Member()
    m.stable(0)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    m.feed(RequestFailed(request_id=request_id, error=BrokerConnectionError("gone")))
    assert sends(m.feed(CoordinatorFound(node_id=COORDINATOR))) == []
    _, request = heartbeat(m.feed(Tick(), after=BACKOFF_S))
    assert request.topic_partitions is not None
    assert m.state() is S.STABLE


@pytest.mark.parametrize(
    "code",
    [
        error_codes.UNRELEASED_INSTANCE_ID,
        error_codes.GROUP_AUTHORIZATION_FAILED,
        error_codes.UNSUPPORTED_ASSIGNOR,
    ],
)
def test_errors_no_retry_can_cure_are_fatal(code: int) -> None:
    m = Member()
    m.stable(0)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    fx = m.answer(request_id, failed(code))
    assert m.state() is S.FATAL
    (fatal,) = [e for e in fx if isinstance(e, Fatal)]
    assert isinstance(fatal.error, KafkaError)
    assert fatal.error.code == code
    assert Unassign(partitions=tps("t-0")) in fx
    m.feed(CloseRequested())
    assert m.state() is S.CLOSED


# ---------------------------------------------------------------------- commits


def _send_commit(m: Member, token: object, epoch: int) -> int:
    """Ask for a commit of t-0 at 9; returns the OffsetCommit's request id."""
    offsets = {TopicPartition("t", 0): OffsetAndMetadata(offset=9)}
    (send,) = sends(m.feed(CommitRequested(offsets=offsets, token=token)))
    assert isinstance(send.request, OffsetCommitRequest)
    assert send.request.generation_id == epoch
    return send.request_id


def _done(fx: list[Effect], token: object) -> CommitDone:
    (done,) = [e for e in fx if isinstance(e, CommitDone)]
    assert done.token is token
    return done


def _stale_commit() -> tuple[Member, object]:
    """A member STABLE at epoch 4 whose commit (the token returned) was just answered
    STALE_MEMBER_EPOCH, asserting nothing was answered or sent yet."""
    m = Member()
    m.stable(0, epoch=4)
    token = object()
    request_id = _send_commit(m, token, 4)
    fx = m.feed(
        ResponseReceived(
            request_id=request_id, response=commit_response(error_codes.STALE_MEMBER_EPOCH)
        )
    )
    assert [e for e in fx if isinstance(e, CommitDone)] == []
    assert sends(fx) == []  # the same epoch would be refused again
    return m, token


def test_commit_answers() -> None:
    m = Member()
    m.stable(0, epoch=4)

    def commit(code: int) -> CommitDone:
        token = object()
        request_id = _send_commit(m, token, 4)
        return _done(
            m.feed(ResponseReceived(request_id=request_id, response=commit_response(code))), token
        )

    assert commit(error_codes.NONE).error is None
    assert isinstance(commit(error_codes.FENCED_MEMBER_EPOCH).error, CommitFailedError)
    assert isinstance(commit(error_codes.UNKNOWN_MEMBER_ID).error, CommitFailedError)
    assert m.state() is S.STABLE  # the heartbeat, not the commit, learns of fencing


def test_a_commit_with_a_stale_epoch_is_sent_again_with_the_next_one() -> None:
    """STALE_MEMBER_EPOCH: the epoch moved on while the commit was on its way (a
    revocation was acknowledged). As Java, the commit waits for the member's next epoch
    and goes again with it; the application sees one answer, the last."""
    m, token = _stale_commit()
    beat, _ = heartbeat(m.feed(Tick(), after=2.0))
    (again,) = sends(m.answer(beat, ok(5)))
    assert isinstance(again.request, OffsetCommitRequest)
    assert again.request.generation_id == 5
    done = _done(
        m.feed(
            ResponseReceived(
                request_id=again.request_id, response=commit_response(error_codes.NONE)
            )
        ),
        token,
    )
    assert done.error is None


def test_a_new_epoch_that_came_first_sends_the_stale_commit_at_once() -> None:
    m = Member()
    m.stable(0, epoch=4)
    token = object()
    request_id = _send_commit(m, token, 4)
    beat, _ = heartbeat(m.feed(Tick(), after=2.0))
    m.answer(beat, ok(5))  # the epoch moved on before the commit's answer came
    fx = m.feed(
        ResponseReceived(
            request_id=request_id, response=commit_response(error_codes.STALE_MEMBER_EPOCH)
        )
    )
    (again,) = sends(fx)
    assert isinstance(again.request, OffsetCommitRequest)
    assert again.request.generation_id == 5


def test_a_stale_commit_fails_as_a_rebalance_without_a_new_epoch_in_time() -> None:
    m, token = _stale_commit()
    # The heartbeats keep answering epoch 4 (nothing to send again) until the
    # request timeout (30 s by default) ends the wait.
    for _ in range(14):
        beat, _ = heartbeat(m.feed(Tick(), after=2.0))
        fx = m.answer(beat, ok(4))
        assert sends(fx) == []
        assert [e for e in fx if isinstance(e, CommitDone)] == []
    fx = m.feed(Tick(), after=2.0)
    done = _done(fx, token)
    assert isinstance(done.error, RebalanceInProgressError)


def test_a_stale_commit_of_a_fenced_member_fails_as_a_rebalance() -> None:
    m, token = _stale_commit()
    beat, _ = heartbeat(m.feed(Tick(), after=2.0))
    fx = m.answer(beat, failed(error_codes.FENCED_MEMBER_EPOCH))
    done = _done(fx, token)
    assert isinstance(done.error, RebalanceInProgressError)
    assert m.state() in (S.FENCED, S.JOINING)


def test_commit_outside_the_group_fails() -> None:
    m = Member()
    fx = m.feed(
        CommitRequested(offsets={TopicPartition("t", 0): OffsetAndMetadata(offset=1)}, token=1)
    )
    (done,) = fx
    assert isinstance(done, CommitDone)
    assert isinstance(done.error, CommitFailedError)


# ---------------------------------------------------------------------- leaving


@pytest.mark.parametrize(
    ("instance_id", "leave_group", "epoch"),
    [(None, None, -1), ("i-1", None, -2), ("i-1", True, -1)],
)
def test_close_revokes_then_leaves(
    instance_id: str | None, leave_group: bool | None, epoch: int
) -> None:
    m = Member(group_instance_id=instance_id)
    m.stable(0)
    fx = m.feed(CloseRequested(leave_group=leave_group))
    assert m.state() is S.PREPARE_LEAVING
    assert listeners(fx) == [
        InvokeListener(invocation_id=2, kind=ListenerKind.REVOKED, partitions=tps("t-0"))
    ]
    fx = m.feed(ListenerDone(invocation_id=2, kind=ListenerKind.REVOKED))
    assert Unassign(partitions=tps("t-0")) in fx
    request_id, leave = heartbeat(fx)
    assert leave == ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m-1", member_epoch=epoch, instance_id=instance_id
    )
    assert m.state() is S.LEAVING
    m.answer(request_id, ok(epoch))
    assert m.state() is S.CLOSED


def test_close_without_leaving_sends_nothing() -> None:
    m = Member(group_instance_id="i-1")
    m.stable(0)
    m.feed(CloseRequested(leave_group=False))
    fx = m.feed(ListenerDone(invocation_id=2, kind=ListenerKind.REVOKED))
    assert sends(fx) == []
    assert m.state() is S.CLOSED


def test_unsubscribe_then_subscribe_again() -> None:
    m = Member()
    m.stable(0)
    m.feed(LeaveRequested())
    fx = m.feed(ListenerDone(invocation_id=2, kind=ListenerKind.REVOKED))
    request_id, _ = heartbeat(fx)
    m.answer(request_id, ok(-1))
    assert m.state() is S.UNSUBSCRIBED
    fx = m.feed(Subscribe(topics={"t"}))
    assert m.state() is S.JOINING
    _, request = heartbeat(fx)
    assert request.member_epoch == 0


# ---------------------------------------------------------------------- poll timeout


def test_poll_timeout_leaves_loses_and_rejoins_on_the_next_poll() -> None:
    m = Member()
    m.stable(0)
    deadline = m.member.next_deadline
    assert deadline is not None
    m.feed(PollCalled())
    poll_deadline = m.now + MAX_POLL_S
    fx: list[Effect] = []
    while m.now < poll_deadline:  # heartbeats keep going while nobody polls
        step = m.member.next_deadline
        assert step is not None
        fx = m.feed(Tick(), after=step - m.now)
        for send in sends(fx):
            m.answer(send.request_id, ok(1))
    assert m.state() is S.STALE
    _, leave = heartbeat(fx)
    assert leave.member_epoch == -1
    assert Unassign(partitions=tps("t-0")) in fx
    assert InvokeListener(invocation_id=2, kind=ListenerKind.LOST, partitions=tps("t-0")) in fx
    fx = m.feed(PollCalled())
    assert m.state() is S.JOINING
    assert heartbeat(fx)[1].member_epoch == 0
    assert any(isinstance(e, Log) and e.level == logging.INFO for e in fx)


def test_a_broker_without_kip848_is_a_fatal_configuration_error() -> None:
    m = Member()
    request_id, _ = m.join()
    unsupported = error_codes.to_exception(error_codes.UNSUPPORTED_VERSION, api_key=68)
    fx = m.feed(RequestFailed(request_id=request_id, error=unsupported))
    assert m.state() is S.FATAL
    (fatal,) = [e for e in fx if isinstance(e, Fatal)]
    assert isinstance(fatal.error, ConfigurationError)
    assert "group.protocol=classic" in str(fatal.error)


def test_config_rejects_an_unknown_server_assignor() -> None:
    with pytest.raises(ConfigurationError, match=r"group\.remote\.assignor"):
        ConsumerMemberConfig(group_id="g", server_assignor="sticky")


# ---------------------------------------------------------------------- manual assignment


def test_manual_assignment_commits_as_nobody_and_waits_for_the_coordinator() -> None:
    """``assign()`` with group.protocol=consumer: no heartbeat, no listener; a commit
    asked before the coordinator is found waits for it and goes with member epoch -1
    and no member id (Java's AsyncKafkaConsumer does the same)."""
    m = Member()
    tp = TopicPartition("t", 0)
    fx = m.feed(AssignRequested(partitions={tp}))
    assert m.state() is S.MANUAL
    assert Assign(partitions=frozenset({tp})) in fx
    assert any(isinstance(e, FindCoordinator) for e in fx)
    assert m.feed(CommitRequested(offsets={tp: OffsetAndMetadata(offset=7)}, token="c")) == []
    fx = m.feed(CoordinatorFound(node_id=COORDINATOR))
    (send,) = [e for e in fx if isinstance(e, Send)]
    request = send.request
    assert isinstance(request, OffsetCommitRequest)
    assert (request.generation_id, request.member_id, request.group_instance_id) == (-1, "", None)
    assert not [e for e in fx if isinstance(e, InvokeListener)]
    fx = m.feed(Tick(), after=30.0)
    assert not [e for e in sends(fx) if isinstance(e.request, ConsumerGroupHeartbeatQuery)]
    fx = m.feed(CloseRequested())
    assert Unassign(partitions=frozenset({tp})) in fx
    assert m.state() is S.CLOSED


def test_a_lost_coordinator_connection_makes_the_next_heartbeat_say_everything() -> None:
    """The coordinator may have dropped what it knew of the member with the connection
    (librdkafka's mock does), and no request of the member failed to say so: the next
    heartbeat carries the subscription and the owned partitions again."""
    m = Member()
    m.stable(0, 1)
    request_id, quiet_beat = heartbeat(m.feed(Tick(), after=2.0))
    assert (quiet_beat.topic_partitions, quiet_beat.subscribed_topic_names) == (None, None)
    m.answer(request_id, ok(1))
    assert m.feed(ConnectionLost(node_id=COORDINATOR + 1)) == []  # another node's
    request_id, still_quiet = heartbeat(m.feed(Tick(), after=2.0))
    assert still_quiet.topic_partitions is None
    m.answer(request_id, ok(1))
    assert m.feed(ConnectionLost(node_id=COORDINATOR)) == []
    assert m.state() is S.STABLE
    _, full = heartbeat(m.feed(Tick(), after=2.0))
    assert full.subscribed_topic_names == ("t",)
    assert full.topic_partitions is not None
    assert [(tp.topic_id, tp.partitions) for tp in full.topic_partitions] == [(T_ID, (0, 1))]


def test_a_manual_commit_refused_by_a_group_with_members_says_why() -> None:
    """The simple commit (epoch -1, no member id) is accepted only while the group has
    no members; Kafka answers UNKNOWN_MEMBER_ID otherwise. The error names that cause,
    as the classic member's does, and nothing is rejoined."""
    m = Member()
    tp = TopicPartition("t", 0)
    m.feed(AssignRequested(partitions={tp}))
    m.feed(CoordinatorFound(node_id=COORDINATOR))
    fx = m.feed(CommitRequested(offsets={tp: OffsetAndMetadata(offset=7)}, token="c"))
    (send,) = [e for e in fx if isinstance(e, Send)]
    refused = OffsetCommitResponse(
        topics=(
            OffsetCommitResponseTopic(
                name="t",
                partitions=(
                    OffsetCommitResponsePartition(
                        partition_index=0, error_code=error_codes.UNKNOWN_MEMBER_ID
                    ),
                ),
            ),
        )
    )
    fx = m.feed(ResponseReceived(request_id=send.request_id, response=refused))
    (done,) = [e for e in fx if isinstance(e, CommitDone)]
    assert isinstance(done.error, CommitFailedError)
    assert "active members" in str(done.error)
    assert m.state() is S.MANUAL


def test_closing_a_manual_assignment_answers_a_commit_in_flight() -> None:
    m = Member()
    tp = TopicPartition("t", 0)
    m.feed(AssignRequested(partitions={tp}))
    m.feed(CoordinatorFound(node_id=COORDINATOR))
    m.feed(CommitRequested(offsets={tp: OffsetAndMetadata(offset=7)}, token="c"))
    fx = m.feed(CloseRequested())
    (done,) = [e for e in fx if isinstance(e, CommitDone)]
    assert done.token == "c"
    assert isinstance(done.error, CommitFailedError)
    assert m.state() is S.CLOSED


def test_a_coordinator_that_keeps_refusing_is_heartbeated_at_the_retry_backoff() -> None:
    # A moving coordinator answers NOT_COORDINATOR while lookups still name it: each
    # lookup is answered at once, and the heartbeat after it used to leave at once too,
    # hundreds of times a second (found with the transactions proxy). Java waits
    # retry.backoff.ms after a failed heartbeat.
    m = Member()
    m.stable(0)
    request_id, _ = heartbeat(m.feed(Tick(), after=2.0))
    for _ in range(3):
        fx = m.answer(request_id, failed(error_codes.NOT_COORDINATOR))
        assert any(isinstance(e, FindCoordinator) for e in fx)
        assert sends(m.feed(CoordinatorFound(node_id=COORDINATOR))) == []
        assert sends(m.feed(Tick(), after=BACKOFF_S / 2)) == []
        request_id, _ = heartbeat(m.feed(Tick(), after=BACKOFF_S / 2))
    m.answer(request_id, ok(1))
    assert m.state() is S.STABLE
