"""Transcripts: KIP-848's broker-side regular expressions (``SubscribedTopicRegex``).

The coordinator matches the expression (ConsumerGroupHeartbeat v1+, Kafka 4.0+); the
member sends it with empty names, leaves both null while unchanged, asks for every
topic's metadata to read the target's topic ids, and refuses to drop it on a broker
that only speaks v0.
"""

from __future__ import annotations

import re

import pytest
from _kip848_script import (
    COORDINATOR,
    Member,
    S,
    assignment,
    failed,
    heartbeat,
    joined,
    metadata,
    ok,
    tps,
)

from coopconsumer._errors import ConfigurationError, KafkaError
from coopconsumer._member import (
    Assign,
    CoordinatorFound,
    Fatal,
    ListenerDone,
    ListenerKind,
    MetadataNeeded,
    Subscribe,
)
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.group_messages import (
    ConsumerGroupHeartbeatQuery,
    ConsumerGroupHeartbeatRequest,
)


def test_regex_goes_to_the_coordinator_with_empty_names() -> None:
    m = Member()
    fx = m.feed(Subscribe(regex="t|u"))
    assert [e.topics for e in fx if isinstance(e, MetadataNeeded)] == [None]
    m.feed(metadata("t", "u"))
    request_id, request = heartbeat(m.feed(CoordinatorFound(node_id=COORDINATOR)))
    assert request.subscribed_topic_regex == "t|u"
    assert request.subscribed_topic_names == ()
    assert m.member.subscribed_topics == frozenset()  # the coordinator knows them
    fx = m.answer(request_id, joined(1, assignment(t=[0], u=[1])))
    (assign,) = [e for e in fx if isinstance(e, Assign)]
    assert assign.partitions == tps("t-0", "u-1")
    fx = m.feed(ListenerDone(invocation_id=1, kind=ListenerKind.ASSIGNED))
    _, ack = heartbeat(fx)
    # Unchanged since the last heartbeat: both null.
    assert (ack.subscribed_topic_names, ack.subscribed_topic_regex) == (None, None)


def test_a_regex_replaces_names_at_once() -> None:
    m = Member()
    m.stable(0)
    fx = m.feed(Subscribe(regex="u.*"), after=1.0)
    _, request = heartbeat(fx)
    assert (request.subscribed_topic_names, request.subscribed_topic_regex) == ((), "u.*")
    assert [e.topics for e in fx if isinstance(e, MetadataNeeded)] == [None]


def test_names_after_a_regex_drop_the_regex() -> None:
    m = Member()
    m.feed(Subscribe(regex="t.*"))
    m.feed(metadata("t"))
    request_id, _ = heartbeat(m.feed(CoordinatorFound(node_id=COORDINATOR)))
    m.answer(request_id, joined(1, None))
    request_id, request = heartbeat(m.feed(Subscribe(topics={"t"})))
    assert request.subscribed_topic_names == ("t",)
    assert request.subscribed_topic_regex is None
    # Written at v1, the names carry an empty regex: they replace the expression.
    built = ConsumerGroupHeartbeatQuery(request=request).build(1)
    assert built.subscribed_topic_regex == ""
    m.answer(request_id, ok(1))


def test_a_v0_broker_cannot_take_a_regex() -> None:
    request = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", subscribed_topic_names=(), subscribed_topic_regex="t.*"
    )
    with pytest.raises(ConfigurationError, match="does not match regular expressions"):
        ConsumerGroupHeartbeatQuery(request=request).build(0)
    names = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", subscribed_topic_names=("t",), subscribed_topic_regex=""
    )
    assert ConsumerGroupHeartbeatQuery(request=names).build(0).subscribed_topic_regex is None


def test_an_invalid_regex_is_fatal() -> None:
    m = Member()
    m.feed(Subscribe(regex="t("))
    request_id, _ = heartbeat(m.feed(CoordinatorFound(node_id=COORDINATOR)))
    fx = m.answer(request_id, failed(error_codes.INVALID_REGULAR_EXPRESSION))
    (fatal,) = [e for e in fx if isinstance(e, Fatal)]
    assert isinstance(fatal.error, KafkaError)
    assert fatal.error.code == error_codes.INVALID_REGULAR_EXPRESSION
    assert m.state() is S.FATAL


def test_a_subscription_is_one_kind() -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        Subscribe(topics={"t"}, regex="t.*")
    with pytest.raises(ConfigurationError, match="not both"):
        Subscribe(pattern=re.compile("t"), regex="t.*")
    with pytest.raises(ConfigurationError, match="must not be empty"):
        Subscribe(regex="")
