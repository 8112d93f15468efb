"""Unit tests of the integration tests' ownership ledger and record accounting.

No broker: the ledger and the accounting are fed by hand, from several threads where
thread safety matters.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import TopicPartition as CKTP

from coopconsumer import TopicPartition
from integration._ledger import OwnershipLedger, RecordAccounting, rdkafka_callbacks

T0, T1, T2 = (TopicPartition("t", n) for n in range(3))


def test_hand_over_through_revoke_is_clean() -> None:
    ledger = OwnershipLedger()
    ledger.assigned("a", [T0, T1])
    ledger.revoked("a", [T1])
    ledger.assigned("b", [T1])
    ledger.record_received("b", T1)
    ledger.record_received("a", T0)
    assert ledger.owners() == {T0: "a", T1: "b"}
    assert ledger.owned_by("a") == frozenset({T0})
    assert ledger.all_owned([T0, T1])
    assert not ledger.all_owned([T2])
    ledger.check()


def test_double_ownership_is_a_violation_at_once() -> None:
    ledger = OwnershipLedger()
    ledger.assigned("a", [T0])
    ledger.assigned("b", [T0])
    assert ledger.violations == [f"{T0} assigned to b while owned by a"]
    with pytest.raises(AssertionError, match="1 ownership violation"):
        ledger.check()


def test_strict_ledger_raises_from_the_feeding_call() -> None:
    ledger = OwnershipLedger(strict=True)
    ledger.assigned("a", [T0])
    with pytest.raises(AssertionError, match="owned by a"):
        ledger.assigned("b", [T0])


@pytest.mark.parametrize("kind", ["revoked", "lost"])
def test_giving_up_what_is_not_owned_is_a_violation(kind: str) -> None:
    ledger = OwnershipLedger()
    ledger.assigned("a", [T0])
    getattr(ledger, kind)("b", [T0])
    assert ledger.violations == [f"b {kind} {T0}, owned by a"]
    assert ledger.owners() == {T0: "a"}


def test_record_of_an_unowned_partition_is_a_violation() -> None:
    ledger = OwnershipLedger()
    ledger.assigned("a", [T0])
    ledger.record_received("b", T0)
    ledger.record_received("a", T1)
    assert len(ledger.violations) == 2


def test_forget_drops_a_killed_member_and_removed_since_filters() -> None:
    ledger = OwnershipLedger()
    ledger.assigned("a", [T0, T1])
    ledger.lost("a", [T1])
    since = ledger.events()[-1].at
    assert ledger.removed_since("a", since) == frozenset({T1})
    assert ledger.removed_since("a", since, kinds=("revoked",)) == frozenset()
    assert ledger.forget("a") == frozenset({T0})
    ledger.assigned("b", [T0, T1])
    ledger.check()


def test_concurrent_members_never_lose_an_update() -> None:
    ledger = OwnershipLedger()
    partitions = [TopicPartition("t", n) for n in range(400)]

    def churn(member: str, mine: list[TopicPartition]) -> None:
        for _ in range(20):
            ledger.assigned(member, mine)
            ledger.revoked(member, mine)
        ledger.assigned(member, mine)

    threads = [threading.Thread(target=churn, args=(f"m{i}", partitions[i::4])) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ledger.check()
    assert len(ledger.owners()) == 400


def test_rdkafka_eager_callbacks_translate_full_assignments() -> None:
    ledger = OwnershipLedger()
    eager = rdkafka_callbacks(ledger, "r", incremental=False)
    eager["on_revoke"](None, [])
    eager["on_assign"](None, [CKTP("t", 0), CKTP("t", 1)])
    eager["on_revoke"](None, [CKTP("t", 0), CKTP("t", 1)])
    eager["on_assign"](None, [CKTP("t", 1)])
    assert ledger.owners() == {T1: "r"}
    ledger.check()


def test_accounting_finds_lost_duplicate_and_backward_commits() -> None:
    accounting = RecordAccounting()
    accounting.produced(b"k0", T0, 0)
    accounting.produced(b"k1", T0, 1)
    accounting.produced(b"k2", T1, 0)
    accounting.consumed("a", b"k0", T0, 0)
    accounting.consumed("b", b"k0", T0, 0)
    accounting.consumed("a", b"k1", T0, 1)
    accounting.committed("a", {T0: 2})
    accounting.committed("b", {T0: 1})
    assert accounting.missing() == [b"k2"]
    assert accounting.duplicates() == 1
    assert accounting.consumed_by() == {"a": 2, "b": 1}
    assert accounting.end_offsets() == {T0: 2, T1: 1}
    assert accounting.last_committed() == {T0: 2}
    [violation] = accounting.violations
    assert violation.startswith(f"committed offset of {T0} went back from 2 (a at ")
    assert "to 1 (b as of " in violation
    with pytest.raises(AssertionError) as info:
        accounting.check(allow_duplicates=False)
    text = str(info.value)
    for expected in ("never processed", "more than once", "went back", "last committed None"):
        assert expected in text


def test_accounting_clean_run_passes() -> None:
    accounting = RecordAccounting()
    for n in range(10):
        accounting.produced(f"k{n}".encode(), T0, n)
        accounting.consumed("a", f"k{n}".encode(), T0, n)
    accounting.committed("a", {T0: 5})
    accounting.committed("a", {T0: 10})
    accounting.check(allow_duplicates=False)


def test_observer_reads_are_judged_as_of_when_they_were_sent() -> None:
    accounting = RecordAccounting()
    sent_before = time.monotonic()
    accounting.committed("m", {T0: 10})
    # An answer to a read sent before the commit was acknowledged may predate it.
    accounting.committed("watcher", {T0: 5}, as_of=sent_before)
    assert accounting.violations == []
    # A read sent after the acknowledgement must see it.
    accounting.committed("watcher", {T0: 5}, as_of=time.monotonic())
    assert len(accounting.violations) == 1
    assert accounting.last_committed() == {T0: 10}
