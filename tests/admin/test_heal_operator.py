"""Issue #21's healer additions on the replication test cluster, over the wire: the
state topic's replication factor, failed moves retried with backoff and reported,
other tools' moves left alone, storage figures handed to the assignor, and cheap
discovery (the requests per poll, counted by the cluster)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

import pytest
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient

from coopconsumer.admin import (
    AdminClient,
    BalancedReplicaAssignor,
    ClusterView,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    ReplicaAssignor,
)
from coopconsumer.admin.heal import ChunkState, HealConfig, Healer, MemoryStateStore
from coopconsumer.admin.heal._heal_cli import format_status
from coopconsumer.admin.heal._kafka import create_state_topic
from coopconsumer.testing import ReplicationCluster, replication_cluster

pytestmark = pytest.mark.integration

MB = 1_000_000


@pytest.fixture
def cluster() -> Iterator[ReplicationCluster]:
    with replication_cluster(6, racks=["a", "b", "c"], manual_clock=True) as c:
        c.create_topic("t", [[1 + i % 6, 1 + (i + 1) % 6] for i in range(12)])
        for i in range(12):
            c.set_partition_size("t", i, MB)
        yield c


def healer(
    cluster: ReplicationCluster,
    admin: AdminClient,
    *,
    assignor: ReplicaAssignor | None = None,
    store: MemoryStateStore | None = None,
    config: HealConfig | None = None,
) -> Healer:
    return Healer(
        admin,
        assignor or BalancedReplicaAssignor(),
        config=config
        or HealConfig(failure_interval_ms=10_000, chunk_size=4, retry_backoff_ms=20_000),
        store=store or MemoryStateStore(),
        clock=lambda: cluster.now,
        sleep=cluster.advance_time,
        poll_interval_s=1.0,
    )


def test_the_state_topic_gets_three_replicas_on_three_racks(cluster: ReplicationCluster) -> None:
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        assert create_state_topic(admin, "__heal") == 3
        assert create_state_topic(admin, "__heal") is None  # exists already
        (p,) = cluster.partitions("__heal")
        racks = {b.node_id: b.rack for b in cluster.brokers()}
        assert len({racks[r] for r in p.replicas}) == 3
        configs = admin.describe_configs([_topic("__heal")])[_topic("__heal")]
        assert configs["min.insync.replicas"].value == "2"
        assert configs["cleanup.policy"].value == "compact"
        cluster.kill_broker(p.leader)
        assert cluster.partition("__heal", 0).leader != -1  # still online
        assert create_state_topic(admin, "__one", replication_factor=1) == 1
    with (
        replication_cluster(2, manual_clock=True) as small,
        AdminClient({"bootstrap.servers": small.bootstrap}) as admin,
    ):
        assert create_state_topic(admin) == 2  # min(3, brokers)


def _topic(name: str) -> ConfigResource:
    return ConfigResource(ConfigResourceType.TOPIC, name)


def test_partitions_another_tool_moves_are_left_alone_then_retried_with_backoff(
    cluster: ReplicationCluster, caplog: pytest.LogCaptureFixture
) -> None:
    # Another tool moves t-2 (on 3 and 4) to 3 and 5, slowly; broker 4 then dies.
    for b in cluster.broker_ids:
        cluster.set_replication_rate(b, 10 * MB)
    cluster.set_replication_rate(5, MB / 100)
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        kp.alter_partition_reassignments({KpTopicPartition("t", 2): [3, 5]})
    finally:
        kp.close()
    cluster.kill_broker(4)
    store = MemoryStateStore()
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        h = healer(cluster, admin, store=store)
        caplog.set_level(logging.ERROR, logger="coopconsumer.admin.heal")
        h.run(max_steps=20)
        hosted = [p.partition for p in cluster.partitions("t") if 4 in p.replicas]
        assert hosted == [2]  # every other partition of broker 4 is healed
        assert cluster.partition("t", 2).reassigning  # the other tool's move, untouched
        assert cluster.partition("t", 2).adding == (5,)
        alerts = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(alerts) == 1
        assert "ALERT: 1 partition(s) of failed broker 4 not healed" in alerts[0]
        assert (
            "t:2: another tool is moving it (replicas [3, 5, 4], adding [5], removing [4])"
            in alerts[0]
        )
        assert h.metrics()["partitions-awaiting-retry"] == 1.0
        status = format_status(store.records, cluster.now)
        (line,) = [s for s in status.splitlines() if s.startswith("retry:")]
        assert "1 partition(s) of broker 4 not healed yet (t:2: another tool is moving it" in line
        assert "next try in" in line
        # The other move ends (its target has no replica on 4): the retry heals nothing
        # more, since nothing is left on broker 4.
        cluster.set_replication_rate(5, 10 * MB)
        h.run(max_steps=40)
        assert all(4 not in p.replicas for p in cluster.partitions("t"))
        retries = [c for c in h.core.chunks() if ".r" in c[0]]  # type: ignore[union-attr]
        assert [state for _, _, state, _ in retries] == [ChunkState.SKIPPED]


def test_a_failed_move_is_retried_after_its_backoff(cluster: ReplicationCluster) -> None:
    for b in cluster.broker_ids:
        cluster.set_replication_rate(b, MB / 10)  # a chunk's moves take a while
    cluster.kill_broker(1)
    store = MemoryStateStore()
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        h = healer(cluster, admin, store=store)
        h.run(max_steps=11)  # failed at 10 s, first chunk started
        running = [c for c in h.core.chunks() if c[2] is ChunkState.RUNNING]  # type: ignore[union-attr]
        assert running
        # Someone reverts one of its moves behind the healer's back.
        (chunk_id, _, _, parts) = running[0]
        victim = parts[0]
        admin.alter_partition_reassignments({victim: None})
        h.run(max_steps=30)
        retry = [c for c in h.core.chunks() if c[0] == f"{chunk_id}.r2"]  # type: ignore[union-attr]
        assert retry
        assert retry[0][3] == (victim,)
        assert h.core.retries() == [] or h.core.retries()[0][1] == 2  # type: ignore[union-attr]
        h.run(max_steps=40)  # the 20 s backoff passes: healed on the second attempt
        assert all(1 not in p.replicas for p in cluster.partitions("t"))
        assert h.core.chunk_state(f"{chunk_id}.r2") is ChunkState.DONE  # type: ignore[union-attr]


def test_the_assignor_gets_the_brokers_storage(cluster: ReplicationCluster) -> None:
    seen: list[dict[int, int | None]] = []

    class Recording(BalancedReplicaAssignor):
        def assign(
            self, partitions: NewPartitions, cluster_view: ClusterView
        ) -> Mapping[int, tuple[int, ...]]:
            seen.append({b.node_id: b.used_bytes for b in cluster_view.brokers.values()})
            return super().assign(partitions, cluster_view)

    cluster.kill_broker(3)
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        healer(cluster, admin, assignor=Recording()).run(max_steps=12)
    assert seen
    # Every live broker with its bytes (each holds 4 replicas of 1 MB, minus broker 3's).
    assert all(used is not None and used > 0 for used in seen[0].values())


def test_discovery_asks_one_request_per_poll_when_nothing_happens(
    cluster: ReplicationCluster,
) -> None:
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        h = healer(cluster, admin)
        h.run(max_steps=2)
        cluster.reset_request_counts()
        h.run(max_steps=10)
        counts = cluster.request_counts()
        assert counts == {"DescribeClusterRequest": 10}
        h.full_view_interval_s = 5.0
        cluster.reset_request_counts()
        h.run(max_steps=10)
        counts = cluster.request_counts()
        assert counts["DescribeClusterRequest"] == 10
        assert counts["MetadataRequest"] == 2  # a full view every 5 s
        assert counts["ListPartitionReassignmentsRequest"] == 2
        assert "DescribeLogDirsRequest" not in counts


def test_healing_with_a_throttle_leaves_the_dead_broker_out_of_it(
    cluster: ReplicationCluster,
) -> None:
    # The throttle names the failed broker (an original replica); asking it for its
    # configuration failed every step, so the healer never moved anything.
    cluster.kill_broker(3)
    config = HealConfig(failure_interval_ms=10_000, chunk_size=4, throttle_bytes_per_s=50 * MB)
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        h = healer(cluster, admin, config=config)
        h.run(max_steps=40)
        assert all(3 not in p.replicas for p in cluster.partitions("t"))
        brokers = [ConfigResource(ConfigResourceType.BROKER, str(b)) for b in (1, 2, 4, 5, 6)]
        for entries in admin.describe_configs([*brokers, _topic("t")]).values():
            for key in (
                "leader.replication.throttled.rate",
                "follower.replication.throttled.rate",
                "leader.replication.throttled.replicas",
                "follower.replication.throttled.replicas",
            ):
                if key in entries:
                    assert entries[key].is_default or not entries[key].value, key
