"""Transcripts: the coordinator lookup and committed-offset fetches in the core.

The member reads FindCoordinator and OffsetFetch answers itself (one reader each, in
``_protocol.queries``); the driver only sends the queries it is given and feeds back
what came.
"""

from __future__ import annotations

import pytest
from _coord_script import Script, in_state, tps

from coopconsumer._errors import BrokerConnectionError, KafkaError, RequestTimeoutError
from coopconsumer._member import (
    AddCoordinator,
    CloseRequested,
    CommittedOffsetsDone,
    CommittedOffsetsRequested,
    CoordinatorFound,
    Effect,
    Fatal,
    FindCoordinator,
    MemberState,
    OffsetAndMetadata,
    RequestFailed,
    ResponseReceived,
    Send,
    Subscribe,
    Tick,
)
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import (
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from coopconsumer._protocol.queries import OffsetFetchQuery

S = MemberState
BACKOFF_S = 0.1  # MemberConfig's default retry.backoff.ms
TP0, TP1, TP2 = sorted(tps("t-0", "t-1", "t-2"))


def _lookups(effects: list[Effect]) -> list[FindCoordinator]:
    return [e for e in effects if isinstance(e, FindCoordinator)]


def _done(effects: list[Effect]) -> list[CommittedOffsetsDone]:
    return [e for e in effects if isinstance(e, CommittedOffsetsDone)]


def _subscribed() -> tuple[Script, FindCoordinator]:
    s = Script()
    (lookup,) = _lookups(s.feed(Subscribe(topics=frozenset({"t"}))))
    return s, lookup


# ---------------------------------------------------------------------- lookup


def test_the_member_reads_a_single_key_answer_and_asks_for_the_connection() -> None:
    s, lookup = _subscribed()
    assert lookup.group_id == "g"
    answer = FindCoordinatorResponse(node_id=3, host="broker-3", port=9093)
    effects = s.feed(ResponseReceived(request_id=lookup.request_id, response=answer, api_version=3))
    assert [e for e in effects if type(e).__name__ != "Log"] == [
        AddCoordinator(node_id=3, host="broker-3", port=9093)
    ]
    assert s.member.coordinator_id is None  # until the connection exists
    s.feed(CoordinatorFound(node_id=1003))
    join = s.request(JoinGroupRequest)
    assert join.node_id == 1003


def test_the_member_reads_a_batched_answer_by_its_key() -> None:
    s, lookup = _subscribed()
    answer = FindCoordinatorResponse(
        coordinators=(
            FindCoordinatorResponseCoordinator(key="other", node_id=9, host="x", port=1),
            FindCoordinatorResponseCoordinator(key="g", node_id=5, host="broker-5", port=9095),
        )
    )
    effects = s.feed(ResponseReceived(request_id=lookup.request_id, response=answer, api_version=4))
    assert AddCoordinator(node_id=5, host="broker-5", port=9095) in effects


@pytest.mark.parametrize(
    "answer",
    [
        FindCoordinatorResponse(error_code=error_codes.COORDINATOR_NOT_AVAILABLE),
        FindCoordinatorResponse(
            coordinators=(FindCoordinatorResponseCoordinator(key="not-ours", node_id=2),)
        ),
    ],
    ids=["not-available", "answer-lacks-our-key"],
)
def test_a_failed_lookup_is_retried_after_the_backoff(answer: FindCoordinatorResponse) -> None:
    s, lookup = _subscribed()
    version = 4 if answer.coordinators else 3
    effects = s.feed(
        ResponseReceived(request_id=lookup.request_id, response=answer, api_version=version)
    )
    assert not any(isinstance(e, AddCoordinator) for e in effects)
    assert s.member.next_deadline == pytest.approx(BACKOFF_S)
    assert _lookups(s.feed(Tick(), at=BACKOFF_S / 2)) == []
    (again,) = _lookups(s.feed(Tick(), at=BACKOFF_S))
    assert again.request_id != lookup.request_id


def test_a_lookup_that_got_no_answer_is_retried() -> None:
    s, lookup = _subscribed()
    s.feed(RequestFailed(request_id=lookup.request_id, error=BrokerConnectionError("down")))
    assert len(_lookups(s.feed(Tick(), at=BACKOFF_S))) == 1


def test_a_lookup_refused_for_authorization_is_fatal() -> None:
    s, lookup = _subscribed()
    answer = FindCoordinatorResponse(error_code=error_codes.GROUP_AUTHORIZATION_FAILED)
    effects = s.feed(ResponseReceived(request_id=lookup.request_id, response=answer, api_version=3))
    assert s.state() is S.FATAL
    (fatal,) = [e for e in effects if isinstance(e, Fatal)]
    assert isinstance(fatal.error, KafkaError)
    assert fatal.error.code == error_codes.GROUP_AUTHORIZATION_FAILED


def test_an_answer_to_a_lookup_already_settled_is_dropped() -> None:
    s, lookup = _subscribed()
    s.feed(CoordinatorFound(node_id=1))
    late = FindCoordinatorResponse(node_id=7, host="h", port=1)
    effects = s.feed(ResponseReceived(request_id=lookup.request_id, response=late))
    assert not any(isinstance(e, AddCoordinator) for e in effects)
    assert s.member.coordinator_id == 1


# ---------------------------------------------------------------------- offset fetch


def _ask(s: Script, *partitions: str, timeout_s: float = 5.0) -> list[Effect]:
    return s.feed(
        CommittedOffsetsRequested(partitions=tps(*partitions), token="f", timeout_s=timeout_s)
    )


def _fetch_sent(s: Script) -> Send:
    return s.request(OffsetFetchQuery)


def _answer(s: Script, response: OffsetFetchResponse, version: int) -> list[Effect]:
    send = _fetch_sent(s)
    del s.sends[send.request_id]
    return s.feed(
        ResponseReceived(request_id=send.request_id, response=response, api_version=version)
    )


def test_committed_offsets_are_fetched_from_the_coordinator_single_group_form() -> None:
    s = in_state(S.STABLE)
    _ask(s, "t-0", "t-1", "t-2")
    send = _fetch_sent(s)
    assert send.node_id == s.member.coordinator_id
    query = send.request
    assert isinstance(query, OffsetFetchQuery)
    assert dict(query.partitions) == {"t": (0, 1, 2)}
    assert not query.require_stable
    response = OffsetFetchResponse(
        topics=(
            OffsetFetchResponseTopic(
                name="t",
                partitions=(
                    OffsetFetchResponsePartition(
                        partition_index=0,
                        committed_offset=7,
                        metadata="m",
                        committed_leader_epoch=3,
                    ),
                    OffsetFetchResponsePartition(partition_index=1, committed_offset=-1),
                    OffsetFetchResponsePartition(partition_index=9, committed_offset=5),
                ),
            ),
        )
    )
    (done,) = _done(_answer(s, response, 7))
    # Not asked (partition 9) is ignored; -1 and missing mean "nothing committed".
    assert done.error is None
    assert dict(done.offsets) == {
        TP0: OffsetAndMetadata(offset=7, metadata="m", leader_epoch=3),
        TP1: None,
        TP2: None,
    }
    assert s.state() is S.STABLE


def test_committed_offsets_batched_form() -> None:
    s = in_state(S.STABLE)
    _ask(s, "t-0")
    response = OffsetFetchResponse(
        groups=(
            OffsetFetchResponseGroup(
                group_id="g",
                topics=(
                    OffsetFetchResponseTopics(
                        name="t",
                        partitions=(
                            OffsetFetchResponsePartitions(partition_index=0, committed_offset=4),
                        ),
                    ),
                ),
            ),
        )
    )
    (done,) = _done(_answer(s, response, 8))
    assert dict(done.offsets) == {TP0: OffsetAndMetadata(offset=4)}


def test_not_coordinator_looks_the_coordinator_up_and_fetches_again() -> None:
    s = in_state(S.STABLE)
    s.feed(Tick(), at=s.now + 1.0)  # the coordinator was found a while ago
    _ask(s, "t-0")
    moved = OffsetFetchResponse(
        groups=(OffsetFetchResponseGroup(group_id="g", error_code=error_codes.NOT_COORDINATOR),)
    )
    effects = _answer(s, moved, 8)
    assert _done(effects) == []
    assert len(_lookups(effects)) == 1
    assert s.member.coordinator_id is None
    s.feed(CoordinatorFound(node_id=2), at=s.now + BACKOFF_S)
    assert _fetch_sent(s).node_id == 2
    (done,) = _done(_answer(s, OffsetFetchResponse(), 7))
    assert done.error is None
    assert dict(done.offsets) == {TP0: None}


def test_an_unstable_offset_is_fetched_again_after_the_backoff() -> None:
    """KIP-447: offsets a transaction still holds come back UNSTABLE_OFFSET_COMMIT."""
    s = Script(require_stable=True)
    s.to_stable()
    _ask(s, "t-0")
    query = _fetch_sent(s).request
    assert isinstance(query, OffsetFetchQuery)
    assert query.require_stable
    assert query.build(7).require_stable
    assert not query.build(6).require_stable  # older brokers cannot; Java drops it too
    unstable = OffsetFetchResponse(
        topics=(
            OffsetFetchResponseTopic(
                name="t",
                partitions=(
                    OffsetFetchResponsePartition(
                        partition_index=0, error_code=error_codes.UNSTABLE_OFFSET_COMMIT
                    ),
                ),
            ),
        )
    )
    assert _done(_answer(s, unstable, 7)) == []
    assert s.sent(OffsetFetchQuery) == []
    s.feed(Tick(), at=s.now + BACKOFF_S)
    ok = OffsetFetchResponse(
        topics=(
            OffsetFetchResponseTopic(
                name="t",
                partitions=(OffsetFetchResponsePartition(partition_index=0, committed_offset=12),),
            ),
        )
    )
    (done,) = _done(_answer(s, ok, 7))
    assert dict(done.offsets) == {TP0: OffsetAndMetadata(offset=12)}


def test_an_error_no_retry_cures_fails_the_fetch_not_the_member() -> None:
    s = in_state(S.STABLE)
    _ask(s, "t-0")
    refused = OffsetFetchResponse(error_code=error_codes.GROUP_AUTHORIZATION_FAILED)
    (done,) = _done(_answer(s, refused, 7))
    assert isinstance(done.error, KafkaError)
    assert done.error.code == error_codes.GROUP_AUTHORIZATION_FAILED
    assert done.error.api_key == OffsetFetchRequest.API_KEY
    assert s.state() is S.STABLE


def test_a_lost_connection_is_retried_until_the_deadline() -> None:
    s = in_state(S.STABLE)
    _ask(s, "t-0", timeout_s=1.0)
    asked_at = s.now
    send = _fetch_sent(s)
    del s.sends[send.request_id]
    effects = s.feed(
        RequestFailed(request_id=send.request_id, error=BrokerConnectionError("reset"))
    )
    assert _done(effects) == []
    s.feed(CoordinatorFound(node_id=1), at=asked_at + BACKOFF_S)
    late = _fetch_sent(s)
    (done,) = _done(s.feed(Tick(), at=asked_at + 1.0))
    # The deadline's error is a timeout (Java's TimeoutException) naming the last failure.
    assert isinstance(done.error, RequestTimeoutError)
    assert isinstance(done.error.__cause__, BrokerConnectionError)
    assert "reset" in str(done.error)
    # The answer that arrives after the deadline is dropped.
    after = s.feed(ResponseReceived(request_id=late.request_id, response=OffsetFetchResponse()))
    assert _done(after) == []


def test_a_fetch_without_any_answer_times_out() -> None:
    s = in_state(S.STABLE)
    _ask(s, "t-0", timeout_s=2.0)
    asked_at = s.now
    assert s.member.next_deadline == pytest.approx(asked_at + 2.0)
    assert _done(s.feed(Tick(), at=asked_at + 1.99)) == []
    (done,) = _done(s.feed(Tick(), at=asked_at + 2.0))
    assert isinstance(done.error, RequestTimeoutError)
    assert done.error.api_key == OffsetFetchRequest.API_KEY


def test_a_fetch_waits_for_the_coordinator_when_none_is_known() -> None:
    s = Script()
    effects = _ask(s, "t-0")
    assert len(_lookups(effects)) == 1
    assert s.sent(OffsetFetchQuery) == []
    s.feed(CoordinatorFound(node_id=4))
    assert _fetch_sent(s).node_id == 4
    assert s.state() is S.UNJOINED


def test_no_partitions_answer_at_once() -> None:
    s = in_state(S.STABLE)
    assert _done(_ask(s)) == [CommittedOffsetsDone(token="f")]


def test_closing_answers_every_fetch_in_progress() -> None:
    s = in_state(S.STABLE)
    _ask(s, "t-0")
    effects = s.feed(CloseRequested())
    effects += s.finish_listeners()
    effects += s.answer(LeaveGroupRequest, LeaveGroupResponse())
    assert s.state() is S.CLOSED
    (done,) = _done(effects)
    assert done.error is not None
    (closed,) = _done(_ask(s, "t-0"))
    assert closed.error is not None


def test_a_failed_member_answers_fetches_with_its_error() -> None:
    s = in_state(S.FATAL)
    (done,) = _done(_ask(s, "t-0"))
    assert isinstance(done.error, KafkaError)
    assert done.error.code == error_codes.GROUP_AUTHORIZATION_FAILED
