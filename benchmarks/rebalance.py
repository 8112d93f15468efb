"""Benchmark: what a member joining or leaving a busy group costs, coopconsumer vs Java's
KafkaConsumer vs librdkafka, classic cooperative-sticky and KIP-848.

    python benchmarks/rebalance.py [--sizes 4,8,16] [--rounds 3] [--protocols classic,consumer]
                                   [--impls ours-threads,ours-processes,java,librdkafka]
                                   [--partitions 24] [--rate 2400] [--broker kafka|tansu|mock]
                                   [--timeline]

Starts one Apache Kafka KRaft node (``--broker kafka``, the default; ``tansu`` runs the
classic rows only, ``mock`` is librdkafka's mock cluster). For each protocol, group size
N and round, every implementation runs one scenario, the order rotating from round to
round so that each round's scenarios share the machine's background load:

* protocols: ``classic`` (``partition.assignment.strategy=cooperative-sticky``, KIP-429;
  ``session.timeout.ms`` ``SESSION_TIMEOUT_MS``, ``heartbeat.interval.ms`` ``HEARTBEAT_MS``)
  and ``consumer`` (``group.protocol=consumer``, KIP-848: the broker assigns, members
  reconcile on their heartbeats; the broker's ``group.consumer.heartbeat.interval.ms`` is
  set to ``HEARTBEAT_MS`` and its session timeout to ``SESSION_TIMEOUT_MS``, the classic
  members' own settings);
* implementations: ``ours-threads`` (coopconsumer, every member a thread of this
  process), ``ours-processes`` (coopconsumer, one process per member: this script's
  ``--member-process`` mode), ``java`` (Kafka's own KafkaConsumer, one JVM per member:
  tests/peers/java/PeerMember.java in its ``bench`` mode, the broker's kafka-clients
  release) and ``librdkafka`` (confluent-kafka's own consumer, every member a thread of
  this process). Every member runs with auto-commit on, ``auto.offset.reset=latest``,
  a fetch wait of ``FETCH_WAIT_MS`` and otherwise its client's defaults, and returns
  from its rebalance callbacks at once (it only notes the time).

A scenario: a fresh topic of ``--partitions`` partitions (24) gets ``--rate`` records/s
(2400: a record every ~10 ms per partition) round-robin from a producer thread. N
members are started, then the group forms; once it is settled (every partition owned,
shares even, no rebalance callback for ``QUIET_S``) one more member is constructed (its
process started, its JVM up) and, once the group is quiet again, told to subscribe: that
instant opens the **join** window. When the group is settled again, the first member
closes (it leaves the group): that instant opens the **leave** window.

**Timed**, per window, from the instant it opens (the joiner's ``subscribe()`` call; the
leaver's ``close()`` call, each noted by the member itself just before the call, so a
process member's reading of its stdin is outside), on each member's own monotonic clock
(the JVM's ``System.nanoTime`` is Linux's ``CLOCK_MONOTONIC``, as Python's
``time.monotonic``, so process members' timestamps are directly comparable; a member
whose clock differs is reported as failed):

* **all owned**: until the last rebalance callback that leaves every partition owned,
  with shares even (for cooperative, both rounds of KIP-429's two-round hand-over);
* **moved pause**: over the partitions whose owner changed, the longest gap between two
  consecutive record arrivals that overlaps the window (window open -> settled);
* **kept pause**: the same over the partitions whose owner did not change
  (cooperative members keep consuming them: it should stay at the steady gap);
* **steady gap**: the longest gap over all partitions in the 3 s before the join, the
  resolution of the pause figures.

Process start-up (Python's imports, the JVM), the consumer's construction, the group's
first forming and the members' closing are outside every window. Printed: per row the
median of the rounds with their smallest and largest (``median (min-max)``), and for the
coopconsumer rows whether they are at or below the better of Java and librdkafka;
``--timeline`` adds, for each row, the callbacks of its median round's join and leave in
the order they happened (ms after the window opened), and coopconsumer's request and
response trace (``coopconsumer.driver.trace``). Figures and timelines go to
``<results-dir>/rebalance.json``, the picture to ``rebalance.png``.

A scenario that does not settle within ``SETTLE_BOUND_S`` is printed as FAILED with who
owned how many partitions and left out of the medians, not retried.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import itertools
import json
import logging
import os
import random
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import confluent_kafka
from _common import (
    Spread,
    add_results_argument,
    describe_machine,
    load_average,
    new_figure,
    print_table,
    started_broker,
    write_results,
)

import coopconsumer
from coopconsumer import RebalanceListener, TopicPartition
from coopconsumer.testing import EmbeddedBroker, MockBroker, embedded_broker

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 200
#: Every client fetches with a short wait, so the steady-state gap (the pause
#: resolution) is near the per-partition record interval on every side alike.
FETCH_WAIT_MS = 50
QUIET_S = 1.5
SETTLE_BOUND_S = 60.0
READY_BOUND_S = 120.0
PROTOCOLS = ("classic", "consumer")
IMPLEMENTATIONS = ("ours-threads", "ours-processes", "java", "librdkafka")
OURS = ("ours-threads", "ours-processes")
#: What ``--only TEXT`` matches besides the implementation's name.
DESCRIPTIONS = {
    "ours-threads": "coopconsumer cooperative-sticky group.protocol=consumer, threads",
    "ours-processes": "coopconsumer cooperative-sticky group.protocol=consumer, processes",
    "java": "Java KafkaConsumer cooperative-sticky group.protocol=consumer, processes",
    "librdkafka": "confluent-kafka cooperative-sticky group.protocol=consumer, threads",
}
BASELINES = ("java", "librdkafka")
METRICS = (
    ("join_owned_s", "join: all owned ms"),
    ("leave_owned_s", "leave: all owned ms"),
    ("join_moved_s", "join: moved pause ms"),
    ("join_kept_s", "join: kept pause ms"),
    ("leave_moved_s", "leave: moved pause ms"),
)
#: Upper bound of the random delay before the joiner subscribes (``--join-jitter-ms``).
JOIN_JITTER_S = 0.0
#: Collect coopconsumer's request/response trace into the timelines (``--timeline``).
TRACE = False


# ----------------------------------------------------------------------------- tracking


class Tracker:
    """Ownership, record arrivals and callbacks of one group, fed by every member with
    the members' own timestamps (monotonic seconds). Thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[TopicPartition, str] = {}
        self.arrivals: dict[TopicPartition, list[float]] = {}
        self.last_change = time.monotonic()
        self.errors: list[str] = []
        #: (at, member, what, detail): callbacks and trace lines, for the timelines.
        self.events: list[tuple[float, str, str, str]] = []

    def assigned(self, member: str, partitions: Sequence[TopicPartition], at: float) -> None:
        with self.lock:
            for tp in partitions:
                self.owner[tp] = member
            self.last_change = max(self.last_change, at)
            self.events.append((at, member, "assigned", _short(partitions)))

    def removed(
        self, member: str, partitions: Sequence[TopicPartition], at: float, how: str
    ) -> None:
        with self.lock:
            for tp in partitions:
                if self.owner.get(tp) == member:
                    del self.owner[tp]
            self.last_change = max(self.last_change, at)
            self.events.append((at, member, how, _short(partitions)))

    def arrived(self, partitions: Sequence[TopicPartition], at: float) -> None:
        with self.lock:
            for tp in partitions:
                self.arrivals.setdefault(tp, []).append(at)

    def note(self, member: str, what: str, detail: str, at: float) -> None:
        with self.lock:
            self.events.append((at, member, what, detail))

    def marked(self, member: str, what: str, after: float) -> float | None:
        """When ``member`` noted ``what`` (``subscribing``, ``closing``) at or after
        ``after``, or None."""
        with self.lock:
            times = [e[0] for e in self.events if e[1] == member and e[2] == what]
        later = [t for t in times if t >= after - 0.005]
        return min(later) if later else None

    def error(self, message: str) -> None:
        with self.lock:
            self.errors.append(message)

    def snapshot(self) -> tuple[dict[TopicPartition, str], float]:
        with self.lock:
            return dict(self.owner), self.last_change

    def max_gap(self, tp: TopicPartition, start: float, end: float) -> float:
        """Longest gap between consecutive arrivals of ``tp`` overlapping [start, end]."""
        with self.lock:
            times = sorted(self.arrivals.get(tp, ()))
        longest = 0.0
        for before, after in itertools.pairwise(times):
            if after >= start and before <= end:
                longest = max(longest, after - before)
        # Nothing arrived since the window opened: the pause lasts at least until its end.
        last = max((t for t in times if t <= end), default=start)
        return max(longest, end - last) if last < end else longest

    def timeline(self, start: float, end: float) -> list[tuple[float, str, str, str]]:
        with self.lock:
            return sorted(e for e in self.events if start - 0.001 <= e[0] <= end)


def _short(partitions: Sequence[TopicPartition]) -> str:
    return f"{len(partitions)} [{','.join(str(tp.partition) for tp in sorted(partitions))}]"


def _tps(items: Any) -> list[TopicPartition]:
    return [TopicPartition(str(p.topic), int(p.partition)) for p in items]


# ------------------------------------------------------------------------------ members


def _client_config(
    kind: str, protocol: str, bootstrap: str, group: str, name: str
) -> dict[str, object]:
    """One member's configuration: coopconsumer and librdkafka take the same keys."""
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "auto.offset.reset": "latest",
        "fetch.wait.max.ms": FETCH_WAIT_MS,
    }
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config.update(
            {
                "group.protocol": "classic",
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
            }
        )
    return config


class _Member:
    """A group member: ``prepare`` (construct; returns once ready), ``go`` (subscribe),
    ``leave`` (close), ``join`` (wait until gone)."""

    def __init__(self, name: str, tracker: Tracker) -> None:
        self.name = name
        self.tracker = tracker
        self.ready = threading.Event()

    def prepare(self) -> None:
        raise NotImplementedError

    def go(self) -> None:
        raise NotImplementedError

    def leave(self) -> None:
        raise NotImplementedError

    def join(self, timeout_s: float) -> None:
        raise NotImplementedError


class _TraceHandler(logging.Handler):
    """Routes coopconsumer's request/response trace (logged by the members' driver
    threads, all named alike; the lines name the member id) to the running scenario's
    tracker."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.tracker: Tracker | None = None

    def emit(self, record: logging.LogRecord) -> None:
        tracker = self.tracker
        if tracker is not None:
            tracker.note("drv", "trace", record.getMessage(), time.monotonic())


TRACE_HANDLER = _TraceHandler()


class ThreadMember(_Member):
    """coopconsumer or confluent-kafka, a thread of this process."""

    def __init__(
        self, name: str, tracker: Tracker, kind: str, config: dict[str, object], topic: str
    ) -> None:
        super().__init__(name, tracker)
        self.kind = kind
        self.config = config
        self.topic = topic
        self.go_event = threading.Event()
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._guarded, name=name, daemon=True)

    def prepare(self) -> None:
        self.thread.start()

    def go(self) -> None:
        self.go_event.set()

    def leave(self) -> None:
        self.go_event.set()
        self.stop_event.set()

    def join(self, timeout_s: float) -> None:
        self.thread.join(timeout_s)

    def _guarded(self) -> None:
        try:
            if self.kind == "coopconsumer":
                self._run_coop()
            else:
                self._run_rdkafka()
        except Exception as exc:  # reported in the output, never hidden
            self.tracker.error(f"{self.name}: {exc!r}")

    def _run_coop(self) -> None:
        tracker, name = self.tracker, self.name

        class Listener(RebalanceListener):
            def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
                tracker.assigned(name, list(partitions), time.monotonic())

            def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                tracker.removed(name, list(partitions), time.monotonic(), "revoked")

            def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
                tracker.removed(name, list(partitions), time.monotonic(), "lost")

        with coopconsumer.Consumer(self.config) as consumer:
            self.ready.set()
            self.go_event.wait()
            if self.stop_event.is_set():
                return
            tracker.note(name, "subscribing", "", time.monotonic())
            consumer.subscribe([self.topic], Listener())
            while not self.stop_event.is_set():
                batch = consumer.consume(500, 0.02)
                if batch:
                    tracker.arrived(_arrived(batch), time.monotonic())
            tracker.note(name, "closing", "", time.monotonic())

    def _run_rdkafka(self) -> None:
        tracker, name = self.tracker, self.name
        consumer = confluent_kafka.Consumer(self.config)
        try:
            self.ready.set()
            self.go_event.wait()
            if self.stop_event.is_set():
                return
            tracker.note(name, "subscribing", "", time.monotonic())
            consumer.subscribe(
                [self.topic],
                on_assign=lambda _c, ps: tracker.assigned(name, _tps(ps), time.monotonic()),
                on_revoke=lambda _c, ps: tracker.removed(
                    name, _tps(ps), time.monotonic(), "revoked"
                ),
                on_lost=lambda _c, ps: tracker.removed(name, _tps(ps), time.monotonic(), "lost"),
            )
            while not self.stop_event.is_set():
                batch = consumer.consume(500, 0.02)
                if batch:
                    tracker.arrived(_arrived(batch), time.monotonic())
        finally:
            tracker.note(name, "closing", "", time.monotonic())
            consumer.close()


def _arrived(batch: Sequence[confluent_kafka.Message]) -> list[TopicPartition]:
    seen: set[TopicPartition] = set()
    for message in batch:
        if message.error() is None:
            topic, partition = message.topic(), message.partition()
            if topic is not None and partition is not None:
                seen.add(TopicPartition(topic, partition))
    return list(seen)


class ProcessMember(_Member):
    """A member in its own process that prints JSON lines with ``at`` in monotonic
    nanoseconds: the Java peer's ``bench`` mode or this script's ``--member-process``."""

    def __init__(self, name: str, tracker: Tracker, argv: Sequence[str]) -> None:
        super().__init__(name, tracker)
        self.argv = list(argv)
        self.proc: subprocess.Popen[str] | None = None
        self.stderr_tail: list[str] = []
        self.leaving = False

    def prepare(self) -> None:
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        threading.Thread(target=self._read, name=f"{self.name}-out", daemon=True).start()
        threading.Thread(target=self._read_err, name=f"{self.name}-err", daemon=True).start()

    def _send(self, line: str) -> None:
        proc = self.proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            return
        try:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def go(self) -> None:
        self._send("go")

    def leave(self) -> None:
        self.leaving = True
        self._send("leave")

    def join(self, timeout_s: float) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)

    def _read_err(self) -> None:
        assert self.proc is not None
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_tail = [*self.stderr_tail[-40:], line.rstrip()]

    def _read(self) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        tracker, name = self.tracker, self.name
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            kind = event["event"]
            at = int(event.get("at", 0)) / 1e9
            tps = [TopicPartition(str(t), int(p)) for t, p in event.get("partitions", ())]
            if kind == "records":
                tracker.arrived(tps, at)
            elif kind == "assigned":
                tracker.assigned(name, tps, at)
            elif kind in ("revoked", "lost"):
                tracker.removed(name, tps, at, kind)
            elif kind in ("trace", "subscribing", "closing"):
                tracker.note(name, kind, str(event.get("message", "")), at)
            elif kind == "ready":
                # The process's clock must be this one's (CLOCK_MONOTONIC): its
                # timestamps are compared with the others'. A pipe takes microseconds.
                lag = time.monotonic() - at
                if not -0.5 < lag < 5.0:
                    tracker.error(f"{name}: its clock is {lag:+.3f} s off this process's")
                self.ready.set()
            elif kind == "error":
                tracker.error(f"{name}: {event['message']}")
        code = self.proc.wait()
        if not self.leaving:
            tail = "\n".join(self.stderr_tail[-10:])
            tracker.error(f"{name}: exited unexpectedly with {code}: {tail}")


def member_process(args: argparse.Namespace) -> None:
    """``--member-process``: one coopconsumer (or confluent-kafka) member speaking the
    Java peer's ``bench`` protocol on stdin/stdout."""
    out_lock = threading.Lock()

    def emit(event: str, **fields: object) -> None:
        line = json.dumps({"event": event, "at": time.monotonic_ns(), **fields})
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def listed(partitions: Any) -> list[list[object]]:
        return [[str(p.topic), int(p.partition)] for p in partitions]

    go, leave = threading.Event(), threading.Event()

    def commands() -> None:
        for line in sys.stdin:
            if line.strip() == "go":
                go.set()
            elif line.strip() == "leave":
                leave.set()
                go.set()
        leave.set()
        go.set()

    if args.trace:

        class Trace(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                emit("trace", message=record.getMessage())

        trace = logging.getLogger("coopconsumer.driver.trace")
        trace.setLevel(logging.DEBUG)
        trace.addHandler(Trace())
    config = _client_config(
        args.member_process, args.protocol, args.bootstrap, args.group, args.name
    )
    threading.Thread(target=commands, daemon=True).start()
    if args.member_process == "coopconsumer":

        class Listener(RebalanceListener):
            def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
                emit("assigned", partitions=listed(partitions))

            def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                emit("revoked", partitions=listed(partitions))

            def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
                emit("lost", partitions=listed(partitions))

        with coopconsumer.Consumer(config) as consumer:
            emit("ready")
            go.wait()
            if leave.is_set():
                return
            emit("subscribing")
            consumer.subscribe([args.topic], Listener())
            while not leave.is_set():
                batch = consumer.consume(500, 0.02)
                if batch:
                    emit("records", partitions=listed(_arrived(batch)))
            emit("closing")
    else:
        rd = confluent_kafka.Consumer(config)
        try:
            emit("ready")
            go.wait()
            if leave.is_set():
                return
            emit("subscribing")
            rd.subscribe(
                [args.topic],
                on_assign=lambda _c, ps: emit("assigned", partitions=listed(ps)),
                on_revoke=lambda _c, ps: emit("revoked", partitions=listed(ps)),
                on_lost=lambda _c, ps: emit("lost", partitions=listed(ps)),
            )
            while not leave.is_set():
                batch = rd.consume(500, 0.02)
                if batch:
                    emit("records", partitions=listed(_arrived(batch)))
        finally:
            emit("closing")
            rd.close()
    emit("closed")


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


# ----------------------------------------------------------------------------- scenario


class Result:
    def __init__(self, protocol: str, implementation: str, size: int, round_no: int) -> None:
        self.protocol = protocol
        self.implementation = implementation
        self.size = size
        self.round_no = round_no
        self.figures: dict[str, float] = {}
        self.steady_gap_s = float("nan")
        self.load = load_average()
        self.timelines: dict[str, list[tuple[float, str, str, str]]] = {}
        self.note = ""

    @property
    def failed(self) -> bool:
        return not self.figures

    def as_json(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "implementation": self.implementation,
            "N": self.size,
            "round": self.round_no,
            "load_average": self.load,
            "phases": {window: phases(events) for window, events in self.timelines.items()},
            "steady_gap_s": self.steady_gap_s,
            **self.figures,
            "note": self.note,
            "timelines": {
                window: [[round(t * 1000, 1), m, what, detail] for t, m, what, detail in events]
                for window, events in self.timelines.items()
            },
        }


class Factory:
    """Makes the members of one implementation."""

    def __init__(
        self, implementation: str, protocol: str, bootstrap: str, group: str, topic: str
    ) -> None:
        self.implementation = implementation
        self.protocol = protocol
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic

    def __call__(self, name: str, tracker: Tracker) -> _Member:
        impl = self.implementation
        if impl in ("ours-threads", "librdkafka"):
            kind = "coopconsumer" if impl == "ours-threads" else "confluent-kafka"
            config = _client_config(kind, self.protocol, self.bootstrap, self.group, name)
            return ThreadMember(name, tracker, kind, config, self.topic)
        if impl == "ours-processes":
            argv = [
                sys.executable,
                os.path.abspath(__file__),
                "--member-process",
                "coopconsumer",
                "--bootstrap",
                self.bootstrap,
                "--group",
                self.group,
                "--topic",
                self.topic,
                "--protocol",
                self.protocol,
                "--name",
                name,
            ]
            if TRACE:
                argv.append("--trace")
            return ProcessMember(name, tracker, argv)
        if impl == "java":
            props = [f"fetch.max.wait.ms={FETCH_WAIT_MS}"]
            if self.protocol == "consumer":
                props.append("group.protocol=consumer")
                strategy: list[str] = []
            else:
                props += [
                    "group.protocol=classic",
                    f"session.timeout.ms={SESSION_TIMEOUT_MS}",
                    f"heartbeat.interval.ms={HEARTBEAT_MS}",
                ]
                strategy = ["--strategy", "cooperative-sticky"]
            args = ["bench", "--bootstrap", self.bootstrap, "--group", self.group]
            args += ["--topics", self.topic, "--name", name, *strategy]
            for prop in props:
                args += ["--prop", prop]
            return ProcessMember(name, tracker, _java_argv(args))
        raise ValueError(f"unknown implementation {impl!r}")


_JAVA: Any = None


def _java_argv(args: list[str]) -> list[str]:
    """The Java peer's command line (tests/peers/_build.py compiles it once, cached)."""
    global _JAVA
    if _JAVA is None:
        tests = str(Path(__file__).resolve().parent.parent / "tests")
        if tests not in sys.path:
            sys.path.insert(0, tests)
        _JAVA = importlib.import_module("peers._build").java_peer()
    argv: list[str] = _JAVA.argv(*args)
    return argv


def _create_topic(broker: EmbeddedBroker, topic: str, partitions: int) -> None:
    """Create ``topic``, asking again while a loaded machine keeps the answer late."""
    for attempt in range(3):
        try:
            broker.create_topic(topic, partitions)
            return
        except Exception as exc:
            if "already exists" in str(exc).lower():
                return
            if attempt == 2:
                raise
            print(f"create_topic {topic}: {exc!r}; asking again", flush=True)


def _settled(
    tracker: Tracker, partitions: list[TopicPartition], names: list[str], quiet: bool
) -> tuple[bool, float]:
    owners, last_change = tracker.snapshot()
    if set(owners) != set(partitions) or set(owners.values()) != set(names):
        return False, last_change
    counts = [sum(1 for o in owners.values() if o == n) for n in names]
    even = max(counts) - min(counts) <= 1
    ok = even and (not quiet or time.monotonic() - last_change >= QUIET_S)
    return ok, last_change


def _wait_settled(
    tracker: Tracker, partitions: list[TopicPartition], names: list[str], quiet: bool, what: str
) -> float:
    """Wait until the group is settled; return the time of the callback that settled it."""
    deadline = time.monotonic() + SETTLE_BOUND_S
    while True:
        ok, last_change = _settled(tracker, partitions, names, quiet)
        if ok:
            return last_change
        if tracker.errors:
            raise RuntimeError(f"{what}: member failed: {tracker.errors[:2]}")
        if time.monotonic() > deadline:
            owners, _ = tracker.snapshot()
            counts = {n: list(owners.values()).count(n) for n in sorted(set(owners.values()))}
            raise RuntimeError(
                f"{what}: not within {SETTLE_BOUND_S:.0f} s (partitions owned: {counts})"
            )
        time.sleep(0.005)


def _wait_mark(tracker: Tracker, member: str, what: str, after: float) -> float:
    """The member's own time of ``what`` (its subscribe or close call): the window opens
    there, not when this process asked for it (a process member reads its stdin first)."""
    deadline = time.monotonic() + 30.0
    while (at := tracker.marked(member, what, after)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{member}: no {what} within 30 s")
        time.sleep(0.002)
    return at


def _wait_ready(members: Sequence[_Member], tracker: Tracker) -> None:
    deadline = time.monotonic() + READY_BOUND_S
    for member in members:
        while not member.ready.wait(0.1):
            if tracker.errors:
                raise RuntimeError(f"start-up: member failed: {tracker.errors[:2]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{member.name} not ready within {READY_BOUND_S:.0f} s")


def scenario(
    broker: EmbeddedBroker,
    protocol: str,
    implementation: str,
    size: int,
    round_no: int,
    partitions: int,
    rate: float,
) -> Result:
    topic = f"rebalance-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    all_tps = [TopicPartition(topic, p) for p in range(partitions)]
    tracker = Tracker()
    TRACE_HANDLER.tracker = tracker
    factory = Factory(implementation, protocol, broker.bootstrap, group, topic)
    members: list[_Member] = [factory(f"m{n}", tracker) for n in range(size)]
    result = Result(protocol, implementation, size, round_no)
    producer = Producer(broker.bootstrap, topic, partitions, rate)
    try:
        _create_topic(broker, topic, partitions)
        producer.thread.start()
        for member in members:
            member.prepare()
        _wait_ready(members, tracker)
        for member in members:
            member.go()
        names = [m.name for m in members]
        _wait_settled(tracker, all_tps, names, True, "group forming")
        joiner = factory(f"m{size}", tracker)
        members.append(joiner)
        joiner.prepare()
        _wait_ready([joiner], tracker)
        _wait_settled(tracker, all_tps, names, True, "quiet before the join")
        if JOIN_JITTER_S:
            time.sleep(random.uniform(0.0, JOIN_JITTER_S))
        before, _ = tracker.snapshot()
        go_at = time.monotonic()
        joiner.go()
        joined_at = _wait_mark(tracker, joiner.name, "subscribing", go_at)
        names = [m.name for m in members]
        owned_at = _wait_settled(tracker, all_tps, names, False, "join")
        settled_at = _wait_settled(tracker, all_tps, names, True, "settling after the join")
        after, _ = tracker.snapshot()
        moved = [tp for tp in all_tps if before[tp] != after[tp]]
        kept = [tp for tp in all_tps if before[tp] == after[tp]]
        figures = {
            "join_owned_s": owned_at - joined_at,
            "join_moved_s": max(
                (tracker.max_gap(tp, joined_at, settled_at) for tp in moved), default=0.0
            ),
            "join_kept_s": max(
                (tracker.max_gap(tp, joined_at, settled_at) for tp in kept), default=0.0
            ),
        }
        result.steady_gap_s = max(
            tracker.max_gap(tp, joined_at - 3.0, joined_at - 0.001) for tp in all_tps
        )
        result.timelines["join"] = [
            (t - joined_at, m, w, d) for t, m, w, d in tracker.timeline(joined_at, settled_at)
        ]
        leaving = members[0]
        before = after
        leave_at = time.monotonic()
        leaving.leave()
        left_at = _wait_mark(tracker, leaving.name, "closing", leave_at)
        names = [m.name for m in members if m is not leaving]
        owned_at = _wait_settled(tracker, all_tps, names, False, "leave")
        settled_at = _wait_settled(tracker, all_tps, names, True, "settling after the leave")
        after, _ = tracker.snapshot()
        moved = [tp for tp in all_tps if before[tp] != after[tp]]
        figures["leave_owned_s"] = owned_at - left_at
        figures["leave_moved_s"] = max(
            (tracker.max_gap(tp, left_at, settled_at) for tp in moved), default=0.0
        )
        result.timelines["leave"] = [
            (t - left_at, m, w, d) for t, m, w, d in tracker.timeline(left_at, settled_at)
        ]
        result.figures = figures
    except Exception as exc:  # one failed scenario must not end the run
        result.note = f"FAILED: {exc!r}"
    finally:
        for member in members:
            member.leave()
        for member in members:
            member.join(30)
        producer.stop_event.set()
        if producer.thread.is_alive():
            producer.thread.join(15)
        TRACE_HANDLER.tracker = None
    if tracker.errors and not result.note:
        result.note = f"member errors: {tracker.errors[:2]}"
    return result


# -------------------------------------------------------------------------------- broker


@contextmanager
def _broker(kind: str) -> Iterator[EmbeddedBroker]:
    if kind == "kafka":
        config = {
            "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
        }
        with started_broker("kafka", config) as cluster:
            print(
                f"group.consumer.session.timeout.ms={SESSION_TIMEOUT_MS}, "
                f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}"
            )
            yield cluster
        return
    if kind == "tansu":
        with started_broker("tansu") as broker:
            yield broker
        return
    with embedded_broker("mock", num_brokers=3) as broker:
        assert isinstance(broker, MockBroker)
        broker.set_group_initial_rebalance_delay_ms(0)
        broker.set_group_consumer_session_timeout_ms(SESSION_TIMEOUT_MS)
        broker.set_group_consumer_heartbeat_interval_ms(HEARTBEAT_MS)
        print(f"broker: librdkafka mock cluster ({confluent_kafka.libversion()[0]})")
        yield broker


# --------------------------------------------------------------------------------- report


def _rows(results: Sequence[Result]) -> dict[tuple[str, int, str], list[Result]]:
    """The rounds of each (protocol, N, implementation), in the table's order."""
    rows: dict[tuple[str, int, str], list[Result]] = {}
    order = sorted(
        results,
        key=lambda r: (
            r.size,
            PROTOCOLS.index(r.protocol),
            IMPLEMENTATIONS.index(r.implementation),
        ),
    )
    for r in order:
        rows.setdefault((r.protocol, r.size, r.implementation), []).append(r)
    return rows


def _spread(results: Sequence[Result], metric: str) -> Spread:
    return Spread([r.figures[metric] * 1000 for r in results if not r.failed])


def verdicts(
    results: Sequence[Result], interval_ms: float
) -> dict[tuple[str, int, str], dict[str, str]]:
    """For each coopconsumer row and metric: "meets" when its median is at or below the
    better baseline's median (Java, librdkafka), else "behind +X" (ms), marked when X is
    below ``interval_ms``, a partition's record interval: the pauses cannot resolve it."""
    rows = _rows(results)
    out: dict[tuple[str, int, str], dict[str, str]] = {}
    for (protocol, size, impl), mine in rows.items():
        if impl not in OURS:
            continue
        verdict: dict[str, str] = {}
        for metric, _label in METRICS:
            baselines = [
                _spread(rows[(protocol, size, b)], metric).median
                for b in BASELINES
                if (protocol, size, b) in rows
                and _spread(rows[(protocol, size, b)], metric).samples
            ]
            ours = _spread(mine, metric)
            if not baselines or not ours.samples:
                verdict[metric] = "n/a"
                continue
            best = min(baselines)
            gap = ours.median - best
            verdict[metric] = (
                "meets"
                if gap <= 0
                else f"behind +{gap:,.0f}"
                + (" (under one record interval)" if gap < interval_ms else "")
            )
        out[(protocol, size, impl)] = verdict
    return out


def _print_timeline(result: Result, only: str) -> None:
    for window, events in result.timelines.items():
        if window != only:
            continue
        print(
            f"  timeline {result.protocol} N={result.size} {result.implementation} round "
            f"{result.round_no} {window} (ms after the window opened):"
        )
        for at, member, what, detail in events:
            print(f"    {at * 1000:8.1f}  {member:4}  {what:9}  {detail}")
        print(f"  phases: {phases(events)}")


_GEN = re.compile(r"JoinGroupResponse error_code=0 generation_id=(\d+) leader='([^']*)'")
_SYNC = re.compile(r"-> #\d+ SyncGroupRequest member_id='([^']*)' generation_id=(\d+)")


def phases(events: Sequence[tuple[float, str, str, str]]) -> str:
    """Where a window's time went, from its callbacks (every implementation) and
    coopconsumer's request trace (classic): ms after the window opened."""
    parts = []
    revokes = [t for t, _m, what, d in events if what in ("revoked", "lost") and d[0] != "0"]
    assigns = [t for t, _m, what, d in events if what == "assigned" and d[0] != "0"]
    if revokes:
        parts.append(f"revocations {min(revokes) * 1000:.0f}-{max(revokes) * 1000:.0f}")
    if assigns:
        parts.append(f"assignments {min(assigns) * 1000:.0f}-{max(assigns) * 1000:.0f}")
    traces = [(t, d) for t, _m, what, d in events if what == "trace"]
    heartbeat = [t for t, d in traces if "HeartbeatResponse error_code=27" in d]
    if heartbeat:
        parts.append(f"first REBALANCE_IN_PROGRESS heartbeat answer {heartbeat[0] * 1000:.0f}")
    joins: dict[str, tuple[str, list[float]]] = {}
    for t, d in traces:
        if match := _GEN.search(d):
            joins.setdefault(match.group(1), (match.group(2), []))[1].append(t)
    for generation, (leader, answers) in joins.items():
        leader_sync = [
            t
            for t, d in traces
            if (m := _SYNC.search(d)) and m.group(1) == leader and m.group(2) == generation
        ]
        text = f"generation {generation}: JoinGroup answers {min(answers) * 1000:.0f}-"
        text += f"{max(answers) * 1000:.0f}"
        if leader_sync:
            waited = (leader_sync[0] - max(answers)) * 1000
            text += f", leader's SyncGroup {leader_sync[0] * 1000:.0f} ({waited:+.0f})"
        parts.append(text)
    return "; ".join(parts)


def _median_round(results: Sequence[Result], metric: str) -> Result | None:
    ok = sorted((r for r in results if not r.failed), key=lambda r: r.figures[metric])
    return ok[len(ok) // 2] if ok else None


def report(
    results: Sequence[Result], args: argparse.Namespace, load_at_start: str, *, final: bool
) -> None:
    """Print the table (and the timelines once ``final``); write the JSON and picture."""
    if not results:
        print("no scenario ran")
        return
    rows = _rows(results)
    verdict = verdicts(results, 1000.0 * args.partitions / args.rate)
    headers = ["protocol", "N", "implementation", "ok"]
    headers += [label for _m, label in METRICS]
    headers += ["steady gap ms", "load avg (1 min) per round", "vs best of Java/librdkafka"]
    table = []
    for (protocol, size, impl), mine in rows.items():
        ok = [r for r in mine if not r.failed]
        v = verdict.get((protocol, size, impl), {})
        table.append(
            [
                protocol,
                str(size),
                impl,
                f"{len(ok)}/{len(mine)}",
                *(_spread(mine, m).format() for m, _l in METRICS),
                Spread([r.steady_gap_s * 1000 for r in ok]).format(),
                " ".join(r.load.split(",")[0] for r in mine),
                ", ".join(f"{m.split('_')[0]}-{m.split('_')[1]}: {x}" for m, x in v.items()),
            ]
        )
    print()
    print(
        f"medians of the rounds (min-max), ms; load average at start {load_at_start}, "
        f"at end {load_average()}"
    )
    print_table(headers, table)
    for r in results:
        if r.note:
            print(f"note: {r.protocol} N={r.size} {r.implementation} round {r.round_no}: {r.note}")
    print("\nwhere the time went in each row's median round (ms after the window opened):")
    for (protocol, size, impl), mine in rows.items():
        for window, metric in (("join", "join_owned_s"), ("leave", "leave_owned_s")):
            median = _median_round(mine, metric)
            if median is not None and window in median.timelines:
                print(
                    f"  {protocol} N={size} {impl} {window} (round {median.round_no}, "
                    f"{median.figures[metric] * 1000:,.0f} ms): "
                    f"{phases(median.timelines[window])}"
                )
    if args.timeline and final:
        # Where the time goes: for each coopconsumer row behind on some metric, the
        # median round of that metric, beside the better baseline's median round.
        for key, v in verdict.items():
            protocol, size, impl = key
            for metric, label in METRICS:
                if not v.get(metric, "").startswith("behind"):
                    continue
                print(f"\n{protocol} N={size} {impl} behind on {label}:")
                best = min(
                    (b for b in BASELINES if (protocol, size, b) in rows),
                    key=lambda b: _spread(rows[(protocol, size, b)], metric).median,
                )
                for who in (impl, best):
                    median = _median_round(rows[(protocol, size, who)], metric)
                    if median is not None:
                        _print_timeline(median, "leave" if metric.startswith("leave") else "join")

    figure, axes = new_figure(1, len(METRICS), width=4.0 * len(METRICS), height=4.5)
    protocols = sorted({r.protocol for r in results})
    sizes = sorted({r.size for r in results})
    impls = [i for i in IMPLEMENTATIONS if any(r.implementation == i for r in results)]
    groups = [(p, n) for p in protocols for n in sizes]
    width = 0.8 / max(1, len(impls))
    for ax, (metric, label) in zip(axes[0], METRICS, strict=True):
        for k, impl in enumerate(impls):
            xs, meds, lo, hi = [], [], [], []
            for g, (protocol, size) in enumerate(groups):
                spread = _spread(rows.get((protocol, size, impl), []), metric)
                if spread.samples:
                    xs.append(g + (k - (len(impls) - 1) / 2) * width)
                    meds.append(spread.median)
                    lo.append(spread.median - spread.low)
                    hi.append(spread.high - spread.median)
            ax.bar(xs, meds, width, yerr=[lo, hi], capsize=2, label=impl)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{p}\nN={n}" for p, n in groups], fontsize=7)
        ax.set_title(label, fontsize=9)
        ax.set_ylabel("ms (median, min-max whiskers)", fontsize=7)
    axes[0][0].legend(fontsize=7)
    figure.suptitle(
        f"rebalance on {args.broker}: {args.partitions} partitions, {args.rate:.0f} records/s, "
        f"{args.rounds} rounds; load average {load_at_start} at start",
        fontsize=9,
    )
    write_results(
        args.results_dir,
        "rebalance",
        args.broker,
        load_at_start,
        {
            "settings": {
                "partitions": args.partitions,
                "rate": args.rate,
                "rounds": args.rounds,
                "session_timeout_ms": SESSION_TIMEOUT_MS,
                "heartbeat_interval_ms": HEARTBEAT_MS,
                "fetch_wait_ms": FETCH_WAIT_MS,
            },
            "rows": [
                {
                    "protocol": p,
                    "N": n,
                    "implementation": i,
                    **{m: _spread(mine, m).as_json() for m, _l in METRICS},
                    "verdict": verdict.get((p, n, i)),
                }
                for (p, n, i), mine in rows.items()
            ],
            "scenarios": [r.as_json() for r in results],
        },
        figure,
    )


def _stop_at(hh_mm: str) -> float | None:
    """``HH:MM`` UTC today as a POSIX timestamp (None when empty)."""
    if not hh_mm:
        return None
    now = datetime.datetime.now(datetime.UTC)
    hour, minute = (int(x) for x in hh_mm.split(":"))
    return now.replace(hour=hour, minute=minute, second=0, microsecond=0).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4,8,16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--impls", default=",".join(IMPLEMENTATIONS))
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--rate", type=float, default=2400.0)
    parser.add_argument(
        "--broker",
        choices=("kafka", "tansu", "mock"),
        default="kafka",
        help="kafka (default: one Apache Kafka KRaft node, every row), tansu (classic "
        "rows only) or librdkafka's mock cluster (no Java rows: it speaks old versions)",
    )
    parser.add_argument(
        "--join-jitter-ms",
        type=float,
        default=0.0,
        help="subscribe the joiner after a further random delay up to this bound (0: at once)",
    )
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="print each row's median-round callbacks and coopconsumer's request trace",
    )
    parser.add_argument(
        "--only", default="", help="run only implementations whose name or description has this"
    )
    parser.add_argument(
        "--leader-sync-delay-ms",
        type=float,
        default=None,
        help="override the classic leader's wait before its SyncGroup (LEADER_SYNC_DELAY_S, "
        "20 ms) in this process's members to measure what it costs or saves",
    )
    parser.add_argument(
        "--stop-at",
        default="",
        help="HH:MM (UTC): start no scenario after this time; report what ran",
    )
    add_results_argument(parser)
    parser.add_argument("--member-process", choices=("coopconsumer", "confluent-kafka"))
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--protocol", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.member_process:
        member_process(args)
        return
    global JOIN_JITTER_S, TRACE
    JOIN_JITTER_S = args.join_jitter_ms / 1000.0
    TRACE = args.timeline
    if TRACE:
        trace = logging.getLogger("coopconsumer.driver.trace")
        trace.setLevel(logging.DEBUG)
        trace.addHandler(TRACE_HANDLER)
    sizes = [int(s) for s in args.sizes.split(",")]
    protocols = [p for p in args.protocols.split(",") if p]
    if args.broker == "tansu":
        protocols = [p for p in protocols if p == "classic"]
    impls = [i for i in args.impls.split(",") if i]
    for impl in impls:
        if impl not in IMPLEMENTATIONS:
            parser.error(f"unknown implementation {impl!r}")
    impls = [i for i in impls if args.only in i or args.only in DESCRIPTIONS[i]]
    if args.broker == "mock":
        impls = [i for i in impls if i != "java"]  # the mock speaks too old versions
    if args.leader_sync_delay_ms is not None:
        join_phase = importlib.import_module("coopconsumer._member.classic._join")
        vars(join_phase)["LEADER_SYNC_DELAY_S"] = args.leader_sync_delay_ms / 1000.0
        print(f"LEADER_SYNC_DELAY_S set to {vars(join_phase)['LEADER_SYNC_DELAY_S']}")
    load_at_start = load_average()
    print(describe_machine())
    print(
        f"{args.partitions} partitions, {args.rate:.0f} records/s, classic "
        f"session.timeout.ms={SESSION_TIMEOUT_MS}, heartbeat.interval.ms={HEARTBEAT_MS}, "
        f"{args.rounds} rounds, one member joins a group of N, then one leaves"
    )
    started = time.monotonic()
    results: list[Result] = []
    # Smaller groups first, both protocols at each size: a run cut short has the
    # smaller sizes complete. The figures are written after every (size, protocol).
    pairs = sorted((size, protocol) for size in sizes for protocol in protocols)
    stop_at = _stop_at(args.stop_at)
    with _broker(args.broker) as broker:
        for size, protocol in pairs:
            for round_no in range(1, args.rounds + 1):
                shift = (round_no - 1) % len(impls)
                for impl in impls[shift:] + impls[:shift]:
                    if stop_at is not None and time.time() > stop_at:
                        print(
                            f"--stop-at {args.stop_at}: not run: {protocol} N={size} "
                            f"round {round_no} {impl}",
                            flush=True,
                        )
                        continue
                    result = scenario(
                        broker, protocol, impl, size, round_no, args.partitions, args.rate
                    )
                    results.append(result)
                    figures = ", ".join(
                        f"{label} {result.figures[m] * 1000:,.0f}"
                        for m, label in METRICS
                        if m in result.figures
                    )
                    print(
                        f"{protocol} N={size} round {round_no} {impl}: "
                        f"{figures or result.note} (load {load_average()})",
                        flush=True,
                    )
            if (size, protocol) != pairs[-1]:
                report(results, args, load_at_start, final=False)
    report(results, args, load_at_start, final=True)
    print(f"\nwhole run: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
