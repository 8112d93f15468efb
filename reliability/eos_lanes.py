"""The machinery every exactly-once chaos run shares: the schedule's events
(``Planned``), the copy checker (``check_copies``), the processor slots, the independent
``read_committed`` reader, and one run of a schedule through one loop (``_Run``, which
reliability/eos_kafka.py extends for the Kafka cluster). The Tansu and mock schedules
and the command line are in reliability/eos_chaos.py."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from reliability.chaos import _PARTITIONS, _Producer, _read_ledger
from reliability.eos_member import EXIT_FATAL

__all__ = ["Copies", "Planned", "check_copies"]

_OUT = "/tmp/coopconsumer-eos-chaos"

# Kafka API keys and error codes.
_PRODUCE, _FETCH, _OFFSET_FETCH, _HEARTBEAT = 0, 1, 9, 12
_ADD_PARTITIONS, _ADD_OFFSETS, _END_TXN, _TXN_OFFSET_COMMIT = 24, 25, 26, 28
_CONSUMER_GROUP_HEARTBEAT = 68
_TXN_APIS = (_ADD_PARTITIONS, _ADD_OFFSETS, _END_TXN, _TXN_OFFSET_COMMIT)
_DROP = -195  # librdkafka's _TRANSPORT: hang up instead of answering
#: Retried inside librdkafka: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
#: NOT_COORDINATOR, CONCURRENT_TRANSACTIONS.
_RETRIABLE = (14, 15, 16, 51)
_UNKNOWN_TOPIC_OR_PARTITION = 3
#: Abortable on TxnOffsetCommit: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
#: REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID. (Not TRANSACTION_ABORTABLE on EndTxn: an
#: injected error goes to the next EndTxn, which may be an abort, and Kafka never
#: answers an abort so.)
_ABORTABLE_TXN_OFFSET_COMMIT = (22, 25, 27, 82)
_INVALID_PRODUCER_EPOCH, _PRODUCER_FENCED = 47, 90

_ERROR_NAMES = {
    0: "NONE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    22: "ILLEGAL_GENERATION",
    25: "UNKNOWN_MEMBER_ID",
    27: "REBALANCE_IN_PROGRESS",
    47: "INVALID_PRODUCER_EPOCH",
    51: "CONCURRENT_TRANSACTIONS",
    82: "FENCED_INSTANCE_ID",
    90: "PRODUCER_FENCED",
    _DROP: "DROP_CONNECTION",
}


# ---------------------------------------------------------------------- the schedule


@attrs.frozen(kw_only=True)
class Planned:
    """One event of the schedule: ``at`` seconds after the schedule starts, ``kind``,
    the slot it targets (None: the broker), and its parameters."""

    at: float
    kind: str
    slot: int | None = None
    params: Mapping[str, Any] = attrs.field(factory=dict)

    def describe(self) -> str:
        target = "" if self.slot is None else f" slot {self.slot}"
        extra = " ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.at:7.1f}s {self.kind}{target} {extra}".rstrip()


# ---------------------------------------------------------------------- the checker


@attrs.frozen(kw_only=True)
class Copies:
    """Copies per input record, as the output topic holds them."""

    inputs: int
    outputs: int
    duplicated: tuple[tuple[int, int], ...]  # input records written more than once
    extra_copies: int
    missing: tuple[tuple[int, int], ...]
    unknown: int  # outputs that name no input record
    repeated_keys: int  # input records whose key another input record has too
    duplicate_writers: Mapping[str, int]  # "slot a+slot b" -> duplicated records


def check_copies(
    inputs: Mapping[tuple[int, int], bytes | None],
    outputs: Sequence[tuple[bytes | None, bytes | None]],
) -> Copies:
    """Count, per input record ``(partition, offset) -> key``, the output records
    ``(key, value)`` naming it (value ``partition:offset:slot``)."""
    copies: Counter[tuple[int, int]] = Counter()
    writers: dict[tuple[int, int], list[str]] = {}
    unknown = 0
    for key, value in outputs:
        try:
            partition, offset, slot = (value or b"").decode().split(":")
            ident = (int(partition), int(offset))
        except ValueError:
            unknown += 1
            continue
        if ident not in inputs or inputs[ident] != key:
            unknown += 1
            continue
        copies[ident] += 1
        writers.setdefault(ident, []).append(slot)
    duplicated = tuple(sorted(i for i, n in copies.items() if n > 1))
    by_writers: Counter[str] = Counter(
        "+".join(f"slot {s}" for s in sorted(writers[i])) for i in duplicated
    )
    keys = Counter(inputs.values())
    return Copies(
        inputs=len(inputs),
        outputs=len(outputs),
        duplicated=duplicated,
        extra_copies=sum(copies[i] - 1 for i in duplicated),
        missing=tuple(sorted(i for i in inputs if copies[i] == 0)),
        unknown=unknown,
        repeated_keys=sum(n for n in keys.values() if n > 1),
        duplicate_writers=dict(by_writers),
    )


# ---------------------------------------------------------------------- processes


@attrs.define
class _Slot:
    index: int
    txn_id: str
    proc: subprocess.Popen[bytes] | None = None
    ledger: Path | None = None
    incarnation: int = 0
    stopped_until: float | None = None
    restart_at: float | None = None
    expected_exit: bool = False  # SIGKILL or SIGTERM sent: its exit is no surprise
    ledgers: list[Path] = attrs.field(factory=list)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def running(self) -> bool:
        return self.alive() and self.stopped_until is None and not self.expected_exit


#: How long a SIGKILL waits for its target to be inside its process step.
_KILL_AIM_S = 3.0


def _in_batch(ledger: Path) -> bool:
    """Whether the ledger's last batch line says the process is inside its process
    step (it wrote ``batch`` and not yet ``batch_done``)."""
    try:
        with ledger.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 2048))
            tail = f.read().decode(errors="replace")
    except OSError:
        return False
    started, done = tail.rfind('"ev":"batch"'), tail.rfind('"ev":"batch_done"')
    return started > done


class _Reader:
    """A confluent-kafka consumer assigned every partition of ``topic`` from the
    beginning, outside any group."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        isolation: str,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        import confluent_kafka

        self._ck = confluent_kafka
        self._consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"eos-check-{os.getpid()}-{topic}",
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "metadata.recovery.strategy": "none",
                **(extra or {}),
            }
        )
        self._topic = topic
        self._consumer.assign(
            [confluent_kafka.TopicPartition(topic, p, 0) for p in range(_PARTITIONS)]
        )
        self.records: list[tuple[int, int, bytes | None, bytes | None]] = []

    def poll(self, seconds: float) -> int:
        """Read for up to ``seconds`` (less when nothing comes for 0.3 s)."""
        deadline = time.monotonic() + seconds
        got = 0
        while time.monotonic() < deadline:
            batch = self._consumer.consume(1000, 0.3)
            if not batch:
                break
            for m in batch:
                partition: Any = m.partition()
                offset: Any = m.offset()
                if m.error() is None:
                    self.records.append((partition, offset, m.key(), m.value()))
                    got += 1
        return got

    def caught_up(self) -> bool:
        """Every partition's position is at its high watermark (read_committed: every
        transaction below it has ended)."""
        tps = [self._ck.TopicPartition(self._topic, p) for p in range(_PARTITIONS)]
        positions = {tp.partition: tp.offset for tp in self._consumer.position(tps)}
        for p in range(_PARTITIONS):
            _low, high = self._consumer.get_watermark_offsets(
                self._ck.TopicPartition(self._topic, p), timeout=5, cached=False
            )
            if high > 0 and positions.get(p, -1) < high:
                return False
        return True

    def read_to_end(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.poll(1.0)
            if self.caught_up():
                self.poll(0.5)
                return True
        return False

    def close(self) -> None:
        self._consumer.close()


class _Run:
    """One pass of the schedule through one implementation on a fresh broker."""

    def __init__(self, args: argparse.Namespace, impl: str, schedule: list[Planned]) -> None:
        from coopconsumer.testing import unique_name

        self.args = args
        self.impl = impl
        self.schedule = schedule
        self.out = Path(args.out) / f"{args.row}-{impl}"
        self.out.mkdir(parents=True, exist_ok=True)
        for old in self.out.glob("*"):
            old.unlink()
        self.input = unique_name("eos-in")
        self.output = unique_name("eos-out")
        self.group = unique_name("eos-group")
        run_id = unique_name("eos")
        self.slots: dict[int, _Slot] = {}
        self.run_id = run_id
        self.log: list[dict[str, Any]] = []
        self.applied: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.consequences: Counter[str] = Counter()
        self.kills_in_batch = 0
        self.broker: Any = None
        self.undo: list[tuple[float, str, Any]] = []  # (when, what, arg)

    # -------------------------------------------------------------- processes

    def record(self, event: str, **fields: Any) -> None:
        self.log.append({"t": time.monotonic(), "ev": event, **fields})

    def slot(self, index: int) -> _Slot:
        if index not in self.slots:
            self.slots[index] = _Slot(index=index, txn_id=f"{self.run_id}-slot-{index}")
        return self.slots[index]

    def start(self, index: int) -> None:
        slot = self.slot(index)
        slot.incarnation += 1
        slot.ledger = self.out / f"slot-{index}-{slot.incarnation}.ledger"
        slot.ledgers.append(slot.ledger)
        a = self.args
        cmd = [sys.executable, "-m", "reliability.eos_member", "--impl", self.impl]
        cmd += ["--slot", str(index), "--txn-id", slot.txn_id]
        cmd += ["--bootstrap", self.broker.bootstrap, "--group", self.group]
        cmd += ["--input", self.input, "--output", self.output, "--ledger", str(slot.ledger)]
        cmd += ["--protocol", "consumer" if a.row == "kip848" else "classic"]
        cmd += ["--session-timeout-ms", str(a.session_timeout_ms)]
        cmd += ["--txn-timeout-ms", str(a.txn_timeout_ms)]
        cmd += ["--commit-interval-ms", str(a.commit_interval_ms)]
        cmd += ["--process-sleep-s", str(a.process_sleep_s)]
        log = (self.out / f"slot-{index}-{slot.incarnation}.log").open("wb")
        slot.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        slot.stopped_until = None
        slot.restart_at = None
        slot.expected_exit = False

    def kill(self, slot: _Slot) -> None:
        """SIGKILL, preferably while the process is inside its process step (its open
        transaction holds records that reached the broker): waits up to
        ``_KILL_AIM_S`` for that."""
        assert slot.proc is not None
        assert slot.ledger is not None
        deadline = time.monotonic() + _KILL_AIM_S
        inside = _in_batch(slot.ledger)
        while not inside and time.monotonic() < deadline:
            self.tick()
            time.sleep(0.005)
            inside = _in_batch(slot.ledger)
        slot.proc.kill()
        slot.proc.wait()
        slot.expected_exit = True
        slot.stopped_until = None
        if inside and _in_batch(slot.ledger):
            self.kills_in_batch += 1

    def tick(self) -> None:
        """Follow-ups that are due: SIGCONT, restarts, faults to undo, exits."""
        now = time.monotonic()
        for slot in self.slots.values():
            if slot.stopped_until is not None and now >= slot.stopped_until and slot.proc:
                slot.proc.send_signal(signal.SIGCONT)
                slot.stopped_until = None
                self.record("cont", slot=slot.index)
            if slot.restart_at is not None and now >= slot.restart_at:
                self.start(slot.index)
                self.record("restart", slot=slot.index)
            if slot.proc is not None and not slot.expected_exit and slot.proc.poll() is not None:
                code = slot.proc.returncode
                self.consequences[
                    "fatal exit, slot restarted"
                    if code == EXIT_FATAL
                    else f"exit code {code}, slot restarted"
                ] += 1
                self.record("exited", slot=slot.index, code=code)
                slot.expected_exit = True
                slot.restart_at = now + 1.0
        for item in [u for u in self.undo if u[0] <= now]:
            self.undo.remove(item)
            _when, what, arg = item
            if what == "delay":
                self.broker.proxy.set_response_delay(0)
            elif what == "broker-up":
                self.broker.set_broker_up(arg)
            self.record(f"undo {what}")

    # -------------------------------------------------------------- events

    def apply(self, event: Planned) -> None:
        kind, p = event.kind, event.params
        broker = self.broker
        if event.slot is not None and kind != "scale-out":
            slot = self.slots.get(event.slot)
            if slot is None or not slot.running():
                self.skipped[kind] += 1
                self.record("skipped", kind=kind, slot=event.slot)
                return
            if kind in ("kill", "kill-late"):
                self.kill(slot)
                slot.restart_at = time.monotonic() + p["restart_after"]
            elif kind in ("zombie", "pause"):
                assert slot.proc is not None
                slot.proc.send_signal(signal.SIGSTOP)
                slot.stopped_until = time.monotonic() + p["seconds"]
            elif kind == "scale-in":
                assert slot.proc is not None
                slot.proc.send_signal(signal.SIGTERM)
                slot.expected_exit = True
        elif kind == "scale-out":
            assert event.slot is not None
            existing = self.slots.get(event.slot)
            if existing is not None and (existing.alive() or existing.restart_at is not None):
                self.skipped[kind] += 1
                return
            self.start(event.slot)
        elif kind == "coordinator-move":
            if self.args.row == "classic":
                which = p["which"]
                broker.proxy.move_coordinators(
                    p["seconds"], group=which != "transaction", transaction=which != "group"
                )
            else:
                broker.set_coordinator(self.group, broker.broker_ids[p["broker"]])
        elif kind in ("txn-retriable", "txn-abortable", "fatal", "conn-cut", "heartbeat-retriable"):
            broker_or_proxy = broker.proxy if self.args.row == "classic" else broker
            broker_or_proxy.push_request_errors(p["api"], p["codes"])
        elif kind == "endtxn-lost":
            broker.proxy.push_response_errors(p["api"], p["codes"])
        elif kind == "slow-answers":
            broker.proxy.set_response_delay(p["delay"])
            self.undo.append((time.monotonic() + p["seconds"], "delay", None))
        elif kind == "broker-down":
            broker_id = broker.broker_ids[p["broker"]]
            broker.set_broker_down(broker_id)
            self.undo.append((time.monotonic() + p["seconds"], "broker-up", broker_id))
        self.applied[kind] += 1
        self.record("event", kind=kind, slot=event.slot, params=dict(p))

    def stop_faults(self) -> None:
        for slot in self.slots.values():
            if slot.stopped_until is not None:
                slot.stopped_until = time.monotonic()
            if slot.restart_at is not None:
                slot.restart_at = time.monotonic()
        self.undo = [(0.0, what, arg) for _w, what, arg in self.undo]
        self.tick()
        if self.args.row == "classic":
            proxy = self.broker.proxy
            proxy.clear_request_errors()
            proxy.set_response_delay(0)
            proxy.move_coordinators(0)
        else:
            for api in (*_TXN_APIS, _PRODUCE, _FETCH, _CONSUMER_GROUP_HEARTBEAT):
                self.broker.clear_request_errors(api)

    # -------------------------------------------------------------- the run

    def broker_context(self) -> Any:
        from coopconsumer.testing import embedded_broker

        if self.args.row == "classic":
            return embedded_broker("tansu", transactions=True)
        return embedded_broker("mock", num_brokers=3)

    def run(self) -> dict[str, Any]:
        a = self.args
        started = time.monotonic()
        stall: dict[str, Any] | None = None
        with self.broker_context() as broker:
            self.broker = broker
            if a.row == "kip848":
                broker.start_request_tracking()
            broker.create_topic(self.input, partitions=_PARTITIONS)
            broker.create_topic(self.output, partitions=_PARTITIONS)
            initial = a.initial_slots if a.row == "classic" else 1
            for index in range(initial):
                self.start(index)
            # Idempotent: a retried batch is never written twice.
            producer = _Producer(
                broker.bootstrap,
                self.input,
                a.rate,
                {"enable.idempotence": True, "metadata.recovery.strategy": "none"},
            )
            producer.start()
            inputs = _Reader(broker.bootstrap, self.input, "read_uncommitted")
            outputs = _Reader(broker.bootstrap, self.output, "read_committed")
            try:
                time.sleep(a.warmup_s)
                t0 = time.monotonic()
                for event in self.schedule:
                    while time.monotonic() < t0 + event.at:
                        self.tick()
                        time.sleep(0.05)
                    self.apply(event)
                chaos_end = time.monotonic()
                self.stop_faults()
                while sum(1 for s in self.slots.values() if s.running()) < 2 and a.row == "classic":
                    free = min(i for i in range(100) if not self.slot(i).alive())
                    self.start(free)
                    self.record("settle-start", slot=free)
                producer.stopped.set()
                producer.join(90)
                drained = self.drain(inputs, outputs, chaos_end)
                if drained is None:
                    stall = self.probe_stall()
            finally:
                for slot in self.slots.values():
                    if slot.alive():
                        assert slot.proc is not None
                        slot.proc.send_signal(signal.SIGCONT)
                        slot.proc.send_signal(signal.SIGTERM)
                        slot.expected_exit = True
                for slot in self.slots.values():
                    if slot.proc is None:
                        continue
                    try:
                        slot.proc.wait(60)
                    except subprocess.TimeoutExpired:
                        slot.proc.kill()
                        slot.proc.wait()
                        self.consequences["close timed out, killed"] += 1
                producer.stopped.set()
            inputs.read_to_end(30)
            complete = outputs.read_to_end(60)
            inputs.close()
            outputs.close()
            evidence = self.evidence()
        copies = check_copies(
            {(p, o): k for p, o, k, _v in inputs.records},
            [(k, v) for _p, _o, k, v in outputs.records],
        )
        figures = {
            "row": a.row,
            "impl": self.impl,
            "seed": a.seed,
            "applied": dict(self.applied),
            "skipped": dict(self.skipped),
            "consequences": dict(self.consequences),
            "kills_in_batch": self.kills_in_batch,
            "input_sent": producer.sent,
            "input_acked": len(producer.acked),
            "input_failed": producer.failed,
            "copies": copies,
            "drain_s": None if drained is None else drained - chaos_end,
            "output_read_to_end": complete,
            "stats": self.member_stats(),
            "evidence": evidence,
            "stall": stall,
            "slots_used": len(self.slots),
            "processes": sum(s.incarnation for s in self.slots.values()),
            "wall_s": time.monotonic() - started,
            "out": str(self.out),
        }
        (self.out / "runner.json").write_text(json.dumps(self.log))
        return figures

    def drain(self, inputs: _Reader, outputs: _Reader, chaos_end: float) -> float | None:
        """Wait until every input record has an output; when it did, or None."""
        deadline = chaos_end + self.args.drain_s
        covered: set[tuple[int, int]] = set()
        seen = 0
        while time.monotonic() < deadline:
            self.tick()
            inputs.poll(0.5)
            outputs.poll(1.0)
            for _p, _o, _k, value in outputs.records[seen:]:
                try:
                    partition, offset, _slot = (value or b"").decode().split(":")
                    covered.add((int(partition), int(offset)))
                except ValueError:
                    pass
            seen = len(outputs.records)
            if all((p, o) in covered for p, o, _k, _v in inputs.records) and inputs.caught_up():
                return time.monotonic()
        return None

    def probe_stall(self) -> dict[str, Any]:
        """The group did not drain: is it stuck in its members or in the broker? Kill
        every member, then let a fresh confluent-kafka consumer join the group and
        another a new group on the same topic (as reliability/tansu_wedge_probe.py)."""
        import confluent_kafka

        found: dict[str, Any] = {}
        if self.args.row == "classic":
            stats = self.broker.proxy.stats
            found["oldest_unanswered"] = (
                round(stats.oldest_unanswered_s, 1),
                stats.oldest_unanswered_api,
            )
        for slot in self.slots.values():
            if slot.alive():
                assert slot.proc is not None
                slot.proc.kill()
                slot.proc.wait()
            slot.expected_exit = True
            slot.restart_at = None
        time.sleep(self.args.session_timeout_ms / 1000 + 1)
        probes = {}
        for name, group in (("same group", self.group), ("new group", self.group + "-probe")):
            probe = confluent_kafka.Consumer(
                {
                    "bootstrap.servers": self.broker.bootstrap,
                    "group.id": group,
                    "session.timeout.ms": self.args.session_timeout_ms,
                    "enable.auto.commit": False,
                    "metadata.recovery.strategy": "none",
                }
            )
            probe.subscribe([self.input])
            probes[name] = probe
        deadline = time.monotonic() + 30
        got: dict[str, float | None] = dict.fromkeys(probes)
        t0 = time.monotonic()
        while time.monotonic() < deadline and None in got.values():
            for name, probe in probes.items():
                probe.poll(0.1)
                if got[name] is None and probe.assignment():
                    got[name] = round(time.monotonic() - t0, 1)
        for probe in probes.values():
            probe.close()
        found["probe_assigned_after_s"] = got
        self.record("stall-probe", **found)
        return found

    def member_stats(self) -> dict[str, Any]:
        """Summed over every process: the final stats (the last 2-s snapshot for a
        killed one), aborts by reason, and how each process ended."""
        totals: Counter[str] = Counter()
        aborts: Counter[str] = Counter()
        endings: Counter[str] = Counter()
        for slot in self.slots.values():
            for path in slot.ledgers:
                events = _read_ledger(path)
                last = next((e for e in reversed(events) if e["ev"] in ("exit", "stats")), None)
                ending = next((e for e in reversed(events) if e["ev"] == "exit"), None)
                endings[ending["why"] if ending else "killed"] += 1
                if last is None or not last.get("stats"):
                    continue
                stats = last["stats"]
                for key, value in stats.items():
                    if isinstance(value, int):
                        totals[key] += value
                aborts.update(stats.get("aborts", {}))
        return {"totals": dict(totals), "aborts": dict(aborts), "endings": dict(endings)}

    def evidence(self) -> dict[str, Any]:
        if self.args.row != "classic":
            requests = Counter(r.api_key for r in self.broker.requests())
            return {"txn_offset_commits_at_mock": requests.get(_TXN_OFFSET_COMMIT, 0)}
        proxy = self.broker.proxy
        commits = proxy.txn_offset_commits
        (self.out / "txn_offset_commits.json").write_text(
            json.dumps([attrs.asdict(c) for c in commits])
        )
        fenced = Counter(
            _ERROR_NAMES.get(c.error_code, str(c.error_code)) for c in commits if c.fenced_by_proxy
        )
        answers = Counter(_ERROR_NAMES.get(c.error_code, str(c.error_code)) for c in commits)
        stats = proxy.stats
        return {
            "txn_offset_commits": len(commits),
            "answers": dict(answers),
            "fenced_by_proxy": dict(fenced),
            "without_generation": sum(1 for c in commits if c.generation_id < 0),
            "below_v3": sum(1 for c in commits if c.api_version < 3),
            "timed_out_transactions": len(proxy.timed_out_transactions),
            "failures": list(proxy.failures),
            "faults_applied": dict(stats.faults_applied),
            "find_coordinator_requests": stats.requests.get(10, 0),
            "requests": sum(stats.requests.values()),
        }


# ---------------------------------------------------------------------- reporting


def _fmt_counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"
