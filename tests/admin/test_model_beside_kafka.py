"""The replication test cluster does what Kafka 4.4 did in the same scenarios
(tests/admin/test_admin_on_kafka.py; docs/admin.md, "The replication test cluster"
lists where the model cannot match). Each test names the Kafka test it mirrors."""

from __future__ import annotations

from coopconsumer._types import TopicPartition
from coopconsumer.admin import (
    AdminClient,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    ElectionResult,
    ElectionType,
)
from coopconsumer.testing import replication_cluster

LIST_KEY = "follower.replication.throttled.replicas"


def test_a_list_subtracted_to_nothing_stays_as_an_empty_value() -> None:
    """As on Kafka (what test_reassignment_with_throttles_read_back_by_kafka_configs
    found): the executor deletes such a list itself."""
    with replication_cluster(3, manual_clock=True) as cluster:
        cluster.create_topic("t", [[1, 2]])
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
            topic = ConfigResource(ConfigResourceType.TOPIC, "t")
            admin.incremental_alter_configs(
                {topic: [AlterConfigOp(LIST_KEY, AlterConfigOpType.APPEND, "0:1")]}
            )
            admin.incremental_alter_configs(
                {topic: [AlterConfigOp(LIST_KEY, AlterConfigOpType.SUBTRACT, "0:1")]}
            )
            entry = admin.describe_configs([topic])[topic][LIST_KEY]
            assert entry.value == ""
            assert not entry.is_default


def test_a_cancelled_move_returns_to_its_brokers_in_the_merged_order() -> None:
    """As on Kafka (test_cancel_reverts_in_flight_moves_and_rollback_takes_finished_ones_back):
    [1, 2] moving to [3, 2] is [3, 2, 1] while it moves, and [2, 1] once cancelled."""
    with replication_cluster(3, manual_clock=True) as cluster:
        cluster.create_topic("t", [[1, 2]])
        cluster.set_partition_size("t", 0, 1_000_000)
        for broker in (1, 2, 3):
            cluster.set_replication_rate(broker, 1_000)
        tp = TopicPartition("t", 0)
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
            admin.alter_partition_reassignments({tp: [3, 2]})
            cluster.advance_time(1.0)
            assert cluster.partition("t", 0).replicas == (3, 2, 1)
            admin.alter_partition_reassignments({tp: None})
            cluster.advance_time(1.0)
            assert cluster.partition("t", 0).replicas == (2, 1)
            assert not admin.list_partition_reassignments()


def test_a_reorder_completes_at_once_and_the_election_then_moves_the_leader() -> None:
    """As on Kafka (test_preferred_leader_election_agrees_with_kafkas_tool): a new
    order of the same replicas completes with the leader unchanged; a preferred
    election moves it; a second one is not needed."""
    with replication_cluster(3, manual_clock=True) as cluster:
        cluster.create_topic("t", [[1, 2, 3]])
        tp = TopicPartition("t", 0)
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
            admin.alter_partition_reassignments({tp: [2, 3, 1]})
            cluster.advance_time(0.1)
            p = cluster.partition("t", 0)
            assert (p.replicas, p.leader) == ((2, 3, 1), 1)
            assert not admin.list_partition_reassignments()
            assert admin.elect_leaders([tp], election_type=ElectionType.PREFERRED) == {
                tp: ElectionResult.ELECTED
            }
            assert cluster.partition("t", 0).leader == 2
            assert admin.elect_leaders([tp], election_type=ElectionType.PREFERRED) == {
                tp: ElectionResult.NOT_NEEDED
            }
