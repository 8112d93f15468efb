"""Issue #21's reassignment additions on the replication test cluster, over the wire:
other tools' moves left alone, originals re-read at submission, throttles restored
exactly, the per-broker cap, preferred-leader elections, changed options on resume,
``reassign verify``/``list``, and moves between the disks of one broker. kafka-python's
and confluent-kafka's admin clients play the other tool and check the cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient as CkAdminClient
from confluent_kafka.admin._config import ConfigResource as CkConfigResource
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient

from coopconsumer.__main__ import main
from coopconsumer._types import TopicPartition
from coopconsumer.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
)
from coopconsumer.admin.reassign import (
    ExecutorConfig,
    MoveState,
    PartitionMove,
    ReassignmentExecutor,
    ReassignmentPlan,
    load_state,
    plan_balance_disks,
)
from coopconsumer.testing import BrokerSpec, ReplicationCluster, replication_cluster

pytestmark = pytest.mark.integration

MB = 1_000_000


@pytest.fixture
def cluster() -> Iterator[ReplicationCluster]:
    with replication_cluster(4, racks=["a", "b"], manual_clock=True) as c:
        for b in c.broker_ids:
            c.set_replication_rate(b, MB)  # 1 MB/s: a 10 MB replica takes 10 s
        yield c


@pytest.fixture
def kp(cluster: ReplicationCluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        yield client
    finally:
        client.close()


def run(
    cluster: ReplicationCluster,
    admin: AdminClient,
    plan: ReassignmentPlan,
    config: ExecutorConfig,
    state: Path | None = None,
    *,
    max_steps: int | None = None,
) -> ReassignmentExecutor:
    executor = ReassignmentExecutor.create(
        admin,
        plan,
        config,
        state_path=state,
        clock=lambda: cluster.now,
        sleep=cluster.advance_time,
        poll_interval_s=1.0,
    )
    executor.run(max_steps=max_steps)
    return executor


def move(p: int, target: tuple[int, ...], original: tuple[int, ...]) -> PartitionMove:
    return PartitionMove(
        topic="t", partition=p, replicas=target, original_replicas=original, size_bytes=10 * MB
    )


def build(cluster: ReplicationCluster, layout: list[list[int]]) -> None:
    cluster.create_topic("t", layout)
    for i in range(len(layout)):
        cluster.set_partition_size("t", i, 10 * MB)


def test_a_partition_another_tool_is_moving_is_left_alone_and_named(
    cluster: ReplicationCluster, kp: KafkaAdminClient, tmp_path: Path
) -> None:
    build(cluster, [[1, 2], [1, 2]])
    plan = ReassignmentPlan(moves=[move(0, (3, 4), (1, 2)), move(1, (3, 4), (1, 2))])
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan.to_json())
    # Another tool (kafka-python here) is already moving partition 1 to 2, 4.
    kp.alter_partition_reassignments({KpTopicPartition("t", 1): [2, 4]})
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        executor = run(cluster, admin, plan, ExecutorConfig(), tmp_path / "state")
        assert executor.core.state_of(TopicPartition("t", 0)) is MoveState.DONE
        assert executor.core.state_of(TopicPartition("t", 1)) is MoveState.CONFLICT
        (error,) = [e for m, _, e in executor.core.moves() if m.partition == 1]
        assert error is not None
        assert "another tool is moving it (replicas [2, 4, 1], adding [4], removing [1])" in error
    # The other tool's move went on, untouched, to its own target.
    assert cluster.partition("t", 1).replicas == (2, 4)
    assert cluster.partition("t", 0).replicas == (3, 4)


def test_the_cli_reports_conflicts_lists_them_and_override_takes_over(
    cluster: ReplicationCluster,
    kp: KafkaAdminClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    build(cluster, [[1, 2], [1, 2]])
    plan = ReassignmentPlan(moves=[move(0, (3, 4), (1, 2)), move(1, (3, 4), (1, 2))])
    kp.alter_partition_reassignments({KpTopicPartition("t", 1): [2, 4]})
    server = ["--bootstrap-server", cluster.bootstrap]
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        state = tmp_path / "state"
        executor = run(cluster, admin, plan, ExecutorConfig(), state, max_steps=1)
        assert main(["reassign", "list", *server, "--state", str(state)]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING", "BY"]
        assert [line.split() for line in out[2:4]] == [
            ["t", "0", "3,4,1,2", "3,4", "1,2", "this", "executor"],
            ["t", "1", "2,4,1", "4", "1", "another", "tool"],
        ]
        assert out[4] == "2 reassignment(s) in flight: 1 by this executor, 1 by another tool"
        assert main(["reassign", "verify", *server, "--state", str(state)]) == 1
        verified = capsys.readouterr().out
        assert "moved by another tool to [2, 4]" in verified
        assert "1 in flight, 1 moved by another tool" in verified
        assert executor.core.state_of(TopicPartition("t", 1)) is MoveState.CONFLICT
        # An operator who wants it: --override takes the partition over.
        again = run(
            cluster,
            admin,
            ReassignmentPlan(moves=[move(1, (3, 4), (1, 2))]),
            ExecutorConfig(override=True),
        )
        assert again.core.state_of(TopicPartition("t", 1)) is MoveState.DONE
        # The other tool's original replicas (Kafka's listing keeps no order for them).
        assert set(again.core.original_of(TopicPartition("t", 1))) == {1, 2}
    assert cluster.partition("t", 1).replicas == (3, 4)


def test_cancel_and_rollback_go_back_to_what_was_there_at_submission(
    cluster: ReplicationCluster, kp: KafkaAdminClient
) -> None:
    build(cluster, [[1, 2]])
    stale = ReassignmentPlan(moves=[move(0, (3, 4), (1, 2))])
    # Between planning and execution, someone moved the partition to 1, 3.
    kp.alter_partition_reassignments({KpTopicPartition("t", 0): [1, 3]})
    cluster.advance_time(20.0)
    assert cluster.partition("t", 0).replicas == (1, 3)
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        executor = run(cluster, admin, stale, ExecutorConfig(), max_steps=2)
        assert executor.core.original_of(TopicPartition("t", 0)) == (1, 3)
        executor.cancel()
        executor.run()
        assert executor.core.state_of(TopicPartition("t", 0)) is MoveState.CANCELLED
        # Reverted to what was there (KIP-455 keeps the replicas' set, not their order).
        assert set(cluster.partition("t", 0).replicas) == {1, 3}
        done = run(cluster, admin, stale, ExecutorConfig())
        assert cluster.partition("t", 0).replicas == (3, 4)
        (back,) = done.core.rollback_plan().moves
        assert set(back.replicas) == {1, 3}


def test_throttles_are_set_back_to_what_the_operator_had(cluster: ReplicationCluster) -> None:
    build(cluster, [[1, 2], [1, 2]])
    broker_2 = ConfigResource(ConfigResourceType.BROKER, "2")
    topic = ConfigResource(ConfigResourceType.TOPIC, "t")
    cluster_wide = ConfigResource(ConfigResourceType.BROKER, "")
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.incremental_alter_configs(
            {
                broker_2: [AlterConfigOp("follower.replication.throttled.rate", value="12345")],
                cluster_wide: [AlterConfigOp("leader.replication.throttled.rate", value="777")],
                topic: [AlterConfigOp("follower.replication.throttled.replicas", value="1:3")],
            }
        )
        plan = ReassignmentPlan(moves=[move(0, (3, 4), (1, 2)), move(1, (1, 3), (1, 2))])
        executor = run(
            cluster, admin, plan, ExecutorConfig(throttle_bytes_per_s=4 * MB), max_steps=2
        )
        during = admin.describe_configs([broker_2, topic])
        assert during[broker_2]["follower.replication.throttled.rate"].value == str(4 * MB)
        assert during[topic]["follower.replication.throttled.replicas"].value == "1:3,0:3,0:4"
        executor.run()
    ck = CkAdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    after = {
        r.name: r
        for r in (
            CkConfigResource("broker", "2"),
            CkConfigResource("broker", "3"),
            CkConfigResource("topic", "t"),
        )
    }
    described = {name: ck.describe_configs([r])[r].result() for name, r in after.items()}
    assert described["2"]["follower.replication.throttled.rate"].value == "12345"
    assert described["2"]["leader.replication.throttled.rate"].value == "777"  # cluster-wide
    assert described["3"]["follower.replication.throttled.rate"].is_default
    # 1:3 was the operator's; the executor's 1:3 was already there, so it stays.
    assert described["t"]["follower.replication.throttled.replicas"].value == "1:3"
    assert described["t"]["leader.replication.throttled.replicas"].value == ""


def test_a_per_broker_cap_and_preferred_leaders_after_the_moves(
    cluster: ReplicationCluster,
) -> None:
    build(cluster, [[1, 2], [1, 2], [1, 2], [1, 2]])
    # Every move leaves broker 2, one at a time; leader 1 stays but is not the
    # preferred replica any more.
    plan = ReassignmentPlan(moves=[move(p, (4 if p % 2 == 0 else 3, 1), (1, 2)) for p in range(4)])
    seen: list[int] = []
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        executor = ReassignmentExecutor.create(
            admin,
            plan,
            ExecutorConfig(max_moves_per_broker=1, elect_preferred_leaders=True),
            clock=lambda: cluster.now,
            sleep=cluster.advance_time,
            poll_interval_s=1.0,
        )
        executor.run(on_progress=lambda p: seen.append(len(admin.list_partition_reassignments())))
        assert max(seen) == 1
        assert [executor.core.election_of(TopicPartition("t", p)) for p in range(4)] == [
            "elected"
        ] * 4
    ck = CkAdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    leaders = ck.list_topics("t", timeout=10).topics["t"].partitions
    assert [leaders[p].leader for p in range(4)] == [4, 3, 4, 3]
    assert cluster.now < 300  # not the automatic balancing: the executor's elections


def test_resuming_with_other_options_applies_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with replication_cluster(4) as cluster:
        cluster.create_topic("t", [[1, 2], [1, 2], [1, 2]])
        plan = ReassignmentPlan(moves=[move(p, (3, 4), (1, 2)) for p in range(3)])
        plan_file, state = tmp_path / "plan.json", tmp_path / "state"
        plan_file.write_text(plan.to_json())
        server = ["--bootstrap-server", cluster.bootstrap, "--state", str(state)]
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
            ReassignmentExecutor.create(
                admin,
                plan,
                ExecutorConfig(max_partitions=1, throttle_bytes_per_s=1000),
                state_path=state,
            )
        args = ["--max-partitions", "3", "--throttle", "5000000", "--poll-interval", "0.05"]
        assert main(["reassign", "execute", *server, *args]) == 0
        out = capsys.readouterr().out
        assert "resuming with max_partitions 1 -> 3, throttle_bytes_per_s 1000 -> 5000000" in out
        assert load_state(state).config == ExecutorConfig(
            max_partitions=3, throttle_bytes_per_s=5_000_000
        )
        assert [p.replicas for p in cluster.partitions("t")] == [(3, 4)] * 3


def test_moves_between_the_disks_of_a_broker() -> None:
    brokers = [
        BrokerSpec(node_id=b, log_dirs=("/d1", "/d2"), disk_copy_bytes_per_s=MB)
        for b in range(1, 4)
    ]
    with replication_cluster(brokers=brokers, manual_clock=True) as cluster:
        # Every replica of broker 1 lands on /d1 or /d2 by count; make /d1 the heavy one.
        cluster.create_topic("t", [[1, 2], [1, 3], [1, 2], [2, 3]])
        for p, size in enumerate((8, 1, 6, 1)):
            cluster.set_partition_size("t", p, size * MB)
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
            dirs = admin.describe_log_dirs()
            plan = plan_balance_disks(admin.cluster_view(), dirs)
            on_1 = {m.partition: m.target_dirs for m in plan.moves if 1 in m.target_dirs}
            assert on_1 == {2: {1: "/d2"}}  # 14 MB on /d1 vs 1 MB: 6 MB over narrows it most
            (m,) = [m for m in plan.moves if m.partition == 2]
            assert m.replicas == m.original_replicas  # same brokers, another disk
            assert '"log_dirs": ["/d2", "any"]' in plan.to_json()
            executor = run(cluster, admin, plan, ExecutorConfig())
            assert executor.core.state_of(TopicPartition("t", 2)) is MoveState.DONE
            assert cluster.partition("t", 2).replica_dirs[1] == "/d2"
            # A replica added by a reassignment goes straight to the directory named.
            into = PartitionMove(
                topic="t",
                partition=3,
                replicas=(2, 1),
                original_replicas=(2, 3),
                size_bytes=MB,
                log_dirs=("any", "/d1"),
            )
            executor = run(cluster, admin, ReassignmentPlan(moves=[into]), ExecutorConfig())
            assert executor.core.state_of(TopicPartition("t", 3)) is MoveState.DONE
            assert cluster.partition("t", 3).replicas == (2, 1)
            assert cluster.partition("t", 3).replica_dirs[1] == "/d1"
            bad = PartitionMove(
                topic="t",
                partition=0,
                replicas=(1, 2),
                original_replicas=(1, 2),
                log_dirs=("/nope", None),
            )
            executor = run(cluster, admin, ReassignmentPlan(moves=[bad]), ExecutorConfig())
            assert executor.core.state_of(TopicPartition("t", 0)) is MoveState.FAILED
            assert "LOG_DIR_NOT_FOUND" in (executor.core.moves()[0][2] or "")
