"""The healer against the replication test cluster, over the wire: a killed broker of
six with RF 2 healed in chunks, a bounce that triggers nothing, a standby resuming a
dead healer's chunk, a broker returning mid-healing (docs/admin.md, "Healing after a
broker failure")."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from coopconsumer._errors import BrokerConnectionError
from coopconsumer._types import TopicPartition
from coopconsumer.admin import AdminClient, BalancedReplicaAssignor
from coopconsumer.admin.heal import ChunkState, HealConfig, Healer, MemoryStateStore
from coopconsumer.metrics_export import register_prometheus
from coopconsumer.testing import BrokerState, ReplicationCluster, replication_cluster

pytestmark = pytest.mark.integration

MB = 1_000_000
CONFIG = HealConfig(failure_interval_ms=60_000, chunk_size=5)


class CountingAdmin(AdminClient):
    """Counts the reassignment targets that reach the broker; ``fail`` lists calls
    (by number) that raise a connection error before (``"lost-request"``) or after
    (``"lost-answer"``) the broker got them."""

    submissions: Counter[TopicPartition]
    fail: dict[int, str]
    calls: int

    def alter_partition_reassignments(
        self,
        targets: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: float | None = None,
    ) -> None:
        self.calls += 1
        failure = self.fail.get(self.calls)
        if failure == "lost-request":
            raise BrokerConnectionError("connection reset before the request went out")
        for tp, target in targets.items():
            if target is not None:
                self.submissions[tp] += 1
        super().alter_partition_reassignments(targets, timeout_ms=timeout_ms)
        if failure == "lost-answer":
            raise BrokerConnectionError("connection reset before the answer came")


@pytest.fixture
def cluster() -> Iterator[ReplicationCluster]:
    with replication_cluster(6, racks=["a", "b", "c"], manual_clock=True) as c:
        # 60 partitions, RF 2, every broker pair used; broker 3 holds 20 replicas.
        c.create_topic("t", [[1 + i % 6, 1 + (i + 1 + i // 6 % 5) % 6] for i in range(60)])
        for i in range(60):
            c.set_partition_size("t", i, MB)
        yield c


@pytest.fixture
def admin(cluster: ReplicationCluster) -> Iterator[CountingAdmin]:
    a = CountingAdmin({"bootstrap.servers": cluster.bootstrap})
    a.submissions = Counter()
    a.fail = {}
    a.calls = 0
    try:
        yield a
    finally:
        a.close()


def healer(cluster: ReplicationCluster, admin: AdminClient, store: MemoryStateStore) -> Healer:
    return Healer(
        admin,
        BalancedReplicaAssignor(),
        config=CONFIG,
        store=store,
        clock=lambda: cluster.now,
        sleep=cluster.advance_time,
        poll_interval_s=0.5,
    )


def hosted_by(cluster: ReplicationCluster, broker: int) -> list[int]:
    return [p.partition for p in cluster.partitions("t") if broker in p.replicas]


def healed(cluster: ReplicationCluster, dead: int) -> bool:
    return all(
        dead not in p.replicas and len(set(p.replicas)) == 2 and not p.reassigning
        for p in cluster.partitions("t")
    )


def test_a_dead_broker_is_healed_in_chunks_after_the_failure_interval(
    cluster: ReplicationCluster, admin: CountingAdmin
) -> None:
    store = MemoryStateStore()
    h = healer(cluster, admin, store)
    h.step()
    hosted = hosted_by(cluster, 3)
    assert len(hosted) == 20
    cluster.kill_broker(3)
    h.step()
    assert h.core is not None
    assert h.core.absent_since == {3: cluster.now}
    assert store.records["failure/3"] == {"first_seen": cluster.now, "failed": False}
    cluster.advance_time(59.0)
    h.step()
    assert not admin.submissions  # not failed yet
    cluster.advance_time(1.0)
    most_moving = 0
    for _ in range(200):
        h.step()
        most_moving = max(most_moving, sum(p.reassigning for p in cluster.partitions("t")))
        if healed(cluster, 3):
            break
        cluster.advance_time(0.5)
    assert healed(cluster, 3)
    assert h.core.failed_brokers == {3}
    chunks = h.core.chunks()
    assert [len(parts) for _, _, _, parts in chunks] == [5, 5, 5, 5]
    assert {state for _, _, state, _ in chunks} == {ChunkState.DONE}
    assert most_moving <= 5  # one chunk at a time
    assert sorted(tp.partition for tp in admin.submissions) == hosted
    assert set(admin.submissions.values()) == {1}
    live = {b.node_id: b.state for b in cluster.brokers()}
    for p in cluster.partitions("t"):
        if p.partition in hosted:
            assert 3 not in p.replicas
            assert all(live[r] is BrokerState.ONLINE for r in p.replicas)
    metrics = h.metrics()
    assert metrics["failed-brokers"] == 1.0
    assert metrics["chunks-done-total"] == 4.0
    assert metrics["under-replicated-partitions"] == 0.0
    assert metrics["bytes-moved-total"] == 20 * MB
    # Through the library's Prometheus exporter, as `coopconsumer heal` serves them.
    registry = CollectorRegistry()
    register_prometheus(h.metrics, registry, namespace="coopconsumer_heal")
    text = generate_latest(registry).decode()
    assert "coopconsumer_heal_failed_brokers 1.0" in text
    assert "coopconsumer_heal_chunks_done_total 4.0" in text


def test_a_bounce_within_the_interval_triggers_nothing(
    cluster: ReplicationCluster, admin: CountingAdmin
) -> None:
    store = MemoryStateStore()
    h = healer(cluster, admin, store)
    cluster.kill_broker(2)
    h.step()
    assert "failure/2" in store.records
    cluster.advance_time(50.0)
    h.step()
    cluster.revive_broker(2)
    h.step()
    assert "failure/2" not in store.records  # forgotten: a later absence starts afresh
    cluster.advance_time(120.0)
    h.run(max_steps=4)
    assert not admin.submissions
    assert h.core is not None
    assert h.core.chunks() == []
    assert h.core.failed_brokers == frozenset()


def test_a_standby_resumes_the_dead_healers_chunk_and_deadline(
    cluster: ReplicationCluster, admin: CountingAdmin
) -> None:
    store = MemoryStateStore()
    first = healer(cluster, admin, store)
    cluster.kill_broker(3)
    first.step()
    assert first.core is not None
    first_seen = first.core.absent_since[3]
    cluster.advance_time(30.0)
    # The active healer dies (no goodbye); a standby starts from the stored records.
    standby = healer(cluster, admin, store)
    standby.step()
    assert standby.core is not None
    assert standby.core.absent_since == {3: first_seen}  # the original deadline holds
    cluster.advance_time(30.0)
    standby.step()
    assert standby.core.failed_brokers == {3}
    running = [c for c in standby.core.chunks() if c[2] is ChunkState.RUNNING]
    assert len(running) == 1
    # It dies mid-chunk too; a third instance finishes the job.
    third = healer(cluster, admin, store)
    for _ in range(200):
        third.step()
        if healed(cluster, 3):
            break
        cluster.advance_time(0.5)
    assert healed(cluster, 3)
    assert set(admin.submissions.values()) == {1}  # no move was submitted twice
    assert third.core is not None
    assert {c[2] for c in third.core.chunks()} == {ChunkState.DONE}


def test_the_dead_broker_returning_mid_healing_cancels_the_queued_chunks(
    cluster: ReplicationCluster, admin: CountingAdmin
) -> None:
    # Slow moves: the first chunk is still running when broker 3 returns.
    for b in range(1, 7):
        cluster.set_replication_rate(b, MB / 10)
    store = MemoryStateStore()
    h = healer(cluster, admin, store)
    cluster.kill_broker(3)
    h.step()
    cluster.advance_time(60.0)
    h.step()
    assert h.core is not None
    states = [c[2] for c in h.core.chunks()]
    assert states == [ChunkState.RUNNING] + [ChunkState.QUEUED] * 3
    cluster.revive_broker(3)
    for _ in range(400):
        h.step()
        if not any(p.reassigning for p in cluster.partitions("t")):
            break
        cluster.advance_time(0.5)
    chunks = h.core.chunks()
    assert [c[2] for c in chunks] == [ChunkState.DONE] + [ChunkState.CANCELLED] * 3
    moved = {tp.partition for tp in chunks[0][3]}
    for p in cluster.partitions("t"):
        if p.partition in moved:
            assert 3 not in p.replicas
        elif p.partition in hosted_by(cluster, 3):
            assert p.partition not in {tp.partition for tp in admin.submissions}
    assert "failure/3" not in store.records
    assert h.core.failed_brokers == frozenset()


def test_the_service_survives_lost_requests_and_answers_without_double_moves(
    cluster: ReplicationCluster, admin: CountingAdmin
) -> None:
    admin.fail = {1: "lost-answer", 2: "lost-request", 4: "lost-answer"}
    h = healer(cluster, admin, MemoryStateStore())
    cluster.kill_broker(3)
    h.run(max_steps=2)
    cluster.advance_time(60.0)
    for _ in range(40):
        if healed(cluster, 3):
            break
        h.run(max_steps=1)
        cluster.advance_time(0.5)
    assert healed(cluster, 3)
    assert admin.calls > 4
    assert len(admin.submissions) == 20
    assert set(admin.submissions.values()) == {1}


def test_coopconsumer_heal_stops_at_once_on_sigterm() -> None:
    with replication_cluster(3) as cluster:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "coopconsumer",
                "heal",
                "--bootstrap-server",
                cluster.bootstrap,
                "--no-state-topic",
                "--poll-interval",
                "60",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert "healing" in child.stdout.readline()
            time.sleep(0.5)  # inside its 60 s wait
            child.send_signal(signal.SIGTERM)
            assert child.wait(timeout=10) == 0  # not after the 60 s poll
            assert "failed-brokers 0" in child.stdout.read()
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
