"""Ownership ledger and record accounting for integration tests with several members.

``OwnershipLedger`` is fed by every member's rebalance callbacks (assigned adds,
revoked/lost removes) and records a violation the moment a partition would be owned by
two members at once, or a member gives up a partition it does not own. It also checks
that a member only receives records of partitions it owns. ``RecordAccounting`` tracks
what a producer wrote and what the members saw and committed: every produced key seen
at least once, duplicates counted, committed offsets never going backwards, and the
final committed offsets at the end of each partition.

``LedgerListener`` (a ``coopconsumer.RebalanceListener``) and ``rdkafka_callbacks``
(confluent-kafka's ``on_assign``/``on_revoke``/``on_lost``) connect members of both
kinds to one ledger. ``CoopMember`` and ``RdkafkaMember`` run a member on its own
thread: poll, account for records, commit synchronously after each batch and on revoke.
``KeyProducer`` writes records with unique keys in the background.

Test helper only: imports coopconsumer's public API, its ``testing`` module and
confluent-kafka, never a private coopconsumer module. Everything here is thread-safe
where it says so; member threads never raise, they keep their first error in
``.error`` for the test to assert on.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Literal, TypeVar

import confluent_kafka

import coopconsumer
from coopconsumer import RebalanceListener, TopicPartition
from coopconsumer.assignors import Assignment as AssignorAssignment
from coopconsumer.assignors import (
    ClusterMetadata,
    ConsumerGroupMetadata,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    GroupAssignment,
    GroupSubscription,
    RangeAssignor,
)

__all__ = [
    "MOCK_ASSIGN_DELAY_S",
    "CommittedWatcher",
    "CoopMember",
    "KeyProducer",
    "LedgerEvent",
    "LedgerListener",
    "OwnershipLedger",
    "RdkafkaMember",
    "RecordAccounting",
    "RecordingCooperativeSticky",
    "RecordingRange",
    "committed_offsets",
    "end_offsets",
    "kept_but_given_up",
    "late_sync_on_mock",
    "mock_paced_strategy",
    "rdkafka_callbacks",
    "wait_for",
]

#: How many earlier commit observations a new one is compared with (commits are
#: monotonic when all is well, so the recent ones hold the maximum).
_HISTORY = 200

EventKind = Literal["assigned", "revoked", "lost", "forgotten"]


class LedgerEvent:
    """One listener call as the ledger saw it (``at``: ``time.monotonic()``)."""

    __slots__ = ("at", "kind", "member", "partitions")

    def __init__(
        self, at: float, member: str, kind: EventKind, partitions: frozenset[TopicPartition]
    ) -> None:
        self.at = at
        self.member = member
        self.kind = kind
        self.partitions = partitions

    def __repr__(self) -> str:
        parts = ",".join(f"{tp.topic[-6:]}/{tp.partition}" for tp in sorted(self.partitions))
        return f"<{self.at:.3f} {self.member} {self.kind} [{parts}]>"


def _tps(partitions: Iterable[Any]) -> frozenset[TopicPartition]:
    """coopconsumer or confluent-kafka partitions, as coopconsumer TopicPartitions."""
    return frozenset(TopicPartition(p.topic, p.partition) for p in partitions)


class OwnershipLedger:
    """Who owns which partition, fed by every member's callbacks. Thread-safe.

    A violation is recorded (and, with ``strict=True``, raised as ``AssertionError``
    from the feeding call) when a partition is assigned to a member while another
    member owns it, when a member revokes or loses a partition it does not own, or when
    a member receives a record of a partition it does not own. ``check()`` raises if
    any violation was ever recorded.
    """

    def __init__(self, *, strict: bool = False) -> None:
        self._lock = threading.Lock()
        self._strict = strict
        self._owner: dict[TopicPartition, str] = {}
        self._events: list[LedgerEvent] = []
        self._violations: list[str] = []

    # --- feeding ------------------------------------------------------------------

    def assigned(self, member: str, partitions: Iterable[Any]) -> None:
        """``member`` now owns ``partitions`` (in addition to what it owned)."""
        tps = _tps(partitions)
        with self._lock:
            self._events.append(LedgerEvent(time.monotonic(), member, "assigned", tps))
            problems = []
            for tp in sorted(tps):
                owner = self._owner.get(tp)
                if owner is not None and owner != member:
                    problems.append(f"{tp} assigned to {member} while owned by {owner}")
                elif owner == member:
                    problems.append(f"{tp} assigned to {member}, which already owns it")
                self._owner[tp] = member
            self._fail(problems)

    def revoked(self, member: str, partitions: Iterable[Any]) -> None:
        """``member`` gave up ``partitions`` gracefully."""
        self._remove(member, "revoked", _tps(partitions))

    def lost(self, member: str, partitions: Iterable[Any]) -> None:
        """``member`` was told it lost ``partitions`` (fell out of the group)."""
        self._remove(member, "lost", _tps(partitions))

    def forget(self, member: str) -> frozenset[TopicPartition]:
        """Drop whatever ``member`` owns without a callback (it was killed); returns it."""
        with self._lock:
            gone = frozenset(tp for tp, owner in self._owner.items() if owner == member)
            for tp in gone:
                del self._owner[tp]
            self._events.append(LedgerEvent(time.monotonic(), member, "forgotten", gone))
            return gone

    def record_received(self, member: str, tp: TopicPartition) -> None:
        """``member`` got a record of ``tp``: it must own ``tp`` right now."""
        with self._lock:
            owner = self._owner.get(tp)
            if owner != member:
                self._fail([f"{member} received a record of {tp}, owned by {owner}"])

    def _remove(self, member: str, kind: EventKind, tps: frozenset[TopicPartition]) -> None:
        with self._lock:
            self._events.append(LedgerEvent(time.monotonic(), member, kind, tps))
            problems = []
            for tp in sorted(tps):
                owner = self._owner.get(tp)
                if owner != member:
                    problems.append(f"{member} {kind} {tp}, owned by {owner}")
                else:
                    del self._owner[tp]
            self._fail(problems)

    def _fail(self, problems: list[str]) -> None:
        # Called with the lock held.
        if not problems:
            return
        self._violations.extend(problems)
        if self._strict:
            raise AssertionError("; ".join(problems))

    # --- reading ------------------------------------------------------------------

    @property
    def violations(self) -> list[str]:
        """Every violation recorded so far, oldest first."""
        with self._lock:
            return list(self._violations)

    def events(self, member: str | None = None) -> list[LedgerEvent]:
        """The listener calls seen (of ``member`` only, if given), oldest first."""
        with self._lock:
            return [e for e in self._events if member is None or e.member == member]

    def owners(self) -> dict[TopicPartition, str]:
        """Partition -> owning member, now."""
        with self._lock:
            return dict(self._owner)

    def owned_by(self, member: str) -> frozenset[TopicPartition]:
        """What ``member`` owns now."""
        with self._lock:
            return frozenset(tp for tp, owner in self._owner.items() if owner == member)

    def quiet_for(self) -> float:
        """Seconds since the last listener call (infinite if there was none)."""
        with self._lock:
            if not self._events:
                return float("inf")
            return time.monotonic() - self._events[-1].at

    def all_owned(self, partitions: Iterable[TopicPartition]) -> bool:
        """Whether every one of ``partitions`` has an owner now."""
        with self._lock:
            return all(tp in self._owner for tp in partitions)

    def removed_since(
        self, member: str, since: float, kinds: Sequence[EventKind] = ("revoked", "lost")
    ) -> frozenset[TopicPartition]:
        """Partitions ``member`` revoked or lost (``kinds``) at or after ``since``."""
        with self._lock:
            removed: set[TopicPartition] = set()
            for event in self._events:
                if event.member == member and event.at >= since and event.kind in kinds:
                    removed |= event.partitions
            return frozenset(removed)

    def check(self) -> None:
        """Raise ``AssertionError`` listing every violation, if there was any."""
        violations = self.violations
        if violations:
            history = "\n".join(map(repr, self.events()[-60:]))
            raise AssertionError(
                f"{len(violations)} ownership violation(s):\n"
                + "\n".join(violations[:20])
                + f"\n--- last listener calls ---\n{history}"
            )


class RecordAccounting:
    """Produced vs consumed records and committed offsets. Thread-safe.

    Keys identify records (the producer makes them unique). ``produced`` is fed by the
    producer's delivery reports, ``consumed`` by members, ``committed`` by whoever
    observes a successful commit (a member after its commit returned, or an outside
    observer sampling the group's offsets). A committed offset lower than one committed
    before for the same partition is a violation.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._produced: dict[bytes, tuple[TopicPartition, int]] = {}
        self._seen: Counter[bytes] = Counter()
        self._readers: dict[bytes, list[str]] = {}
        self._seen_by: dict[str, int] = {}
        self._unknown: list[bytes] = []
        self._committed: dict[TopicPartition, int] = {}
        #: Per partition: (as_of, offset, who), ordered by as_of.
        self._commit_log: dict[TopicPartition, list[tuple[float, int, str]]] = {}
        self._violations: list[str] = []
        #: Per partition, when each record was processed (``time.monotonic()``).
        self._consumed_at: dict[TopicPartition, list[float]] = {}

    def produced(self, key: bytes, tp: TopicPartition, offset: int) -> None:
        """The broker acknowledged record ``key`` at ``tp``/``offset``."""
        with self._lock:
            self._produced[key] = (tp, offset)

    def consumed(self, member: str, key: bytes | None, tp: TopicPartition, offset: int) -> None:
        """``member`` processed the record ``key`` read from ``tp``/``offset``."""
        with self._lock:
            if key is None:
                self._violations.append(f"{member} read a record without key at {tp}@{offset}")
                return
            self._seen[key] += 1
            self._readers.setdefault(key, []).append(f"{member}@{tp.partition}:{offset}")
            self._seen_by[member] = self._seen_by.get(member, 0) + 1
            self._consumed_at.setdefault(tp, []).append(time.monotonic())

    def committed(
        self, who: str, offsets: Mapping[TopicPartition, int], *, as_of: float | None = None
    ) -> None:
        """``offsets`` (next offset to read) were committed as of ``as_of``
        (``time.monotonic()``; default now): none may be lower than an offset recorded
        as committed at an earlier time.

        A member passes nothing (its commit was acknowledged just now); an observer
        reading the offsets passes the time it *sent* its read, since the answer may
        predate commits acknowledged while the read was in flight.
        """
        with self._lock:
            at = time.monotonic() if as_of is None else as_of
            for tp, offset in offsets.items():
                history = self._commit_log.setdefault(tp, [])
                index = bisect.bisect_right(history, at, key=lambda entry: entry[0])
                earlier = history[max(0, index - _HISTORY) : index]
                highest = max(earlier, key=lambda entry: entry[1], default=None)
                if highest is not None and offset < highest[1]:
                    recent = ", ".join(f"{w}:{o}@{t:.2f}" for t, o, w in earlier[-8:])
                    self._violations.append(
                        f"committed offset of {tp} went back from {highest[1]} "
                        f"({highest[2]} at {highest[0]:.2f}) to {offset} ({who} as of "
                        f"{at:.2f}; before: {recent})"
                    )
                history.insert(index, (at, offset, who))
                del history[: max(0, len(history) - 4 * _HISTORY)]
                self._committed[tp] = max(offset, self._committed.get(tp, offset))

    @property
    def produced_count(self) -> int:
        """How many records the broker acknowledged."""
        with self._lock:
            return len(self._produced)

    def missing(self) -> list[bytes]:
        """Acknowledged keys no member has processed."""
        with self._lock:
            return [key for key in self._produced if self._seen[key] == 0]

    def duplicates(self) -> int:
        """How many times a record was processed again after its first time."""
        with self._lock:
            return sum(count - 1 for count in self._seen.values() if count > 1)

    def duplicate_readers(self, limit: int = 10) -> dict[bytes, list[str]]:
        """Up to ``limit`` keys processed more than once -> ``member@partition:offset``
        of each time."""
        with self._lock:
            found: dict[bytes, list[str]] = {}
            for key, readers in self._readers.items():
                if len(readers) > 1 and len(found) < limit:
                    found[key] = list(readers)
            return found

    def duplicated_after(self) -> Counter[str]:
        """Member -> how many of the records it processed were processed again later
        (by anyone): the member whose progress was not committed in time."""
        with self._lock:
            first: Counter[str] = Counter()
            for readers in self._readers.values():
                if len(readers) > 1:
                    first[readers[0].split("@", 1)[0]] += 1
            return first

    def longest_pause(self, since: float, until: float) -> dict[TopicPartition, float]:
        """Per partition, the longest time between two processed records (or ``since``
        / ``until`` and the nearest one) within [``since``, ``until``]: how long a
        partition stood still while a steady producer kept writing to it."""
        with self._lock:
            pauses: dict[TopicPartition, float] = {}
            for tp, times in self._consumed_at.items():
                inside = [since, *(t for t in times if since <= t <= until), until]
                pauses[tp] = max(b - a for a, b in itertools.pairwise(inside))
            return pauses

    def consumed_by(self) -> dict[str, int]:
        """Member -> records it processed."""
        with self._lock:
            return dict(self._seen_by)

    def last_committed(self) -> dict[TopicPartition, int]:
        """The highest committed offset observed per partition."""
        with self._lock:
            return dict(self._committed)

    def end_offsets(self) -> dict[TopicPartition, int]:
        """Per partition, one past the last acknowledged record's offset."""
        with self._lock:
            ends: dict[TopicPartition, int] = {}
            for tp, offset in self._produced.values():
                ends[tp] = max(ends.get(tp, 0), offset + 1)
            return ends

    @property
    def violations(self) -> list[str]:
        """Records without keys and committed offsets that went back."""
        with self._lock:
            return list(self._violations)

    def check(self, *, allow_duplicates: bool, final_commits: bool = True) -> None:
        """Raise ``AssertionError`` if a record was lost, processed twice (unless
        ``allow_duplicates``), a committed offset went back, or (``final_commits``)
        the last committed offset of a partition is not its end."""
        problems = list(self.violations)
        missing = self.missing()
        if missing:
            problems.append(f"{len(missing)} record(s) never processed, e.g. {missing[:5]}")
        duplicates = self.duplicates()
        if duplicates and not allow_duplicates:
            problems.append(
                f"{duplicates} record(s) processed more than once, e.g. "
                f"{list(self.duplicate_readers().items())[:8]}"
            )
        if final_commits:
            committed = self.last_committed()
            for tp, end in sorted(self.end_offsets().items()):
                if committed.get(tp) != end:
                    problems.append(f"{tp}: last committed {committed.get(tp)} != end {end}")
        if problems:
            raise AssertionError(
                f"record accounting ({self.produced_count} produced, "
                f"{self.consumed_by()} processed):\n" + "\n".join(problems[:30])
            )


# --- listener adapters ------------------------------------------------------------


class LedgerListener(RebalanceListener):
    """A ``coopconsumer.RebalanceListener`` feeding ``ledger`` as member ``member``.

    ``before_revoke`` runs first in ``on_partitions_revoked`` (a member commits its
    processed offsets there), ``on_lost`` first in ``on_partitions_lost`` (a member
    forgets what it has not committed: it may not commit for partitions it lost). Every
    call is also kept in ``calls`` as ``(kind, partitions, time.monotonic())``.
    """

    def __init__(
        self,
        ledger: OwnershipLedger,
        member: str,
        before_revoke: Callable[[frozenset[TopicPartition]], None] | None = None,
        on_lost: Callable[[frozenset[TopicPartition]], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.member = member
        self.before_revoke = before_revoke
        self.on_lost = on_lost
        self.calls: list[tuple[str, frozenset[TopicPartition], float]] = []

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("assigned", frozenset(partitions), time.monotonic()))
        self.ledger.assigned(self.member, partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("revoked", frozenset(partitions), time.monotonic()))
        if self.before_revoke is not None:
            self.before_revoke(frozenset(partitions))
        self.ledger.revoked(self.member, partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("lost", frozenset(partitions), time.monotonic()))
        if self.on_lost is not None:
            self.on_lost(frozenset(partitions))
        self.ledger.lost(self.member, partitions)


#: confluent-kafka calls these with the consumer and a list of its TopicPartitions.
RdkafkaCallback = Callable[[Any, list[Any]], None]


def rdkafka_callbacks(
    ledger: OwnershipLedger,
    member: str,
    *,
    incremental: bool,
    before_revoke: Callable[[frozenset[TopicPartition]], None] | None = None,
    on_lost: Callable[[frozenset[TopicPartition]], None] | None = None,
) -> dict[str, RdkafkaCallback]:
    """``on_assign``/``on_revoke``/``on_lost`` for ``confluent_kafka.Consumer.subscribe``.

    With ``incremental`` (cooperative-sticky), librdkafka passes only the added or
    removed partitions, as KIP-429's listener; otherwise (eager) the full assignment.
    An eager ``on_revoke`` can also name partitions never assigned (librdkafka calls
    it with an empty list at the first join), so the eager adapter only removes what
    the member owns.
    """

    def on_assign(_c: Any, partitions: list[Any]) -> None:
        tps = _tps(partitions)
        if not incremental:
            tps -= ledger.owned_by(member)
        ledger.assigned(member, tps)

    def on_revoke(_c: Any, partitions: list[Any]) -> None:
        tps = _tps(partitions)
        if before_revoke is not None:
            before_revoke(tps)
        if not incremental:
            tps &= ledger.owned_by(member)
        ledger.revoked(member, tps)

    def on_lost_(_c: Any, partitions: list[Any]) -> None:
        tps = _tps(partitions)
        if on_lost is not None:
            on_lost(tps)
        if not incremental:
            tps &= ledger.owned_by(member)
        ledger.lost(member, tps)

    return {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_lost_}


# --- assignors that record what the coordinator made them do ----------------------


class _Recorder:
    """Shared bookkeeping of the recording assignors (leader turns, chosen protocol)."""

    def __init__(self, assign_delay_s: float = 0.0) -> None:
        self.lock = threading.Lock()
        #: Pause before each assignment (see ``CoopMember``'s ``assign_delay_s``).
        self.assign_delay_s = assign_delay_s
        #: (time.monotonic(), member ids in the group) per assign() call: leader turns.
        self.led: list[tuple[float, tuple[str, ...]]] = []
        #: (generation, assignor name) per on_assignment() call: the broker's choice.
        self.chosen: list[tuple[int, str]] = []


class _Recording(ConsumerPartitionAssignor):
    """Records leader turns (``assign``) and the broker's protocol choice
    (``on_assignment``), then defers to the built-in assignor next in the MRO."""

    def __init__(self, recorder: _Recorder | None = None) -> None:
        super().__init__()
        self.recorder = recorder if recorder is not None else _Recorder()

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        with self.recorder.lock:
            self.recorder.led.append(
                (time.monotonic(), tuple(sorted(group_subscription.subscriptions)))
            )
        time.sleep(self.recorder.assign_delay_s)
        return super().assign(metadata, group_subscription)  # type: ignore[safe-super]

    def on_assignment(
        self, assignment: AssignorAssignment, group_metadata: ConsumerGroupMetadata
    ) -> None:
        with self.recorder.lock:
            self.recorder.chosen.append((group_metadata.generation_id, self.name))
        super().on_assignment(assignment, group_metadata)


class RecordingCooperativeSticky(_Recording, CooperativeStickyAssignor):
    """``cooperative-sticky`` that records leader turns and the chosen protocol name."""


class RecordingRange(_Recording, RangeAssignor):
    """``range`` that records leader turns and the chosen protocol name."""


#: Wire codes of the one error the mock makes a follower's SyncGroup get.
_INVALID_REQUEST, _SYNC_GROUP = 42, 14


def late_sync_on_mock(error: BaseException) -> bool:
    """For ``CoopMember(tolerate=...)`` on librdkafka's mock cluster: the error poll()
    reports when a follower's SyncGroup reaches the mock after the leader's.

    The mock completes a SyncGroup round as soon as the leader's SyncGroup carries an
    assignment for every member (it counts assignments, not SyncGroup requests:
    ``rd_kafka_mock_cgrp_classic_sync_check``), moves the group to Up, and answers a
    later follower SyncGroup with INVALID_REQUEST (``rd_kafka_mock_cgrp_classic_
    check_state``), where Kafka answers with the assignment. The Consumer reports that
    once from poll() and rejoins, as Java does. Nothing else matches.
    """
    return (
        isinstance(error, coopconsumer.KafkaError)
        and error.code == _INVALID_REQUEST
        and error.api_key == _SYNC_GROUP
    )


#: On librdkafka's mock a coopconsumer leader waits this long before assigning, so its
#: followers' SyncGroups usually reach the mock before its own (``late_sync_on_mock``).
MOCK_ASSIGN_DELAY_S = 0.3


class _LateCooperativeSticky(CooperativeStickyAssignor):
    """``cooperative-sticky`` whose leader waits ``MOCK_ASSIGN_DELAY_S`` before assigning."""

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        time.sleep(MOCK_ASSIGN_DELAY_S)
        return super().assign(metadata, group_subscription)


class _LateRange(RangeAssignor):
    """``range`` whose leader waits ``MOCK_ASSIGN_DELAY_S`` before assigning."""

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        time.sleep(MOCK_ASSIGN_DELAY_S)
        return super().assign(metadata, group_subscription)


def mock_paced_strategy(on_mock: bool, strategy: str) -> object:
    """``partition.assignment.strategy`` for members of one group: ``strategy``
    (``"cooperative-sticky"`` or ``"range"``) as it is, or on the mock the class of a
    leader that assigns late (a class, so each consumer gets its own instance)."""
    if not on_mock:
        return strategy
    return [_LateCooperativeSticky if strategy == "cooperative-sticky" else _LateRange]


def recording_assignors(
    strategy: str, assign_delay_s: float = 0.0
) -> tuple[list[ConsumerPartitionAssignor], _Recorder]:
    """Assignor instances for ``strategy`` (``"range"``, ``"cooperative-sticky"`` or a
    comma-separated list of those) sharing one recorder."""
    recorder = _Recorder(assign_delay_s)
    assignors: list[ConsumerPartitionAssignor] = []
    for name in (part.strip() for part in strategy.split(",")):
        if name == "cooperative-sticky":
            assignors.append(RecordingCooperativeSticky(recorder))
        elif name == "range":
            assignors.append(RecordingRange(recorder))
        else:
            raise ValueError(f"no recording assignor for {name!r}")
    return assignors, recorder


# --- members on threads -----------------------------------------------------------

_GROUP_TIMINGS: dict[str, object] = {
    # Tansu holds a JoinGroup for about max(1 s, session.timeout.ms / 2) (docs/testing.md).
    "session.timeout.ms": 3000,
    "heartbeat.interval.ms": 300,
}


class _MemberThread:
    """Poll loop on a thread: consume, account, commit; first error kept in ``error``."""

    name: str

    def __init__(
        self, name: str, ledger: OwnershipLedger, accounting: RecordAccounting | None
    ) -> None:
        self.name = name
        self.ledger = ledger
        self.accounting = accounting
        self.error: BaseException | None = None
        self.commit_failures: list[str] = []
        self._stop = threading.Event()
        self._pause = threading.Event()
        #: Next offset to commit per partition: processed but not committed yet.
        self._pending: dict[TopicPartition, int] = {}
        self._pending_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.last_record_at: dict[TopicPartition, float] = {}

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop polling and close the consumer (leaving the group gracefully)."""
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError(f"{self.name} did not stop within {timeout_s} s")

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            self._open()
            while not self._stop.is_set():
                self._poll_once()
            self._commit_pending(None)
        except BaseException as exc:  # kept for the test to assert on
            logging.getLogger("tests.ledger").exception("%s failed", self.name)
            if self.error is None:
                self.error = exc
        finally:
            try:
                self._close()
            except BaseException as exc:
                if self.error is None:
                    self.error = exc

    def _account(self, records: list[Any]) -> None:
        now = time.monotonic()
        for record in records:
            if record.error() is not None:
                continue  # partition EOF and similar events are not records
            tp = TopicPartition(record.topic(), record.partition())
            self.ledger.record_received(self.name, tp)
            if self.accounting is not None:
                self.accounting.consumed(self.name, record.key(), tp, record.offset())
            self.last_record_at[tp] = now
            with self._pending_lock:
                self._pending[tp] = record.offset() + 1

    def _take_pending(self, only: frozenset[TopicPartition] | None) -> dict[TopicPartition, int]:
        with self._pending_lock:
            if only is None:
                taken = dict(self._pending)
                self._pending.clear()
            else:
                taken = {tp: o for tp, o in self._pending.items() if tp in only}
                for tp in taken:
                    del self._pending[tp]
            return taken

    def _forget_pending(self, partitions: frozenset[TopicPartition]) -> None:
        """Lost partitions: their uncommitted progress may not be committed any more
        (the next owner may already have committed beyond it)."""
        self._take_pending(partitions)

    def _restore_pending(self, offsets: Mapping[TopicPartition, int]) -> None:
        with self._pending_lock:
            for tp, offset in offsets.items():
                self._pending.setdefault(tp, offset)

    def _commit_pending(self, only: frozenset[TopicPartition] | None) -> None:
        raise NotImplementedError

    def _open(self) -> None:
        raise NotImplementedError

    def _poll_once(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError


class CoopMember(_MemberThread):
    """A ``coopconsumer.Consumer`` member on its own thread.

    Commits synchronously after each batch (``enable.auto.commit`` off) and, for the
    partitions being revoked, inside ``on_partitions_revoked``, so a graceful hand-over
    processes no record twice. A commit refused because a rebalance runs
    (``RebalanceInProgressError``) is retried after the next poll; one refused because
    the generation is gone (``CommitFailedError``) is dropped and noted in
    ``commit_failures`` (the next owner processes those records again).

    ``assign_delay_s`` makes this member's assignor wait before each assignment it runs
    as leader. Tests on librdkafka's mock cluster need it when several coopconsumer
    members share a group: the mock completes a SyncGroup round as soon as the leader's
    SyncGroup carries every member's assignment (it counts assignments, not SyncGroup
    requests: ``rd_kafka_mock_cgrp_classic_sync_check``) and answers a follower's
    SyncGroup arriving after that with INVALID_REQUEST, which a Kafka broker answers
    with the assignment. Delaying the leader lets the followers' SyncGroups arrive first.

    ``tolerate`` names errors ``consume`` may report once and carry on after (kept in
    ``reported_errors``); any other error stops the member and lands in ``error``.
    """

    def __init__(
        self,
        name: str,
        bootstrap: str,
        group_id: str,
        topics: Sequence[str],
        ledger: OwnershipLedger,
        accounting: RecordAccounting | None,
        *,
        strategy: str = "cooperative-sticky",
        extra_config: Mapping[str, object] | None = None,
        assign_delay_s: float = 0.0,
        tolerate: Callable[[BaseException], bool] | None = None,
    ) -> None:
        super().__init__(name, ledger, accounting)
        self.tolerate = tolerate
        #: Errors ``poll`` reported that ``tolerate`` accepted (the member carried on).
        self.reported_errors: list[BaseException] = []
        self.assignors, self.recorder = recording_assignors(strategy, assign_delay_s)
        self.strategy = strategy
        self.config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "partition.assignment.strategy": self.assignors,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **_GROUP_TIMINGS,
            **(extra_config or {}),
        }
        self.topics = list(topics)
        self.listener = LedgerListener(
            ledger, name, before_revoke=self._commit_revoked, on_lost=self._forget_pending
        )
        self.consumer: coopconsumer.Consumer | None = None
        self.member_ids: set[str] = set()

    def _open(self) -> None:
        self.consumer = coopconsumer.Consumer(self.config)
        self.consumer.subscribe(self.topics, self.listener)

    def _poll_once(self) -> None:
        assert self.consumer is not None
        try:
            records = self.consumer.consume(200, 0.05)
        except coopconsumer.CoopConsumerError as exc:
            # Java semantics: an error poll() reports once leaves the consumer usable.
            if self.tolerate is None or not self.tolerate(exc):
                raise
            self.reported_errors.append(exc)
            return
        member_id = self.consumer.group_metadata().member_id
        if member_id:
            self.member_ids.add(member_id)
        self._account(records)
        self._commit_pending(None)

    def _commit_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self._commit_pending(partitions)

    def _commit_pending(self, only: frozenset[TopicPartition] | None) -> None:
        consumer = self.consumer
        if consumer is None:
            return
        offsets = self._take_pending(only)
        if not offsets:
            return
        try:
            consumer.commit(offsets)
        except coopconsumer.RebalanceInProgressError as exc:
            if only is not None:
                # Revoking: a later retry would come too late for the next owner.
                self.commit_failures.append(f"on revoke of {sorted(offsets)}: {exc}")
                return
            self._restore_pending(offsets)
            return
        except coopconsumer.CommitFailedError as exc:
            self.commit_failures.append(f"{exc}")
            return
        except coopconsumer.CoopConsumerError as exc:
            if not exc.retriable:
                raise
            self.commit_failures.append(f"retriable: {exc}")
            self._restore_pending(offsets)
            return
        if self.accounting is not None:
            self.accounting.committed(self.name, offsets)

    def _close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()

    def led(self) -> list[tuple[str, ...]]:
        """The group's member ids each time this member ran the assignment (led)."""
        with self.recorder.lock:
            return [members for _, members in self.recorder.led]

    def chosen_protocols(self) -> list[tuple[int, str]]:
        """(generation, assignor name) the coordinator chose, per completed join."""
        with self.recorder.lock:
            return list(self.recorder.chosen)


_LEADER_LINE = re.compile(r"I am elected leader for group \S+ with (\d+) member")
_JOIN_LINE = re.compile(r"JoinGroup response: GenerationId (-?\d+), Protocol ([\w-]*)")


#: librdkafka's cgrp line when an answer of the coordinator made it drop its assignment.
_LOST_BY_COORDINATOR = re.compile(
    r"current assignment of \d+ partition\(s\) lost: .*(Illegal generation|Unknown member)"
)


def kept_but_given_up(
    ledger: OwnershipLedger, member: _MemberThread, since: float
) -> frozenset[TopicPartition]:
    """Partitions ``member`` gave up at or after ``since`` and owns again: what KIP-429
    says a rebalance must not do to a member's kept partitions.

    Every revocation counts, and every loss, except a librdkafka member's loss that its
    own log says the coordinator caused by refusing its generation. Tansu ends a round
    without a member whose SyncGroup it answered REBALANCE_IN_PROGRESS and that is
    joining again (docs/testing.md); that member's next commit carries the skipped
    generation, is answered ILLEGAL_GENERATION, and librdkafka then declares its
    assignment lost, as it must. The assignors had no part in it, and the ledger still
    checks that nobody else owned those partitions meanwhile."""
    kinds: tuple[EventKind, ...] = ("revoked", "lost")
    if isinstance(member, RdkafkaMember) and member.lost_by_coordinator_since(since):
        kinds = ("revoked",)
    return ledger.removed_since(member.name, since, kinds) & ledger.owned_by(member.name)


class _RdkafkaLog(logging.Handler):
    """librdkafka's ``cgrp`` debug lines, parsed for leader turns and chosen protocols."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.guard = threading.Lock()
        #: Group size at each of this member's leader turns.
        self.led: list[int] = []
        self.joins: list[tuple[int, str]] = []
        #: The latest lines, with their time (``time.monotonic()``), for failure reports.
        self.recent: collections.deque[tuple[float, str]] = collections.deque(maxlen=400)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        with self.guard:
            self.recent.append((time.monotonic(), message))
            leader = _LEADER_LINE.search(message)
            if leader:
                self.led.append(int(leader.group(1)))
            match = _JOIN_LINE.search(message)
            if match and int(match.group(1)) >= 0:
                self.joins.append((int(match.group(1)), match.group(2)))


#: Commit errors after which the member still owns what it still has assigned.
_GENERATION_MOVED_ON = frozenset(
    {
        confluent_kafka.KafkaError.ILLEGAL_GENERATION,
        confluent_kafka.KafkaError.REBALANCE_IN_PROGRESS,
    }
)


class RdkafkaMember(_MemberThread):
    """A ``confluent_kafka.Consumer`` member (classic protocol) on its own thread.

    Commits synchronously after each batch and in ``on_revoke``. Leader turns and the
    protocol the coordinator chose come from librdkafka's ``cgrp`` debug log.
    """

    def __init__(
        self,
        name: str,
        bootstrap: str,
        group_id: str,
        topics: Sequence[str],
        ledger: OwnershipLedger,
        accounting: RecordAccounting | None,
        *,
        strategy: str = "cooperative-sticky",
        extra_config: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(name, ledger, accounting)
        self._log = _RdkafkaLog()
        logger = logging.getLogger(f"tests.rdkafka.{name}.{id(self)}")
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(self._log)
        self.config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "group.protocol": "classic",
            "partition.assignment.strategy": strategy,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "debug": "cgrp",
            "logger": logger,
            **_GROUP_TIMINGS,
            **(extra_config or {}),
        }
        self.topics = list(topics)
        self.incremental = strategy == "cooperative-sticky"
        self.consumer: confluent_kafka.Consumer | None = None
        self.member_ids: set[str] = set()

    def _open(self) -> None:
        self.consumer = confluent_kafka.Consumer(self.config)
        self.consumer.subscribe(
            self.topics,
            **rdkafka_callbacks(
                self.ledger,
                self.name,
                incremental=self.incremental,
                before_revoke=lambda tps: self._commit_pending(tps),
                on_lost=self._forget_pending,
            ),
        )

    def _poll_once(self) -> None:
        assert self.consumer is not None
        self._account(self.consumer.consume(200, 0.05))
        member_id = self.consumer.memberid()
        if member_id:
            self.member_ids.add(member_id)
        self._commit_pending(None)

    def _commit_pending(self, only: frozenset[TopicPartition] | None) -> None:
        consumer = self.consumer
        if consumer is None:
            return
        offsets = self._take_pending(only)
        if not offsets:
            return
        try:
            consumer.commit(
                offsets=[
                    confluent_kafka.TopicPartition(tp.topic, tp.partition, offset)
                    for tp, offset in offsets.items()
                ],
                asynchronous=False,
            )
        except confluent_kafka.KafkaException as exc:
            error = exc.args[0]
            self.commit_failures.append(f"{error}")
            if only is not None:
                return
            if error.retriable():
                self._restore_pending(offsets)
            elif error.code() in _GENERATION_MOVED_ON:
                # librdkafka commits during a cooperative rebalance on the coordinator
                # connection where its own JoinGroup is parked; Kafka reads the commit
                # once the join completed and refuses the old generation. The member
                # may still own the partitions: commit them with the new generation
                # (at the next batch or before revoking), as an application would.
                owned = {TopicPartition(p.topic, p.partition) for p in consumer.assignment()}
                self._restore_pending({tp: o for tp, o in offsets.items() if tp in owned})
            return
        if self.accounting is not None:
            self.accounting.committed(self.name, offsets)

    def _close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()

    def lost_by_coordinator_since(self, since: float) -> bool:
        """Whether librdkafka logged, at or after ``since``, that it lost its assignment
        because the coordinator refused its generation or member id (a commit or
        heartbeat answered ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID): the coordinator
        ended its generation, which no assignor decides (``kept_but_given_up``)."""
        return any(_LOST_BY_COORDINATOR.search(line) for line in self.log_since(since))

    def log_since(self, since: float) -> list[str]:
        """librdkafka's ``cgrp`` lines logged at or after ``since`` (the latest 400 at
        most), each with its ``time.monotonic()``: what a failure report shows."""
        with self._log.guard:
            return [f"{at:.3f} {line}" for at, line in self._log.recent if at >= since]

    def led(self) -> list[int]:
        """The group size each time librdkafka logged this member's election as leader."""
        with self._log.guard:
            return list(self._log.led)

    def chosen_protocols(self) -> list[tuple[int, str]]:
        """(generation, protocol name) from each successful JoinGroup response."""
        with self._log.guard:
            return list(self._log.joins)


# --- producing and reading offsets ------------------------------------------------


class KeyProducer:
    """Produces records with unique keys ``<prefix>-<n>`` round-robin over the
    partitions of ``topic`` on a thread, about ``rate`` per second, feeding delivery
    reports to ``accounting``. ``produce(n)`` writes a burst synchronously."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        accounting: RecordAccounting,
        *,
        rate: float = 200.0,
        prefix: str = "k",
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.accounting = accounting
        self.rate = rate
        self.prefix = prefix
        self.errors: list[str] = []
        self._n = 0
        self._producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": False}
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    def _report(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(str(error))
            return
        tp = TopicPartition(message.topic(), message.partition())
        self.accounting.produced(message.key(), tp, message.offset())

    def _one(self) -> None:
        key = f"{self.prefix}-{self._n}".encode()
        self._producer.produce(
            self.topic,
            key=key,
            value=b"v" * 16,
            partition=self._n % self.partitions,
            on_delivery=self._report,
        )
        self._n += 1

    def produce(self, count: int) -> None:
        """Write ``count`` records now and wait for their delivery reports."""
        for _ in range(count):
            self._one()
            self._producer.poll(0)
        self.flush()

    def flush(self) -> None:
        remaining = self._producer.flush(30)
        if remaining:
            raise AssertionError(f"{remaining} record(s) not delivered within 30 s")

    def start(self) -> None:
        """Start producing in the background."""
        self._thread = threading.Thread(target=self._run, name="key-producer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._one()
            self._producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def stop(self) -> None:
        """Stop the background thread and wait for every delivery report."""
        self._halt()
        if not self._closed:
            self.flush()

    def close(self) -> None:
        """Destroy the librdkafka client now, dropping what is still undelivered; once
        is enough. Left to the garbage collector (or held by a failed test's traceback),
        it outlives its broker and writes "Connect to ... failed" lines to the
        process's stderr while later tests run."""
        if self._closed:
            return
        self._halt()
        self._producer.purge()
        self._producer.close()
        self._closed = True

    def _halt(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def committed_offsets(
    bootstrap: str, group_id: str, partitions: Iterable[TopicPartition], timeout_s: float = 10.0
) -> dict[TopicPartition, int | None]:
    """The group's committed offsets, read by a confluent-kafka client that does not
    join the group (OffsetFetch only)."""
    reader = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False}
    )
    try:
        answer = reader.committed(
            [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions],
            timeout=timeout_s,
        )
    finally:
        reader.close()
    return {
        TopicPartition(p.topic, p.partition): (p.offset if p.offset >= 0 else None) for p in answer
    }


class CommittedWatcher:
    """Samples the group's committed offsets from outside the group on a thread (a
    confluent-kafka client sending OffsetFetch only) and feeds them to ``accounting``,
    which flags any offset that goes back. Failed samples (coordinator down) are
    counted in ``failed_samples`` and skipped."""

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        partitions: Iterable[TopicPartition],
        accounting: RecordAccounting,
        *,
        interval_s: float = 0.3,
    ) -> None:
        self.accounting = accounting
        self.partitions = [
            confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions
        ]
        self.interval_s = interval_s
        self.samples = 0
        self.failed_samples = 0
        self._reader = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False}
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="committed-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval_s):
                sent_at = time.monotonic()
                try:
                    answer = self._reader.committed(self.partitions, timeout=2.0)
                except confluent_kafka.KafkaException:
                    self.failed_samples += 1
                    continue
                offsets = {
                    TopicPartition(p.topic, p.partition): p.offset
                    for p in answer
                    if p.error is None and p.offset >= 0
                }
                self.accounting.committed("watcher", offsets, as_of=sent_at)
                self.samples += 1
        finally:
            self._reader.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def end_offsets(
    bootstrap: str, partitions: Iterable[TopicPartition], timeout_s: float = 10.0
) -> dict[TopicPartition, int]:
    """High watermarks of ``partitions``."""
    reader = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return {
            tp: reader.get_watermark_offsets(
                confluent_kafka.TopicPartition(tp.topic, tp.partition), timeout=timeout_s
            )[1]
            for tp in partitions
        }
    finally:
        reader.close()


def wait_for(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    *,
    members: Sequence[_MemberThread] = (),
    interval_s: float = 0.05,
) -> None:
    """Wait until ``condition()``; fail naming ``what`` after ``timeout_s``, or at once
    with a member's error if a member thread failed."""
    deadline = time.monotonic() + timeout_s
    while True:
        for member in members:
            if member.error is not None:
                raise AssertionError(f"{member.name} failed: {member.error!r}") from member.error
        if condition():
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


_M = TypeVar("_M", bound=_MemberThread)


class LedgerGroup(Generic[_M]):
    """Members of one group on one topic, sharing an ownership ledger, the record
    accounting and a keyed producer; the tests add their members (``adopt``), wait for
    the group to settle, and check that nothing went wrong."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        partitions: int,
        *,
        quiet_s: float,
        settle_s: float,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.quiet_s = quiet_s
        self.settle_s = settle_s
        self.all_tps = frozenset(TopicPartition(topic, p) for p in range(partitions))
        self.ledger = OwnershipLedger()
        self.accounting = RecordAccounting()
        self.producer = KeyProducer(bootstrap, topic, partitions, self.accounting, rate=150)
        self.live: list[_M] = []
        self.started: list[_M] = []

    def adopt(self, member: _M) -> None:
        """Start ``member`` and count it in."""
        member.start()
        self.live.append(member)
        self.started.append(member)

    def settle(self, what: str) -> None:
        """Wait until every partition is owned, each live member owns some, and no
        listener was called for ``quiet_s``."""

        def settled() -> bool:
            owners = self.ledger.owners()
            return (
                set(owners) == self.all_tps
                and set(owners.values()) == {m.name for m in self.live}
                and self.ledger.quiet_for() >= self.quiet_s
            )

        try:
            wait_for(settled, self.settle_s, what, members=self.live)
        except AssertionError as exc:
            if "timed out" not in str(exc):
                raise
            owners = sorted((tp.partition, owner) for tp, owner in self.ledger.owners().items())
            history = "\n".join(map(repr, self.ledger.events()[-30:]))
            raise AssertionError(
                f"{exc}\nlive: {[m.name for m in self.live]}\nowners now: {owners}\n"
                f"--- last listener calls ---\n{history}"
            ) from None

    def finish(self) -> None:
        """Stop producing, wait until every record is processed, stop every member."""
        self.producer.stop()
        wait_for(
            lambda: not self.accounting.missing(),
            self.settle_s,
            "every produced record to be processed",
            members=self.live,
        )
        self.stop_all()

    def stop_all(self) -> None:
        try:
            self.producer.stop()
            while self.live:
                self.live.pop(0).stop()
        finally:
            self.producer.close()

    def member_failures(self) -> dict[str, list[str]]:
        """Fail on a member's error or an ownership violation; the first commit
        failures of each member that had some (the caller decides what they allow)."""
        for member in self.started:
            assert member.error is None, f"{member.name}: {member.error!r}"
        self.ledger.check()
        return {m.name: m.commit_failures[:3] for m in self.started if m.commit_failures}


# --- more kinds of members (issue 32: every kind in one group) -----------------------


class _AsyncLedgerListener(RebalanceListener):
    """``LedgerListener`` for an ``AsyncConsumer``: ``on_partitions_revoked`` is a
    coroutine that awaits the commit of the revoked partitions before the ledger hears
    of it (KIP-429's listener may commit; the AsyncConsumer awaits it)."""

    def __init__(self, member: AsyncCoopMember) -> None:
        self.member = member

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.member.ledger.assigned(self.member.name, partitions)

    async def on_partitions_revoked(  # type: ignore[override]
        self, partitions: frozenset[TopicPartition]
    ) -> None:
        await self.member.commit_async(frozenset(partitions))
        self.member.ledger.revoked(self.member.name, partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.member._forget_pending(frozenset(partitions))
        self.member.ledger.lost(self.member.name, partitions)


class AsyncCoopMember(CoopMember):
    """A ``coopconsumer.aio.AsyncConsumer`` member on its own thread and event loop,
    with ``CoopMember``'s configuration, commits and error handling."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.async_consumer: Any = None

    def _run(self) -> None:
        import asyncio

        try:
            asyncio.run(self._main())
        except BaseException as exc:  # kept for the test to assert on
            logging.getLogger("tests.ledger").exception("%s failed", self.name)
            if self.error is None:
                self.error = exc

    async def _main(self) -> None:
        from coopconsumer.aio import AsyncConsumer

        async with AsyncConsumer(self.config) as consumer:
            self.async_consumer = consumer
            consumer.subscribe(self.topics, listener=_AsyncLedgerListener(self))
            while not self._stop.is_set():
                records = await consumer.consume(200, 0.05)
                member_id = consumer.group_metadata().member_id
                if member_id:
                    self.member_ids.add(member_id)
                self._account(records)
                await self.commit_async(None)
            await self.commit_async(None)

    async def commit_async(self, only: frozenset[TopicPartition] | None) -> None:
        consumer = self.async_consumer
        if consumer is None:
            return
        offsets = self._take_pending(only)
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except coopconsumer.RebalanceInProgressError as exc:
            if only is not None:
                self.commit_failures.append(f"on revoke of {sorted(offsets)}: {exc}")
                return
            self._restore_pending(offsets)
            return
        except coopconsumer.CommitFailedError as exc:
            self.commit_failures.append(f"{exc}")
            return
        except coopconsumer.CoopConsumerError as exc:
            if not exc.retriable:
                raise
            self.commit_failures.append(f"retriable: {exc}")
            self._restore_pending(offsets)
            return
        if self.accounting is not None:
            self.accounting.committed(self.name, offsets)


def _kp_leading(base: Any, sink: list[tuple[str, ...]]) -> Any:
    """An instance of kafka-python assignor ``base`` that records each leader turn."""

    class Leading(base):  # type: ignore[misc]
        def assign(self, cluster: Any, members: Any) -> Any:
            sink.append(tuple(sorted(str(getattr(m, "member_id", m)) for m in members)))
            return super().assign(cluster, members)

    return Leading()


class KafkaPythonMember(_MemberThread):
    """A kafka-python (3.x) ``KafkaConsumer`` member with its ``cooperative-sticky``
    assignor, on its own thread: commits after each batch and in
    ``on_partitions_revoked`` (which kafka-python also calls on close)."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        group_id: str,
        topics: Sequence[str],
        ledger: OwnershipLedger,
        accounting: RecordAccounting | None,
        *,
        strategy: str = "cooperative-sticky",
        extra_config: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(name, ledger, accounting)
        from kafka.coordinator.assignors.cooperative_sticky import (
            CooperativeStickyAssignor as KpCooperativeSticky,
        )
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        assignors = {"cooperative-sticky": KpCooperativeSticky, "range": RangePartitionAssignor}
        #: The member ids of the group at each of this member's leader turns.
        self.led_groups: list[tuple[str, ...]] = []
        self.config: dict[str, object] = {
            "bootstrap_servers": bootstrap,
            "group_id": group_id,
            "client_id": name,
            "partition_assignment_strategy": [
                _kp_leading(assignors[s.strip()], self.led_groups) for s in strategy.split(",")
            ],
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 500,
            **(extra_config or {}),
        }
        self.topics = list(topics)
        self.consumer: Any = None
        self.member_ids: set[str] = set()

    def _open(self) -> None:
        import kafka

        member = self

        class Listener(kafka.ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                tps = _tps(revoked)
                member._commit_pending(tps)
                member.ledger.revoked(member.name, tps)

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.ledger.assigned(member.name, _tps(assigned))

            def on_partitions_lost(self, lost: Any) -> None:
                tps = _tps(lost)
                member._forget_pending(tps)
                member.ledger.lost(member.name, tps)

        self.consumer = kafka.KafkaConsumer(**self.config)
        self.consumer.subscribe(self.topics, listener=Listener())

    def _poll_once(self) -> None:
        batches = self.consumer.poll(timeout_ms=50, max_records=200)
        now = time.monotonic()
        for tp_kp, records in batches.items():
            tp = TopicPartition(tp_kp.topic, tp_kp.partition)
            for record in records:
                self.ledger.record_received(self.name, tp)
                if self.accounting is not None:
                    self.accounting.consumed(self.name, record.key, tp, record.offset)
                self.last_record_at[tp] = now
                with self._pending_lock:
                    self._pending[tp] = record.offset + 1
        member_id = self.consumer._coordinator._generation.member_id
        if member_id:
            self.member_ids.add(member_id)
        self._commit_pending(None)

    def _commit_pending(self, only: frozenset[TopicPartition] | None) -> None:
        import kafka
        import kafka.errors

        if self.consumer is None:
            return
        offsets = self._take_pending(only)
        if not offsets:
            return
        try:
            self.consumer.commit(
                {
                    kafka.TopicPartition(tp.topic, tp.partition): kafka.OffsetAndMetadata(
                        offset, "", -1
                    )
                    for tp, offset in offsets.items()
                }
            )
        except kafka.errors.KafkaError as exc:
            self.commit_failures.append(f"{exc!r}")
            if getattr(exc, "retriable", False) and only is None:
                self._restore_pending(offsets)
            return
        if self.accounting is not None:
            self.accounting.committed(self.name, offsets)

    def _close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()

    def led(self) -> list[tuple[str, ...]]:
        """The group's member ids each time this member ran the assignment."""
        return list(self.led_groups)
