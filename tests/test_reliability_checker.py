"""The chaos campaign's ledger checker (reliability/chaos.py) on hand-written ledgers:
it must see an overlap, a zombie window, a lost record and each duplicate cause."""

from __future__ import annotations

from typing import Any

from reliability.chaos import check
from reliability.eos_chaos import check_copies, plan

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


# ---------------------------------------------------------------------- exactly-once run


def test_eos_copies_count_duplicates_missing_and_strangers_per_input_record() -> None:
    inputs = {(0, 0): b"k0", (0, 1): b"k1", (1, 0): b"k2", (1, 1): b"k2"}
    outputs = [
        (b"k0", b"0:0:1"),
        (b"k0", b"0:0:2"),  # the same input record again, by another slot
        (b"k2", b"1:0:1"),
        (b"k2", b"1:1:1"),
        (b"k9", b"0:1:1"),  # names input 0:1, whose key is k1: not a copy of it
        (b"k1", b"garbage"),
    ]
    copies = check_copies(inputs, outputs)
    assert copies.inputs == 4
    assert copies.outputs == 6
    assert copies.duplicated == ((0, 0),)
    assert copies.extra_copies == 1
    assert copies.missing == ((0, 1),)
    assert copies.unknown == 2
    assert copies.repeated_keys == 2  # two input records share k2; each counts apart
    assert copies.duplicate_writers == {"slot 1+slot 2": 1}


def test_eos_schedule_is_the_same_for_a_seed_and_keeps_the_slot_limits() -> None:
    schedule = plan(2511, 150, initial_slots=3, max_slots=5, min_running=2)
    assert schedule == plan(2511, 150, initial_slots=3, max_slots=5, min_running=2)
    assert schedule != plan(2512, 150, initial_slots=3, max_slots=5, min_running=2)
    assert len(schedule) == 150
    assert [e.at for e in schedule] == sorted(e.at for e in schedule)
    # Replay the plan's own model: a slot is taken out only while running, never
    # below two running, never above five slots.
    running: set[int | None] = {0, 1, 2}
    back: dict[int | None, float] = {}
    for event in schedule:
        for slot, when in list(back.items()):
            if when <= event.at:
                running.add(slot)
                del back[slot]
        if event.kind in ("kill", "kill-late", "zombie", "pause", "scale-in"):
            assert event.slot in running
            assert len(running) > 2
            running.discard(event.slot)
            if event.kind != "scale-in":
                back[event.slot] = event.at + event.params.get(
                    "restart_after", event.params.get("seconds", 0)
                )
        elif event.kind == "scale-out":
            assert event.slot not in running
            assert event.slot not in back
            running.add(event.slot)
        assert len(running) + len(back) <= 5
    kinds = {e.kind for e in schedule}
    assert {"kill", "zombie", "scale-out", "scale-in", "fatal", "txn-abortable"} <= kinds


def test_eos_kip848_schedule_never_moves_a_partition() -> None:
    schedule = plan(7, 100, row="kip848", initial_slots=1, max_slots=1, min_running=1)
    assert {e.kind for e in schedule} <= {
        "pause",
        "txn-retriable",
        "coordinator-move",
        "broker-down",
        "heartbeat-retriable",
        "conn-cut",
    }
    assert all(e.params["seconds"] < 10 for e in schedule if e.kind == "pause")
