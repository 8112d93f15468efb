"""The admin side on Apache Kafka (issue 33): the topics and cluster tables, creation
with the ``kraft`` placer beside Kafka's own controller, reassignment with throttles
(plan, execute, status, verify, cancel, rollback), leader election and JBOD moves
between log directories, each read back with Kafka's own tools of the same release
(kafka-configs, kafka-log-dirs, kafka-leader-election, kafka-reassign-partitions).

One 4-node KRaft cluster (racks a, b, c, a; two log directories each) serves the
module; every test makes its own topics. The tests share one xdist worker so the
cluster starts once.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from _kafka_helpers import (
    LEADER_ELECTION,
    RECONFIGURATION,
    TOPICS,
    described,
    kafka_configs,
    kafka_log_dirs,
    produce,
    reassignment_json,
    tool,
    wait_for,
    wait_in_sync,
)

from coopconsumer._types import TopicPartition
from coopconsumer.admin import (
    AdminClient,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    ElectionResult,
    ElectionType,
    NewPartitions,
    NewTopic,
    TopicPartitionReplica,
)
from coopconsumer.admin._admin_cli import run_cluster, run_topics
from coopconsumer.admin._kraft import KRaftReplicaAssignor
from coopconsumer.admin.reassign import (
    ExecutorConfig,
    MoveState,
    PartitionMove,
    ReassignmentExecutor,
    ReassignmentPlan,
    plan_move_off,
)
from coopconsumer.admin.reassign._reassign_cli import run_reassign
from coopconsumer.testing import KafkaCluster, kafka_cluster, unique_name

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.xdist_group("admin-on-kafka"),
]

RACKS = {1: "a", 2: "b", 3: "c", 4: "a"}
THROTTLE_KEYS = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
)
REPLICA_KEYS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaCluster]:
    # A generous start: four JVMs on a busy two-core machine.
    with kafka_cluster(
        brokers=4, log_dirs=2, racks=["a", "b", "c", "a"], startup_timeout_s=300
    ) as cluster:
        yield cluster


@pytest.fixture
def admin(kafka: KafkaCluster) -> Iterator[AdminClient]:
    with AdminClient({"bootstrap.servers": kafka.bootstrap}) as client:
        yield client
        # A test that failed half-way must not leave moves or rates to the next one
        # (kafka-reassign-partitions refuses to start while any move is in flight).
        left = client.list_partition_reassignments()
        if left:
            client.alter_partition_reassignments(dict.fromkeys(left))
        client.incremental_alter_configs(
            {
                ConfigResource(ConfigResourceType.BROKER, str(b)): [
                    AlterConfigOp(key, AlterConfigOpType.DELETE) for key in THROTTLE_KEYS
                ]
                for b in kafka.node_ids
            }
        )


def cli(run: object, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)  # type: ignore[operator]
    return code, out.getvalue(), err.getvalue()


def rows(table: str) -> list[list[str]]:
    """A printed table's data rows, split on runs of two or more spaces."""
    import re

    lines = [x for x in table.splitlines() if x.strip()]
    start = next(i for i, x in enumerate(lines) if set(x.replace(" ", "")) == {"-"})
    return [re.split(r"\s{2,}", x.strip()) for x in lines[start + 1 :]]


# ---------------------------------------------------------------------- tables, placement


def test_cluster_and_topics_tables_on_kafka(kafka: KafkaCluster, admin: AdminClient) -> None:
    topic = unique_name("tables")
    code, out, err = cli(
        run_topics,
        "create",
        "--bootstrap-server",
        kafka.bootstrap,
        "--topic",
        topic,
        "--partitions",
        "8",
        "--replication-factor",
        "3",
        "--config",
        "min.insync.replicas=2",
    )
    assert code == 0, err
    placed = {int(r[0]): tuple(int(x) for x in r[2].split(",")) for r in rows(out)}
    assert len(placed) == 8
    for replicas in placed.values():
        assert len({RACKS[b] for b in replicas}) == 3  # three racks for three replicas
    described_topic = wait_in_sync(admin, topic, 8)
    # Kafka's controller kept the assignment we sent, preferred leader first.
    assert {p.partition: p.replicas for p in described_topic.partitions} == placed
    assert all(p.leader == p.replicas[0] for p in described_topic.partitions)

    code, out, err = cli(
        run_topics, "describe", "--bootstrap-server", kafka.bootstrap, "--topic", topic
    )
    assert code == 0, err
    table = rows(out)
    assert [int(r[1]) for r in table] == list(range(8))
    assert all(r[2] == r[4].split(",")[0] for r in table)  # leader = first replica
    # kafka-topics describes the same partitions, leaders and replicas.
    theirs = tool(kafka, TOPICS, "--describe", "--topic", topic)
    for line in theirs.splitlines():
        if "Partition:" not in line:
            continue
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        p = int(fields["Partition"])
        assert int(fields["Leader"]) == placed[p][0]
        assert tuple(int(x) for x in fields["Replicas"].split(",")) == placed[p]

    code, out, err = cli(run_cluster, "describe", "--bootstrap-server", kafka.bootstrap)
    assert code == 0, err
    brokers = {int(r[0]): r for r in rows(out)}
    assert set(brokers) == {1, 2, 3, 4}
    assert {b: r[2] for b, r in brokers.items()} == RACKS
    assert all(r[6] != "-" for r in brokers.values())  # capacity from DescribeLogDirs
    code, out, err = cli(
        run_topics,
        "describe",
        "--bootstrap-server",
        kafka.bootstrap,
        "--topic",
        topic,
        "--under-replicated-partitions",
    )
    assert code == 0, err
    assert rows(out) == [], out


def test_kraft_placer_beside_kafkas_controller(kafka: KafkaCluster, admin: AdminClient) -> None:
    """Kafka's controller places a topic created with counts only (kafka-topics, no
    assignment); our ``kraft`` placer places the same topic on the same brokers. The
    striped pattern is the same; what differs is where the stripes start, which
    Kafka draws from an unseeded ``java.util.Random``."""
    topic = unique_name("placed-by-kafka")
    tool(
        kafka,
        TOPICS,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "12",
        "--replication-factor",
        "3",
    )
    theirs = {p.partition: p.replicas for p in wait_in_sync(admin, topic, 12).partitions}
    ours = KRaftReplicaAssignor().assign(
        NewPartitions(topic=topic, partition_ids=range(12), replication_factor=3),
        admin.cluster_view(),
    )
    for placement in (theirs, ours):
        # Every partition on three racks: rack a (brokers 1 and 4), b and c hold one
        # replica each; rack a's share is split between its two brokers.
        assert all(len({RACKS[b] for b in r}) == 3 for r in placement.values()), placement
        replicas = Counter(b for r in placement.values() for b in r)
        assert replicas[1] + replicas[4] == 12
        assert replicas[2] == replicas[3] == 12
        # How many partitions each broker leads differs from run to run on Kafka (its
        # shuffles; one run gave broker 4 none), docs/admin.md "Measured on Kafka".


# ---------------------------------------------------------------------- reassignment


def _topic_with_data(
    kafka: KafkaCluster, admin: AdminClient, partitions: int, rf: int, *, mb: float = 1.0
) -> str:
    topic = unique_name("moves")
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf)])
    wait_in_sync(admin, topic, partitions)
    produce(
        kafka.bootstrap,
        topic,
        range(partitions),
        bytes_each=int(mb * 1_000_000),
        record_bytes=10_000,
    )
    return topic


def _dynamic(kafka: KafkaCluster) -> dict[str, dict[str, str]]:
    """Every throttle config Kafka holds, per broker and per topic, read with
    kafka-configs."""
    out: dict[str, dict[str, str]] = {}
    for b in kafka.node_ids:
        configs = kafka_configs(kafka, "brokers", str(b))
        out[f"broker {b}"] = {k: v for k, v in configs.items() if k in THROTTLE_KEYS}
    return out


def test_reassignment_with_throttles_read_back_by_kafka_configs(
    kafka: KafkaCluster, admin: AdminClient, tmp_path: Path
) -> None:
    """Plan a move off broker 4, execute it throttled through the command line, read
    the throttles with kafka-configs while it runs, and find every throttle config as
    it was before once it ends: the operator's own rate on broker 2 put back, the
    others removed, the topic's replica lists back to the operator's."""
    topic = _topic_with_data(kafka, admin, 4, 2, mb=2.0)
    broker2 = ConfigResource(ConfigResourceType.BROKER, "2")
    topic_resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    admin.incremental_alter_configs(
        {
            broker2: [AlterConfigOp("leader.replication.throttled.rate", value="987654321")],
            topic_resource: [AlterConfigOp("leader.replication.throttled.replicas", value="99:1")],
        }
    )
    before_brokers = _dynamic(kafka)
    before_topic = kafka_configs(kafka, "topics", topic)
    assert before_brokers["broker 2"] == {"leader.replication.throttled.rate": "987654321"}

    plan_path, state = tmp_path / "plan.json", tmp_path / "move.state"
    code, out, err = cli(
        run_reassign,
        "plan",
        "--bootstrap-server",
        kafka.bootstrap,
        "--move-off",
        "4",
        "--topic",
        topic,
        "--output",
        str(plan_path),
    )
    assert code == 0, err
    plan = json.loads(plan_path.read_text())
    moves = {(m["topic"], m["partition"]): m for m in plan["partitions"]}
    assert moves
    assert all(4 not in m["replicas"] for m in moves.values())
    assert all(m["size_bytes"] >= 1_900_000 for m in moves.values())  # DescribeLogDirs

    # Throttled at 500 kB/s per broker: the moves (2 MB each) stay in flight long
    # enough to read the throttles with Kafka's own tool from a checkpoint.
    seen: dict[str, object] = {}
    with AdminClient({"bootstrap.servers": kafka.bootstrap}) as own:

        def checkpoint(label: str) -> None:
            if label == "after Submit" and not seen:
                seen["brokers"] = _dynamic(kafka)
                seen["topic"] = kafka_configs(kafka, "topics", topic)

        executor = ReassignmentExecutor.create(
            own,
            ReassignmentPlan.from_json(plan_path.read_text()),
            ExecutorConfig(max_partitions=2, throttle_bytes_per_s=500_000),
            state_path=state,
            poll_interval_s=0.5,
            checkpoint=checkpoint,
        )
        progress = executor.run()
    assert progress.counts[MoveState.DONE] == len(moves), progress
    during_brokers = seen["brokers"]
    assert isinstance(during_brokers, dict)
    involved = {b for m in moves.values() for b in m["replicas"] + m["original_replicas"]}
    for b in involved:
        assert during_brokers[f"broker {b}"] == dict.fromkeys(THROTTLE_KEYS, "500000"), b
    during_topic = seen["topic"]
    assert isinstance(during_topic, dict)
    leaders = set(during_topic["leader.replication.throttled.replicas"].split(","))
    followers = set(during_topic["follower.replication.throttled.replicas"].split(","))
    assert "99:1" in leaders  # the operator's entry kept
    for (_, p), m in moves.items():
        for b in set(m["replicas"]) - set(m["original_replicas"]):
            assert f"{p}:{b}" in followers
        for b in m["original_replicas"]:
            assert f"{p}:{b}" in leaders

    # After: exactly what was there before, as Kafka's own tool reads it.
    assert _dynamic(kafka) == before_brokers
    assert kafka_configs(kafka, "topics", topic) == before_topic

    code, out, err = cli(run_reassign, "status", "--state", str(state))
    assert code == 0, err
    code, out, err = cli(
        run_reassign, "verify", "--bootstrap-server", kafka.bootstrap, "--state", str(state)
    )
    assert code == 0, out + err
    verdicts = [r for r in rows(out) if len(r) >= 7]
    assert verdicts, out
    assert all(r[-2] == "done" for r in verdicts), out
    final = described(admin, topic)
    assert final is not None
    for p in final.partitions:
        m = moves.get((topic, p.partition))
        if m is not None:
            assert list(p.replicas) == m["replicas"]
            assert set(p.isr) == set(m["replicas"])


def test_cancel_reverts_in_flight_moves_and_rollback_takes_finished_ones_back(
    kafka: KafkaCluster, admin: AdminClient, tmp_path: Path
) -> None:
    topic = _topic_with_data(kafka, admin, 6, 2, mb=2.0)
    original = {p.partition: p.replicas for p in wait_in_sync(admin, topic, 6).partitions}
    before_brokers, before_topic = _dynamic(kafka), kafka_configs(kafka, "topics", topic)
    plan = plan_move_off(admin.cluster_view(), [1], admin.replica_assignor, topics=[topic])
    state = tmp_path / "cancel.state"
    # 20 kB/s: nothing finishes before the cancel.
    executor = ReassignmentExecutor.create(
        admin,
        plan,
        ExecutorConfig(max_partitions=2, throttle_bytes_per_s=20_000),
        state_path=state,
        poll_interval_s=0.5,
    )
    executor.run(max_steps=2)
    assert len(plan) >= 1
    moving = admin.list_partition_reassignments([TopicPartition(topic, p) for p in original])
    assert len(moving) == min(2, len(plan))
    executor.cancel()
    progress = executor.run()
    assert progress.counts[MoveState.CANCELLED] == len(plan)
    now = wait_in_sync(admin, topic, 6)
    # Kafka reverted every in-flight move to its original replicas: the same brokers,
    # but in the order of the reassignment's merged list (target first, then the
    # removing replicas) without the adding ones, so a reverted partition whose
    # preferred leader was moved away now prefers its second replica.
    assert {p.partition: set(p.replicas) for p in now.partitions} == {
        p: set(r) for p, r in original.items()
    }
    reverted = {p.partition: p.replicas for p in now.partitions}
    assert _dynamic(kafka) == before_brokers
    assert kafka_configs(kafka, "topics", topic) == before_topic

    # A move run to its end, then taken back by the rollback plan.
    done = ReassignmentExecutor.create(
        admin, plan, ExecutorConfig(max_partitions=10), poll_interval_s=0.5
    )
    assert done.run().counts[MoveState.DONE] == len(plan)
    moved = wait_in_sync(admin, topic, 6)
    assert all(1 not in p.replicas for p in moved.partitions)
    code, _, err = cli(
        run_reassign,
        "rollback",
        "--state",
        str(state),
        "--output",
        str(tmp_path / "undo-cancelled.json"),
    )
    assert code == 0, err  # the cancelled run has nothing to take back
    undo = done.core.rollback_plan()
    assert len(undo) == len(plan)
    back = ReassignmentExecutor.create(
        admin, undo, ExecutorConfig(max_partitions=10), poll_interval_s=0.5
    )
    assert back.run().counts[MoveState.DONE] == len(plan)
    again = wait_in_sync(admin, topic, 6)
    assert {p.partition: p.replicas for p in again.partitions} == reverted


# ---------------------------------------------------------------------- beside Kafka's tool


def test_kafkas_reassign_tool_and_ours_at_once(
    kafka: KafkaCluster, admin: AdminClient, tmp_path: Path
) -> None:
    """kafka-reassign-partitions moves partition 0 (throttled, so it stays in flight)
    while our executor runs a plan that includes partition 0: ours leaves it alone
    (``conflict``) and finishes its others; Kafka's tool's move ends where it asked."""
    topic = _topic_with_data(kafka, admin, 4, 2, mb=2.0)
    current = {p.partition: p.replicas for p in wait_in_sync(admin, topic, 4).partitions}
    spare = {p: next(b for b in (1, 2, 3, 4) if b not in r) for p, r in current.items()}
    theirs = {TopicPartition(topic, 0): (current[0][0], spare[0])}
    reassignment = tmp_path / "theirs.json"
    reassignment.write_text(reassignment_json(theirs))
    tool(
        kafka,
        RECONFIGURATION,
        "--reassignment-json-file",
        str(reassignment),
        "--execute",
        "--throttle",
        "50000",
    )
    ours_plan = plan_move_off(
        admin.cluster_view(), [current[0][1]], admin.replica_assignor, topics=[topic]
    )
    assert TopicPartition(topic, 0) in ours_plan.by_partition()
    executor = ReassignmentExecutor.create(
        admin,
        ours_plan,
        ExecutorConfig(max_partitions=4, throttle_bytes_per_s=10_000_000),
        poll_interval_s=0.5,
    )
    progress = executor.run()
    assert progress.counts[MoveState.CONFLICT] == 1
    assert progress.counts[MoveState.DONE] == len(ours_plan) - 1
    ours = {(m["topic"], m["partition"]): m for m in executor.core.to_dict()["moves"]}
    assert ours[(topic, 0)]["state"] == "conflict"
    assert ours[(topic, 0)]["submissions"] == 0  # never overridden
    assert "another tool is moving it" in ours[(topic, 0)]["error"]
    # Both tools set one rate per broker: ours (10 MB/s) replaced the other tool's
    # 50 kB/s while it ran, and put back what it found, the other tool's value.
    for b in set(current[0]) | {spare[0]}:
        assert (
            kafka_configs(kafka, "brokers", str(b)).get("follower.replication.throttled.rate")
            == "50000"
        ), b
    # Kafka's tool verifies its move to its end and clears its throttles.

    def verified() -> bool:
        out = tool(
            kafka, RECONFIGURATION, "--reassignment-json-file", str(reassignment), "--verify"
        )
        return "is completed" in out and "still in progress" not in out

    wait_for("kafka-reassign-partitions --verify to report completion", verified, every_s=2.0)
    final = wait_in_sync(admin, topic, 4)
    assert final.partitions[0].replicas == theirs[TopicPartition(topic, 0)]


# ---------------------------------------------------------------------- leader election


def test_preferred_leader_election_agrees_with_kafkas_tool(
    kafka: KafkaCluster, admin: AdminClient
) -> None:
    topic = unique_name("elect")
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=3)])
    before = wait_in_sync(admin, topic, 4)
    # Reorder each partition's replicas (same set: Kafka completes at once, the leader
    # stays), so no partition is led by its new preferred replica.
    reordered = {
        TopicPartition(topic, p.partition): (p.replicas[1], p.replicas[2], p.replicas[0])
        for p in before.partitions
    }
    admin.alter_partition_reassignments(reordered)
    wait_for(
        "the reorders to take effect",
        lambda: (
            (d := described(admin, topic)) is not None
            and all(
                p.replicas == reordered[TopicPartition(topic, p.partition)] for p in d.partitions
            )
        ),
    )
    now = described(admin, topic)
    assert now is not None
    assert all(p.leader != p.replicas[0] for p in now.partitions)
    # Ours elects partitions 0 and 1; Kafka's tool partitions 2 and 3.
    ours = admin.elect_leaders(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], election_type=ElectionType.PREFERRED
    )
    assert ours == dict.fromkeys(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], ElectionResult.ELECTED
    )
    out = tool(
        kafka, LEADER_ELECTION, "--election-type", "preferred", "--topic", topic, "--partition", "2"
    )
    assert "Successfully completed leader election" in out, out
    out = tool(
        kafka, LEADER_ELECTION, "--election-type", "preferred", "--topic", topic, "--partition", "3"
    )
    assert "Successfully completed leader election" in out, out
    after = wait_for(
        "every partition led by its preferred replica",
        lambda: (
            (d := described(admin, topic)) is not None
            and all(p.leader == p.replicas[0] for p in d.partitions)
            and d
        ),
    )
    assert after
    # Each tool now finds nothing to do for the other's partitions.
    assert admin.elect_leaders(
        [TopicPartition(topic, 2), TopicPartition(topic, 3)], election_type=ElectionType.PREFERRED
    ) == dict.fromkeys(
        [TopicPartition(topic, 2), TopicPartition(topic, 3)], ElectionResult.NOT_NEEDED
    )
    out = tool(
        kafka, LEADER_ELECTION, "--election-type", "preferred", "--topic", topic, "--partition", "0"
    )
    assert (
        "Valid replica already elected" in out
        or "ELECTION_NOT_NEEDED" in out
        or "not needed" in out.lower()
    ), out


# ---------------------------------------------------------------------- JBOD


def test_replica_moves_between_log_dirs_read_back_by_kafka_log_dirs(
    kafka: KafkaCluster, admin: AdminClient
) -> None:
    topic = _topic_with_data(kafka, admin, 2, 1, mb=3.0)
    placed = wait_in_sync(admin, topic, 2)
    p0 = placed.partitions[0]
    broker = p0.replicas[0]
    tp = TopicPartition(topic, 0)

    def placements() -> list[tuple[str, int]]:
        (dirs,) = admin.describe_log_dirs([broker], partitions=[tp]).values()
        return [(d.path, r.size_bytes) for d in dirs for r in d.replicas if not r.is_future]

    def where() -> tuple[str, int]:
        found = placements()
        assert len(found) == 1, found
        return found[0]

    path, size = where()
    assert size >= 2_900_000
    other = next(str(d) for d in kafka.node(broker).log_dirs if str(d) != path)
    admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, broker): other})
    # While Kafka swaps the future replica in, both dirs can list a current copy for a
    # moment (a clean-clone CI run read it so): wait until the new dir holds the only one.
    wait_for("the replica in its new log dir", lambda: [d for d, _ in placements()] == [other])
    _, new_size = where()
    assert new_size == size  # the whole log, nothing lost or added
    theirs = kafka_log_dirs(kafka, [broker])[broker]
    assert f"{topic}-0" in theirs[other]
    assert theirs[other][f"{topic}-0"]["size"] == size
    assert not theirs[other][f"{topic}-0"]["isFuture"]
    assert f"{topic}-0" not in theirs[path]


def test_kafkas_reassign_tool_finishing_beside_our_running_executor(
    kafka: KafkaCluster, admin: AdminClient, tmp_path: Path
) -> None:
    """Ours runs a slow throttled move; kafka-reassign-partitions runs a quick one of
    another topic to its end (--execute, then --verify until complete). Its --verify
    deletes every broker's throttle rates, ours included, while ours still copies
    (Kafka 4.4's behaviour). Our executor sees its rates gone at its next check and
    sets them again; at its end the throttles are as before it started."""
    slow = _topic_with_data(kafka, admin, 1, 1, mb=20.0)
    quick = unique_name("quick")
    admin.create_topics([NewTopic(quick, num_partitions=1, replication_factor=1)])
    wait_in_sync(admin, quick, 1)
    before = _dynamic(kafka)
    (p,) = wait_in_sync(admin, slow, 1).partitions
    target = next(b for b in kafka.node_ids if b not in p.replicas)
    plan = ReassignmentPlan(
        moves=[
            PartitionMove(
                topic=slow,
                partition=0,
                replicas=(target,),
                original_replicas=p.replicas,
                size_bytes=20_000_000,
            )
        ]
    )
    executor = ReassignmentExecutor.create(
        admin,
        plan,
        ExecutorConfig(throttle_bytes_per_s=100_000),
        poll_interval_s=0.5,
        throttle_check_interval_s=0.0,
    )
    executor.run(max_steps=2)
    involved = (*p.replicas, target)

    def rates() -> dict[int, str | None]:
        return {
            b: kafka_configs(kafka, "brokers", str(b)).get("follower.replication.throttled.rate")
            for b in involved
        }

    assert set(rates().values()) == {"100000"}
    # What Kafka's --verify does to a broker (below), done here a few milliseconds
    # before the executor's next step, while most of the 20 MB is still to copy.
    admin.incremental_alter_configs(
        {
            ConfigResource(ConfigResourceType.BROKER, str(target)): [
                AlterConfigOp(key, AlterConfigOpType.DELETE) for key in THROTTLE_KEYS
            ]
        }
    )
    executor.step()
    assert executor.core.state_of(TopicPartition(slow, 0)) is MoveState.IN_FLIGHT
    assert set(rates().values()) == {"100000"}  # set again
    (q,) = wait_in_sync(admin, quick, 1).partitions
    quick_target = next(b for b in kafka.node_ids if b not in q.replicas)
    reassignment = tmp_path / "quick.json"
    reassignment.write_text(reassignment_json({TopicPartition(quick, 0): (quick_target,)}))
    tool(
        kafka,
        RECONFIGURATION,
        "--reassignment-json-file",
        str(reassignment),
        "--execute",
        "--additional",
        "--throttle",
        "10000000",
    )

    def verified() -> bool:
        out = tool(
            kafka, RECONFIGURATION, "--reassignment-json-file", str(reassignment), "--verify"
        )
        return "is completed" in out and "still in progress" not in out

    wait_for("kafka-reassign-partitions --verify to report completion", verified, every_s=2.0)
    # Its --verify deleted every broker's rates, ours too; the move then copies
    # unthrottled until the executor's next check, here often to its end.
    progress = executor.run()
    assert progress.counts[MoveState.DONE] == 1
    assert _dynamic(kafka) == before
