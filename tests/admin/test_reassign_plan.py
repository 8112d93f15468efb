"""Reassignment plans: the JSON file and the goals that generate them (docs/admin.md,
"Reassigning partitions")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer._types import TopicPartition
from coopconsumer.admin import BalancedReplicaAssignor, BrokerLoad, ClusterView
from coopconsumer.admin.reassign import (
    PartitionMove,
    PlanError,
    ReassignmentPlan,
    check_brokers_known,
    plan_add_brokers,
    plan_balance_disks,
    plan_move_off,
    plan_rebalance,
)


def cluster(
    brokers: int, assignment: Mapping[TopicPartition, tuple[int, ...]], racks: int = 0
) -> ClusterView:
    return ClusterView(
        brokers=[
            BrokerLoad(node_id=b, rack=f"r{b % racks}" if racks else None)
            for b in range(1, brokers + 1)
        ],
        assignments=assignment,
    )


def striped(
    count: int, on: int, rf: int = 2, topic: str = "t"
) -> dict[TopicPartition, tuple[int, ...]]:
    return {
        TopicPartition(topic, p): tuple(1 + (p + i) % on for i in range(rf)) for p in range(count)
    }


def test_json_round_trip_one_partition_per_line() -> None:
    plan = ReassignmentPlan(
        moves=[
            PartitionMove(topic="b", partition=1, replicas=(5, 6, 8), original_replicas=(7, 9, 8)),
            PartitionMove(
                topic="a",
                partition=0,
                replicas=(1, 2, 4),
                original_replicas=(1, 2, 3),
                size_bytes=9,
            ),
        ],
        description="seed 000's example",
    )
    text = plan.to_json()
    assert ReassignmentPlan.from_json(text) == plan
    lines = text.splitlines()
    assert lines[2].strip().startswith('{"topic": "a", "partition": 0, "replicas": [1, 2, 4]')
    assert '"original_replicas": [7, 9, 8]' in lines[3]
    assert [m.topic for m in plan.moves] == ["a", "b"]
    assert plan.total_bytes == 9
    assert plan.reversed().moves[0].replicas == (1, 2, 3)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"version": 2, "partitions": []}',
        '{"version": 1}',
        '{"version": 1, "partitions": [{"topic": "t"}]}',
        '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1],'
        ' "original_replicas": [1]}]}',
        '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [],'
        ' "original_replicas": [1]}]}',
    ],
)
def test_malformed_plans_are_refused(text: str) -> None:
    with pytest.raises(PlanError):
        ReassignmentPlan.from_json(text)


def test_a_partition_twice_is_refused() -> None:
    move = PartitionMove(topic="t", partition=0, replicas=(1,), original_replicas=(2,))
    with pytest.raises(PlanError, match="twice"):
        ReassignmentPlan(moves=[move, move])


def test_move_off_keeps_the_other_replicas_in_place_and_spreads_racks() -> None:
    view = cluster(6, striped(30, on=3, rf=3), racks=3)
    plan = plan_move_off(view, [2], BalancedReplicaAssignor(), sizes={TopicPartition("t", 0): 7})
    assert len(plan) == 30  # every partition has a replica on broker 2
    for m in plan.moves:
        assert 2 not in m.replicas
        for target, original in zip(m.replicas, m.original_replicas, strict=True):
            assert target == original or original == 2  # the others stay in place
        racks = {f"r{r % 3}" for r in m.replicas}
        assert len(racks) == 3  # broker 5 has broker 2's rack; nothing else would do
    assert plan.by_partition()[TopicPartition("t", 0)].bytes_to_move == 7
    assert Counter(m.adding[0] for m in plan.moves) == {5: 30}


def test_move_off_without_enough_brokers_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="needs 1 more"):
        plan_move_off(cluster(3, striped(3, on=3, rf=3)), [1], BalancedReplicaAssignor())


@settings(max_examples=40, deadline=None)
@given(
    brokers=st.integers(4, 9),
    count=st.integers(1, 40),
    rf=st.integers(1, 3),
    leaving=st.sets(st.integers(1, 9), min_size=1, max_size=2),
)
def test_move_off_property(brokers: int, count: int, rf: int, leaving: set[int]) -> None:
    view = cluster(brokers, striped(count, on=min(brokers, 4), rf=rf))
    remaining = brokers - len(leaving & set(range(1, brokers + 1)))
    if remaining < rf:
        with pytest.raises(PlanError):
            plan_move_off(view, leaving, BalancedReplicaAssignor())
        return
    plan = plan_move_off(view, leaving, BalancedReplicaAssignor())
    moved = plan.by_partition()
    for tp, replicas in view.assignments.items():
        target = moved[tp].replicas if tp in moved else replicas
        assert not set(target) & leaving
        assert len(set(target)) == len(target) == rf  # never two replicas on one broker
        assert (tp in moved) == bool(set(replicas) & leaving)
        kept = [r for r in replicas if r not in leaving]
        assert [r for r in target if r in replicas] == kept


def test_add_brokers_fills_new_brokers_to_the_average() -> None:
    view = cluster(5, striped(40, on=4, rf=2))  # broker 5 is new and empty
    plan = plan_add_brokers(view, [5])
    counts = Counter(
        r
        for tp, rs in view.assignments.items()
        for r in (plan.by_partition()[tp].replicas if tp in plan.by_partition() else rs)
    )
    assert counts[5] == 80 // 5
    assert max(counts.values()) - min(counts.values()) <= 1
    for m in plan.moves:
        assert m.adding == (5,)
        assert len(set(m.replicas)) == 2
    with pytest.raises(PlanError):
        plan_add_brokers(view, [42])


def test_add_brokers_keeps_every_partition_on_as_many_racks() -> None:
    # Racks a, b, c; new broker 4 on rack a. Broker 2 (rack b) holds a replica of every
    # partition, the other one is on broker 1 (rack a) or 3 (rack c).
    racks = {1: "a", 2: "b", 3: "c", 4: "a"}
    view = ClusterView(
        brokers=[BrokerLoad(node_id=b, rack=r) for b, r in racks.items()],
        assignments={TopicPartition("t", p): (1 + 2 * (p % 2), 2) for p in range(30)},
    )
    plan = plan_add_brokers(view, [4])
    # Broker 4 fills up to the average from broker 2, but only with partitions whose
    # other replica is on rack c: one on broker 1 would end up twice on rack a.
    assert len(plan) == 15
    for m in plan.moves:
        assert (m.original_replicas, m.replicas) == ((3, 2), (3, 4))
    skipped = TopicPartition("t", 1)
    assert skipped not in plan_add_brokers(view, [4], skip=[skipped]).by_partition()


def test_rebalance_moves_only_partitions_whose_replica_set_changes() -> None:
    skewed = {TopicPartition("t", p): (1, 2) for p in range(12)}
    view = cluster(4, skewed)
    plan = plan_rebalance(view, BalancedReplicaAssignor())
    final = {
        tp: plan.by_partition()[tp].replicas if tp in plan.by_partition() else r
        for tp, r in skewed.items()
    }
    counts = Counter(r for rs in final.values() for r in rs)
    assert set(counts) == {1, 2, 3, 4}
    assert max(counts.values()) - min(counts.values()) <= 1
    assert all(set(m.replicas) != set(m.original_replicas) for m in plan.moves)
    # A replica that stays keeps its position (fewer leader changes).
    for m in plan.moves:
        for i, r in enumerate(m.original_replicas):
            if r in m.replicas:
                assert m.replicas[i] == r


def test_every_goal_names_a_topic_or_broker_the_cluster_does_not_have() -> None:
    view = cluster(3, striped(6, 3))
    assignor = BalancedReplicaAssignor()
    with pytest.raises(PlanError, match="no such broker: 7, 9"):
        check_brokers_known(view, [1, 7, 9])
    with pytest.raises(PlanError, match="no such topic: ghost"):
        plan_move_off(view, [1], assignor, topics=["t", "ghost"])
    with pytest.raises(PlanError, match="no such topic: ghost"):
        plan_rebalance(view, assignor, topics=["ghost"])
    with pytest.raises(PlanError, match="not a live broker: 9"):
        plan_add_brokers(view, [9])
    with pytest.raises(PlanError, match="no such topic: ghost"):
        plan_balance_disks(view, {}, topics=["ghost"])
    # A broker that is down but still holds replicas can be moved off.
    down = ClusterView(brokers=[BrokerLoad(node_id=b) for b in (1, 2)], assignments=striped(6, 3))
    check_brokers_known(down, [3])
    assert len(plan_move_off(down, [3], assignor)) > 0
