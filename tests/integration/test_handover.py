"""A member closed in the middle of a cooperative rebalance hands its partitions over
without anyone processing a record twice (issue 4), on real brokers.

The interleaving behind the duplicates seen in ``coopconsumer demo`` (cooperative run,
a member stopped while its JoinGroup was parked): a cooperative member keeps returning
records of the partitions it owns while its JoinGroup waits (KIP-429), auto-commit
cannot run in that state, and leaving then reports the partitions lost, as Java's
``onLeavePrepare`` does, without committing. The consumer now commits the consumed
positions before it leaves.

Four members: "l" leads, "a" is the one closed, "c" joins to start the rebalance, and
"b" holds it open deterministically: "b" is EAGER
(``cooperative-sticky,range``), and its ``on_partitions_revoked`` blocks until the test
lets it go, so "b" cannot rejoin and the broker keeps "a"'s JoinGroup parked (Tansu
parks every JoinGroup for at least a second anyway). The test waits until "a" is
joining *and* has processed a record since, then closes it: close() lets the rebalance
reach the SyncGroup answer and commits there (a commit sent while the JoinGroup is
parked would be answered after it, for a generation that is gone). "b" commits before
its callback runs (auto-commit before revoking) and reads nothing while held. "b" is
let go once "a" waits in close(): Kafka's join waits for every member, so holding "b"
until close() returned would leave "a" nothing to wait for but its deadline.

librdkafka's mock refuses every OffsetCommit while a rebalance is joining (its
``rd_kafka_mock_cgrp_check_state``), where Kafka accepts the current generation's: the
EAGER member "b" cannot commit before it revokes, so the records it read since its last
commit are read again; the test is skipped there (the EAGER scale test in
test_rebalance.py pins that quirk as a strict xfail).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from coopconsumer import Consumer, RebalanceListener, TopicPartition
from coopconsumer._member import MemberState
from coopconsumer._member.kip848 import ConsumerMemberState
from coopconsumer.testing import EmbeddedBroker
from integration._ledger import KeyProducer, OwnershipLedger, RecordAccounting, late_sync_on_mock

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 4
PATIENCE_S = 60.0


def _settings(broker: EmbeddedBroker, group: str, strategy: str) -> dict[str, object]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "partition.assignment.strategy": strategy,
        "session.timeout.ms": 4000,
        "heartbeat.interval.ms": 300,
        # The rebalance timeout: how long the broker waits for the held member.
        "max.poll.interval.ms": 20000,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 500,
    }


class _Listener(RebalanceListener):
    """Feeds the ledger; ``hold`` (when set) blocks ``on_partitions_revoked`` after
    the ledger saw the revocation, until it is released."""

    def __init__(self, ledger: OwnershipLedger, name: str) -> None:
        self.ledger = ledger
        self.name = name
        self.kinds: list[str] = []
        self.hold: threading.Event | None = None
        self.held = threading.Event()

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.kinds.append("assigned")
        self.ledger.assigned(self.name, partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.kinds.append("revoked")
        self.ledger.revoked(self.name, partitions)
        hold = self.hold
        if hold is not None and partitions:
            self.held.set()
            hold.wait(PATIENCE_S)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.kinds.append("lost")
        self.ledger.lost(self.name, partitions)


class _Polled:
    """One consumer with its ledger listener, polled by whoever calls ``poll``."""

    def __init__(
        self,
        name: str,
        settings: dict[str, object],
        topic: str,
        ledger: OwnershipLedger,
        accounting: RecordAccounting,
    ) -> None:
        self.name = name
        self.ledger = ledger
        self.accounting = accounting
        self.listener = _Listener(ledger, name)
        self.consumer = Consumer(settings)
        self.consumer.subscribe([topic], self.listener)
        self.processed = 0

    @property
    def state(self) -> MemberState | ConsumerMemberState:
        return self.consumer._driver.state

    def poll(self) -> None:
        try:
            records: list[Any] = self.consumer.consume(100, 0.05)
        except Exception as exc:
            if late_sync_on_mock(exc):
                return  # named mock quirk: reported once, the member rejoins
            raise
        for record in records:
            tp = TopicPartition(record.topic(), record.partition())
            self.ledger.record_received(self.name, tp)
            self.accounting.consumed(self.name, record.key(), tp, record.offset())
            self.processed += 1


class _Thread:
    """Polls a ``_Polled`` on its own thread until stopped (keeps the first error)."""

    def __init__(self, member: _Polled) -> None:
        self.member = member
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=member.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.member.poll()
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(PATIENCE_S)
        assert not self._thread.is_alive(), f"{self.member.name} did not stop"


class _LogSeen(logging.Handler):
    """Sets ``seen`` once a record of ``logger`` starts with ``prefix``."""

    def __init__(self, logger: str, prefix: str) -> None:
        super().__init__(logging.DEBUG)
        self.prefix = prefix
        self.seen = threading.Event()
        self._logger = logging.getLogger(logger)
        self._level = self._logger.level
        if not self._logger.isEnabledFor(logging.INFO):
            self._logger.setLevel(logging.INFO)
        self._logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.prefix):
            self.seen.set()

    def remove(self) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)


class _Closer:
    """Closes a member on a thread of its own (its callbacks run there), so that the
    test can go on polling the others meanwhile."""

    def __init__(self, member: _Polled) -> None:
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._member = member
        threading.Thread(target=self._run, name=f"close-{member.name}", daemon=True).start()

    def _run(self) -> None:
        try:
            self._member.consumer.close(timeout=20.0)
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()


def _until(
    condition: Any, step: Any, what: str, threads: list[_Thread], members: list[_Polled]
) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        for t in threads:
            assert t.error is None, f"{t.member.name} failed: {t.error!r}"
        if time.monotonic() >= deadline:
            seen = [(m.name, m.state.value, m.processed, m.listener.kinds) for m in members]
            owners = members[0].ledger.owners()
            raise AssertionError(f"timed out waiting for {what}: {seen}; owners {owners}")
        step()


def test_close_while_joining_hands_over_without_duplicates(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    if broker.kind == "mock":
        # Not an xfail: that ran a minute of the suite only to watch the quirk again
        # (test_rebalance's EAGER scale test already pins it as a strict xfail).
        pytest.skip(
            "librdkafka mock quirk: it refuses OffsetCommit (REBALANCE_IN_PROGRESS) while a "
            "rebalance is joining, where Kafka accepts the current generation's, so the EAGER "
            'member "b" cannot commit before revoking and must read records again'
        )
    broker.create_topic(unique_topic, partitions=PARTITIONS)
    everything = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
    ledger = OwnershipLedger()
    accounting = RecordAccounting()
    producer = KeyProducer(broker.bootstrap, unique_topic, PARTITIONS, accounting, rate=200.0)
    cooperative = _settings(broker, unique_group, "cooperative-sticky")
    # "l" joins first and leads (a COOPERATIVE leader: moved partitions wait a round);
    # it stays to the end, since Tansu mishandles a leader leaving mid-rebalance.
    leader = _Polled("l", cooperative, unique_topic, ledger, accounting)
    members = [leader]
    threads: list[_Thread] = []
    release = threading.Event()
    try:
        producer.start()
        _until(
            lambda: leader.state is MemberState.STABLE and ledger.all_owned(everything),
            leader.poll,
            '"l" owning everything',
            threads,
            members,
        )
        # 1. "b" (EAGER, own thread) and "a" join; all three share the partitions.
        # "b" auto-commits only when it revokes, so it always has something to commit
        # then (what makes the mock's refusal visible, see the xfail above).
        b_settings = _settings(broker, unique_group, "cooperative-sticky,range")
        b_settings["auto.commit.interval.ms"] = 600_000
        b = _Polled("b", b_settings, unique_topic, ledger, accounting)
        a = _Polled("a", cooperative, unique_topic, ledger, accounting)
        members += [b, a]
        threads.append(_Thread(b))

        def l_and_a() -> None:
            leader.poll()
            a.poll()

        _until(
            lambda: (
                ledger.all_owned(everything)
                and all(ledger.owned_by(m.name) for m in members)
                and all(m.state is MemberState.STABLE for m in members)
                and a.processed > 0
            ),
            l_and_a,
            "three members sharing the partitions",
            threads,
            members,
        )
        b_read = b.processed
        _until(lambda: b.processed > b_read, l_and_a, '"b" reading', threads, members)
        # 2. "c" joins; "b" will be held in its revoke callback, so it cannot rejoin.
        b.listener.hold = release
        c = _Polled("c", cooperative, unique_topic, ledger, accounting)
        members.append(c)

        def l_a_c() -> None:
            leader.poll()
            a.poll()
            c.poll()

        # 3. "a" is joining and has read records since (auto-commit cannot run now).
        _until(lambda: a.state is MemberState.JOINING, l_a_c, '"a" joining', threads, members)
        read_before = a.processed
        _until(
            lambda: a.processed > read_before and a.state is MemberState.JOINING,
            l_a_c,
            '"a" reading while its JoinGroup is parked',
            threads,
            members,
        )
        assert ledger.owned_by("a")
        # 4. "a" leaves now, in the middle of the rebalance: close() waits for the
        # SyncGroup answer to commit first. Kafka ends the join only once every member
        # rejoined (or the rebalance timeout passed), so "b" is let go once "a" waits;
        # releasing it only after close() returned deadlocks the two until close()
        # gives up (Tansu ended the join after a second without "b", which hid this).
        waiting = _LogSeen("coopconsumer.driver", "leaving once the rebalance under way")
        closer = _Closer(a)

        def l_and_c() -> None:
            leader.poll()
            c.poll()

        try:
            _until(
                lambda: waiting.seen.is_set() or closer.done.is_set(),
                l_and_c,
                '"a" waiting to commit before it leaves',
                threads,
                members,
            )
        finally:
            waiting.remove()
            release.set()
            b.listener.hold = None
        _until(closer.done.is_set, l_and_c, '"a" closed', threads, members)
        assert closer.error is None, closer.error
        # "a" left from the SyncGroup answer, committing what it had read: its
        # partitions were revoked, not lost (the give-up path reports them lost).
        assert a.listener.kinds[-1] == "revoked", a.listener.kinds

        # 5. The others read everything that is left.
        producer.stop()
        _until(
            lambda: not accounting.missing() and ledger.all_owned(everything),
            l_and_c,
            "every record processed",
            threads,
            members,
        )
    finally:
        release.set()
        producer.stop()
        for t in threads:
            t.stop()
        for member in members:
            member.consumer.close(timeout=20.0)
    assert producer.errors == []
    assert "revoked" in b.listener.kinds
    ledger.check()
    accounting.check(allow_duplicates=False, final_commits=False)
