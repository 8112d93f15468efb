"""The reassignment executor against the replication test cluster, over the wire:
the window, a slow partition, cancel, rollback, throttles, target changes, and a
killed executor resuming (docs/admin.md, "Reassigning partitions")."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from coopconsumer._types import TopicPartition
from coopconsumer.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ElectionResult,
    ElectionType,
    LogDirDescription,
    PartitionReassignment,
    TopicDescription,
    TopicPartitionReplica,
)
from coopconsumer.admin.reassign import (
    ExecutorBusyError,
    ExecutorConfig,
    MoveState,
    PartitionMove,
    ReassignmentExecutor,
    ReassignmentPlan,
    load_state,
    plan_move_off,
    request_cancel,
    request_target_change,
)
from coopconsumer.testing import ReplicationCluster, replication_cluster

pytestmark = pytest.mark.integration

MB = 1_000_000


class RecordingAdmin:
    """The real admin client, counting what reaches the broker."""

    def __init__(self, admin: AdminClient, sizes: Mapping[TopicPartition, int]) -> None:
        self.admin = admin
        self.sizes = sizes
        self.submissions: Counter[TopicPartition] = Counter()
        self.cancels: Counter[TopicPartition] = Counter()
        self.max_moving = 0
        self.max_bytes_moving = 0
        self.config_changes: list[Mapping[ConfigResource, Sequence[AlterConfigOp]]] = []
        self.elections: list[list[TopicPartition] | None] = []
        self.dir_moves: list[dict[TopicPartitionReplica, str]] = []

    def describe_topics(
        self, topics: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, TopicDescription]:
        return self.admin.describe_topics(topics, timeout_ms=timeout_ms)

    def list_partition_reassignments(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]:
        moving = self.admin.list_partition_reassignments(partitions, timeout_ms=timeout_ms)
        self.max_moving = max(self.max_moving, len(moving))
        in_flight = sum(self.sizes.get(tp, 0) * len(r.adding) for tp, r in moving.items())
        self.max_bytes_moving = max(self.max_bytes_moving, in_flight)
        return moving

    def alter_partition_reassignments(
        self,
        targets: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: float | None = None,
    ) -> None:
        for tp, target in targets.items():
            (self.cancels if target is None else self.submissions)[tp] += 1
        self.admin.alter_partition_reassignments(targets, timeout_ms=timeout_ms)

    def describe_configs(
        self, resources: Iterable[ConfigResource], *, timeout_ms: float | None = None
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        return self.admin.describe_configs(resources, timeout_ms=timeout_ms)

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:
        self.config_changes.append(changes)
        self.admin.incremental_alter_configs(
            changes, validate_only=validate_only, timeout_ms=timeout_ms
        )

    def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        *,
        partitions: Iterable[TopicPartition] | None = None,
        timeout_ms: float | None = None,
    ) -> dict[int, tuple[LogDirDescription, ...]]:
        return self.admin.describe_log_dirs(brokers, partitions=partitions, timeout_ms=timeout_ms)

    def alter_replica_log_dirs(
        self, moves: Mapping[TopicPartitionReplica, str], *, timeout_ms: float | None = None
    ) -> None:
        self.dir_moves.append(dict(moves))
        self.admin.alter_replica_log_dirs(moves, timeout_ms=timeout_ms)

    def elect_leaders(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        election_type: ElectionType = ElectionType.PREFERRED,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, ElectionResult]:
        self.elections.append(None if partitions is None else list(partitions))
        return self.admin.elect_leaders(
            partitions, election_type=election_type, timeout_ms=timeout_ms
        )


def build(
    cluster: ReplicationCluster, count: int, size: int = MB, topic: str = "t"
) -> dict[TopicPartition, int]:
    """``count`` partitions with RF 2 on brokers 1-3, ``size`` bytes each."""
    cluster.create_topic(topic, [[1 + i % 3, 1 + (i + 1) % 3] for i in range(count)])
    for i in range(count):
        cluster.set_partition_size(topic, i, size)
    return {TopicPartition(topic, i): size for i in range(count)}


def placement(cluster: ReplicationCluster, topic: str = "t") -> dict[int, tuple[int, ...]]:
    return {p.partition: p.replicas for p in cluster.partitions(topic)}


def executor(
    cluster: ReplicationCluster,
    admin: RecordingAdmin,
    plan: ReassignmentPlan,
    config: ExecutorConfig,
    state: Path | None = None,
    **kwargs: object,
) -> ReassignmentExecutor:
    return ReassignmentExecutor.create(
        admin,
        plan,
        config,
        state_path=state,
        clock=lambda: cluster.now,
        sleep=cluster.advance_time,
        poll_interval_s=0.5,
        **kwargs,
    )


@pytest.fixture
def cluster() -> Iterator[ReplicationCluster]:
    with replication_cluster(6, racks=["a", "b", "c"], manual_clock=True) as c:
        yield c


@pytest.mark.slow
def test_two_thousand_partitions_move_through_a_window_of_fifty(
    cluster: ReplicationCluster, tmp_path: Path
) -> None:
    sizes = build(cluster, 2000)
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as client:
        admin = RecordingAdmin(client, sizes)
        plan = plan_move_off(client.cluster_view(), [1, 2, 3], client.replica_assignor, sizes=sizes)
        assert len(plan) == 2000
        run = executor(cluster, admin, plan, ExecutorConfig(max_partitions=50), tmp_path / "s")
        progress = run.run()
        assert progress.done == 2000
        assert progress.bytes_done == plan.total_bytes
        assert admin.max_moving == 50  # the window was full, never more
        assert set(admin.submissions.values()) == {1}
        assert len(admin.submissions) == 2000
        assert client.list_partition_reassignments() == {}
    targets = {m.partition: m.replicas for m in plan.moves}
    assert placement(cluster) == targets
    assert all(not {1, 2, 3} & set(r) for r in targets.values())
    assert load_state(tmp_path / "s").progress().done == 2000


def test_one_slow_partition_does_not_hold_the_others(cluster: ReplicationCluster) -> None:
    # Partition 0 (100 MB) goes to broker 6, which copies at 1% of the others' speed.
    sizes = build(cluster, 101)
    cluster.set_partition_size("t", 0, 100 * MB)
    cluster.set_replication_rate(6, 64 * 1024 * 1024 / 100)
    moves = [
        PartitionMove(
            topic="t",
            partition=i,
            replicas=(6,) if i == 0 else (4 + i % 2,),
            original_replicas=cluster.partition("t", i).replicas,
            size_bytes=MB,
        )
        for i in range(101)
    ]
    finished_at: dict[int, float] = {}

    def watch(_: object) -> None:
        for p in cluster.partitions("t"):
            if p.partition not in finished_at and not p.reassigning and len(p.replicas) == 1:
                finished_at[p.partition] = cluster.now

    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as client:
        admin = RecordingAdmin(client, sizes)
        run = executor(
            cluster, admin, ReassignmentPlan(moves=moves), ExecutorConfig(max_partitions=10)
        )
        run.run(on_progress=watch)
    others = max(t for p, t in finished_at.items() if p != 0)
    # 100 moves of 1 MB over brokers 4 and 5 at 64 MiB/s each finish within a poll
    # (0.5 s); with one slot of 10 held by the slow move, 9 at a time: 12 rounds, 6 s.
    # A batch of 10 that waits for its slowest member would hold them ~150 s.
    assert others <= 0.5 * (-(-100 // 9) + 1)
    assert finished_at[0] > 100.0
    assert placement(cluster)[0] == (6,)


def test_cancel_midway_leaves_each_partition_on_its_target_or_original_and_rollback_restores(
    cluster: ReplicationCluster, tmp_path: Path
) -> None:
    sizes = build(cluster, 200, size=5 * MB)
    before = placement(cluster)
    state = tmp_path / "move.state"
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as client:
        admin = RecordingAdmin(client, sizes)
        plan = plan_move_off(client.cluster_view(), [1, 2, 3], client.replica_assignor, sizes=sizes)
        run = executor(cluster, admin, plan, ExecutorConfig(max_partitions=20), state)
        run.run(max_steps=6)
        # Another process (the CLI) asks for the cancel; the executor acts on its next step.
        request_cancel(state)
        progress = run.run()
        counts = progress.counts
        assert counts[MoveState.DONE] > 0
        assert counts[MoveState.CANCELLED] > 0
        assert counts[MoveState.DONE] + counts[MoveState.CANCELLED] == 200
        assert sum(admin.cancels.values()) > 0
        assert client.list_partition_reassignments() == {}
        after = placement(cluster)
        targets = plan.by_partition()
        for p, replicas in after.items():
            move = targets[TopicPartition("t", p)]
            state_of = run.core.state_of(move.tp)
            expected = move.replicas if state_of is MoveState.DONE else move.original_replicas
            assert set(replicas) == set(expected), (p, replicas, state_of)
        rollback = run.core.rollback_plan()
        assert len(rollback) == counts[MoveState.DONE]
        back = executor(cluster, admin, rollback, ExecutorConfig(max_partitions=20))
        assert back.run().done == len(rollback)
    assert {p: set(r) for p, r in placement(cluster).items()} == {
        p: set(r) for p, r in before.items()
    }


def test_throttles_are_set_while_moving_and_removed_after(cluster: ReplicationCluster) -> None:
    sizes = build(cluster, 4, size=10 * MB)
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as client:
        admin = RecordingAdmin(client, sizes)
        plan = plan_move_off(client.cluster_view(), [1], client.replica_assignor, sizes=sizes)
        config = ExecutorConfig(max_partitions=10, throttle_bytes_per_s=MB)
        run = executor(cluster, admin, plan, config)
        run.run(max_steps=1)
        topic = ConfigResource(ConfigResourceType.TOPIC, "t")
        during = client.describe_configs([topic])[topic]
        assert during["follower.replication.throttled.replicas"].value
        broker = ConfigResource(ConfigResourceType.BROKER, "4")
        assert client.describe_configs([broker])[broker][
            "follower.replication.throttled.rate"
        ].value == str(MB)
        start = cluster.now
        run.run()
        # Each added replica copies 10 MB at a 1 MB/s throttle (shared per broker).
        assert cluster.now - start >= 9.0
        after = client.describe_configs([topic])[topic]
        # Absent again, as before the run: not an empty value (what SUBTRACT leaves,
        # on Kafka as here; kafka-configs lists an empty value as set).
        assert after["follower.replication.throttled.replicas"].is_default
        assert after["leader.replication.throttled.replicas"].is_default
        rate = client.describe_configs([broker])[broker]["follower.replication.throttled.rate"]
        assert rate.is_default
        # Set; put back; the lists SUBTRACTed to nothing deleted.
        assert len(admin.config_changes) == 3


def test_a_target_changed_in_flight_never_drops_the_leader_first(
    cluster: ReplicationCluster, tmp_path: Path
) -> None:
    cluster.create_topic("t", [[1, 2]])
    cluster.set_partition_size("t", 0, 100 * MB)
    state = tmp_path / "s"
    tp = TopicPartition("t", 0)
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as client:
        admin = RecordingAdmin(client, {tp: 100 * MB})
        plan = ReassignmentPlan(
            moves=[
                PartitionMove(
                    topic="t",
                    partition=0,
                    replicas=(3, 4),
                    original_replicas=(1, 2),
                    size_bytes=100 * MB,
                )
            ]
        )
        run = executor(cluster, admin, plan, ExecutorConfig(max_partitions=1), state)
        run.run(max_steps=1)
        assert cluster.partition("t", 0).reassigning
        request_target_change(state, tp, [3, 5])
        leaders: list[int] = []
        run.run(on_progress=lambda _: leaders.append(cluster.partition("t", 0).leader))
    assert placement(cluster)[0] == (3, 5)
    assert all(leader in (1, 3, 5) for leader in leaders)
    # Submitted: the first target, the interim (3, 5, 1, 2: the originals kept), the end.
    assert admin.submissions[tp] == 3


def test_a_second_executor_on_the_same_state_file_is_refused(
    cluster: ReplicationCluster, tmp_path: Path
) -> None:
    sizes = build(cluster, 3)
    state = tmp_path / "s"
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as client:
        admin = RecordingAdmin(client, sizes)
        plan = plan_move_off(client.cluster_view(), [1], client.replica_assignor, sizes=sizes)
        first = executor(cluster, admin, plan, ExecutorConfig(), state)

        def intrude(_: object) -> None:
            second = ReassignmentExecutor.resume(admin, state)
            with pytest.raises(ExecutorBusyError):
                second.run()

        first.run(on_progress=intrude)


class Killed(Exception):
    """The executor process dies here."""


def test_an_executor_killed_twenty_times_resumes_to_the_uninterrupted_placement(
    tmp_path: Path,
) -> None:
    def fresh(cluster: ReplicationCluster) -> tuple[dict[TopicPartition, int], ReassignmentPlan]:
        sizes = build(cluster, 300, size=5 * MB)
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as client:
            view = client.cluster_view()
            return sizes, plan_move_off(view, [1, 2], client.replica_assignor, sizes=sizes)

    config = ExecutorConfig(max_partitions=20, throttle_bytes_per_s=20 * MB)
    with replication_cluster(6, racks=["a", "b", "c"], manual_clock=True) as cluster:
        sizes, plan = fresh(cluster)
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as client:
            executor(cluster, RecordingAdmin(client, sizes), plan, config).run()
        uninterrupted = placement(cluster)

    rng = random.Random(20)
    state = tmp_path / "killed.state"
    with replication_cluster(6, racks=["a", "b", "c"], manual_clock=True) as cluster:
        sizes, plan2 = fresh(cluster)
        assert plan2 == plan
        kills = 0
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as client:
            admin = RecordingAdmin(client, sizes)
            labels: Counter[str] = Counter()
            countdown = [rng.randint(1, 6)]

            def checkpoint(label: str) -> None:
                countdown[0] -= 1
                if countdown[0] == 0 and kills < 20:
                    labels[label] += 1
                    raise Killed(label)

            run = executor(cluster, admin, plan, config, state, checkpoint=checkpoint)
            while True:
                try:
                    run.run()
                    break
                except Killed:
                    kills += 1
                    countdown[0] = rng.randint(1, 6)
                    cluster.advance_time(rng.uniform(0.0, 2.0))  # time passes while it is down
                    run = ReassignmentExecutor.resume(
                        admin,
                        state,
                        clock=lambda: cluster.now,
                        sleep=cluster.advance_time,
                        poll_interval_s=0.5,
                        checkpoint=checkpoint,
                    )
            assert kills == 20
            assert len(labels) >= 3, labels  # died before and after several kinds of call
            assert set(admin.submissions.values()) == {1}, "a move reached the broker twice"
            assert len(admin.submissions) == 300, "a move was forgotten"
            assert client.list_partition_reassignments() == {}
            topic = ConfigResource(ConfigResourceType.TOPIC, "t")
            assert not client.describe_configs([topic])[topic][
                "follower.replication.throttled.replicas"
            ].value
        assert placement(cluster) == uninterrupted
