"""Issue #21's additions to the replication test cluster, seen over the wire by clients
nobody here wrote (kafka-python's and confluent-kafka's admin clients) and by ours: a
follower that fetches too slowly leaves the ISR and comes back, automatic
preferred-leader balancing, topic deletion through seed 004's states, JBOD log
directories with AlterReplicaLogDirs (API 34), and fenced brokers in DescribeCluster v2.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient as CkAdminClient
from confluent_kafka.cimpl import NewTopic as CkNewTopic
from kafka import TopicPartitionReplica as KpReplica
from kafka.admin import KafkaAdminClient

from coopconsumer._types import TopicPartition
from coopconsumer.admin import AdminClient, AdminOperationError, TopicPartitionReplica
from coopconsumer.testing import BrokerSpec, ReplicationCluster, replication_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(params=["thread", "subprocess"])
def cluster(request: pytest.FixtureRequest) -> Iterator[ReplicationCluster]:
    subprocess = request.param == "subprocess"
    with replication_cluster(4, racks=["a", "b"], manual_clock=True, subprocess=subprocess) as c:
        yield c


@pytest.fixture
def kp(cluster: ReplicationCluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        yield client
    finally:
        client.close()


def isr_of(kp: KafkaAdminClient, topic: str) -> list[list[int]]:
    (described,) = kp.describe_topics([topic])
    return [
        p["isr_nodes"] for p in sorted(described["partitions"], key=lambda p: p["partition_index"])
    ]


def test_a_follower_slower_than_the_producers_leaves_the_isr_then_rejoins(
    cluster: ReplicationCluster, kp: KafkaAdminClient
) -> None:
    cluster.create_topic("t", [[1, 2, 3]])
    cluster.set_replication_rate(3, 400.0)
    cluster.set_produce_rate("t", 0, 500.0)
    cluster.advance_time(29.0)  # replica.lag.time.max.ms: 30 s
    assert isr_of(kp, "t") == [[1, 2, 3]]
    assert cluster.partition("t", 0).replica_bytes[3] < cluster.partition("t", 0).size_bytes
    cluster.advance_time(1.0)
    assert isr_of(kp, "t") == [[1, 2]]
    cluster.set_produce_rate("t", 0, 0.0)
    cluster.advance_time(7.0)  # 3,000 B behind at 400 B/s: in sync again after 7.5 s
    assert isr_of(kp, "t") == [[1, 2]]
    cluster.advance_time(1.0)
    assert isr_of(kp, "t") == [[1, 2, 3]]


def test_leaders_go_back_to_their_preferred_replica_every_check_interval(
    cluster: ReplicationCluster,
) -> None:
    cluster.create_topic("t", [[1, 2], [2, 1], [3, 4]])
    cluster.kill_broker(1)
    cluster.revive_broker(1)
    cluster.advance_time(1.0)
    ck = CkAdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})

    def leaders() -> list[int]:
        metadata = ck.list_topics("t", timeout=10).topics["t"]
        return [metadata.partitions[i].leader for i in range(3)]

    assert leaders() == [2, 2, 3]
    cluster.advance_time(298.0)
    assert leaders() == [2, 2, 3]
    cluster.advance_time(1.0)  # leader.imbalance.check.interval.seconds: 300
    assert leaders() == [1, 2, 3]
    assert cluster.partition("t", 0).leader_epoch == 2


def test_deleting_a_topic_waits_for_the_brokers_that_are_down(
    cluster: ReplicationCluster,
) -> None:
    cluster.create_topic("t", [[1, 2], [3, 4]])
    cluster.kill_broker(4)
    ck = CkAdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    ck.delete_topics(["t"], request_timeout=10)["t"].result()
    assert "t" not in ck.list_topics(timeout=10).topics
    assert cluster.topics_being_deleted() == {"t": [(1, 4)]}
    with pytest.raises(KafkaException) as refused:
        ck.create_topics([CkNewTopic("t", num_partitions=1, replication_factor=1)])["t"].result()
    assert refused.value.args[0].code() == 36  # TOPIC_ALREADY_EXISTS
    assert "marked for deletion" in refused.value.args[0].str()
    cluster.revive_broker(4)  # its queued close-replica request runs
    assert cluster.topics_being_deleted() == {}
    ck.create_topics([CkNewTopic("t", num_partitions=1, replication_factor=1)])["t"].result()


def test_fenced_brokers_in_describe_cluster_v2(cluster: ReplicationCluster) -> None:
    cluster.kill_broker(3)
    host, port = cluster.address(1)
    kp = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=10_000)
    try:
        fenced = {b["broker_id"]: b["is_fenced"] for b in kp.describe_cluster()["brokers"]}
    finally:
        kp.close()
    assert fenced == {1: False, 2: False, 3: True, 4: False}
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as ours:
        live = ours.describe_cluster()
        assert [b.node_id for b in live.brokers] == [1, 2, 4]
        every = ours.describe_cluster(include_fenced_brokers=True)
        assert [(b.node_id, b.rack, b.is_fenced) for b in every.brokers] == [
            (1, "a", False),
            (2, "b", False),
            (3, "a", True),
            (4, "b", False),
        ]
        view = ours.cluster_view()
        assert sorted(view.brokers) == [1, 2, 4]
        assert sorted(view.fenced_brokers) == [3]


JBOD = [
    BrokerSpec(
        node_id=1, log_dirs=("/d1", "/d2"), disk_copy_bytes_per_s=1000.0, storage_bytes=10**6
    ),
    BrokerSpec(node_id=2, log_dirs=("/e1", "/e2"), storage_bytes=10**6),
]


@pytest.mark.parametrize("subprocess", [False, True], ids=["thread", "subprocess"])
def test_log_dirs_per_disk_and_moves_between_disks(subprocess: bool) -> None:
    with replication_cluster(brokers=JBOD, manual_clock=True, subprocess=subprocess) as cluster:
        cluster.create_topic("t", [[1, 2], [1, 2], [2, 1]])
        cluster.set_partition_size("t", 0, 5000)
        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
        try:
            (broker_1,) = kp.describe_log_dirs(brokers=[1])
            by_dir = {
                d["log_dir"]: sorted(
                    p["partition_index"] for t in d["topics"] for p in t["partitions"]
                )
                for d in broker_1["log_dirs"]
            }
            assert by_dir == {"/d1": [0, 2], "/d2": [1]}  # new replicas: the emptiest disk
            errors = kp.alter_replica_log_dirs(
                {KpReplica("t", 0, 1): "/d2", KpReplica("t", 1, 1): "/nope"}
            )
            assert [errors[KpReplica("t", p, 1)].errno for p in (0, 1)] == [0, 57]
        finally:
            kp.close()
        cluster.advance_time(2.0)
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as ours:
            dirs = ours.describe_log_dirs([1], partitions=[TopicPartition("t", 0)])[1]
            assert [
                (
                    d.path,
                    [(r.partition, r.size_bytes, r.offset_lag, r.is_future) for r in d.replicas],
                )
                for d in dirs
            ] == [("/d1", [(0, 5000, 0, False)]), ("/d2", [(0, 2000, 3000, True)])]
            assert [(d.total_bytes, d.usable_bytes) for d in dirs] == [
                (10**6, 10**6 - 5000),
                (10**6, 10**6 - 2000),
            ]
            cluster.advance_time(3.0)
            assert cluster.partition("t", 0).replica_dirs[1] == "/d2"
            ours.alter_replica_log_dirs({TopicPartitionReplica("t", 2, 2): "/e2"})
            with pytest.raises(AdminOperationError) as refused:
                ours.alter_replica_log_dirs(
                    {
                        TopicPartitionReplica("t", 1, 1): "/d9",
                        TopicPartitionReplica("t", 2, 1): "/d2",
                    }
                )
            assert {str(r): e.name for r, e in refused.value.errors.items()} == {  # type: ignore[attr-defined]
                "t-1@1": "LOG_DIR_NOT_FOUND"
            }
            assert refused.value.completed == (TopicPartitionReplica("t", 2, 1),)
            cluster.advance_time(1.0)
            assert cluster.partition("t", 2).replica_dirs == {2: "/e2", 1: "/d2"}
            view = ours.cluster_view().brokers[1]
            assert [(d.path, d.replicas, d.used_bytes) for d in view.log_dirs] == [
                ("/d1", 0, 0),
                ("/d2", 3, 5000),
            ]
