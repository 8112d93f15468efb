"""Replica assignors: Kafka's known placements for ``default``, seed 001's scenarios for
``balanced``, and properties of both (rack diversity, balance, determinism)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer._errors import ConfigurationError
from coopconsumer._types import TopicPartition
from coopconsumer.admin import (
    BalancedReplicaAssignor,
    BrokerLoad,
    ClusterView,
    NewPartitions,
    ReplicaAssignor,
    ReplicaAssignorError,
    ZooKeeperReplicaAssignor,
    load_replica_assignor,
)
from coopconsumer.admin._replica_assignor import LogDirLoad, check_assignment
from coopconsumer.admin._zookeeper import kafka_placement, rack_alternated


def view(racks: Mapping[int, str | None], **loads: Mapping[int, int]) -> ClusterView:
    return ClusterView(
        brokers=[
            BrokerLoad(
                node_id=b,
                rack=r,
                replicas=loads.get("replicas", {}).get(b, 0),
                used_bytes=loads.get("used", {}).get(b),
                total_bytes=loads.get("total", {}).get(b),
            )
            for b, r in racks.items()
        ]
    )


def new(topic: str, count: int, rf: int, first: int = 0) -> NewPartitions:
    return NewPartitions(
        topic=topic, partition_ids=range(first, first + count), replication_factor=rf
    )


# ----------------------------------------------------------------- default = Kafka's placement

# From Kafka's AdminRackAwareTest (core/src/test/scala/unit/kafka/admin): the rack
# alternated broker list, and the placements assignReplicasToBrokers makes with a fixed
# start index of 0.
KAFKA_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_broker_list_matches_kafka() -> None:
    assert rack_alternated(KAFKA_RACKS) == [0, 3, 1, 5, 4, 2]
    without_5 = {b: r for b, r in KAFKA_RACKS.items() if b != 5}
    assert rack_alternated(without_5) == [0, 3, 1, 4, 2]


def test_rack_aware_placement_matches_kafka() -> None:
    placed = kafka_placement(KAFKA_RACKS, num_partitions=7, replication_factor=3, start_index=0)
    assert placed == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }


def test_rack_unaware_placement_matches_kafka() -> None:
    placed = kafka_placement(
        dict.fromkeys(range(5)), num_partitions=10, replication_factor=3, start_index=0
    )
    assert placed == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


@pytest.mark.parametrize(
    ("racks", "rf", "message"),
    [
        (dict.fromkeys(range(5)), 0, "larger than 0"),
        (dict.fromkeys(range(5)), 6, "larger than available brokers"),
        ({0: "a", 1: None}, 1, "Not all brokers have rack information"),
    ],
)
def test_kafka_placement_refusals(racks: dict[int, str | None], rf: int, message: str) -> None:
    with pytest.raises(ReplicaAssignorError, match=message):
        kafka_placement(racks, num_partitions=3, replication_factor=rf, start_index=0)


def test_default_assignor_adds_partitions_after_partition_zeros_first_replica() -> None:
    # Kafka's createPartitions: start at the broker of partition 0's first replica and
    # continue the partition ids, so the new ones extend the same round robin.
    racks = dict.fromkeys(range(5))
    existing = kafka_placement(racks, num_partitions=3, replication_factor=3, start_index=0)
    cluster = ClusterView(
        brokers=[BrokerLoad(node_id=b) for b in racks],
        assignments={TopicPartition("t", p): r for p, r in existing.items()},
    )
    added = ZooKeeperReplicaAssignor().assign(new("t", 7, 3, first=3), cluster)
    whole = kafka_placement(racks, num_partitions=10, replication_factor=3, start_index=0)
    assert added == {p: whole[p] for p in range(3, 10)}


# ----------------------------------------------------------------- balanced: seed 001 scenarios


def test_new_brokers_get_new_partitions_first() -> None:
    cluster = view(dict.fromkeys(range(1, 7)), replicas={1: 30, 2: 30, 3: 30, 4: 30})
    placed = BalancedReplicaAssignor().assign(new("t", 4, 2), cluster)
    assert set().union(*map(set, placed.values())) == {5, 6}
    # Once they catch up, everyone takes a share again.
    more = BalancedReplicaAssignor().assign(new("t", 120, 2), cluster)
    counts = Counter(r for replicas in more.values() for r in replicas)
    final = {b: counts[b] + cluster.brokers[b].replicas for b in cluster.brokers}
    assert max(final.values()) - min(final.values()) <= 1


def test_draining_brokers_get_none() -> None:
    cluster = view(dict.fromkeys(range(1, 6)))
    placed = BalancedReplicaAssignor(draining={2, 4}).assign(new("t", 30, 3), cluster)
    assert set().union(*map(set, placed.values())) == {1, 3, 5}
    with pytest.raises(ReplicaAssignorError, match="only 3 are eligible"):
        BalancedReplicaAssignor(draining={2, 4}).assign(new("t", 1, 4), cluster)


def test_brokers_near_their_storage_limit_get_none() -> None:
    total = dict.fromkeys(range(1, 5), 1000)
    used = {1: 900, 2: 100, 3: 849, 4: 850}
    cluster = view(dict.fromkeys(range(1, 5)), used=used, total=total)
    placed = BalancedReplicaAssignor(max_storage_ratio=0.85).assign(new("t", 10, 2), cluster)
    assert set().union(*map(set, placed.values())) == {2, 3}
    # Unknown storage (an older broker) does not exclude a broker.
    assert BalancedReplicaAssignor().assign(new("t", 4, 4), view(dict.fromkeys(range(1, 5))))


def test_with_jbod_the_disk_a_new_replica_lands_on_decides() -> None:
    def disks(*spec: tuple[str, int, int]) -> tuple[LogDirLoad, ...]:
        return tuple(
            LogDirLoad(path=path, replicas=count, used_bytes=used, total_bytes=1000)
            for path, count, used in spec
        )

    cluster = ClusterView(
        brokers=[
            # 47.5% used overall, but Kafka puts a new replica on the disk with the
            # fewest replicas, /a, which is 95% full: none.
            BrokerLoad(node_id=1, log_dirs=disks(("/a", 1, 950), ("/b", 9, 0))),
            # 90% used overall; its next disk, /a, has room.
            BrokerLoad(node_id=2, replicas=50, log_dirs=disks(("/a", 1, 800), ("/b", 5, 1000))),
            # Room on /a until it holds as many replicas as /b (a tie goes to the first
            # disk listed); then the next replica would land on /b, 95% full.
            BrokerLoad(node_id=3, log_dirs=disks(("/a", 1, 100), ("/b", 3, 950))),
            BrokerLoad(node_id=4, replicas=50),
        ]
    )
    assignor = BalancedReplicaAssignor(max_storage_ratio=0.9)
    assert assignor.eligible(new("t", 1, 1), cluster) == [2, 3, 4]
    counts = Counter(r[0] for r in assignor.assign(new("t", 8, 1), cluster).values())
    assert counts[1] == 0
    assert counts[3] == 3
    assert counts[2] + counts[4] == 5


def test_a_rule_places_partitions_per_tenant() -> None:
    tenants = {"blue": {1, 2, 3}, "green": {4, 5, 6}}
    calls: list[str] = []

    def by_tenant(partitions: NewPartitions, cluster: ClusterView) -> Collection[int] | None:
        calls.append(partitions.topic)
        return tenants.get(partitions.topic.split(".", 1)[0])

    assignor = BalancedReplicaAssignor(rule=by_tenant)
    cluster = view(dict.fromkeys(range(1, 8)))
    blue = assignor.assign(new("blue.orders", 9, 3), cluster)
    green = assignor.assign(new("green.orders", 9, 3), cluster)
    other = assignor.assign(new("shared", 7, 1), cluster)
    assert set().union(*map(set, blue.values())) == {1, 2, 3}
    assert set().union(*map(set, green.values())) == {4, 5, 6}
    assert set().union(*map(set, other.values())) == set(range(1, 8))
    assert calls == ["blue.orders", "green.orders", "shared"]


def test_balanced_spreads_preferred_leaders() -> None:
    placed = BalancedReplicaAssignor().assign(new("t", 12, 3), view(dict.fromkeys(range(1, 5))))
    leaders = Counter(replicas[0] for replicas in placed.values())
    assert sorted(leaders.values()) == [3, 3, 3, 3]


# ----------------------------------------------------------------- properties of both


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[int, str | None], int, int]:
    n = draw(st.integers(1, 12))
    ids = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n, unique=True))
    num_racks = draw(st.sampled_from([0, 1, 2, 3]))
    racks: dict[int, str | None] = {
        b: (f"r{i % num_racks}" if num_racks else None) for i, b in enumerate(sorted(ids))
    }
    rf = draw(st.integers(1, n))
    count = draw(st.integers(1, 40))
    return racks, rf, count


ASSIGNORS: list[ReplicaAssignor] = [ZooKeeperReplicaAssignor(), BalancedReplicaAssignor()]


@pytest.mark.parametrize("assignor", ASSIGNORS, ids=lambda a: a.name)
@settings(max_examples=200)
@given(case=clusters())
def test_assignor_properties(
    assignor: ReplicaAssignor, case: tuple[dict[int, str | None], int, int]
) -> None:
    racks, rf, count = case
    cluster = view(racks)
    partitions = new("prop", count, rf)
    placed = check_assignment(assignor, partitions, cluster, assignor.assign(partitions, cluster))
    # Deterministic: the same input gives the same output.
    assert assignor.assign(partitions, cluster) == placed
    # Rack diversity whenever the racks allow it.
    num_racks = len({r for r in racks.values() if r is not None})
    for replicas in placed.values():
        used = {racks[r] for r in replicas}
        assert len(used) == min(rf, num_racks) or num_racks == 0
    # Replica counts within one of each other, when racks do not force otherwise
    # (no racks, or racks of equal size). Kafka's placement (default) only promises it
    # over whole rounds of partitions: each broker leads once per round.
    sizes = Counter(r for r in racks.values())
    whole_rounds = count % len(racks) == 0
    if (num_racks == 0 or len(set(sizes.values())) == 1) and (
        isinstance(assignor, BalancedReplicaAssignor) or whole_rounds
    ):
        counts = Counter(r for replicas in placed.values() for r in replicas)
        loads = [counts[b] for b in racks]
        assert max(loads) - min(loads) <= 1, (placed, racks)


# ----------------------------------------------------------------- loading and checking


class Fixed(ReplicaAssignor):
    name = "fixed"

    def assign(
        self, partitions: NewPartitions, cluster: ClusterView
    ) -> Mapping[int, tuple[int, ...]]:
        return dict.fromkeys(partitions.partition_ids, (1,))


class Abstract(ReplicaAssignor):
    pass


def test_loading_by_name_path_class_and_instance() -> None:
    assert isinstance(load_replica_assignor("zookeeper"), ZooKeeperReplicaAssignor)
    assert isinstance(load_replica_assignor(" balanced "), BalancedReplicaAssignor)
    assert isinstance(load_replica_assignor(f"{__name__}:Fixed"), Fixed)
    assert isinstance(load_replica_assignor(f"{__name__}.Fixed"), Fixed)
    assert isinstance(load_replica_assignor(Fixed), Fixed)
    instance = Fixed()
    assert load_replica_assignor(instance) is instance


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("roundrobin", "unknown assignor 'roundrobin'"),
        ("no_such_module_xyz:Thing", "cannot import module"),
        (f"{__name__}:Missing", "has no attribute"),
        (f"{__name__}:view", "is not a class"),
        ("collections:OrderedDict", "not a ReplicaAssignor subclass"),
        (f"{__name__}:Abstract", "abstract"),
        (":Fixed", "not 'module:Class'"),
    ],
)
def test_loading_errors(spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        load_replica_assignor(spec)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({0: (1, 2)}, r"expected \[0, 1\]"),
        ({0: (1,), 1: (1, 2)}, "1 replicas"),
        ({0: (1, 1), 1: (1, 2)}, "two replicas"),
        ({0: (1, 9), 1: (1, 2)}, "unknown brokers"),
    ],
)
def test_bad_assignor_answers_are_refused(answer: dict[int, tuple[int, ...]], message: str) -> None:
    with pytest.raises(ReplicaAssignorError, match=message):
        check_assignment(Fixed(), new("t", 2, 2), view({1: None, 2: None}), answer)
