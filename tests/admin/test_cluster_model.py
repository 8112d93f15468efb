"""The test cluster's replication model: transcripts of seed 004's scenarios, and
properties under random commands, kills and revivals."""

from __future__ import annotations

import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer.testing._cluster._model import (
    COMMAND_TYPES,
    ELECTION_NOT_NEEDED,
    INVALID_CONFIG,
    INVALID_REPLICA_ASSIGNMENT,
    LEADER_NOT_AVAILABLE,
    LOG_DIR_NOT_FOUND,
    NO_LEADER,
    NO_REASSIGNMENT_IN_PROGRESS,
    NOT_ENOUGH_REPLICAS,
    PARTITION_PREDECESSORS,
    PREFERRED_LEADER_NOT_AVAILABLE,
    REPLICA_NOT_AVAILABLE,
    REPLICA_PREDECESSORS,
    TOPIC_ALREADY_EXISTS,
    AlterConfigs,
    AlterReassignment,
    AlterReplicaLogDir,
    BrokerSpec,
    BrokerState,
    ClusterModel,
    Command,
    ConfigOp,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    ElectLeader,
    IllegalTransition,
    KillBroker,
    PartitionState,
    PartitionView,
    PauseBroker,
    Produce,
    ReplicaState,
    ReviveBroker,
    SetByteRate,
    SetProduceRate,
    SetSize,
)


def cluster(n: int = 4, rate: float = 100.0, replica_lag_time_max_s: float = 30.0) -> ClusterModel:
    racks = ["a", "b"]
    return ClusterModel(
        [
            BrokerSpec(node_id=i, rack=racks[i % 2], replication_bytes_per_s=rate)
            for i in range(1, n + 1)
        ],
        replica_lag_time_max_s=replica_lag_time_max_s,
    )


def ok(model: ClusterModel, command: Command, now: float | None = None) -> None:
    outcome = model.apply(command, model.now if now is None else now)
    assert outcome.ok, outcome


def test_created_partition_is_led_by_its_first_replica_at_epoch_zero() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[2, 1, 3], [3, 2, 4]]))
    p0, p1 = m.partitions("t")
    assert (p0.leader, p0.leader_epoch, p0.isr, p0.state) == (
        2,
        0,
        (2, 1, 3),
        PartitionState.ONLINE,
    )
    assert (p1.leader, p1.replicas) == (3, (3, 2, 4))
    assert set(p0.replica_states.values()) == {ReplicaState.ONLINE}
    again = m.apply(CreateTopic(name="t", assignment=[[1]]), 0)
    assert again.error_code == TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize(
    ("assignment", "fragment"),
    [
        ([[1, 1]], "more than once"),
        ([[9]], "no such broker"),
        ([[1, 2], [1]], "not consistent"),
        ([[]], "empty replica list"),
    ],
)
def test_bad_assignments_are_invalid_replica_assignment(
    assignment: list[list[int]], fragment: str
) -> None:
    outcome = cluster().apply(CreateTopic(name="t", assignment=assignment), 0)
    assert outcome.error_code == INVALID_REPLICA_ASSIGNMENT
    assert fragment in (outcome.message or "")


def test_reassignment_copies_at_the_byte_rate_then_drops_removing_replicas() -> None:
    m = cluster(rate=100.0)
    ok(m, CreateTopic(name="t", assignment=[[1, 2]]))
    ok(m, SetSize(topic="t", partition=0, size_bytes=1000))
    ok(m, AlterReassignment(topic="t", partition=0, target=(2, 3)))
    p = m.partition("t", 0)
    # KRaft: replicas = target + removing while the move is in flight.
    assert (p.replicas, p.adding, p.removing, p.isr) == ((2, 3, 1), (3,), (1,), (1, 2))
    m.advance(5.0)
    p = m.partition("t", 0)
    assert p.replica_bytes[3] == 500
    assert p.reassigning
    m.advance(10.0)
    p = m.partition("t", 0)
    assert (p.replicas, p.isr, p.adding, p.removing) == ((2, 3), (2, 3), (), ())
    assert (p.leader, p.leader_epoch) == (2, 1)  # leader 1 left: a new leader, a new epoch
    assert 1 not in p.replica_states


def test_cancel_restores_the_original_replicas() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1, 2]]))
    ok(m, SetSize(topic="t", partition=0, size_bytes=10_000))
    ok(m, AlterReassignment(topic="t", partition=0, target=(3, 4)))
    m.advance(1.0)
    ok(m, AlterReassignment(topic="t", partition=0, target=None))
    p = m.partition("t", 0)
    assert (p.replicas, p.isr, p.leader, p.adding, p.removing) == ((1, 2), (1, 2), 1, (), ())
    assert set(p.replica_states) == {1, 2}
    again = m.apply(AlterReassignment(topic="t", partition=0, target=None), m.now)
    assert again.error_code == NO_REASSIGNMENT_IN_PROGRESS


def test_a_new_target_replaces_the_in_flight_one() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1, 2]]))
    ok(m, SetSize(topic="t", partition=0, size_bytes=10_000))
    ok(m, AlterReassignment(topic="t", partition=0, target=(1, 3)))
    ok(m, AlterReassignment(topic="t", partition=0, target=(1, 4)))
    p = m.partition("t", 0)
    # Computed against the current replicas (1, 3, 2): 3 and 2 are now removing.
    assert (p.replicas, p.adding, p.removing) == ((1, 4, 3, 2), (4,), (3, 2))
    m.advance(200.0)
    p = m.partition("t", 0)
    assert (p.replicas, p.isr, p.reassigning) == ((1, 4), (1, 4), False)


def test_a_reassignment_waits_for_every_target_replica_in_the_isr() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1, 2]]))
    ok(m, SetSize(topic="t", partition=0, size_bytes=1000))
    ok(m, KillBroker(node_id=2))
    ok(m, AlterReassignment(topic="t", partition=0, target=(2,)))
    m.advance(100.0)
    p = m.partition("t", 0)
    # Only 2 would remain, and it is not in the ISR: the last ISR member is not removed.
    assert (p.replicas, p.isr, p.removing) == ((2, 1), (1,), (1,))
    ok(m, ReviveBroker(node_id=2))
    m.advance(200.0)
    p = m.partition("t", 0)
    assert (p.replicas, p.isr, p.leader) == ((2,), (2,), 2)


def test_killing_leaders_moves_leadership_then_takes_the_partition_offline() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1, 2]]))
    ok(m, KillBroker(node_id=1))
    p = m.partition("t", 0)
    assert (p.leader, p.leader_epoch, p.isr, p.offline_replicas) == (2, 1, (2,), (1,))
    ok(m, KillBroker(node_id=2))
    p = m.partition("t", 0)
    assert (p.leader, p.leader_epoch, p.isr, p.state) == (
        NO_LEADER,
        2,
        (2,),  # the last ISR member stays in the ISR
        PartitionState.OFFLINE,
    )
    ok(m, ReviveBroker(node_id=1))  # not in the ISR: the partition stays offline
    assert m.partition("t", 0).leader == NO_LEADER
    ok(m, ReviveBroker(node_id=2))
    p = m.partition("t", 0)
    assert (p.leader, p.leader_epoch, p.state) == (2, 3, PartitionState.ONLINE)
    m.advance(1.0)
    assert m.partition("t", 0).isr == (2, 1)


def test_unclean_election_only_when_configured() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1, 2]]))
    ok(m, SetSize(topic="t", partition=0, size_bytes=1000))
    ok(m, KillBroker(node_id=2))
    ok(m, Produce(topic="t", partition=0, num_bytes=10))
    ok(m, KillBroker(node_id=1))
    ok(m, ReviveBroker(node_id=2))
    assert m.partition("t", 0).leader == NO_LEADER
    ok(
        m,
        AlterConfigs(
            resource_type=2,
            name="t",
            ops=[("unclean.leader.election.enable", ConfigOp.SET, "true")],
        ),
    )
    ok(m, ElectLeader(topic="t", partition=0, unclean=True))
    p = m.partition("t", 0)
    assert (p.leader, p.isr, m.unclean_elections) == (2, (2,), 1)
    assert p.acknowledged_bytes == 1000  # the 10 acknowledged bytes are lost, and counted


def test_preferred_election() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1, 2]]))
    assert m.apply(ElectLeader(topic="t", partition=0), 0).error_code == ELECTION_NOT_NEEDED
    ok(m, KillBroker(node_id=1))
    outcome = m.apply(ElectLeader(topic="t", partition=0), 0)
    assert outcome.error_code == PREFERRED_LEADER_NOT_AVAILABLE
    ok(m, ReviveBroker(node_id=1))
    m.advance(1.0)
    ok(m, ElectLeader(topic="t", partition=0))
    p = m.partition("t", 0)
    assert (p.leader, p.leader_epoch) == (1, 2)


def test_throttles_cap_the_copy_rate_per_broker() -> None:
    m = cluster(rate=1000.0)
    ok(m, CreateTopic(name="t", assignment=[[1], [1]]))
    for i in (0, 1):
        ok(m, SetSize(topic="t", partition=i, size_bytes=1000))
    ok(
        m,
        AlterConfigs(
            resource_type=2,
            name="t",
            ops=[("follower.replication.throttled.replicas", ConfigOp.SET, "*")],
        ),
    )
    ok(
        m,
        AlterConfigs(
            resource_type=4,
            name="2",
            ops=[("follower.replication.throttled.rate", ConfigOp.SET, "100")],
        ),
    )
    ok(m, AlterReassignment(topic="t", partition=0, target=(1, 2)))
    ok(m, AlterReassignment(topic="t", partition=1, target=(1, 2)))
    m.advance(1.0)
    # Two throttled replicas on broker 2 share its 100 B/s.
    assert [p.replica_bytes[2] for p in m.partitions("t")] == [50, 50]
    ok(
        m,
        AlterConfigs(
            resource_type=4,
            name="2",
            ops=[("follower.replication.throttled.rate", ConfigOp.DELETE, None)],
        ),
    )
    m.advance(2.0)
    assert [p.replicas for p in m.partitions("t")] == [(1, 2), (1, 2)]


def test_paused_followers_leave_the_isr_after_the_lag_time() -> None:
    m = cluster(replica_lag_time_max_s=10.0)
    ok(m, CreateTopic(name="t", assignment=[[1, 2, 3]]))
    ok(m, PauseBroker(node_id=3))
    assert m.broker_state(3) is BrokerState.PAUSED
    m.advance(9.0)
    assert m.partition("t", 0).isr == (1, 2, 3)
    assert m.apply(Produce(topic="t", partition=0, num_bytes=5), 9.5).error_code == 7
    m.advance(10.0)
    assert m.partition("t", 0).isr == (1, 2)
    ok(m, Produce(topic="t", partition=0, num_bytes=5))
    ok(m, ReviveBroker(node_id=3))
    m.advance(11.0)
    assert m.partition("t", 0).isr == (1, 2, 3)


def test_a_slow_follower_that_still_fetches_leaves_the_isr_and_rejoins_when_caught_up() -> None:
    m = cluster(rate=1000.0, replica_lag_time_max_s=10.0)
    ok(m, CreateTopic(name="t", assignment=[[1, 2, 3]]))
    ok(m, SetByteRate(node_id=3, replication_bytes_per_s=400.0))
    ok(m, SetProduceRate(topic="t", partition=0, bytes_per_s=500.0))
    m.advance(9.0)
    p = m.partition("t", 0)
    # Broker 3 fetches all the time, 100 B/s slower than the producers write.
    assert (p.isr, p.size_bytes, p.replica_bytes[2], p.replica_bytes[3]) == (
        (1, 2, 3),
        4500,
        4500,
        3600,
    )
    assert m.broker_state(3) is BrokerState.ONLINE
    m.advance(10.0)
    assert m.partition("t", 0).isr == (1, 2)  # 10 s without holding the leader's end
    # The high watermark moves with the ISR: acks=all writes are acknowledged again.
    assert m.partition("t", 0).acknowledged_bytes == 5000
    ok(m, SetProduceRate(topic="t", partition=0, bytes_per_s=0.0))
    m.advance(12.0)  # 1000 B behind at 400 B/s: back at 12.5 s
    assert m.partition("t", 0).isr == (1, 2)
    m.advance(12.5)
    p = m.partition("t", 0)
    assert (p.isr, p.replica_bytes[3]) == ((1, 2, 3), 5000)


def test_a_follower_that_keeps_up_stays_in_the_isr_and_writes_stop_below_min_isr() -> None:
    m = cluster(rate=1000.0, replica_lag_time_max_s=10.0)
    ok(m, CreateTopic(name="t", assignment=[[1, 2]], configs={"min.insync.replicas": "2"}))
    ok(m, SetProduceRate(topic="t", partition=0, bytes_per_s=500.0))
    m.advance(100.0)
    p = m.partition("t", 0)
    assert (p.isr, p.size_bytes, p.acknowledged_bytes) == ((1, 2), 50_000, 50_000)
    ok(m, PauseBroker(node_id=2))
    m.advance(111.0)
    p = m.partition("t", 0)
    # Out of the ISR after 10 s; with 1 < min.insync.replicas the leader takes no writes.
    assert (p.isr, p.size_bytes, p.acknowledged_bytes) == ((1,), 55_000, 50_000)
    m.advance(200.0)
    assert m.partition("t", 0).size_bytes == 55_000


def test_automatic_preferred_leader_balancing() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1, 2], [2, 1]]))
    ok(m, KillBroker(node_id=1))
    ok(m, ReviveBroker(node_id=1))
    m.advance(10.0)
    assert [p.leader for p in m.partitions("t")] == [2, 2]
    m.advance(299.0)
    assert m.partition("t", 0).leader == 2
    m.advance(300.0)  # leader.imbalance.check.interval.seconds
    p = m.partition("t", 0)
    assert (p.leader, p.leader_epoch, m.auto_balanced_leaders) == (1, 2, 1)

    off = cluster()
    ok(
        off,
        AlterConfigs(
            resource_type=4, name="", ops=[("auto.leader.rebalance.enable", ConfigOp.SET, "false")]
        ),
    )
    refused = off.apply(
        AlterConfigs(
            resource_type=4, name="1", ops=[("auto.leader.rebalance.enable", ConfigOp.SET, "1")]
        ),
        0,
    )
    assert refused.error_code == 42  # a controller setting: cluster-wide only
    ok(off, CreateTopic(name="t", assignment=[[1, 2]]))
    ok(off, KillBroker(node_id=1))
    ok(off, ReviveBroker(node_id=1))
    off.advance(1000.0)
    assert off.partition("t", 0).leader == 2


def test_deleting_a_topic_waits_for_brokers_that_are_down() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1, 2], [3, 4]]))
    ok(m, KillBroker(node_id=4))
    ok(m, DeleteTopic(name="t"))
    assert m.topics() == []
    # Seed 004: the close-replica request for broker 4 waits until it returns.
    assert m.topics_being_deleted() == {"t": [(1, 4)]}
    internal = m._deleting["t"].partitions
    assert [p.state for p in internal] == [PartitionState.NON_EXISTENT] * 2
    assert internal[1].replica_states == {4: ReplicaState.DELETING}
    again = m.apply(CreateTopic(name="t", assignment=[[1]]), m.now)
    assert again.error_code == TOPIC_ALREADY_EXISTS
    assert "marked for deletion" in (again.message or "")
    ok(m, ReviveBroker(node_id=4))
    assert m.topics_being_deleted() == {}
    ok(m, CreateTopic(name="t", assignment=[[1]]))
    assert m.partition("t", 0).replica_bytes == {1: 0}


def test_log_dirs_new_replicas_go_to_the_emptiest_and_moves_go_through_a_future_replica() -> None:
    m = ClusterModel(
        [
            BrokerSpec(node_id=1, log_dirs=("/d1", "/d2"), disk_copy_bytes_per_s=100.0),
            BrokerSpec(node_id=2, log_dirs=("/e1", "/e2")),
        ]
    )
    ok(m, CreateTopic(name="t", assignment=[[1, 2], [1, 2], [2, 1]]))
    assert [p.replica_dirs[1] for p in m.partitions("t")] == ["/d1", "/d2", "/d1"]
    ok(m, SetSize(topic="t", partition=0, size_bytes=1000))
    bad = m.apply(AlterReplicaLogDir(node_id=1, topic="t", partition=0, path="/nope"), 0)
    assert bad.error_code == LOG_DIR_NOT_FOUND
    ok(m, AlterReplicaLogDir(node_id=1, topic="t", partition=0, path="/d2"))
    m.advance(4.0)
    p = m.partition("t", 0)
    assert (p.replica_dirs[1], p.future_dirs, p.future_bytes) == ("/d1", {1: "/d2"}, {1: 400})
    assert {d.path: d.used_bytes for d in m.brokers()[0].log_dirs} == {"/d1": 1000, "/d2": 400}
    m.advance(10.0)
    p = m.partition("t", 0)
    assert (p.replica_dirs[1], p.future_dirs) == ("/d2", {})
    # A broker without the replica remembers the directory for when it gets one.
    ok(m, CreateTopic(name="u", assignment=[[2]]))
    early = m.apply(AlterReplicaLogDir(node_id=1, topic="u", partition=0, path="/d2"), m.now)
    assert early.error_code == REPLICA_NOT_AVAILABLE
    ok(m, AlterReassignment(topic="u", partition=0, target=(2, 1)))
    assert m.partition("u", 0).replica_dirs[1] == "/d2"


def test_min_insync_replicas_refuses_writes() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1, 2]], configs={"min.insync.replicas": "2"}))
    ok(m, Produce(topic="t", partition=0, num_bytes=5))
    ok(m, KillBroker(node_id=2))
    assert (
        m.apply(Produce(topic="t", partition=0, num_bytes=5), 0).error_code == NOT_ENOUGH_REPLICAS
    )
    ok(m, KillBroker(node_id=1))
    assert (
        m.apply(Produce(topic="t", partition=0, num_bytes=5), 0).error_code == LEADER_NOT_AVAILABLE
    )


def test_configs_are_validated() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1]]))
    for ops in (
        [("no.such.config", ConfigOp.SET, "1")],
        [("min.insync.replicas", ConfigOp.SET, "zero")],
        [("retention.ms", ConfigOp.APPEND, "1")],
        [("leader.replication.throttled.replicas", ConfigOp.SET, "0-1")],
    ):
        outcome = m.apply(AlterConfigs(resource_type=2, name="t", ops=ops), 0)
        assert outcome.error_code == INVALID_CONFIG, ops
    ok(
        m,
        AlterConfigs(
            resource_type=2,
            name="t",
            ops=[("leader.replication.throttled.replicas", ConfigOp.APPEND, "0:1,0:2")],
        ),
    )
    ok(
        m,
        AlterConfigs(
            resource_type=2,
            name="t",
            ops=[("leader.replication.throttled.replicas", ConfigOp.SUBTRACT, "0:1")],
        ),
    )
    assert m.topic_configs("t") == {"leader.replication.throttled.replicas": "0:2"}


def test_create_partitions_and_delete_topic() -> None:
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1, 2]]))
    ok(m, CreatePartitions(topic="t", count=3, assignment=[[3, 4], [4, 1]]))
    assert [p.replicas for p in m.partitions("t")] == [(1, 2), (3, 4), (4, 1)]
    bad = m.apply(CreatePartitions(topic="t", count=4, assignment=[[1]]), 0)
    assert bad.error_code == INVALID_REPLICA_ASSIGNMENT
    ok(m, DeleteTopic(name="t"))
    assert m.topics() == []


def test_every_command_has_a_handler_and_illegal_transitions_raise() -> None:
    assert set(COMMAND_TYPES) == set(typing.get_args(Command))
    with pytest.raises(TypeError):
        cluster().apply("kill it", 0)  # type: ignore[arg-type]
    assert ReplicaState.NEW not in REPLICA_PREDECESSORS[ReplicaState.NON_EXISTENT]
    assert set(PARTITION_PREDECESSORS) == set(PartitionState)
    m = cluster()
    ok(m, CreateTopic(name="t", assignment=[[1]]))
    internal = m._topics["t"].partitions[0]
    with pytest.raises(IllegalTransition):
        m._replica_to(internal, 1, ReplicaState.NON_EXISTENT)  # ONLINE cannot vanish directly
    with pytest.raises(ValueError, match="backwards"):
        m.advance(-1.0)


# --------------------------------------------------------------------------- properties

BROKERS = (1, 2, 3, 4, 5)
replica_lists = st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True)
commands = st.one_of(
    st.builds(KillBroker, node_id=st.sampled_from(BROKERS)),
    st.builds(ReviveBroker, node_id=st.sampled_from(BROKERS)),
    st.builds(PauseBroker, node_id=st.sampled_from(BROKERS)),
    st.builds(
        AlterReassignment,
        topic=st.just("t"),
        partition=st.integers(0, 2),
        target=st.one_of(st.none(), replica_lists.map(tuple)),
    ),
    st.builds(
        Produce, topic=st.just("t"), partition=st.integers(0, 2), num_bytes=st.integers(1, 500)
    ),
    st.builds(
        SetSize, topic=st.just("t"), partition=st.integers(0, 2), size_bytes=st.integers(0, 5000)
    ),
    st.builds(ElectLeader, topic=st.just("t"), partition=st.integers(0, 2)),
    st.builds(
        SetByteRate,
        node_id=st.sampled_from(BROKERS),
        replication_bytes_per_s=st.sampled_from([0.0, 50.0, 1000.0]),
    ),
    st.builds(
        SetProduceRate,
        topic=st.just("t"),
        partition=st.integers(0, 2),
        bytes_per_s=st.sampled_from([0.0, 20.0, 500.0]),
    ),
    st.builds(
        AlterReplicaLogDir,
        node_id=st.sampled_from(BROKERS),
        topic=st.just("t"),
        partition=st.integers(0, 2),
        path=st.sampled_from(["/a", "/b"]),
    ),
)
steps = st.lists(st.tuples(commands, st.sampled_from([0.0, 0.5, 2.0, 10.0])), max_size=40)


def check_invariants(m: ClusterModel, before: dict[int, PartitionView], min_isr: int = 1) -> None:
    for p in m.partitions("t"):
        # Fewer live copies of the acknowledged bytes than min.insync.replicas only
        # when the partition shows it: offline, or an ISR too small to take writes.
        holders = [
            r
            for r in p.replicas
            if m.broker_state(r) is not BrokerState.DEAD
            and p.replica_bytes[r] >= p.acknowledged_bytes
        ]
        if p.acknowledged_bytes and len(holders) < min_isr:
            assert p.leader == NO_LEADER or len(p.isr) < min_isr, (p, holders)
        assert p.isr, f"empty ISR: {p}"
        assert set(p.isr) <= set(p.replicas)
        assert len(set(p.replicas)) == len(p.replicas)
        assert set(p.adding) <= set(p.replicas)
        assert set(p.removing) <= set(p.replicas)
        assert not set(p.adding) & set(p.removing)
        assert set(p.replica_states) == set(p.replicas)
        assert set(p.replica_dirs) == set(p.replicas)
        assert set(p.replica_dirs.values()) <= {"/a", "/b"}
        assert all(p.replica_dirs[r] != d for r, d in p.future_dirs.items())
        if p.leader != NO_LEADER:
            assert p.leader in p.isr
            assert m.broker_state(p.leader) is not BrokerState.DEAD
            # No silent loss: a partition with a leader has every acknowledged byte.
            assert p.replica_bytes[p.leader] >= p.acknowledged_bytes, p
            assert p.state is PartitionState.ONLINE
        else:
            assert p.state is PartitionState.OFFLINE  # offline, and visibly so
        old = before.get(p.partition)
        if old is not None:
            assert p.leader_epoch >= old.leader_epoch
            if p.leader != old.leader:
                assert p.leader_epoch > old.leader_epoch


@settings(max_examples=300)
@given(steps=steps, min_isr=st.sampled_from([1, 2]))
def test_model_invariants_under_random_commands(
    steps: list[tuple[Command, float]], min_isr: int
) -> None:
    m = ClusterModel(
        [
            BrokerSpec(node_id=b, replication_bytes_per_s=200.0, log_dirs=("/a", "/b"))
            for b in BROKERS
        ],
        replica_lag_time_max_s=5.0,
    )
    ok(
        m,
        CreateTopic(
            name="t",
            assignment=[[1, 2, 3], [2, 3, 4], [3, 4, 5]],
            configs={"min.insync.replicas": str(min_isr)},
        ),
    )
    for i in range(3):
        ok(m, SetSize(topic="t", partition=i, size_bytes=1000))  # 5 s to copy at 200 B/s
    now = 0.0
    for command, dt in steps:
        before = {p.partition: p for p in m.partitions("t")}
        now += dt
        m.advance(now)
        check_invariants(m, before, min_isr)
        before = {p.partition: p for p in m.partitions("t")}
        isr_before = {p.partition: p.isr for p in before.values()}
        outcome = m.apply(command, now)
        check_invariants(m, before, min_isr)
        if isinstance(command, Produce) and outcome.ok:
            # Acknowledged only with enough in-sync copies, all holding the bytes.
            p = m.partition("t", command.partition)
            assert len(isr_before[command.partition]) >= min_isr
            assert all(p.replica_bytes[r] >= p.acknowledged_bytes for r in p.isr)
        if isinstance(command, AlterReassignment) and command.target is None and outcome.ok:
            assert (
                m.partition("t", command.partition).replicas
                == before[command.partition].original_replicas
            )
    assert m.unclean_elections == 0 or any(
        isinstance(c, AlterReassignment) and c.target is None for c, _ in steps
    )


class _NeverQuiet(ClusterModel):
    """The model without its shortcut: every partition is looked at every step."""

    def _quiet(self, p: typing.Any) -> bool:
        return False


@settings(max_examples=200)
@given(steps=steps)
def test_skipping_quiet_partitions_changes_nothing(steps: list[tuple[Command, float]]) -> None:
    models = [
        cls(
            [
                BrokerSpec(node_id=b, replication_bytes_per_s=200.0, log_dirs=("/a", "/b"))
                for b in BROKERS
            ],
            replica_lag_time_max_s=5.0,
        )
        for cls in (ClusterModel, _NeverQuiet)
    ]
    now = 0.0
    for m in models:
        ok(m, CreateTopic(name="t", assignment=[[1, 2, 3], [2, 3, 4], [3, 4, 5]]))
        for i in range(3):
            ok(m, SetSize(topic="t", partition=i, size_bytes=1000))
    for command, dt in steps:
        now += dt
        outcomes = [m.apply(command, now) for m in models]
        assert outcomes[0] == outcomes[1]
        assert models[0].partitions("t") == models[1].partitions("t")
        assert models[0].brokers() == models[1].brokers()
