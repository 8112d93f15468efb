"""The broker-kill schedule of the exactly-once chaos run on Apache Kafka
(reliability/eos_kafka.py): pure, seeded, aimed at every role; and the command line's
choices per broker."""

from __future__ import annotations

from collections import Counter

import pytest
from reliability.eos_chaos import main
from reliability.eos_kafka import ROLES, plan_broker_kills


def test_kill_schedule_is_the_same_for_a_seed_and_aims_at_every_role() -> None:
    first = plan_broker_kills(3401, 200, lanes=6, slots=2, gap_s=4.0)
    assert first == plan_broker_kills(3401, 200, lanes=6, slots=2, gap_s=4.0)
    assert first != plan_broker_kills(3402, 200, lanes=6, slots=2, gap_s=4.0)
    assert len(first) == 200
    assert {e.kind for e in first} == {"broker-kill"}
    roles = Counter(e.params["role"] for e in first)
    assert set(roles) == set(ROLES)
    assert roles["group-coordinator"] > roles["other"]
    for event in first:
        assert 0 <= event.params["lane"] < 6
        assert 0 <= event.params["slot"] < 2
        assert 0.5 <= event.params["restart_after"] <= 3.0
        assert 2.0 <= event.params["gap"] <= 6.0
    # ``at`` adds up the planned gaps.
    assert first[-1].at == pytest.approx(sum(e.params["gap"] for e in first), abs=0.5)


def test_java_loop_and_both_rows_are_refused_on_tansu() -> None:
    with pytest.raises(SystemExit):
        main(["--broker", "tansu", "--impl", "java", "--events", "1"])
    with pytest.raises(SystemExit):
        main(["--broker", "tansu", "--row", "both", "--events", "1"])
