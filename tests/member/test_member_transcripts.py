"""Transcripts of one ``GroupMember``: feed inputs, assert the effects and the state.

No broker: ``Script`` answers the member's requests by hand, so every effect the member
emits in each step is visible. Scenarios follow KIP-429 and Java's ConsumerCoordinator.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs
import pytest
from _coord_assignors import (
    CooperativeTestAssignor,
    EagerTestAssignor,
    GreedyCooperativeAssignor,
    RaisingAssignor,
)
from _coord_script import HEARTBEAT_S, MAX_POLL_S, SESSION_S, Script, config, in_state, tps

from coopconsumer import consumer_protocol
from coopconsumer._errors import (
    AssignorError,
    BrokerConnectionError,
    CommitFailedError,
    ConfigurationError,
    InvalidAssignmentError,
    KafkaError,
    ProtocolError,
    RebalanceInProgressError,
    RequestTimeoutError,
)
from coopconsumer._member import (
    Api,
    Assign,
    CloseRequested,
    CommitBeforeRevoke,
    CommitDone,
    CommitRequested,
    CoordinatorFound,
    CoordinatorUnavailable,
    Effect,
    ErrorAction,
    Fatal,
    FindCoordinator,
    GroupMember,
    InvokeListener,
    LeaveRequested,
    MemberState,
    MetadataNeeded,
    MetadataUpdate,
    Observation,
    Observe,
    OffsetAndMetadata,
    PollCalled,
    ReportError,
    ResponseReceived,
    Send,
    Subscribe,
    Tick,
    Unassign,
    action_for,
    diff_assignment,
    revoke_before_join,
)
from coopconsumer._member.classic._core import LEADER_SYNC_DELAY_S
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coopconsumer._types import TopicPartition
from coopconsumer.assignors import (
    ClusterMetadata,
    RebalanceProtocol,
    Subscription,
)

S = MemberState
#: The only timer left in the transcripts that pin ``next_deadline`` with nothing else
#: due: the metadata refresh, ``metadata.max.age.ms`` (300 s) after the subscription's
#: metadata answer at 0.
METADATA_REFRESH_AT = 300.0
T0 = TopicPartition("t", 0)


def kinds(effects: Sequence[Effect]) -> list[str]:
    """The effect sequence without logs and metrics, as short names."""
    out = []
    for e in effects:
        if isinstance(e, Send):
            out.append(type(e.request).__name__.removesuffix("Request"))
        elif isinstance(e, InvokeListener):
            out.append(f"{e.kind.name}{sorted(str(tp) for tp in e.partitions)}")
        elif isinstance(e, Assign | Unassign):
            out.append(f"{type(e).__name__}{sorted(str(tp) for tp in e.partitions)}")
        elif not isinstance(e, Observe) and type(e).__name__ != "Log":
            out.append(type(e).__name__)
    return out


def observed(effects: Sequence[Effect]) -> list[Observation]:
    return [e.event for e in effects if isinstance(e, Observe)]


def subscriptions_in(send: Send) -> list[tuple[str, Subscription]]:
    request = send.request
    assert isinstance(request, JoinGroupRequest)
    return [(p.name, consumer_protocol.decode_subscription(p.metadata)) for p in request.protocols]


def commit_response(code: int) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=(
            OffsetCommitResponseTopic(
                name="t",
                partitions=(OffsetCommitResponsePartition(partition_index=0, error_code=code),),
            ),
        )
    )


def commit(script: Script, token: str = "c") -> list[Effect]:
    return script.feed(CommitRequested(offsets={T0: OffsetAndMetadata(offset=7)}, token=token))


def done(effects: Sequence[Effect]) -> CommitDone:
    found = [e for e in effects if isinstance(e, CommitDone)]
    assert len(found) == 1, effects
    return found[0]


# ---------------------------------------------------------------------- construction


def test_assignors_without_a_common_protocol_are_a_configuration_error() -> None:
    class CoopOnly(EagerTestAssignor):
        def supported_protocols(self) -> list[RebalanceProtocol]:
            return [RebalanceProtocol.COOPERATIVE]

    with pytest.raises(ConfigurationError):
        GroupMember(config(), [CoopOnly("a"), EagerTestAssignor("b")])
    with pytest.raises(ConfigurationError):
        GroupMember(config(), [])
    with pytest.raises(ConfigurationError):
        config(heartbeat_interval_ms=30_000)


def test_protocol_is_the_highest_all_assignors_support() -> None:
    both = [CooperativeTestAssignor(), EagerTestAssignor("range-ish")]
    assert GroupMember(config(), both).protocol is RebalanceProtocol.EAGER
    assert (
        GroupMember(config(), [CooperativeTestAssignor()]).protocol is RebalanceProtocol.COOPERATIVE
    )


# ---------------------------------------------------------------------- joining


def test_subscribe_finds_the_coordinator_then_joins_with_one_protocol_per_assignor() -> None:
    s = Script([CooperativeTestAssignor("first"), EagerTestAssignor("second")], client_rack="r1")
    effects = s.feed(Subscribe(topics=frozenset({"t"})))
    assert kinds(effects) == ["MetadataNeeded", "FindCoordinator"]
    assert observed(effects) == [Observation.REBALANCE_STARTED]
    assert s.state() is S.JOINING
    effects = s.feed(CoordinatorFound(node_id=3))
    send = s.request(JoinGroupRequest)
    assert send.node_id == 3
    assert send.timeout_s == max(30.0, MAX_POLL_S + 5.0)  # Java: max(request, rebalance + 5 s)
    request = send.request
    assert isinstance(request, JoinGroupRequest)
    assert request.group_id == "g"
    assert request.member_id == ""
    assert request.protocol_type == "consumer"
    assert request.session_timeout_ms == SESSION_S * 1000
    assert request.rebalance_timeout_ms == MAX_POLL_S * 1000
    assert request.reason is not None
    assert "subscribed" in request.reason
    subs = subscriptions_in(send)
    assert [name for name, _ in subs] == ["first", "second"]
    for _, sub in subs:  # same topics, owned, generation and rack in every entry
        assert sub.topics == ("t",)
        assert sub.owned_partitions == ()
        assert sub.generation_id == -1
        assert sub.rack_id == "r1"


def test_member_id_required_rejoins_at_once_with_the_given_id() -> None:
    s = in_state(S.JOINING)
    effects = s.answer(
        JoinGroupRequest,
        s.join_response(error_code=error_codes.MEMBER_ID_REQUIRED, member_id="given-1"),
    )
    assert kinds(effects) == ["JoinGroup"]
    request = s.request(JoinGroupRequest).request
    assert isinstance(request, JoinGroupRequest)
    assert request.member_id == "given-1"
    assert request.reason is not None
    assert "MEMBER_ID_REQUIRED" in request.reason
    assert s.state() is S.JOINING
    # Java's initiateJoinGroup records failed-rebalance for every failed join future,
    # and its JoinGroup handler fails the future on MEMBER_ID_REQUIRED: a dynamic
    # member's first join counts one failed rebalance there, and here (docs/metrics.md).
    assert Observation.REBALANCE_FAILED in observed(effects)


def test_follower_syncs_with_no_assignments_then_assigns_and_calls_assigned() -> None:
    s = in_state(S.JOINING)
    effects = s.answer(JoinGroupRequest, s.join_response(member_id="m1", generation_id=4))
    assert kinds(effects) == ["SyncGroup"]
    assert Observation.JOIN_COMPLETED in observed(effects)
    request = s.request(SyncGroupRequest).request
    assert isinstance(request, SyncGroupRequest)
    assert (request.generation_id, request.member_id, request.assignments) == (4, "m1", ())
    assert request.protocol_name == "test-eager"
    effects = s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-2")))
    assert kinds(effects) == ["Assign['t-0', 't-2']", "ASSIGNED['t-0', 't-2']"]
    assert s.state() is S.ASSIGNING
    assert isinstance(s.assignors[0], EagerTestAssignor)
    assert [a.partitions for a in s.assignors[0].seen] == [tuple(sorted(tps("t-0", "t-2")))]
    effects = s.finish_listener()
    assert s.state() is S.STABLE
    assert Observation.REBALANCE_COMPLETED in observed(effects)
    assert s.member.generation_id == 4
    assert s.member.owned_partitions == tps("t-0", "t-2")


def test_cooperative_revokes_before_the_assignment_changes_then_rejoins() -> None:
    s = Script(cooperative=True)
    s.to_stable(tps("t-0", "t-1", "t-2"))
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    # COOPERATIVE: nothing revoked before joining; owned partitions go in the JoinGroup.
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert sub.owned_partitions == tuple(sorted(tps("t-0", "t-1", "t-2")))
    assert sub.generation_id == 1
    s.answer(JoinGroupRequest, s.join_response(generation_id=2))
    effects = s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1")))
    # REVOKED runs while t-2 is still assigned; nothing else changes yet.
    assert kinds(effects) == ["REVOKED['t-2']"]
    assert s.member.owned_partitions == tps("t-0", "t-1", "t-2")
    effects = s.finish_listener()
    assert kinds(effects) == ["Unassign['t-2']", "ASSIGNED[]"]  # ASSIGNED even when empty
    effects = s.finish_listener()
    assert s.state() is S.JOINING  # the follow-up rebalance
    request = s.request(JoinGroupRequest).request
    assert isinstance(request, JoinGroupRequest)
    assert request.reason is not None
    assert "need to revoke partitions [t-2]" in request.reason
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert sub.owned_partitions == tuple(sorted(tps("t-0", "t-1")))
    assert sub.generation_id == 2


def test_generation_lost_while_revoking_does_not_report_the_revoked_again() -> None:
    # The REVOKED callback runs on the poll() thread; a reset landing before its
    # ListenerDone must not hand the same partitions to LOST (KIP-429: LOST covers what
    # the member still owns). They leave on their own ListenerDone, before the rejoin.
    s = Script(cooperative=True)
    s.to_stable(tps("t-0", "t-1", "t-2"))
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    s.answer(JoinGroupRequest, s.join_response(generation_id=2))
    effects = s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1")))
    assert kinds(effects) == ["REVOKED['t-2']"]
    effects = s.heartbeat(error_codes.ILLEGAL_GENERATION)
    assert kinds(effects) == ["Unassign['t-0', 't-1']", "LOST['t-0', 't-1']"]
    assert s.member.owned_partitions == tps("t-2")  # until its REVOKED callback returns
    assert s.sent(JoinGroupRequest) == []
    effects = s.finish_listeners()
    assert "Unassign['t-2']" in kinds(effects)
    assert s.member.owned_partitions == frozenset()
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert sub.owned_partitions == ()


def test_eager_revokes_everything_before_joining() -> None:
    s = in_state(S.STABLE)
    effects = s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    assert kinds(effects) == ["REVOKED['t-0', 't-1']"]
    assert s.state() is S.PREPARING_JOIN
    effects = s.finish_listener()
    assert kinds(effects) == ["Unassign['t-0', 't-1']", "JoinGroup"]
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert sub.owned_partitions == ()
    assert sub.generation_id == 1
    effects = s.answer(JoinGroupRequest, s.join_response(generation_id=2))
    effects = s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1")))
    # EAGER: everything is "added" again.
    assert kinds(effects) == ["Assign['t-0', 't-1']", "ASSIGNED['t-0', 't-1']"]


def test_auto_commit_commits_before_each_revocation() -> None:
    s = Script(enable_auto_commit=True)
    s.to_stable()
    effects = s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    assert kinds(effects) == ["CommitBeforeRevoke", "REVOKED['t-0', 't-1']"]
    before = next(e for e in effects if isinstance(e, CommitBeforeRevoke))
    assert before.partitions == tps("t-0", "t-1")
    # The commit the Consumer sends for it goes out with the old generation.
    effects = commit(s)
    request = s.request(OffsetCommitRequest).request
    assert isinstance(request, OffsetCommitRequest)
    assert (request.generation_id, request.member_id) == (1, "m1")


@pytest.mark.parametrize(
    ("code", "member_id_after"),
    [(error_codes.ILLEGAL_GENERATION, "m1"), (error_codes.UNKNOWN_MEMBER_ID, "")],
)
def test_reset_generation_loses_everything_then_rejoins_owning_nothing(
    code: int, member_id_after: str
) -> None:
    s = Script(cooperative=True)
    s.to_stable()
    effects = s.heartbeat(code)
    # Unassign first (someone else may own them already), then LOST; no JoinGroup yet.
    assert kinds(effects) == ["Unassign['t-0', 't-1']", "LOST['t-0', 't-1']"]
    assert s.state() is S.PREPARING_JOIN
    assert (s.member.generation_id, s.member.member_id) == (-1, member_id_after)
    effects = s.finish_listener()
    assert kinds(effects) == ["JoinGroup"]
    request = s.request(JoinGroupRequest).request
    assert isinstance(request, JoinGroupRequest)
    assert request.member_id == member_id_after
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert (sub.owned_partitions, sub.generation_id) == ((), -1)


def test_reset_from_sync_group_rejoins_with_nothing_owned() -> None:
    s = in_state(S.AWAITING_SYNC)
    effects = s.answer(
        SyncGroupRequest, SyncGroupResponse(error_code=error_codes.ILLEGAL_GENERATION)
    )
    assert kinds(effects) == ["JoinGroup"]
    assert Observation.REBALANCE_FAILED in observed(effects)


def test_rebalance_in_progress_from_sync_rejoins_keeping_ownership() -> None:
    s = Script(cooperative=True)
    s.to_stable()
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    s.answer(JoinGroupRequest, s.join_response(generation_id=2))
    effects = s.answer(
        SyncGroupRequest, SyncGroupResponse(error_code=error_codes.REBALANCE_IN_PROGRESS)
    )
    assert kinds(effects) == ["JoinGroup"]
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert sub.owned_partitions == tuple(sorted(tps("t-0", "t-1")))


def test_join_failure_finds_the_coordinator_and_resends() -> None:
    s = in_state(S.JOINING)
    effects = s.fail(JoinGroupRequest, RequestTimeoutError("timeout"))
    assert kinds(effects) == ["FindCoordinator"]
    assert s.member.coordinator_id is None
    effects = s.feed(CoordinatorFound(node_id=2))
    assert kinds(effects) == ["JoinGroup"]
    assert s.request(JoinGroupRequest).node_id == 2


def test_coordinator_load_in_progress_retries_the_join_after_the_backoff() -> None:
    s = in_state(S.JOINING)
    s.answer(JoinGroupRequest, s.join_response(error_code=error_codes.COORDINATOR_LOAD_IN_PROGRESS))
    assert s.sent(JoinGroupRequest) == []
    assert s.member.next_deadline == pytest.approx(0.1)
    assert kinds(s.feed(Tick(), at=0.05)) == []
    assert kinds(s.feed(Tick(), at=0.1)) == ["JoinGroup"]


@pytest.mark.parametrize(
    "code",
    [
        error_codes.GROUP_AUTHORIZATION_FAILED,
        error_codes.INCONSISTENT_GROUP_PROTOCOL,
        error_codes.INVALID_SESSION_TIMEOUT,
        error_codes.GROUP_MAX_SIZE_REACHED,
        error_codes.FENCED_INSTANCE_ID,
        error_codes.UNSUPPORTED_VERSION,
    ],
)
def test_fatal_join_errors(code: int) -> None:
    s = in_state(S.JOINING)
    effects = s.answer(JoinGroupRequest, s.join_response(error_code=code))
    fatal = [e for e in effects if isinstance(e, Fatal)]
    assert len(fatal) == 1
    assert isinstance(fatal[0].error, KafkaError)
    assert fatal[0].error.code == code
    assert s.state() is S.FATAL
    assert isinstance(done(commit(s)).error, KafkaError)


def test_a_protocol_this_member_did_not_offer_is_fatal() -> None:
    s = in_state(S.JOINING)
    effects = s.answer(JoinGroupRequest, s.join_response(protocol_name="roundrobin"))
    assert kinds(effects) == ["Fatal"]
    fatal = effects[-1]
    assert isinstance(fatal, Fatal)
    assert isinstance(fatal.error, KafkaError)
    assert fatal.error.code == error_codes.INCONSISTENT_GROUP_PROTOCOL


# ---------------------------------------------------------------------- leader


def _lead(s: Script, *others: tuple[str, Sequence[str]]) -> list[Effect]:
    return s.lead(s.leader_members(*others))


def test_leader_assigns_every_member_and_sends_it_in_sync_group() -> None:
    s = Script()
    s.subscribe()
    effects = _lead(s, ("m2", ("t",)))
    assert kinds(effects) == ["SyncGroup"]
    request = s.request(SyncGroupRequest).request
    assert isinstance(request, SyncGroupRequest)
    got = {
        a.member_id: consumer_protocol.decode_assignment(a.assignment).partitions
        for a in request.assignments
    }
    assert got == {"m1": tuple(sorted(tps("t-0", "t-2"))), "m2": tuple(sorted(tps("t-1", "t-3")))}
    assert s.member.is_leader


def test_leader_with_malformed_member_metadata_reports_and_rejoins() -> None:
    s = Script(cooperative=True)
    s.to_stable()
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    members = [*s.leader_members(), JoinGroupResponseMember(member_id="bad-9", metadata=b"\x00")]
    effects = s.answer(
        JoinGroupRequest, s.join_response(leader="m1", generation_id=2, members=members)
    )
    reports = [e for e in effects if isinstance(e, ReportError)]
    assert len(reports) == 1
    assert isinstance(reports[0].error, ProtocolError)
    assert reports[0].error.member_id == "bad-9"
    assert s.sent(SyncGroupRequest) == []
    assert s.state() is S.JOINING
    assert s.member.owned_partitions == tps("t-0", "t-1")  # nothing changed hands
    assert kinds(s.feed(Tick(), at=s.now + 0.1)) == ["JoinGroup"]


def test_assignor_exception_becomes_an_assignor_error_naming_it() -> None:
    s = Script([RaisingAssignor("explosive")])
    s.subscribe()
    effects = _lead(s, ("m2", ("t",)))
    (report,) = [e for e in effects if isinstance(e, ReportError)]
    assert isinstance(report.error, AssignorError)
    assert "explosive" in str(report.error)
    assert isinstance(report.error.__cause__, RuntimeError)
    assert s.sent(SyncGroupRequest) == []
    assert s.state() is S.JOINING


def test_cooperative_leader_refuses_an_assignment_that_moves_a_partition_directly() -> None:
    s = Script([GreedyCooperativeAssignor()])
    s.subscribe()
    m2 = JoinGroupResponseMember(
        member_id="m2",
        metadata=consumer_protocol.encode_subscription(
            Subscription(
                topics=("t",), owned_partitions=tuple(sorted(tps("t-0", "t-1", "t-2", "t-3")))
            )
        ),
    )
    effects = s.lead([*s.leader_members(), m2])
    (report,) = [e for e in effects if isinstance(e, ReportError)]
    assert isinstance(report.error, InvalidAssignmentError)
    assert s.sent(SyncGroupRequest) == []


def test_leader_waits_for_metadata_covering_the_group_subscription() -> None:
    s = in_state(S.LEADER_AWAITING_METADATA)
    needed = [e for e in s.history if isinstance(e, MetadataNeeded)]
    assert needed[-1].topics == frozenset({"t", "other"})
    assert s.sent(SyncGroupRequest) == []
    s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 4, "other": 2})))
    s.feed(Tick(), at=s.now + LEADER_SYNC_DELAY_S)
    request = s.request(SyncGroupRequest).request
    assert isinstance(request, SyncGroupRequest)
    got = {
        a.member_id: consumer_protocol.decode_assignment(a.assignment).partitions
        for a in request.assignments
    }
    assert TopicPartition("other", 0) in got["m2"]
    assert s.member.metadata_topics == {"t", "other"}


def test_static_leader_with_skip_assignment_syncs_without_assigning() -> None:
    s = Script(group_instance_id="i1")
    s.subscribe()
    response = s.join_response(leader="m1", members=())
    effects = s.answer(JoinGroupRequest, attrs.evolve(response, skip_assignment=True))
    assert kinds(effects) == ["SyncGroup"]
    request = s.request(SyncGroupRequest).request
    assert isinstance(request, SyncGroupRequest)
    assert request.assignments == ()
    assert request.group_instance_id == "i1"


def test_static_leader_notices_partitions_added_while_its_join_was_retried() -> None:
    """A restarted static leader (a fresh process) whose first JoinGroup is answered
    COORDINATOR_LOAD_IN_PROGRESS learns of a new partition during the backoff; its retry
    is answered skip_assignment. The group's assignment predates the new partition, so
    the leader must rejoin (found by the static cooperative-sticky property test; Java's
    snapshot of the current metadata would miss it)."""
    s = Script(group_instance_id="i1")
    s.subscribe(metadata={"t": 4})
    s.answer(JoinGroupRequest, s.join_response(error_code=error_codes.COORDINATOR_LOAD_IN_PROGRESS))
    s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 5})))
    assert kinds(s.feed(Tick(), at=0.1)) == ["JoinGroup"]
    response = s.join_response(leader="m1", members=s.leader_members())
    assert kinds(s.answer(JoinGroupRequest, attrs.evolve(response, skip_assignment=True))) == [
        "SyncGroup"
    ]
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1", "t-2", "t-3")))
    s.finish_listeners()
    assert s.state() is not S.STABLE
    assert "partition metadata of topics [t] changed" in s.member.rejoin_reason


def test_static_leader_with_skip_assignment_watches_the_group_subscription() -> None:
    """KIP-814: the broker sends the skipped leader the members' metadata; the leader
    watches every topic of the group (Java's updateGroupSubscription) and rejoins when
    another member's topic changes."""
    s = Script(group_instance_id="i1")
    s.subscribe(metadata={"t": 4, "other": 2})
    response = s.join_response(leader="m1", members=s.leader_members(("m2", ("other",))))
    s.answer(JoinGroupRequest, attrs.evolve(response, skip_assignment=True))
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1", "t-2", "t-3")))
    s.finish_listeners()
    assert s.state() is S.STABLE
    assert s.member.metadata_topics == {"t", "other"}
    s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 4, "other": 3})))
    assert s.state() is not S.STABLE
    assert "partition metadata of topics [other] changed" in s.member.rejoin_reason


def test_static_leader_takes_a_peer_topic_first_fetched_after_skip_as_its_baseline() -> None:
    """A topic only another member subscribes to is fetched after the skipped join (the
    leader starts watching it then); its first counts are the baseline, not a change,
    else every static leader restart would rebalance. Later changes are noticed."""
    s = Script(group_instance_id="i1")
    s.subscribe(metadata={"t": 4})
    response = s.join_response(leader="m1", members=s.leader_members(("m2", ("other",))))
    s.answer(JoinGroupRequest, attrs.evolve(response, skip_assignment=True))
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1", "t-2", "t-3")))
    s.finish_listeners()
    assert s.member.metadata_topics == {"t", "other"}
    s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 4, "other": 2})))
    assert s.state() is S.STABLE
    s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 4, "other": 3})))
    assert s.state() is not S.STABLE
    assert "partition metadata of topics [other] changed" in s.member.rejoin_reason


def test_static_leader_with_skip_assignment_and_unchanged_metadata_stays_stable() -> None:
    s = Script(group_instance_id="i1")
    s.subscribe(metadata={"t": 4})
    s.answer(JoinGroupRequest, s.join_response(error_code=error_codes.COORDINATOR_LOAD_IN_PROGRESS))
    s.feed(Tick(), at=0.1)
    response = s.join_response(leader="m1", members=s.leader_members())
    s.answer(JoinGroupRequest, attrs.evolve(response, skip_assignment=True))
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1", "t-2", "t-3")))
    s.finish_listeners()
    assert s.state() is S.STABLE
    s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 4})))
    assert s.state() is S.STABLE


def test_static_leader_compares_only_against_the_current_subscriptions_join() -> None:
    """The counts of a join abandoned by unsubscribing are not carried into the next
    subscription's join (that would force a needless rebalance after skip_assignment)."""
    s = Script(group_instance_id="i1")
    s.subscribe(metadata={"t": 4})
    assert len(s.sent(JoinGroupRequest)) == 1
    s.feed(LeaveRequested())
    s.finish_listeners()
    assert s.state() is S.UNJOINED
    s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 5})))
    s.sends.clear()
    s.feed(Subscribe(topics=frozenset({"t"})))
    response = s.join_response(leader="m1", members=s.leader_members())
    s.answer(JoinGroupRequest, attrs.evolve(response, skip_assignment=True))
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1", "t-2", "t-3", "t-4")))
    s.finish_listeners()
    assert s.state() is S.STABLE


def test_leader_rejoins_when_the_metadata_it_assigned_from_changes() -> None:
    s = Script()
    s.subscribe()
    _lead(s, ("m2", ("t",)))
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-2")))
    s.finish_listeners()
    assert s.state() is S.STABLE
    effects = s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 6})))
    assert s.state() is S.PREPARING_JOIN
    assert "partition metadata of topics [t] changed" in s.member.rejoin_reason
    assert kinds(effects)[-1] == "REVOKED['t-0', 't-2']"


def test_follower_ignores_partition_count_changes() -> None:
    s = in_state(S.STABLE)
    s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 6})))
    assert s.state() is S.STABLE


def test_assignment_outside_the_subscription_is_not_applied() -> None:
    s = in_state(S.AWAITING_SYNC)
    effects = s.answer(SyncGroupRequest, s.sync_response({TopicPartition("x", 0)}))
    assert s.member.owned_partitions == frozenset()
    assert "outside the current subscription" in s.member.rejoin_reason
    assert kinds(effects) == ["JoinGroup"]


def test_malformed_assignment_is_reported_and_the_member_rejoins() -> None:
    s = in_state(S.AWAITING_SYNC)
    effects = s.answer(SyncGroupRequest, SyncGroupResponse(assignment=b"\x00\x01garbage"))
    (report,) = [e for e in effects if isinstance(e, ReportError)]
    assert isinstance(report.error, ProtocolError)
    assert s.state() is S.JOINING


# ---------------------------------------------------------------------- subscriptions


def test_cooperative_subscription_change_revokes_only_unsubscribed_topics() -> None:
    s = Script(cooperative=True)
    s.subscribe(topics=("t", "u"), metadata={"t": 2, "u": 2})
    s.answer(JoinGroupRequest, s.join_response())
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "u-1")))
    s.finish_listeners()
    effects = s.feed(Subscribe(topics=frozenset({"t"})))
    # No new topic: the metadata of the last answer covers it (no request at once).
    assert kinds(effects) == ["REVOKED['u-1']"]
    assert "removed [u]" in s.member.rejoin_reason
    effects = s.finish_listener()
    assert kinds(effects) == ["Unassign['u-1']", "JoinGroup"]
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert sub.topics == ("t",)
    assert sub.owned_partitions == (TopicPartition("t", 0),)


def test_pattern_subscription_follows_metadata() -> None:
    s = Script(cooperative=True)
    effects = s.feed(Subscribe(pattern=re.compile(r"ev-.*")))
    assert [e.topics for e in effects if isinstance(e, MetadataNeeded)] == [None]
    md = {"ev-a": 1, "other": 1, "__internal": 1, "ev-": 1}
    s.feed(
        MetadataUpdate(
            metadata=ClusterMetadata.from_partition_counts(md), internal_topics={"__internal"}
        )
    )
    assert s.member.subscribed_topics == {"ev-a", "ev-"}
    s.feed(CoordinatorFound(node_id=1))
    s.answer(JoinGroupRequest, s.join_response())
    s.answer(SyncGroupRequest, s.sync_response({TopicPartition("ev-a", 0)}))
    s.finish_listeners()
    assert s.state() is S.STABLE
    s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({**md, "ev-b": 2})))
    assert s.state() is S.JOINING  # cooperative: nothing to revoke, straight to JoinGroup
    assert "added [ev-b]" in s.member.rejoin_reason


def test_subscribe_rejects_topics_and_pattern_together() -> None:
    with pytest.raises(ConfigurationError):
        Subscribe(topics=frozenset({"a"}), pattern=re.compile("a"))
    with pytest.raises(ConfigurationError):
        Subscribe(topics=frozenset())
    with pytest.raises(ConfigurationError):
        Subscribe(topics="abc")


# ---------------------------------------------------------------------- heartbeats and timers


def test_heartbeats_every_interval_while_stable() -> None:
    s = in_state(S.STABLE)
    assert s.member.next_deadline == pytest.approx(HEARTBEAT_S)
    assert kinds(s.feed(Tick(), at=HEARTBEAT_S - 0.01)) == []
    effects = s.feed(Tick(), at=HEARTBEAT_S)
    assert kinds(effects) == ["Heartbeat"]
    assert Observation.HEARTBEAT_SENT in observed(effects)
    request = s.request(HeartbeatRequest).request
    assert isinstance(request, HeartbeatRequest)
    assert (request.generation_id, request.member_id) == (1, "m1")
    # No second heartbeat while one is in flight.
    assert kinds(s.feed(Tick(), at=2 * HEARTBEAT_S)) == []
    effects = s.answer(HeartbeatRequest, HeartbeatResponse())
    assert observed(effects) == [Observation.HEARTBEAT_COMPLETED]


def test_session_timeout_loses_partitions_and_rediscovers_the_coordinator() -> None:
    s = in_state(S.STABLE)
    s.feed(Tick(), at=HEARTBEAT_S)  # heartbeat sent, never answered
    s.feed(PollCalled(), at=SESSION_S - 1)
    effects = s.feed(Tick(), at=SESSION_S)
    assert kinds(effects) == ["FindCoordinator", "Unassign['t-0', 't-1']", "LOST['t-0', 't-1']"]
    assert (s.member.generation_id, s.member.member_id) == (-1, "")
    assert "session timed out" in s.member.rejoin_reason


def _cooperative_rejoin_under_way() -> Script:
    """A COOPERATIVE member owning t-0 and t-1 whose rejoin is under way: its heartbeat
    answered REBALANCE_IN_PROGRESS at ``now`` (the last sign of a live session), and
    its JoinGroup is in flight with the partitions still owned (KIP-429)."""
    s = Script(cooperative=True)
    s.to_stable()
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    assert s.state() is S.JOINING
    s.request(JoinGroupRequest)
    assert s.member.owned_partitions == tps("t-0", "t-1")
    return s


def test_session_timeout_while_rejoining_without_the_coordinator_loses_partitions() -> None:
    """Issue 4: the coordinator went away while the rejoin was under way. The broker
    expires the session and hands the partitions to others, so the member must drop
    them at its own session deadline, not at its next JoinGroup answer."""
    s = _cooperative_rejoin_under_way()
    ok_at = s.now
    effects = s.fail(JoinGroupRequest, BrokerConnectionError("refused", broker="b:1"))
    assert kinds(effects) == ["FindCoordinator"]
    assert s.state() is S.JOINING
    assert s.member.next_deadline == pytest.approx(ok_at + SESSION_S)
    s.feed(CoordinatorUnavailable(), at=ok_at + 1)
    # The lookup is retried; until the session deadline the partitions stay owned.
    assert kinds(s.feed(Tick(), at=ok_at + SESSION_S - 0.01)) == ["FindCoordinator"]
    assert s.member.owned_partitions == tps("t-0", "t-1")
    assert s.member.next_deadline == pytest.approx(ok_at + SESSION_S)
    effects = s.feed(Tick(), at=ok_at + SESSION_S)
    assert kinds(effects) == ["Unassign['t-0', 't-1']", "LOST['t-0', 't-1']"]
    assert s.state() is S.PREPARING_JOIN
    assert (s.member.generation_id, s.member.member_id) == (-1, "")
    assert s.member.owned_partitions == frozenset()
    assert "session timed out" in s.member.rejoin_reason
    assert (
        s.member.next_deadline == METADATA_REFRESH_AT
    )  # nothing left to time: the lookup is pending
    s.finish_listener()
    assert s.state() is S.JOINING
    assert s.sent(JoinGroupRequest) == []  # still waiting for the coordinator
    s.feed(CoordinatorFound(node_id=1), at=ok_at + SESSION_S + 2)
    join = s.request(JoinGroupRequest)
    assert isinstance(join.request, JoinGroupRequest)
    assert join.request.member_id == ""  # the expired member id is not reused
    [(_, subscription)] = subscriptions_in(join)
    assert subscription.owned_partitions == ()
    assert subscription.generation_id == -1


def test_session_timeout_in_a_join_retry_backoff_loses_partitions() -> None:
    """A JoinGroup answered with a retriable error waits out the backoff with nothing
    held by the coordinator: the session deadline applies there too."""
    s = _cooperative_rejoin_under_way()
    ok_at = s.now
    s.feed(Tick(), at=ok_at + SESSION_S - 0.05)
    s.answer(JoinGroupRequest, s.join_response(error_code=error_codes.COORDINATOR_LOAD_IN_PROGRESS))
    assert s.sent(JoinGroupRequest) == []
    assert s.member.next_deadline == pytest.approx(ok_at + SESSION_S)
    effects = s.feed(Tick(), at=ok_at + SESSION_S)
    assert "LOST['t-0', 't-1']" in kinds(effects)
    assert (s.member.generation_id, s.member.member_id) == (-1, "")


def test_join_sent_before_the_coordinator_answers_again_does_not_hold_the_session() -> None:
    """After a connection failure the coordinator is looked up and found again, but a
    JoinGroup sent then may wait in the driver for a connection (seen on librdkafka's
    mock with the broker down): until the coordinator answers something, an in-flight
    JoinGroup does not count as held, and the session deadline applies."""
    s = _cooperative_rejoin_under_way()
    ok_at = s.now
    s.fail(JoinGroupRequest, BrokerConnectionError("refused", broker="b:1"))
    s.feed(CoordinatorFound(node_id=1), at=ok_at + 1)
    s.request(JoinGroupRequest)  # resent, no answer yet
    assert s.member.next_deadline == pytest.approx(ok_at + SESSION_S)
    effects = s.feed(Tick(), at=ok_at + SESSION_S)
    assert kinds(effects) == ["FindCoordinator", "Unassign['t-0', 't-1']", "LOST['t-0', 't-1']"]
    assert (s.member.generation_id, s.member.member_id) == (-1, "")
    s.feed(CoordinatorFound(node_id=1))
    # The cancelled JoinGroup's late answer is dropped; the fresh join starts from "".
    s.answer(JoinGroupRequest, s.join_response(error_code=error_codes.UNKNOWN_MEMBER_ID))
    s.finish_listener()
    join = s.request(JoinGroupRequest)
    assert isinstance(join.request, JoinGroupRequest)
    assert join.request.member_id == ""


def test_an_answer_from_the_coordinator_proves_the_connection_again() -> None:
    """Once the re-found coordinator answers anything (here MEMBER_ID_REQUIRED), the
    next JoinGroup on that connection is held there and keeps the session."""
    s = _cooperative_rejoin_under_way()
    ok_at = s.now
    s.fail(JoinGroupRequest, BrokerConnectionError("refused", broker="b:1"))
    s.feed(CoordinatorFound(node_id=1), at=ok_at + 1)
    s.answer(
        JoinGroupRequest, s.join_response(error_code=error_codes.MEMBER_ID_REQUIRED, member_id="m1")
    )
    s.request(JoinGroupRequest)  # sent at once on the connection that just answered
    assert s.member.next_deadline == METADATA_REFRESH_AT
    assert kinds(s.feed(Tick(), at=ok_at + 2 * SESSION_S)) == []
    assert s.member.owned_partitions == tps("t-0", "t-1")
    assert s.member.generation_id == 1


def test_no_session_timeout_while_the_coordinator_holds_join_or_sync() -> None:
    """A JoinGroup or SyncGroup in flight is held by the coordinator, which keeps the
    session alive meanwhile (up to the rebalance timeout): nothing is lost however long
    the rebalance takes."""
    s = _cooperative_rejoin_under_way()
    ok_at = s.now
    assert s.member.next_deadline == METADATA_REFRESH_AT
    assert kinds(s.feed(Tick(), at=ok_at + 5 * SESSION_S)) == []
    assert s.state() is S.JOINING
    assert s.member.owned_partitions == tps("t-0", "t-1")
    assert (s.member.generation_id, s.member.member_id) == (1, "m1")
    s.answer(JoinGroupRequest, s.join_response(generation_id=2))
    assert s.state() is S.AWAITING_SYNC
    assert s.member.next_deadline == METADATA_REFRESH_AT
    # Only the metadata refresh falls due (300 s), however long the sync is held.
    assert kinds(s.feed(Tick(), at=ok_at + 10 * SESSION_S)) == ["MetadataNeeded"]
    assert s.state() is S.AWAITING_SYNC
    assert s.member.owned_partitions == tps("t-0", "t-1")
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1")))
    s.finish_listeners()
    assert s.state() is S.STABLE
    assert s.member.owned_partitions == tps("t-0", "t-1")
    assert s.member.generation_id == 2


def test_max_poll_interval_expiry_leaves_and_rejoins_on_the_next_poll() -> None:
    s = in_state(S.STABLE)
    s.feed(Tick(), at=HEARTBEAT_S)
    s.answer(HeartbeatRequest, HeartbeatResponse())
    effects = s.feed(Tick(), at=MAX_POLL_S)
    assert kinds(effects) == ["Unassign['t-0', 't-1']", "LOST['t-0', 't-1']", "LeaveGroup"]
    leave = s.request(LeaveGroupRequest).request
    assert isinstance(leave, LeaveGroupRequest)
    assert leave.member_id == "m1"
    assert leave.members[0].member_id == "m1"
    assert leave.members[0].reason is not None
    assert "poll timeout" in leave.members[0].reason
    assert s.state() is S.POLL_EXPIRED
    assert s.member.next_deadline == METADATA_REFRESH_AT
    s.finish_listener()
    assert s.state() is S.POLL_EXPIRED
    effects = s.feed(PollCalled(), at=MAX_POLL_S + 60)
    assert s.state() is S.JOINING
    request = s.request(JoinGroupRequest).request
    assert isinstance(request, JoinGroupRequest)
    assert request.member_id == ""


def test_static_member_does_not_send_leave_group_on_poll_expiry_or_close() -> None:
    s = Script(group_instance_id="i1")
    s.to_stable()
    effects = s.feed(Tick(), at=MAX_POLL_S)
    assert "LeaveGroup" not in kinds(effects)
    s2 = Script(group_instance_id="i1")
    s2.to_stable()
    s2.feed(CloseRequested())
    effects = s2.finish_listener()
    assert kinds(effects) == ["Unassign['t-0', 't-1']"]
    assert s2.state() is S.CLOSED


def test_static_member_identifies_itself_on_every_request() -> None:
    s = Script(group_instance_id="i1")
    s.to_stable()
    join = [
        e.request
        for e in s.history
        if isinstance(e, Send) and isinstance(e.request, JoinGroupRequest)
    ]
    sync = [
        e.request
        for e in s.history
        if isinstance(e, Send) and isinstance(e.request, SyncGroupRequest)
    ]
    assert all(isinstance(r, JoinGroupRequest) and r.group_instance_id == "i1" for r in join)
    assert all(isinstance(r, SyncGroupRequest) and r.group_instance_id == "i1" for r in sync)
    s.feed(Tick(), at=HEARTBEAT_S)
    hb = s.request(HeartbeatRequest).request
    assert isinstance(hb, HeartbeatRequest)
    assert hb.group_instance_id == "i1"
    commit(s)
    oc = s.request(OffsetCommitRequest).request
    assert isinstance(oc, OffsetCommitRequest)
    assert oc.group_instance_id == "i1"


def test_fenced_instance_is_fatal_and_drops_partitions() -> None:
    s = Script(group_instance_id="i1")
    s.to_stable()
    effects = s.heartbeat(error_codes.FENCED_INSTANCE_ID)
    assert kinds(effects) == ["Unassign['t-0', 't-1']", "LOST['t-0', 't-1']", "Fatal"]
    assert s.state() is S.FATAL
    s.feed(CloseRequested())
    assert s.state() is S.CLOSED


def test_not_coordinator_on_heartbeat_rediscovers_with_backoff() -> None:
    s = in_state(S.STABLE)
    effects = s.heartbeat(error_codes.NOT_COORDINATOR)
    assert kinds(effects) == ["FindCoordinator"]
    assert s.state() is S.STABLE
    s.feed(CoordinatorUnavailable())
    deadline = s.member.next_deadline
    assert deadline == pytest.approx(s.now + 0.1)
    assert kinds(s.feed(Tick(), at=s.now + 0.1)) == ["FindCoordinator"]
    effects = s.feed(CoordinatorFound(node_id=5))
    assert kinds(effects) == ["Heartbeat"]
    assert s.request(HeartbeatRequest).node_id == 5


def test_stale_answers_are_dropped() -> None:
    s = Script(cooperative=True)
    s.to_stable()
    s.feed(Tick(), at=HEARTBEAT_S)
    old = s.request(HeartbeatRequest)
    # A commit fails the generation while the heartbeat is in flight.
    commit(s)
    s.answer(OffsetCommitRequest, commit_response(error_codes.ILLEGAL_GENERATION))
    assert s.member.generation_id == -1
    # The heartbeat of the old generation comes back: dropped, no effect on the state;
    # only its round trip is timed (Java's handler records the latency first thing).
    effects = s.feed(
        ResponseReceived(
            request_id=old.request_id,
            response=HeartbeatResponse(error_code=error_codes.UNKNOWN_MEMBER_ID),
        ),
        at=HEARTBEAT_S + 0.25,
    )
    assert [e for e in effects if type(e).__name__ != "Log"] == [
        Observe(event=Observation.HEARTBEAT_COMPLETED, now=HEARTBEAT_S + 0.25, latency_s=0.25)
    ]
    assert s.member.member_id == "m1"
    # An answer to a request id never sent (or already answered) is dropped too.
    assert kinds(s.feed(ResponseReceived(request_id=10_000, response=HeartbeatResponse()))) == []


# ---------------------------------------------------------------------- commits


def test_commit_in_stable_uses_generation_and_member_id() -> None:
    s = in_state(S.STABLE)
    commit(s, "tok")
    send = s.request(OffsetCommitRequest)
    request = send.request
    assert isinstance(request, OffsetCommitRequest)
    assert (request.group_id, request.generation_id, request.member_id) == ("g", 1, "m1")
    assert request.topics[0].name == "t"
    assert request.topics[0].partitions[0].committed_offset == 7
    effects = s.answer(OffsetCommitRequest, commit_response(error_codes.NONE))
    assert done(effects) == CommitDone(token="tok", error=None)
    assert Observation.COMMIT_COMPLETED in observed(effects)


def test_empty_commit_succeeds_without_a_request() -> None:
    s = in_state(S.STABLE)
    effects = s.feed(CommitRequested(offsets={}, token="e"))
    assert done(effects) == CommitDone(token="e")
    assert s.sent(OffsetCommitRequest) == []


@pytest.mark.parametrize("state", [S.JOINING, S.AWAITING_SYNC, S.LEADER_AWAITING_METADATA])
def test_commit_while_joining_is_rebalance_in_progress(state: MemberState) -> None:
    s = in_state(state)
    error = done(commit(s)).error
    assert isinstance(error, RebalanceInProgressError)
    assert error.retriable


@pytest.mark.parametrize("state", [S.UNJOINED, S.POLL_EXPIRED, S.CLOSED])
def test_commit_outside_a_group_is_commit_failed(state: MemberState) -> None:
    assert isinstance(done(commit(in_state(state))).error, CommitFailedError)


def test_commit_answered_unknown_member_fails_and_resets() -> None:
    s = in_state(S.STABLE)
    commit(s)
    effects = s.answer(OffsetCommitRequest, commit_response(error_codes.UNKNOWN_MEMBER_ID))
    assert isinstance(done(effects).error, CommitFailedError)
    assert kinds(effects)[1:] == ["Unassign['t-0', 't-1']", "LOST['t-0', 't-1']"]
    assert s.state() is S.PREPARING_JOIN


def test_commit_answered_rebalance_in_progress_rejoins() -> None:
    s = Script(cooperative=True)
    s.to_stable()
    commit(s)
    effects = s.answer(OffsetCommitRequest, commit_response(error_codes.REBALANCE_IN_PROGRESS))
    assert isinstance(done(effects).error, RebalanceInProgressError)
    assert s.state() is S.JOINING


def test_commit_to_a_moved_coordinator_fails_retriably_and_rediscovers() -> None:
    s = in_state(S.STABLE)
    commit(s)
    effects = s.answer(OffsetCommitRequest, commit_response(error_codes.NOT_COORDINATOR))
    error = done(effects).error
    assert isinstance(error, KafkaError)
    assert error.retriable
    assert "FindCoordinator" in kinds(effects)
    # While the coordinator is unknown, a commit fails at once, retriably.
    error = done(commit(s, "again")).error
    assert isinstance(error, KafkaError)
    assert error.code == error_codes.COORDINATOR_NOT_AVAILABLE


def test_commit_failure_of_the_request_is_retriable() -> None:
    s = in_state(S.STABLE)
    commit(s)
    effects = s.fail(OffsetCommitRequest, RequestTimeoutError("slow"))
    error = done(effects).error
    assert isinstance(error, RequestTimeoutError)
    assert error.retriable


def test_commit_during_the_revoke_listener_uses_the_old_generation() -> None:
    s = in_state(S.PREPARING_JOIN)
    commit(s)
    request = s.request(OffsetCommitRequest).request
    assert isinstance(request, OffsetCommitRequest)
    assert request.generation_id == 1


def test_group_authorization_failure_on_commit_is_fatal() -> None:
    s = in_state(S.STABLE)
    commit(s)
    effects = s.answer(OffsetCommitRequest, commit_response(error_codes.GROUP_AUTHORIZATION_FAILED))
    assert isinstance(done(effects).error, KafkaError)
    assert s.state() is S.FATAL


def test_offset_metadata_too_large_only_fails_the_commit() -> None:
    s = in_state(S.STABLE)
    commit(s)
    effects = s.answer(OffsetCommitRequest, commit_response(error_codes.OFFSET_METADATA_TOO_LARGE))
    error = done(effects).error
    assert isinstance(error, KafkaError)
    assert not error.retriable
    assert s.state() is S.STABLE


# ---------------------------------------------------------------------- leaving


def test_close_revokes_then_leaves_with_a_reason() -> None:
    s = in_state(S.STABLE)
    effects = s.feed(CloseRequested())
    assert kinds(effects) == ["REVOKED['t-0', 't-1']"]
    # The listener may still commit (commit-on-close).
    commit(s)
    assert s.sent(OffsetCommitRequest)
    effects = s.finish_listener()
    assert kinds(effects) == ["Unassign['t-0', 't-1']", "LeaveGroup"]
    leave = s.request(LeaveGroupRequest).request
    assert isinstance(leave, LeaveGroupRequest)
    assert leave.members[0].reason == "the consumer is being closed"
    effects = s.answer(LeaveGroupRequest, LeaveGroupResponse())
    assert s.state() is S.CLOSED
    # The commit still in flight is answered when the member closes.
    assert isinstance(done(effects).error, CommitFailedError)


def test_close_mid_rebalance_reports_lost() -> None:
    s = Script(cooperative=True)
    s.to_stable()
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    assert s.state() is S.JOINING
    effects = s.feed(CloseRequested(leave_group=True))
    assert kinds(effects) == ["Unassign['t-0', 't-1']", "LOST['t-0', 't-1']"]
    effects = s.finish_listener()
    assert kinds(effects) == ["LeaveGroup"]


def test_unsubscribe_returns_to_unjoined_and_can_subscribe_again() -> None:
    s = in_state(S.STABLE)
    s.feed(LeaveRequested())
    s.finish_listener()
    s.answer(LeaveGroupRequest, LeaveGroupResponse(error_code=error_codes.UNKNOWN_MEMBER_ID))
    assert s.state() is S.UNJOINED
    assert s.member.member_id == ""
    s.feed(Subscribe(topics=frozenset({"t"})))
    assert s.state() is S.JOINING


# ---------------------------------------------------------------------- pure helpers


def test_diff_assignment() -> None:
    d = diff_assignment(tps("t-0", "t-1"), tps("t-1", "t-2"))
    assert (d.added, d.revoked, d.kept) == (tps("t-2"), tps("t-0"), tps("t-1"))


def test_revoke_before_join_by_protocol() -> None:
    owned = tps("t-0", "u-0")
    assert revoke_before_join(RebalanceProtocol.EAGER, owned, {"t", "u"}) == owned
    assert revoke_before_join(RebalanceProtocol.COOPERATIVE, owned, {"t", "u"}) == frozenset()
    assert revoke_before_join(RebalanceProtocol.COOPERATIVE, owned, {"t"}) == tps("u-0")


@pytest.mark.parametrize(
    ("api", "code", "action"),
    [
        (Api.JOIN_GROUP, error_codes.MEMBER_ID_REQUIRED, ErrorAction.MEMBER_ID_REQUIRED),
        (Api.JOIN_GROUP, error_codes.UNKNOWN_MEMBER_ID, ErrorAction.RESET_AND_REJOIN),
        (Api.HEARTBEAT, error_codes.ILLEGAL_GENERATION, ErrorAction.RESET_AND_REJOIN),
        (Api.HEARTBEAT, error_codes.REBALANCE_IN_PROGRESS, ErrorAction.REJOIN),
        (Api.HEARTBEAT, error_codes.NOT_COORDINATOR, ErrorAction.FIND_COORDINATOR),
        (Api.SYNC_GROUP, error_codes.COORDINATOR_LOAD_IN_PROGRESS, ErrorAction.REJOIN),
        (Api.JOIN_GROUP, error_codes.COORDINATOR_LOAD_IN_PROGRESS, ErrorAction.RETRY),
        (Api.HEARTBEAT, error_codes.FENCED_INSTANCE_ID, ErrorAction.FATAL),
        (Api.LEAVE_GROUP, error_codes.FENCED_INSTANCE_ID, ErrorAction.IGNORE),
        (Api.LEAVE_GROUP, 9999, ErrorAction.IGNORE),
        (Api.OFFSET_COMMIT, error_codes.OFFSET_METADATA_TOO_LARGE, ErrorAction.FAIL_REQUEST),
        (Api.OFFSET_COMMIT, error_codes.UNKNOWN_TOPIC_OR_PARTITION, ErrorAction.RETRY),
        (Api.OFFSET_COMMIT, 9999, ErrorAction.FAIL_REQUEST),
        (Api.JOIN_GROUP, error_codes.NOT_ENOUGH_REPLICAS, ErrorAction.RETRY),  # retriable, unlisted
        (Api.JOIN_GROUP, 9999, ErrorAction.REPORT_AND_REJOIN),  # unknown: not retriable
        (Api.SYNC_GROUP, error_codes.INVALID_REQUEST, ErrorAction.REPORT_AND_REJOIN),
        (Api.HEARTBEAT, error_codes.INVALID_REQUEST, ErrorAction.RETRY),
    ],
)
def test_error_action_table(api: Api, code: int, action: ErrorAction) -> None:
    assert action_for(api, code) is action


def test_a_stale_commit_failure_does_not_reset_the_new_generation() -> None:
    s = Script(cooperative=True)
    s.to_stable()
    commit(s)
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    s.answer(JoinGroupRequest, s.join_response(generation_id=2))
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1")))
    s.finish_listeners()
    effects = s.answer(OffsetCommitRequest, commit_response(error_codes.ILLEGAL_GENERATION))
    assert isinstance(done(effects).error, CommitFailedError)
    assert (s.state(), s.member.generation_id) == (S.STABLE, 2)


def test_join_backoff_does_not_arm_a_timer_while_the_coordinator_is_unknown() -> None:
    s = in_state(S.JOINING)
    s.answer(JoinGroupRequest, s.join_response(error_code=error_codes.COORDINATOR_LOAD_IN_PROGRESS))
    s.feed(CoordinatorUnavailable())  # the coordinator is lost during the backoff
    assert kinds(s.feed(Tick(), at=0.2)) == ["FindCoordinator"]
    # Both the join backoff and the lookup backoff are over; the lookup is in flight:
    # nothing is due until CoordinatorFound (a past deadline would make a driver spin).
    assert s.member.next_deadline == METADATA_REFRESH_AT
    assert kinds(s.feed(CoordinatorFound(node_id=1), at=0.3)) == ["JoinGroup"]


def test_unexpected_sync_error_is_reported_and_the_member_rejoins_after_a_backoff() -> None:
    """Java: "Unexpected error from SyncGroup" is thrown from poll() and the member
    rejoins; librdkafka's mock cluster answers a late follower SyncGroup this way."""
    s = Script(cooperative=True)
    s.to_stable()
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    s.answer(JoinGroupRequest, s.join_response(generation_id=2))
    effects = s.answer(SyncGroupRequest, SyncGroupResponse(error_code=error_codes.INVALID_REQUEST))
    (report,) = [e for e in effects if isinstance(e, ReportError)]
    assert isinstance(report.error, KafkaError)
    assert report.error.code == error_codes.INVALID_REQUEST
    assert s.state() is S.JOINING
    assert s.sent(JoinGroupRequest) == []
    assert s.member.owned_partitions == tps("t-0", "t-1")
    assert kinds(s.feed(Tick(), at=s.now + 0.1)) == ["JoinGroup"]


def test_unexpected_join_error_is_reported_and_retried_after_a_backoff() -> None:
    s = in_state(S.JOINING)
    effects = s.answer(JoinGroupRequest, s.join_response(error_code=error_codes.INVALID_REQUEST))
    assert kinds(effects) == ["ReportError"]
    assert s.state() is S.JOINING
    assert kinds(s.feed(Tick(), at=0.1)) == ["JoinGroup"]


def test_unexpected_heartbeat_error_waits_for_the_next_heartbeat() -> None:
    s = in_state(S.STABLE)
    effects = s.heartbeat(error_codes.INVALID_REQUEST)
    assert kinds(effects) == []
    assert s.state() is S.STABLE


def test_coordinator_lookup_refused_for_authorization_is_fatal() -> None:
    s = Script()
    s.feed(Subscribe(topics=frozenset({"t"})))
    effects = s.feed(
        CoordinatorUnavailable(
            error=error_codes.to_exception(error_codes.GROUP_AUTHORIZATION_FAILED, api_key=10)
        )
    )
    assert s.state() is S.FATAL
    assert any(isinstance(e, Fatal) for e in effects)


def test_coordinator_lookup_retriable_failure_backs_off_and_retries() -> None:
    s = Script()
    s.feed(Subscribe(topics=frozenset({"t"})))
    s.feed(
        CoordinatorUnavailable(
            error=error_codes.to_exception(error_codes.COORDINATOR_NOT_AVAILABLE, api_key=10)
        )
    )
    assert s.state() is not S.FATAL
    effects = s.feed(Tick(), at=s.now + 1.0)
    assert any(isinstance(e, FindCoordinator) for e in effects)


# ---------------------------------------------------------------------- round-trip metrics


def _latencies(effects: Sequence[Effect], event: Observation) -> list[float | None]:
    return [e.latency_s for e in effects if isinstance(e, Observe) and e.event is event]


@pytest.mark.parametrize(
    "code",
    [
        error_codes.NONE,
        error_codes.REBALANCE_IN_PROGRESS,
        error_codes.UNKNOWN_MEMBER_ID,
        error_codes.ILLEGAL_GENERATION,
        error_codes.NOT_COORDINATOR,
        error_codes.GROUP_AUTHORIZATION_FAILED,
    ],
)
def test_every_heartbeat_response_is_timed_whatever_its_error(code: int) -> None:
    # Java's HeartbeatResponseHandler records heartbeat-latency before reading the error.
    s = in_state(S.STABLE)
    s.feed(Tick(), at=HEARTBEAT_S)
    s.now = HEARTBEAT_S + 0.04
    effects = s.answer(HeartbeatRequest, HeartbeatResponse(error_code=code))
    assert _latencies(effects, Observation.HEARTBEAT_COMPLETED) == [pytest.approx(0.04)]


def test_a_heartbeat_that_gets_no_response_is_not_timed() -> None:
    s = in_state(S.STABLE)
    s.feed(Tick(), at=HEARTBEAT_S)
    s.now = HEARTBEAT_S + 5.0
    effects = s.fail(HeartbeatRequest, RequestTimeoutError("no answer", api_key=12))
    assert Observation.HEARTBEAT_COMPLETED not in observed(effects)


def test_a_cancelled_heartbeat_is_still_timed_once_when_answered() -> None:
    s = in_state(S.STABLE, cooperative=True)
    s.feed(Tick(), at=HEARTBEAT_S)
    heartbeat = s.request(HeartbeatRequest)
    # Sending JoinGroup cancels the heartbeat in flight (COOPERATIVE: nothing to revoke
    # when a topic is added, so the member goes straight to JoinGroup).
    s.feed(Subscribe(topics=frozenset({"t", "u"})), at=HEARTBEAT_S + 0.01)
    assert s.state() is S.JOINING
    answer = ResponseReceived(request_id=heartbeat.request_id, response=HeartbeatResponse())
    effects = s.feed(answer, at=HEARTBEAT_S + 0.03)
    assert _latencies(effects, Observation.HEARTBEAT_COMPLETED) == [pytest.approx(0.03)]
    assert s.state() is S.JOINING  # timed, otherwise dropped
    # The same answer again (a driver bug or a duplicate): nothing more is recorded.
    assert observed(s.feed(answer)) == []


@pytest.mark.parametrize(
    "code",
    [
        error_codes.NONE,
        error_codes.OFFSET_METADATA_TOO_LARGE,
        error_codes.REBALANCE_IN_PROGRESS,
        error_codes.ILLEGAL_GENERATION,
        error_codes.NOT_COORDINATOR,
        error_codes.UNKNOWN_TOPIC_OR_PARTITION,
    ],
)
def test_every_commit_response_is_timed_whatever_its_error(code: int) -> None:
    # Java's OffsetCommitResponseHandler records commit-latency before the errors.
    s = in_state(S.STABLE)
    commit(s, "tok")
    s.now += 0.02
    effects = s.answer(OffsetCommitRequest, commit_response(code))
    assert _latencies(effects, Observation.COMMIT_COMPLETED) == [pytest.approx(0.02)]
    assert done(effects).token == "tok"


def test_a_commit_that_gets_no_response_is_not_timed() -> None:
    s = in_state(S.STABLE)
    commit(s, "tok")
    effects = s.fail(OffsetCommitRequest, BrokerConnectionError("reset", broker="b:1"))
    assert Observation.COMMIT_COMPLETED not in observed(effects)
    assert done(effects).error is not None


def test_join_and_sync_error_responses_are_not_timed() -> None:
    # Java's JoinGroup/SyncGroup handlers record join/sync latency for error NONE only.
    s = Script()
    s.subscribe()
    effects = s.answer(
        JoinGroupRequest, s.join_response(error_code=error_codes.REBALANCE_IN_PROGRESS)
    )
    assert Observation.JOIN_COMPLETED not in observed(effects)
    s.now += 0.5
    effects = s.answer(JoinGroupRequest, s.join_response())
    assert _latencies(effects, Observation.JOIN_COMPLETED) == [pytest.approx(0.5)]
    effects = s.answer(
        SyncGroupRequest, SyncGroupResponse(error_code=error_codes.REBALANCE_IN_PROGRESS)
    )
    assert Observation.SYNC_COMPLETED not in observed(effects)
    s.answer(JoinGroupRequest, s.join_response())
    s.now += 0.25
    effects = s.answer(SyncGroupRequest, s.sync_response(tps("t-0")))
    assert _latencies(effects, Observation.SYNC_COMPLETED) == [pytest.approx(0.25)]


# ---------------------------------------------------------------------- subscription generation


def _join_metadata(s: Script) -> list[tuple[str, bytes]]:
    request = s.request(JoinGroupRequest).request
    assert isinstance(request, JoinGroupRequest)
    return [(p.name, p.metadata) for p in request.protocols]


@pytest.mark.parametrize("cooperative", [True, False])
def test_rejoin_after_a_failed_sync_repeats_the_join_metadata_byte_for_byte(
    cooperative: bool,
) -> None:
    # Nothing was applied, so the rejoin must not look like a change: a coordinator
    # answers an unchanged member with its current generation (Kafka's member.matches,
    # Tansu too) instead of starting yet another rebalance (librdkafka behaves so).
    s = Script(cooperative=cooperative)
    s.to_stable(generation_id=1)
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    s.finish_listeners()  # EAGER revokes everything first
    first = _join_metadata(s)
    s.answer(JoinGroupRequest, s.join_response(generation_id=2))
    assert s.member.generation_id == 2
    effects = s.answer(
        SyncGroupRequest, SyncGroupResponse(error_code=error_codes.REBALANCE_IN_PROGRESS)
    )
    assert kinds(effects) == ["JoinGroup"]
    assert _join_metadata(s) == first
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert sub.generation_id == 1  # the generation of what is owned


def test_a_new_members_rejoin_after_a_failed_sync_is_unchanged_too() -> None:
    s = Script(cooperative=True)
    s.subscribe()
    first = _join_metadata(s)
    s.answer(JoinGroupRequest, s.join_response(generation_id=5))
    s.fail(SyncGroupRequest, RequestTimeoutError("no answer", api_key=14))
    s.feed(CoordinatorFound(node_id=1))
    assert _join_metadata(s) == first
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert (sub.generation_id, sub.owned_partitions) == (-1, ())


def test_subscription_generation_follows_the_applied_assignment() -> None:
    s = Script(cooperative=True)
    s.to_stable(generation_id=3)
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert sub.generation_id == 3
    s.answer(JoinGroupRequest, s.join_response(generation_id=4))
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0")))  # t-1 revoked: follow-up
    s.finish_listeners()
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert (sub.generation_id, sub.owned_partitions) == (4, (T0,))
    # A reset generation loses what is owned: the claim goes with it.
    s.answer(JoinGroupRequest, s.join_response(error_code=error_codes.UNKNOWN_MEMBER_ID))
    s.finish_listeners()
    ((_, sub),) = subscriptions_in(s.request(JoinGroupRequest))
    assert (sub.generation_id, sub.owned_partitions) == (-1, ())


def test_a_leader_alone_syncs_at_once_from_the_metadata_it_has() -> None:
    """LEADER_SYNC_DELAY_S and the fresh metadata overlapping it let followers sync
    first; a group of one has none, and its leader's metadata covers the group."""
    s = Script()
    s.subscribe()
    effects = s.answer(JoinGroupRequest, s.join_response(leader="m1", members=s.leader_members()))
    assert kinds(effects) == ["SyncGroup"]


def test_a_leader_with_followers_syncs_after_the_delay() -> None:
    s = Script()
    s.subscribe()
    s.answer(
        JoinGroupRequest, s.join_response(leader="m1", members=s.leader_members(("m2", ("t",))))
    )
    assert (
        kinds(s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 4}))))
        == []
    )
    assert s.member.next_deadline == LEADER_SYNC_DELAY_S
    assert kinds(s.feed(Tick(), at=LEADER_SYNC_DELAY_S / 2)) == []
    assert kinds(s.feed(Tick(), at=LEADER_SYNC_DELAY_S)) == ["SyncGroup"]
