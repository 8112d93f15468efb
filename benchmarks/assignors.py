"""Benchmark: cooperative-sticky on a large group, against kafka-python 3.x.

    python benchmarks/assignors.py [--scale small|full] [--pause-gc] [--kafka-python-timeout S]

Full scale: 500 topics x 2000 partitions (1,000,000 partitions), 2000 members, every
member subscribed to every topic.

* pass 1: first assignment (nobody owns anything);
* pass 2: 200 members leave; the 1800 survivors report the partitions pass 1 gave
  them (``owned_partitions``) and generation 1.

The timed window is one ``CooperativeStickyAssignor().assign(metadata, group)`` call
and nothing else: building the ``ClusterMetadata`` and ``GroupSubscription`` inputs
(pass 2's owned partitions are pass 1's result) happens before it, checking the result
after it. The collector runs as the application left it (enabled, default thresholds;
the assignor's ``pause_gc`` is off unless ``--pause-gc``), and the previous run's result
is dropped and ``gc.collect()`` called before each timed run, so every run starts from
the same heap. Each pass is timed three times on fresh assignor instances: best and
median wall time, and the median CPU time of the process (``time.process_time``, which
other processes on a shared machine disturb much less than wall time). Issue 24's
target is <= 0.5 s per pass.

The built-in sticky assignors return each member's partitions as a
``CompactPartitions`` (partition numbers; ``TopicPartition`` objects are made only when
iterated; docs/assignors.md, "Compact assignments"), so part of the work a result of
``TopicPartition`` tuples did inside the window now happens only if a caller iterates.
Two figures keep that honest:

* the leader's own use of the result, timed after each pass (median of three): the
  checks it runs (``check_assignment``) and the SyncGroup bytes of every member
  (``consumer_protocol.encode_assignment``), which read the partition numbers;
* for scale, what creating one ``TopicPartition`` per partition and holding them costs
  (the floor of any assignment returned as objects: a ``TopicPartition`` is a tuple
  subclass, which the collector tracks and never untracks, so a million of them cost
  several full collections on the way).

Peak memory is measured in a separate, untimed run under ``tracemalloc`` (tracing
slows Python down, so it never overlaps a timed run). Every result is checked outside
the timed region: each partition assigned exactly once, sizes within one, and in pass
2 that survivors kept everything they owned.

Then kafka-python's ``CooperativeStickyAssignor`` (installed by the ``bench`` extra;
imported lazily, reported clearly when missing). Its algorithm keeps, for every
partition, the list of every member that could take it (1,000,000 x 2000 entries at
full scale, ~16 GB), so it runs in a subprocess with a time limit and an address-space
limit. The full-scale attempt is reported as finished or not (then the speed-up is a
lower bound, "> X"); the same passes are also run on a reduced input (50 topics x 500
partitions, 200 members) where kafka-python finishes, with coopconsumer timed on that
same input, and the ratio printed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import Any, NamedTuple, TypeVar

from coopconsumer import consumer_protocol
from coopconsumer.assignors import (
    ClusterMetadata,
    CooperativeStickyAssignor,
    GroupAssignment,
    GroupSubscription,
    Subscription,
    TopicPartition,
    check_assignment,
)

MIB = 1024 * 1024
#: Issue 24: cooperative-sticky over 1M partitions x 2,000 members in at most 0.5 s.
TARGET_S = 0.5


class Scale(NamedTuple):
    topics: int
    partitions: int  # per topic
    members: int
    leaving: int

    @property
    def total(self) -> int:
        return self.topics * self.partitions

    def describe(self) -> str:
        return (
            f"{self.topics} topics x {self.partitions} partitions = {self.total:,} partitions, "
            f"{self.members} members ({self.leaving} leave before pass 2)"
        )


SCALES = {
    "full": Scale(topics=500, partitions=2000, members=2000, leaving=200),
    "small": Scale(topics=50, partitions=200, members=200, leaving=20),
}
# kafka-python's comparison input when the main scale is too big for it.
REDUCED = {
    "full": Scale(topics=50, partitions=500, members=200, leaving=20),
    "small": SCALES["small"],
}


def topic_names(scale: Scale) -> tuple[str, ...]:
    return tuple(f"topic-{i:04d}" for i in range(scale.topics))


def member_names(scale: Scale) -> list[str]:
    return [f"member-{i:05d}" for i in range(scale.members)]


# --------------------------------------------------------------------------- ours


_R = TypeVar("_R")


def time_runs(run: Callable[[], _R], repeats: int) -> tuple[list[float], list[float], _R]:
    """Wall and CPU seconds of ``repeats`` calls of ``run``, and the last result."""
    times: list[float] = []
    cpu: list[float] = []
    result: _R | None = None
    for _ in range(repeats):
        result = None
        gc.collect()
        start_cpu = time.process_time()
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    assert result is not None
    return times, cpu, result


def allocation_floor(scale: Scale, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds to create and hold one ``TopicPartition`` per
    partition of ``scale`` (C-level construction, one shared int per partition number),
    the least a first assignment must do."""
    new = tuple.__new__
    numbers = list(range(scale.partitions))

    def create() -> list[TopicPartition]:
        out: list[TopicPartition] = []
        for topic in topic_names(scale):
            out.extend(map(new, repeat(TopicPartition), zip(repeat(topic), numbers)))
        return out

    times, cpu, _ = time_runs(create, repeats)
    return statistics.median(times), statistics.median(cpu)


def traced_peak(run: Callable[[], GroupAssignment]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def verify(
    scale: Scale,
    result: Mapping[str, Sequence[TopicPartition]],
    kept_from: Mapping[str, Sequence[TopicPartition]] | None = None,
) -> str:
    """Check count, uniqueness and balance (and stickiness for pass 2); describe it."""
    sizes = [len(p) for p in result.values()]
    total = sum(sizes)
    distinct: set[TopicPartition] = set()
    for partitions in result.values():
        distinct.update(partitions)
    problems = []
    if total != scale.total:
        problems.append(f"{total:,} partitions assigned, expected {scale.total:,}")
    if len(distinct) != total:
        problems.append(f"{total - len(distinct):,} partitions assigned more than once")
    if max(sizes) - min(sizes) > 1:
        problems.append(f"unbalanced: sizes {min(sizes)}..{max(sizes)}")
    kept = ""
    if kept_from is not None:
        lost = sum(len(set(owned) - set(result[m])) for m, owned in kept_from.items())
        if lost:
            problems.append(f"survivors lost {lost:,} owned partitions")
        kept = f"; survivors kept all {sum(len(o) for o in kept_from.values()):,} owned"
    if problems:
        raise SystemExit("INVALID RESULT: " + "; ".join(problems))
    return (
        f"valid: {total:,} partitions, each exactly once, {len(sizes)} members with "
        f"{min(sizes)}..{max(sizes)} each{kept}"
    )


class PassFigures(NamedTuple):
    best: float
    median: float
    cpu_median: float
    peak: int | None
    leader_median: float | None = None
    leader_cpu_median: float | None = None


def leader_use(
    metadata: ClusterMetadata, group: GroupSubscription, result: GroupAssignment, repeats: int
) -> tuple[float, float]:
    """Median wall and CPU seconds of what the leader does with ``result`` before its
    SyncGroup: ``check_assignment``, then every member's assignment bytes."""

    def use() -> int:
        check_assignment(metadata, group, result, assignor_name="cooperative-sticky")
        encode = consumer_protocol.encode_assignment
        return sum(len(encode(result.assignments[m])) for m in sorted(group.subscriptions))

    times, cpu, _ = time_runs(use, repeats)
    return statistics.median(times), statistics.median(cpu)


def run_ours(
    scale: Scale, *, repeats: int, measure_memory: bool, pause_gc: bool = False
) -> tuple[PassFigures, PassFigures]:
    topics = topic_names(scale)
    members = member_names(scale)
    metadata = ClusterMetadata.from_partition_counts(dict.fromkeys(topics, scale.partitions))
    first = GroupSubscription(subscriptions={m: Subscription(topics=topics) for m in members})

    def pass1() -> GroupAssignment:
        return CooperativeStickyAssignor(pause_gc=pause_gc).assign(metadata, first)

    times1, cpu1, result1 = time_runs(pass1, repeats)
    leader1 = leader_use(metadata, first, result1, repeats)
    peak1 = traced_peak(pass1) if measure_memory else None
    owned = {m: a.partitions for m, a in result1.assignments.items()}
    check1 = verify(scale, owned)

    survivors = members[scale.leaving :]
    second = GroupSubscription(
        subscriptions={
            m: Subscription(topics=topics, owned_partitions=owned[m], generation_id=1)
            for m in survivors
        }
    )
    del result1

    def pass2() -> GroupAssignment:
        return CooperativeStickyAssignor(pause_gc=pause_gc).assign(metadata, second)

    times2, cpu2, result2 = time_runs(pass2, repeats)
    leader2 = leader_use(metadata, second, result2, repeats)
    peak2 = traced_peak(pass2) if measure_memory else None
    check2 = verify(
        scale,
        {m: a.partitions for m, a in result2.assignments.items()},
        {m: owned[m] for m in survivors},
    )
    figures = []
    for label, times, cpu, peak, check, leader in (
        ("pass 1 (first assignment)", times1, cpu1, peak1, check1, leader1),
        (f"pass 2 ({scale.leaving} members left)", times2, cpu2, peak2, check2, leader2),
    ):
        fig = PassFigures(
            min(times), statistics.median(times), statistics.median(cpu), peak, *leader
        )
        mem = f"; tracemalloc peak {peak / MIB:,.0f} MiB" if peak is not None else ""
        print(
            f"  {label:<32} best {fig.best:6.3f} s, median {fig.median:6.3f} s of {len(times)} "
            f"(CPU median {fig.cpu_median:.3f} s){mem}"
        )
        print(f"    {check}")
        print(
            f"    then the leader's checks + SyncGroup bytes of every member: median "
            f"{leader[0]:.3f} s (CPU {leader[1]:.3f} s), not in the timed window"
        )
        figures.append(fig)
    return figures[0], figures[1]


# --------------------------------------------------------------------------- kafka-python


def kafka_python_version() -> str | None:
    try:
        import kafka
        from kafka.coordinator.assignors.cooperative_sticky import (  # noqa: F401
            CooperativeStickyAssignor as _K,
        )
    except ImportError:
        return None
    return str(getattr(kafka, "__version__", "unknown"))


def kafka_python_worker(scale: Scale) -> None:
    """Child process: run both passes with kafka-python, print one JSON line per pass."""
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor as K
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as CPS

    topics = list(topic_names(scale))
    known = set(topics)
    partitions = set(range(scale.partitions))

    class Cluster:
        def topics(self) -> set[str]:
            return set(topics)

        def partitions_for_topic(self, topic: str) -> set[int] | None:
            return set(partitions) if topic in known else None

    class Member(NamedTuple):
        member_id: str
        metadata: Any
        group_instance_id: str | None = None

    def sizes(result: Mapping[str, Any]) -> dict[str, list[TopicPartition]]:
        return {
            m: [TopicPartition(t, p) for t, ps in a.assigned_partitions for p in ps]
            for m, a in result.items()
        }

    names = member_names(scale)
    members = [
        Member(
            m, CPS(version=2, topics=topics, user_data=b"", owned_partitions=[], generation_id=-1)
        )
        for m in names
    ]
    gc.collect()
    print(json.dumps({"starting": 1, "wall": time.time()}), flush=True)
    start = time.perf_counter()
    result = K().assign(Cluster(), members)
    elapsed = time.perf_counter() - start
    first = sizes(result)
    print(json.dumps({"pass": 1, "seconds": elapsed, "check": verify(scale, first)}), flush=True)

    survivors = names[scale.leaving :]
    members2 = []
    for m in survivors:
        by_topic: dict[str, list[int]] = {}
        for tp in first[m]:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        owned = [CPS.TopicPartition(topic=t, partitions=ps) for t, ps in sorted(by_topic.items())]
        members2.append(
            Member(
                m,
                CPS(
                    version=2, topics=topics, user_data=b"", owned_partitions=owned, generation_id=1
                ),
            )
        )
    del result
    gc.collect()
    print(json.dumps({"starting": 2, "wall": time.time()}), flush=True)
    start = time.perf_counter()
    result2 = K().assign(Cluster(), members2)
    elapsed = time.perf_counter() - start
    check = verify(scale, sizes(result2), {m: first[m] for m in survivors})
    print(json.dumps({"pass": 2, "seconds": elapsed, "check": check}), flush=True)


class ChildOutcome(NamedTuple):
    passes: dict[int, tuple[float, str]]
    # For a pass that started but did not finish: (seconds it ran, why it stopped).
    unfinished: dict[int, tuple[float, str]]


def run_kafka_python(scale: Scale, timeout: float, memory_limit: int) -> ChildOutcome:
    """Run the worker in a subprocess under a time and address-space limit."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    cmd = [sys.executable, os.path.abspath(__file__), "--kafka-python-worker", *map(str, scale)]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=limit, check=False
        )
        out, err, code = proc.stdout, proc.stderr, proc.returncode
        timed_out = False
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err, code, timed_out = "", None, True
    ended = time.time()
    passes: dict[int, tuple[float, str]] = {}
    started: dict[int, float] = {}
    for line in out.splitlines():
        if line.startswith("{"):
            data = json.loads(line)
            if "starting" in data:
                started[int(data["starting"])] = float(data["wall"])
            else:
                passes[int(data["pass"])] = (float(data["seconds"]), str(data["check"]))
    unfinished: dict[int, tuple[float, str]] = {}
    running = [n for n in started if n not in passes]
    if running and (timed_out or code != 0):
        n = running[0]
        if timed_out:
            why = f"stopped by the {timeout:.0f} s time limit"
        else:
            last = err.strip().splitlines()[-1] if err.strip() else f"exit code {code}"
            gib = memory_limit / MIB / 1024
            why = f"{last} under the {gib:g} GiB address-space limit"
        unfinished[n] = (ended - started[n], why)
    elif code not in (0, None) and not started:
        unfinished[1] = (0.0, err.strip().splitlines()[-1] if err.strip() else f"exit code {code}")
    return ChildOutcome(passes, unfinished)


def describe_pass(n: int, outcome: ChildOutcome, ours: float) -> str:
    if n in outcome.passes:
        secs, check = outcome.passes[n]
        return (
            f"pass {n}: {secs:8.2f} s (one run) vs coopconsumer {ours:.3f} s (median) -> "
            f"coopconsumer {ratio(secs, ours)} faster\n      {check}"
        )
    if n in outcome.unfinished:
        secs, why = outcome.unfinished[n]
        return (
            f"pass {n}: did not finish: {why} after {secs:.0f} s in the pass -> "
            f"coopconsumer > {ratio(secs, ours)} faster (lower bound)"
        )
    return f"pass {n}: not reached (an earlier pass did not finish)"


def ratio(theirs: float, ours: float) -> str:
    return f"{theirs / ours:,.0f}x"


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument(
        "--kafka-python-timeout",
        type=float,
        default=240.0,
        help="seconds kafka-python may take per subprocess (default 240)",
    )
    parser.add_argument(
        "--kafka-python-memory-gib",
        type=float,
        default=4.0,
        help="address-space limit of the kafka-python subprocess (default 4 GiB)",
    )
    parser.add_argument("--skip-kafka-python", action="store_true")
    parser.add_argument(
        "--pause-gc",
        action="store_true",
        help="construct the assignor with pause_gc=True (collector paused during passes)",
    )
    parser.add_argument("--kafka-python-worker", nargs=4, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.kafka_python_worker:
        kafka_python_worker(Scale(*args.kafka_python_worker))
        return 0

    scale = SCALES[args.scale]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    collector = "paused during passes (pause_gc=True)" if args.pause_gc else "running (default)"
    print(f"== coopconsumer cooperative-sticky, {args.scale} scale: {scale.describe()}")
    print(f"  garbage collector: {collector}")
    ours1, ours2 = run_ours(scale, repeats=3, measure_memory=True, pause_gc=args.pause_gc)
    floor_wall, floor_cpu = allocation_floor(scale, repeats=3)
    print(
        f"  for scale: creating the {scale.total:,} TopicPartitions alone takes "
        f"{floor_wall:.3f} s (CPU {floor_cpu:.3f} s), median of 3"
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"  process peak RSS so far (inputs and results included): {rss / MIB:,.0f} MiB")
    print(f"  load average now: {os.getloadavg()[0]:.2f}")
    target = max(ours1.median, ours2.median) <= TARGET_S
    print(
        f"  target <= {TARGET_S} s per pass (median wall time of each pass): "
        f"{'met' if target else 'NOT MET'}"
    )

    if args.skip_kafka_python:
        return 0 if target else 1
    version = kafka_python_version()
    print()
    if version is None:
        print(
            "== kafka-python: NOT INSTALLED, no comparison "
            "(pip install -e '.[bench]' installs kafka-python==3.0.12)"
        )
        return 0 if target else 1
    memory_limit = int(args.kafka_python_memory_gib * 1024 * MIB)
    print(f"== kafka-python {version} CooperativeStickyAssignor")
    print(
        f"  {args.scale} scale, subprocess limited to {args.kafka_python_timeout:.0f} s and "
        f"{args.kafka_python_memory_gib:g} GiB address space:"
    )
    full = run_kafka_python(scale, args.kafka_python_timeout, memory_limit)
    for n, ours in ((1, ours1), (2, ours2)):
        print("    " + describe_pass(n, full, ours.median))
    reduced = REDUCED[args.scale]
    if reduced != scale:
        print(f"  reduced scale: {reduced.describe()}")
        print("  coopconsumer on the reduced input:")
        small1, small2 = run_ours(reduced, repeats=3, measure_memory=False, pause_gc=args.pause_gc)
        print("  kafka-python on the reduced input:")
        part = run_kafka_python(reduced, args.kafka_python_timeout, memory_limit)
        for n, ours in ((1, small1), (2, small2)):
            print("    " + describe_pass(n, part, ours.median))
    return 0 if target else 1


if __name__ == "__main__":
    sys.exit(main())
