"""Healing on Apache Kafka (issue 33): SIGKILL a broker that leads partitions and the
healer's own state topic; the healer (its state topic and election on the same
cluster's group coordinator) brings every partition back to its replication factor,
in sync, on distinct racks, while a producer with ``acks=all`` runs throughout and
loses nothing (counted by a consumer at the end).

Its own cluster (a broker dies here): 4 KRaft nodes on racks a, b, c, a, so three
racks remain after the kill.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _kafka_helpers import PATIENCE_S, described, wait_for, wait_in_sync

from coopconsumer._types import TopicPartition
from coopconsumer.admin import AdminClient, ElectionType, KRaftReplicaAssignor, NewTopic
from coopconsumer.admin.heal import HealConfig, Healer
from coopconsumer.admin.heal._kafka import KafkaStateTopic, create_state_topic
from coopconsumer.testing import KafkaCluster, kafka_cluster, unique_name

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("heal-on-kafka")]

RACKS = {1: "a", 2: "b", 3: "c", 4: "a"}


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaCluster]:
    with kafka_cluster(brokers=4, racks=["a", "b", "c", "a"], startup_timeout_s=300) as cluster:
        yield cluster


class AcksAllProducer:
    """confluent-kafka with acks=all and idempotence writing numbered records until
    stopped; what was acknowledged is counted."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.acked: set[int] = set()
        self.errors: list[str] = []
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 300_000,
            }
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="acks-all-producer", daemon=True)
        self._thread.start()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.add(int(msg.value()))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(self.topic, str(n).encode(), on_delivery=self._delivered)
                n += 1
            except BufferError:
                pass
            self._producer.poll(0.002)
        self._producer.flush(PATIENCE_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(PATIENCE_S + 10)


def read_all(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Every record of ``topic`` (read_committed does not matter: no transactions)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("count"),
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {}
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(KafkaPartition(topic, p), timeout=30)
            ends[p] = high
        consumer.assign([KafkaPartition(topic, p, 0) for p in range(partitions)])
        values: list[int] = []
        positions = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + PATIENCE_S
        while any(positions[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, (positions, ends)
            for msg in consumer.consume(1000, timeout=1.0):
                value, partition, offset = msg.value(), msg.partition(), msg.offset()
                if msg.error() is None and value is not None and partition is not None:
                    values.append(int(value))
                    positions[partition] = (offset or 0) + 1
        return values
    finally:
        consumer.close()


def make_leader(admin: AdminClient, tp: TopicPartition, broker: int) -> None:
    """Make ``broker`` (a replica of ``tp``) its preferred replica and leader: a
    reorder of the same replicas (Kafka completes it at once), then an election."""
    d = described(admin, tp.topic)
    assert d is not None
    p = d.partitions[tp.partition]
    if p.leader == broker:
        return
    order = (broker, *(b for b in p.replicas if b != broker))
    admin.alter_partition_reassignments({tp: order})
    wait_for(
        f"{tp} reordered",
        lambda: (
            (x := described(admin, tp.topic)) is not None
            and x.partitions[tp.partition].replicas == order
        ),
    )
    admin.elect_leaders([tp], election_type=ElectionType.PREFERRED)
    wait_for(
        f"broker {broker} to lead {tp}",
        lambda: (
            (x := described(admin, tp.topic)) is not None
            and x.partitions[tp.partition].leader == broker
        ),
    )


def test_heal_after_sigkill_of_a_leader_with_an_acks_all_producer(kafka: KafkaCluster) -> None:
    topic, state, group = unique_name("orders"), unique_name("heal-state"), unique_name("heal")
    # The healer's admin client runs on the healer's thread; the test watches with
    # its own (an AdminClient is not thread-safe).
    with (
        AdminClient({"bootstrap.servers": kafka.bootstrap}) as admin,
        AdminClient({"bootstrap.servers": kafka.bootstrap}) as healer_admin,
    ):
        assert create_state_topic(admin, state) == 3
        admin.create_topics(
            [
                NewTopic(
                    topic,
                    num_partitions=8,
                    replication_factor=3,
                    configs={"min.insync.replicas": "2"},
                )
            ]
        )
        wait_in_sync(admin, topic, 8)
        wait_in_sync(admin, state, 1)
        store = KafkaStateTopic(
            {
                "bootstrap.servers": kafka.bootstrap,
                "group.id": group,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
            },
            topic=state,
        )
        healer = Healer(
            healer_admin,
            KRaftReplicaAssignor(),
            config=HealConfig(failure_interval_ms=5_000, chunk_size=3, retry_backoff_ms=1_000),
            store=store,
            election=store,
            poll_interval_s=0.5,
            full_view_interval_s=5.0,
        )
        stop = threading.Event()
        healing = threading.Thread(target=healer.run, args=(stop,), name="healer", daemon=True)
        producer = AcksAllProducer(kafka.bootstrap, topic)
        try:
            healing.start()
            wait_for("an active healer", lambda: healer.core is not None)
            wait_for("acknowledged records", lambda: len(producer.acked) > 200)
            # The victim leads the state topic and is on rack a, the rack with two
            # brokers, so three racks remain for every partition after the kill.
            state_now = described(admin, state)
            assert state_now is not None
            replicas = state_now.partitions[0].replicas
            victim = next(b for b in replicas if RACKS[b] == "a")
            make_leader(admin, TopicPartition(state, 0), victim)
            orders = described(admin, topic)
            assert orders is not None
            if not any(p.leader == victim for p in orders.partitions):
                hosted = next(p for p in orders.partitions if victim in p.replicas)
                make_leader(admin, TopicPartition(topic, hosted.partition), victim)
            topic_now = described(admin, topic)
            assert topic_now is not None
            leads = [p.partition for p in topic_now.partitions if p.leader == victim]
            assert leads, f"broker {victim} leads no partition of {topic}"
            killed_at = time.monotonic()
            kafka.kill(victim)

            def healed() -> bool:
                for name, count in ((topic, 8), (state, 1)):
                    d = described(admin, name)
                    if d is None or len(d.partitions) != count:
                        return False
                    for p in d.partitions:
                        if victim in p.replicas or len(p.replicas) != 3:
                            return False
                        if set(p.isr) != set(p.replicas) or p.leader < 0:
                            return False
                return not admin.list_partition_reassignments()

            wait_for(
                f"every partition healed off broker {victim}",
                healed,
                timeout_s=3 * PATIENCE_S,
                every_s=1.0,
            )
            healed_after_s = time.monotonic() - killed_at
            acked_at_heal = len(producer.acked)
        finally:
            producer.stop()
            stop.set()
            healing.join(PATIENCE_S)
            store.close()
        for name in (topic, state):
            d = described(admin, name)
            assert d is not None
            for p in d.partitions:
                assert len({RACKS[b] for b in p.replicas}) == 3, (name, p)
    assert not producer.errors, producer.errors[:5]
    assert acked_at_heal > 200
    values = read_all(kafka.bootstrap, topic, 8)
    missing = producer.acked - set(values)
    assert not missing, f"{len(missing)} acknowledged record(s) lost, e.g. {sorted(missing)[:5]}"
    print(
        f"healed {healed_after_s:.1f} s after SIGKILL; "
        f"{len(producer.acked)} records acknowledged, all read back"
    )
