"""Chaos runner: a mixed cooperative group under a seeded random schedule of faults,
checked afterwards from every member's append-only ledger.

    python -m reliability.chaos                          # Tansu, then the mock, 200 events each
    python -m reliability.chaos --broker mock --seed 7   # replay one schedule

Members are processes (``reliability/member.py``): coopconsumer Consumers and
confluent-kafka Consumers, all cooperative-sticky, in one group on a 6-partition topic
that a producer writes uniquely keyed records to. The schedule (``random.Random(seed)``)
applies joins, clean leaves (SIGTERM), SIGKILLs, SIGSTOPs longer than the session
timeout (the member's session expires; it wakes up later as a zombie), short SIGSTOPs,
slow rebalance listeners (SIGUSR1), a coopconsumer member whose assignor raises, and on
librdkafka's mock cluster also coordinator moves, brokers down and up, and OffsetCommit
errors injected. Each event is bounded in time (a stop ends with SIGCONT, a broker comes
back up, a leaver that does not exit is killed).

Timeouts are generous because the machine is shared: session.timeout.ms is 10 s by
default (``--session-timeout-ms``), a zombie sleeps 1.2-2x that.

The checker merges the ledgers (one monotonic clock) and prints: events applied,
overlapping ownerships (two running members owning one partition at the same time;
must be 0), records lost (produced, acknowledged, processed by nobody; must be 0),
duplicates with their cause (a lost generation: the earlier reader was killed, stopped
past its session or told its partitions were lost; or a failed commit), the longest
time a partition had no running owner, and the seed to replay. The same seed gives the
same schedule; timings, and so the exact figures, differ from run to run.
See reliability/README.md.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

__all__ = ["main"]

_PARTITIONS = 6
_MAX_MEMBERS = 6
_OFFSET_COMMIT = 8
#: Errors injected into OffsetCommit on the mock: REBALANCE_IN_PROGRESS,
#: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS.
_COMMIT_ERRORS = (27, 22, 25, 16, 14)

TP = tuple[str, int]


@attrs.define
class _Proc:
    name: str
    kind: str
    proc: subprocess.Popen[bytes]
    ledger: Path
    raising: bool = False
    stopped_until: float | None = None
    leave_at: float | None = None
    term_sent_at: float | None = None
    killed_at: float | None = None
    started_at: float = attrs.field(factory=time.monotonic)

    def settled(self) -> bool:
        """Past start-up: its signal handlers (SIGTERM, SIGUSR1/2) are installed."""
        return time.monotonic() - self.started_at > 8

    def running(self) -> bool:
        return self.proc.poll() is None and self.term_sent_at is None


class _Producer(threading.Thread):
    """Writes uniquely keyed records; remembers where each acknowledged one landed."""

    def __init__(
        self, bootstrap: str, topic: str, rate: float, config: Mapping[str, object] | None = None
    ) -> None:
        super().__init__(daemon=True, name="chaos-producer")
        import confluent_kafka

        self._producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 10,
                "enable.idempotence": False,
                **(config or {}),
            }
        )
        self._topic, self._rate = topic, rate
        self.stopped = threading.Event()
        self.acked: dict[str, tuple[TP, int]] = {}
        self.failed = 0
        self.sent = 0

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            return
        self.acked[msg.key().decode()] = ((msg.topic(), msg.partition()), msg.offset())

    def run(self) -> None:
        started = time.monotonic()
        while not self.stopped.is_set():
            due = int((time.monotonic() - started) * self._rate)
            while self.sent < due:
                self._producer.produce(
                    self._topic,
                    value=b"v",
                    key=f"k{self.sent}".encode(),
                    partition=self.sent % _PARTITIONS,
                    on_delivery=self._delivered,
                )
                self.sent += 1
            self._producer.poll(0.05)
        # Bounded: what is not acknowledged by then counts as not produced.
        self._producer.flush(60)


class _Runner:
    def __init__(self, args: argparse.Namespace, broker: Any, out: Path) -> None:
        from coopconsumer.testing import unique_name

        self.args = args
        self.broker = broker
        self.kind: str = broker.kind
        self.out = out
        self.rng = random.Random(args.seed)
        self.topic = unique_name("chaos")
        self.group = unique_name("chaos-group")
        self.members: dict[str, _Proc] = {}
        self.counter = 0
        self.log: list[dict[str, Any]] = []
        self.session_s = args.session_timeout_ms / 1000
        self.broker_down: tuple[int, float] | None = None

    # ------------------------------------------------------------------ processes

    def start_member(self, kind: str, *, raising: bool = False) -> _Proc:
        self.counter += 1
        name = f"{'raiser' if raising else kind}-{self.counter}"
        ledger = self.out / f"{name}.ledger"
        cmd = [sys.executable, "-m", "reliability.member", "--kind", kind, "--name", name]
        cmd += ["--bootstrap", self.broker.bootstrap, "--group", self.group]
        cmd += ["--topic", self.topic, "--ledger", str(ledger)]
        cmd += ["--session-timeout-ms", str(self.args.session_timeout_ms)]
        if raising:
            cmd.append("--raising-assignor")
        if self.kind == "mock" and kind == "coop":
            cmd.append("--mock-paced")
        log = (self.out / f"{name}.log").open("wb")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        member = _Proc(name=name, kind=kind, proc=proc, ledger=ledger, raising=raising)
        if raising:
            # A leader whose assignor raises stalls every rebalance it leads; it leaves
            # after a while so that the schedule stays meaningful.
            member.leave_at = time.monotonic() + self.rng.uniform(15, 30)
        self.members[name] = member
        return member

    def record(self, event: str, target: str = "", **fields: Any) -> None:
        self.log.append({"t": time.monotonic(), "ev": event, "target": target, **fields})

    def running(self) -> list[_Proc]:
        return [m for m in self.members.values() if m.running() and m.stopped_until is None]

    def leave(self, member: _Proc) -> None:
        member.proc.send_signal(signal.SIGTERM)
        member.term_sent_at = time.monotonic()
        self.record("leave", member.name)

    def kill(self, member: _Proc) -> None:
        if member.stopped_until is not None:
            member.stopped_until = None
        member.proc.kill()
        member.killed_at = time.monotonic()
        member.term_sent_at = member.killed_at
        self.record("kill", member.name)

    def tick(self) -> None:
        """Due follow-ups: SIGCONT, broker up, raisers leaving, stuck leavers killed."""
        now = time.monotonic()
        for member in self.members.values():
            if member.stopped_until is not None and now >= member.stopped_until:
                member.proc.send_signal(signal.SIGCONT)
                member.stopped_until = None
                self.record("cont", member.name)
            if member.leave_at is not None and now >= member.leave_at and member.running():
                member.leave_at = None
                self.leave(member)
            if (
                member.term_sent_at is not None
                and member.killed_at is None
                and member.proc.poll() is None
                and now - member.term_sent_at > 60
            ):
                self.kill(member)
                self.record("leave-timeout-killed", member.name)
        if self.broker_down is not None and now >= self.broker_down[1]:
            self.broker.set_broker_up(self.broker_down[0])
            self.record("broker-up", str(self.broker_down[0]))
            self.broker_down = None

    # ------------------------------------------------------------------ schedule

    def apply_random_event(self) -> str:
        rng = self.rng
        kinds = {
            "join": 4,
            "leave": 3,
            "kill": 2,
            "zombie": 2,
            "pause": 1,
            "slow": 2,
            "raising-assignor": 1,
            "assignor-raises-once": 2,
        }
        if self.kind == "mock":
            kinds.update({"coordinator-move": 2, "broker-down": 1, "commit-fail": 3})
        names = list(kinds)
        event = rng.choices(names, weights=[kinds[n] for n in names])[0]
        running = self.running()
        alive = [
            m for m in self.members.values() if m.proc.poll() is None and m.term_sent_at is None
        ]
        if event in ("leave", "kill", "zombie") and len(running) <= 2:
            event = "join"
        if event in ("join", "raising-assignor") and len(alive) >= _MAX_MEMBERS:
            event = "leave"
        if event == "raising-assignor" and any(m.raising and m.running() for m in alive):
            event = "slow"
        if event == "broker-down" and self.broker_down is not None:
            event = "coordinator-move"
        # Draw the target with the schedule's generator so a seed replays the choices.
        # Signals that a fresh process would die of (its handlers are not installed
        # yet) go to settled members only.
        if event in ("leave", "slow"):
            running = [m for m in running if m.settled()]
        target = rng.choice(running) if running else None
        if event == "join":
            kind = rng.choice(["coop", "coop", "rdkafka"])
            member = self.start_member(kind)
            self.record("join", member.name)
        elif event == "raising-assignor":
            member = self.start_member("coop", raising=True)
            self.record("raising-assignor", member.name)
        elif event == "leave" and target is not None:
            self.leave(target)
        elif event == "kill" and target is not None:
            self.kill(target)
        elif event in ("zombie", "pause") and target is not None:
            if event == "zombie":
                duration = rng.uniform(1.2, 2.0) * self.session_s
            else:
                duration = rng.uniform(0.5, 0.3 * self.session_s)
            target.proc.send_signal(signal.SIGSTOP)
            target.stopped_until = time.monotonic() + duration
            self.record(event, target.name, seconds=round(duration, 1))
        elif event == "assignor-raises-once":
            # Whichever coopconsumer member leads the next rebalance raises in assign().
            for member in running:
                if member.kind == "coop" and member.settled():
                    member.proc.send_signal(signal.SIGUSR2)
            self.record(event, "")
        elif event == "slow" and target is not None:
            target.proc.send_signal(signal.SIGUSR1)
            self.record("slow", target.name)
        elif event == "coordinator-move":
            broker_id = rng.choice(self.broker.broker_ids)
            self.broker.set_coordinator(self.group, broker_id)
            self.record(event, str(broker_id))
        elif event == "broker-down":
            broker_id = rng.choice(self.broker.broker_ids)
            self.broker.set_broker_down(broker_id)
            self.broker_down = (broker_id, time.monotonic() + rng.uniform(2, 6))
            self.record(event, str(broker_id))
        elif event == "commit-fail":
            codes = [rng.choice(_COMMIT_ERRORS) for _ in range(rng.randint(1, 3))]
            self.broker.push_request_errors(_OFFSET_COMMIT, codes)
            self.record(event, "", codes=codes)
        else:
            return "none"
        return event


# ---------------------------------------------------------------------- checking


def _read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # the line a SIGKILL cut short
    return events


@attrs.frozen
class _Interval:
    member: str
    start: float
    end: float
    how: str  # how it ended: revoked, lost, exit, killed, end


def _subtract(
    start: float, end: float, holes: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    pieces = [(start, end)]
    for h0, h1 in holes:
        nxt = []
        for a, b in pieces:
            if h1 <= a or h0 >= b:
                nxt.append((a, b))
                continue
            if a < h0:
                nxt.append((a, h0))
            if h1 < b:
                nxt.append((h1, b))
        pieces = nxt
    return pieces


def check(
    ledgers: dict[str, list[dict[str, Any]]],
    runner_log: list[dict[str, Any]],
    acked: dict[str, tuple[TP, int]],
    chaos_end: float,
    run_end: float,
) -> dict[str, Any]:
    """Merge the ledgers and compute the campaign's figures."""
    killed = {e["target"]: e["t"] for e in runner_log if e["ev"] == "kill"}
    stops: dict[str, list[tuple[float, float]]] = defaultdict(list)
    open_stop: dict[str, float] = {}
    for e in runner_log:
        if e["ev"] in ("zombie", "pause"):
            open_stop[e["target"]] = e["t"]
        elif e["ev"] in ("cont", "kill") and e["target"] in open_stop:
            stops[e["target"]].append((open_stop.pop(e["target"]), e["t"]))
    # member -> when it woke up from a stop longer than its session
    zombie_wakes: dict[str, list[float]] = defaultdict(list)
    zombie_starts = {(e["target"], e["t"]) for e in runner_log if e["ev"] == "zombie"}
    for member, windows in stops.items():
        for s0, s1 in windows:
            if (member, s0) in zombie_starts:
                zombie_wakes[member].append(s1)

    intervals: dict[TP, list[_Interval]] = defaultdict(list)
    processed: dict[str, list[tuple[str, float, TP, int]]] = defaultdict(list)
    commits_ok: dict[tuple[str, TP], list[tuple[float, int]]] = defaultdict(list)
    commit_fails: dict[tuple[str, TP], list[tuple[float, int]]] = defaultdict(list)
    lost_events: dict[tuple[str, TP], list[float]] = defaultdict(list)
    outside = 0
    poll_errors: Counter[str] = Counter()
    died: list[str] = []
    for member, events in ledgers.items():
        owned: dict[TP, float] = {}
        last_t = events[-1]["t"] if events else 0.0
        exited = False
        for e in events:
            ev = e["ev"]
            if ev == "assigned":
                for t, p in e["tps"]:
                    owned.setdefault((t, p), e["t"])
            elif ev in ("revoked", "lost"):
                for t, p in e["tps"]:
                    tp = (t, p)
                    if tp in owned:
                        intervals[tp].append(_Interval(member, owned.pop(tp), e["t"], ev))
                    if ev == "lost":
                        lost_events[(member, tp)].append(e["t"])
            elif ev == "record":
                tp = (e["tp"][0], e["tp"][1])
                processed[e["key"]].append((member, e["t"], tp, e["off"]))
                if not e["owned"]:
                    outside += 1
            elif ev == "commit_ok":
                for t, p, o in e["offsets"]:
                    commits_ok[(member, (t, p))].append((e["t"], o))
            elif ev == "commit_fail":
                for t, p, o in e["offsets"]:
                    commit_fails[(member, (t, p))].append((e["t"], o))
            elif ev == "error":
                poll_errors[e["err"].split(":")[0]] += 1
            elif ev == "exit":
                exited = True
        if member in killed:
            end, how = killed[member], "killed"
        elif exited:
            end, how = last_t, "exit"
        else:
            end, how = max(last_t, run_end), "end"
            died.append(member)
        for tp, start in owned.items():
            intervals[tp].append(_Interval(member, start, end, how))

    # Overlaps between running members (stopped windows removed: a stopped process
    # does nothing). A zombie's belief between waking and hearing "lost" is reported
    # apart, with the records it processed then.
    overlaps: list[str] = []
    zombie_overlaps: list[str] = []
    both_read = 0
    record_times: dict[tuple[str, TP], list[float]] = defaultdict(list)
    for reads_ in processed.values():
        for who, when, part, _off in reads_:
            record_times[(who, part)].append(when)
    for times in record_times.values():
        times.sort()
    first_assignment = min((iv.start for spans in intervals.values() for iv in spans), default=0.0)
    longest_gap: tuple[float, TP | None, float] = (0.0, None, 0.0)
    for tp, spans in intervals.items():
        pieces = []
        for iv in spans:
            for a, b in _subtract(iv.start, iv.end, stops.get(iv.member, [])):
                pieces.append((a, b, iv))
        pieces.sort(key=lambda x: x[0])
        for i, (a1, b1, iv1) in enumerate(pieces):
            for a2, b2, iv2 in pieces[i + 1 :]:
                if a2 >= b1:
                    break
                if iv1.member == iv2.member:
                    continue
                overlap = min(b1, b2) - a2
                if overlap <= 0:
                    continue
                w0, w1 = a2, min(b1, b2)
                counts = [
                    _count_between(record_times.get((iv.member, tp), []), w0, w1)
                    for iv in (iv1, iv2)
                ]
                both_read += min(counts)
                text = (
                    f"{tp[0]}[{tp[1]}]: {iv1.member} ({iv1.how}) and {iv2.member} ({iv2.how})"
                    f" for {overlap:.2f} s, records read meanwhile {counts[0]} and {counts[1]}"
                )
                zombie = any(
                    any(abs(w - a) < 1e-6 for w in zombie_wakes.get(iv.member, []))
                    for a, iv in ((a1, iv1), (a2, iv2))
                )
                (zombie_overlaps if zombie else overlaps).append(text)
        # Longest time with no running owner, from the group's first assignment (of
        # any partition) to the end of the drain after the schedule.
        if pieces:
            cursor = first_assignment
            for a, b, _iv in pieces:
                if a > cursor and cursor < chaos_end:
                    gap = min(a, chaos_end) - cursor
                    if gap > longest_gap[0]:
                        longest_gap = (gap, tp, cursor)
                cursor = max(cursor, b)
            if cursor < chaos_end and chaos_end - cursor > longest_gap[0]:
                longest_gap = (chaos_end - cursor, tp, cursor)

    # Lost: nobody processed it although the group committed past it. Unconsumed:
    # nobody processed it and no commit passed it (the group had not got there when
    # the run ended: a liveness figure, the record is still in the log).
    committed: dict[TP, int] = {}
    for (_member, tp_), entries in commits_ok.items():
        for _t, offset in entries:
            committed[tp_] = max(committed.get(tp_, 0), offset)
    unprocessed = sorted(k for k in acked if k not in processed)
    lost_records = [k for k in unprocessed if acked[k][1] < committed.get(acked[k][0], 0)]
    unconsumed = len(unprocessed) - len(lost_records)
    dup_causes: Counter[str] = Counter()
    unexplained: list[str] = []
    for key, reads in processed.items():
        if len(reads) < 2:
            continue
        reads.sort(key=lambda r: r[1])
        for (m1, t1, tp, off), (m2, t2, _tp2, _off2) in itertools.pairwise(reads):
            cause = _duplicate_cause(
                m1, t1, t2, tp, off, killed, stops, lost_events, commits_ok, commit_fails
            )
            dup_causes[cause] += 1
            if cause == "unexplained":
                unexplained.append(f"{key} {tp[0]}[{tp[1]}]@{off}: {m1} then {m2}")
    return {
        "overlaps": overlaps,
        "zombie_overlaps": zombie_overlaps,
        "overlap_reads": both_read,
        "lost_records": lost_records,
        "unconsumed": unconsumed,
        "duplicates": sum(dup_causes.values()),
        "dup_causes": dup_causes,
        "unexplained": unexplained,
        "longest_gap": longest_gap,
        "outside": outside,
        "poll_errors": poll_errors,
        "processed_keys": len(processed),
        "died": died,
    }


def _count_between(times: list[float], start: float, end: float) -> int:
    return bisect.bisect_right(times, end) - bisect.bisect_left(times, start)


def _duplicate_cause(
    m1: str,
    t1: float,
    t2: float,
    tp: TP,
    off: int,
    killed: dict[str, float],
    stops: dict[str, list[tuple[float, float]]],
    lost_events: dict[tuple[str, TP], list[float]],
    commits_ok: dict[tuple[str, TP], list[tuple[float, int]]],
    commit_fails: dict[tuple[str, TP], list[tuple[float, int]]],
) -> str:
    """Why the record at ``off`` read by ``m1`` at ``t1`` was read again at ``t2``."""
    if any(t1 <= t <= t2 for t in lost_events.get((m1, tp), [])):
        return "lost generation (on_partitions_lost)"
    if m1 in killed and t1 <= killed[m1] <= t2:
        return "lost generation (SIGKILL)"
    if any(t1 <= s1 and s0 <= t2 for s0, s1 in stops.get(m1, [])):
        return "lost generation (SIGSTOP)"
    covered = [o for t, o in commits_ok.get((m1, tp), []) if t1 <= t <= t2 and o > off]
    if not covered:
        failed = [o for t, o in commit_fails.get((m1, tp), []) if t1 <= t <= t2 and o > off]
        return "failed commit" if failed else "no commit before hand-over"
    return "unexplained"


# ---------------------------------------------------------------------- running


def run_one(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """One campaign on one broker; returns its figures."""
    from coopconsumer.testing import embedded_broker

    out = Path(args.out) / kind
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.ledger"):
        old.unlink()
    started = time.monotonic()
    with embedded_broker(kind, num_brokers=3 if kind == "mock" else 1) as broker:  # type: ignore[arg-type]
        if broker.supports_faults:
            broker.set_group_initial_rebalance_delay_ms(0)
        runner = _Runner(args, broker, out)
        broker.create_topic(runner.topic, partitions=_PARTITIONS)
        producer = _Producer(broker.bootstrap, runner.topic, args.rate)
        for kind_ in ("coop", "coop", "rdkafka"):
            runner.start_member(kind_)
        producer.start()
        applied: Counter[str] = Counter()
        try:
            time.sleep(5)
            for _ in range(args.events):
                applied[runner.apply_random_event()] += 1
                pause_until = time.monotonic() + runner.rng.uniform(
                    args.gap_s / 2, args.gap_s * 1.5
                )
                while time.monotonic() < pause_until:
                    runner.tick()
                    time.sleep(0.05)
            chaos_end = time.monotonic()
            # Settle: every stop ends, brokers are up, faults cleared, raisers leave.
            for member in runner.members.values():
                if member.stopped_until is not None:
                    member.stopped_until = time.monotonic()
                if member.raising and member.running():
                    member.leave_at = time.monotonic()
            runner.tick()
            if runner.broker_down is not None:
                runner.broker_down = (runner.broker_down[0], 0.0)
                runner.tick()
            if broker.supports_faults:
                broker.clear_request_errors(_OFFSET_COMMIT)
            while len([m for m in runner.running() if not m.raising]) < 2:
                runner.start_member("coop")
                runner.record("settle-join")
            producer.stopped.set()
            producer.join(90)
            drain_deadline = time.monotonic() + args.drain_s
            while time.monotonic() < drain_deadline:
                runner.tick()
                seen = set()
                for member in runner.members.values():
                    for e in _read_ledger(member.ledger):
                        if e["ev"] == "record":
                            seen.add(e["key"])
                if all(k in seen for k in producer.acked):
                    break
                time.sleep(2)
            drained = time.monotonic()
        finally:
            for member in runner.members.values():
                if member.proc.poll() is None:
                    if member.stopped_until is not None:
                        member.proc.send_signal(signal.SIGCONT)
                    member.proc.send_signal(signal.SIGTERM)
            for member in runner.members.values():
                try:
                    member.proc.wait(60)
                except subprocess.TimeoutExpired:
                    member.proc.kill()
                    member.proc.wait()
                    runner.record("exit-timeout-killed", member.name)
            producer.stopped.set()
    run_end = time.monotonic()
    ledgers = {name: _read_ledger(m.ledger) for name, m in runner.members.items()}
    figures = check(ledgers, runner.log, producer.acked, drained, run_end)
    (out / "runner.json").write_text(json.dumps(runner.log))
    (out / "acked.json").write_text(
        json.dumps({"acked": producer.acked, "drained": drained, "run_end": run_end})
    )
    figures.update(
        broker=kind,
        seed=args.seed,
        applied=applied,
        events=sum(c for e, c in applied.items() if e != "none"),
        members=len(runner.members),
        produced=len(producer.acked),
        produce_failed=producer.failed,
        wall_s=run_end - started,
        drain_s=drained - chaos_end,
        out=str(out),
    )
    return figures


def _report(f: dict[str, Any], args: argparse.Namespace) -> str:
    gap, gap_tp, _at = f["longest_gap"]
    lines = [
        f"== chaos on {f['broker']}: seed {f['seed']}, {f['events']} events applied, "
        f"{f['members']} member processes, {f['wall_s']:.0f} s",
        "   events: " + ", ".join(f"{k} {v}" for k, v in sorted(f["applied"].items())),
        f"   overlapping ownerships (running members): {len(f['overlaps'])}",
        f"   zombie windows (woken after its session expired, before 'lost'): "
        f"{len(f['zombie_overlaps'])}; records both owners read during overlaps:"
        f" {f['overlap_reads']}",
        f"   records produced (acknowledged): {f['produced']} (+{f['produce_failed']} failed)",
        f"   records processed at least once: {f['processed_keys']}",
        f"   records lost (committed past, processed by nobody): {len(f['lost_records'])}",
        f"   records not consumed by the end of the drain (no commit past them): {f['unconsumed']}",
        f"   records processed outside the member's ownership: {f['outside']}",
        f"   duplicates: {f['duplicates']}"
        + "".join(f"; {c}: {n}" for c, n in sorted(f["dup_causes"].items())),
        f"   longest time a partition had no running owner: {gap:.1f} s"
        + (f" ({gap_tp[0]}[{gap_tp[1]}])" if gap_tp else ""),
        "   errors reported by poll(): "
        + (", ".join(f"{k} {v}" for k, v in f["poll_errors"].most_common()) or "none"),
        f"   drain after the schedule: {f['drain_s']:.0f} s; ledgers in {f['out']}",
        f"   replay: python -m reliability.chaos --broker {f['broker']} --seed {f['seed']}"
        f" --events {args.events}",
    ]
    for title, items in (
        ("overlap", f["overlaps"]),
        ("zombie window", f["zombie_overlaps"]),
        ("lost record", f["lost_records"]),
        ("unexplained duplicate", f["unexplained"]),
        ("member died without exit", f["died"]),
    ):
        for item in items[:10]:
            lines.append(f"   {title}: {item}")
        if len(items) > 10:
            lines.append(f"   ... {len(items) - 10} more {title}s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the chaos campaign on one or both brokers and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--broker", choices=["tansu", "mock", "both"], default="both")
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    parser.add_argument("--gap-s", type=float, default=2.0, help="mean time between events")
    parser.add_argument("--rate", type=float, default=40.0, help="records per second")
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--drain-s", type=float, default=240.0)
    parser.add_argument("--out", default="/tmp/coopconsumer-chaos")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1_000_000)
    results = []
    for kind in ("tansu", "mock") if args.broker == "both" else (args.broker,):
        print(f"chaos on {kind}, seed {args.seed}, {args.events} events ...", flush=True)
        figures = run_one(kind, args)
        print(_report(figures, args), flush=True)
        results.append(figures)
    print()
    head = (
        f"{'broker':<6} {'seed':>7} {'events':>6} {'overlaps':>8} {'zombie':>6} "
        f"{'produced':>8} {'lost':>4} {'unconsumed':>10} {'dups':>5} {'dup causes':<58} "
        f"{'max no-owner s':>14}"
    )
    print(head)
    for f in results:
        causes = ", ".join(f"{c} {n}" for c, n in sorted(f["dup_causes"].items())) or "-"
        print(
            f"{f['broker']:<6} {f['seed']:>7} {f['events']:>6} {len(f['overlaps']):>8} "
            f"{len(f['zombie_overlaps']):>6} {f['produced']:>8} {len(f['lost_records']):>4} "
            f"{f['unconsumed']:>10} "
            f"{f['duplicates']:>5} {causes:<58} {f['longest_gap'][0]:>14.1f}"
        )
    bad = any(f["overlaps"] or f["lost_records"] or f["unexplained"] for f in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
