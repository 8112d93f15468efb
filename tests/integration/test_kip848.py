"""``group.protocol=consumer`` (KIP-848) end to end on librdkafka's mock cluster.

The mock implements KIP-848 consumer groups (ConsumerGroupHeartbeat v1, its own uniform
assignment) without being told to: a group is a consumer-protocol group when its first
member heartbeats. Tansu does not answer API 68 at all, which the member reports as a
fatal configuration error (docs/testing.md, "KIP-848 consumer groups").

* One member consumes every record.
* Scale 1 -> 2 -> 1 with the ownership ledger: never two owners, nothing lost, nothing
  processed twice (every member commits before giving a partition up).
* A confluent-kafka member with ``group.protocol=consumer`` in the same group, and a
  mixed group scaled 1 -> 4 -> 2.
* A fenced member loses its partitions, rejoins at epoch 0 and goes on consuming.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping

import pytest

from coopconsumer import Consumer, TopicPartition
from coopconsumer._errors import ConfigurationError
from coopconsumer._protocol import errors
from coopconsumer.testing import EmbeddedBroker
from integration._ledger import (
    CoopMember,
    KeyProducer,
    OwnershipLedger,
    RdkafkaMember,
    RecordAccounting,
    committed_offsets,
    wait_for,
)

PARTITIONS = 6
SETTLE_S = 40.0
QUIET_S = 1.5
CONSUMER_GROUP_HEARTBEAT = 68


def _kip848(member: CoopMember | RdkafkaMember) -> None:
    """Switch a ledger member to the consumer protocol: the broker assigns, so no
    client-side assignor and no classic session settings."""
    for key in ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"):
        member.config.pop(key, None)
    member.config["group.protocol"] = "consumer"


class _Group:
    """Members of one consumer-protocol group sharing a ledger and a producer."""

    def __init__(self, broker: EmbeddedBroker, topic: str, group: str) -> None:
        self.broker = broker
        self.topic = topic
        self.group = group
        broker.create_topic(topic, partitions=PARTITIONS)
        self.all_tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
        self.ledger = OwnershipLedger()
        self.accounting = RecordAccounting()
        self.producer = KeyProducer(broker.bootstrap, topic, PARTITIONS, self.accounting, rate=150)
        self.live: list[CoopMember | RdkafkaMember] = []
        self.started: list[CoopMember | RdkafkaMember] = []

    def add(self, name: str, *, rdkafka: bool = False) -> CoopMember | RdkafkaMember:
        member: CoopMember | RdkafkaMember
        if rdkafka:
            member = RdkafkaMember(
                name, self.broker.bootstrap, self.group, [self.topic], self.ledger, self.accounting
            )
        else:
            member = CoopMember(
                name, self.broker.bootstrap, self.group, [self.topic], self.ledger, self.accounting
            )
        _kip848(member)
        member.start()
        self.live.append(member)
        self.started.append(member)
        return member

    def settle(self, what: str) -> None:
        def settled() -> bool:
            owners = self.ledger.owners()
            return (
                set(owners) == self.all_tps
                and set(owners.values()) == {m.name for m in self.live}
                and self.ledger.quiet_for() >= QUIET_S
            )

        wait_for(settled, SETTLE_S, what, members=self.live)

    def remove(self, member: CoopMember | RdkafkaMember) -> None:
        self.live.remove(member)
        member.stop()

    def finish(self) -> None:
        self.producer.stop()
        wait_for(
            lambda: not self.accounting.missing(),
            SETTLE_S,
            "every produced record to be processed",
            members=self.live,
        )
        while self.live:
            self.live.pop(0).stop()

    def stop_all(self) -> None:
        self.producer.stop()
        while self.live:
            self.live.pop(0).stop()

    def check_clean(self) -> None:
        for member in self.started:
            assert member.error is None, f"{member.name}: {member.error!r}"
        self.ledger.check()
        failures = {m.name: m.commit_failures[:3] for m in self.started if m.commit_failures}
        assert not failures, failures
        self.accounting.check(allow_duplicates=False)
        committed = committed_offsets(self.broker.bootstrap, self.group, self.all_tps)
        assert committed == self.accounting.end_offsets()
        assert not self.producer.errors

    def kept_partitions_never_revoked(self, member: CoopMember | RdkafkaMember) -> None:
        """Incremental: what a member still owns was never revoked from it."""
        revoked = self.ledger.removed_since(member.name, 0.0)
        assert not revoked & self.ledger.owned_by(member.name), self.ledger.events(member.name)


@pytest.fixture
def group(mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str) -> Iterator[_Group]:
    g = _Group(mock_broker, unique_topic, unique_group)
    try:
        yield g
    finally:
        g.stop_all()


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
    mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    mock_broker.create_topic(unique_topic, partitions=4)
    settings = {
        "bootstrap.servers": mock_broker.bootstrap,
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
    mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    mock_broker.create_topic(unique_topic, partitions=2)
    consumer = Consumer(
        {
            "bootstrap.servers": mock_broker.bootstrap,
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


def test_fenced_member_loses_its_partitions_and_rejoins(group: _Group) -> None:
    group.producer.produce(120)
    member = group.add("m1")
    group.settle("m1 to own every partition")
    group.broker.push_request_errors(CONSUMER_GROUP_HEARTBEAT, [errors.FENCED_MEMBER_EPOCH])
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


def _heartbeats_to(broker: EmbeddedBroker, broker_id: int, count: int) -> bool:
    heartbeats = [
        r
        for r in broker.requests()
        if r.api_key == CONSUMER_GROUP_HEARTBEAT and r.broker_id == broker_id
    ]
    return len(heartbeats) >= count
