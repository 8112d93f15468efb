"""Reassignment plans: per partition the target and the original replicas (what
a rollback restores: ``original_replicas``), as diffable JSON, and the goals that generate them.

Pure: imports the standard library, attrs and the assignor contract; no I/O.
See docs/admin.md, "Reassigning partitions".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import attrs

from ..._errors import ConfigurationError, CoopConsumerError
from ..._types import TopicPartition
from .._admin_types import LogDirDescription
from .._replica_assignor import (
    ClusterView,
    NewPartitions,
    ReplicaAssignor,
    check_assignment,
)

__all__ = [
    "PLAN_VERSION",
    "PartitionMove",
    "PlanError",
    "ReassignmentPlan",
    "check_plan_brokers",
    "plan_add_brokers",
    "plan_balance_disks",
    "plan_move_off",
    "plan_rebalance",
]

#: The ``version`` written into plan files.
PLAN_VERSION = 1


class PlanError(CoopConsumerError):
    """A plan file is malformed, or a goal cannot be met (too few brokers left)."""


def _wanted_topics(cluster: ClusterView, topics: Iterable[str] | None) -> frozenset[str] | None:
    """``topics`` as a set (None: every topic); ``PlanError`` naming those the cluster
    does not have, so a mistyped name fails instead of planning nothing."""
    if topics is None:
        return None
    wanted = frozenset(topics)
    missing = sorted(wanted - {tp.topic for tp in cluster.assignments})
    if missing:
        raise PlanError(f"no such topic: {', '.join(missing)}")
    return wanted


def check_brokers_known(cluster: ClusterView, brokers: Iterable[int]) -> None:
    """``PlanError`` naming the ids in ``brokers`` the cluster does not know: not live,
    not fenced, holding no replica (a broker that is down but still holds replicas is
    known, and can be moved off). For an operator's input: ``plan_move_off`` itself
    accepts a broker that is gone (the self-healer's failed brokers may leave the
    cluster entirely), and plans nothing for it."""
    holding = {r for replicas in cluster.assignments.values() for r in replicas}
    known = frozenset(cluster.brokers) | frozenset(cluster.fenced_brokers) | holding
    unknown = sorted(set(brokers) - known)
    if unknown:
        raise PlanError(
            f"no such broker: {', '.join(map(str, unknown))} (the cluster knows brokers "
            f"{', '.join(map(str, sorted(known)))})"
        )


def _ids(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


def _distinct(
    instance: PartitionMove, attribute: attrs.Attribute[tuple[int, ...]], value: tuple[int, ...]
) -> None:
    if not value or len(set(value)) != len(value):
        raise PlanError(
            f"{instance.topic}-{instance.partition}: {attribute.name} must name distinct "
            f"brokers, at least one: {list(value)}"
        )


def _dirs(value: Iterable[str | None] | None) -> tuple[str | None, ...] | None:
    if value is None:
        return None
    return tuple(None if d in (None, "any") else str(d) for d in value)


def _dirs_fit(
    instance: PartitionMove,
    attribute: attrs.Attribute[tuple[str | None, ...] | None],
    value: tuple[str | None, ...] | None,
) -> None:
    if value is not None and len(value) != len(instance.replicas):
        raise PlanError(
            f"{instance.topic}-{instance.partition}: log_dirs must give one directory (or "
            f"'any') per replica: {list(value)} for {list(instance.replicas)}"
        )


@attrs.frozen(kw_only=True)
class PartitionMove:
    """One partition of a plan: where it goes (``replicas``, preferred leader first),
    where it was (``original_replicas``) and how big it is.

    ``log_dirs`` (JBOD), as in Kafka's reassignment JSON: for each replica, the log
    directory it must end in, or None (``"any"``) for wherever its broker puts it. A
    move whose replicas stay but whose directories change moves data between disks of
    one broker (AlterReplicaLogDirs)."""

    topic: str
    partition: int
    replicas: tuple[int, ...] = attrs.field(converter=_ids, validator=_distinct)
    original_replicas: tuple[int, ...] = attrs.field(converter=_ids, validator=_distinct)
    #: The partition's size (its leader's log), 0 when unknown.
    size_bytes: int = 0
    log_dirs: tuple[str | None, ...] | None = attrs.field(
        default=None, converter=_dirs, validator=_dirs_fit
    )

    @property
    def target_dirs(self) -> dict[int, str]:
        """Broker -> the log directory its replica must end in (the ones given)."""
        if self.log_dirs is None:
            return {}
        return {b: d for b, d in zip(self.replicas, self.log_dirs, strict=True) if d is not None}

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.original_replicas)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.original_replicas if r not in self.replicas)

    @property
    def bytes_to_move(self) -> int:
        """Bytes the new replicas copy: size x (replicas added + replicas that stay
        on their broker but change disks)."""
        kept = sum(1 for b in self.target_dirs if b in self.original_replicas)
        return self.size_bytes * (len(self.adding) + kept)

    def reversed(self) -> PartitionMove:
        """The move back: target and original swapped (directories cannot be taken
        back: the plan does not know where the replicas were)."""
        return attrs.evolve(
            self, replicas=self.original_replicas, original_replicas=self.replicas, log_dirs=None
        )


def _moves(value: Iterable[PartitionMove]) -> tuple[PartitionMove, ...]:
    moves = tuple(sorted(value, key=lambda m: (m.topic, m.partition)))
    seen: set[TopicPartition] = set()
    for m in moves:
        if m.tp in seen:
            raise PlanError(f"{m.topic}-{m.partition} appears twice in the plan")
        seen.add(m.tp)
    return moves


@attrs.frozen(kw_only=True)
class ReassignmentPlan:
    """The moves of one reassignment, sorted by topic and partition."""

    moves: tuple[PartitionMove, ...] = attrs.field(converter=_moves)
    #: What produced it ("move-off 3", "rollback of plan.json"...), for humans.
    description: str = ""

    def __len__(self) -> int:
        return len(self.moves)

    def by_partition(self) -> dict[TopicPartition, PartitionMove]:
        return {m.tp: m for m in self.moves}

    @property
    def total_bytes(self) -> int:
        return sum(m.bytes_to_move for m in self.moves)

    def reversed(self, description: str = "") -> ReassignmentPlan:
        """Every move taken back (the rollback of a completed plan)."""
        return ReassignmentPlan(
            moves=[m.reversed() for m in self.moves],
            description=description or f"rollback of: {self.description}",
        )

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict[str, object]:
        return {
            "version": PLAN_VERSION,
            "description": self.description,
            "partitions": [
                {
                    "topic": m.topic,
                    "partition": m.partition,
                    "replicas": list(m.replicas),
                    "original_replicas": list(m.original_replicas),
                    "size_bytes": m.size_bytes,
                    **(
                        {} if m.log_dirs is None else {"log_dirs": [d or "any" for d in m.log_dirs]}
                    ),
                }
                for m in self.moves
            ],
        }

    def to_json(self) -> str:
        """One partition per line, so that two plans diff line by line."""
        head = {"version": PLAN_VERSION, "description": self.description}
        lines = [json.dumps(p, sort_keys=False) for p in self.to_dict()["partitions"]]  # type: ignore[attr-defined]
        body = ",\n    ".join(lines)
        opening = json.dumps(head)[:-1]
        return f'{opening},\n  "partitions": [\n    {body}\n  ]\n}}\n'

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ReassignmentPlan:
        if not isinstance(data, Mapping) or data.get("version") != PLAN_VERSION:
            raise PlanError(f"not a version-{PLAN_VERSION} reassignment plan")
        parts = data.get("partitions")
        if not isinstance(parts, list):
            raise PlanError("a plan needs a 'partitions' list")
        try:
            moves = [
                PartitionMove(
                    topic=str(p["topic"]),
                    partition=int(p["partition"]),
                    replicas=p["replicas"],
                    original_replicas=p["original_replicas"],
                    size_bytes=int(p.get("size_bytes", 0)),
                    log_dirs=p.get("log_dirs"),
                )
                for p in parts
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanError(f"malformed plan entry: {exc!r}") from exc
        return cls(moves=moves, description=str(data.get("description", "")))

    @classmethod
    def from_json(cls, text: str) -> ReassignmentPlan:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanError(f"a plan must be JSON: {exc}") from exc
        return cls.from_dict(data)


# ---------------------------------------------------------------------- goals


def _loads(
    cluster: ClusterView, placement: Mapping[TopicPartition, Sequence[int]]
) -> dict[int, int]:
    counts = dict.fromkeys(cluster.brokers, 0)
    for replicas in placement.values():
        for r in replicas:
            if r in counts:
                counts[r] += 1
    return counts


def _replace(
    tp: TopicPartition,
    keep: Sequence[int],
    needed: int,
    eligible: Iterable[int],
    cluster: ClusterView,
    counts: Mapping[int, int],
    assignor: ReplicaAssignor,
    principal: str | None = None,
) -> tuple[int, ...]:
    """``needed`` more brokers for ``tp`` chosen by ``assignor`` among ``eligible``
    brokers not already in ``keep``, on racks ``keep`` does not use while enough are
    left (never two replicas on one broker)."""
    candidates = [b for b in eligible if b not in keep]
    used_racks = {cluster.brokers[b].rack for b in keep if b in cluster.brokers}
    fresh = [
        b
        for b in candidates
        if cluster.brokers[b].rack not in used_racks or cluster.brokers[b].rack is None
    ]
    if len(fresh) >= needed:
        candidates = fresh
    if len(candidates) < needed:
        raise PlanError(
            f"{tp.topic}-{tp.partition}: needs {needed} more broker(s), "
            f"only {len(candidates)} eligible"
        )
    view = ClusterView(
        brokers=[attrs.evolve(cluster.brokers[b], replicas=counts[b]) for b in candidates],
        assignments=cluster.assignments,
    )
    request = NewPartitions(
        topic=tp.topic,
        partition_ids=(tp.partition,),
        replication_factor=needed,
        principal=principal,
    )
    placed = check_assignment(assignor, request, view, assignor.assign(request, view))
    return placed[tp.partition]


def plan_move_off(
    cluster: ClusterView,
    brokers: Iterable[int],
    assignor: ReplicaAssignor,
    *,
    sizes: Mapping[TopicPartition, int] | None = None,
    topics: Iterable[str] | None = None,
    partitions: Iterable[TopicPartition] | None = None,
    skip: Iterable[TopicPartition] = (),
    principal: str | None = None,
) -> ReassignmentPlan:
    """Move every replica off ``brokers`` (decommissioning, or a failed broker):
    the other replicas stay where they are, in their order, and ``assignor`` places
    the replacements among the remaining brokers of ``cluster`` (never on a broker
    that is not in it). ``topics``/``partitions`` narrow what moves, ``skip`` leaves
    partitions out (another tool is moving them); the load every partition puts on the
    brokers is still counted. ``principal`` is handed to the assignor. ``PlanError``
    names a topic the cluster does not have (see :func:`check_brokers_known` for the
    broker ids)."""
    leaving = frozenset(brokers)
    wanted = _wanted_topics(cluster, topics)
    only = None if partitions is None else frozenset(partitions)
    left_out = frozenset(skip)
    eligible = [b for b in cluster.brokers if b not in leaving]
    current = {
        tp: r
        for tp, r in cluster.assignments.items()
        if (wanted is None or tp.topic in wanted)
        and (only is None or tp in only)
        and tp not in left_out
    }
    counts = _loads(cluster, cluster.assignments)
    moves = []
    for tp in sorted(current):
        replicas = current[tp]
        if not leaving & set(replicas):
            continue
        keep = [r for r in replicas if r not in leaving]
        new = _replace(
            tp, keep, len(replicas) - len(keep), eligible, cluster, counts, assignor, principal
        )
        fill = iter(new)
        target = tuple(r if r not in leaving else next(fill) for r in replicas)
        for r in new:
            counts[r] += 1
        moves.append(_move(tp, target, replicas, sizes))
    return ReassignmentPlan(moves=moves, description=f"move off brokers {sorted(leaving)}")


def plan_add_brokers(
    cluster: ClusterView,
    brokers: Iterable[int],
    *,
    sizes: Mapping[TopicPartition, int] | None = None,
    topics: Iterable[str] | None = None,
    skip: Iterable[TopicPartition] = (),
) -> ReassignmentPlan:
    """Fill the new ``brokers`` up to the average replica count: repeatedly move one
    replica from the most loaded broker to the least loaded new one, never onto a
    broker that already holds the partition, and never so that the partition spans
    fewer racks than before. Leaders (first replicas) are moved last. ``skip`` lists
    partitions to leave where they are (another tool is moving them). ``PlanError``
    names a broker that is not live, or a topic the cluster does not have."""
    new = [b for b in brokers if b in cluster.brokers]
    absent = sorted(set(brokers) - set(new))
    if absent:
        live = ", ".join(map(str, sorted(cluster.brokers)))
        raise PlanError(
            f"not a live broker: {', '.join(map(str, absent))} (live brokers: {live}); "
            f"start the new brokers first"
        )
    wanted = _wanted_topics(cluster, topics)
    left_out = frozenset(skip)
    placement = {
        tp: list(r) for tp, r in cluster.assignments.items() if wanted is None or tp.topic in wanted
    }
    counts = _loads(cluster, placement)
    rack = {b: cluster.brokers[b].rack for b in cluster.brokers}

    def spread(replicas: Sequence[int]) -> int:
        # Brokers without a rack count as racks of their own.
        return len({rack.get(b) if rack.get(b) is not None else f"#{b}" for b in replicas})

    average = sum(counts.values()) // max(1, len(counts))
    original = {tp: tuple(r) for tp, r in placement.items()}
    moved: set[TopicPartition] = set()
    while True:
        choice = None
        for dest in sorted(new, key=lambda b: (counts[b], b)):
            if counts[dest] >= average:
                break
            choice = _take_one(placement, counts, new, dest, average, moved, left_out, spread)
            if choice is not None:
                break
        if choice is None:
            break
        tp, source, dest = choice
        placement[tp] = [dest if r == source else r for r in placement[tp]]
        counts[source] -= 1
        counts[dest] += 1
        moved.add(tp)
    moves = [_move(tp, tuple(placement[tp]), original[tp], sizes) for tp in sorted(moved)]
    return ReassignmentPlan(moves=moves, description=f"add brokers {sorted(new)}")


def _take_one(
    placement: Mapping[TopicPartition, list[int]],
    counts: Mapping[int, int],
    new: Sequence[int],
    dest: int,
    average: int,
    moved: Collection[TopicPartition],
    left_out: Collection[TopicPartition],
    spread: Callable[[Sequence[int]], int],
) -> tuple[TopicPartition, int, int] | None:
    """A replica to move from the most loaded old broker to ``dest``: followers
    before leaders, partitions not moved yet first, racks kept."""
    sources = sorted((b for b in counts if b not in new), key=lambda b: (-counts[b], b))
    for source in sources:
        if counts[source] <= average:
            return None
        for tp in sorted(placement, key=lambda t: (placement[t][0] == source, t in moved, t)):
            replicas = placement[tp]
            if source not in replicas or dest in replicas or tp in left_out:
                continue
            after = [dest if r == source else r for r in replicas]
            if spread(after) >= spread(replicas):
                return tp, source, dest
    return None


def plan_rebalance(
    cluster: ClusterView,
    assignor: ReplicaAssignor,
    *,
    sizes: Mapping[TopicPartition, int] | None = None,
    topics: Iterable[str] | None = None,
    skip: Iterable[TopicPartition] = (),
    principal: str | None = None,
) -> ReassignmentPlan:
    """Place every partition of ``topics`` (None: all) afresh with ``assignor``, as
    if the topics were created now on the live brokers, and move the partitions whose
    replica set changes (but not those in ``skip``). A replica that stays keeps its
    position where it can, so fewer leaders change. ``PlanError`` names a topic the
    cluster does not have."""
    wanted = _wanted_topics(cluster, topics)
    left_out = frozenset(skip)
    by_topic: dict[str, dict[int, tuple[int, ...]]] = {}
    for tp, replicas in cluster.assignments.items():
        if wanted is None or tp.topic in wanted:
            by_topic.setdefault(tp.topic, {})[tp.partition] = replicas
    others = {tp: r for tp, r in cluster.assignments.items() if tp.topic not in by_topic}
    moves = []
    placed_so_far: dict[TopicPartition, tuple[int, ...]] = dict(others)
    for topic in sorted(by_topic):
        parts = by_topic[topic]
        rf = max(len(r) for r in parts.values())
        counts = _loads(cluster, placed_so_far)
        view = ClusterView(
            brokers=[
                attrs.evolve(b, replicas=counts[b.node_id], leaders=0)
                for b in cluster.brokers.values()
            ],
            assignments=placed_so_far,
        )
        request = NewPartitions(
            topic=topic, partition_ids=sorted(parts), replication_factor=rf, principal=principal
        )
        placed = check_assignment(assignor, request, view, assignor.assign(request, view))
        for p in sorted(parts):
            tp = TopicPartition(topic, p)
            target = _keep_positions(parts[p], placed[p])
            placed_so_far[tp] = target
            if tp in left_out:
                placed_so_far[tp] = parts[p]
            elif set(target) != set(parts[p]):
                moves.append(_move(tp, target, parts[p], sizes))
    return ReassignmentPlan(moves=moves, description="rebalance")


def _keep_positions(current: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    staying = [r for r in current if r in target]
    arriving = iter(r for r in target if r not in current)
    out = [r if r in staying else next(arriving, None) for r in current[: len(target)]]
    rest = [r for r in target if r not in out]
    filled = [r if r is not None else rest.pop(0) for r in out]
    return tuple(filled + rest)


def _move(
    tp: TopicPartition,
    target: Sequence[int],
    original: Sequence[int],
    sizes: Mapping[TopicPartition, int] | None,
) -> PartitionMove:
    return PartitionMove(
        topic=tp.topic,
        partition=tp.partition,
        replicas=target,
        original_replicas=original,
        size_bytes=(sizes or {}).get(tp, 0),
    )


def plan_balance_disks(
    cluster: ClusterView,
    log_dirs: Mapping[int, Sequence[LogDirDescription]],
    *,
    topics: Iterable[str] | None = None,
    skip: Iterable[TopicPartition] = (),
) -> ReassignmentPlan:
    """Even out the log directories (disks) of each broker (JBOD): while moving one
    replica from the fullest directory to the emptiest narrows the gap between them,
    move the replica that narrows it most. Replicas stay on their brokers; the plan's
    ``log_dirs`` say where each moved replica goes (AlterReplicaLogDirs). Directories
    with an error, future replicas, partitions of other ``topics`` and those in
    ``skip`` are left alone. ``PlanError`` names a topic the cluster does not have."""
    wanted = _wanted_topics(cluster, topics)
    left_out = frozenset(skip)
    targets: dict[TopicPartition, dict[int, str]] = {}
    sizes: dict[TopicPartition, int] = {}
    for broker, dirs in sorted(log_dirs.items()):
        usable = [d for d in dirs if d.error is None]
        if len(usable) < 2:
            continue
        used = {d.path: sum(r.size_bytes for r in d.replicas) for d in usable}
        movable = {
            d.path: {
                TopicPartition(r.topic, r.partition): r.size_bytes
                for r in d.replicas
                if not r.is_future
                and (wanted is None or r.topic in wanted)
                and TopicPartition(r.topic, r.partition) not in left_out
                and TopicPartition(r.topic, r.partition) in cluster.assignments
            }
            for d in usable
        }
        if any(r.is_future for d in usable for r in d.replicas):
            continue  # a move between its disks is running already
        while True:
            full = max(used, key=lambda p: (used[p], p))
            empty = min(used, key=lambda p: (used[p], p))
            gap = used[full] - used[empty]
            # The replica whose move leaves the smallest gap, if it narrows it.
            best = min(
                movable[full].items(),
                key=lambda item: (abs(gap - 2 * item[1]), item[0]),
                default=None,
            )
            if best is None or not 0 < best[1] < gap:
                break
            tp, size = best
            del movable[full][tp]
            movable[empty][tp] = size
            used[full] -= size
            used[empty] += size
            targets.setdefault(tp, {})[broker] = empty
            sizes[tp] = max(sizes.get(tp, 0), size)
    moves = []
    for tp, dirs_of in sorted(targets.items()):
        replicas = cluster.assignments[tp]
        moves.append(
            PartitionMove(
                topic=tp.topic,
                partition=tp.partition,
                replicas=replicas,
                original_replicas=replicas,
                size_bytes=sizes[tp],
                log_dirs=[dirs_of.get(b) for b in replicas],
            )
        )
    return ReassignmentPlan(moves=moves, description="balance log dirs")


def check_plan_brokers(plan: ReassignmentPlan, brokers: Iterable[int]) -> None:
    """``ConfigurationError`` when a target names a broker not in ``brokers``."""
    known = frozenset(brokers)
    for m in plan.moves:
        unknown = [r for r in m.replicas if r not in known]
        if unknown:
            raise ConfigurationError(
                f"{m.topic}-{m.partition}: target brokers {unknown} are not in the cluster"
            )
