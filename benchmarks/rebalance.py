"""Benchmark: what a member joining a busy group costs the members already in it.

    python benchmarks/rebalance.py [--sizes 4,8] [--partitions 24] [--rate 2400]
    python benchmarks/rebalance.py --broker mock    # adds the KIP-848 rows

Starts an embedded Tansu broker (``--broker mock``: librdkafka's mock cluster, three
brokers). For each group size N and each implementation:

* ``coopconsumer cooperative-sticky`` (COOPERATIVE, KIP-429),
* ``coopconsumer range`` (EAGER),
* ``confluent-kafka cooperative-sticky`` (librdkafka's own KIP-429 client, the
  baseline),
* mock only: ``coopconsumer group.protocol=consumer`` and ``confluent-kafka
  group.protocol=consumer`` (KIP-848: the broker assigns, members reconcile on their
  heartbeats). Tansu has no ConsumerGroupHeartbeat (API 68), so these need the mock;
  there every row runs on the same mock cluster, for a like-for-like table.

N members (one thread each, auto-commit on, defaults otherwise) consume a fresh topic
of 24 partitions while a producer writes ``--rate`` records/s round-robin over them
(100 records/s per partition by default, so a partition normally gets a record every
~10 ms). Once the group has settled (every partition owned, shares even, no rebalance
callback for 1.5 s) one more member starts. Measured from the listener callbacks and
the arrival time of each partition's records at the consumers:

* **kept pause**: over the partitions whose owner is the same before and after the
  rebalance, the longest gap between two consecutive record arrivals that overlaps the
  rebalance window (join -> settled). Cooperative members keep consuming them, so it
  should stay at the steady-state gap; eager members revoke everything, so it is the
  whole rebalance. Reported as max and median over the kept partitions.
* **moved pause**: the same over the partitions that changed owner.
* **all owned**: time from the new member's start until every partition is owned again
  with even shares (for cooperative, both rounds of KIP-429's two-round hand-over).
* **steady gap**: the longest gap over all partitions in the 3 s before the join, for
  scale.
* **all owned after leave**: once the group has settled again, the first member closes
  (leaving the group); time from then until the remaining members own every partition
  with even shares.
* the joining member's own ``rebalance-total`` and ``rebalance-latency-avg`` from
  ``Consumer.metrics()`` (KIP-429 names; coopconsumer only).

Tansu holds every JoinGroup for about max(1 s, session.timeout.ms / 2) (docs/testing.md), so
the absolute rebalance times mostly measure that hold (session.timeout.ms is 2000
here); the comparison between implementations on the same broker is the point.

A second Tansu quirk hits cooperative joins hardest: a follower's SyncGroup that
arrives *before* the leader's is not answered when the leader's assignment arrives (Kafka
answers it then); Tansu answers it about a second later, or, if another round started
meanwhile (KIP-429's follow-up round does, as soon as a member that revoked partitions
rejoins), with REBALANCE_IN_PROGRESS about session.timeout.ms later, when that round
has already completed without the follower. The joining member sends the first
JoinGroup, so it syncs first and is the usual victim. What the follower does next
decides whether the group converges. A Java client rejoins with a Subscription whose
generation field it has bumped to the generation of the failed round (Java's
``ConsumerCoordinator.metadata()`` sends ``generation().generationId``), so its
metadata changed and the coordinator starts yet another round, which strands the members
now holding a SyncGroup in the round just completed: members leapfrog each other round
after round (coopconsumer did this until it switched; 5-23 s, sometimes over 30 s, for
N=8). librdkafka sends the generation of its last *applied* assignment (its sticky
assignors' state, set in ``on_assignment``), so its rejoin repeats its metadata byte
for byte and the coordinator, Tansu as Kafka (``member.matches``), hands it the
current generation and its assignment without a new round. coopconsumer now does the
same (``GroupMember._subscription_for``; pinned on Tansu by
tests/integration/test_tansu_sync.py). Tansu's held SyncGroup itself remains; it still
costs a round trip of about a second per victim.

On the mock, the KIP-848 rows depend on the broker's
``group.consumer.heartbeat.interval.ms``, which paces every step of a KIP-848
reconciliation (the mock's default is 3000 ms): it is set to ``HEARTBEAT_MS`` (and the
consumer session timeout to ``SESSION_TIMEOUT_MS``), the classic members' own settings,
and printed with the table. The classic rows on the mock meet its quirks
(docs/testing.md): every join phase lasts session.timeout.ms - 1 s (1 s here) however
soon the members rejoin, so KIP-429's two rounds take about 2 s for every client; and it
completes a round when the leader's SyncGroup arrives, answering a later follower's with
INVALID_REQUEST, which a coopconsumer member reports from ``poll()`` before it rejoins
(the benchmark counts those, "late syncs", instead of failing; each costs the group a
round). It also refuses every OffsetCommit while a round is joining, so a member's
commit before revoking fails if another member's JoinGroup got there first: the note
counts coopconsumer's ("failed commits before revoking", logged by the Consumer) from
the first member's start until the leave is absorbed, not while the members close.

When the joiner starts matters on the KIP-848 rows. The joiner starts ``QUIET_S`` after
the group's last change, which came with the members' last acknowledgements, so by
default it starts at a fixed point of their heartbeat cycle (1.5 s is 7.5 intervals of
200 ms: their next heartbeats come about 100 ms after the join). Whether the mock's
hand-over then completes in one interval or two depends on the order of the members'
heartbeats (docs/architecture.md, "Rebalance timing"), so one run measures one phase.
``--join-jitter-ms`` starts the joiner after a further uniform random delay up to that
bound, so that repeated runs sample every phase.

A scenario that does not settle within 30 s is printed as FAILED with who owned how
many partitions, not retried; the joining member's ``failed-rebalance-total`` shows how
many of its JoinGroup/SyncGroup attempts failed on the way.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import random
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import confluent_kafka
from _common import describe_machine, print_table, started_broker

import coopconsumer
from coopconsumer import RebalanceListener, TopicPartition
from coopconsumer.testing import EmbeddedBroker, MockBroker, embedded_broker, kafka_cluster

SESSION_TIMEOUT_MS = 2000
HEARTBEAT_MS = 200
#: Both sides fetch with librdkafka; a short fetch wait keeps the steady-state gap (the
#: pause resolution) near the per-partition record interval, on both sides alike.
FETCH_WAIT_MS = 50
QUIET_S = 1.5
SETTLE_BOUND_S = 30.0
#: librdkafka ``debug`` contexts for the confluent-kafka members (``--rdkafka-debug``).
RDKAFKA_DEBUG = ""
#: Upper bound of the random delay before the joiner starts (``--join-jitter-ms``).
JOIN_JITTER_S = 0.0
#: The "strategy" of the KIP-848 rows: ``group.protocol=consumer``, the broker assigns.
KIP848 = "group.protocol=consumer"
CLASSIC_IMPLEMENTATIONS = (
    "coopconsumer cooperative-sticky",
    "coopconsumer range",
    "confluent-kafka cooperative-sticky",
)
KIP848_IMPLEMENTATIONS = (f"coopconsumer {KIP848}", f"confluent-kafka {KIP848}")
#: What a coopconsumer member on the mock reports from poll() when its SyncGroup comes
#: after the leader's (INVALID_REQUEST to SyncGroup); it rejoins by itself.
_INVALID_REQUEST, _SYNC_GROUP = 42, 14


def _tp_of(message: confluent_kafka.Message) -> TopicPartition:
    topic, partition = message.topic(), message.partition()
    if topic is None or partition is None:
        raise RuntimeError(f"a record without a partition: {message!r}")
    return TopicPartition(topic, partition)


class Tracker:
    """Ownership and record arrivals of one group, fed by every member. Thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[TopicPartition, str] = {}
        self.arrivals: dict[TopicPartition, list[float]] = {}
        self.last_change = time.monotonic()
        self.errors: list[str] = []
        self.late_syncs = 0
        self.failed_revoke_commits = 0

    def assigned(self, member: str, partitions: Any) -> None:
        with self.lock:
            for p in partitions:
                self.owner[TopicPartition(str(p.topic), int(p.partition))] = member
            self.last_change = time.monotonic()

    def removed(self, member: str, partitions: Any) -> None:
        with self.lock:
            for p in partitions:
                tp = TopicPartition(str(p.topic), int(p.partition))
                if self.owner.get(tp) == member:
                    del self.owner[tp]
            self.last_change = time.monotonic()

    def arrived(self, messages: Sequence[confluent_kafka.Message]) -> None:
        now = time.monotonic()
        seen = {_tp_of(m) for m in messages if m.error() is None}
        with self.lock:
            for tp in seen:
                self.arrivals.setdefault(tp, []).append(now)

    def snapshot(self) -> tuple[dict[TopicPartition, str], float]:
        with self.lock:
            return dict(self.owner), self.last_change

    def max_gap(self, tp: TopicPartition, start: float, end: float) -> float:
        """Longest gap between consecutive arrivals of ``tp`` overlapping [start, end]."""
        with self.lock:
            times = list(self.arrivals.get(tp, ()))
        longest = 0.0
        for before, after in itertools.pairwise(times):
            if after >= start and before <= end:
                longest = max(longest, after - before)
        # Nothing arrived since the window opened: the pause lasts at least until its end.
        last = max((t for t in times if t <= end), default=start)
        return max(longest, end - last) if last < end else longest


class RevokeCommitFailures(logging.Handler):
    """Counts the coopconsumer members' failed commits before revoking (the Consumer
    logs each one) into ``tracker`` while it is set: from the first member's start
    until the group has absorbed the leave, not while the members close."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.tracker: Tracker | None = None

    def emit(self, record: logging.LogRecord) -> None:
        tracker = self.tracker
        if tracker is not None and record.getMessage().startswith("auto-commit before revoking"):
            with tracker.lock:
                tracker.failed_revoke_commits += 1


REVOKE_COMMIT_FAILURES = RevokeCommitFailures()
logging.getLogger("coopconsumer.consumer").addHandler(REVOKE_COMMIT_FAILURES)


class _Member:
    def __init__(self, name: str, tracker: Tracker) -> None:
        self.name = name
        self.tracker = tracker
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._guarded, name=name, daemon=True)

    def _guarded(self) -> None:
        try:
            self.run()
        except Exception as exc:  # reported in the output, never hidden
            self.tracker.errors.append(f"{self.name}: {exc!r}")

    def run(self) -> None:
        raise NotImplementedError


class _CoopListener(RebalanceListener):
    def __init__(self, member: str, tracker: Tracker) -> None:
        self.member = member
        self.tracker = tracker

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.tracker.assigned(self.member, partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.tracker.removed(self.member, partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.tracker.removed(self.member, partitions)


class CoopMember(_Member):
    def __init__(
        self, name: str, tracker: Tracker, bootstrap: str, group: str, topic: str, strategy: str
    ) -> None:
        super().__init__(name, tracker)
        self.config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "latest",
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            **_group_settings(strategy),
        }
        self.topic = topic
        self.consumer: coopconsumer.Consumer | None = None

    def run(self) -> None:
        with coopconsumer.Consumer(self.config) as consumer:
            self.consumer = consumer
            consumer.subscribe([self.topic], _CoopListener(self.name, self.tracker))
            while not self.stop_event.is_set():
                try:
                    self.tracker.arrived(consumer.consume(500, 0.02))
                except coopconsumer.KafkaError as exc:
                    if (exc.code, exc.api_key) != (_INVALID_REQUEST, _SYNC_GROUP):
                        raise
                    with self.tracker.lock:
                        self.tracker.late_syncs += 1


def _group_settings(strategy: str) -> dict[str, object]:
    """Classic: the assignor and the client's session settings. KIP-848: the broker
    assigns and owns the session and heartbeat settings."""
    if strategy == KIP848:
        return {"group.protocol": "consumer"}
    return {
        "group.protocol": "classic",
        "partition.assignment.strategy": strategy,
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS,
    }


class RdkafkaMember(_Member):
    def __init__(
        self, name: str, tracker: Tracker, bootstrap: str, group: str, topic: str, strategy: str
    ) -> None:
        super().__init__(name, tracker)
        self.config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "latest",
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            **_group_settings(strategy),
        }
        if RDKAFKA_DEBUG:
            self.config["debug"] = RDKAFKA_DEBUG
            self.config["logger"] = logging.getLogger(f"rdkafka.{name}")
        self.topic = topic

    def run(self) -> None:
        consumer = confluent_kafka.Consumer(self.config)
        tracker, name = self.tracker, self.name
        try:
            consumer.subscribe(
                [self.topic],
                on_assign=lambda _c, ps: tracker.assigned(name, ps),
                on_revoke=lambda _c, ps: tracker.removed(name, ps),
                on_lost=lambda _c, ps: tracker.removed(name, ps),
            )
            while not self.stop_event.is_set():
                tracker.arrived(consumer.consume(500, 0.02))
        finally:
            consumer.close()


class Producer:
    """Writes ``rate`` records/s round-robin over the partitions on a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float) -> None:
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.run, name="producer", daemon=True)

    def run(self) -> None:
        n = 0
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            self.producer.produce(self.topic, value=b"x" * 100, partition=n % self.partitions)
            n += 1
            self.producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0.001:
                time.sleep(delay)
        self.producer.flush(10)


class Result:
    def __init__(self, implementation: str, size: int) -> None:
        self.implementation = implementation
        self.size = size
        self.kept: list[float] = []
        self.moved: list[float] = []
        self.all_owned_s = float("nan")
        self.all_owned_after_leave_s = float("nan")
        self.steady_gap_s = float("nan")
        self.late_syncs = 0
        self.failed_revoke_commits = 0
        #: The joining member's own KIP-429 metrics (coopconsumer only).
        self.joiner_metrics: dict[str, float] = {}
        self.note = ""


def _settled(
    tracker: Tracker, partitions: list[TopicPartition], names: list[str], quiet: bool
) -> bool:
    owners, last_change = tracker.snapshot()
    if set(owners) != set(partitions) or set(owners.values()) != set(names):
        return False
    counts = [sum(1 for o in owners.values() if o == n) for n in names]
    even = max(counts) - min(counts) <= 1
    return even and (not quiet or time.monotonic() - last_change >= QUIET_S)


def _wait(condition: Callable[[], bool], what: str, tracker: Tracker) -> float:
    deadline = time.monotonic() + SETTLE_BOUND_S
    while not condition():
        if tracker.errors:
            raise RuntimeError(f"{what}: member failed: {tracker.errors}")
        if time.monotonic() > deadline:
            owners, _ = tracker.snapshot()
            counts = {
                name: list(owners.values()).count(name) for name in sorted(set(owners.values()))
            }
            raise RuntimeError(
                f"{what}: not within {SETTLE_BOUND_S:.0f} s (partitions owned: {counts})"
            )
        time.sleep(0.005)
    return time.monotonic()


def scenario(
    bootstrap: str,
    broker_create: Callable[[str, int], None],
    implementation: str,
    size: int,
    partitions: int,
    rate: float,
) -> Result:
    kind, strategy = implementation.split(" ", 1)
    topic = f"rebalance-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    broker_create(topic, partitions)
    all_tps = [TopicPartition(topic, p) for p in range(partitions)]
    tracker = Tracker()
    producer = Producer(bootstrap, topic, partitions, rate)
    producer.thread.start()
    member_type = CoopMember if kind == "coopconsumer" else RdkafkaMember
    members: list[_Member] = []

    def start_member() -> None:
        member = member_type(f"m{len(members)}", tracker, bootstrap, group, topic, strategy)
        members.append(member)
        member.thread.start()

    result = Result(implementation, size)
    REVOKE_COMMIT_FAILURES.tracker = tracker
    try:
        for _ in range(size):
            start_member()
        names = [m.name for m in members]
        _wait(lambda: _settled(tracker, all_tps, names, True), "group forming", tracker)
        if JOIN_JITTER_S:
            time.sleep(random.uniform(0.0, JOIN_JITTER_S))
        before, _ = tracker.snapshot()
        joined_at = time.monotonic()
        start_member()
        names = [m.name for m in members]
        owned_at = _wait(lambda: _settled(tracker, all_tps, names, False), "rejoin", tracker)
        _wait(lambda: _settled(tracker, all_tps, names, True), "settling", tracker)
        after, last_change = tracker.snapshot()
        joiner = members[-1]
        if isinstance(joiner, CoopMember) and joiner.consumer is not None:
            # metrics() may be read from another thread (Consumer docs).
            result.joiner_metrics = joiner.consumer.metrics()
        result.all_owned_s = owned_at - joined_at
        for tp in all_tps:
            gap = tracker.max_gap(tp, joined_at, last_change)
            (result.kept if before[tp] == after[tp] else result.moved).append(gap)
        result.steady_gap_s = max(
            tracker.max_gap(tp, joined_at - 3.0, joined_at - 0.001) for tp in all_tps
        )
        leaving = members[0]
        left_at = time.monotonic()
        leaving.stop_event.set()
        names = [m.name for m in members if m is not leaving]
        owned_at = _wait(lambda: _settled(tracker, all_tps, names, False), "leave", tracker)
        result.all_owned_after_leave_s = owned_at - left_at
    finally:
        REVOKE_COMMIT_FAILURES.tracker = None  # closing members revoke everything
        for member in members:
            member.stop_event.set()
        for member in members:
            member.thread.join(30)
        producer.stop_event.set()
        producer.thread.join(15)
    result.late_syncs = tracker.late_syncs
    result.failed_revoke_commits = tracker.failed_revoke_commits
    if tracker.errors:
        result.note = f"member errors: {tracker.errors[:2]}"
    return result


def _ms(values: list[float], how: Callable[[list[float]], float]) -> str:
    return f"{how(values) * 1000:,.0f}" if values else "n/a"


def _metric(result: Result, name: str, spec: str) -> str:
    value = result.joiner_metrics.get(name)
    return "n/a" if value is None else spec.format(value)


@contextmanager
def _broker(kind: str) -> Iterator[EmbeddedBroker]:
    """Tansu, or the mock with the settings the header line names."""
    if kind == "tansu":
        with started_broker("tansu") as broker:
            yield broker
        return
    if kind == "kafka":
        # The test broker settings (group.initial.rebalance.delay.ms=0, low minimum
        # timeouts) plus the KIP-848 session and heartbeat the mock rows use.
        config = {
            "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
        }
        with kafka_cluster(brokers=1, broker_config=config) as cluster:
            print(
                f"broker: Apache Kafka (one KRaft node, test settings), "
                f"group.consumer.session.timeout.ms={SESSION_TIMEOUT_MS}, "
                f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}"
            )
            yield cluster
        return
    with embedded_broker("mock", num_brokers=3) as broker:
        assert isinstance(broker, MockBroker)
        # As the tests do: Kafka's test setups have no initial rebalance delay.
        broker.set_group_initial_rebalance_delay_ms(0)
        broker.set_group_consumer_session_timeout_ms(SESSION_TIMEOUT_MS)
        broker.set_group_consumer_heartbeat_interval_ms(HEARTBEAT_MS)
        print(
            f"broker: librdkafka mock cluster ({confluent_kafka.libversion()[0]}), "
            f"group.initial.rebalance.delay.ms=0, group.consumer.session.timeout.ms="
            f"{SESSION_TIMEOUT_MS}, group.consumer.heartbeat.interval.ms={HEARTBEAT_MS} "
            f"(mock defaults 3000, 30000, 3000)"
        )
        yield broker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4,8")
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--rate", type=float, default=2400.0)
    parser.add_argument("--only", default="", help="run only implementations containing this text")
    parser.add_argument(
        "--broker",
        choices=("tansu", "mock", "kafka"),
        default="tansu",
        help="tansu (default; classic rows only: no KIP-848), librdkafka's mock cluster "
        "or Apache Kafka (every row, KIP-848 included)",
    )
    parser.add_argument(
        "--leader-sync-delay-ms",
        type=float,
        default=None,
        help="override the classic leader's wait before its SyncGroup (LEADER_SYNC_DELAY_S, "
        "20 ms) to measure what it costs or saves",
    )
    parser.add_argument("--log", default="", help="log level for coopconsumer, e.g. INFO")
    parser.add_argument(
        "--join-jitter-ms",
        type=float,
        default=0.0,
        help="start the joiner after a further random delay up to this bound (0: at once)",
    )
    parser.add_argument(
        "--rdkafka-debug",
        default="",
        help="librdkafka debug contexts for the confluent-kafka members, e.g. cgrp",
    )
    args = parser.parse_args()
    if args.log or args.rdkafka_debug:
        logging.basicConfig(format="%(relativeCreated)8.0f %(threadName)s %(name)s %(message)s")
    if args.log:
        logging.getLogger("coopconsumer").setLevel(args.log)
    if args.rdkafka_debug:
        global RDKAFKA_DEBUG
        RDKAFKA_DEBUG = args.rdkafka_debug
        logging.getLogger("rdkafka").setLevel(logging.DEBUG)
    global JOIN_JITTER_S
    JOIN_JITTER_S = args.join_jitter_ms / 1000.0
    sizes = [int(s) for s in args.sizes.split(",")]
    candidates = list(CLASSIC_IMPLEMENTATIONS)
    if args.broker in ("mock", "kafka"):
        candidates += KIP848_IMPLEMENTATIONS
    if args.leader_sync_delay_ms is not None:
        import coopconsumer._member.classic._join as join_phase

        vars(join_phase)["LEADER_SYNC_DELAY_S"] = args.leader_sync_delay_ms / 1000.0
        print(f"LEADER_SYNC_DELAY_S set to {vars(join_phase)['LEADER_SYNC_DELAY_S']}")
    implementations = [name for name in candidates if args.only in name]
    print(describe_machine())
    print(
        f"{args.partitions} partitions, {args.rate:.0f} records/s, "
        f"session.timeout.ms={SESSION_TIMEOUT_MS}, heartbeat.interval.ms={HEARTBEAT_MS}, "
        f"one member joins a group of N"
        + (f" (after a random delay up to {args.join_jitter_ms:.0f} ms)" if JOIN_JITTER_S else "")
        + ", then one leaves"
    )
    started = time.monotonic()
    results: list[Result] = []
    with _broker(args.broker) as broker:

        def create(topic: str, partitions: int) -> None:
            broker.create_topic(topic, partitions)

        for size in sizes:
            for implementation in implementations:
                try:
                    results.append(
                        scenario(
                            broker.bootstrap,
                            create,
                            implementation,
                            size,
                            args.partitions,
                            args.rate,
                        )
                    )
                except RuntimeError as exc:
                    failed = Result(implementation, size)
                    failed.note = f"FAILED: {exc}"
                    results.append(failed)
    print()
    print_table(
        [
            "N",
            "implementation",
            "kept",
            "kept pause max ms",
            "kept pause median ms",
            "moved pause max ms",
            "all owned after ms",
            "steady gap ms",
            "all owned after leave ms",
            "joiner rebalance-total",
            "joiner rebalance-latency-avg ms",
            "joiner failed-rebalance-total",
            "note",
        ],
        [
            [
                str(r.size),
                r.implementation,
                f"{len(r.kept)}/{len(r.kept) + len(r.moved)}",
                _ms(r.kept, max),
                _ms(r.kept, statistics.median),
                _ms(r.moved, max),
                f"{r.all_owned_s * 1000:,.0f}",
                f"{r.steady_gap_s * 1000:,.0f}",
                f"{r.all_owned_after_leave_s * 1000:,.0f}",
                _metric(r, "rebalance-total", "{:.0f}"),
                _metric(r, "rebalance-latency-avg", "{:,.0f}"),
                _metric(r, "failed-rebalance-total", "{:.0f}"),
                "; ".join(
                    filter(
                        None,
                        [
                            f"{r.late_syncs} late syncs" if r.late_syncs else "",
                            f"{r.failed_revoke_commits} failed commits before revoking"
                            if r.failed_revoke_commits
                            else "",
                            r.note,
                        ],
                    )
                ),
            ]
            for r in results
        ],
    )
    print(f"\nwhole run: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
