"""Graceful hand-overs commit what the member processed (issue 4), on in-process fakes.

The fake group coordinator follows Kafka: it refuses an OffsetCommit while the group
completes a rebalance (REBALANCE_IN_PROGRESS) and waits for every member to rejoin up
to the rebalance timeout. These tests put a cooperative member in the two situations in
which it used to give partitions up without committing them -- close() or unsubscribe()
while its JoinGroup is parked, and a commit-before-revoke that met a coordinator error
-- and check that the next owner starts after the last record the member processed.

A member is held in JOINING deterministically: a second member whose strategy list
``cooperative-sticky,range`` makes it EAGER must revoke everything on its polling
thread before it can rejoin, and the test does not poll it, so the coordinator keeps
the rebalance open (up to the rebalance timeout) with the first member's JoinGroup
parked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from _consumer_fakes import FakeCluster

from coopconsumer import Consumer, RebalanceListener, TopicPartition
from coopconsumer._member import CommitBeforeRevoke, MemberState
from coopconsumer._member.kip848 import ConsumerMemberState
from coopconsumer._protocol import error_codes

GROUP = "g"
TOPIC = "t"
RECORDS = 5
PATIENCE_S = 15.0
TPS = frozenset(TopicPartition(TOPIC, p) for p in range(4))
OFFSET_COMMIT = 8


def settings(**extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "group.id": GROUP,
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 3000,
        "heartbeat.interval.ms": 100,
        # The rebalance timeout: how long an unpolled EAGER member holds a rebalance.
        "max.poll.interval.ms": 4000,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        # No periodic commit during the test: only the hand-over commits count.
        "auto.commit.interval.ms": 600_000,
        # unsubscribe() may wait half of it for a rebalance under way (close(): half of
        # its own timeout); longer than the 4 s the unpolled member holds one.
        "default.api.timeout.ms": 12000,
    }
    base.update(extra)
    return base


class Owned(RebalanceListener):
    """What one member owns, from its callbacks."""

    def __init__(self) -> None:
        self.owned: set[TopicPartition] = set()
        self.kinds: list[str] = []

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.kinds.append("assigned")
        self.owned |= partitions

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.kinds.append("revoked")
        self.owned -= partitions

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.kinds.append("lost")
        self.owned -= partitions


class Processed:
    """Offsets each member processed, per partition."""

    def __init__(self) -> None:
        self.by: dict[str, dict[TopicPartition, list[int]]] = {}

    def poll(self, name: str, consumer: Consumer, max_records: int = 100) -> None:
        mine = self.by.setdefault(name, {})
        for m in consumer.consume(max_records, 0.02):
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            assert topic is not None
            assert partition is not None
            assert offset is not None
            mine.setdefault(TopicPartition(topic, partition), []).append(offset)

    def read_to(self, offset: int) -> bool:
        """Whether every partition has been read up to ``offset``, by any member."""
        last: dict[TopicPartition, int] = {}
        for offsets in self.by.values():
            for tp, values in offsets.items():
                last[tp] = max(last.get(tp, -1), *values)
        return all(last.get(tp, -1) >= offset for tp in TPS)

    def twice(self) -> list[tuple[TopicPartition, int]]:
        seen: dict[tuple[TopicPartition, int], int] = {}
        for offsets in self.by.values():
            for tp, values in offsets.items():
                for offset in values:
                    seen[(tp, offset)] = seen.get((tp, offset), 0) + 1
        return sorted(key for key, n in seen.items() if n > 1)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    c = FakeCluster(GROUP, {TOPIC: 4})
    for tp in sorted(TPS):
        c.produce(tp, [f"{tp.partition}-{i}".encode() for i in range(RECORDS)])
    yield c
    c.close_all()
    alive = [t.name for t in threading.enumerate() if t.name == "coopconsumer-driver"]
    assert alive == []


def until(condition: Callable[[], bool], step: Callable[[], None], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        step()


def reading_everything(
    cluster: FakeCluster, processed: Processed, **extra: object
) -> tuple[Consumer, Owned]:
    """Member "a" (``settings(**extra)``), polled until it owns every partition and has
    read every record."""
    owned = Owned()
    a, _ = cluster.consumer(settings(**extra))
    a.subscribe([TOPIC], owned)

    def read_all() -> bool:
        mine = processed.by.get("a", {})
        return owned.owned == TPS and all(len(mine.get(tp, ())) == RECORDS for tp in TPS)

    until(read_all, lambda: processed.poll("a", a), '"a" reading every partition')
    return a, owned


def state(consumer: Consumer) -> MemberState | ConsumerMemberState:
    return consumer._driver.state


@pytest.mark.parametrize("leave", ["close", "unsubscribe"])
def test_leaving_while_joining_commits_the_positions_of_the_partitions_it_gives_up(
    cluster: FakeCluster, leave: str
) -> None:
    processed = Processed()
    a_owned, b_owned = Owned(), Owned()
    a, _ = cluster.consumer(settings())
    b, _ = cluster.consumer(
        settings(**{"partition.assignment.strategy": "cooperative-sticky,range"})
    )
    a.subscribe([TOPIC], a_owned)
    b.subscribe([TOPIC], b_owned)

    def both() -> None:
        processed.poll("a", a)
        processed.poll("b", b)

    def settled() -> bool:
        if not (a_owned.owned and b_owned.owned and a_owned.owned | b_owned.owned == TPS):
            return False
        if state(a) is not MemberState.STABLE or state(b) is not MemberState.STABLE:
            return False
        return processed.read_to(RECORDS - 1)

    until(settled, both, "two members owning and having read every partition")
    kept = frozenset(a_owned.owned)
    # The first member may have read every record before the second joined: one more
    # record per partition, read by its owner now, gives "a" a position of its own in
    # each partition it keeps (one only its leave commit can store).
    for tp in sorted(TPS):
        cluster.produce(tp, [b"settled"])
    until(lambda: processed.read_to(RECORDS), both, "the owners reading one more record")
    assert state(a) is MemberState.STABLE
    assert state(b) is MemberState.STABLE
    assert a_owned.owned == kept
    # "b" only holds the rebalance open: it is not polled again, its poll timeout
    # expires and the group moves its partitions on without a commit from it. What it
    # read is committed now, so that its next owners do not read those records again
    # (whether it read any depends on which member joined first).
    b.commit()

    # A third member joins; "b" is not polled, so it cannot revoke (EAGER) and rejoin:
    # the coordinator keeps the rebalance open and "a"'s JoinGroup stays parked.
    c, _ = cluster.consumer(settings())
    c_owned = Owned()
    c.subscribe([TOPIC], c_owned)

    def a_and_c() -> None:
        processed.poll("a", a)
        processed.poll("c", c)

    until(lambda: state(a) is MemberState.JOINING, a_and_c, '"a" rejoining')
    assert cluster.coordinator.phase.name == "PREPARING_REBALANCE"
    positions = {tp: max(processed.by["a"][tp]) + 1 for tp in kept}
    if leave == "close":
        a.close()
    else:
        a.unsubscribe()
        assert a.assignment() == frozenset()

    # Kafka (and the fake) accept the commit of the generation in force while the
    # group prepares its rebalance: the next owner starts after what "a" processed.
    committed = cluster.coordinator.committed_offsets()
    assert {tp: committed.get(tp) for tp in kept} == positions

    # Let the group finish without "a": "b" and "c" take everything; nothing is read
    # twice by anyone.
    for tp in sorted(TPS):
        cluster.produce(tp, [b"after"])

    def b_and_c() -> None:
        processed.poll("b", b)
        processed.poll("c", c)

    def drained() -> bool:
        done: dict[TopicPartition, list[int]] = {}
        for name in ("b", "c"):
            for tp, offsets in processed.by.get(name, {}).items():
                done.setdefault(tp, []).extend(offsets)
        return all(RECORDS + 1 in done.get(tp, ()) for tp in TPS)

    until(drained, b_and_c, "the rest of the group reading the new records")
    assert processed.twice() == []


def test_commit_before_revoke_is_retried_after_a_coordinator_error(
    cluster: FakeCluster,
) -> None:
    processed = Processed()
    a, a_owned = reading_everything(cluster, processed)

    # The commit "a" makes before handing partitions to "b" meets NOT_COORDINATOR
    # once (the coordinator moved, or is loading): retried, it succeeds.
    cluster.coordinator.fail_next(OFFSET_COMMIT, error_codes.NOT_COORDINATOR)
    b_owned = Owned()
    b, _ = cluster.consumer(settings())
    b.subscribe([TOPIC], b_owned)

    def both() -> None:
        processed.poll("a", a)
        processed.poll("b", b)

    def handed_over() -> bool:
        return (
            bool(b_owned.owned)
            and a_owned.owned | b_owned.owned == TPS
            and state(a) is MemberState.STABLE
            and state(b) is MemberState.STABLE
        )

    until(handed_over, both, '"a" handing partitions to "b"')
    assert "revoked" in a_owned.kinds
    moved = frozenset(b_owned.owned)
    committed = cluster.coordinator.committed_offsets()
    assert {tp: committed.get(tp) for tp in moved} == dict.fromkeys(moved, RECORDS)

    for tp in sorted(TPS):
        cluster.produce(tp, [b"after"])

    def b_read_on() -> bool:
        done = processed.by.get("b", {})
        return all(RECORDS in done.get(tp, ()) for tp in moved)

    until(b_read_on, both, '"b" reading the partitions it took over')
    assert processed.twice() == []


def test_poll_keeps_its_timeout_while_the_commit_before_revoking_is_retried(
    cluster: FakeCluster,
) -> None:
    # The commit before revoking gets no answer twice (each times out after
    # request.timeout.ms, then is retried after retry.backoff.ms). poll() used to
    # sleep and wait through all of it on the caller's thread; now each poll() keeps
    # its timeout, the REVOKED callback runs only once the commit stands, and no record
    # of a partition being revoked is returned after its position was taken.
    processed = Processed()
    a, a_owned = reading_everything(
        cluster, processed, **{"request.timeout.ms": 400, "retry.backoff.ms": 200}
    )
    cluster.coordinator.drop_next(OFFSET_COMMIT, count=2)
    b_owned = Owned()
    b, _ = cluster.consumer(settings())
    b.subscribe([TOPIC], b_owned)
    worst = 0.0

    def both() -> None:
        nonlocal worst
        began = time.monotonic()
        a.poll(0.05)
        worst = max(worst, time.monotonic() - began - 0.05)
        processed.poll("b", b)

    def handed_over() -> bool:
        return bool(b_owned.owned) and a_owned.owned | b_owned.owned == TPS

    until(handed_over, both, '"a" handing partitions to "b" after two lost commits')
    assert worst < 0.3, f"poll(0.05) overran by {worst:.3f} s"
    moved = frozenset(b_owned.owned)
    committed = cluster.coordinator.committed_offsets()
    assert {tp: committed.get(tp) for tp in moved} == dict.fromkeys(moved, RECORDS)
    for tp in sorted(TPS):
        cluster.produce(tp, [b"after"])

    def b_read_on() -> bool:
        done = processed.by.get("b", {})
        return all(RECORDS in done.get(tp, ()) for tp in moved)

    until(b_read_on, both, '"b" reading the partitions it took over')
    assert processed.twice() == []


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_no_record_of_a_revoked_partition_flows_while_its_commit_runs(
    cluster: FakeCluster, strategy: str
) -> None:
    # librdkafka's position() is OFFSET_INVALID until a partition returns its first
    # record (the fake answers the same), so the commit before revoking leaves such a
    # partition out. It used to pause only the partitions it committed: the others
    # kept returning records while the commit ran (poll() goes on meanwhile), nobody
    # committed those, and their next owner read them again (issue 25, item 3: the
    # EAGER scale test on Tansu). Here "a" has returned a record of partition 2 only
    # when "b" joins; an EAGER "a" revokes all four partitions, a cooperative one 2
    # and 3 (sticky keeps the lowest numbers). "a"'s driver thread is held while it
    # polls, so the commit stays unanswered for those polls.
    processed = Processed()
    a_owned = Owned()
    config = {"partition.assignment.strategy": strategy}
    a, a_client = cluster.consumer(settings(**config))
    a.subscribe([TOPIC], a_owned)
    p2 = TopicPartition(TOPIC, 2)
    others = TPS - {p2}
    a.pause(others)  # applied as they start: only partition 2 returns a record
    until(
        lambda: processed.by.get("a", {}).get(p2) == [0],
        lambda: processed.poll("a", a, max_records=1),
        '"a" reading the first record of partition 2',
    )
    a.resume(others)
    assert a_owned.owned == TPS
    assert a.position(TPS) == {**dict.fromkeys(others), p2: 1}
    b_owned = Owned()
    b, _ = cluster.consumer(settings(**config))
    b.subscribe([TOPIC], b_owned)
    # "a" is not polled until its commit before revoking is queued.
    until(lambda: a._driver.has_app_work, lambda: processed.poll("b", b), '"a" to revoke')
    revoking = TPS if strategy == "range" else frozenset(TopicPartition(TOPIC, p) for p in (2, 3))
    mine = processed.by["a"]
    before = {tp: len(offsets) for tp, offsets in mine.items()}
    a_client.hang.set()
    try:
        for _ in range(5):
            processed.poll("a", a)
    finally:
        a_client.hang.clear()
    assert a_owned.kinds[-1] == "assigned"  # the REVOKED callback waits for the commit
    returned = {tp for tp, offsets in mine.items() if len(offsets) > before.get(tp, 0)}
    assert returned.isdisjoint(revoking), f"returned while committing: {sorted(returned)}"

    def both() -> None:
        processed.poll("a", a)
        processed.poll("b", b)

    def handed_over() -> bool:
        return bool(b_owned.owned) and a_owned.owned | b_owned.owned == TPS

    until(handed_over, both, '"a" handing partitions to "b"')
    for tp in sorted(TPS):
        cluster.produce(tp, [b"after"])

    def all_read() -> bool:
        return all(
            any(RECORDS in offsets.get(tp, ()) for offsets in processed.by.values()) for tp in TPS
        )

    until(all_read, both, "every partition read to its end by its owner")
    assert processed.twice() == []


def test_a_lookup_answered_while_the_commit_before_revoking_runs_starts_its_partition_paused(
    cluster: FakeCluster,
) -> None:
    # The window next to the one above: a partition being revoked whose committed
    # offset was still being looked up when the commit before revoking began is not in
    # the fetcher then, so that commit could not pause it; the lookup's answer, applied
    # by a poll() while the commit runs, started it fetching, and its records flowed
    # uncommitted until the REVOKED callback. Driven step by step on the poll() side
    # (no poll, so the commit stays running for the consumer).
    a, _ = cluster.consumer(settings())
    fetcher = cluster.fetchers[-1]
    p0, p1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    a._core.positions.assigned |= {p0, p1}
    fetcher.assign({p0: 0})
    assert [m.offset() for m in fetcher.consume(1, 0.0)] == [0]
    a._core.positions.unpositioned.add(p1)  # its lookup is in flight
    a._core.do(CommitBeforeRevoke(partitions=frozenset({p0, p1})))
    assert a._core.revoke_commit is not None
    # The lookup's answer: no committed offset, so earliest, asked of p1's leader.
    a._core.positions.start_fetching({p1: None})
    reset = a._core.positions.waiting
    assert reset is not None
    reset.result(timeout=10.0)
    assert a._core.positions.check_lookup()
    a._core.flush_starts()
    assert p1 in fetcher.assigned
    assert fetcher.consume(10, 0.0) == []  # neither partition being revoked flows
    until(lambda: a._core.revoke_commit is None, a._core.run_app_work, "the commit to end")
    assert fetcher.consume(1, 0.0) != []  # resumed when it ends (no REVOKED here)
    a.close()


def test_close_stops_waiting_as_soon_as_the_commit_before_revoking_is_answered(
    cluster: FakeCluster,
) -> None:
    # close() waits on the driver's condition while its commit before revoking runs.
    # That wait used to end only on published app work or at the end of a 50 ms slice,
    # so every close, and the LeaveGroup the rest of the group waits for, came up to
    # 50 ms late (issue 24, the "all owned after leave" row). The predicate of every
    # such wait must already be true when the commit's future is answered.
    processed = Processed()
    a, owned = reading_everything(cluster, processed)
    driver = a._driver
    original = driver.wait_for
    at_answer: list[bool] = []

    def spying_wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
        commit = a._core.revoke_commit
        if commit is not None:
            # Runs on the thread that answers the future (or here, if answered).
            commit.future.add_done_callback(lambda _f: at_answer.append(predicate()))
        return original(predicate, timeout_s)

    driver.wait_for = spying_wait_for  # type: ignore[method-assign]
    a.close()
    assert at_answer, "close() never waited for its commit before revoking"
    assert all(at_answer)
    committed = cluster.coordinator.committed_offsets()
    assert {tp: committed.get(tp) for tp in TPS} == dict.fromkeys(TPS, RECORDS)
    assert owned.kinds[-1] == "revoked"
