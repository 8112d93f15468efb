"""The replication test cluster on the wire, cross-checked with admin clients nobody
here wrote: confluent-kafka's AdminClient (librdkafka) and kafka-python's."""

from __future__ import annotations

import os
import signal
import socket
import struct
from collections.abc import Iterator

import pytest
from confluent_kafka import ElectionType, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.cimpl import NewPartitions, NewTopic
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient

from coopconsumer._errors import BrokerConnectionError, ConfigurationError, RequestTimeoutError
from coopconsumer._io._client import ClientConfig, KafkaClient
from coopconsumer._protocol import decode_response, encode_request
from coopconsumer._protocol.admin_messages import DescribeClusterRequest
from coopconsumer._protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from coopconsumer.testing import (
    BrokerState,
    ClusterCommandError,
    ReplicationCluster,
    replication_cluster,
)

pytestmark = pytest.mark.integration


@pytest.fixture(params=["thread", "subprocess"])
def cluster(request: pytest.FixtureRequest) -> Iterator[ReplicationCluster]:
    subprocess = request.param == "subprocess"
    with replication_cluster(4, racks=["a", "b"], manual_clock=True, subprocess=subprocess) as c:
        yield c


def admin(cluster: ReplicationCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})


def test_confluent_kafka_creates_describes_and_deletes_topics(cluster: ReplicationCluster) -> None:
    a = admin(cluster)
    futures = a.create_topics(
        [
            NewTopic("counted", num_partitions=3, replication_factor=2),
            NewTopic("placed", num_partitions=2, replica_assignment=[[1, 2], [3, 4]]),
            NewTopic("bad", num_partitions=1, replica_assignment=[[1, 9]]),
        ],
        request_timeout=10,
    )
    futures["counted"].result()
    futures["placed"].result()
    with pytest.raises(KafkaException) as info:
        futures["bad"].result()
    assert info.value.args[0].code() == 39  # INVALID_REPLICA_ASSIGNMENT
    assert "no such broker is registered" in info.value.args[0].str()

    metadata = a.list_topics(timeout=10)
    assert {p: m.replicas for p, m in metadata.topics["placed"].partitions.items()} == {
        0: [1, 2],
        1: [3, 4],
    }
    assert len(metadata.topics["counted"].partitions) == 3
    described = a.describe_topics(TopicCollection(["placed"]), request_timeout=10)[
        "placed"
    ].result()
    assert [(p.id, p.leader.id, [r.id for r in p.isr]) for p in described.partitions] == [
        (0, 1, [1, 2]),
        (1, 3, [3, 4]),
    ]

    a.create_partitions([NewPartitions("placed", 3, [[2, 3]])])["placed"].result()
    assert cluster.partition("placed", 2).replicas == (2, 3)
    with pytest.raises(KafkaException):
        a.create_partitions([NewPartitions("placed", 2)])["placed"].result()

    a.delete_topics(["counted"], request_timeout=10)["counted"].result()
    assert cluster.topics() == ["placed"]


def test_confluent_kafka_configs_and_cluster(cluster: ReplicationCluster) -> None:
    cluster.create_topic("t", [[1, 2]])
    a = admin(cluster)
    resource = ConfigResource("topic", "t")
    change = ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)
    a.incremental_alter_configs([ConfigResource("topic", "t", incremental_configs=[change])])[
        resource
    ].result()
    configs = a.describe_configs([resource])[resource].result()
    assert configs["min.insync.replicas"].value == "2"
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].is_default
    bad = ConfigEntry("min.insync.replicas", "0", incremental_operation=AlterConfigOpType.SET)
    with pytest.raises(KafkaException):
        a.incremental_alter_configs([ConfigResource("topic", "t", incremental_configs=[bad])])[
            resource
        ].result()

    broker = ConfigResource("broker", "2")
    assert a.describe_configs([broker])[broker].result()["broker.rack"].value == "b"

    described = a.describe_cluster(request_timeout=10).result()
    assert described.cluster_id == "coopconsumer-test-cluster"
    assert [(n.id, n.rack) for n in described.nodes] == [(1, "a"), (2, "b"), (3, "a"), (4, "b")]

    cluster.kill_broker(3)
    described = a.describe_cluster(request_timeout=10).result()
    assert [n.id for n in described.nodes] == [1, 2, 4]


def test_confluent_kafka_elects_preferred_leaders(cluster: ReplicationCluster) -> None:
    cluster.create_topic("t", [[1, 2]])
    cluster.kill_broker(1)
    cluster.revive_broker(1)
    cluster.advance_time(1.0)
    assert cluster.partition("t", 0).leader == 2
    a = admin(cluster)
    result = a.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition("t", 0)]).result()
    assert all(error is None for error in result.values())
    assert (cluster.partition("t", 0).leader, cluster.partition("t", 0).leader_epoch) == (1, 2)


def test_kafka_python_reassigns_lists_cancels_and_reads_log_dirs(
    cluster: ReplicationCluster,
) -> None:
    cluster.create_topic("t", [[1, 2], [2, 3]])
    for broker in cluster.broker_ids:
        cluster.set_replication_rate(broker, 100.0)
    cluster.set_partition_size("t", 0, 1000)
    cluster.set_partition_size("t", 1, 1000)
    a = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        answer = a.alter_partition_reassignments(
            {
                KpTopicPartition("t", 0): [3, 4],
                KpTopicPartition("t", 1): [2, 4],
                KpTopicPartition("t", 7): [1],
            }
        )
        assert answer[KpTopicPartition("t", 0)] is None
        assert answer[KpTopicPartition("t", 7)].errno == 3  # UNKNOWN_TOPIC_OR_PARTITION
        ongoing = a.list_partition_reassignments()
        assert ongoing[KpTopicPartition("t", 0)] == {
            "replicas": [3, 4, 1, 2],
            "adding_replicas": [3, 4],
            "removing_replicas": [1, 2],
        }
        cluster.advance_time(5.0)
        dirs = a.describe_log_dirs(brokers=[4])
        partitions = dirs[0]["log_dirs"][0]["topics"][0]["partitions"]
        # Broker 4 copies two partitions at once: 50 B/s each.
        assert [
            (p["partition_index"], p["partition_size"], p["offset_lag"]) for p in partitions
        ] == [
            (0, 250, 750),
            (1, 250, 750),
        ]
        cancel = a.alter_partition_reassignments({KpTopicPartition("t", 1): None})
        assert cancel[KpTopicPartition("t", 1)] is None
        assert cluster.partition("t", 1).replicas == (2, 3)
        cluster.advance_time(10.0)
        assert a.list_partition_reassignments() == {}
        assert cluster.partition("t", 0).replicas == (3, 4)
        again = a.alter_partition_reassignments({KpTopicPartition("t", 1): None})
        assert again[KpTopicPartition("t", 1)].errno == 85  # NO_REASSIGNMENT_IN_PROGRESS
        elected = a.elect_leaders(0, {"t": [0]}, raise_errors=False)
        assert elected.replica_election_results[0].partition_result[0].error_code == 84
    finally:
        a.close()


def test_dead_brokers_refuse_connections_and_come_back_on_the_same_port(
    cluster: ReplicationCluster,
) -> None:
    host, port = cluster.address(2)
    cluster.kill_broker(2)
    assert cluster.brokers()[1].state is BrokerState.DEAD
    with pytest.raises(ConnectionRefusedError), socket.create_connection((host, port), timeout=2):
        pass
    cluster.revive_broker(2)
    with socket.create_connection((host, port), timeout=2):
        pass
    with pytest.raises(ClusterCommandError):
        cluster.kill_broker(42)


def test_a_paused_broker_answers_only_after_it_is_revived(cluster: ReplicationCluster) -> None:
    client = KafkaClient(ClientConfig.from_bootstrap(cluster.bootstrap, request_timeout_ms=2_000))
    try:
        client.metadata([])
        client.negotiated_version(1, DescribeClusterRequest)
        cluster.pause_broker(1)
        with pytest.raises(RequestTimeoutError):
            client.request(1, DescribeClusterRequest(), timeout_ms=300)
        cluster.revive_broker(1)
        answer = client.request(2, DescribeClusterRequest())
        assert answer.error_code == 0
    finally:
        client.close()


def raw_exchange(cluster: ReplicationCluster, frame: bytes) -> bytes:
    with socket.create_connection(cluster.address(1), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size_bytes = sock.recv(4)
        if not size_bytes:
            return b""
        (size,) = struct.unpack(">i", size_bytes)
        data = b""
        while len(data) < size:
            data += sock.recv(size - len(data))
        return data


def test_api_versions_too_new_is_refused_in_v0_with_our_versions(
    cluster: ReplicationCluster,
) -> None:
    frame = bytearray(
        encode_request(ApiVersionsRequest(), api_version=3, correlation_id=9, client_id="c")
    )
    frame[2:4] = struct.pack(">h", 9)  # a version from the future
    _, answer = decode_response(
        ApiVersionsResponse, raw_exchange(cluster, bytes(frame)), api_version=0
    )
    assert answer.error_code == 35  # UNSUPPORTED_VERSION
    assert {k.api_key for k in answer.api_keys} >= {3, 18, 19, 20, 32, 35, 37, 43, 44, 45, 46, 60}


def test_unknown_apis_and_garbage_close_the_connection(cluster: ReplicationCluster) -> None:
    assert raw_exchange(cluster, struct.pack(">hhi", 0, 9, 1) + b"\x00\x00") == b""  # Produce
    assert raw_exchange(cluster, b"\x00\x13") == b""  # shorter than a header
    host, port = cluster.address(3)
    cluster.kill_broker(3)
    client = KafkaClient(ClientConfig.from_bootstrap(f"{host}:{port}", request_timeout_ms=500))
    try:
        with pytest.raises(BrokerConnectionError):
            client.metadata([], timeout_ms=500)
    finally:
        client.close()


def test_cluster_controls_refuse_unknown_things(cluster: ReplicationCluster) -> None:
    with pytest.raises(ClusterCommandError) as info:
        cluster.partition("nope", 0)
    assert info.value.error_code == 3
    with pytest.raises(ClusterCommandError):
        cluster.create_topic("t", [[1, 1]])
    cluster.create_topic("t", [[1, 2]])
    cluster.kill_broker(2)
    with pytest.raises(ClusterCommandError):
        cluster.pause_broker(2)  # a dead broker cannot pause
    assert cluster.partition("t", 0).isr == (1,)
    assert [b.state for b in cluster.brokers()][:2] == [BrokerState.ONLINE, BrokerState.DEAD]
    assert cluster.now == 0.0  # the manual clock has not moved
    assert cluster.unclean_elections == 0


def test_a_real_clock_cluster_refuses_advance_time() -> None:
    with replication_cluster(1) as c, pytest.raises(ConfigurationError, match="manual_clock"):
        c.advance_time(1.0)
    with pytest.raises(ConfigurationError, match="unique"):
        replication_cluster(brokers=[]).__enter__()


def test_the_subprocess_cluster_stops_with_its_parent_and_reports_a_dead_child() -> None:
    with replication_cluster(2, subprocess=True) as c:
        pid = c.pid  # type: ignore[attr-defined]
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(BrokerConnectionError, match="process is gone"):
            c.topics()
