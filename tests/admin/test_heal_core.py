"""The healer's decisions as transcripts: cluster observations in, executor actions
and state-topic records out (docs/admin.md, "Healing after a broker failure")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from coopconsumer._errors import ConfigurationError
from coopconsumer._types import TopicPartition
from coopconsumer.admin import BalancedReplicaAssignor
from coopconsumer.admin.heal import (
    ChunkState,
    ClusterSeen,
    HealConfig,
    HealerCore,
    HealerError,
    parse_heal_config,
)
from coopconsumer.admin.heal._heal_core import ChunkAction, ChunkResult, Store
from coopconsumer.admin.reassign import ObservedPartition
from coopconsumer.admin.reassign._executor import Submit, Submitted

CONFIG = HealConfig(failure_interval_ms=10_000, chunk_size=2)
RACKS = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b"}


def part(
    *replicas: int, isr: tuple[int, ...] | None = None, adding: tuple[int, ...] = ()
) -> ObservedPartition:
    isr = isr if isr is not None else replicas
    return ObservedPartition(replicas=replicas, isr=isr, leader=isr[0], adding=adding)


def seen(dead: set[int], layout: Mapping[int, tuple[int, ...]]) -> ClusterSeen:
    live = {b: r for b, r in RACKS.items() if b not in dead}
    return ClusterSeen(
        live=live,
        partitions={
            TopicPartition("t", p): part(*r, isr=tuple(b for b in r if b not in dead) or r[:1])
            for p, r in layout.items()
        },
    )


LAYOUT: dict[int, tuple[int, ...]] = {0: (1, 2), 1: (2, 3), 2: (3, 1), 3: (3, 4), 4: (5, 1)}


def core() -> HealerCore:
    return HealerCore(CONFIG, BalancedReplicaAssignor())


def submits(actions: Sequence[object]) -> list[Submit]:
    return [
        a.action for a in actions if isinstance(a, ChunkAction) and isinstance(a.action, Submit)
    ]


def stores(actions: Sequence[object]) -> dict[str, object]:
    return {a.key: a.value for a in actions if isinstance(a, Store)}


def test_config_keys() -> None:
    config = parse_heal_config(
        {"heal.failure.interval.ms": "5000", "heal.chunk.size": 3, "bootstrap.servers": "x:1"}
    )
    assert config == HealConfig(failure_interval_ms=5000, chunk_size=3)
    with pytest.raises(ConfigurationError, match="unknown healer key"):
        parse_heal_config({"heal.chunk": 3})
    with pytest.raises(ConfigurationError, match="integer"):
        parse_heal_config({"heal.chunk.size": "many"})
    with pytest.raises(ConfigurationError):
        HealConfig(chunk_size=0)


def test_absence_is_recorded_and_a_return_within_the_interval_forgets_it() -> None:
    c = core()
    first = c.handle(seen({3}, LAYOUT), 100.0)
    assert stores(first) == {"failure/3": {"first_seen": 100.0, "failed": False}}
    assert c.handle(seen({3}, LAYOUT), 109.9) == []  # nothing changed, nothing written
    back = c.handle(seen(set(), LAYOUT), 105.0)
    assert stores(back) == {"failure/3": None}  # a tombstone
    assert c.chunks() == []


def test_after_the_interval_the_partitions_go_in_chunks_one_at_a_time() -> None:
    c = core()
    c.handle(seen({3}, LAYOUT), 0.0)
    actions = c.handle(seen({3}, LAYOUT), 10.0)
    assert c.failed_brokers == {3}
    chunks = c.chunks()
    assert [[tp.partition for tp in parts] for _, _, _, parts in chunks] == [[1, 2], [3]]
    assert [state for _, _, state, _ in chunks] == [ChunkState.RUNNING, ChunkState.QUEUED]
    (submit,) = submits(actions)
    targets = dict(submit.targets)
    assert set(targets) == {TopicPartition("t", 1), TopicPartition("t", 2)}
    for target in targets.values():
        assert 3 not in target
        assert len(set(target)) == 2
    # Records are written before the submission is carried out.
    kinds = [type(a).__name__ for a in actions]
    assert kinds.index("ChunkAction") > max(i for i, k in enumerate(kinds) if k == "Store")
    chunk_id = chunks[0][0]
    c.handle(ChunkResult(chunk_id, Submitted(frozenset(targets))), 10.0)
    moved = dict(LAYOUT)
    moved.update({tp.partition: t for tp, t in targets.items()})
    after = c.handle(seen({3}, moved), 11.0)
    assert c.chunk_state(chunk_id) is ChunkState.DONE
    (second,) = submits(after)
    assert list(second.targets) == [TopicPartition("t", 3)]


def test_a_partition_back_at_full_replication_is_skipped_and_a_return_cancels_queued_chunks() -> (
    None
):
    c = core()
    c.handle(seen({3}, LAYOUT), 0.0)
    c.handle(seen({3}, LAYOUT), 10.0)
    running, queued = c.chunks()
    # Partition 3 was moved off broker 3 by someone else meanwhile.
    layout = dict(LAYOUT)
    layout[3] = (4, 5)
    targets: dict[TopicPartition, tuple[int, ...]] = {
        TopicPartition("t", 1): (2, 4),
        TopicPartition("t", 2): (5, 1),
    }
    c.handle(ChunkResult(running[0], Submitted(frozenset(targets))), 10.0)
    layout.update({1: (2, 4), 2: (5, 1)})
    c.handle(seen({3}, layout), 12.0)
    assert c.chunk_state(running[0]) is ChunkState.DONE
    assert c.chunk_state(queued[0]) is ChunkState.SKIPPED

    d = core()
    d.handle(seen({3}, LAYOUT), 0.0)
    d.handle(seen({3}, LAYOUT), 10.0)
    first, second = d.chunks()
    writes = stores(d.handle(seen(set(), LAYOUT), 11.0))
    assert d.chunk_state(second[0]) is ChunkState.CANCELLED
    assert d.chunk_state(first[0]) is ChunkState.RUNNING  # a running chunk finishes
    assert writes["failure/3"] is None
    assert d.failed_brokers == frozenset()


def test_records_restore_a_healer_mid_chunk() -> None:
    c = core()
    c.handle(seen({3}, LAYOUT), 0.0)
    c.handle(seen({3}, LAYOUT), 10.0)
    restored = HealerCore.from_records(c.records(), CONFIG, BalancedReplicaAssignor())
    assert restored.records() == c.records()
    assert restored.absent_since == {3: 0.0}
    assert restored.failed_brokers == {3}
    # The chunk's moves were decided before the stop: the broker has one, not the other.
    (_, _, _, parts) = restored.chunks()[0]
    first, second = parts
    observed = seen({3}, LAYOUT)
    moving = dict(observed.partitions)
    moving[first] = ObservedPartition(
        replicas=(2, 4, 3), isr=(2,), leader=2, adding=(4,), removing=(3,)
    )
    actions = restored.handle(ClusterSeen(live=observed.live, partitions=moving), 20.0)
    (submit,) = submits(actions)
    assert list(submit.targets) == [second]  # only the one that never reached the broker
    with pytest.raises(HealerError):
        HealerCore.from_records({"weird/1": {}}, CONFIG, BalancedReplicaAssignor())


def test_metrics() -> None:
    c = core()
    c.handle(seen({3}, LAYOUT), 0.0)
    c.handle(seen({3}, LAYOUT), 10.0)
    m = c.metrics()
    assert m["failed-brokers"] == 1.0
    assert m["under-replicated-partitions"] == 3.0
    assert (m["chunks-running"], m["chunks-queued"]) == (1.0, 1.0)
