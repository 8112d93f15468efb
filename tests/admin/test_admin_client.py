"""coopconsumer.admin.AdminClient against the replication test cluster."""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping

import pytest

from coopconsumer._errors import BrokerConnectionError, ConfigurationError
from coopconsumer._security import SecurityConfig
from coopconsumer._types import TopicPartition
from coopconsumer.admin import (
    AdminClient,
    AdminOperationError,
    AlterConfigOp,
    AlterConfigOpType,
    BalancedReplicaAssignor,
    ClusterView,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ElectionResult,
    ElectionType,
    NewPartitions,
    NewTopic,
    PartitionReassignment,
    ReplicaAssignor,
    ReplicaAssignorError,
)
from coopconsumer.admin._admin_client import parse_admin_config, principal_of
from coopconsumer.admin._zookeeper import kafka_placement
from coopconsumer.testing import ReplicationCluster, replication_cluster

pytestmark = pytest.mark.integration

TOPIC = ConfigResource(ConfigResourceType.TOPIC, "t")


@pytest.fixture(params=["thread", "subprocess"])
def cluster(request: pytest.FixtureRequest) -> Iterator[ReplicationCluster]:
    subprocess = request.param == "subprocess"
    with replication_cluster(4, racks=["a", "b"], manual_clock=True, subprocess=subprocess) as c:
        yield c


@pytest.fixture
def admin(cluster: ReplicationCluster) -> Iterator[AdminClient]:
    with AdminClient({"bootstrap.servers": cluster.bootstrap, "request.timeout.ms": 5000}) as a:
        yield a


def test_configuration_uses_the_consumer_keys() -> None:
    parsed = parse_admin_config(
        {
            "bootstrap.servers": "h1:9092,h2:9093",
            "client.id": "ops",
            "retry.backoff.ms": 50,
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "secret",
            "replica.assignor": "balanced",
        }
    )
    assert parsed.client.bootstrap_servers == (("h1", 9092), ("h2", 9093))
    assert (parsed.client.client_id, parsed.client.retry_backoff_ms) == ("ops", 50)
    assert parsed.client.security.uses_sasl
    assert parsed.replica_assignor == "balanced"
    with pytest.raises(ConfigurationError, match="consumer setting"):
        parse_admin_config({"bootstrap.servers": "h:1", "group.id": "g"})
    with pytest.raises(ConfigurationError, match="unknown admin client key"):
        parse_admin_config({"bootstrap.servers": "h:1", "replica.asignor": "balanced"})
    with pytest.raises(ConfigurationError, match="required"):
        parse_admin_config({})
    with pytest.raises(ConfigurationError, match="unknown assignor"):
        AdminClient({"bootstrap.servers": "h:1", "replica.assignor": "nope"})


@pytest.mark.parametrize(("partitions", "rf"), [(0, 1), (1, 0), (True, 1)])
def test_new_topic_counts_must_be_positive(partitions: int, rf: int) -> None:
    with pytest.raises(ConfigurationError, match=">= 1"):
        NewTopic("t", num_partitions=partitions, replication_factor=rf)
    with pytest.raises(ConfigurationError, match="non-empty"):
        NewTopic("")
    for bad in ({}, {1: [1]}, {0: [1], 2: [1]}):
        with pytest.raises(ConfigurationError, match=r"0\.\.n-1"):
            NewTopic("t", assignment=bad)
    with pytest.raises(ConfigurationError, match="needs a replica"):
        NewTopic("t", assignment={0: []})


def test_describe_cluster(admin: AdminClient, cluster: ReplicationCluster) -> None:
    described = admin.describe_cluster()
    assert described.cluster_id == "coopconsumer-test-cluster"
    assert [(b.node_id, b.rack) for b in described.brokers] == [
        (1, "a"),
        (2, "b"),
        (3, "a"),
        (4, "b"),
    ]
    cluster.kill_broker(1)
    assert [b.node_id for b in admin.describe_cluster().brokers] == [2, 3, 4]


def test_create_topics_places_with_kafkas_algorithm_and_sends_it(
    admin: AdminClient, cluster: ReplicationCluster
) -> None:
    placed = admin.create_topics(
        [
            NewTopic("t", num_partitions=6, replication_factor=2, configs={"retention.ms": "1"}),
            NewTopic("explicit", assignment={0: [4, 3], 1: [3, 2]}),
        ],
        replica_assignor="zookeeper",
    )
    racks = {1: "a", 2: "b", 3: "a", 4: "b"}
    start = zlib.crc32(b"t") % 4
    expected = kafka_placement(racks, num_partitions=6, replication_factor=2, start_index=start)
    assert placed == {"t": expected, "explicit": {0: (4, 3), 1: (3, 2)}}
    assert {p.partition: p.replicas for p in cluster.partitions("t")} == expected
    assert [p.replicas for p in cluster.partitions("explicit")] == [(4, 3), (3, 2)]
    assert admin.describe_configs([TOPIC])[TOPIC]["retention.ms"].value == "1"


def test_create_topics_with_a_per_call_assignor_and_validate_only(
    admin: AdminClient, cluster: ReplicationCluster
) -> None:
    placed = admin.create_topics(
        [NewTopic("t", num_partitions=4, replication_factor=2)],
        replica_assignor=BalancedReplicaAssignor(draining={1}),
        validate_only=True,
    )
    assert all(1 not in replicas for replicas in placed["t"].values())
    assert cluster.topics() == []  # validate_only: nothing created


def test_create_topics_errors(admin: AdminClient, cluster: ReplicationCluster) -> None:
    cluster.create_topic("taken", [[1]])
    with pytest.raises(AdminOperationError) as info:
        admin.create_topics(
            [NewTopic("taken"), NewTopic("fresh"), NewTopic("bad", assignment={0: [9]})]
        )
    assert set(info.value.errors) == {"taken", "bad"}
    assert info.value.errors["taken"].code == 36  # type: ignore[attr-defined]
    assert set(info.value.completed) == {"fresh"}
    with pytest.raises(ReplicaAssignorError):
        admin.create_topics([NewTopic("huge", replication_factor=5), NewTopic("other")])
    assert "other" not in cluster.topics()  # refused before anything was sent


def test_create_partitions(admin: AdminClient, cluster: ReplicationCluster) -> None:
    admin.create_topics([NewTopic("t", num_partitions=2, replication_factor=2)])
    added = admin.create_partitions({"t": 5})
    assert sorted(added["t"]) == [2, 3, 4]
    assert len(cluster.partitions("t")) == 5
    with pytest.raises(AdminOperationError) as info:
        admin.create_partitions({"t": 5, "missing": 3})
    assert set(info.value.errors) == {"t", "missing"}


def test_create_partitions_does_not_count_the_replicas_of_a_move_in_flight(
    admin: AdminClient, cluster: ReplicationCluster
) -> None:
    cluster.create_topic("t", [[1, 2], [2, 3]])
    cluster.set_replication_rate(3, 1.0)
    cluster.set_replication_rate(4, 1.0)
    cluster.set_partition_size("t", 0, 1000)
    admin.alter_partition_reassignments({TopicPartition("t", 0): [3, 4]})
    assert cluster.partition("t", 0).replicas == (3, 4, 1, 2)
    # Partition 0 lists 4 replicas while it moves; the topic's replication factor is 2.
    # Kafka's controller would check new partitions against the 4: refused, not
    # created with twice the replicas.
    with pytest.raises(AdminOperationError) as info:
        admin.create_partitions({"t": 4})
    error = info.value.errors["t"]
    assert error.name == "REASSIGNMENT_IN_PROGRESS"  # type: ignore[attr-defined]
    assert "replication factor is 2" in str(error)
    assert len(cluster.partitions("t")) == 2
    # Growing the replication factor keeps partition 0's count: new partitions get 3.
    cluster.create_topic("u", [[1, 2]])
    admin.alter_partition_reassignments({TopicPartition("u", 0): [1, 2, 3]})
    added = admin.create_partitions({"u": 2})["u"]
    assert [len(r) for r in added.values()] == [3]
    admin.alter_partition_reassignments({TopicPartition("t", 0): None})
    added = admin.create_partitions({"t": 4})["t"]
    assert [len(r) for r in added.values()] == [2, 2]


def test_assignors_get_the_principal(cluster: ReplicationCluster) -> None:
    seen: list[str | None] = []

    class Recording(ReplicaAssignor):
        name = "recording"

        def assign(
            self, partitions: NewPartitions, cluster: ClusterView
        ) -> Mapping[int, tuple[int, ...]]:
            seen.append(partitions.principal)
            return dict.fromkeys(partitions.partition_ids, (1,))

    with AdminClient({"bootstrap.servers": cluster.bootstrap}, replica_assignor=Recording()) as a:
        assert a.principal == "User:ANONYMOUS"
        a.create_topics([NewTopic("t")])
        a.create_partitions({"t": 2})
    with AdminClient(
        {"bootstrap.servers": cluster.bootstrap},
        replica_assignor=Recording(),
        principal="User:tenant-blue",
    ) as a:
        a.create_topics([NewTopic("u")])
    assert seen == ["User:ANONYMOUS", "User:ANONYMOUS", "User:tenant-blue"]
    sasl = SecurityConfig(
        security_protocol="sasl_plaintext",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="alice",
        sasl_password="secret",
    )
    assert principal_of(sasl) == "User:alice"
    oauth = SecurityConfig(
        security_protocol="sasl_ssl",
        sasl_mechanism="OAUTHBEARER",
        oauth_cb=lambda config: ("token", 0.0),
    )
    assert principal_of(oauth) is None  # only the broker knows the token's subject


def test_describe_and_delete_topics(admin: AdminClient, cluster: ReplicationCluster) -> None:
    cluster.create_topic("t", [[1, 2], [2, 3]])
    cluster.kill_broker(3)
    described = admin.describe_topics(["t"])["t"]
    assert described.replication_factor == 2
    assert [(p.leader, p.isr, p.offline_replicas) for p in described.partitions] == [
        (1, (1, 2), ()),
        (2, (2,), (3,)),
    ]
    assert set(admin.describe_topics()) == {"t"}
    with pytest.raises(AdminOperationError) as info:
        admin.describe_topics(["t", "nope"])
    assert set(info.value.errors) == {"nope"}
    assert set(info.value.completed) == {"t"}
    with pytest.raises(AdminOperationError):
        admin.delete_topics(["t", "nope"])
    assert cluster.topics() == []


def test_reassign_list_cancel_and_elect(admin: AdminClient, cluster: ReplicationCluster) -> None:
    cluster.create_topic("t", [[1, 2], [2, 3]])
    for broker in cluster.broker_ids:
        cluster.set_replication_rate(broker, 100.0)
    cluster.set_partition_size("t", 0, 1000)
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    admin.alter_partition_reassignments({tp0: [3, 4], tp1: [2, 4]})
    ongoing = admin.list_partition_reassignments()
    assert ongoing[tp0] == PartitionReassignment(
        replicas=(3, 4, 1, 2), adding=(3, 4), removing=(1, 2)
    )
    assert ongoing[tp0].target == (3, 4)
    assert ongoing[tp0].original == (1, 2)
    assert admin.list_partition_reassignments([tp0]).keys() == {tp0}
    cluster.advance_time(1.0)
    assert tp1 not in admin.list_partition_reassignments()  # empty partition: done at once
    admin.alter_partition_reassignments({tp0: None})
    assert admin.list_partition_reassignments() == {}
    assert cluster.partition("t", 0).replicas == (1, 2)
    with pytest.raises(AdminOperationError) as info:
        admin.alter_partition_reassignments({tp0: None, TopicPartition("t", 9): [1]})
    assert {tp: e.code for tp, e in info.value.errors.items()} == {  # type: ignore[attr-defined]
        tp0: 85,
        TopicPartition("t", 9): 3,
    }
    assert admin.elect_leaders([tp0, tp1]) == {
        tp0: ElectionResult.NOT_NEEDED,
        tp1: ElectionResult.NOT_NEEDED,
    }
    cluster.kill_broker(1)
    cluster.revive_broker(1)
    cluster.advance_time(20.0)
    assert admin.elect_leaders([tp0]) == {tp0: ElectionResult.ELECTED}
    cluster.kill_broker(2)
    with pytest.raises(AdminOperationError):
        admin.elect_leaders([tp1])  # the preferred leader is dead
    unclean = admin.elect_leaders([tp1], election_type=ElectionType.UNCLEAN)
    assert unclean == {tp1: ElectionResult.NOT_NEEDED}  # broker 4 leads it


def test_configs(admin: AdminClient, cluster: ReplicationCluster) -> None:
    cluster.create_topic("t", [[1]])
    broker = ConfigResource(ConfigResourceType.BROKER, "3")
    admin.incremental_alter_configs(
        {
            TOPIC: [
                AlterConfigOp("min.insync.replicas", AlterConfigOpType.SET, "1"),
                AlterConfigOp(
                    "leader.replication.throttled.replicas", AlterConfigOpType.APPEND, "0:1"
                ),
            ],
            broker: [
                AlterConfigOp("leader.replication.throttled.rate", AlterConfigOpType.SET, "10")
            ],
        }
    )
    configs = admin.describe_configs([TOPIC, broker])
    assert configs[TOPIC]["min.insync.replicas"].source is ConfigSource.TOPIC_CONFIG
    assert configs[TOPIC]["cleanup.policy"].is_default
    assert configs[broker]["leader.replication.throttled.rate"].value == "10"
    assert configs[broker]["broker.rack"].read_only
    with pytest.raises(AdminOperationError) as info:
        admin.incremental_alter_configs(
            {TOPIC: [AlterConfigOp("bogus", AlterConfigOpType.SET, "1")]}
        )
    assert info.value.errors[TOPIC].code == 40  # type: ignore[attr-defined]
    with pytest.raises(AdminOperationError):
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "nope")])


def test_log_dirs_and_cluster_view(admin: AdminClient, cluster: ReplicationCluster) -> None:
    cluster.create_topic("t", [[1, 2], [2, 3]])
    cluster.set_partition_size("t", 0, 4096)
    dirs = admin.describe_log_dirs([1, 2])
    assert [(r.topic, r.partition, r.size_bytes) for r in dirs[2][0].replicas] == [
        ("t", 0, 4096),
        ("t", 1, 0),
    ]
    assert dirs[1][0].total_bytes == 1 << 40
    view = admin.cluster_view()
    assert {b: (v.replicas, v.leaders, v.used_bytes) for b, v in view.brokers.items()} == {
        1: (1, 1, 4096),
        2: (2, 1, 4096),
        3: (1, 0, 0),
        4: (0, 0, 0),
    }
    cluster.kill_broker(4)
    with pytest.raises(AdminOperationError) as info:
        admin.describe_log_dirs([1, 4])
    assert isinstance(info.value.errors[4], BrokerConnectionError)
    assert set(info.value.completed) == {1}
