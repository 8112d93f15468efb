"""Exactly-once chaos on a 3-node Apache Kafka cluster: SIGKILLed brokers (issue 34).

    python -m reliability.eos_chaos --broker kafka --events 30 --seed 3401

One ``kafka_cluster(brokers=3)`` (KRaft, every node a broker and a controller;
internal topics at 3 replicas, ``transaction.state.log.min.isr=2``, topics created at 3
replicas with ``min.insync.replicas=2``) hosts one *lane* per (row, loop) at the same
time: ``classic`` (cooperative-sticky) and ``kip848`` (``group.protocol=consumer``)
rows, each through coopconsumer's ``TransactionalProcessor`` (``coop``), the same loop
written with confluent-kafka alone (``raw``) and Kafka's own Java client
(``java``: ``tests/peers/java/PeerEosLoop.java``). A lane is an input topic, an output
topic, a group and ``--slots`` processor processes with one ``transactional.id`` each;
an idempotent producer writes ``--rate`` input records/s to it.

The schedule (``plan_broker_kills``, from the seed) is a list of broker kills, one
broker down at a time: SIGKILL the JVM of the broker that is, right then, the *group
coordinator* of a lane's group, or the *transaction coordinator* of one of a lane's
``transactional.id`` s (both found with FindCoordinator, key types 0 and 1), or
another broker; restart it (same id, ports and data) after 0.5-3 s and wait until the
cluster lists it again; wait the planned gap; next kill. Every lane lives through every
kill, so the loops see the very same schedule; the report counts, per lane, how many
kills took its group coordinator and how many the transaction coordinator of one of its
processors.

At the end the kills stop, the input producers stop, and each lane waits until every
input record has an output (the drain); then every processor gets SIGTERM and an
independent read_committed confluent-kafka reader counts output copies per input record
(``eos_lanes.check_copies``): 0 duplicates and 0 missing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reliability.chaos import _PARTITIONS, _Producer, _read_ledger
from reliability.eos_lanes import Planned, _fmt_counts, _Reader, _Run, check_copies

__all__ = ["ROLES", "find_coordinators", "plan_broker_kills", "run_kafka"]

#: What a kill aims at, with weights: the group coordinator of a lane's group, the
#: transaction coordinator of one of a lane's transactional ids, any other broker.
ROLES: dict[str, int] = {"group-coordinator": 2, "txn-coordinator": 2, "other": 1}
_GROUP_KEY, _TXN_KEY = 0, 1
#: The runner's own clients (input producer, checkers): a killed broker's refused
#: connections are expected, one line per client per attempt would bury the report.
_QUIET: dict[str, object] = {"log_level": 2, "log.connection.close": False}


def plan_broker_kills(
    seed: int,
    events: int,
    *,
    lanes: int,
    slots: int,
    gap_s: float = 4.0,
) -> list[Planned]:
    """The kill schedule for ``seed``: pure, the same list for the same arguments.

    ``at`` adds up the planned gaps (the run waits for each restarted broker first, so
    real times are later); ``params``: ``role`` (a key of ``ROLES``), the ``lane`` and
    ``slot`` whose coordinator it means, ``restart_after`` (s) and ``gap`` (s before it)."""
    rng = random.Random(seed)
    roles = list(ROLES)
    out: list[Planned] = []
    at = 0.0
    for _ in range(events):
        gap = round(rng.uniform(gap_s / 2, gap_s * 1.5), 1)
        at += gap
        role = rng.choices(roles, weights=[ROLES[r] for r in roles])[0]
        params = {
            "role": role,
            "lane": rng.randrange(lanes),
            "slot": rng.randrange(slots),
            "restart_after": round(rng.uniform(0.5, 3.0), 1),
            "gap": gap,
        }
        out.append(Planned(at=round(at, 1), kind="broker-kill", params=params))
    return out


def find_coordinators(bootstrap: str, key_type: int, keys: Sequence[str]) -> dict[str, int]:
    """FindCoordinator (v4, one batch) for ``keys``: key -> node id, for the keys that
    got an answer without an error (a coordinator still loading is left out)."""
    from coopconsumer._io._client import ClientConfig, KafkaClient
    from coopconsumer._protocol.messages import FindCoordinatorRequest

    if not keys:
        return {}
    request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=tuple(keys))
    with KafkaClient(ClientConfig.from_bootstrap(bootstrap, request_timeout_ms=5000)) as client:
        response = client.request_any(request, api_version=4, timeout_ms=5000)
    return {c.key: c.node_id for c in response.coordinators if c.error_code == 0}


class _Lane(_Run):
    """One (row, loop) on the shared cluster: topics, group, slots, producer, readers."""

    def __init__(
        self, args: argparse.Namespace, row: str, impl: str, broker: Any, java: list[str]
    ) -> None:
        lane_args = argparse.Namespace(**{**vars(args), "row": row})
        super().__init__(lane_args, impl, [])
        self.broker = broker
        self.row = row
        self.java = java
        self.kills_by_role: Counter[str] = Counter()
        self.producer: _Producer | None = None
        self.inputs: _Reader | None = None
        self.outputs: _Reader | None = None
        self.drained_at: float | None = None

    @property
    def name(self) -> str:
        return f"{self.row}/{self.impl}"

    def txn_ids(self) -> list[str]:
        return [self.slot(i).txn_id for i in range(self.args.slots)]

    def start(self, index: int) -> None:
        if self.impl != "java":
            super().start(index)
            return
        slot = self.slot(index)
        slot.incarnation += 1
        slot.ledger = self.out / f"slot-{index}-{slot.incarnation}.ledger"
        slot.ledgers.append(slot.ledger)
        a = self.args
        cmd = [*self.java, "--slot", str(index), "--txn-id", slot.txn_id]
        cmd += ["--bootstrap", self.broker.bootstrap, "--group", self.group]
        cmd += ["--input", self.input, "--output", self.output, "--ledger", str(slot.ledger)]
        cmd += ["--protocol", "consumer" if self.row == "kip848" else "classic"]
        cmd += ["--session-timeout-ms", str(a.session_timeout_ms)]
        cmd += ["--txn-timeout-ms", str(a.txn_timeout_ms)]
        cmd += ["--process-sleep-s", str(a.process_sleep_s)]
        log = (self.out / f"slot-{index}-{slot.incarnation}.log").open("wb")
        slot.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        slot.stopped_until = None
        slot.restart_at = None
        slot.expected_exit = False

    def open(self) -> None:
        self.broker.create_topic(self.input, partitions=_PARTITIONS, replication_factor=3)
        self.broker.create_topic(self.output, partitions=_PARTITIONS, replication_factor=3)
        for index in range(self.args.slots):
            self.start(index)
        self.producer = _Producer(
            self.broker.bootstrap,
            self.input,
            self.args.rate,
            {"enable.idempotence": True, "acks": "all", **_QUIET},
        )
        self.producer.start()

    def open_readers(self) -> None:
        """The checkers, after the kills (12 more clients in the runner's process during
        the schedule would only load the machine: they read from the beginning anyway)."""
        self.inputs = _Reader(self.broker.bootstrap, self.input, "read_uncommitted", _QUIET)
        self.outputs = _Reader(self.broker.bootstrap, self.output, "read_committed", _QUIET)

    def terminate(self) -> None:
        """SIGTERM every processor: each commits what it holds and leaves the group."""
        for slot in self.slots.values():
            if slot.alive():
                assert slot.proc is not None
                slot.proc.send_signal(signal.SIGTERM)
                slot.expected_exit = True

    def reap(self, deadline: float) -> None:
        """Wait for the processors until ``deadline``; dump the stacks of any left,
        then SIGKILL it."""
        for slot in self.slots.values():
            if slot.proc is None:
                continue
            try:
                slot.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                # Python loops print their threads' stacks (faulthandler), Java its
                # thread dump (SIGQUIT), into the slot's log.
                slot.proc.send_signal(signal.SIGQUIT if self.impl == "java" else signal.SIGUSR1)
                time.sleep(2)
                slot.proc.kill()
                slot.proc.wait()
                self.consequences["close timed out, killed"] += 1

    def longest_silence(self) -> tuple[float, str]:
        """The longest time between two ledger lines of one process (its loop writes
        stats every 2 s: a long silence is a loop blocked), and which ledger."""
        worst, where = 0.0, ""
        for slot in self.slots.values():
            for path in slot.ledgers:
                times = [e["t"] for e in _read_ledger(path) if "t" in e]
                for a, b in itertools.pairwise(times):
                    if b - a > worst:
                        worst, where = b - a, path.name
        return round(worst, 1), where

    def exit_errors(self) -> dict[str, int]:
        """How processes that did not end by SIGTERM ended: their error, cut before the
        broker's address and timings so that equal causes count together."""
        found: Counter[str] = Counter()
        for slot in self.slots.values():
            for path in slot.ledgers:
                for event in _read_ledger(path):
                    if event["ev"] == "exit" and event.get("why") != "term":
                        text = str(event.get("error") or event.get("why"))
                        found[re.split(r" on broker | \(after |: \[", text)[0][:140]] += 1
        return dict(found)

    def committed_offsets(self) -> dict[int, int]:
        """The group's committed offset per input partition (after every processor
        stopped): a missing record below it is lost, at or above it unprocessed."""
        import confluent_kafka
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap, "log_level": 2})
        request = confluent_kafka.ConsumerGroupTopicPartitions(
            self.group,
            [confluent_kafka.TopicPartition(self.input, p) for p in range(_PARTITIONS)],
        )
        try:
            answer = admin.list_consumer_group_offsets([request])[self.group].result(30)
        except Exception:
            return {}
        return {tp.partition: tp.offset for tp in answer.topic_partitions}

    def kill_all(self) -> None:
        for slot in self.slots.values():
            if slot.alive():
                assert slot.proc is not None
                slot.proc.kill()
                slot.proc.wait()
        if self.producer is not None:
            self.producer.stopped.set()

    def evidence(self) -> dict[str, Any]:
        return {"kills_by_role": dict(self.kills_by_role)}


def _drain_all(lanes: Sequence[_Lane], deadline: float) -> None:
    """Wait until every lane's input records all have an output (or ``deadline``);
    each lane's ``drained_at`` is when its check first passed (lanes polled in turn)."""
    covered: dict[str, set[tuple[int, int]]] = {lane.name: set() for lane in lanes}
    seen = dict.fromkeys(covered, 0)
    while time.monotonic() < deadline:
        pending = [lane for lane in lanes if lane.drained_at is None]
        if not pending:
            return
        for lane in pending:
            assert lane.inputs is not None
            assert lane.outputs is not None
            for other in lanes:
                other.tick()
            lane.inputs.poll(0.2)
            lane.outputs.poll(0.3)
            for _p, _o, _k, value in lane.outputs.records[seen[lane.name] :]:
                try:
                    partition, offset, _slot = (value or b"").decode().split(":")
                    covered[lane.name].add((int(partition), int(offset)))
                except ValueError:
                    pass
            seen[lane.name] = len(lane.outputs.records)
            if (
                all((p, o) in covered[lane.name] for p, o, _k, _v in lane.inputs.records)
                and lane.inputs.caught_up()
            ):
                lane.drained_at = time.monotonic()


def _wait(lanes: Sequence[_Lane], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for lane in lanes:
            lane.tick()
        time.sleep(0.05)


def _kill_and_restart(
    cluster: Any, lanes: Sequence[_Lane], event: Planned, log: list[dict[str, Any]]
) -> None:
    """Resolve the victim of ``event``, SIGKILL it, restart it, wait until it is back."""
    p = event.params
    ids = list(cluster.node_ids)
    try:
        groups = find_coordinators(cluster.bootstrap, _GROUP_KEY, [lane.group for lane in lanes])
        txns = find_coordinators(
            cluster.bootstrap, _TXN_KEY, [t for lane in lanes for t in lane.txn_ids()]
        )
    except Exception as exc:  # a lookup that fails: the kill goes to "other"
        groups, txns = {}, {}
        log.append({"ev": "lookup failed", "error": f"{type(exc).__name__}: {exc}"})
    aimed = lanes[p["lane"] % len(lanes)]
    victim: int | None = None
    if p["role"] == "group-coordinator":
        victim = groups.get(aimed.group)
    elif p["role"] == "txn-coordinator":
        victim = txns.get(aimed.txn_ids()[p["slot"] % len(aimed.txn_ids())])
    resolved = victim is not None or p["role"] == "other"
    if victim is None:
        busy = set(groups.values()) | set(txns.values())
        others = [i for i in ids if i not in busy] or ids
        victim = random.Random(event.at).choice(others)
    roles_hit: dict[str, dict[str, int]] = {}
    for lane in lanes:
        hit = {
            "group-coordinator": int(groups.get(lane.group) == victim),
            "txn-coordinator": sum(1 for t in lane.txn_ids() if txns.get(t) == victim),
        }
        roles_hit[lane.name] = hit
        lane.kills_by_role["kills"] += 1
        if hit["group-coordinator"]:
            lane.kills_by_role["its group coordinator"] += 1
        if hit["txn-coordinator"]:
            lane.kills_by_role["a txn coordinator of its slots"] += 1
    t0 = time.monotonic()
    cluster.kill(victim)
    _wait(lanes, p["restart_after"])
    failure: list[BaseException] = []

    def restart() -> None:
        try:
            cluster.start_node(victim, timeout_s=120)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    while thread.is_alive():
        _wait(lanes, 0.2)
    log.append(
        {
            "ev": "broker-kill",
            "t": t0,
            "role": p["role"],
            "aimed_at": aimed.name,
            "victim": victim,
            "resolved": resolved,
            "down_s": round(time.monotonic() - t0, 1),
            "roles_hit": roles_hit,
            "restart_failed": repr(failure[0]) if failure else None,
        }
    )
    if failure:
        raise RuntimeError(f"node {victim} did not come back: {failure[0]!r}")


def run_kafka(args: argparse.Namespace, rows: Sequence[str], impls: Sequence[str]) -> int:
    """Run every (row, loop) lane on one 3-node cluster through one kill schedule;
    print the figures, write JSON (and a PNG) under ``--results``; 1 when a coop lane
    has a duplicate or a missing record."""
    from coopconsumer.testing import kafka_cluster
    from reliability.java_loop import java_loop_argv

    java = java_loop_argv() if "java" in impls else []
    lanes_n = len(rows) * len(impls)
    schedule = plan_broker_kills(args.seed, args.events, lanes=lanes_n, slots=args.slots)
    load0 = os.getloadavg()
    print(
        f"exactly-once chaos on Apache Kafka, 3 nodes: seed {args.seed}, "
        f"{len(schedule)} broker kills "
        f"({_fmt_counts(Counter(e.params['role'] for e in schedule))}), lanes "
        f"{', '.join(f'{r}/{i}' for r in rows for i in impls)}, {args.slots} slots each, "
        f"{args.rate:.0f} input records/s each; load average "
        f"{' '.join(f'{x:.2f}' for x in load0)}",
        flush=True,
    )
    started = time.monotonic()
    log: list[dict[str, Any]] = []
    stopped_early: str | None = None
    with kafka_cluster(3, broker_config={"min.insync.replicas": "2"}) as cluster:
        version = cluster.version
        lanes = [_Lane(args, row, impl, cluster, java) for row in rows for impl in impls]
        try:
            for lane in lanes:
                lane.open()
            _wait(lanes, args.warmup_s)
            deadline = started + args.max_minutes * 60 if args.max_minutes else None
            kills = 0
            try:
                for event in schedule:
                    if deadline is not None and time.monotonic() > deadline:
                        stopped_early = (
                            f"--max-minutes {args.max_minutes} reached after {kills} kills"
                        )
                        break
                    _wait(lanes, event.params["gap"])
                    _kill_and_restart(cluster, lanes, event, log)
                    kills += 1
                    last = log[-1]
                    print(
                        f"  kill {kills}: node {last['victim']} ({last['role']} of "
                        f"{last['aimed_at']}{'' if last['resolved'] else ', unresolved'}), back "
                        f"after {last['down_s']} s; load "
                        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
                        flush=True,
                    )
            except Exception as exc:
                stopped_early = f"stopped: {exc}"
            chaos_end = time.monotonic()
            for lane in lanes:
                assert lane.producer is not None
                lane.producer.stopped.set()
            for lane in lanes:
                assert lane.producer is not None
                lane.producer.join(90)
            for lane in lanes:
                lane.open_readers()
            _drain_all(lanes, chaos_end + args.drain_s)
            for lane in lanes:
                if lane.drained_at is not None:
                    lane.drained_at -= chaos_end
            for lane in lanes:
                lane.terminate()
            close_deadline = time.monotonic() + 60  # a clean close takes seconds
            for lane in lanes:
                lane.reap(close_deadline)
            results: list[dict[str, Any]] = []
            for lane in lanes:
                assert lane.inputs is not None
                assert lane.outputs is not None
                assert lane.producer
                lane.inputs.read_to_end(30)
                complete = lane.outputs.read_to_end(60)
                lane.inputs.close()
                lane.outputs.close()
                copies = check_copies(
                    {(p, o): k for p, o, k, _v in lane.inputs.records},
                    [(k, v) for _p, _o, k, v in lane.outputs.records],
                )
                committed = lane.committed_offsets()
                lost = [(p, o) for p, o in copies.missing if o < committed.get(p, -1)]
                results.append(
                    {
                        "row": lane.row,
                        "lost": lost,
                        "committed_known": bool(committed),
                        "impl": lane.impl,
                        "copies": copies,
                        "input_acked": len(lane.producer.acked),
                        "input_failed": lane.producer.failed,
                        "output_read_to_end": complete,
                        "drain_s": lane.drained_at,
                        "consequences": dict(lane.consequences),
                        "stats": lane.member_stats(),
                        "evidence": lane.evidence(),
                        "processes": sum(s.incarnation for s in lane.slots.values()),
                        "longest_silence": lane.longest_silence(),
                        "exit_errors": lane.exit_errors(),
                        "out": str(lane.out),
                    }
                )
        finally:
            for lane in lanes:  # an interrupted run leaves no processor behind
                lane.kill_all()

    load1 = os.getloadavg()
    wall = time.monotonic() - started
    kills_done = sum(1 for e in log if e["ev"] == "broker-kill")
    print(_report(results, kills_done, log, version, load0, load1, wall, stopped_early))
    print(
        f"replay: python -m reliability.eos_chaos --broker kafka --row {args.row} "
        f"--impl {args.impl} --seed {args.seed} --events {args.events} --slots {args.slots}"
    )
    _write_results(args, results, log, version, load0, load1, wall, stopped_early)
    bad = any(r["copies"].duplicated or r["copies"].missing for r in results if r["impl"] == "coop")
    return 1 if bad else 0


def _report(
    results: Sequence[dict[str, Any]],
    kills: int,
    log: Sequence[dict[str, Any]],
    version: str,
    load0: tuple[float, float, float],
    load1: tuple[float, float, float],
    wall: float,
    stopped_early: str | None,
) -> str:
    roles = Counter(e["role"] for e in log if e["ev"] == "broker-kill")
    unresolved = sum(1 for e in log if e["ev"] == "broker-kill" and not e["resolved"])
    down = sorted(e["down_s"] for e in log if e["ev"] == "broker-kill")
    lines = [
        "",
        f"Apache Kafka {version}, 3 nodes; {kills} broker SIGKILLs+restarts "
        f"(aimed: {_fmt_counts(roles)}; {unresolved} aimed at a coordinator FindCoordinator "
        f"did not name, killed another broker); down per kill (kill to listed again) "
        f"median {down[len(down) // 2] if down else 0} s, max {down[-1] if down else 0} s; "
        f"wall {wall:.0f} s; load average at start {' '.join(f'{x:.2f}' for x in load0)}, "
        f"at end {' '.join(f'{x:.2f}' for x in load1)}",
    ]
    if stopped_early:
        lines.append(f"SCHEDULE CUT SHORT: {stopped_early}")
    head = (
        f"{'row':<8} {'loop':<5} {'kills':>5} {'its GC':>6} {'its TC':>6} {'inputs':>7} "
        f"{'outputs':>7} {'dups':>5} {'missing':>7} {'lost':>5} {'aborts':>6} {'procs':>5} "
        f"{'drain s':>8} {'stall s':>7}"
    )
    lines += [head, "-" * len(head)]
    for r in results:
        c = r["copies"]
        k = r["evidence"]["kills_by_role"]
        drain = "-" if r["drain_s"] is None else f"{r['drain_s']:.1f}"
        lines.append(
            f"{r['row']:<8} {r['impl']:<5} {k.get('kills', 0):>5} "
            f"{k.get('its group coordinator', 0):>6} "
            f"{k.get('a txn coordinator of its slots', 0):>6} {c.inputs:>7} {c.outputs:>7} "
            f"{len(c.duplicated):>5} {len(c.missing):>7} "
            f"{len(r['lost']) if r['committed_known'] else '?':>5} "
            f"{sum(r['stats']['aborts'].values()):>6} {r['processes']:>5} {drain:>8} "
            f"{r['longest_silence'][0]:>7}"
        )
    lines.append(
        "its GC / its TC: kills of the broker that was the lane's group coordinator / the "
        "transaction coordinator of at least one of its processors (FindCoordinator just "
        "before the kill); dups/missing: input records with >1 / 0 copies in the output "
        "(read_committed); lost: missing ones below the group's committed offset at the end "
        "(a commit passed them: a loss), the rest of the missing were not processed by "
        "the end (a stalled loop); aborts: transactions the processors aborted; procs: processes "
        "started (a fatal error restarts the slot); drain s: from the last kill's restart "
        "until every input record had an output; stall s: the longest silence of one "
        "process's ledger (its loop writes stats every 2 s, so a long one is a loop "
        "that did not come back)"
    )
    for r in results:
        c = r["copies"]
        extra = []
        if r["consequences"]:
            extra.append(f"consequences {_fmt_counts(r['consequences'])}")
        if r["stats"]["aborts"]:
            extra.append(f"aborts {_fmt_counts(r['stats']['aborts'])}")
        extra.append(f"endings {_fmt_counts(r['stats']['endings'])}")
        if r["exit_errors"]:
            extra.append(f"exits {_fmt_counts(r['exit_errors'])}")
        if c.duplicated:
            extra.append("duplicate " + ", ".join(f"{p}:{o}" for p, o in c.duplicated[:5]))
        if c.missing:
            extra.append("missing " + ", ".join(f"{p}:{o}" for p, o in c.missing[:5]))
        if not r["output_read_to_end"]:
            extra.append("OUTPUT NOT READ TO ITS END")
        lines.append(f"  {r['row']}/{r['impl']}: " + "; ".join(extra))
    return "\n".join(lines)


def _write_results(
    args: argparse.Namespace,
    results: Sequence[dict[str, Any]],
    log: Sequence[dict[str, Any]],
    version: str,
    load0: tuple[float, float, float],
    load1: tuple[float, float, float],
    wall: float,
    stopped_early: str | None,
) -> None:
    """JSON of every figure and the kill log, and a PNG: per lane, duplicates and
    missing (bars) beside the kills it lived through."""
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"eos-chaos-kafka-seed{args.seed}"
    doc = {
        "kafka_version": version,
        "seed": args.seed,
        "events_planned": args.events,
        "stopped_early": stopped_early,
        "load_average_start": load0,
        "load_average_end": load1,
        "nproc": os.cpu_count(),
        "wall_s": round(wall, 1),
        "lanes": [
            {
                **{k: v for k, v in r.items() if k not in ("copies", "lost")},
                "inputs": r["copies"].inputs,
                "outputs": r["copies"].outputs,
                "duplicates": len(r["copies"].duplicated),
                "extra_copies": r["copies"].extra_copies,
                "missing": len(r["copies"].missing),
                "lost": len(r["lost"]) if r["committed_known"] else None,
                "naming_no_input": r["copies"].unknown,
            }
            for r in results
        ],
        "kills": list(log),
    }
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1, default=str))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    names = [f"{r['row']}/{r['impl']}" for r in results]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    xs = range(len(names))
    kills = [r["evidence"]["kills_by_role"].get("kills", 0) for r in results]
    gc = [r["evidence"]["kills_by_role"].get("its group coordinator", 0) for r in results]
    tc = [r["evidence"]["kills_by_role"].get("a txn coordinator of its slots", 0) for r in results]
    left.bar([x - 0.25 for x in xs], kills, 0.25, label="broker kills")
    left.bar(list(xs), gc, 0.25, label="of its group coordinator")
    left.bar([x + 0.25 for x in xs], tc, 0.25, label="of a txn coordinator of its slots")
    left.set_xticks(list(xs), names, rotation=30, ha="right")
    left.set_title("kills each lane lived through")
    left.legend(fontsize=8)
    dups = [len(r["copies"].duplicated) for r in results]
    missing = [len(r["copies"].missing) for r in results]
    right.bar([x - 0.2 for x in xs], dups, 0.4, label="duplicates")
    right.bar([x + 0.2 for x in xs], missing, 0.4, label="missing")
    right.set_xticks(list(xs), names, rotation=30, ha="right")
    right.set_ylim(bottom=0, top=max(1, *dups, *missing) * 1.2)
    right.set_title("read_committed check (must be 0)")
    right.legend(fontsize=8)
    fig.suptitle(
        f"Kafka {version}, 3 nodes, seed {args.seed}; load "
        f"{' '.join(f'{x:.1f}' for x in load0)} -> {' '.join(f'{x:.1f}' for x in load1)}"
    )
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=90)
    plt.close(fig)
