"""The ``kraft`` assignor against Kafka's own placer tests.

Every case of apache/kafka's ``StripedReplicaPlacerTest`` (metadata module), translated:
the same brokers, racks, fenced flags and existing partitions, a generator in the state
of Kafka's ``MockRandom`` (17), and the placements Kafka's test expects. Then the
assignor through the public ``ReplicaAssignor`` interface, and over the wire.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coopconsumer._types import TopicPartition
from coopconsumer.admin import (
    AdminClient,
    BrokerLoad,
    ClusterView,
    KRaftReplicaAssignor,
    NewPartitions,
    NewTopic,
    ReplicaAssignorError,
    load_replica_assignor,
)
from coopconsumer.admin._kraft import (
    JavaRandom,
    UsableBroker,
    _BrokerList,
    _hash_map_order,
    _RackList,
    previous_broker_offset,
    previous_rack_offset,
    striped_placement,
)
from coopconsumer.testing import replication_cluster


def B(node_id: int, rack: str | None = None, fenced: bool = False) -> UsableBroker:
    return UsableBroker(node_id, rack, fenced)


def test_java_random_matches_java() -> None:
    # java.util.Random over MockRandom's generator (state 17): values worked out from
    # Random.nextInt's definition, and the power-of-two branch.
    r = JavaRandom()
    first = [r.next_int(5) for _ in range(6)]
    again = JavaRandom()
    assert [again.next_int(5) for _ in range(6)] == first
    assert all(0 <= v < 5 for v in first)
    power = JavaRandom()
    bits = JavaRandom().next_bits(31)
    assert power.next_int(8) == (8 * bits) >> 31
    with pytest.raises(ValueError, match="positive"):
        JavaRandom().next_int(0)


def test_hash_map_order_follows_java_buckets() -> None:
    # Optional.empty() hashes to 0; "1".."4" to 49..52: buckets 1..4 of 16.
    assert _hash_map_order(["3", None, "1", "2"]) == [None, "1", "2", "3"]
    # "Aa" and "BB" collide in String.hashCode: insertion order within the bucket.
    assert _hash_map_order(["BB", "Aa"]) == ["BB", "Aa"]


# --------------------------------------------------------------------------- Kafka's cases


def test_broker_list() -> None:
    assert _BrokerList().next(1) == -1
    brokers = _BrokerList().add(0).add(1).add(2).add(3)
    assert len(brokers.brokers) == 4
    assert [brokers.next(0) for _ in range(6)] == [0, 1, 2, 3, -1, -1]
    assert [brokers.next(1) for _ in range(5)] == [1, 2, 3, 0, -1]


def test_avoid_fenced_replica_if_possible_on_single_rack() -> None:
    racks = _RackList(JavaRandom(), [B(3), B(1, fenced=True), B(0), B(4), B(2)])
    assert (racks.num_total, racks.num_unfenced, racks.rack_names) == (5, 4, [None])
    for bad in (0, -1):
        with pytest.raises(ReplicaAssignorError):
            racks.place(bad)
    assert [racks.place(4) for _ in range(5)] == [
        [3, 4, 0, 2],
        [4, 0, 2, 3],
        [0, 2, 3, 4],
        [2, 3, 4, 0],
        [0, 4, 3, 2],
    ]


def test_multi_partition_topic_placement_on_single_unfenced_broker() -> None:
    placed = striped_placement([B(0), B(1, fenced=True)], num_partitions=3, replication_factor=1)
    assert placed == [[0], [0], [0]]


def test_placement_on_fenced_replica_on_single_rack() -> None:
    racks = _RackList(JavaRandom(), [B(3), B(1, fenced=True), B(2)])
    assert (racks.num_total, racks.num_unfenced, racks.rack_names) == (3, 2, [None])
    assert [racks.place(3) for _ in range(4)] == [[3, 2, 1], [2, 3, 1], [3, 2, 1], [2, 3, 1]]


def test_rack_list_with_multiple_racks() -> None:
    racks = _RackList(
        JavaRandom(),
        [B(11, "1"), B(10, "1"), B(30, "3"), B(31, "3"), B(21, "2"), B(20, "2", fenced=True)],
    )
    assert (racks.num_total, racks.num_unfenced, racks.rack_names) == (6, 5, ["1", "2", "3"])
    assert [racks.place(4) for _ in range(3)] == [
        [11, 21, 31, 10],
        [21, 30, 10, 20],
        [31, 11, 21, 30],
    ]


def test_place_shifts_initial_offsets_rack_unaware() -> None:
    brokers = [B(i) for i in range(12)]
    first = striped_placement(brokers, num_partitions=2, replication_factor=3)
    assert first == [[7, 8, 9], [8, 9, 10]]
    two_more = striped_placement(brokers, num_partitions=2, replication_factor=3, existing=first)
    assert two_more == [[9, 10, 11], [10, 11, 0]]
    four_more = striped_placement(
        brokers, num_partitions=4, replication_factor=3, existing=first + two_more
    )
    assert four_more == [[11, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4]]


def test_place_shifts_initial_offsets_rack_aware() -> None:
    brokers = [B(i, str(1 + i // 4)) for i in range(12)]
    first = striped_placement(brokers, num_partitions=2, replication_factor=3)
    assert first == [[6, 8, 2], [9, 3, 7]]
    more = striped_placement(brokers, num_partitions=2, replication_factor=3, existing=first)
    assert more == [[0, 4, 10], [5, 11, 1]]
    assert {b for replicas in first + more for b in replicas} == set(range(12))


def test_place_shifts_initial_offsets_rack_aware_and_uses_unused_racks() -> None:
    brokers = [B(i, str(i + 1)) for i in range(4)]
    placed = striped_placement(brokers, num_partitions=1, replication_factor=2)
    assert placed == [[0, 1]]
    # As in Kafka's test, each step passes only the previous step's partitions.
    for expected in ([[1, 2]], [[2, 3]], [[3, 0]]):
        placed = striped_placement(brokers, num_partitions=1, replication_factor=2, existing=placed)
        assert placed == expected


def test_rack_list_with_invalid_racks() -> None:
    racks = _RackList(
        JavaRandom(),
        [
            B(11, "1"),
            B(10, "1"),
            B(30, "3", fenced=True),
            B(31, "3", fenced=True),
            B(20, "2", fenced=True),
            B(21, "2", fenced=True),
            B(41, "4"),
            B(40, "4", fenced=True),
        ],
    )
    assert (racks.num_total, racks.num_unfenced) == (8, 3)
    assert racks.rack_names == ["1", "2", "3", "4"]
    assert [racks.place(4) for _ in range(3)] == [
        [41, 11, 21, 30],
        [10, 20, 31, 41],
        [41, 21, 30, 11],
    ]


RACK_OF = {i: str(1 + i // 4) for i in range(12)}


def test_previous_broker_offset() -> None:
    rack_1, rack_2, rack_3 = [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]
    assert previous_broker_offset(RACK_OF, [], "1", rack_1) is None
    assert previous_broker_offset(RACK_OF, [[0, 1, 2], [1, 2, 0]], "1", rack_1) == 1
    assert previous_broker_offset(RACK_OF, [[0, 1, 2], [1, 2, 0]], "1", []) is None
    last_three = [[0, 1, 2], [1, 2, 0], [4, 5, 6], [5, 6, 7]]
    assert previous_broker_offset(RACK_OF, last_three, "1", rack_1) == 1
    assert previous_broker_offset(RACK_OF, [[4, 5, 1]], "1", rack_1) == 1
    assert previous_broker_offset(RACK_OF, [[1, 2, 0], [0, 5, 6], [0, 1, 2]], "2", rack_2) == 1
    assert previous_broker_offset(RACK_OF, last_three, "3", rack_3) is None


def test_previous_rack_offset() -> None:
    racks: list[str | None] = ["1", "2", "3"]
    assert previous_rack_offset(RACK_OF, [], racks) is None
    existing = [[6, 8, 2], [9, 3, 7]]
    assert previous_rack_offset(RACK_OF, existing, [None]) is None
    assert previous_rack_offset(RACK_OF, existing, racks) == 2
    assert previous_rack_offset({}, existing, racks) is None


@pytest.mark.parametrize(
    ("brokers", "rf", "message"),
    [
        (
            [B(11, "1", fenced=True), B(10, "1", fenced=True)],
            1,
            "All brokers are currently fenced.",
        ),
        (
            [B(11, "1"), B(10, "1")],
            3,
            "The target replication factor of 3 cannot be reached because only 2 broker(s) "
            "are registered.",
        ),
        (
            [B(11, "1"), B(10, "1")],
            0,
            "Invalid replication factor 0: the replication factor must be positive.",
        ),
    ],
    ids=["all-fenced", "not-enough-brokers", "non-positive-rf"],
)
def test_refusals(brokers: list[UsableBroker], rf: int, message: str) -> None:
    with pytest.raises(ReplicaAssignorError) as info:
        striped_placement(brokers, num_partitions=1, replication_factor=rf)
    assert str(info.value) == message


def test_successful_placement() -> None:
    placed = striped_placement([B(0), B(3), B(2), B(1)], num_partitions=5, replication_factor=3)
    assert placed == [[2, 3, 0], [3, 0, 1], [0, 1, 2], [1, 2, 3], [1, 0, 2]]


def test_even_distribution() -> None:
    placed = striped_placement([B(0), B(1), B(2), B(3)], num_partitions=200, replication_factor=2)
    assert Counter(tuple(p) for p in placed) == {
        (0, 1): 14,
        (0, 2): 22,
        (0, 3): 14,
        (1, 0): 17,
        (1, 2): 17,
        (1, 3): 16,
        (2, 0): 13,
        (2, 1): 17,
        (2, 3): 20,
        (3, 0): 20,
        (3, 1): 19,
        (3, 2): 11,
    }


def test_rack_list_all_brokers_fenced_and_other_refusals() -> None:
    fenced = _RackList(JavaRandom(), [B(0, fenced=True), B(1, fenced=True), B(2, fenced=True)])
    assert (fenced.num_total, fenced.num_unfenced, fenced.rack_names) == (3, 0, [None])
    with pytest.raises(ReplicaAssignorError, match=r"All brokers are currently fenced\."):
        fenced.place(3)
    few = _RackList(JavaRandom(), [B(11, "1"), B(10, "1")])
    with pytest.raises(ReplicaAssignorError, match="only 2 broker"):
        few.place(3)
    with pytest.raises(ReplicaAssignorError, match="Invalid replication factor -1"):
        few.place(-1)


# --------------------------------------------------------------------------- the assignor


def view(racks: dict[int, str | None], fenced: dict[int, str | None] | None = None) -> ClusterView:
    return ClusterView(
        brokers=[BrokerLoad(node_id=b, rack=r) for b, r in racks.items()],
        fenced_brokers=[BrokerLoad(node_id=b, rack=r) for b, r in (fenced or {}).items()],
    )


def test_the_assignor_is_the_default_and_matches_the_placer() -> None:
    assert isinstance(load_replica_assignor("kraft"), KRaftReplicaAssignor)
    assert isinstance(load_replica_assignor("default"), KRaftReplicaAssignor)
    cluster = view({0: None, 3: None, 2: None, 1: None})
    request = NewPartitions(topic="t", partition_ids=range(5), replication_factor=3)
    assert KRaftReplicaAssignor(seed=17).assign(request, cluster) == {
        0: (2, 3, 0),
        1: (3, 0, 1),
        2: (0, 1, 2),
        3: (1, 2, 3),
        4: (1, 0, 2),
    }
    # Fenced brokers (DescribeCluster v2) are followers of last resort, never leaders.
    with_fenced = view({3: None, 0: None, 4: None, 2: None}, fenced={1: None})
    placed = KRaftReplicaAssignor(seed=17).assign(
        NewPartitions(topic="t", partition_ids=range(5), replication_factor=4), with_fenced
    )
    assert list(placed.values()) == [
        (3, 4, 0, 2),
        (4, 0, 2, 3),
        (0, 2, 3, 4),
        (2, 3, 4, 0),
        (0, 4, 3, 2),
    ]


def test_new_partitions_continue_the_stripes() -> None:
    cluster = view({i: str(1 + i // 4) for i in range(12)})
    assignor = KRaftReplicaAssignor(seed=17)
    first = assignor.assign(
        NewPartitions(topic="t", partition_ids=range(2), replication_factor=3), cluster
    )
    assert first == {0: (6, 8, 2), 1: (9, 3, 7)}
    grown = ClusterView(
        brokers=cluster.brokers,
        assignments={TopicPartition("t", p): r for p, r in first.items()},
    )
    more = assignor.assign(
        NewPartitions(topic="t", partition_ids=(2, 3), replication_factor=3), grown
    )
    assert more == {2: (0, 4, 10), 3: (5, 11, 1)}


@given(
    brokers=st.integers(1, 12),
    racks=st.integers(1, 4),
    partitions=st.integers(1, 60),
    rf=st.integers(1, 4),
    topic=st.text(min_size=1, max_size=8),
)
def test_rack_spread_and_one_replica_per_broker(
    brokers: int, racks: int, partitions: int, rf: int, topic: str
) -> None:
    racks = min(racks, brokers)
    cluster = view({b: f"r{b % racks}" for b in range(brokers)})
    request = NewPartitions(topic=topic, partition_ids=range(partitions), replication_factor=rf)
    if rf > brokers:
        with pytest.raises(ReplicaAssignorError):
            KRaftReplicaAssignor().assign(request, cluster)
        return
    placed = KRaftReplicaAssignor().assign(request, cluster)
    assert placed == KRaftReplicaAssignor().assign(request, cluster)  # deterministic
    for replicas in placed.values():
        assert len(set(replicas)) == rf
        assert len({f"r{b % racks}" for b in replicas}) == min(rf, racks)


def test_topics_created_over_the_wire_are_placed_by_kraft_by_default() -> None:
    with (
        replication_cluster(6, racks=["a", "b", "c"], manual_clock=True) as cluster,
        AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin,
    ):
        assert admin.replica_assignor.name == "kraft"
        placed = admin.create_topics([NewTopic("t", num_partitions=6, replication_factor=3)])
        expected = KRaftReplicaAssignor().assign(
            NewPartitions(topic="t", partition_ids=range(6), replication_factor=3),
            view({b: "abc"[(b - 1) % 3] for b in range(1, 7)}),
        )
        assert placed["t"] == expected
        assert [p.replicas for p in cluster.partitions("t")] == [expected[i] for i in range(6)]
        cluster.kill_broker(6)
        grown = admin.create_partitions({"t": 8})["t"]
        # Broker 6 is fenced now (DescribeCluster v2): it may follow, never lead.
        assert all(replicas[0] != 6 for replicas in grown.values())
        assert [p.replicas for p in cluster.partitions("t")[6:]] == [grown[6], grown[7]]
