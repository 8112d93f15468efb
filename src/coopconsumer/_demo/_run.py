"""One demo scenario: a consumer group scaling 2 -> 4 -> 3 members under a steady stream.

Each member is a public ``coopconsumer.Consumer`` running in its own thread (a consumer
is used from one thread); its listener and poll loop record what happened into a shared
``Recorder``: every record processed (when, by whom, which partition, which sequence
number) and every rebalance callback. The report is computed from those facts and from
each member's own metrics, never from the library's internals.

Imports only the public API (``coopconsumer``, ``coopconsumer.testing``) and the demo's
producer; threads and clocks are fine here, this is an application.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import attrs

from .. import Consumer, CoopConsumerError, RebalanceListener, TopicPartition
from .._metrics import max_reading
from ..testing import EmbeddedBroker, unique_name
from ._demo_producer import SteadyProducer

__all__ = [
    "DemoAborted",
    "DemoError",
    "Event",
    "MemberStats",
    "Options",
    "Recorder",
    "ScenarioResult",
    "run_scenario",
]

#: Progress callback: one line of text.
Progress = Callable[[str], None]


class DemoError(Exception):
    """The scenario could not be completed (the group did not settle in time, ...)."""


class DemoAborted(Exception):
    """The user interrupted the demo (the stop event was set)."""


@attrs.frozen(kw_only=True)
class Options:
    """How long and how hard one scenario runs."""

    partitions: int = 12
    #: Records produced per second, spread over all partitions.
    rate: float = 300.0
    #: How long the group runs undisturbed after it settles in each phase.
    hold_s: float = 4.0
    #: A group counts as settled when every partition is owned and no callback ran for this long.
    settle_s: float = 1.0
    #: Longest wait for a group to settle or for the records to drain.
    patience_s: float = 60.0
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 1000


@attrs.frozen(kw_only=True)
class Event:
    """A rebalance callback: ``kind`` is ``assigned``, ``revoked`` or ``lost``."""

    at: float
    member: str
    kind: str
    partitions: frozenset[int]
    generation: int


@attrs.frozen(kw_only=True)
class MemberStats:
    """What one member's ``metrics()`` said, read just before it closed."""

    name: str
    rebalance_total: float
    rebalance_latency_total_ms: float
    #: Largest ``rebalance-latency-max`` seen while sampling (the metric is windowed).
    rebalance_latency_max_ms: float
    failed_rebalance_total: float


class Recorder:
    """Thread-safe log of processed records, callbacks and phase marks."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.start = time.monotonic()
        self._lock = threading.Lock()
        #: (time, member, partition, sequence number) per processed record.
        self.processed: list[tuple[float, str, int, int]] = []
        self.events: list[Event] = []
        #: (time, label) when a phase of the scenario began.
        self.phases: list[tuple[float, str]] = []
        self.errors: list[tuple[float, str, str]] = []
        self._owned: dict[str, set[int]] = {}
        self._last_event = self.start
        self._seen: set[int] = set()

    def record_batch(self, at: float, member: str, batch: Iterable[tuple[int, int]]) -> None:
        with self._lock:
            for partition, seq in batch:
                self.processed.append((at, member, partition, seq))
                self._seen.add(seq)

    def record_event(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)
            owned = self._owned.setdefault(event.member, set())
            if event.kind == "assigned":
                owned |= event.partitions
            else:
                owned -= event.partitions
            self._last_event = event.at

    def record_error(self, at: float, member: str, error: str) -> None:
        with self._lock:
            self.errors.append((at, member, error))

    def mark(self, label: str) -> None:
        with self._lock:
            self.phases.append((time.monotonic(), label))

    def seen(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._seen)

    def settled(self, members: Iterable[str], settle_s: float) -> bool:
        """The group owns the assignment its assignor promises and no rebalance is under
        way: every partition owned by exactly one of ``members``, each member owning
        ``partitions // len(members)`` or one more (every built-in assignor balances a
        single topic that all members subscribe to within one), and no callback for
        ``settle_s``. Under cooperative-sticky a joiner owns nothing after the first
        round, so this waits for the follow-up rebalance."""
        with self._lock:
            if time.monotonic() - self._last_event < settle_s:
                return False
            names = list(members)
            if not names:
                return False
            low = self.partitions // len(names)
            high = low + (1 if self.partitions % len(names) else 0)
            total = 0
            union: set[int] = set()
            for member in names:
                owned = self._owned.get(member)
                if owned is None or not low <= len(owned) <= high:
                    return False
                total += len(owned)
                union |= owned
            return total == self.partitions and union == set(range(self.partitions))

    @property
    def last_event_at(self) -> float:
        """When the last listener callback was recorded (monotonic seconds)."""
        with self._lock:
            return self._last_event

    def ownership(self, members: Iterable[str]) -> str:
        """How many partitions each of ``members`` owns now, e.g. ``m1=6 m2=6 m3=0``."""
        with self._lock:
            return " ".join(f"{m}={len(self._owned.get(m, ()))}" for m in members)


class _Listener(RebalanceListener):
    def __init__(self, name: str, recorder: Recorder) -> None:
        self.name = name
        self.recorder = recorder
        self.consumer: Consumer | None = None

    def _record(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        generation = -1 if self.consumer is None else self.consumer.group_metadata().generation_id
        self.recorder.record_event(
            Event(
                at=time.monotonic(),
                member=self.name,
                kind=kind,
                partitions=frozenset(tp.partition for tp in partitions),
                generation=generation,
            )
        )

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self._record("assigned", partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self._record("revoked", partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self._record("lost", partitions)


_METRICS_EVERY_S = 0.2
#: How long a member's close() may take.
_CLOSE_TIMEOUT_S = 16.0


class _Member:
    """One group member: a Consumer driven by its own thread until stopped."""

    def __init__(
        self, name: str, config: Mapping[str, object], topic: str, recorder: Recorder
    ) -> None:
        self.name = name
        self._config = dict(config)
        self._topic = topic
        self._recorder = recorder
        self._stop = threading.Event()
        self.stats: MemberStats | None = None
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"demo-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout_s: float) -> bool:
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            consumer = Consumer(self._config)
        except BaseException as exc:
            self.failure = exc
            return
        listener = _Listener(self.name, self._recorder)
        listener.consumer = consumer
        latency_max = math.nan
        try:
            consumer.subscribe([self._topic], listener=listener)
            next_sample = 0.0
            while not self._stop.is_set():
                try:
                    batch = consumer.consume(500, 0.05)
                except CoopConsumerError as exc:
                    self._recorder.record_error(time.monotonic(), self.name, repr(exc))
                    if not exc.retriable:
                        raise
                    continue
                now = time.monotonic()
                if batch:
                    self._recorder.record_batch(now, self.name, _numbered(batch))
                if now >= next_sample:
                    next_sample = now + _METRICS_EVERY_S
                    latency_max = max_reading(
                        latency_max, consumer.metrics()["rebalance-latency-max"]
                    )
            metrics = consumer.metrics()
            self.stats = MemberStats(
                name=self.name,
                rebalance_total=metrics["rebalance-total"],
                rebalance_latency_total_ms=metrics["rebalance-latency-total"],
                rebalance_latency_max_ms=max_reading(latency_max, metrics["rebalance-latency-max"]),
                failed_rebalance_total=metrics["failed-rebalance-total"],
            )
        except BaseException as exc:
            self.failure = exc
        finally:
            try:
                # Half of the timeout may go to letting a rebalance under way reach its
                # SyncGroup answer, so that what was read gets committed (Tansu's
                # rebalances take seconds).
                consumer.close(timeout=_CLOSE_TIMEOUT_S)
            except BaseException as exc:
                self._recorder.record_error(time.monotonic(), self.name, f"close: {exc!r}")


class _Record(Protocol):
    """What the demo reads of a record (confluent-kafka's ``Message``)."""

    def partition(self) -> int | None: ...

    def value(self) -> bytes | None: ...


def _numbered(batch: Iterable[_Record]) -> list[tuple[int, int]]:
    """(partition, sequence number) of each record; the demo's producer writes the
    sequence number as the value."""
    numbered = []
    for message in batch:
        partition, value = message.partition(), message.value()
        if partition is not None and value is not None:
            numbered.append((partition, int(value)))
    return numbered


@attrs.frozen(kw_only=True)
class ScenarioResult:
    """Everything one run recorded, for the report."""

    label: str
    strategy: str
    recorder: Recorder
    members: tuple[MemberStats, ...]
    produced: frozenset[int]
    #: When the final shutdown of every member began: callbacks after it are not counted.
    teardown_at: float
    duration_s: float


def run_scenario(
    broker: EmbeddedBroker,
    *,
    label: str,
    strategy: str,
    options: Options,
    progress: Progress,
    stop: threading.Event,
) -> ScenarioResult:
    """Run 2 members, scale to 4, stop one, with records flowing; return the facts.

    Raises :class:`DemoAborted` when ``stop`` is set, :class:`DemoError` when the group
    does not settle or the records do not drain within ``options.patience_s``. Every
    member and the producer are stopped before this returns or raises.
    """
    topic = unique_name(f"demo-{label}")
    group = unique_name(f"demo-{label}")
    broker.create_topic(topic, partitions=options.partitions)
    recorder = Recorder(options.partitions)
    producer = SteadyProducer(
        broker.bootstrap, topic, options.partitions, options.rate, broker.client_config
    )
    members: dict[str, _Member] = {}
    stopped: list[_Member] = []
    started = time.monotonic()

    def say(text: str) -> None:
        progress(f"[{label} {time.monotonic() - started:5.1f}s] {text}")

    def member_config(name: str) -> dict[str, object]:
        return {
            **broker.client_config,  # security keys of --config (issue 10)
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            # Member ids start with client.id on Kafka and Tansu, and range orders
            # members by id: numbered names make the eager layout predictable.
            "client.id": name,
            "partition.assignment.strategy": strategy,
            "session.timeout.ms": options.session_timeout_ms,
            "heartbeat.interval.ms": options.heartbeat_interval_ms,
            "max.poll.interval.ms": 30000,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 1000,
        }

    def check() -> None:
        if stop.is_set():
            raise DemoAborted
        for member in members.values():
            if member.failure is not None:
                raise DemoError(f"{member.name} failed: {member.failure!r}")

    def pause(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            check()
            stop.wait(min(0.1, max(0.0, end - time.monotonic())))

    def wait_settled(what: str) -> None:
        # Timed from the phase's event (its mark), not from when this wait began: a
        # stopped member's close() may take seconds before the wait starts.
        began = recorder.phases[-1][0]
        deadline = time.monotonic() + options.patience_s
        while not recorder.settled(members, options.settle_s):
            check()
            if time.monotonic() > deadline:
                raise DemoError(
                    f"{what}: the group did not reach a balanced assignment within "
                    f"{options.patience_s:.0f} s (owned: {recorder.ownership(members)})"
                )
            stop.wait(0.05)
        # The last callback completed the balanced assignment; the quiet settle_s that
        # confirmed it is not part of the rebalance.
        took = max(0.0, recorder.last_event_at - began)
        say(
            f"{what}: balanced ({recorder.ownership(members)}), the last partition "
            f"assigned {took:.1f} s after the change"
        )

    def add(name: str) -> None:
        member = _Member(name, member_config(name), topic, recorder)
        members[name] = member
        member.start()

    def remove(name: str) -> None:
        member = members.pop(name)
        member.stop()
        stopped.append(member)
        if not member.join(options.patience_s):
            raise DemoError(f"{name} did not close within {options.patience_s:.0f} s")

    try:
        producer.start()
        say(f"producing {options.rate:.0f} records/s to {options.partitions} partitions")
        recorder.mark("2 members")
        add("member-1")
        add("member-2")
        say("2 members joining")
        wait_settled("2 members")
        pause(options.hold_s)

        recorder.mark("scale to 4")
        add("member-3")
        add("member-4")
        say("scaling to 4 members")
        wait_settled("4 members")
        pause(options.hold_s)

        recorder.mark("stop 1")
        say("stopping member-2")
        remove("member-2")
        wait_settled("3 members")
        pause(options.hold_s)

        recorder.mark("drain")
        producer.stop()
        produced = producer.acknowledged()
        say(f"producer stopped after {len(produced)} records; draining")
        deadline = time.monotonic() + options.patience_s
        while not produced <= recorder.seen():
            check()
            if time.monotonic() > deadline:
                missing = len(produced - recorder.seen())
                raise DemoError(f"{missing} records were not consumed within the patience")
            stop.wait(0.05)
        teardown_at = time.monotonic()
    finally:
        producer.stop(flush_timeout_s=2.0)
        for member in members.values():
            member.stop()
        for member in members.values():
            member.join(_CLOSE_TIMEOUT_S + 5.0)
        stopped.extend(members.values())
    return ScenarioResult(
        label=label,
        strategy=strategy,
        recorder=recorder,
        members=tuple(m.stats for m in stopped if m.stats is not None),
        produced=produced,
        teardown_at=teardown_at,
        duration_s=teardown_at - started,
    )
