"""The chaos campaign's ledger checker (reliability/chaos.py) on hand-written ledgers:
it must see an overlap, a zombie window, a lost record and each duplicate cause."""

from __future__ import annotations

from typing import Any

from reliability.chaos import check

T = "orders"


def ev(t: float, kind: str, **fields: Any) -> dict[str, Any]:
    return {"t": t, "ev": kind, **fields}


def rec(t: float, key: str, partition: int, offset: int) -> dict[str, Any]:
    return ev(t, "record", tp=[T, partition], off=offset, key=key, owned=True)


def acked(*keys: tuple[str, int, int]) -> dict[str, tuple[tuple[str, int], int]]:
    return {key: ((T, p), off) for key, p, off in keys}


def test_clean_hand_over_has_no_overlap_gap_or_duplicate() -> None:
    ledgers = {
        "a": [
            ev(1, "assigned", tps=[[T, 0]]),
            rec(2, "k0", 0, 0),
            ev(3, "commit_ok", offsets=[[T, 0, 1]]),
            ev(4, "revoked", tps=[[T, 0]]),
            ev(9, "exit"),
        ],
        "b": [ev(4.5, "assigned", tps=[[T, 0]]), rec(5, "k1", 0, 1), ev(9, "exit")],
    }
    figures = check(ledgers, [], acked(("k0", 0, 0), ("k1", 0, 1)), 8.0, 10.0)
    assert figures["overlaps"] == []
    assert figures["lost_records"] == []
    assert figures["duplicates"] == 0
    assert round(figures["longest_gap"][0], 3) == 0.5


def test_two_running_owners_at_once_is_an_overlap() -> None:
    ledgers = {
        "a": [ev(1, "assigned", tps=[[T, 0]]), ev(5, "revoked", tps=[[T, 0]]), ev(9, "exit")],
        "b": [ev(4, "assigned", tps=[[T, 0]]), ev(9, "exit")],
    }
    figures = check(ledgers, [], {}, 8.0, 10.0)
    assert len(figures["overlaps"]) == 1
    assert "a (revoked) and b" in figures["overlaps"][0]


def test_zombie_is_not_an_owner_while_stopped_but_its_wake_up_window_is_reported() -> None:
    runner = [ev(2, "zombie", target="a"), ev(6, "cont", target="a")]
    ledgers = {
        "a": [
            ev(1, "assigned", tps=[[T, 0]]),
            rec(1.5, "k0", 0, 0),
            ev(7, "lost", tps=[[T, 0]]),
            ev(9, "exit"),
        ],
        "b": [ev(4, "assigned", tps=[[T, 0]]), rec(4.5, "k0", 0, 0), ev(9, "exit")],
    }
    figures = check(ledgers, runner, acked(("k0", 0, 0)), 8.0, 10.0)
    assert figures["overlaps"] == []
    assert len(figures["zombie_overlaps"]) == 1
    assert figures["dup_causes"] == {"lost generation (SIGSTOP)": 1}
    assert round(figures["longest_gap"][0], 3) == 2.0  # stopped at 2, b assigned at 4


def test_record_nobody_processed_is_lost_only_when_a_commit_passed_it() -> None:
    def ledgers(committed: int) -> dict[str, list[dict[str, Any]]]:
        return {
            "a": [
                ev(1, "assigned", tps=[[T, 0]]),
                rec(2, "k0", 0, 0),
                ev(3, "commit_ok", offsets=[[T, 0, committed]]),
                ev(9, "exit"),
            ]
        }

    produced = acked(("k0", 0, 0), ("k1", 0, 1))
    skipped = check(ledgers(2), [], produced, 8.0, 10.0)
    assert (skipped["lost_records"], skipped["unconsumed"]) == (["k1"], 0)
    stalled = check(ledgers(1), [], produced, 8.0, 10.0)
    assert (stalled["lost_records"], stalled["unconsumed"]) == ([], 1)


def test_duplicate_causes() -> None:
    def owner_then_b(*middle: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        return {
            "a": [ev(1, "assigned", tps=[[T, 0]]), rec(2, "k0", 0, 0), *middle],
            "b": [ev(6, "assigned", tps=[[T, 0]]), rec(7, "k0", 0, 0), ev(9, "exit")],
        }

    one = acked(("k0", 0, 0))
    failed = owner_then_b(
        ev(3, "commit_fail", offsets=[[T, 0, 1]], err="x"), ev(5, "revoked", tps=[[T, 0]])
    )
    assert check(failed, [], one, 8, 10)["dup_causes"] == {"failed commit": 1}
    lost = owner_then_b(ev(5, "lost", tps=[[T, 0]]))
    assert check(lost, [], one, 8, 10)["dup_causes"] == {"lost generation (on_partitions_lost)": 1}
    killed = owner_then_b()
    figures = check(killed, [ev(4, "kill", target="a")], one, 8, 10)
    assert figures["dup_causes"] == {"lost generation (SIGKILL)": 1}
    committed = owner_then_b(
        ev(3, "commit_ok", offsets=[[T, 0, 1]]), ev(5, "revoked", tps=[[T, 0]])
    )
    figures = check(committed, [], one, 8, 10)
    assert figures["dup_causes"] == {"unexplained": 1}
    assert figures["unexplained"] == ["k0 orders[0]@0: a then b"]
