"""Transcripts: a classic member inside a group the broker converted to KIP-848.

During an online migration (docs/upgrade.md, "Member by member") a Kafka 4.0+
coordinator answers the classic members' JoinGroup itself: no leader (``""``), no
member list, generation = the member's epoch; SyncGroup carries the assignment the
broker computed; a heartbeat answers REBALANCE_IN_PROGRESS while the broker wants
partitions back, which it judges from the ``owned_partitions`` of the next JoinGroup.
No embedded broker hosts this (docs/testing.md), so these transcripts pin what the
classic member does with such answers.
"""

from __future__ import annotations

from _coord_script import Script, tps

from coopconsumer import consumer_protocol
from coopconsumer._member import InvokeListener, ListenerKind, MemberState
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import JoinGroupRequest, SyncGroupRequest
from coopconsumer.assignors import Subscription

S = MemberState


def _subscription(s: Script) -> Subscription:
    request = s.request(JoinGroupRequest).request
    assert isinstance(request, JoinGroupRequest)
    return consumer_protocol.decode_subscription(request.protocols[0].metadata)


def test_a_broker_run_join_makes_the_member_a_follower_that_runs_no_assignor() -> None:
    s = Script(cooperative=True)
    s.subscribe()
    s.answer(JoinGroupRequest, s.join_response(member_id="m1", generation_id=7, leader=""))
    assert s.state() is S.AWAITING_SYNC
    assert not s.member.is_leader
    sync = s.request(SyncGroupRequest).request
    assert isinstance(sync, SyncGroupRequest)
    assert sync.assignments == ()  # followers send none; the broker assigns
    assert (sync.generation_id, sync.member_id) == (7, "m1")
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1", "t-2")))
    s.finish_listeners()
    assert s.state() is S.STABLE
    assert s.member.owned_partitions == tps("t-0", "t-1", "t-2")


def test_the_broker_takes_partitions_back_through_a_rejoin() -> None:
    """The broker asks for t-2 (moving to a consumer-protocol member): the heartbeat
    answers REBALANCE_IN_PROGRESS, the JoinGroup reports what is owned, SyncGroup gives
    the smaller assignment, and the cooperative member revokes only t-2."""
    s = Script(cooperative=True)
    s.subscribe()
    s.answer(JoinGroupRequest, s.join_response(member_id="m1", generation_id=7, leader=""))
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1", "t-2")))
    s.finish_listeners()
    s.heartbeat(error_codes.REBALANCE_IN_PROGRESS)
    assert s.state() is S.JOINING
    assert s.member.owned_partitions == tps("t-0", "t-1", "t-2")  # kept while rejoining
    owned = _subscription(s).owned_partitions
    assert frozenset(owned) == tps("t-0", "t-1", "t-2")
    s.answer(JoinGroupRequest, s.join_response(member_id="m1", generation_id=8, leader=""))
    effects = s.answer(SyncGroupRequest, s.sync_response(tps("t-0", "t-1")))
    revoked = [e for e in effects if isinstance(e, InvokeListener)]
    assert [(e.kind, e.partitions) for e in revoked] == [(ListenerKind.REVOKED, tps("t-2"))]
    s.finish_listeners()
    assert s.member.owned_partitions == tps("t-0", "t-1")
    assert s.member.generation_id == 8
