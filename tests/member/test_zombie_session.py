"""A member stopped (SIGSTOP, a long GC pause, a suspended VM) past its session timeout
must learn it lost its partitions when it wakes up, before its next heartbeat answer.

Found by the reliability campaign's chaos run on Tansu (reliability/README.md): a
coopconsumer member woken 13.7 s into a 10 s session kept processing its partition for
almost 4 s while the member the partition had been handed to processed it too. The
member reads the answer of the heartbeat it sent just before it was stopped (the broker
answered at once; the bytes waited in the socket) and restarts its session timer from
the moment it *reads* that answer, so the lapsed session looks fresh. Tansu then answers
the next heartbeat with REBALANCE_IN_PROGRESS instead of UNKNOWN_MEMBER_ID
(docs/testing.md), and the member keeps its partitions through a cooperative rejoin.
librdkafka members in the same run lost their partitions on waking.

The timer can only be trusted from when the heartbeat was *sent*: the broker cannot
have seen the member later than that (``_member/classic/_stable.py``, ``heartbeat_outcome``).
"""

from __future__ import annotations

from _coord_script import HEARTBEAT_S, SESSION_S, Script, tps

from coopconsumer._member import InvokeListener, ListenerKind, PollCalled, Tick
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import HeartbeatRequest, HeartbeatResponse


def _woken_zombie(code: int) -> list[InvokeListener]:
    s = Script(cooperative=True, max_poll_interval_ms=600_000)
    s.to_stable()
    assert s.member.owned_partitions == tps("t-0", "t-1")
    sent_at = s.now + HEARTBEAT_S
    s.feed(Tick(), at=sent_at)  # the heartbeat goes out; then the process is stopped
    s.request(HeartbeatRequest)
    woke_at = sent_at + SESSION_S + 5  # the broker expired the member 5 s ago
    s.now = woke_at
    effects = s.answer(HeartbeatRequest, HeartbeatResponse(error_code=code))
    effects += s.feed(PollCalled(), at=woke_at)
    effects += s.feed(Tick(), at=woke_at)
    return [e for e in effects if isinstance(e, InvokeListener)]


def test_late_answer_to_a_heartbeat_does_not_revive_a_lapsed_session() -> None:
    assert [(e.kind, e.partitions) for e in _woken_zombie(error_codes.NONE)] == [
        (ListenerKind.LOST, tps("t-0", "t-1"))
    ]


def test_late_rebalance_in_progress_answer_does_not_revive_a_lapsed_session() -> None:
    # Tansu's answer to a heartbeat from a member it expired (docs/testing.md).
    listeners = _woken_zombie(error_codes.REBALANCE_IN_PROGRESS)
    assert [(e.kind, e.partitions) for e in listeners] == [(ListenerKind.LOST, tps("t-0", "t-1"))]
