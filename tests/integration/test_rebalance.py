"""KIP-429 end to end: a group scales 1 -> 4 -> 2 members while records flow.

Every member runs its own poll loop on its own thread (a consumer belongs to one
thread). An ownership ledger is built from the listener calls -- assigned adds, revoked
and lost remove -- and checked at every call and for every record: no partition is ever
owned by two members at once, and no member processes a record of a partition it does
not own. At the end every produced record was processed exactly once (graceful changes:
the auto-commit made before revoking or leaving; no periodic commit runs). Cooperative
members (cooperative-sticky) get no revoke for the partitions they keep; eager members
(range) revoke everything each time.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Message, Producer

from coopconsumer import Consumer, KafkaError, RebalanceListener, TopicPartition
from coopconsumer.testing import EmbeddedBroker
from integration._ledger import mock_paced_strategy

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PATIENCE_S = 40.0
PARTITIONS = 8

Calls = list[tuple[str, frozenset[TopicPartition]]]
#: Per member, its listener calls in each phase (scale-out, scale-in).
Phases = dict[str, list[Calls]]


class Ledger:
    """Who owns which partition, from the listener calls of every member."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.lock = threading.Lock()
        self.owner: dict[TopicPartition, str] = {}
        self.violations: list[str] = []
        self.calls: dict[str, list[tuple[str, frozenset[TopicPartition]]]] = (
            collections.defaultdict(list)
        )
        self.processed: collections.Counter[tuple[int, int]] = collections.Counter()
        #: Records each member had processed when each of its callbacks ran
        #: (parallel to ``calls``), to see whether records flowed mid-rebalance.
        self.marks: dict[str, list[int]] = collections.defaultdict(list)
        self.counts: collections.Counter[str] = collections.Counter()
        self.duplicates: list[tuple[str, int, int]] = []
        #: Records "a" had processed when each phase ended (set by ``_scale``).
        self.phase_end_counts: list[int] = []

    def callback(self, member: str, kind: str, partitions: frozenset[TopicPartition]) -> None:
        with self.lock:
            self.calls[member].append((kind, partitions))
            self.marks[member].append(self.counts[member])
            for tp in partitions:
                holder = self.owner.get(tp)
                if kind == "assigned":
                    if holder is not None:
                        self.violations.append(f"{tp} assigned to {member} while {holder} owns it")
                    self.owner[tp] = member
                elif holder == member:
                    del self.owner[tp]
                else:
                    self.violations.append(f"{member} got {kind} for {tp} owned by {holder}")

    def record(self, member: str, partition: int, offset: int) -> None:
        with self.lock:
            holder = self.owner.get(TopicPartition(self.topic, partition))
            if holder != member:
                self.violations.append(
                    f"{member} processed {self.topic}-{partition}@{offset} owned by {holder}"
                )
            self.processed[(partition, offset)] += 1
            self.counts[member] += 1
            if self.processed[(partition, offset)] > 1:
                self.duplicates.append((member, partition, offset))

    def owned_by(self) -> dict[str, frozenset[TopicPartition]]:
        with self.lock:
            result: dict[str, set[TopicPartition]] = collections.defaultdict(set)
            for tp, member in self.owner.items():
                result[member].add(tp)
            return {m: frozenset(ps) for m, ps in result.items()}

    def kinds(self, member: str) -> list[str]:
        with self.lock:
            return [kind for kind, _ in self.calls[member]]


class _Listener(RebalanceListener):
    def __init__(self, ledger: Ledger, member: str) -> None:
        self.ledger = ledger
        self.member = member

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.ledger.callback(self.member, "assigned", partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.ledger.callback(self.member, "revoked", partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.ledger.callback(self.member, "lost", partitions)


#: librdkafka's mock answers a SyncGroup that arrives after the leader's (which already
#: carried every assignment) with INVALID_REQUEST. The group member reports it from
#: poll() and rejoins, as Java and librdkafka do; members here count it and go on.
INVALID_REQUEST = 42
SYNC_GROUP = 14


def is_mock_sync_quirk(exc: BaseException | None) -> bool:
    return isinstance(exc, KafkaError) and (exc.code, exc.api_key) == (INVALID_REQUEST, SYNC_GROUP)


def xfail_on_mock_sync_quirk(broker: EmbeddedBroker, errors: list[BaseException | None]) -> None:
    """Name the mock's SyncGroup quirk if it stopped a member (a group member that
    treats it as fatal); any other error still fails the test."""
    if broker.supports_faults and any(is_mock_sync_quirk(e) for e in errors):
        pytest.xfail(
            "librdkafka mock quirk: a follower's SyncGroup after the leader's gets "
            "INVALID_REQUEST, which the group member treats as fatal (Java and "
            "librdkafka rejoin)"
        )


class Member:
    """One consumer with its own poll loop thread."""

    def __init__(self, name: str, settings: dict[str, object], ledger: Ledger) -> None:
        self.name = name
        self.ledger = ledger
        self.error: BaseException | None = None
        self.quirks = 0
        self._stop = threading.Event()
        self._consumer = Consumer(settings)
        self._consumer.subscribe([ledger.topic], _Listener(ledger, name))
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    messages = self._consumer.consume(200, 0.1)
                except KafkaError as exc:
                    if not is_mock_sync_quirk(exc):
                        raise
                    self.quirks += 1
                    continue
                for message in messages:
                    partition, offset = message.partition(), message.offset()
                    assert partition is not None
                    assert offset is not None
                    self.ledger.record(self.name, partition, offset)
        except BaseException as exc:
            self.error = exc
        finally:
            try:
                self._consumer.close()  # revokes on this thread, commits first
            except BaseException as exc:
                self.error = self.error or exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(PATIENCE_S)
        assert not self._thread.is_alive(), f"member {self.name} did not stop"


class RecordSource:
    """Produces numbered records round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.sent: list[tuple[int, int]] = []
        self.errors: list[object] = []
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self._thread.start()

    def _delivered(self, err: object, message: Message) -> None:
        if err is not None:
            self.errors.append(err)
            return
        partition, offset = message.partition(), message.offset()
        assert partition is not None
        assert offset is not None
        self.sent.append((partition, offset))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            for _ in range(PARTITIONS):
                self._producer.produce(
                    self._topic,
                    value=str(n).encode(),
                    partition=n % PARTITIONS,
                    on_delivery=self._delivered,
                )
                n += 1
            self._producer.poll(0.02)
        assert self._producer.flush(PATIENCE_S) == 0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(PATIENCE_S)


def wait_for(
    broker: EmbeddedBroker, what: str, condition: Callable[[], bool], members: list[Member]
) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        xfail_on_mock_sync_quirk(broker, [m.error for m in members])
        for member in members:
            assert member.error is None, f"member {member.name} failed: {member.error!r}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def balanced(ledger: Ledger, names: list[str]) -> Callable[[], bool]:
    """All partitions owned, by exactly ``names``, evenly, and nobody mid-rebalance
    (each member's last callback is ``assigned``, the end of a rebalance)."""

    def check() -> bool:
        owned = ledger.owned_by()
        if sorted(owned) != sorted(names):
            return False
        if sum(len(ps) for ps in owned.values()) != PARTITIONS:
            return False
        if {len(ps) for ps in owned.values()} != {PARTITIONS // len(names)}:
            return False
        return all(ledger.kinds(n) and ledger.kinds(n)[-1] == "assigned" for n in names)

    return check


def _settings(broker: EmbeddedBroker, group: str, strategy: str) -> dict[str, object]:
    chosen = mock_paced_strategy(broker.supports_faults, strategy)
    return {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "partition.assignment.strategy": chosen,
        "session.timeout.ms": 2000,
        "heartbeat.interval.ms": 300,
        "max.poll.interval.ms": 10000,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        # No periodic commit in practice: every hand-over must be covered by the
        # commit made before revoking (or before leaving), which is what is tested.
        "auto.commit.interval.ms": 600_000,
    }


class CommitFailures(logging.Handler):
    """Collects the consumers' warnings about a failed commit-before-revoke."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "before revoking" in message:
            self.messages.append(message)


def _scale(
    broker: EmbeddedBroker, topic: str, group: str, strategy: str
) -> tuple[Ledger, Phases, list[dict[str, frozenset[TopicPartition]]]]:
    """Run 1 -> 4 -> 2; returns the ledger, each member's calls per phase, and who
    owned what at the end of each phase."""
    broker.create_topic(topic, partitions=PARTITIONS)
    ledger = Ledger(topic)
    watcher = CommitFailures()
    logging.getLogger("coopconsumer.consumer").addHandler(watcher)
    commit_failures = watcher.messages
    settings = _settings(broker, group, strategy)
    source = RecordSource(broker.bootstrap, topic)
    members: list[Member] = []
    phases: Phases = {}
    ends: list[dict[str, frozenset[TopicPartition]]] = []
    end_counts: list[int] = []  # records "a" had processed when each phase ended

    def mark() -> dict[str, int]:
        with ledger.lock:
            return {name: len(calls) for name, calls in ledger.calls.items()}

    def since(start: dict[str, int]) -> dict[str, list[tuple[str, frozenset[TopicPartition]]]]:
        with ledger.lock:
            return {n: list(c[start.get(n, 0) :]) for n, c in ledger.calls.items()}

    try:
        members.append(Member("a", settings, ledger))
        wait_for(broker, "one member owning everything", balanced(ledger, ["a"]), members)
        # The scale-out starts while "a" processes records (what the cooperative run
        # checks: that it goes on doing so mid-rebalance).
        wait_for(broker, '"a" processing records', lambda: ledger.counts["a"] > 0, members)

        start = mark()
        members.extend(Member(name, settings, ledger) for name in ("b", "c", "d"))
        wait_for(broker, "four balanced members", balanced(ledger, ["a", "b", "c", "d"]), members)
        ends.append(ledger.owned_by())
        end_counts.append(ledger.counts["a"])
        for name, calls in since(start).items():
            phases.setdefault(name, []).append(calls)

        start = mark()
        for member in members[2:]:
            member.stop()
        wait_for(broker, "two balanced members", balanced(ledger, ["a", "b"]), members[:2])
        ends.append(ledger.owned_by())
        end_counts.append(ledger.counts["a"])
        for name, calls in since(start).items():
            phases.setdefault(name, []).append(calls)

        source.stop()
        assert source.errors == []
        wait_for(
            broker,
            "every record processed",
            lambda: ledger.processed.keys() >= set(source.sent),
            members[:2],
        )
    finally:
        source.stop()
        for member in members:
            member.stop()
        logging.getLogger("coopconsumer.consumer").removeHandler(watcher)
    xfail_on_mock_sync_quirk(broker, [m.error for m in members])
    for member in members:
        assert member.error is None, f"member {member.name} failed: {member.error!r}"
    assert ledger.violations == []
    assert len(source.sent) > 0
    assert set(ledger.processed) == set(source.sent)
    duplicates = {key: n for key, n in ledger.processed.items() if n > 1}
    cooperative = strategy == "cooperative-sticky"
    if duplicates and cooperative and broker.supports_faults and commit_failures:
        # Named quirk (cooperative runs; EAGER ones are a strict xfail on the mock):
        # a member commits before revoking right after its SyncGroup, and another
        # member's JoinGroup may have started the next rebalance by then. Kafka accepts
        # that commit (PreparingRebalance, current generation); librdkafka's mock
        # answers REBALANCE_IN_PROGRESS, so the next owner restarts from an older
        # offset. Duplicates are accepted on the mock only when such a commit failed.
        pytest.xfail(
            "librdkafka mock rejects OffsetCommit while a rebalance is joining: "
            f"{commit_failures[0]}"
        )
    assert duplicates == {}, (
        f"{len(duplicates)} records processed twice, e.g. (member, partition, offset) "
        f"{ledger.duplicates[:3]}; calls: {dict(ledger.calls)}"
    )
    for name in "abcd":
        assert "lost" not in ledger.kinds(name), f"{name} lost partitions in a graceful change"
    ledger.phase_end_counts = end_counts
    return ledger, phases, ends


def records_mid_rebalance(ledger: Ledger, start: int, count: int) -> int:
    """Records "a" processed from its first revoke among its callbacks
    ``start .. start+count`` (the scale-out phase) until the whole group was balanced
    again (the end of that phase's rebalances)."""
    with ledger.lock:
        kinds = [k for k, _ in ledger.calls["a"][start : start + count]]
        marks = ledger.marks["a"][start : start + count]
    first_revoke = kinds.index("revoked")
    return ledger.phase_end_counts[0] - marks[first_revoke]


def test_cooperative_scale_out_and_in_keeps_owned_partitions(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    ledger, phases, ends = _scale(broker, unique_topic, unique_group, "cooperative-sticky")
    # KIP-429 "Allow Consumer to Return Records in Rebalance": "a" kept 2 partitions
    # and went on processing their records while the scale-out rebalances ran.
    assert records_mid_rebalance(ledger, 1, len(phases["a"][0])) > 0
    everything = frozenset(TopicPartition(unique_topic, p) for p in range(PARTITIONS))
    # Scale-out: "a" owned everything and hands 6 partitions over; it never gets a
    # revoke for the 2 it keeps, and it is never assigned anything back (KIP-429).
    a_out = phases["a"][0]
    revoked = frozenset().union(*(ps for kind, ps in a_out if kind == "revoked"))
    assigned = frozenset().union(*(ps for kind, ps in a_out if kind == "assigned"))
    assert len(revoked) == PARTITIONS - PARTITIONS // 4
    assert assigned == frozenset()  # only the empty "rebalance finished" calls
    assert revoked < everything
    # Nobody is revoked a partition it still owns when the phase ends: a partition
    # moves once, from its old owner to its new one (a newcomer that arrived early
    # may hand some of its partitions on to later ones).
    final = ends[0]
    for name in "bcd":
        lost_in_phase = frozenset().union(
            *(ps for kind, ps in phases[name][0] if kind != "assigned")
        )
        assert not lost_in_phase & final.get(name, frozenset())
    # Scale-in: the survivors keep what they had and only gain.
    for name in "ab":
        calls = phases[name][1]
        assert all(kind == "assigned" for kind, _ in calls), calls
    assert ends[1]["a"] > ends[0]["a"]
    assert ends[1]["b"] > ends[0]["b"]


#: Why the EAGER scale test fails on librdkafka's mock, every time.
MOCK_EAGER_COMMIT_REASON = (
    "librdkafka mock quirk: an EAGER member commits before revoking when a heartbeat "
    "reports the rebalance, and the mock refuses every OffsetCommit while a rebalance "
    "is joining (REBALANCE_IN_PROGRESS from rd_kafka_mock_cgrp_check_state), where "
    "Kafka accepts the current generation's; no later commit can cover the revoked "
    "partitions, so their next owners read the records processed since the last commit "
    "again (auto-commit runs only before revoking here: there always are such records)"
)


def test_eager_scale_out_and_in_revokes_everything(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str, request: pytest.FixtureRequest
) -> None:
    if broker.kind == "mock":
        request.applymarker(pytest.mark.xfail(strict=True, reason=MOCK_EAGER_COMMIT_REASON))
    ledger, phases, _ = _scale(broker, unique_topic, unique_group, "range")
    # EAGER stops the world: nothing flows between revoking all and the new assignment.
    a_first = ledger.calls["a"]
    revoke_at = next(i for i, (k, _) in enumerate(a_first) if k == "revoked")
    assert a_first[revoke_at + 1][0] == "assigned"
    assert ledger.marks["a"][revoke_at + 1] == ledger.marks["a"][revoke_at]
    everything = frozenset(TopicPartition(unique_topic, p) for p in range(PARTITIONS))
    # EAGER: every rebalance starts by revoking all owned partitions, and the
    # assigned calls carry the full new assignment.
    a_out = phases["a"][0]
    assert a_out[0] == ("revoked", everything)
    for name in "ab":
        calls = phases[name][1]
        kinds = [kind for kind, _ in calls]
        assert kinds[0] == "revoked"
        owned_before = calls[0][1]
        assert len(owned_before) == PARTITIONS // 4
        assert kinds[-1] == "assigned"
        assert len(calls[-1][1]) == PARTITIONS // 2
