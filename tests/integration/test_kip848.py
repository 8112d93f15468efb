"""``group.protocol=consumer`` (KIP-848) end to end, on Apache Kafka (where the
consumer protocol is on by default) and, for fault injection, librdkafka's mock cluster.

The mock implements KIP-848 consumer groups (ConsumerGroupHeartbeat v1, its own uniform
assignment) without being told to: a group is a consumer-protocol group when its first
member heartbeats. Tansu does not answer API 68 at all, which the member reports as a
fatal configuration error (docs/testing.md, "KIP-848 consumer groups"). Tests that
inject nothing run on Kafka (``ON_KAFKA``); coordinator moves, brokers down and up,
injected fences and session expiry use the mock's controls.

* One member consumes every record.
* Scale 1 -> 2 -> 1 with the ownership ledger: never two owners, nothing lost, nothing
  processed twice (every member commits before giving a partition up).
* A confluent-kafka member with ``group.protocol=consumer`` in the same group, and a
  mixed group scaled 1 -> 4 -> 2.
* A fenced member loses its partitions, rejoins at epoch 0 and goes on consuming.
* Session expiry: a member whose heartbeats stop for longer than the broker's
  ``group.consumer.session.timeout.ms`` is removed by the coordinator, the other member
  gets its partitions, and the expired member is fenced when it talks again.
* Every broker down and up, for less and for more than the session timeout.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import pytest

import coopconsumer
from coopconsumer import Consumer, TopicPartition
from coopconsumer._errors import ConfigurationError
from coopconsumer._protocol import error_codes
from coopconsumer.testing import EmbeddedBroker, KafkaCluster, MockBroker
from integration._ledger import (
    CoopMember,
    KeyProducer,
    LedgerGroup,
    RdkafkaMember,
    RecordAccounting,
    committed_offsets,
    wait_for,
)

PARTITIONS = 6
SETTLE_S = 40.0
QUIET_S = 1.5
CONSUMER_GROUP_HEARTBEAT = 68
#: The mock's group.consumer.session.timeout.ms / heartbeat.interval.ms in the session
#: tests (its defaults are 30000 / 3000). The mock checks sessions once a second.
SESSION_MS = 3000
HEARTBEAT_MS = 500


def _kip848(member: CoopMember | RdkafkaMember) -> None:
    """Switch a ledger member to the consumer protocol: the broker assigns, so no
    client-side assignor and no classic session settings."""
    for key in ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"):
        member.config.pop(key, None)
    member.config["group.protocol"] = "consumer"


class _Group(LedgerGroup[CoopMember | RdkafkaMember]):
    """Members of one consumer-protocol group sharing a ledger and a producer."""

    def __init__(self, broker: EmbeddedBroker, topic: str, group: str) -> None:
        broker.create_topic(topic, partitions=PARTITIONS)
        super().__init__(
            broker.bootstrap, topic, group, PARTITIONS, quiet_s=QUIET_S, settle_s=SETTLE_S
        )
        self.broker = broker

    def add(
        self,
        name: str,
        *,
        rdkafka: bool = False,
        classic: bool = False,
        config: Mapping[str, object] | None = None,
    ) -> CoopMember | RdkafkaMember:
        member: CoopMember | RdkafkaMember
        if rdkafka:
            member = RdkafkaMember(
                name, self.broker.bootstrap, self.group, [self.topic], self.ledger, self.accounting
            )
        else:
            member = CoopMember(
                name, self.broker.bootstrap, self.group, [self.topic], self.ledger, self.accounting
            )
        if not classic:  # a classic member keeps cooperative-sticky
            _kip848(member)
        member.config.update(config or {})
        self.adopt(member)
        return member

    def remove(self, member: CoopMember | RdkafkaMember) -> None:
        self.live.remove(member)
        member.stop()

    def check_clean(self) -> None:
        failures = self.member_failures()
        assert not failures, failures
        self.accounting.check(allow_duplicates=False)
        committed = committed_offsets(self.broker.bootstrap, self.group, self.all_tps)
        assert committed == self.accounting.end_offsets()
        assert not self.producer.errors

    def kept_partitions_never_revoked(self, member: CoopMember | RdkafkaMember) -> None:
        """Incremental: what a member still owns was never revoked from it."""
        revoked = self.ledger.removed_since(member.name, 0.0)
        assert not revoked & self.ledger.owned_by(member.name), self.ledger.events(member.name)


#: Runs a ``group`` test on Apache Kafka (the ``group`` fixture is the mock's otherwise,
#: for its fault injection).
ON_KAFKA = pytest.mark.parametrize("group", ["kafka"], indirect=True)


@pytest.fixture(params=["mock"])
def group(request: pytest.FixtureRequest, unique_topic: str, unique_group: str) -> Iterator[_Group]:
    broker: EmbeddedBroker = request.getfixturevalue(f"{request.param}_broker")
    g = _Group(broker, unique_topic, unique_group)
    try:
        yield g
    finally:
        g.stop_all()


@ON_KAFKA
def test_one_member_consumes_every_record(group: _Group) -> None:
    group.producer.produce(300)
    member = group.add("m1")
    group.settle("m1 to own every partition")
    group.finish()
    group.check_clean()
    assert isinstance(member, CoopMember)
    assert member.consumer is not None
    metrics = member.consumer.metrics()
    # KIP-429's rebalance metrics are kept for the consumer protocol (as Java does).
    assert metrics["rebalance-total"] >= 1
    assert metrics["heartbeat-total"] >= 1


@pytest.mark.slow
def test_coordinator_moves(group: _Group) -> None:
    group.producer.produce(60)
    group.add("m1")
    group.settle("m1 to own every partition")
    broker = group.broker
    broker.start_request_tracking()
    for broker_id in (2, 3, 1):
        broker.clear_requests()
        broker.set_coordinator(group.group, broker_id)
        # The old coordinator answers NOT_COORDINATOR; the member looks the new one up
        # and heartbeats there (the mock's heartbeat interval is 3 s).
        wait_for(
            functools.partial(_heartbeats_to, broker, broker_id, 2),
            SETTLE_S,
            f"heartbeats to broker {broker_id}",
            members=group.live,
        )
        group.producer.produce(60)
        wait_for(
            lambda: not group.accounting.missing(),
            SETTLE_S,
            f"records after the coordinator moved to broker {broker_id}",
            members=group.live,
        )
    assert group.ledger.owned_by("m1") == group.all_tps
    group.finish()
    group.check_clean()


@pytest.mark.slow
def test_coordinator_down_and_up_keeps_the_assignment(group: _Group) -> None:
    group.broker.set_coordinator(group.group, 2)
    group.producer.produce(60)
    group.add("m1")
    group.settle("m1 to own every partition")
    group.broker.set_broker_down(2)
    time.sleep(4.0)  # more than a heartbeat interval, less than the 30 s session
    group.broker.set_broker_up(2)
    group.producer.produce(60)
    wait_for(
        lambda: not group.accounting.missing(),
        SETTLE_S,
        "the records produced after the outage",
        members=group.live,
    )
    # The session outlived the outage: nothing was lost or handed over.
    assert [e.kind for e in group.ledger.events("m1")] == ["assigned"]
    group.finish()
    group.check_clean()


def test_static_member_comes_back_to_its_assignment(
    kafka_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    kafka_broker.create_topic(unique_topic, partitions=4)
    settings = {
        "bootstrap.servers": kafka_broker.bootstrap,
        "group.id": unique_group,
        "group.protocol": "consumer",
        "group.instance.id": "instance-1",
    }
    everything = {TopicPartition(unique_topic, p) for p in range(4)}
    first = Consumer(settings)
    try:
        first.subscribe([unique_topic])
        _poll_until(first, lambda: first.assignment() == everything)
        epoch = first.group_metadata().generation_id
    finally:
        first.close()  # a static member leaves with epoch -2: it will come back
    again = Consumer(settings)
    try:
        again.subscribe([unique_topic])
        _poll_until(again, lambda: again.assignment() == everything)
        # The coordinator kept the instance's assignment and epoch (a new member id).
        assert again.group_metadata().generation_id == epoch
        assert again.group_metadata().member_id != first.group_metadata().member_id
    finally:
        again.close()


def test_unsubscribe_and_subscribe_again(
    kafka_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    kafka_broker.create_topic(unique_topic, partitions=2)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "group.id": unique_group,
            "group.protocol": "consumer",
            "group.remote.assignor": "uniform",
        }
    )
    everything = {TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)}
    try:
        for _ in range(2):
            consumer.subscribe([unique_topic])
            _poll_until(consumer, lambda: consumer.assignment() == everything)
            assert consumer.group_metadata().generation_id >= 1
            consumer.unsubscribe()
            assert consumer.assignment() == set()
    finally:
        consumer.close()


@ON_KAFKA
@pytest.mark.slow
def test_scale_one_two_one(group: _Group) -> None:
    group.producer.start()
    first = group.add("m1")
    group.settle("m1 to own every partition")
    second = group.add("m2")
    group.settle("m1 and m2 to share the partitions")
    assert group.ledger.owned_by("m2"), "the second member got nothing"
    group.kept_partitions_never_revoked(first)
    group.remove(second)
    group.settle("m1 to own every partition again")
    group.finish()
    group.check_clean()


@ON_KAFKA
@pytest.mark.slow
def test_confluent_kafka_member_in_the_same_group(group: _Group) -> None:
    group.producer.start()
    ours = group.add("coop")
    group.settle("coop to own every partition")
    theirs = group.add("rdkafka", rdkafka=True)
    group.settle("coop and rdkafka to share the partitions")
    assert group.ledger.owned_by("rdkafka")
    group.kept_partitions_never_revoked(ours)
    group.remove(theirs)
    group.settle("coop to own every partition again")
    group.finish()
    group.check_clean()


@ON_KAFKA
@pytest.mark.slow
def test_mixed_group_scales_one_four_two(group: _Group) -> None:
    """coopconsumer and confluent-kafka members, 1 -> 4 -> 2 (issue 13's mixed group)."""
    group.producer.start()
    first = group.add("coop-1")
    group.settle("coop-1 to own every partition")
    group.add("rdkafka-1", rdkafka=True)
    group.add("coop-2")
    group.add("rdkafka-2", rdkafka=True)
    group.settle("four members to share the partitions")
    group.kept_partitions_never_revoked(first)
    for name in ("rdkafka-1", "coop-2"):
        group.remove(next(m for m in group.live if m.name == name))
    group.settle("two members to share the partitions")
    group.finish()
    group.check_clean()


@ON_KAFKA
@pytest.mark.slow
def test_online_migration_from_classic_to_consumer(group: _Group) -> None:
    """A cooperative-sticky classic group is rolled to ``group.protocol=consumer`` one
    member at a time, records flowing (docs/upgrade.md). Kafka converts the group when
    the first consumer-protocol member joins and runs the remaining classic members
    through its classic-protocol bridge; the mock keeps the two protocols' groups
    apart, so only Kafka can host this. Never two owners, nothing lost, nothing
    processed twice (every member commits before giving a partition up)."""
    group.producer.start()
    for n in (1, 2, 3):
        group.add(f"classic-{n}", classic=True)
    group.settle("three classic members to share the partitions")
    for n in (1, 2, 3):
        group.add(f"consumer-{n}")
        group.remove(next(m for m in group.live if m.name == f"classic-{n}"))
        group.settle(f"classic-{n} replaced by consumer-{n}")
    group.finish()
    group.check_clean()


def test_fenced_member_loses_its_partitions_and_rejoins(group: _Group) -> None:
    group.producer.produce(120)
    member = group.add("m1")
    group.settle("m1 to own every partition")
    group.broker.push_request_errors(CONSUMER_GROUP_HEARTBEAT, [error_codes.FENCED_MEMBER_EPOCH])
    wait_for(
        lambda: any(e.kind == "lost" for e in group.ledger.events("m1")),
        SETTLE_S,
        "m1 to report its partitions lost",
        members=group.live,
    )
    group.settle("m1 to own every partition after rejoining")
    group.producer.produce(120)
    group.finish()
    assert member.error is None
    group.ledger.check()
    group.accounting.check(allow_duplicates=True)  # records after the last commit repeat
    assert not group.accounting.missing()


def test_tansu_does_not_answer_consumer_group_heartbeat(
    tansu_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    tansu_broker.create_topic(unique_topic, partitions=1)
    settings: Mapping[str, object] = {
        "bootstrap.servers": tansu_broker.bootstrap,
        "group.id": unique_group,
        "group.protocol": "consumer",
    }
    consumer = Consumer(dict(settings))
    try:
        consumer.subscribe([unique_topic])
        with pytest.raises(ConfigurationError, match=r"group\.protocol=classic"):
            _poll_for(consumer, 10.0)
    finally:
        consumer.close()


def _poll_for(consumer: Consumer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.1)


def _poll_until(consumer: Consumer, condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        consumer.poll(0.1)


class _CoordinatorRequests:
    """How many ConsumerGroupHeartbeat requests each confluent-kafka member has sent to
    its group coordinator, from librdkafka's statistics (``stats_cb``).

    librdkafka's per-request-type counters (``req``) do not list ConsumerGroupHeartbeat,
    so they are the coordinator connection's requests sent (``tx``) less the listed ones.
    A member has one heartbeat in flight at a time: a second one sent after the
    coordinator came back means the mock has answered the first one.
    """

    def __init__(self) -> None:
        self._sent: dict[str, int] = {}
        self._lock = threading.Lock()

    def config(self, name: str) -> dict[str, object]:
        return {
            "statistics.interval.ms": 100,
            "stats_cb": functools.partial(self._update, name),
        }

    def _update(self, name: str, stats: str) -> None:
        coordinator = json.loads(stats).get("brokers", {}).get("GroupCoordinator")
        if coordinator is None:
            return
        listed = sum(coordinator.get("req", {}).values())
        with self._lock:
            self._sent[name] = int(coordinator.get("tx", 0)) - listed

    def heartbeats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._sent)


def _heartbeats_to(broker: EmbeddedBroker, broker_id: int, count: int) -> bool:
    heartbeats = [
        r
        for r in broker.requests()
        if r.api_key == CONSUMER_GROUP_HEARTBEAT and r.broker_id == broker_id
    ]
    return len(heartbeats) >= count


# ---------------------------------------------------------------- session expiry


def _session_settings(broker: EmbeddedBroker) -> MockBroker:
    assert isinstance(broker, MockBroker)
    broker.set_group_consumer_session_timeout_ms(SESSION_MS)
    broker.set_group_consumer_heartbeat_interval_ms(HEARTBEAT_MS)
    return broker


def _group_session_settings(group: _Group) -> None:
    """:data:`SESSION_MS` and :data:`HEARTBEAT_MS` for this group: the mock's
    broker-wide setters, or on Kafka the group's own configuration (KIP-848's
    ``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms``, set with
    Kafka's ConfigCommand before the first member joins)."""
    if isinstance(group.broker, MockBroker):
        _session_settings(group.broker)
        return
    assert isinstance(group.broker, KafkaCluster)
    done = group.broker.run_tool(
        "org.apache.kafka.tools.ConfigCommand",  # 4.4; kafka.admin.ConfigCommand earlier
        "--bootstrap-server",
        group.broker.internal_bootstrap,
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        group.group,
        "--add-config",
        f"consumer.session.timeout.ms={SESSION_MS},consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("outage_s", "expires"),
    [(1.0, False), (SESSION_MS / 1000 + 2.5, True)],
    ids=["shorter-than-session", "longer-than-session"],
)
def test_every_broker_down_and_up(group: _Group, outage_s: float, expires: bool) -> None:
    """The whole cluster goes away (fetches, metadata and the coordinator at once) and
    comes back. Within the session the member keeps its assignment; beyond it the
    coordinator has removed the member, whose next heartbeat is UNKNOWN_MEMBER_ID: it
    reports its partitions lost, rejoins and reads on from the last commit."""
    _session_settings(group.broker)
    group.producer.produce(60)
    member = group.add("m1")
    assert isinstance(member, CoopMember)
    group.settle("m1 to own every partition")
    wait_for(
        lambda: group.accounting.last_committed() == group.accounting.end_offsets(),
        SETTLE_S,
        "m1 to commit what it read",
        members=group.live,
    )
    assert member.consumer is not None
    before = member.consumer.group_metadata()
    group.broker.set_broker_down(-1)
    time.sleep(outage_s)  # the fault's duration, not a wait for an outcome
    group.broker.set_broker_up(-1)
    if expires:
        wait_for(
            lambda: any(e.kind == "lost" for e in group.ledger.events("m1")),
            SETTLE_S,
            "m1 to report its partitions lost",
            members=group.live,
        )
    group.producer.produce(60)
    group.settle("m1 to own every partition after the outage")
    after = member.consumer.group_metadata()
    group.finish()
    group.check_clean()  # also: no record processed twice (everything read was committed)
    kinds = [e.kind for e in group.ledger.events("m1")]
    if expires:
        assert kinds == ["assigned", "lost", "assigned", "revoked"], kinds
        # KIP-1082: the member keeps its id and gets a new epoch from a rejoin at 0.
        assert after.member_id == before.member_id
        assert after.generation_id > before.generation_id
    else:
        assert kinds == ["assigned", "revoked"], kinds
        assert after.generation_id == before.generation_id


#: A coopconsumer member in a child process, so that SIGSTOP can freeze it alone (its
#: heartbeats, fetches and polls together, as a long GC pause or a suspended VM does):
#: the mock cluster cannot cut one client off while another in the same group goes on.
#: It prints one JSON event per line: listener calls, records, commits, its group
#: metadata when it changes and the driver's "fenced"/"joining" log lines. It closes
#: (committing, leaving the group) when its stdin closes.
_CHILD_MEMBER = r"""
import json, logging, sys, threading
import coopconsumer
from coopconsumer import Consumer, RebalanceListener, TopicPartition

out_lock = threading.Lock()
def emit(**event):
    with out_lock:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

class DriverLog(logging.Handler):
    def emit(self, record):
        text = record.getMessage()
        if text.startswith(("fenced:", "joining group")):
            emit(ev="log", text=text)

logging.getLogger("coopconsumer").addHandler(DriverLog())
logging.getLogger("coopconsumer").setLevel(logging.INFO)
config, topic = json.loads(sys.argv[1]), sys.argv[2]
consumer = Consumer(config)
pending = {}

def listed(partitions):
    return sorted([tp.topic, tp.partition] for tp in partitions)

def commit(only=None):
    offsets = {tp: o for tp, o in pending.items() if only is None or tp in only}
    for tp in offsets:
        del pending[tp]
    if not offsets:
        return
    try:
        consumer.commit(offsets)
    except coopconsumer.CoopConsumerError as exc:
        emit(ev="commit_failed", error=repr(exc))
        return
    emit(ev="committed", offsets=[[tp.topic, tp.partition, o] for tp, o in offsets.items()])

class Listener(RebalanceListener):
    def on_partitions_assigned(self, partitions):
        emit(ev="assigned", tps=listed(partitions))
    def on_partitions_revoked(self, partitions):
        commit(partitions)
        emit(ev="revoked", tps=listed(partitions))
    def on_partitions_lost(self, partitions):
        for tp in partitions:
            pending.pop(tp, None)
        emit(ev="lost", tps=listed(partitions))

stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
consumer.subscribe([topic], Listener())
seen = None
while not stop.is_set():
    for record in consumer.consume(200, 0.05):
        if record.error() is not None:
            continue
        emit(ev="record", topic=record.topic(), partition=record.partition(),
             offset=record.offset(), key=record.key().decode())
        pending[TopicPartition(record.topic(), record.partition())] = record.offset() + 1
    metadata = consumer.group_metadata()
    if (metadata.member_id, metadata.generation_id) != seen:
        seen = (metadata.member_id, metadata.generation_id)
        emit(ev="metadata", member_id=seen[0], epoch=seen[1])
    commit()
commit()
consumer.close()
emit(ev="closed")
"""


def _tps(listed: list[list[Any]]) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(str(t), int(p)) for t, p in listed)


class _ChildMember:
    """Runs ``_CHILD_MEMBER`` and feeds its events to the group's ledger and accounting.

    ``freeze`` stops the process (SIGSTOP) and takes its partitions out of the ledger
    (``OwnershipLedger.forget``: a stopped process processes nothing, and the
    coordinator hands its partitions over once the session expires). The member cannot
    know that, so when it runs again the ledger expects its first listener call for
    them to be ``on_partitions_lost`` of exactly those partitions, before any record of
    them: a record first would be processed by a zombie.
    """

    def __init__(self, name: str, group: _Group) -> None:
        self.name = name
        self.group = group
        self.config: dict[str, object] = {
            "bootstrap.servers": group.broker.bootstrap,
            "group.id": group.group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        self.logs: list[str] = []
        self.metadata: list[tuple[str, int]] = []
        self.lost_while_frozen: list[frozenset[TopicPartition]] = []
        self.problems: list[str] = []
        self._forgotten: frozenset[TopicPartition] | None = None
        self._closed = threading.Event()
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        source = str(Path(coopconsumer.__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
        self._process = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MEMBER, json.dumps(self.config), self.group.topic],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._process.stdout is not None
        self._reader = threading.Thread(
            target=self._read, args=(self._process.stdout,), name=self.name, daemon=True
        )
        self._reader.start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            try:
                self._handle(json.loads(line))
            except Exception as exc:  # kept for the test: a reader thread must not die
                self.problems.append(f"{line.strip()!r}: {exc!r}")
        self._closed.set()

    def _handle(self, event: dict[str, Any]) -> None:
        ledger, accounting = self.group.ledger, self.group.accounting
        kind = event["ev"]
        if kind == "assigned":
            ledger.assigned(self.name, _tps(event["tps"]))
        elif kind == "revoked":
            ledger.revoked(self.name, _tps(event["tps"]))
        elif kind == "lost":
            lost = _tps(event["tps"])
            if self._forgotten is not None:
                if lost != self._forgotten:
                    self.problems.append(f"lost {sorted(lost)}, owned {sorted(self._forgotten)}")
                self.lost_while_frozen.append(lost)
                self._forgotten = None
            else:
                ledger.lost(self.name, lost)
        elif kind == "record":
            tp = TopicPartition(event["topic"], event["partition"])
            ledger.record_received(self.name, tp)
            accounting.consumed(self.name, event["key"].encode(), tp, event["offset"])
        elif kind == "committed":
            accounting.committed(
                self.name, {TopicPartition(t, p): o for t, p, o in event["offsets"]}
            )
        elif kind == "commit_failed":
            self.problems.append(f"commit failed: {event['error']}")
        elif kind == "metadata":
            self.metadata.append((event["member_id"], event["epoch"]))
        elif kind == "log":
            self.logs.append(event["text"])

    def freeze(self) -> None:
        assert self._process is not None
        self._forgotten = self.group.ledger.forget(self.name)
        os.kill(self._process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGCONT)

    def stop(self) -> None:
        process = self._process
        if process is None:
            return
        self._process = None
        os.kill(process.pid, signal.SIGCONT)
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        assert self._reader is not None
        self._reader.join(10)
        assert process.stderr is not None
        errors_text = process.stderr.read()
        process.stderr.close()
        if process.returncode != 0:
            self.problems.append(f"exit {process.returncode}: {errors_text[-2000:]}")


@pytest.mark.parametrize("group", ["kafka", "mock"], indirect=True)
def test_session_expiry_hands_partitions_to_the_other_member(group: _Group) -> None:
    """The member's heartbeats stop (its process is frozen) for longer than the
    session: the coordinator removes it and gives its partitions to the other member.
    Running again, it is fenced (UNKNOWN_MEMBER_ID: the coordinator no longer knows
    it), reports the partitions lost, not revoked, rejoins at epoch 0 with the same
    member id (KIP-1082) and gets a share back. Everything it read was committed
    before it froze, so no record is processed twice and none is lost."""
    _group_session_settings(group)
    group.producer.produce(120)
    frozen = _ChildMember("frozen", group)
    frozen.start()
    try:
        wait_for(
            lambda: group.ledger.owned_by("frozen") == group.all_tps,
            SETTLE_S,
            "the first member to own every partition",
        )
        other = group.add("other")
        wait_for(
            lambda: (
                set(group.ledger.owners()) == group.all_tps
                and set(group.ledger.owners().values()) == {"frozen", "other"}
                and group.ledger.quiet_for() >= QUIET_S
                and group.accounting.last_committed() == group.accounting.end_offsets()
            ),
            SETTLE_S,
            "both members to share the partitions, everything read committed",
            members=group.live,
        )
        assert frozen.metadata, "the child reported no group metadata"
        member_id, epoch = frozen.metadata[-1]
        handed_over = group.ledger.owned_by("frozen")
        frozen.freeze()
        frozen_at = time.monotonic()
        wait_for(
            lambda: group.ledger.owned_by("other") == group.all_tps,
            SETTLE_S,
            "the other member to get the frozen member's partitions",
            members=group.live,
        )
        # Only the session timeout hands them over (the mock checks once a second,
        # Kafka times each session).
        assert time.monotonic() - frozen_at >= SESSION_MS / 1000 - 0.5
        assert not group.ledger.removed_since("other", 0.0)
        frozen.thaw()
        wait_for(
            lambda: bool(frozen.lost_while_frozen),
            SETTLE_S,
            "the thawed member to report its partitions lost",
            members=group.live,
        )
        assert frozen.lost_while_frozen == [handed_over]
        assert any(
            "fenced: encountered UNKNOWN_MEMBER_ID" in line
            or "fenced: encountered FENCED_MEMBER_EPOCH" in line
            for line in frozen.logs
        ), frozen.logs
        wait_for(
            lambda: (
                set(group.ledger.owners()) == group.all_tps
                and set(group.ledger.owners().values()) == {"frozen", "other"}
                and group.ledger.quiet_for() >= QUIET_S
            ),
            SETTLE_S,
            "the rejoined member to get a share back",
            members=group.live,
        )
        rejoined_id, rejoined_epoch = frozen.metadata[-1]
        assert rejoined_id == member_id
        assert rejoined_epoch > epoch
        group.producer.produce(120)
        group.finish()
    finally:
        frozen.stop()
        group.stop_all()
    assert not frozen.problems, frozen.problems
    group.check_clean()
    assert other.error is None


def test_manual_target_assignment(mock_broker: EmbeddedBroker, unique_topic: str) -> None:
    """The mock's target assignment can be set by hand, per member id, and handed back
    to its own assignor; the member reconciles to each target."""
    mock = _session_settings(mock_broker)
    mock.create_topic(unique_topic, partitions=4)
    group_id = unique_topic.replace("t-", "g-", 1)
    everything = {TopicPartition(unique_topic, p) for p in range(4)}
    consumer = Consumer(
        {"bootstrap.servers": mock.bootstrap, "group.id": group_id, "group.protocol": "consumer"}
    )
    try:
        consumer.subscribe([unique_topic])
        _poll_until(consumer, lambda: consumer.assignment() == everything)
        member_id = consumer.group_metadata().member_id
        chosen = {TopicPartition(unique_topic, 1), TopicPartition(unique_topic, 3)}
        mock.set_consumer_group_target_assignment(group_id, {member_id: chosen})
        _poll_until(consumer, lambda: consumer.assignment() == chosen)
        mock.set_consumer_group_target_assignment(group_id, None)
        _poll_until(consumer, lambda: consumer.assignment() == everything)
    finally:
        consumer.close()


class _CommitWhenRevoked(coopconsumer.RebalanceListener):
    """Commits the consumed positions in ``on_partitions_revoked``: Java's documented
    pattern for manual commits, which must work in the revocation close() runs."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.errors: list[BaseException] = []

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        assert self.consumer is not None
        try:
            self.consumer.commit()
        except BaseException as exc:
            self.errors.append(exc)
            raise


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_commit_in_revoke_during_close(
    kafka_broker: EmbeddedBroker, unique_topic: str, unique_group: str, protocol: str
) -> None:
    """Java's manual-commit pattern: commit in on_partitions_revoked, which close()
    runs; the consumer must still take the commit then (it used to say "closed")."""
    kafka_broker.create_topic(unique_topic, partitions=2)
    accounting = RecordAccounting()
    KeyProducer(kafka_broker.bootstrap, unique_topic, 2, accounting).produce(10)
    listener = _CommitWhenRevoked()
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "group.id": unique_group,
            "group.protocol": protocol,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    listener.consumer = consumer
    read = 0
    try:
        consumer.subscribe([unique_topic], listener)
        deadline = time.monotonic() + 20
        while read < 10:
            assert time.monotonic() < deadline, f"read {read} of 10"
            read += sum(1 for r in consumer.consume(10, 0.1) if r.error() is None)
    finally:
        consumer.close()  # would re-raise the listener's error
    assert not listener.errors
    tps = {TopicPartition(unique_topic, p) for p in range(2)}
    assert committed_offsets(kafka_broker.bootstrap, unique_group, tps) == accounting.end_offsets()


@pytest.mark.parametrize("rdkafka", [False, True], ids=["coopconsumer", "confluent-kafka"])
def test_owned_partitions_resent_after_a_lost_connection(group: _Group, rdkafka: bool) -> None:
    """After its coordinator connection failed, a member's next heartbeat says again
    everything, its owned partitions included (KIP-848; Java's heartbeat manager resets
    its sent-fields state on any failure). The mock forgets what a member owns when its
    connection closes, as a new coordinator knows only what members tell it, so a
    member joining next must not be given partitions the others still own."""
    mock = _session_settings(group.broker)
    mock.set_coordinator(group.group, 2)
    group.producer.start()
    sent = _CoordinatorRequests()
    for name in ("m1", "m2"):
        group.add(name, rdkafka=rdkafka, config=sent.config(name) if rdkafka else None)
    group.settle("m1 and m2 to share the partitions")
    mock.start_request_tracking()
    mock.set_broker_down(2)
    time.sleep(1.0)  # the fault's duration: several heartbeat intervals, within the session
    mock.clear_requests()
    before = sent.heartbeats()
    assert set(before) == ({"m1", "m2"} if rdkafka else set()), before
    mock.set_broker_up(2)

    def both_heartbeated() -> bool:
        # The mock's request log does not say who sent a request: four heartbeats can
        # all be m1's while m2's reconnect still waits out librdkafka's backoff, and m3
        # would then be given what the mock forgot m2 owns. Each confluent-kafka member
        # says itself when it has heartbeated again.
        if not _heartbeats_to(mock, 2, 4):
            return False
        now = sent.heartbeats()
        return all(now.get(m, 0) >= n + 2 for m, n in before.items())

    wait_for(both_heartbeated, SETTLE_S, "both members to heartbeat again", members=group.live)
    group.add("m3", rdkafka=rdkafka)
    group.settle("three members to share the partitions")
    group.finish()
    for member in group.started:
        assert member.error is None, f"{member.name}: {member.error!r}"
    group.ledger.check()  # m3 got nothing m1 or m2 still owned
    # Commits failed while the coordinator was down (retriable: retried after it).
    group.accounting.check(allow_duplicates=False)
    assert committed_offsets(mock.bootstrap, group.group, group.all_tps) == (
        group.accounting.end_offsets()
    )
