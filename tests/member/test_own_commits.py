"""Transcripts of the commits a member decides on its own (``_member/_own_commits.py``):
the retried commit (before revoking, at close) and auto-commit's timer, on both members,
with a hand-moved clock."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from _coord_script import Script
from _kip848_script import Member
from test_member_transcripts import T0, commit_response, kinds

from coopconsumer._errors import (
    CommitFailedError,
    KafkaError,
    RebalanceInProgressError,
    RequestTimeoutError,
)
from coopconsumer._member import (
    AutoCommitDue,
    CommitDone,
    CoordinatorFound,
    Effect,
    Log,
    OffsetAndMetadata,
    PollCalled,
    RetriedCommitRequested,
    Tick,
)
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import OffsetCommitRequest

BACKOFF_S = 0.1  # MemberConfig's default retry_backoff_ms
TIMEOUT_S = 1.0


def retried(s: Script, token: str = "rc") -> list[Effect]:
    return s.feed(
        RetriedCommitRequested(
            offsets={T0: OffsetAndMetadata(offset=7)},
            token=token,
            timeout_s=TIMEOUT_S,
            purpose="auto-commit before revoking",
        )
    )


def answers(effects: Sequence[Effect]) -> list[CommitDone]:
    return [e for e in effects if isinstance(e, CommitDone)]


def stable() -> Script:
    s = Script()
    s.to_stable()
    return s


def test_a_commit_answered_at_once_is_done_with_its_own_token() -> None:
    s = stable()
    assert kinds(retried(s)) == ["OffsetCommit"]
    done = answers(s.answer(OffsetCommitRequest, commit_response(error_codes.NONE)))
    assert done == [CommitDone(token="rc")]
    assert s.member.next_deadline is not None  # the heartbeat only
    assert not answers(s.feed(Tick(), at=s.now + TIMEOUT_S))


def test_a_coordinator_that_moved_is_retried_after_the_backoff() -> None:
    s = stable()
    retried(s)
    started = s.now
    effects = s.answer(OffsetCommitRequest, commit_response(error_codes.NOT_COORDINATOR))
    assert not answers(effects)
    logs = [e.message for e in effects if isinstance(e, Log)]
    assert any(m.startswith("auto-commit before revoking failed, retrying") for m in logs), logs
    assert s.member.next_deadline == pytest.approx(started + BACKOFF_S)
    s.feed(CoordinatorFound(node_id=1))
    assert "OffsetCommit" not in kinds(s.feed(Tick(), at=started + BACKOFF_S / 2))
    assert kinds(s.feed(Tick(), at=started + BACKOFF_S)) == ["OffsetCommit"]
    assert answers(s.answer(OffsetCommitRequest, commit_response(error_codes.NONE))) == [
        CommitDone(token="rc")
    ]


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        (error_codes.REBALANCE_IN_PROGRESS, RebalanceInProgressError),
        (error_codes.ILLEGAL_GENERATION, CommitFailedError),
        (error_codes.GROUP_AUTHORIZATION_FAILED, KafkaError),
    ],
)
def test_what_a_retry_cannot_cure_ends_the_commit_at_once(code: int, error_type: type) -> None:
    s = stable()
    retried(s)
    (done,) = answers(s.answer(OffsetCommitRequest, commit_response(code)))
    assert done.token == "rc"
    assert isinstance(done.error, error_type)


def test_an_attempt_unanswered_at_the_deadline_ends_with_a_timeout_and_its_answer_is_dropped() -> (
    None
):
    s = stable()
    retried(s)
    started = s.now
    assert not answers(s.feed(Tick(), at=started + TIMEOUT_S - 0.01))
    (done,) = answers(s.feed(Tick(), at=started + TIMEOUT_S))
    assert isinstance(done.error, RequestTimeoutError)
    assert str(done.error) == "no answer within 1.0s (default.api.timeout.ms)"
    assert not answers(s.answer(OffsetCommitRequest, commit_response(error_codes.NONE)))


def test_no_retry_starts_past_the_deadline_the_last_failure_is_the_answer() -> None:
    s = stable()
    retried(s)
    started = s.now
    s.now = started + TIMEOUT_S - BACKOFF_S  # a retry would start at the deadline
    (done,) = answers(s.answer(OffsetCommitRequest, commit_response(error_codes.NOT_COORDINATOR)))
    assert isinstance(done.error, KafkaError)
    assert done.error.retriable


def test_a_failed_commit_without_a_coordinator_is_retried_once_one_is_found() -> None:
    s = stable()
    s.heartbeat(error_codes.NOT_COORDINATOR)  # the member looks for its coordinator again
    effects = retried(s)
    assert not answers(effects)  # COORDINATOR_NOT_AVAILABLE at once: retried
    s.feed(CoordinatorFound(node_id=1))
    assert "OffsetCommit" in kinds(s.feed(Tick(), at=s.now + BACKOFF_S))


def test_auto_commit_falls_due_once_per_interval_and_once_until_the_next_poll() -> None:
    s = Script(auto_commit_interval_ms=1000)
    assert s.member.next_deadline is None
    s.subscribe()  # the first input arms the timer
    start = 0.0
    assert s.member.next_deadline is not None
    assert s.member.next_deadline <= start + 1.0
    assert AutoCommitDue() not in s.feed(Tick(), at=start + 0.99)
    assert AutoCommitDue() in s.feed(Tick(), at=start + 1.0)
    # Not polled since: no second one, however long the application takes.
    assert AutoCommitDue() not in s.feed(Tick(), at=start + 2.5)
    # The next poll finds it due at once (its time passed at 2.0) and restarts it.
    assert AutoCommitDue() in s.feed(PollCalled(), at=start + 2.6)
    assert s.member.next_deadline is not None
    assert AutoCommitDue() not in s.feed(PollCalled(), at=start + 3.5)
    assert AutoCommitDue() in s.feed(Tick(), at=start + 3.6)


def test_without_an_interval_no_auto_commit_falls_due() -> None:
    s = Script(enable_auto_commit=True)
    s.to_stable()
    for _ in range(3):
        s.feed(PollCalled())
        s.heartbeat()
    assert AutoCommitDue() not in s.history


def test_the_kip848_member_runs_the_same_commits() -> None:
    m = Member(auto_commit_interval_ms=500, retry_backoff_ms=100)
    m.stable(0, 1)
    effects = m.feed(
        RetriedCommitRequested(
            offsets={T0: OffsetAndMetadata(offset=3)}, token="rc", timeout_s=TIMEOUT_S
        )
    )
    assert "OffsetCommit" in kinds(effects)
    tick = m.feed(Tick(), after=TIMEOUT_S)
    (done,) = answers(tick)
    assert isinstance(done.error, RequestTimeoutError)
    assert AutoCommitDue() in tick
    m.feed(PollCalled())
    assert AutoCommitDue() in m.feed(Tick(), after=0.5)


def test_a_failure_that_repeats_is_logged_once_and_the_recovery_once() -> None:
    """Issue 35: with the coordinator gone, the same failure came back and was logged
    every retry.backoff.ms until the deadline (about 300 INFO lines in 30 s)."""
    s = stable()
    retried(s)
    logs: list[str] = []
    at = s.now
    for _ in range(5):
        effects = s.answer(
            OffsetCommitRequest, commit_response(error_codes.COORDINATOR_NOT_AVAILABLE)
        )
        logs += [e.message for e in effects if isinstance(e, Log) and "commit" in e.message]
        s.feed(CoordinatorFound(node_id=1))
        at += BACKOFF_S
        assert kinds(s.feed(Tick(), at=at)) == ["OffsetCommit"]
    effects = s.answer(OffsetCommitRequest, commit_response(error_codes.NOT_COORDINATOR))
    logs += [e.message for e in effects if isinstance(e, Log) and "commit" in e.message]
    s.feed(CoordinatorFound(node_id=1))
    at += BACKOFF_S
    s.feed(Tick(), at=at)
    effects = s.answer(OffsetCommitRequest, commit_response(error_codes.NONE))
    logs += [e.message for e in effects if isinstance(e, Log) and "commit" in e.message]
    assert answers(effects) == [CommitDone(token="rc")]
    assert len(logs) == 3, logs
    assert "COORDINATOR_NOT_AVAILABLE" in logs[0]
    assert "NOT_COORDINATOR" in logs[1]
    assert logs[2] == "auto-commit before revoking succeeded after retrying"
