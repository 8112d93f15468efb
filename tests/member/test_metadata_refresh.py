"""Transcripts: the metadata refresh is the member's, for both group protocols.

The member asks for Metadata (``MetadataNeeded`` with a request id), reads the raw
answer itself (``AddBrokers``, then the ``MetadataUpdate`` its table handles), times
``metadata.max.age.ms`` and retries after ``retry.backoff.ms``; the driver only sends
the query and feeds the answer back.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

import pytest
from _coord_script import Script
from _kip848_script import COORDINATOR, T_ID, U_ID, assignment, heartbeat, joined
from _kip848_script import Member as KipMember

from coopconsumer._errors import BrokerConnectionError
from coopconsumer._member import (
    AddBrokers,
    Assign,
    CloseRequested,
    CoordinatorFound,
    Effect,
    LeaveRequested,
    MemberState,
    MetadataNeeded,
    MetadataUpdate,
    PollCalled,
    RequestFailed,
    ResponseReceived,
    Send,
    Subscribe,
    Tick,
)
from coopconsumer._member.classic._core import LEADER_SYNC_DELAY_S
from coopconsumer._member.kip848 import ConsumerMemberState
from coopconsumer._protocol.messages import (
    HeartbeatResponse,
    JoinGroupRequest,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
    SyncGroupRequest,
)
from coopconsumer._protocol.queries import MetadataQuery
from coopconsumer._types import TopicPartition
from coopconsumer.assignors import ClusterMetadata

S = MemberState
K = ConsumerMemberState
MAX_AGE_S = 300.0
BACKOFF_S = 0.1


def answer(**topics: int) -> MetadataResponse:
    """A Metadata answer from broker 1 naming ``topics`` with their partition counts
    (topic ids from the kip848 script's ``assignment`` helper)."""
    return MetadataResponse(
        brokers=(MetadataResponseBroker(node_id=1, host="b1", port=9092, rack="r1"),),
        topics=tuple(
            MetadataResponseTopic(
                name=name,
                topic_id={"t": T_ID, "u": U_ID}.get(name, uuid.UUID(int=99)),
                partitions=tuple(
                    MetadataResponsePartition(partition_index=p, leader_id=1, replica_nodes=(1,))
                    for p in range(count)
                ),
            )
            for name, count in topics.items()
        ),
    )


def needed(effects: Sequence[Effect]) -> list[MetadataNeeded]:
    return [e for e in effects if isinstance(e, MetadataNeeded)]


def reply(request: MetadataNeeded, response: object) -> ResponseReceived:
    return ResponseReceived(request_id=request.request_id, response=response, api_version=12)


# ---------------------------------------------------------------------- the classic member


def test_ask_read_the_answer_and_refresh_after_max_age() -> None:
    s = Script()
    (ask,) = needed(s.feed(Subscribe(topics=frozenset({"t"}))))
    assert ask.topics == frozenset({"t"})
    assert ask.query == MetadataQuery(topics=["t"])
    assert s.member.next_deadline is None  # the request is out; nothing else is timed
    effects = s.feed(reply(ask, answer(t=2)), at=1.0)
    (brokers,) = [e for e in effects if isinstance(e, AddBrokers)]
    assert [(b.node_id, b.host, b.port, b.rack) for b in brokers.brokers] == [(1, "b1", 9092, "r1")]
    # The member read it: a leader would assign 2 partitions of t from it.
    assert s.member.next_deadline == pytest.approx(1.0 + MAX_AGE_S)
    assert needed(s.feed(Tick(), at=MAX_AGE_S)) == []
    (again,) = needed(s.feed(Tick(), at=1.0 + MAX_AGE_S))
    assert again.topics == frozenset({"t"})
    assert again.request_id != ask.request_id
    assert s.member.next_deadline is None


def test_a_failed_refresh_is_retried_after_the_backoff() -> None:
    s = Script()
    (ask,) = needed(s.feed(Subscribe(topics=frozenset({"t"}))))
    effects = s.feed(RequestFailed(request_id=ask.request_id, error=BrokerConnectionError("gone")))
    assert not [e for e in effects if isinstance(e, AddBrokers)]
    assert s.member.next_deadline == pytest.approx(BACKOFF_S)
    (retry,) = needed(s.feed(Tick(), at=BACKOFF_S))
    assert retry.topics == frozenset({"t"})


def test_an_answer_of_the_wrong_type_is_a_failed_refresh() -> None:
    s = Script()
    (ask,) = needed(s.feed(Subscribe(topics=frozenset({"t"}))))
    s.feed(reply(ask, HeartbeatResponse()), at=2.0)
    assert s.member.next_deadline == pytest.approx(2.0 + BACKOFF_S)


def test_a_topic_wanted_while_a_refresh_is_out_is_asked_for_when_it_answers() -> None:
    s = Script(cooperative=True)
    (first,) = needed(s.feed(Subscribe(topics=frozenset({"t"}))))
    assert needed(s.feed(Subscribe(topics=frozenset({"t", "u"})))) == []  # one at a time
    effects = s.feed(reply(first, answer(t=2)), at=1.0)
    (second,) = needed(effects)
    assert second.topics == frozenset({"t", "u"})
    s.feed(reply(second, answer(t=2, u=3)), at=1.5)
    assert s.member.next_deadline == pytest.approx(1.5 + MAX_AGE_S)


def test_every_topic_ever_wanted_is_refreshed() -> None:
    """A narrower subscription does not narrow the refresh: a leader's view of the
    group's topics must not vanish from a later answer."""
    s = Script(cooperative=True)
    (first,) = needed(s.feed(Subscribe(topics=frozenset({"t", "u"}))))
    s.feed(reply(first, answer(t=2, u=2)))
    (resubscribed,) = needed(s.feed(Subscribe(topics=frozenset({"t"})), at=1.0))
    assert resubscribed.topics == frozenset({"t", "u"})
    s.feed(reply(resubscribed, answer(t=2, u=2)))
    (refresh,) = needed(s.feed(Tick(), at=1.0 + MAX_AGE_S))
    assert refresh.topics == frozenset({"t", "u"})


def test_a_pattern_asks_for_every_topic() -> None:
    s = Script()
    (ask,) = needed(s.feed(Subscribe(pattern=re.compile("t.*"))))
    assert ask.topics is None
    assert ask.query.build(0) == MetadataRequest(topics=())  # v0: all = empty
    assert ask.query.build(1) == MetadataRequest(topics=None)
    assert ask.query.build(4) == MetadataRequest(topics=None, allow_auto_topic_creation=False)
    assert MetadataQuery(topics=["t", "t", "a"]).build(9) == MetadataRequest(
        topics=(MetadataRequestTopic(name="t"), MetadataRequestTopic(name="a")),
        allow_auto_topic_creation=False,
    )


def test_the_leader_assigns_from_the_answer_that_covers_the_group() -> None:
    """An answer to a refresh sent before the leader asked for the group's topics does
    not make it assign (it would assign without the other members' topics)."""
    s = Script()
    (first,) = needed(s.feed(Subscribe(topics=frozenset({"t"}))))
    s.feed(reply(first, answer(t=4)))
    s.feed(CoordinatorFound(node_id=1))
    (periodic,) = needed(s.feed(Tick(), at=MAX_AGE_S))  # out when the join completes
    s.answer(
        JoinGroupRequest,
        s.join_response(leader="m1", members=s.leader_members(("m2", ("other",)))),
    )
    assert s.state() is S.LEADER_AWAITING_METADATA
    effects = s.feed(reply(periodic, answer(t=4)))
    (covering,) = needed(effects)
    assert covering.topics == frozenset({"t", "other"})
    assert s.state() is S.LEADER_AWAITING_METADATA
    assert s.sent(SyncGroupRequest) == []
    s.feed(reply(covering, answer(t=4, other=2)))
    s.feed(PollCalled())  # the application polls: no poll timeout at MAX_AGE_S
    s.feed(Tick(), at=s.now + LEADER_SYNC_DELAY_S)
    assert s.state() is S.AWAITING_SYNC
    request = s.request(SyncGroupRequest).request
    assert isinstance(request, SyncGroupRequest)
    assert {a.member_id for a in request.assignments} == {"m1", "m2"}


def test_a_harness_answering_with_metadata_update_answers_the_refresh() -> None:
    s = Script()
    (ask,) = needed(s.feed(Subscribe(topics=frozenset({"t"}))))
    s.feed(MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 1})), at=1.0)
    assert s.member.next_deadline == pytest.approx(1.0 + MAX_AGE_S)
    # The request it answered is forgotten: the driver's late answer is dropped.
    assert s.feed(reply(ask, answer(t=1))) == [s.history[-1]]


def test_closing_stops_the_refreshes() -> None:
    s = Script()
    (ask,) = needed(s.feed(Subscribe(topics=frozenset({"t"}))))
    s.feed(reply(ask, answer(t=1)))
    s.feed(CloseRequested())
    assert s.state() is S.CLOSED
    assert s.member.next_deadline is None
    assert needed(s.feed(Tick(), at=2 * MAX_AGE_S)) == []


def test_unsubscribed_and_unjoined_keeps_refreshing_what_was_wanted() -> None:
    """Unsubscribing does not close the member: it may subscribe again, and the
    refresh stays armed for the topics it wanted (as the driver's did)."""
    s = Script()
    (ask,) = needed(s.feed(Subscribe(topics=frozenset({"t"}))))
    s.feed(reply(ask, answer(t=1)))
    s.feed(LeaveRequested())
    assert s.state() is S.UNJOINED
    assert s.member.next_deadline == pytest.approx(MAX_AGE_S)


# ---------------------------------------------------------------------- the KIP-848 member


def test_kip848_member_resolves_topic_ids_from_its_own_metadata_answer() -> None:
    m = KipMember()
    (ask,) = needed(m.feed(Subscribe(topics={"t"})))
    assert ask.topics == frozenset({"t"})
    fx = m.feed(reply(ask, answer(t=2)))
    assert [e for e in fx if isinstance(e, AddBrokers)]
    request_id, _ = heartbeat(m.feed(CoordinatorFound(node_id=COORDINATOR)))
    fx = m.answer(request_id, joined(1, assignment(t=[0, 1])))
    # The target names t by id only; the member's own Metadata answer gave the id.
    assert Assign(partitions=frozenset({TopicPartition("t", 0), TopicPartition("t", 1)})) in fx
    assert m.state() is K.RECONCILING


def test_kip848_member_refreshes_and_stops_when_closed() -> None:
    m = KipMember()
    (ask,) = needed(m.feed(Subscribe(topics={"t"})))
    m.feed(reply(ask, answer(t=1)))
    refresh_at = m.now + MAX_AGE_S
    assert m.member.next_deadline == pytest.approx(refresh_at)
    (again,) = needed(m.feed(Tick(), after=MAX_AGE_S))
    assert again.topics == frozenset({"t"})
    m.feed(RequestFailed(request_id=again.request_id, error=BrokerConnectionError("gone")))
    assert m.member.next_deadline == pytest.approx(m.now + BACKOFF_S)
    m.feed(CloseRequested())
    assert m.state() is K.CLOSED
    assert m.member.next_deadline is None
    assert [
        e for e in m.feed(Tick(), after=MAX_AGE_S) if isinstance(e, Send | MetadataNeeded)
    ] == []
