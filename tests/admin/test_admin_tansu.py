"""coopconsumer.admin against Tansu, a Kafka-protocol broker nobody here wrote: the
requests our encoder writes are accepted and its answers read as a Kafka broker's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coopconsumer.admin import (
    AdminClient,
    AdminOperationError,
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    NewTopic,
)
from coopconsumer.testing import EmbeddedBroker, embedded_broker, unique_name

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
