"""Exactly-once chaos run: input topic -> N processor processes -> output topic, under a
seeded schedule of faults, checked by an independent read_committed reader.

    python -m reliability.eos_chaos --events 30 --seed 3401     # Kafka, 3 nodes, broker kills
    python -m reliability.eos_chaos --broker tansu --seed 2511   # classic row, both loops (~4 min)
    python -m reliability.eos_chaos --broker tansu --events 100 --gap-s 3.5  # ~12 min
    python -m reliability.eos_chaos --broker tansu --row kip848 --seed 2511  # consumer protocol
    python -m reliability.eos_chaos --broker tansu --quick --impl coop       # a CI-size look

``--broker kafka`` (the default) runs every loop (coopconsumer, raw confluent-kafka,
Java) in both rows at once on a 3-node Apache Kafka cluster through a schedule of
broker SIGKILLs aimed at group and transaction coordinators: reliability/eos_kafka.py.
What follows describes ``--broker tansu``.

Each processor process (``reliability/eos_member.py``) copies every input record to one
output record in transactions, with a ``transactional.id`` per process *slot* (a slot
restarted after a crash or a fatal error reuses it, as docs/exactly-once.md
recommends). ``--impl coop`` runs ``coopconsumer.TransactionalProcessor``, ``raw`` the
same loop written with confluent-kafka alone (librdkafka's KIP-447 example); ``both``
runs the same schedule (same seed) through each, one after the other, each on a fresh
broker, and prints them side by side.

Rows (what each can verify: reliability/README.md):

* ``classic`` (the main row): Tansu behind coopconsumer's transactions proxy
  (``embedded_broker("tansu", transactions=True)``), cooperative-sticky classic group,
  3 to 5 slots. Events: SIGKILL while transactions are open (restarted after 0.5-4 s,
  or only after the transaction timeout so that the proxy aborts what was left open),
  SIGSTOP past the session timeout (a zombie whose offsets must be fenced), short
  SIGSTOPs, scale out (a new slot joins) and in (SIGTERM, a clean close), coordinator
  moves, transaction-coordinator errors (retriable ones, abortable ones such as
  ILLEGAL_GENERATION on TxnOffsetCommit, lost EndTxn answers, fatal
  INVALID_PRODUCER_EPOCH: the process exits and its slot restarts), slow answers and
  single cut connections.
* ``kip848``: librdkafka's mock cluster (3 brokers), ``group.protocol=consumer``, one
  long-lived processor: the mock keeps no transactional offsets, so nothing may make a
  partition change hands; events are short SIGSTOPs, retriable transaction and
  heartbeat errors, group coordinator moves, brokers down for 2-6 s and cut connections.

The schedule is planned from ``random.Random(seed)`` before anything starts (``plan``),
against a model of the slots, so both loops get the very same events. At the end the
faults stop, every slot is running, the input producer stops, and the run waits until
every input record has an output (the drain); then every processor is closed and a
read_committed confluent-kafka consumer reads the whole output topic. Each output record
names its input record (partition and offset), so the check counts copies per input
record: duplicates and missing must both be 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from reliability.chaos import _PARTITIONS, _Producer, _read_ledger
from reliability.eos_member import EXIT_FATAL

__all__ = ["Planned", "check_copies", "main", "plan"]

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


_CLASSIC_WEIGHTS: Mapping[str, int] = {
    "kill": 4,
    "kill-late": 1,
    "zombie": 2,
    "pause": 2,
    "scale-out": 2,
    "scale-in": 2,
    "coordinator-move": 2,
    "txn-retriable": 3,
    "txn-abortable": 3,
    "endtxn-lost": 2,
    "fatal": 2,
    "slow-answers": 1,
    "conn-cut": 1,
}
_KIP848_WEIGHTS: Mapping[str, int] = {
    "pause": 2,
    "txn-retriable": 4,
    "coordinator-move": 2,
    "broker-down": 2,
    "heartbeat-retriable": 2,
    "conn-cut": 2,
}
#: Events that take a running slot out for a while (or for good).
_TAKES_SLOT = frozenset({"kill", "kill-late", "zombie", "pause", "scale-in"})


def plan(
    seed: int,
    events: int,
    *,
    row: str = "classic",
    initial_slots: int = 3,
    max_slots: int = 5,
    min_running: int = 2,
    gap_s: float = 3.5,
    session_s: float = 6.0,
    txn_timeout_s: float = 10.0,
    settle_s: float = 12.0,
) -> list[Planned]:
    """The schedule for ``seed``: pure, the same list for the same arguments.

    Slots are simulated (running, stopped until, down until restarted, free) so that
    each event targets a slot that is running at that time in the plan; an event that
    would leave fewer than ``min_running`` slots running, or more than ``max_slots``
    slots, is replaced by scale-out/scale-in or a retriable error. Signals go to slots
    that have run for ``settle_s`` (joined the group, processing), when there are any."""
    rng = random.Random(seed)
    weights = _CLASSIC_WEIGHTS if row == "classic" else _KIP848_WEIGHTS
    kinds = list(weights)
    running: set[int] = set(range(initial_slots))
    back_at: dict[int, float] = {}  # stopped or down slots -> when they run again
    since: dict[int, float] = dict.fromkeys(running, -settle_s)  # (re)started at
    out: list[Planned] = []
    at = 0.0
    for _ in range(events):
        at += rng.uniform(gap_s / 2, gap_s * 1.5)
        for back, when in sorted(back_at.items()):
            if when <= at:
                del back_at[back]
                running.add(back)
                since.setdefault(back, when)
        kind = rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
        active = len(running) + len(back_at)
        if kind in _TAKES_SLOT and len(running) <= min_running and row == "classic":
            kind = "scale-out" if active < max_slots else "txn-retriable"
        if kind == "scale-out" and active >= max_slots:
            kind = "scale-in" if len(running) > min_running else "txn-retriable"
        settled = sorted(s for s in running if at - since[s] >= settle_s)
        target = rng.choice(settled or sorted(running)) if running else None
        if kind in _TAKES_SLOT and target is None:
            kind = "txn-retriable"  # every slot is stopped or down right now
        params: dict[str, Any] = {}
        slot: int | None = None
        if kind in ("kill", "kill-late"):
            slot = target
            late = txn_timeout_s + rng.uniform(2, 5)
            params["restart_after"] = round(rng.uniform(0.5, 4) if kind == "kill" else late, 1)
        elif kind in ("zombie", "pause"):
            slot = target
            span = (
                (1.2 * session_s, 2.0 * session_s) if kind == "zombie" else (0.5, 0.3 * session_s)
            )
            params["seconds"] = round(rng.uniform(*span), 1)
        elif kind == "scale-in":
            slot = target
        elif kind == "scale-out":
            slot = min(s for s in range(max_slots + 1) if s not in running and s not in back_at)
        elif kind == "coordinator-move":
            params["seconds"] = round(rng.uniform(1, 5), 1)
            if row == "classic":
                params["which"] = rng.choice(["both", "group", "transaction"])
            else:
                params["broker"] = rng.randrange(3)
        elif kind == "txn-retriable":
            api = rng.choice(_TXN_APIS)
            choice = rng.random()
            if choice < 0.15:
                codes = [_DROP]
            elif choice < 0.3 and api == _TXN_OFFSET_COMMIT:
                codes = [_UNKNOWN_TOPIC_OR_PARTITION]
            else:
                codes = [rng.choice(_RETRIABLE) for _ in range(rng.randint(1, 3))]
            params.update(api=api, codes=codes)
        elif kind == "txn-abortable":
            params.update(api=_TXN_OFFSET_COMMIT, codes=[rng.choice(_ABORTABLE_TXN_OFFSET_COMMIT)])
        elif kind == "endtxn-lost":
            params.update(api=_END_TXN, codes=[rng.choice([_DROP, _DROP, 15, 51])])
        elif kind == "fatal":
            if rng.random() < 0.75:
                api = rng.choice([_ADD_OFFSETS, _END_TXN, _TXN_OFFSET_COMMIT, _ADD_PARTITIONS])
                params.update(api=api, codes=[_INVALID_PRODUCER_EPOCH])
            else:
                params.update(api=rng.choice([_END_TXN, _ADD_PARTITIONS]), codes=[_PRODUCER_FENCED])
        elif kind == "slow-answers":
            params.update(
                delay=round(rng.uniform(0.2, 1.0), 2), seconds=round(rng.uniform(2, 6), 1)
            )
        elif kind == "conn-cut":
            apis = [_PRODUCE, _FETCH, _HEARTBEAT, _OFFSET_FETCH, _END_TXN, _TXN_OFFSET_COMMIT]
            if row != "classic":
                apis = [_PRODUCE, _FETCH, _CONSUMER_GROUP_HEARTBEAT, _END_TXN, _TXN_OFFSET_COMMIT]
            params.update(api=rng.choice(apis), codes=[_DROP])
        elif kind == "broker-down":
            params.update(broker=rng.randrange(3), seconds=round(rng.uniform(2, 6), 1))
        elif kind == "heartbeat-retriable":
            params.update(
                api=_CONSUMER_GROUP_HEARTBEAT,
                codes=[rng.choice([15, 16]) for _ in range(rng.randint(1, 2))],
            )
        # The model of the slots.
        if kind in ("kill", "kill-late") and slot is not None:
            running.discard(slot)
            back_at[slot] = at + params["restart_after"]
            since.pop(slot)
        elif kind in ("zombie", "pause") and slot is not None:
            running.discard(slot)
            back_at[slot] = at + params["seconds"]
        elif kind == "scale-in" and slot is not None:
            running.discard(slot)
            since.pop(slot)
        elif kind == "scale-out" and slot is not None:
            running.add(slot)
            since[slot] = at
        out.append(Planned(at=round(at, 2), kind=kind, slot=slot, params=params))
    return out


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


def report(f: Mapping[str, Any]) -> str:
    c: Copies = f["copies"]
    s = f["stats"]
    ev = f["evidence"]
    drain = "not drained" if f["drain_s"] is None else f"{f['drain_s']:.1f} s"
    lines = [
        f"== {f['row']} row, {f['impl']} loop: seed {f['seed']}, "
        f"{sum(f['applied'].values())} events applied, {f['wall_s']:.0f} s",
        f"   events applied: {_fmt_counts(f['applied'])}",
        f"   events skipped (target not running): {_fmt_counts(f['skipped'])}",
        f"   consequences: {_fmt_counts(f['consequences'])}; SIGKILLs inside the process "
        f"step (transaction open with records sent): {f['kills_in_batch']}",
        f"   slots used {f['slots_used']}, processes started {f['processes']}; how they "
        f"ended: {_fmt_counts(s['endings'])}",
        f"   input records: {c.inputs} in the log ({f['input_acked']} acknowledged, "
        f"{f['input_failed']} failed); repeated keys {c.repeated_keys}",
        f"   output records (read_committed): {c.outputs}; duplicates {len(c.duplicated)} "
        f"({c.extra_copies} extra copies; writers: {_fmt_counts(c.duplicate_writers)}); "
        f"missing {len(c.missing)}; naming no input {c.unknown}",
        f"   output read to its end: {f['output_read_to_end']}; time to drain after the "
        f"schedule: {drain}",
        f"   transactions (processes' stats): {_fmt_counts(s['totals'])}",
        f"   aborts by reason: {_fmt_counts(s['aborts'])}",
    ]
    if f["row"] == "classic":
        lines += [
            f"   proxy: TxnOffsetCommits {ev['txn_offset_commits']} (answers: "
            f"{_fmt_counts(ev['answers'])}); fenced by the proxy: "
            f"{_fmt_counts(ev['fenced_by_proxy'])}; sent without a generation "
            f"{ev['without_generation']}, below v3 {ev['below_v3']}",
            f"   proxy: transactions timed out {ev['timed_out_transactions']}; faults "
            f"applied by API {_fmt_counts({str(k): v for k, v in ev['faults_applied'].items()})}"
            f"; FindCoordinator requests {ev['find_coordinator_requests']} of "
            f"{ev['requests']}; failures {ev['failures'] or 'none'}",
        ]
    else:
        lines.append(f"   mock: TxnOffsetCommits received {ev['txn_offset_commits_at_mock']}")
    if f["stall"]:
        lines.append(
            f"   NOT DRAINED: stall probe {f['stall']} (a fresh consumer of the same group "
            "getting nothing while one of a new group gets partitions: the broker's group "
            "is stuck)"
        )
    for title, items in (("duplicate", c.duplicated), ("missing", c.missing)):
        if items:
            lines.append(f"   {title}: " + ", ".join(f"{p}:{o}" for p, o in items[:10]))
    lines.append(f"   ledgers in {f['out']}")
    return "\n".join(lines)


def side_by_side(results: Sequence[Mapping[str, Any]]) -> str:
    head = (
        f"{'row':<8} {'loop':<5} {'seed':>6} {'events':>6} {'records in':>10} "
        f"{'outputs':>8} {'dups':>5} {'missing':>7} {'aborts':>6} {'drain s':>8}"
    )
    rows = [head]
    for f in results:
        c: Copies = f["copies"]
        drain = "-" if f["drain_s"] is None else f"{f['drain_s']:.1f}"
        rows.append(
            f"{f['row']:<8} {f['impl']:<5} {f['seed']:>6} {sum(f['applied'].values()):>6} "
            f"{c.inputs:>10} {c.outputs:>8} {len(c.duplicated):>5} {len(c.missing):>7} "
            f"{sum(f['stats']['aborts'].values()):>6} {drain:>8}"
        )
    return "\n".join(rows)


def _iter_impls(impl: str) -> Iterator[str]:
    yield from ("coop", "raw") if impl == "both" else (impl,)


def main(argv: list[str] | None = None) -> int:
    """Run the exactly-once chaos schedule through one or both loops."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--broker",
        choices=["kafka", "tansu"],
        default="kafka",
        help="kafka: a 3-node Apache Kafka cluster and broker SIGKILLs (reliability/"
        "eos_kafka.py); tansu: Tansu behind the transactions proxy (classic row) or "
        "librdkafka's mock cluster (kip848 row) and the fault schedule above",
    )
    parser.add_argument(
        "--row",
        choices=["classic", "kip848", "both"],
        default=None,
        help="default: both on kafka (at the same time), classic on tansu",
    )
    parser.add_argument(
        "--impl",
        choices=["coop", "raw", "java", "both", "all"],
        default=None,
        help="both: coop and raw; all: coop, raw and java (kafka only); default: all on "
        "kafka, both on tansu",
    )
    parser.add_argument("--slots", type=int, default=2, help="kafka: processors per lane")
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="kafka: stop the kill schedule after this long (the report says so)",
    )
    parser.add_argument("--results", default="reliability/results", help="kafka: JSON and PNG")
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    parser.add_argument("--gap-s", type=float, default=2.5, help="mean time between events")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a CI-size run: 12 events, 5 s of warm-up",
    )
    parser.add_argument("--rate", type=float, default=40.0, help="input records per second")
    parser.add_argument("--initial-slots", type=int, default=3)
    parser.add_argument("--max-slots", type=int, default=5)
    parser.add_argument("--session-timeout-ms", type=int, default=6_000)
    parser.add_argument("--txn-timeout-ms", type=int, default=10_000)
    parser.add_argument("--commit-interval-ms", type=int, default=1000)
    parser.add_argument("--process-sleep-s", type=float, default=0.05)
    parser.add_argument("--warmup-s", type=float, default=8.0)
    parser.add_argument("--drain-s", type=float, default=180.0)
    parser.add_argument("--out", default=_OUT)
    parser.add_argument("--print-schedule", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.warmup_s = min(args.events, 12), min(args.warmup_s, 5.0)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1_000_000)
    if args.broker == "kafka":
        from reliability.eos_kafka import run_kafka

        args.row = args.row or "both"
        args.impl = args.impl or "all"
        rows = ["classic", "kip848"] if args.row == "both" else [args.row]
        impls = {"all": ["coop", "raw", "java"], "both": ["coop", "raw"]}.get(
            args.impl, [args.impl]
        )
        return run_kafka(args, rows, impls)
    args.row = args.row or "classic"
    args.impl = args.impl or "both"
    if args.row == "both" or args.impl in ("java", "all"):
        parser.error("--row both and the java loop run on --broker kafka only")
    # The kip848 row runs one processor (see the module docstring): plan for one.
    one = args.row == "kip848"
    schedule = plan(
        args.seed,
        args.events,
        row=args.row,
        initial_slots=1 if one else args.initial_slots,
        max_slots=1 if one else args.max_slots,
        min_running=1 if one else 2,
        gap_s=args.gap_s,
        session_s=args.session_timeout_ms / 1000,
        txn_timeout_s=args.txn_timeout_ms / 1000,
    )
    print(
        f"exactly-once chaos, {args.row} row, seed {args.seed}: {len(schedule)} events "
        f"({_fmt_counts(Counter(e.kind for e in schedule))}); load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}",
        flush=True,
    )
    if args.print_schedule:
        for event in schedule:
            print("  " + event.describe())
    results = []
    for impl in _iter_impls(args.impl):
        figures = _Run(args, impl, schedule).run()
        print(report(figures), flush=True)
        print(f"   load average now {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
        results.append(figures)
    print()
    print(side_by_side(results))
    print(
        f"replay: python -m reliability.eos_chaos --broker tansu --row {args.row} "
        f"--seed {args.seed} "
        f"--events {args.events} --gap-s {args.gap_s}"
    )
    bad = any(f["copies"].duplicated or f["copies"].missing for f in results if f["impl"] == "coop")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
