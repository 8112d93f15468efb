"""coopconsumer.admin against brokers nobody here wrote: Apache Kafka and Tansu (plain
and behind the SASL test gateway) accept the requests our encoder writes, and their
answers read as a Kafka broker's; librdkafka's mock cluster, which lacks most admin APIs, gets the
Metadata fallback and typed UNSUPPORTED_VERSION errors."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from coopconsumer._errors import AuthenticationError, KafkaError
from coopconsumer.admin import (
    AdminClient,
    AdminOperationError,
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    NewTopic,
)
from coopconsumer.testing import EmbeddedBroker, SaslServer, embedded_broker, unique_name

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tansu() -> Iterator[EmbeddedBroker]:
    with embedded_broker("tansu") as broker:
        yield broker


def test_topics_and_configs_on_tansu(tansu: EmbeddedBroker) -> None:
    name = unique_name("admin")
    with AdminClient({"bootstrap.servers": tansu.bootstrap}) as admin:
        cluster = admin.describe_cluster()  # DescribeCluster v1
        assert [b.node_id for b in cluster.brokers] == [111]
        placed = admin.create_topics(  # CreateTopics v7 with an explicit assignment
            [NewTopic(name, num_partitions=3, configs={"retention.ms": "60000"})]
        )
        assert placed == {name: {0: (111,), 1: (111,), 2: (111,)}}
        described = admin.describe_topics([name])[name]
        assert [(p.partition, p.leader, p.replicas) for p in described.partitions] == [
            (0, 111, (111,)),
            (1, 111, (111,)),
            (2, 111, (111,)),
        ]
        topic = ConfigResource(ConfigResourceType.TOPIC, name)
        assert admin.describe_configs([topic])[topic]["retention.ms"].value == "60000"
        admin.incremental_alter_configs({topic: [AlterConfigOp("retention.ms", value="120000")]})
        assert admin.describe_configs([topic])[topic]["retention.ms"].value == "120000"
        assert admin.list_partition_reassignments() == {}
        view = admin.cluster_view()  # no DescribeLogDirs on Tansu: storage unknown
        assert view.brokers[111].used_bytes is None
        assert view.brokers[111].replicas >= 3
        admin.delete_topics([name])  # DeleteTopics v6: names moved into topics[]
        with pytest.raises(AdminOperationError) as info:
            admin.describe_topics([name])
        assert info.value.errors[name].code == 3  # type: ignore[attr-defined]


def test_topics_and_configs_on_kafka(kafka_broker: EmbeddedBroker) -> None:
    """The same requests against Apache Kafka (one KRaft node), which has every API
    Tansu lacks here: DescribeLogDirs sizes the storage."""
    name = unique_name("admin")
    with AdminClient({"bootstrap.servers": kafka_broker.bootstrap}) as admin:
        (node,) = [b.node_id for b in admin.describe_cluster().brokers]
        placed = admin.create_topics(
            [NewTopic(name, num_partitions=3, configs={"retention.ms": "60000"})]
        )
        assert placed == {name: {0: (node,), 1: (node,), 2: (node,)}}
        described = admin.describe_topics([name])[name]
        assert [(p.partition, p.leader, p.replicas) for p in described.partitions] == [
            (0, node, (node,)),
            (1, node, (node,)),
            (2, node, (node,)),
        ]
        topic = ConfigResource(ConfigResourceType.TOPIC, name)
        assert admin.describe_configs([topic])[topic]["retention.ms"].value == "60000"
        admin.incremental_alter_configs({topic: [AlterConfigOp("retention.ms", value="120000")]})
        # KRaft: the controller answered once the change was in its log; the broker
        # that answers DescribeConfigs shows it once it applied that record (a second
        # run here read the old value right after the answer).
        deadline = time.monotonic() + 30
        while (
            admin.describe_configs([topic])[topic]["retention.ms"].value != "120000"
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert admin.describe_configs([topic])[topic]["retention.ms"].value == "120000"
        assert admin.list_partition_reassignments() == {}
        view = admin.cluster_view()
        assert view.brokers[node].used_bytes is not None
        assert view.brokers[node].replicas >= 3
        admin.delete_topics([name])
        # KRaft: the broker's metadata drops the topic once it applied the controller's
        # record, shortly after the answer.
        deadline = time.monotonic() + 30
        while not _gone(admin, name) and time.monotonic() < deadline:
            time.sleep(0.2)
        with pytest.raises(AdminOperationError) as info:
            admin.describe_topics([name])
        assert info.value.errors[name].code == 3  # type: ignore[attr-defined]


def _gone(admin: AdminClient, topic: str) -> bool:
    try:
        admin.describe_topics([topic])
    except AdminOperationError:
        return True
    return False


def test_the_consumer_security_keys_reach_a_sasl_broker() -> None:
    sasl = SaslServer(mechanisms=("SCRAM-SHA-256",), users={"alice": "alice-secret"})
    with embedded_broker("tansu", sasl=sasl) as broker:
        config = {**broker.client_config, "bootstrap.servers": broker.bootstrap}
        assert config["security.protocol"] == "sasl_plaintext"
        with AdminClient(config) as admin:
            assert [b.node_id for b in admin.describe_cluster().brokers] == [111]
            name = unique_name("secure")
            assert admin.create_topics([NewTopic(name)]) == {name: {0: (111,)}}
        wrong = {**config, "sasl.username": "alice", "sasl.password": "not-it"}
        with AdminClient(wrong) as admin, pytest.raises(AuthenticationError) as info:
            admin.describe_cluster(timeout_ms=5000)
        assert "not-it" not in str(info.value)


def test_missing_admin_apis_fall_back_or_raise_typed_errors() -> None:
    with (
        embedded_broker("mock", num_brokers=3) as mock,
        AdminClient({"bootstrap.servers": mock.bootstrap}) as admin,
    ):
        # No DescribeCluster on the mock: Metadata answers instead.
        described = admin.describe_cluster()
        assert [b.node_id for b in described.brokers] == [1, 2, 3]
        with pytest.raises(KafkaError) as info:
            admin.create_topics([NewTopic("t", assignment={0: [1]})])
        assert info.value.code == 35  # UNSUPPORTED_VERSION: no CreateTopics at all
