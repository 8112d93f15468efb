"""Transcripts: leaving while a JoinGroup/SyncGroup is under way, with auto-commit.

Leaving there at once reports the partitions lost and commits nothing (Java's
``onLeavePrepare``); a member given ``commit_wait_s`` waits for the SyncGroup answer
and leaves from there, committing first, or leaves as Java does at the deadline.
"""

from __future__ import annotations

from _coord_script import MAX_POLL_S, Script, tps
from test_member_transcripts import kinds

from coopconsumer._member import (
    CloseRequested,
    CommitBeforeRevoke,
    CommitRequested,
    LeaveRequested,
    MemberState,
    OffsetAndMetadata,
    Tick,
)
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import (
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    SyncGroupRequest,
)

S = MemberState
OWNED = tps("t-0", "t-1")


def _rejoining() -> Script:
    """A cooperative member with auto-commit that owns t-0, t-1 and has sent the
    JoinGroup of the next generation (its partitions kept, KIP-429)."""
    s = Script(cooperative=True, enable_auto_commit=True)
    s.to_stable(OWNED)
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    assert s.state() is S.JOINING
    assert s.member.owned_partitions == OWNED
    return s


def test_a_close_mid_join_waits_for_the_sync_answer_and_commits_before_leaving() -> None:
    s = _rejoining()
    assert kinds(s.feed(CloseRequested(commit_wait_s=10.0))) == []
    assert s.state() is S.JOINING
    assert s.member.owned_partitions == OWNED
    s.answer(JoinGroupRequest, s.join_response(generation_id=2))
    effects = s.answer(SyncGroupRequest, s.sync_response(tps("t-0")))
    assert kinds(effects) == ["CommitBeforeRevoke", "REVOKED['t-0', 't-1']"]
    assert next(e for e in effects if isinstance(e, CommitBeforeRevoke)).partitions == OWNED
    assert s.state() is S.LEAVING
    offsets = {tp: OffsetAndMetadata(offset=5) for tp in OWNED}
    s.feed(CommitRequested(offsets=offsets, token="c"))
    commit = s.request(OffsetCommitRequest).request
    assert isinstance(commit, OffsetCommitRequest)
    assert commit.generation_id == 2
    assert kinds(s.finish_listeners()) == ["Unassign['t-0', 't-1']", "LeaveGroup"]
    s.answer(LeaveGroupRequest, LeaveGroupResponse())
    assert s.state() is S.CLOSED


def test_at_the_deadline_the_member_leaves_as_java_does() -> None:
    s = _rejoining()
    asked_at = s.now
    s.feed(CloseRequested(commit_wait_s=5.0))
    assert s.member.next_deadline is not None
    assert s.member.next_deadline <= asked_at + 5.0
    assert kinds(s.feed(Tick(), at=asked_at + 4.9)) == []
    effects = s.feed(Tick(), at=asked_at + 5.0)
    assert kinds(effects) == ["Unassign['t-0', 't-1']", "LOST['t-0', 't-1']"]
    assert s.state() is S.LEAVING


def test_without_auto_commit_or_a_wait_the_member_leaves_at_once() -> None:
    for s, close in (
        (_rejoining(), CloseRequested()),
        (_no_auto_commit(), CloseRequested(commit_wait_s=10.0)),
    ):
        effects = s.feed(close)
        assert kinds(effects) == ["Unassign['t-0', 't-1']", "LOST['t-0', 't-1']"]
        assert s.state() is S.LEAVING


def _no_auto_commit() -> Script:
    s = Script(cooperative=True)
    s.to_stable(OWNED)
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    return s


def test_a_reset_while_waiting_leaves_at_once_since_nothing_can_be_committed() -> None:
    s = _rejoining()
    s.feed(LeaveRequested(commit_wait_s=10.0))
    s.answer(JoinGroupRequest, s.join_response(error_code=error_codes.UNKNOWN_MEMBER_ID))
    assert s.member.owned_partitions == frozenset()  # LOST by the reset
    due = s.member.next_deadline
    assert due is not None
    assert due <= s.now
    s.finish_listeners()
    s.feed(Tick())
    assert s.state() is S.UNJOINED


def test_an_unsubscribe_waiting_for_the_sync_answer_becomes_a_close() -> None:
    s = _rejoining()
    s.feed(LeaveRequested(commit_wait_s=10.0))
    s.feed(LeaveRequested(commit_wait_s=10.0))  # asked twice: still one leave
    s.feed(CloseRequested())
    assert s.state() is S.JOINING
    s.answer(JoinGroupRequest, s.join_response(generation_id=2))
    s.answer(SyncGroupRequest, s.sync_response(OWNED))
    s.feed(CommitRequested(offsets={}, token="c"))
    s.finish_listeners()
    s.answer(LeaveGroupRequest, LeaveGroupResponse())
    assert s.state() is S.CLOSED


def test_a_close_waiting_for_the_sync_answer_is_not_cut_short_by_the_poll_timeout() -> None:
    """The application is inside close(): not polling is no failure to poll. The leave
    it asked for goes on (a poll-timeout leave would report the partitions lost and
    commit nothing) and ends at the SyncGroup answer or its own deadline."""
    s = Script(cooperative=True, enable_auto_commit=True)
    s.to_stable(OWNED)
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    s.feed(CloseRequested(commit_wait_s=3 * MAX_POLL_S))
    s.feed(Tick(), at=s.now + MAX_POLL_S)
    assert s.state() is S.JOINING
    due = s.member.next_deadline
    assert due is not None
    assert due > s.now
    s.answer(JoinGroupRequest, s.join_response(generation_id=2))
    effects = s.answer(SyncGroupRequest, s.sync_response(OWNED))
    assert kinds(effects) == ["CommitBeforeRevoke", "REVOKED['t-0', 't-1']"]
    s.feed(CommitRequested(offsets={tp: OffsetAndMetadata(offset=5) for tp in OWNED}, token="c"))
    commit = s.request(OffsetCommitRequest).request
    assert isinstance(commit, OffsetCommitRequest)
    assert commit.generation_id == 2
    s.finish_listeners()
    s.answer(LeaveGroupRequest, LeaveGroupResponse())
    assert s.state() is S.CLOSED


def test_a_leader_waiting_for_metadata_leaves_at_the_close_deadline() -> None:
    s = Script(cooperative=True, enable_auto_commit=True)
    s.to_stable(OWNED)
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    # Leader of a group whose other member wants a topic it has no metadata for.
    s.answer(
        JoinGroupRequest,
        s.join_response(
            generation_id=2, leader="m1", members=s.leader_members(("m2", ("t", "other")))
        ),
    )
    assert s.state() is S.LEADER_AWAITING_METADATA
    asked_at = s.now
    s.feed(CloseRequested(commit_wait_s=2 * MAX_POLL_S))
    s.feed(Tick(), at=asked_at + MAX_POLL_S)
    assert s.state() is S.LEADER_AWAITING_METADATA
    effects = s.feed(Tick(), at=asked_at + 2 * MAX_POLL_S)
    assert kinds(effects) == ["Unassign['t-0', 't-1']", "LOST['t-0', 't-1']"]
    s.finish_listeners()
    s.answer(LeaveGroupRequest, LeaveGroupResponse())
    assert s.state() is S.CLOSED


def test_a_fatal_error_while_waiting_leaves_no_timer_behind() -> None:
    s = _rejoining()
    s.feed(CloseRequested(commit_wait_s=10.0))
    s.answer(JoinGroupRequest, s.join_response(error_code=error_codes.FENCED_INSTANCE_ID))
    assert s.state() is S.FATAL
    assert s.member.next_deadline is None
    s.feed(CloseRequested())
    assert s.state() is S.CLOSED
