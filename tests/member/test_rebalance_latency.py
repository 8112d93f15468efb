"""rebalance-latency-* as the driver feeds them: the member's Observe effects forwarded
to ``CoordinatorMetrics`` exactly as ``Driver`` does (``forward_observation``)."""

from __future__ import annotations

import pytest
from _coord_script import Script, tps

from coopconsumer._io._member_driver import forward_observation
from coopconsumer._member import LeaveRequested, Observation, Observe, Subscribe
from coopconsumer._metrics import CoordinatorMetrics
from coopconsumer._protocol.messages import JoinGroupRequest, SyncGroupRequest


def _forward_all(script: Script, metrics: CoordinatorMetrics, start: int) -> int:
    for effect in script.history[start:]:
        if isinstance(effect, Observe):
            forward_observation(metrics, effect)
    return len(script.history)


def test_a_rebalance_abandoned_by_an_unsubscribe_does_not_inflate_the_next() -> None:
    s = Script(cooperative=True)
    metrics = CoordinatorMetrics()
    s.subscribe()  # rebalance started at t=0
    s.feed(LeaveRequested(), at=1.0)  # abandoned while JoinGroup was in flight
    s.sends.clear()  # that JoinGroup's answer would be dropped as superseded
    seen = _forward_all(s, metrics, 0)
    s.now = 100.0
    s.feed(Subscribe(topics=frozenset({"t"})))  # a new rebalance starts at t=100
    s.now = 100.5
    s.answer(JoinGroupRequest, s.join_response())
    s.answer(SyncGroupRequest, s.sync_response(tps("t-0")))
    s.now = 101.0
    s.finish_listeners()
    completed = [
        e
        for e in s.history[seen:]
        if isinstance(e, Observe) and e.event is Observation.REBALANCE_COMPLETED
    ]
    assert [e.latency_s for e in completed] == [pytest.approx(1.0)]
    _forward_all(s, metrics, seen)
    snap = metrics.snapshot(101.0)
    # Before the driver forwarded the member's latency, the metrics timed this
    # rebalance from t=0 (the abandoned start they never saw end): 101 000 ms.
    assert snap["rebalance-latency-max"] == pytest.approx(1000.0)
    assert snap["rebalance-latency-total"] == pytest.approx(1000.0)
    assert snap["rebalance-total"] == 1.0
    assert snap["last-rebalance-seconds-ago"] == 0.0


def test_a_rebalance_completed_without_a_latency_still_uses_the_metrics_clock() -> None:
    metrics = CoordinatorMetrics()
    forward_observation(metrics, Observe(event=Observation.REBALANCE_STARTED, now=2.0))
    forward_observation(metrics, Observe(event=Observation.REBALANCE_COMPLETED, now=2.5))
    assert metrics.snapshot(3.0)["rebalance-latency-max"] == pytest.approx(500.0)


def test_a_mismatched_observation_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    metrics = CoordinatorMetrics()
    forward_observation(metrics, Observe(event=Observation.REBALANCE_COMPLETED, now=1.0))
    assert "metrics observation" in caplog.text
    assert metrics.snapshot(1.0)["rebalance-total"] == 0.0
