"""The test cluster's replication model: brokers, partitions, replicas, ISR, leaders.

Sans-I/O and table-driven (docs/admin.md, "The replication test cluster"): a
:class:`ClusterModel` holds the state of every broker and partition and changes only through
:meth:`ClusterModel.apply`, which looks the command's type up in one table, and
:meth:`ClusterModel.advance`, which moves replication forward to a given time. Nothing
here reads a clock, opens a socket or starts a thread; time is an argument in seconds.

What it models, after Kafka's replication design and its KRaft controller:

- Replica states and partition states with their valid predecessors, one table each;
  an illegal transition raises :class:`IllegalTransition` (a bug in the model).
- Assigned replicas (the first one is the preferred leader), the in-sync replica set,
  the leader and its epoch. The epoch grows by one on every leader change, never
  otherwise. Leaders are elected from the ISR in replica order; a partition whose ISR
  has no live member goes offline (leader -1) unless its topic sets
  ``unclean.leader.election.enable``, and the ISR never becomes empty: a dying last
  member stays in it, as in Kafka.
- Leaders take writes (``Produce``, or a steady ``SetProduceRate``) with acks=all.
  Followers copy the leader's bytes at their broker's ``replication_bytes_per_s``:
  followers that are caught up take what the producers write, the rest of the
  bandwidth is shared by the followers that are behind, which go no faster than the
  leader and follower replication throttles (``leader.replication.throttled.rate`` /
  ``follower.replication.throttled.rate`` for the out-of-sync replicas the topic lists
  in ``*.replication.throttled.replicas``). A follower that has not held every byte of
  its leader for ``replica_lag_time_max_s`` (it stopped fetching, or fetches slower
  than the producers write) leaves the ISR; one that holds every byte joins it. One
  byte is one offset in this model.
- KIP-455 reassignment, as in KRaft: the replicas become target + removing; the
  reassignment completes once every target replica is in the ISR and some ISR member
  remains after the removing ones are dropped; a cancel drops the adding replicas; a
  new target is computed against the current replicas (so adding replicas it leaves out
  become removing ones).
- Brokers can be killed (fenced: out of every ISR, leaderships move), paused (still
  registered, but neither fetching nor serving; its followers leave the ISR after
  ``replica_lag_time_max_s``) and revived.
- Automatic preferred-leader balancing (``auto.leader.rebalance.enable``, every
  ``leader.imbalance.check.interval.seconds``, on by default as in Kafka).
- Topic deletion through the controller's states: partitions go offline then non-existent,
  replicas offline, then deleting; a replica on a broker that is down stays deleting
  (its close-replica request is queued) until the broker returns, and until then the
  name cannot be created again.
- JBOD: each broker has log directories; a new replica goes to the directory with the
  fewest replicas (or the one AlterReplicaLogDirs named beforehand), and
  AlterReplicaLogDirs moves a replica between directories through a future replica
  that copies at the broker's ``disk_copy_bytes_per_s`` (capped by
  ``replica.alter.log.dirs.io.max.bytes.per.second``) and replaces the current one
  once it has caught up.

Imports the standard library and attrs only.
"""

from __future__ import annotations

import enum
import random
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import attrs

from ..._transition_table import IllegalTransition, build_moves, check_move, predecessors

__all__ = [
    "DEFAULT_TOPIC_CONFIGS",
    "AlterConfigs",
    "AlterReassignment",
    "AlterReplicaLogDir",
    "BrokerSpec",
    "BrokerState",
    "BrokerView",
    "ClusterModel",
    "ConfigOp",
    "CreatePartitions",
    "CreateTopic",
    "DeleteTopic",
    "ElectLeader",
    "IllegalTransition",
    "KillBroker",
    "LogDirView",
    "Outcome",
    "PartitionState",
    "PartitionView",
    "PauseBroker",
    "Produce",
    "ReplicaState",
    "ReviveBroker",
    "SetByteRate",
    "SetProduceRate",
    "SetSize",
]

# Kafka error codes the model answers with (the wire layer passes them on).
NONE: Final = 0
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
LEADER_NOT_AVAILABLE: Final = 5
REQUEST_TIMED_OUT: Final = 7
NOT_ENOUGH_REPLICAS: Final = 19
TOPIC_ALREADY_EXISTS: Final = 36
INVALID_PARTITIONS: Final = 37
INVALID_REPLICATION_FACTOR: Final = 38
INVALID_REPLICA_ASSIGNMENT: Final = 39
INVALID_CONFIG: Final = 40
INVALID_REQUEST: Final = 42
BROKER_NOT_AVAILABLE: Final = 8
PREFERRED_LEADER_NOT_AVAILABLE: Final = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE: Final = 83
ELECTION_NOT_NEEDED: Final = 84
NO_REASSIGNMENT_IN_PROGRESS: Final = 85
INVALID_TOPIC_EXCEPTION: Final = 17
REPLICA_NOT_AVAILABLE: Final = 9
KAFKA_STORAGE_ERROR: Final = 56
LOG_DIR_NOT_FOUND: Final = 57

NO_LEADER: Final = -1
UNLIMITED: Final = 2**63 - 1

#: Topic configurations the model knows, with Kafka's defaults.
DEFAULT_TOPIC_CONFIGS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "cleanup.policy": "delete",
        "retention.ms": "604800000",
        "retention.bytes": "-1",
        "min.insync.replicas": "1",
        "unclean.leader.election.enable": "false",
        "leader.replication.throttled.replicas": "",
        "follower.replication.throttled.replicas": "",
    }
)
#: Broker configurations the model knows, with Kafka's defaults.
DEFAULT_BROKER_CONFIGS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "leader.replication.throttled.rate": str(UNLIMITED),
        "follower.replication.throttled.rate": str(UNLIMITED),
        "min.insync.replicas": "1",
        "unclean.leader.election.enable": "false",
        "replica.alter.log.dirs.io.max.bytes.per.second": str(UNLIMITED),
        # Controller settings; the model reads them at the cluster level ("").
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": "300",
    }
)
_LIST_CONFIGS: Final = frozenset(
    {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}
)
_INT_CONFIGS: Final = frozenset(
    {
        "retention.ms",
        "retention.bytes",
        "min.insync.replicas",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "leader.imbalance.check.interval.seconds",
    }
)
#: Controller settings: cluster-wide only.
_CONTROLLER_CONFIGS: Final = frozenset(
    {"auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds"}
)
_BOOL_CONFIGS: Final = frozenset({"unclean.leader.election.enable", "auto.leader.rebalance.enable"})

RESOURCE_TOPIC: Final = 2
RESOURCE_BROKER: Final = 4


class ModelStep:
    """The input of the replica and partition machines: the model's own bookkeeping
    moves them (their owner, ``ClusterModel``, dispatches every command), so one input
    type stands for all; a move its table does not list raises the kit's
    :class:`IllegalTransition` (a bug in the model, never bad input)."""


class BrokerState(enum.Enum):
    """Liveness of a broker as the test sees it."""

    #: Registered, fetching and serving.
    ONLINE = "online"
    #: Registered but stalled (a long GC pause, a frozen VM): fetches nothing, answers
    #: nothing; the controller has not noticed, so it keeps its leaderships.
    PAUSED = "paused"
    #: Gone: fenced by the controller, out of Metadata, out of every ISR.
    DEAD = "dead"


class ReplicaState(enum.Enum):
    """The life of one replica (Kafka's ``ReplicaStateMachine`` states, condensed)."""

    #: Assigned (by creation or reassignment) but not started yet.
    NEW = "new"
    #: Hosted by a live broker: leading, or fetching from the leader.
    ONLINE = "online"
    #: Its broker is dead (the replica keeps its bytes for when the broker returns),
    #: or it was stopped to be deleted.
    OFFLINE = "offline"
    #: Being removed (reassignment done or cancelled, topic deleted); on a broker that
    #: is down it stays here until the broker returns and deletes it (Kafka's replication design).
    DELETING = "deleting"
    #: Gone.
    NON_EXISTENT = "non_existent"


class PartitionState(enum.Enum):
    """The life of one partition (Kafka's ``PartitionStateMachine`` states)."""

    #: Created, no leader elected yet.
    NEW = "new"
    #: Has a leader.
    ONLINE = "online"
    #: No leader: no live ISR member (and no unclean election allowed).
    OFFLINE = "offline"
    #: Deleted.
    NON_EXISTENT = "non_existent"


_STEP: Final = (ModelStep,)

#: The replica machine (Kafka's ``ReplicaStateMachine``, condensed); a state may stay.
REPLICA_MOVES: Final = build_moves(
    [
        ([ReplicaState.NON_EXISTENT], ModelStep, [ReplicaState.NEW]),
        (
            [ReplicaState.NEW, ReplicaState.ONLINE],
            ModelStep,
            [ReplicaState.ONLINE, ReplicaState.OFFLINE],
        ),
        # ReplicaDeletionStarted: only from offline (the replica is stopped first).
        (
            [ReplicaState.OFFLINE],
            ModelStep,
            [ReplicaState.ONLINE, ReplicaState.OFFLINE, ReplicaState.DELETING],
        ),
        ([ReplicaState.DELETING], ModelStep, [ReplicaState.NON_EXISTENT]),
    ]
)

#: The partition machine (Kafka's ``PartitionStateMachine``); a state may stay.
PARTITION_MOVES: Final = build_moves(
    [
        ([PartitionState.NON_EXISTENT], ModelStep, [PartitionState.NEW]),
        (
            [PartitionState.NEW, PartitionState.ONLINE],
            ModelStep,
            [PartitionState.ONLINE, PartitionState.OFFLINE],
        ),
        # A deleted partition is taken offline first.
        (
            [PartitionState.OFFLINE],
            ModelStep,
            [PartitionState.ONLINE, PartitionState.OFFLINE, PartitionState.NON_EXISTENT],
        ),
    ]
)

#: Valid predecessor states of each replica state, derived from its table.
REPLICA_PREDECESSORS: Final[Mapping[ReplicaState, frozenset[ReplicaState]]] = MappingProxyType(
    {
        state: predecessors(REPLICA_MOVES, ReplicaState, _STEP, state, loops=True)
        for state in ReplicaState
    }
)

#: Valid predecessor states of each partition state, derived from its table.
PARTITION_PREDECESSORS: Final[Mapping[PartitionState, frozenset[PartitionState]]] = (
    MappingProxyType(
        {
            state: predecessors(PARTITION_MOVES, PartitionState, _STEP, state, loops=True)
            for state in PartitionState
        }
    )
)


# ===================================================================== value types


def _node_ids(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


def _optional_node_ids(value: Iterable[int] | None) -> tuple[int, ...] | None:
    return None if value is None else tuple(value)


def _assignment(value: Iterable[Iterable[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(replicas) for replicas in value)


def _config_ops(
    value: Iterable[tuple[str, ConfigOp, str | None]],
) -> tuple[tuple[str, ConfigOp, str | None], ...]:
    return tuple((name, ConfigOp(op), item) for name, op, item in value)


def _str_map(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _strs(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _dir_views(value: Iterable[LogDirView]) -> tuple[LogDirView, ...]:
    return tuple(value)


def _int_map(value: Mapping[int, int]) -> Mapping[int, int]:
    return MappingProxyType(dict(value))


def _dir_map(value: Mapping[int, str]) -> Mapping[int, str]:
    return MappingProxyType(dict(value))


@attrs.frozen(kw_only=True)
class BrokerSpec:
    """A broker of the test cluster: id, rack, replication speed, log directories and
    their size."""

    node_id: int
    rack: str | None = None
    #: How fast this broker's followers copy from their leaders, all together.
    replication_bytes_per_s: float = 64.0 * 1024 * 1024
    #: Capacity of each log directory (DescribeLogDirs' TotalBytes).
    storage_bytes: int = 1 << 40
    #: Its log directories (JBOD); empty: one, ``/var/lib/kafka/data-<id>``.
    log_dirs: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    #: How fast a replica moves between two of its log directories.
    disk_copy_bytes_per_s: float = 256.0 * 1024 * 1024

    @property
    def dirs(self) -> tuple[str, ...]:
        return self.log_dirs or (f"/var/lib/kafka/data-{self.node_id}",)


@attrs.frozen(kw_only=True)
class LogDirView:
    """One log directory of a broker at one moment."""

    path: str
    total_bytes: int
    #: Bytes of the replicas in it, future replicas included.
    used_bytes: int
    #: Replicas in it (future replicas not counted).
    replicas: int


@attrs.frozen(kw_only=True)
class BrokerView:
    """A broker's state at one moment."""

    node_id: int
    rack: str | None
    state: BrokerState
    replication_bytes_per_s: float
    #: Capacity of each log directory.
    storage_bytes: int
    used_bytes: int
    log_dirs: tuple[LogDirView, ...] = attrs.field(default=(), converter=_dir_views)


@attrs.frozen(kw_only=True)
class PartitionView:
    """A partition's state at one moment (immutable snapshot)."""

    topic: str
    partition: int
    state: PartitionState
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    #: Bytes in the leader's log (the log end offset).
    size_bytes: int
    #: Bytes acknowledged to producers with acks=all (never lost by a clean election).
    acknowledged_bytes: int
    #: Bytes each replica holds (its log end offset).
    replica_bytes: Mapping[int, int]
    replica_states: Mapping[int, ReplicaState]
    #: Replicas on dead brokers.
    offline_replicas: tuple[int, ...]
    #: The log directory of each replica.
    replica_dirs: Mapping[int, str] = attrs.field(factory=dict, converter=_dir_map)
    #: Replicas being moved to another log directory of their broker: the directory.
    future_dirs: Mapping[int, str] = attrs.field(factory=dict, converter=_dir_map)
    #: Bytes each future replica holds.
    future_bytes: Mapping[int, int] = attrs.field(factory=dict, converter=_int_map)
    #: Bytes per second the leader takes from producers (``SetProduceRate``).
    produce_bytes_per_s: float = 0.0

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """The replicas before the in-flight reassignment (all of them if none)."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)


@attrs.frozen(kw_only=True)
class Outcome:
    """The answer to a command: a Kafka error code (0: done) and a message."""

    error_code: int = NONE
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_code == NONE


OK: Final = Outcome()


# ----------------------------------------------------------------- commands (inputs)


@attrs.frozen(kw_only=True)
class CreateTopic:
    """Create a topic with an explicit assignment (partition i -> assignment[i]), or
    ``num_partitions`` x ``replication_factor`` placed round robin when it is empty."""

    name: str
    assignment: tuple[tuple[int, ...], ...] = attrs.field(default=(), converter=_assignment)
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = attrs.field(factory=dict, converter=_str_map)
    validate_only: bool = False


@attrs.frozen(kw_only=True)
class CreatePartitions:
    """Grow ``topic`` to ``count`` partitions; ``assignment`` lists the new ones
    (empty: round robin)."""

    topic: str
    count: int
    assignment: tuple[tuple[int, ...], ...] = attrs.field(default=(), converter=_assignment)
    validate_only: bool = False


@attrs.frozen(kw_only=True)
class DeleteTopic:
    """Delete a topic and every replica of it."""

    name: str


@attrs.frozen(kw_only=True)
class AlterReassignment:
    """Reassign a partition to ``target``, or cancel its reassignment (None)."""

    topic: str
    partition: int
    target: tuple[int, ...] | None = attrs.field(converter=_optional_node_ids)


@attrs.frozen(kw_only=True)
class ElectLeader:
    """ElectLeaders for one partition: preferred (default) or unclean."""

    topic: str
    partition: int
    unclean: bool = False


class ConfigOp(enum.IntEnum):
    """IncrementalAlterConfigs operations (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@attrs.frozen(kw_only=True)
class AlterConfigs:
    """Change configurations of a topic (``resource_type`` 2) or broker (4; name ""
    for the cluster-wide default)."""

    resource_type: int
    name: str
    ops: tuple[tuple[str, ConfigOp, str | None], ...] = attrs.field(converter=_config_ops)
    validate_only: bool = False


@attrs.frozen(kw_only=True)
class KillBroker:
    """The broker dies: fenced, out of every ISR, its leaderships move."""

    node_id: int


@attrs.frozen(kw_only=True)
class PauseBroker:
    """The broker stalls without the controller noticing."""

    node_id: int


@attrs.frozen(kw_only=True)
class ReviveBroker:
    """A dead or paused broker comes back with the bytes it had."""

    node_id: int


@attrs.frozen(kw_only=True)
class SetSize:
    """Set a partition's size: the leader and the in-sync followers that can fetch
    now hold ``size_bytes`` (existing data, not acknowledged writes)."""

    topic: str
    partition: int
    size_bytes: int


@attrs.frozen(kw_only=True)
class Produce:
    """Append ``num_bytes`` with acks=all: acknowledged (Outcome ok) only when the ISR
    has at least ``min.insync.replicas`` members and all of them can take it."""

    topic: str
    partition: int
    num_bytes: int


@attrs.frozen(kw_only=True)
class SetByteRate:
    """Change a broker's replication speed."""

    node_id: int
    replication_bytes_per_s: float


@attrs.frozen(kw_only=True)
class SetProduceRate:
    """Producers write ``bytes_per_s`` to the partition's leader with acks=all, from
    now on (0 stops them). Writes stop while the leader is down or stalled, or the ISR
    is smaller than ``min.insync.replicas``."""

    topic: str
    partition: int
    bytes_per_s: float


@attrs.frozen(kw_only=True)
class AlterReplicaLogDir:
    """AlterReplicaLogDirs for one replica: move broker ``node_id``'s replica of the
    partition to log directory ``path`` (or, when the broker has no replica of it yet,
    remember ``path`` for when it gets one: REPLICA_NOT_AVAILABLE, as in Kafka)."""

    node_id: int
    topic: str
    partition: int
    path: str


Command = (
    CreateTopic
    | CreatePartitions
    | DeleteTopic
    | AlterReassignment
    | ElectLeader
    | AlterConfigs
    | KillBroker
    | PauseBroker
    | ReviveBroker
    | SetSize
    | Produce
    | SetByteRate
    | SetProduceRate
    | AlterReplicaLogDir
)


# ===================================================================== mutable state


class _Broker:
    __slots__ = ("dirs", "disk_rate", "node_id", "rack", "rate", "state", "storage_bytes")

    def __init__(self, spec: BrokerSpec) -> None:
        self.node_id = spec.node_id
        self.rack = spec.rack
        self.rate = float(spec.replication_bytes_per_s)
        self.storage_bytes = spec.storage_bytes
        self.dirs = spec.dirs
        self.disk_rate = float(spec.disk_copy_bytes_per_s)
        self.state = BrokerState.ONLINE


class _Partition:
    __slots__ = (
        "acked",
        "adding",
        "caught_up_at",
        "dirs",
        "future",
        "index",
        "isr",
        "leader",
        "leader_epoch",
        "produce_rate",
        "removing",
        "replica_bytes",
        "replica_states",
        "replicas",
        "state",
        "topic",
    )

    def __init__(self, topic: str, index: int) -> None:
        self.topic = topic
        self.index = index
        self.state = PartitionState.NON_EXISTENT
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.leader = NO_LEADER
        self.leader_epoch = -1
        self.adding: list[int] = []
        self.removing: list[int] = []
        #: Bytes each replica holds (floats: steady writes and copies are continuous).
        self.replica_bytes: dict[int, float] = {}
        self.replica_states: dict[int, ReplicaState] = {}
        self.acked = 0.0
        #: When each replica last held every byte of its leader (Kafka's
        #: lastCaughtUpTimeMs); a follower that is further back than
        #: ``replica_lag_time_max_s`` leaves the ISR.
        self.caught_up_at: dict[int, float] = {}
        self.produce_rate = 0.0
        #: Log directory of each replica.
        self.dirs: dict[int, str] = {}
        #: Future replicas (AlterReplicaLogDirs) by broker.
        self.future: dict[int, _Future] = {}


class _Future:
    """A replica being copied to another log directory of its broker."""

    __slots__ = ("bytes", "dir")

    def __init__(self, path: str) -> None:
        self.dir = path
        self.bytes = 0.0


class _Topic:
    __slots__ = ("configs", "name", "partitions", "topic_id")

    def __init__(self, name: str, topic_id: uuid.UUID, configs: Mapping[str, str]) -> None:
        self.name = name
        self.topic_id = topic_id
        self.configs = dict(configs)
        self.partitions: list[_Partition] = []


Handler = Callable[["ClusterModel", Any], Outcome]


class ClusterModel:
    """The whole cluster's replication state; see the module docstring.

    Not thread-safe: the wire server serialises access with a lock.
    """

    def __init__(
        self,
        brokers: Sequence[BrokerSpec],
        *,
        cluster_id: str = "coopconsumer-test-cluster",
        replica_lag_time_max_s: float = 30.0,
        seed: int = 0,
        start: float = 0.0,
    ) -> None:
        if not brokers:
            raise ValueError("a cluster needs at least one broker")
        ids = [b.node_id for b in brokers]
        if len(set(ids)) != len(ids):
            raise ValueError(f"broker ids must be unique: {ids}")
        if replica_lag_time_max_s <= 0:
            raise ValueError("replica_lag_time_max_s must be > 0")
        for b in brokers:
            if len(set(b.dirs)) != len(b.dirs):
                raise ValueError(f"broker {b.node_id} lists a log directory twice: {b.dirs}")
        self.cluster_id = cluster_id
        self.replica_lag_time_max_s = float(replica_lag_time_max_s)
        self._brokers = {b.node_id: _Broker(b) for b in sorted(brokers, key=lambda b: b.node_id)}
        self._topics: dict[str, _Topic] = {}
        #: Deleted topics whose replicas on brokers that are down are not deleted yet.
        self._deleting: dict[str, _Topic] = {}
        #: AlterReplicaLogDirs for replicas a broker does not host yet.
        self._preferred_dirs: dict[tuple[str, int, int], str] = {}
        #: Replicas per (broker, log directory), for placing new replicas.
        self._dir_counts: dict[tuple[int, str], int] = {}
        #: Partitions where something may happen (copying, lagging, writes, moves);
        #: the others are quiet: every replica that fetches is in sync and holds the
        #: leader's bytes, so time changes nothing for them (insertion-ordered).
        self._busy: dict[_Partition, None] = {}
        self._broker_configs: dict[str, dict[str, str]] = {"": {}}
        self._rng = random.Random(seed)
        self._now = float(start)
        self._next_balance_at: float | None = None
        #: Unclean elections so far (each may lose acknowledged bytes).
        self.unclean_elections = 0
        #: Leaderships moved back to the preferred replica by the automatic balancing.
        self.auto_balanced_leaders = 0

    # ------------------------------------------------------------------ reading

    @property
    def now(self) -> float:
        """The model's time: the latest ``now`` it was given."""
        return self._now

    @property
    def controller_id(self) -> int:
        """The lowest live broker id (-1 when all are dead)."""
        live = [b for b, broker in self._brokers.items() if broker.state is not BrokerState.DEAD]
        return min(live) if live else -1

    def brokers(self) -> list[BrokerView]:
        """Every broker, dead ones included, by id."""
        used: dict[tuple[int, str], float] = {}
        count: dict[tuple[int, str], int] = {}
        for p in self._all_partitions():
            for r in p.replicas:
                key = (r, p.dirs[r])
                used[key] = used.get(key, 0.0) + p.replica_bytes.get(r, 0.0)
                count[key] = count.get(key, 0) + 1
            for r, future in p.future.items():
                key = (r, future.dir)
                used[key] = used.get(key, 0.0) + future.bytes
        views = []
        for b in self._brokers.values():
            dirs = [
                LogDirView(
                    path=d,
                    total_bytes=b.storage_bytes,
                    used_bytes=int(used.get((b.node_id, d), 0.0)),
                    replicas=count.get((b.node_id, d), 0),
                )
                for d in b.dirs
            ]
            views.append(
                BrokerView(
                    node_id=b.node_id,
                    rack=b.rack,
                    state=b.state,
                    replication_bytes_per_s=b.rate,
                    storage_bytes=b.storage_bytes,
                    used_bytes=sum(d.used_bytes for d in dirs),
                    log_dirs=dirs,
                )
            )
        return views

    def broker_state(self, node_id: int) -> BrokerState:
        return self._broker(node_id).state

    def broker_list(self) -> list[tuple[int, str | None, BrokerState]]:
        """Every broker's id, rack and state, by id (cheaper than :meth:`brokers`,
        which adds up the storage)."""
        return [(b.node_id, b.rack, b.state) for b in self._brokers.values()]

    def metadata_rows(
        self, topic: str
    ) -> list[tuple[int, int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """What Metadata shows of each partition of ``topic`` (KeyError if unknown):
        index, leader, leader epoch, replicas, ISR, offline replicas."""
        return [
            (
                p.index,
                p.leader,
                p.leader_epoch,
                tuple(p.replicas),
                tuple(p.isr),
                tuple(r for r in p.replicas if not self._alive(r)),
            )
            for p in self._topics[topic].partitions
        ]

    def reassignments(
        self, topic: str
    ) -> list[tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """The partitions of ``topic`` being reassigned (KeyError if unknown): index,
        replicas, adding, removing."""
        return [
            (p.index, tuple(p.replicas), tuple(p.adding), tuple(p.removing))
            for p in self._topics[topic].partitions
            if p.adding or p.removing
        ]

    def topics(self) -> list[str]:
        return sorted(self._topics)

    def topics_being_deleted(self) -> dict[str, list[tuple[int, int]]]:
        """Deleted topics whose replicas on brokers that are down wait to be deleted:
        name -> ``(partition, broker)`` pairs still to delete."""
        return {
            name: [(p.index, r) for p in t.partitions for r in sorted(p.replica_states)]
            for name, t in sorted(self._deleting.items())
        }

    def topic_id(self, name: str) -> uuid.UUID | None:
        topic = self._topics.get(name)
        return None if topic is None else topic.topic_id

    def topic_configs(self, name: str) -> dict[str, str]:
        """Explicitly set configurations of a topic (KeyError if unknown)."""
        return dict(self._topics[name].configs)

    def broker_configs(self, name: str) -> dict[str, str]:
        """Explicitly set configurations of broker ``name`` ("" = cluster default)."""
        return dict(self._broker_configs.get(name, {}))

    def partitions(self, topic: str) -> list[PartitionView]:
        """The partitions of ``topic`` (KeyError if unknown)."""
        return [self._view(p) for p in self._topics[topic].partitions]

    def partition(self, topic: str, index: int) -> PartitionView:
        return self._view(self._topics[topic].partitions[index])

    def all_partitions(self) -> list[PartitionView]:
        return [self._view(p) for t in sorted(self._topics) for p in self._topics[t].partitions]

    def topic_config(self, topic: str, key: str) -> str:
        """A topic configuration's effective value (topic, then cluster default)."""
        configs = self._topics[topic].configs
        if key in configs:
            return configs[key]
        cluster = self._broker_configs[""]
        if key in cluster:
            return cluster[key]
        return DEFAULT_TOPIC_CONFIGS.get(key, DEFAULT_BROKER_CONFIGS.get(key, ""))

    def broker_config(self, node_id: int, key: str) -> str:
        """A broker configuration's effective value (broker, cluster default, default)."""
        for scope in (str(node_id), ""):
            value = self._broker_configs.get(scope, {}).get(key)
            if value is not None:
                return value
        return DEFAULT_BROKER_CONFIGS.get(key, "")

    def controller_config(self, key: str) -> str:
        """A controller setting's effective value (cluster default, then Kafka's)."""
        value = self._broker_configs[""].get(key)
        return DEFAULT_BROKER_CONFIGS.get(key, "") if value is None else value

    # ------------------------------------------------------------------ changing

    def apply(self, command: Command, now: float) -> Outcome:
        """Advance to ``now``, then carry out ``command`` through the handler table.

        Returns the outcome (error code and message); bad input is an outcome, never an
        exception. Raises ``TypeError`` for an object that is not a command.
        """
        handler = _HANDLERS.get(type(command))
        if handler is None:
            raise TypeError(f"not a cluster command: {command!r}")
        self.advance(now)
        outcome = handler(self, command)
        self._settle()
        return outcome

    def advance(self, now: float) -> None:
        """Move replication forward to ``now`` (seconds; must not go backwards).

        Steps from event to event (a follower catching up, a follower falling out of
        the ISR, a future replica catching up, a leader-balance check), so the result
        does not depend on how often it is called.
        """
        if now < self._now:
            raise ValueError(f"time went backwards: {now} < {self._now}")
        while True:
            self._settle()
            if self._now >= now:
                return
            flows = self._flows()
            step = now - self._now
            for at in self._events(flows):
                if at > self._now:
                    step = min(step, at - self._now)
            self._flow(flows, step)
            self._now = now if self._now + step >= now else self._now + step

    # ------------------------------------------------------------------ handlers

    def _create_topic(self, cmd: CreateTopic) -> Outcome:
        error = _check_topic_name(cmd.name)
        if error is not None:
            return error
        if cmd.name in self._topics:
            return Outcome(
                error_code=TOPIC_ALREADY_EXISTS, message=f"Topic '{cmd.name}' already exists."
            )
        if cmd.name in self._deleting:
            return Outcome(
                error_code=TOPIC_ALREADY_EXISTS,
                message=f"Topic '{cmd.name}' is marked for deletion.",
            )
        config_error = _check_configs(cmd.configs, RESOURCE_TOPIC)
        if config_error is not None:
            return config_error
        if cmd.assignment:
            if cmd.num_partitions != -1 or cmd.replication_factor != -1:
                return Outcome(
                    error_code=INVALID_REQUEST,
                    message="Both numPartitions or replicationFactor and replicasAssignments "
                    "were set. Both cannot be used at the same time.",
                )
            assignment = cmd.assignment
        else:
            placed = self._round_robin(cmd.num_partitions, cmd.replication_factor, 0)
            if isinstance(placed, Outcome):
                return placed
            assignment = placed
        error = self._check_assignment(assignment, None, require_active=True)
        if error is not None:
            return error
        if cmd.validate_only:
            return OK
        topic = _Topic(cmd.name, uuid.UUID(int=self._rng.getrandbits(128)), cmd.configs)
        self._topics[cmd.name] = topic
        for replicas in assignment:
            self._new_partition(topic, replicas)
        return OK

    def _create_partitions(self, cmd: CreatePartitions) -> Outcome:
        topic = self._topics.get(cmd.topic)
        if topic is None:
            return _unknown_topic(cmd.topic)
        current = len(topic.partitions)
        if cmd.count <= current:
            return Outcome(
                error_code=INVALID_PARTITIONS,
                message=f"The topic {cmd.topic} currently has {current} partition(s); "
                f"{cmd.count} would not be an increase.",
            )
        # As Kafka's controller does: partition 0's replica list, which counts the
        # adding and removing replicas of a reassignment in flight.
        rf = len(topic.partitions[0].replicas) if topic.partitions else 1
        if cmd.assignment:
            if len(cmd.assignment) != cmd.count - current:
                return Outcome(
                    error_code=INVALID_REPLICA_ASSIGNMENT,
                    message=f"Attempted to add {cmd.count - current} additional partition(s), "
                    f"but only {len(cmd.assignment)} assignment(s) were specified.",
                )
            assignment = cmd.assignment
        else:
            placed = self._round_robin(cmd.count - current, rf, current)
            if isinstance(placed, Outcome):
                return placed
            assignment = placed
        error = self._check_assignment(assignment, rf, require_active=True)
        if error is not None:
            return error
        if not cmd.validate_only:
            for replicas in assignment:
                self._new_partition(topic, replicas)
        return OK

    def _delete_topic(self, cmd: DeleteTopic) -> Outcome:
        """As in Kafka's replication design, the partitions go offline, then
        non-existent; every replica is stopped (offline) and its deletion starts; a
        broker that is up deletes at once, one that is down when it returns (its
        close-replica request waits)."""
        topic = self._topics.pop(cmd.name, None)
        if topic is None:
            return _unknown_topic(cmd.name)
        for p in topic.partitions:
            self._busy.pop(p, None)
            if p.state is not PartitionState.OFFLINE:
                self._partition_to(p, PartitionState.OFFLINE)
            self._partition_to(p, PartitionState.NON_EXISTENT)
            p.leader = NO_LEADER
            p.adding, p.removing, p.produce_rate = [], [], 0.0
            p.future.clear()
            for r in list(p.replica_states):
                if p.replica_states[r] is not ReplicaState.OFFLINE:
                    self._replica_to(p, r, ReplicaState.OFFLINE)
                self._replica_to(p, r, ReplicaState.DELETING)
        for key in [k for k in self._preferred_dirs if k[0] == cmd.name]:
            del self._preferred_dirs[key]
        self._deleting[cmd.name] = topic
        self._finish_deletions()
        return OK

    def _alter_reassignment(self, cmd: AlterReassignment) -> Outcome:
        p = self._find(cmd.topic, cmd.partition)
        if isinstance(p, Outcome):
            return p
        self._touch(p)
        if cmd.target is None:
            if not (p.adding or p.removing):
                return Outcome(
                    error_code=NO_REASSIGNMENT_IN_PROGRESS,
                    message=f"No ongoing reassignment for {cmd.topic}-{cmd.partition}.",
                )
            self._cancel_reassignment(p)
            return OK
        error = self._check_assignment((cmd.target,), None, require_active=False)
        if error is not None:
            return error
        current = list(p.replicas)
        target = list(cmd.target)
        removing = [r for r in current if r not in target]
        adding = [r for r in target if r not in current]
        p.replicas = target + removing
        p.adding = adding
        p.removing = removing
        for r in adding:
            self._start_replica(p, r, 0)
        for r in list(p.replica_states):
            if r not in p.replicas:
                # A replica the previous target added and this one drops.
                self._drop_replica(p, r)
        self._maybe_complete_reassignment(p)
        return OK

    def _elect_leader(self, cmd: ElectLeader) -> Outcome:
        p = self._find(cmd.topic, cmd.partition)
        if isinstance(p, Outcome):
            return p
        self._touch(p)
        if cmd.unclean:
            if p.leader != NO_LEADER:
                return Outcome(
                    error_code=ELECTION_NOT_NEEDED, message="Leader election not needed."
                )
            if not self._elect(p, allow_unclean=True):
                return Outcome(
                    error_code=ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    message=f"No live replica can lead {cmd.topic}-{cmd.partition}.",
                )
            return OK
        preferred = p.replicas[0]
        if p.leader == preferred:
            return Outcome(error_code=ELECTION_NOT_NEEDED, message="Leader election not needed.")
        if not self._can_lead_preferred(p):
            return Outcome(
                error_code=PREFERRED_LEADER_NOT_AVAILABLE,
                message=f"Failed to elect leader for partition {cmd.topic}-{cmd.partition} "
                "under strategy PreferredReplicaPartitionLeaderElectionStrategy",
            )
        self._set_leader(p, preferred)
        return OK

    def _alter_configs(self, cmd: AlterConfigs) -> Outcome:
        if cmd.resource_type == RESOURCE_TOPIC:
            topic = self._topics.get(cmd.name)
            if topic is None:
                return _unknown_topic(cmd.name)
            configs = dict(topic.configs)
        elif cmd.resource_type == RESOURCE_BROKER:
            if cmd.name and (not cmd.name.isdigit() or int(cmd.name) not in self._brokers):
                return Outcome(error_code=INVALID_REQUEST, message=f"Unknown broker {cmd.name!r}")
            configs = dict(self._broker_configs.get(cmd.name, {}))
        else:
            return Outcome(
                error_code=INVALID_REQUEST,
                message=f"Unsupported resource type {cmd.resource_type}",
            )
        for name, op, value in cmd.ops:
            current = configs.get(name, "")
            if op is ConfigOp.SET:
                if value is None:
                    return Outcome(error_code=INVALID_REQUEST, message=f"Null value for {name}")
                configs[name] = value
            elif op is ConfigOp.DELETE:
                configs.pop(name, None)
            elif name not in _LIST_CONFIGS:
                return Outcome(
                    error_code=INVALID_CONFIG,
                    message=f"Config value append/subtract is not allowed for config key {name}",
                )
            else:
                items = [i for i in current.split(",") if i]
                extra = [i.strip() for i in (value or "").split(",") if i.strip()]
                if op is ConfigOp.APPEND:
                    items += [i for i in extra if i not in items]
                else:
                    items = [i for i in items if i not in extra]
                configs[name] = ",".join(items)
        if cmd.resource_type == RESOURCE_BROKER and cmd.name:
            controller = sorted(set(configs) & _CONTROLLER_CONFIGS)
            if controller:
                return Outcome(
                    error_code=INVALID_REQUEST,
                    message=f"{controller} can only be set cluster-wide (resource name '')",
                )
        error = _check_configs(configs, cmd.resource_type)
        if error is not None:
            return error
        if cmd.validate_only:
            return OK
        if cmd.resource_type == RESOURCE_TOPIC:
            for p in self._topics[cmd.name].partitions:
                self._touch(p)  # throttles, min ISR: flows may change
            self._topics[cmd.name].configs = configs
        else:
            before = {k: self.controller_config(k) for k in _CONTROLLER_CONFIGS}
            self._broker_configs[cmd.name] = configs
            if before != {k: self.controller_config(k) for k in _CONTROLLER_CONFIGS}:
                self._next_balance_at = None  # checked again one interval from now
        # A lowered throttle or min ISR changes nothing at once; the next advance uses it.
        return OK

    def _kill_broker(self, cmd: KillBroker) -> Outcome:
        broker = self._brokers.get(cmd.node_id)
        if broker is None:
            return _unknown_broker(cmd.node_id)
        if broker.state is BrokerState.DEAD:
            return OK
        hosted = self._hosted_by(cmd.node_id)
        for p in hosted:
            self._touch(p)
        broker.state = BrokerState.DEAD
        for p in hosted:
            self._replica_to(p, cmd.node_id, ReplicaState.OFFLINE)
            if cmd.node_id in p.isr and len(p.isr) > 1:
                p.isr.remove(cmd.node_id)
            if p.leader == cmd.node_id:
                self._elect(p, allow_unclean=self._unclean_allowed(p))
        return OK

    def _pause_broker(self, cmd: PauseBroker) -> Outcome:
        broker = self._brokers.get(cmd.node_id)
        if broker is None:
            return _unknown_broker(cmd.node_id)
        if broker.state is BrokerState.DEAD:
            return Outcome(error_code=BROKER_NOT_AVAILABLE, message="a dead broker cannot pause")
        for p in self._hosted_by(cmd.node_id):
            self._touch(p)
        broker.state = BrokerState.PAUSED
        return OK

    def _revive_broker(self, cmd: ReviveBroker) -> Outcome:
        broker = self._brokers.get(cmd.node_id)
        if broker is None:
            return _unknown_broker(cmd.node_id)
        was = broker.state
        for p in self._hosted_by(cmd.node_id):
            self._touch(p)
        broker.state = BrokerState.ONLINE
        # Queued close-replica requests of deleted topics run first (Kafka's design).
        self._finish_deletions()
        if was is not BrokerState.DEAD:
            return OK
        for p in self._hosted_by(cmd.node_id):
            self._replica_to(p, cmd.node_id, ReplicaState.ONLINE)
            if p.leader == NO_LEADER:
                self._elect(p, allow_unclean=self._unclean_allowed(p))
            elif p.leader != cmd.node_id:
                # A replica that led before an unclean election may hold bytes the new
                # leader never had: it truncates to the leader's log.
                leader_bytes = p.replica_bytes[p.leader]
                if p.replica_bytes[cmd.node_id] > leader_bytes:
                    p.replica_bytes[cmd.node_id] = leader_bytes
        return OK

    def _set_size(self, cmd: SetSize) -> Outcome:
        p = self._find(cmd.topic, cmd.partition)
        if isinstance(p, Outcome):
            return p
        if cmd.size_bytes < 0:
            return Outcome(error_code=INVALID_REQUEST, message="size_bytes must be >= 0")
        self._touch(p)
        if p.leader == NO_LEADER:
            return Outcome(error_code=LEADER_NOT_AVAILABLE, message="the partition is offline")
        for r in p.isr:
            if r == p.leader or self._fetching(r):
                p.replica_bytes[r] = float(cmd.size_bytes)
                p.caught_up_at[r] = self._now
        p.acked = min(p.acked, float(cmd.size_bytes))
        return OK

    def _produce(self, cmd: Produce) -> Outcome:
        p = self._find(cmd.topic, cmd.partition)
        if isinstance(p, Outcome):
            return p
        if cmd.num_bytes <= 0:
            return Outcome(error_code=INVALID_REQUEST, message="num_bytes must be > 0")
        self._touch(p)
        refusal = self._refuses_writes(p)
        if refusal is not None:
            return refusal
        before = p.replica_bytes[p.leader]
        end = before + cmd.num_bytes
        p.replica_bytes[p.leader] = end
        lagging = False
        for r in p.isr:
            if r == p.leader:
                continue
            if self._fetching(r) and p.replica_bytes[r] >= before:
                p.replica_bytes[r] = end
            else:
                lagging = True  # stalled, or behind: it copies at its own pace
        if lagging:
            return Outcome(error_code=REQUEST_TIMED_OUT, message="an ISR member did not fetch")
        p.acked = end
        return OK

    def _set_byte_rate(self, cmd: SetByteRate) -> Outcome:
        broker = self._brokers.get(cmd.node_id)
        if broker is None:
            return _unknown_broker(cmd.node_id)
        if cmd.replication_bytes_per_s < 0:
            return Outcome(error_code=INVALID_REQUEST, message="the rate must be >= 0")
        broker.rate = float(cmd.replication_bytes_per_s)
        return OK

    def _set_produce_rate(self, cmd: SetProduceRate) -> Outcome:
        p = self._find(cmd.topic, cmd.partition)
        if isinstance(p, Outcome):
            return p
        if cmd.bytes_per_s < 0:
            return Outcome(error_code=INVALID_REQUEST, message="the rate must be >= 0")
        self._touch(p)
        p.produce_rate = float(cmd.bytes_per_s)
        return OK

    def _alter_replica_log_dir(self, cmd: AlterReplicaLogDir) -> Outcome:
        """Kafka's ``ReplicaManager.alterReplicaLogDirs`` for one replica."""
        broker = self._brokers.get(cmd.node_id)
        if broker is None:
            return _unknown_broker(cmd.node_id)
        if cmd.path not in broker.dirs:
            return Outcome(
                error_code=LOG_DIR_NOT_FOUND,
                message=f"Log dir {cmd.path} is not found in the config.",
            )
        p = self._find(cmd.topic, cmd.partition)
        if isinstance(p, Outcome) or cmd.node_id not in p.replica_states:
            # Remembered for when the broker gets the replica (a reassignment adding it).
            self._preferred_dirs[(cmd.topic, cmd.partition, cmd.node_id)] = cmd.path
            return Outcome(
                error_code=REPLICA_NOT_AVAILABLE,
                message=f"Replica {cmd.node_id} of {cmd.topic}-{cmd.partition} does not "
                "exist yet; the directory is remembered for when it is created",
            )
        self._touch(p)
        future = p.future.get(cmd.node_id)
        if future is not None and future.dir != cmd.path:
            del p.future[cmd.node_id]  # a new destination: the copy starts over
        if p.dirs[cmd.node_id] != cmd.path and cmd.node_id not in p.future:
            p.future[cmd.node_id] = _Future(cmd.path)
        return OK

    # ------------------------------------------------------------------ internals

    def _broker(self, node_id: int) -> _Broker:
        broker = self._brokers.get(node_id)
        if broker is None:
            raise KeyError(f"no broker {node_id}")
        return broker

    def _alive(self, node_id: int) -> bool:
        broker = self._brokers.get(node_id)
        return broker is not None and broker.state is not BrokerState.DEAD

    def _fetching(self, node_id: int) -> bool:
        return self._brokers[node_id].state is BrokerState.ONLINE

    def _unclean_allowed(self, p: _Partition) -> bool:
        return self.topic_config(p.topic, "unclean.leader.election.enable").lower() == "true"

    def _can_lead_preferred(self, p: _Partition) -> bool:
        preferred = p.replicas[0]
        return preferred in p.isr and self._alive(preferred) and preferred not in p.removing

    def _refuses_writes(self, p: _Partition) -> Outcome | None:
        """Why an acks=all write is refused now (None: it is taken)."""
        if p.leader == NO_LEADER:
            return Outcome(error_code=LEADER_NOT_AVAILABLE, message="the partition is offline")
        if self._brokers[p.leader].state is not BrokerState.ONLINE:
            return Outcome(error_code=REQUEST_TIMED_OUT, message="the leader does not answer")
        min_isr = int(self.topic_config(p.topic, "min.insync.replicas"))
        if len(p.isr) < min_isr:
            return Outcome(
                error_code=NOT_ENOUGH_REPLICAS,
                message=f"The size of the current ISR {p.isr} is insufficient to satisfy "
                f"the min.isr requirement of {min_isr}",
            )
        return None

    def _find(self, topic: str, index: int) -> _Partition | Outcome:
        t = self._topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return _unknown_topic(f"{topic}-{index}")
        return t.partitions[index]

    def _all_partitions(self) -> Iterator[_Partition]:
        for t in self._topics.values():
            yield from t.partitions

    def _hosted_by(self, node_id: int) -> list[_Partition]:
        return [p for p in self._all_partitions() if node_id in p.replica_states]

    def _view(self, p: _Partition) -> PartitionView:
        return PartitionView(
            topic=p.topic,
            partition=p.index,
            state=p.state,
            replicas=tuple(p.replicas),
            isr=tuple(p.isr),
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            adding=tuple(p.adding),
            removing=tuple(p.removing),
            size_bytes=int(self._leader_bytes(p)),
            acknowledged_bytes=int(p.acked),
            replica_bytes=MappingProxyType({r: int(p.replica_bytes[r]) for r in p.replicas}),
            replica_states=MappingProxyType({r: p.replica_states[r] for r in p.replicas}),
            offline_replicas=tuple(r for r in p.replicas if not self._alive(r)),
            replica_dirs={r: p.dirs[r] for r in p.replicas},
            future_dirs={r: f.dir for r, f in p.future.items()},
            future_bytes={r: int(f.bytes) for r, f in p.future.items()},
            produce_bytes_per_s=p.produce_rate,
        )

    def _leader_bytes(self, p: _Partition) -> float:
        if p.leader != NO_LEADER:
            return p.replica_bytes[p.leader]
        return max((p.replica_bytes[r] for r in p.isr), default=0.0)

    def _replica_to(self, p: _Partition, replica: int, state: ReplicaState) -> None:
        current = p.replica_states.get(replica, ReplicaState.NON_EXISTENT)
        check_move(
            REPLICA_MOVES,
            current,
            ModelStep,
            state,
            machine="replica",
            detail=f"replica {replica} of {p.topic}-{p.index}",
        )
        if state is ReplicaState.NON_EXISTENT:
            p.replica_states.pop(replica, None)
            p.replica_bytes.pop(replica, None)
            p.caught_up_at.pop(replica, None)
            path = p.dirs.pop(replica, None)
            if path is not None:
                self._dir_counts[(replica, path)] -= 1
            p.future.pop(replica, None)
        else:
            p.replica_states[replica] = state

    def _partition_to(self, p: _Partition, state: PartitionState) -> None:
        check_move(
            PARTITION_MOVES,
            p.state,
            ModelStep,
            state,
            machine="partition",
            detail=f"partition {p.topic}-{p.index}",
        )
        p.state = state

    def _start_replica(self, p: _Partition, replica: int, size: int) -> None:
        self._replica_to(p, replica, ReplicaState.NEW)
        p.replica_bytes[replica] = float(size)
        path = self._place_log(p, replica)
        p.dirs[replica] = path
        self._dir_counts[(replica, path)] = self._dir_counts.get((replica, path), 0) + 1
        self._replica_to(
            p, replica, ReplicaState.ONLINE if self._alive(replica) else ReplicaState.OFFLINE
        )

    def _place_log(self, p: _Partition, replica: int) -> str:
        """The directory a new replica goes to: the one AlterReplicaLogDirs named, else
        the one with the fewest replicas (Kafka's ``LogManager.nextLogDirs``)."""
        chosen = self._preferred_dirs.pop((p.topic, p.index, replica), None)
        dirs = self._brokers[replica].dirs
        if chosen is not None and chosen in dirs:
            return chosen
        return min(dirs, key=lambda d: (self._dir_counts.get((replica, d), 0), dirs.index(d)))

    def _drop_replica(self, p: _Partition, replica: int) -> None:
        """A replica leaves the partition (reassignment done or cancelled): stopped,
        then deleted (KRaft removes it from the metadata at once)."""
        if p.replica_states.get(replica) is not ReplicaState.OFFLINE:
            self._replica_to(p, replica, ReplicaState.OFFLINE)
        self._replica_to(p, replica, ReplicaState.DELETING)
        self._replica_to(p, replica, ReplicaState.NON_EXISTENT)

    def _finish_deletions(self) -> None:
        """Brokers that are up delete the replicas of deleted topics they still hold."""
        for name in list(self._deleting):
            topic = self._deleting[name]
            for p in topic.partitions:
                for r in list(p.replica_states):
                    if self._fetching(r):
                        self._replica_to(p, r, ReplicaState.NON_EXISTENT)
            if not any(p.replica_states for p in topic.partitions):
                del self._deleting[name]

    def _new_partition(self, topic: _Topic, replicas: Sequence[int]) -> None:
        p = _Partition(topic.name, len(topic.partitions))
        self._partition_to(p, PartitionState.NEW)
        p.replicas = list(replicas)
        for r in replicas:
            self._start_replica(p, r, 0)
        p.isr = [r for r in replicas if self._alive(r)]
        for r in p.isr:
            p.caught_up_at[r] = self._now
        topic.partitions.append(p)
        self._elect(p, allow_unclean=False)
        self._busy[p] = None

    def _set_leader(self, p: _Partition, leader: int) -> None:
        if leader == p.leader and p.state is not PartitionState.NEW:
            return
        p.leader = leader
        p.leader_epoch += 1
        self._partition_to(
            p, PartitionState.OFFLINE if leader == NO_LEADER else PartitionState.ONLINE
        )
        if leader != NO_LEADER:
            # Followers truncate to the new leader's log (leader epochs): bytes it never
            # had were never acknowledged (the leader comes from the ISR).
            top = p.replica_bytes[leader]
            for r in p.replicas:
                if r != leader and self._alive(r) and p.replica_bytes[r] > top:
                    p.replica_bytes[r] = top

    def _elect(self, p: _Partition, *, allow_unclean: bool) -> bool:
        """Give ``p`` a leader: the first live ISR member in replica order; failing that
        (and only when allowed) the first live replica, unclean. Returns whether a
        leader was found; without one the partition goes offline."""
        for r in p.replicas:
            if r in p.isr and self._alive(r) and r not in p.removing:
                self._set_leader(p, r)
                return True
        for r in p.replicas:
            if r in p.isr and self._alive(r):
                self._set_leader(p, r)
                return True
        if allow_unclean:
            for r in p.replicas:
                if self._alive(r):
                    self.unclean_elections += 1
                    p.isr = [r]
                    p.caught_up_at[r] = self._now
                    self._set_leader(p, r)
                    p.acked = min(p.acked, p.replica_bytes[r])
                    for other in p.replicas:
                        if p.replica_bytes[other] > p.replica_bytes[r]:
                            p.replica_bytes[other] = p.replica_bytes[r]
                    return True
        self._set_leader(p, NO_LEADER)
        return False

    def _round_robin(
        self, count: int, rf: int, first_partition: int
    ) -> tuple[tuple[int, ...], ...] | Outcome:
        """The broker's own placement when a request brings no assignment: plain round
        robin over live brokers (the client-side assignors are what is under test)."""
        live = [b for b, broker in self._brokers.items() if broker.state is not BrokerState.DEAD]
        if count == -1:
            count = 1
        if rf == -1:
            rf = min(len(live), 1)
        if count <= 0:
            return Outcome(
                error_code=INVALID_PARTITIONS, message="Number of partitions must be > 0"
            )
        if rf <= 0:
            return Outcome(
                error_code=INVALID_REPLICATION_FACTOR, message="Replication factor must be > 0"
            )
        if rf > len(live):
            return Outcome(
                error_code=INVALID_REPLICATION_FACTOR,
                message=f"Unable to replicate the partition {rf} time(s): The target "
                f"replication factor of {rf} cannot be reached because only {len(live)} "
                "broker(s) are registered.",
            )
        return tuple(
            tuple(live[(first_partition + i + k) % len(live)] for k in range(rf))
            for i in range(count)
        )

    def _check_assignment(
        self, assignment: Sequence[Sequence[int]], rf: int | None, *, require_active: bool
    ) -> Outcome | None:
        for i, replicas in enumerate(assignment):
            if not replicas:
                return Outcome(
                    error_code=INVALID_REPLICA_ASSIGNMENT,
                    message="The manual partition assignment includes an empty replica list.",
                )
            if len(set(replicas)) != len(replicas):
                return Outcome(
                    error_code=INVALID_REPLICA_ASSIGNMENT,
                    message=f"The manual partition assignment {list(replicas)} includes a "
                    "broker more than once.",
                )
            for r in replicas:
                if r not in self._brokers:
                    return Outcome(
                        error_code=INVALID_REPLICA_ASSIGNMENT,
                        message=f"The manual partition assignment includes broker {r}, but "
                        "no such broker is registered.",
                    )
            if rf is not None and len(replicas) != rf:
                return Outcome(
                    error_code=INVALID_REPLICA_ASSIGNMENT,
                    message=f"The manual partition assignment includes a partition with "
                    f"{len(replicas)} replica(s), but this is not consistent with previous "
                    f"partitions, which have {rf} replica(s).",
                )
            rf = len(replicas)
            if require_active and not any(self._alive(r) for r in replicas):
                return Outcome(
                    error_code=INVALID_REPLICA_ASSIGNMENT,
                    message=f"All brokers specified in the manual partition assignment for "
                    f"partition {i} are fenced or in controlled shutdown.",
                )
        return None

    def _cancel_reassignment(self, p: _Partition) -> None:
        original = [r for r in p.replicas if r not in p.adding]
        isr = [r for r in p.isr if r not in p.adding]
        adding = list(p.adding)
        p.replicas = original
        p.adding = []
        p.removing = []
        if not isr:
            # Every in-sync replica was a new one (KRaft's revert does the same): the
            # first original replica is put back, an unclean choice.
            isr = [original[0]]
            self.unclean_elections += 1
            p.acked = min(p.acked, p.replica_bytes[original[0]])
            p.caught_up_at[original[0]] = self._now
        p.isr = isr
        if p.leader not in original or p.leader not in isr:
            self._elect(p, allow_unclean=False)
        for r in adding:
            self._drop_replica(p, r)

    def _maybe_complete_reassignment(self, p: _Partition) -> None:
        if not (p.adding or p.removing):
            return
        target_isr = [r for r in p.isr if r not in p.removing]
        target_replicas = [r for r in p.replicas if r not in p.removing]
        if not target_isr or not target_replicas:
            return
        if not set(target_replicas) <= set(target_isr):
            return
        removing = list(p.removing)
        p.replicas = target_replicas
        p.isr = target_isr
        p.adding = []
        p.removing = []
        if p.leader not in p.replicas or not self._alive(p.leader):
            self._elect(p, allow_unclean=False)
        for r in removing:
            self._drop_replica(p, r)

    # ------------------------------------------------------------------ time

    def _settle(self) -> None:
        """Everything that follows from the state at ``now``: caught-up times, ISR
        shrinks and expansions, finished reassignments, future replicas replacing
        current ones, and the leader-balance check when it is due."""
        lag = self.replica_lag_time_max_s
        for p in list(self._busy):
            if p.leader != NO_LEADER:
                top = p.replica_bytes[p.leader]
                leading = self._fetching(p.leader)
                for r in p.replicas:
                    if (r == p.leader and leading) or (
                        r != p.leader and self._fetching(r) and p.replica_bytes[r] >= top
                    ):
                        p.caught_up_at[r] = self._now
                if leading:
                    # The leader shrinks the ISR (a stalled one cannot); the last member
                    # never leaves.
                    for r in list(p.isr):
                        if (
                            r != p.leader
                            and len(p.isr) > 1
                            and self._now - p.caught_up_at.get(r, self._now) >= lag
                        ):
                            p.isr.remove(r)
                    for r in p.replicas:
                        if r not in p.isr and self._fetching(r) and p.replica_bytes[r] >= top:
                            p.isr.append(r)
                            p.caught_up_at[r] = self._now
                    if p.produce_rate > 0 and self._refuses_writes(p) is None:
                        # Writes waiting for a follower that just left are acknowledged.
                        p.acked = max(p.acked, min(p.replica_bytes[r] for r in p.isr))
            self._maybe_complete_reassignment(p)
            for r, future in list(p.future.items()):
                if self._fetching(r) and future.bytes >= p.replica_bytes[r]:
                    self._dir_counts[(r, p.dirs[r])] -= 1
                    self._dir_counts[(r, future.dir)] = self._dir_counts.get((r, future.dir), 0) + 1
                    p.dirs[r] = future.dir
                    del p.future[r]
            if self._quiet(p):
                del self._busy[p]
        self._balance_leaders()

    def _quiet(self, p: _Partition) -> bool:
        """Nothing can happen to ``p`` as time passes (see ``_busy``)."""
        if p.adding or p.removing or p.future:
            return False
        if p.leader == NO_LEADER or not self._fetching(p.leader):
            return True  # nothing flows until a broker changes (which touches it)
        if p.produce_rate > 0:
            return False
        top = p.replica_bytes[p.leader]
        for r in p.replicas:
            fetching = self._fetching(r)
            if r in p.isr:
                if not fetching or p.replica_bytes[r] < top:
                    return False  # it will fall out of the ISR, or is catching up
            elif fetching:
                return False  # copying, or about to join the ISR
        return True

    def _touch(self, p: _Partition) -> None:
        """``p`` is about to change: it is busy from now on. A quiet partition's
        caught-up followers were caught up all along: they are, as of now."""
        if p in self._busy:
            return
        if p.leader != NO_LEADER:
            top = p.replica_bytes[p.leader]
            for r in p.replicas:
                if self._fetching(r) and p.replica_bytes[r] >= top:
                    p.caught_up_at[r] = self._now
        self._busy[p] = None

    def _balance_interval(self) -> float | None:
        if self.controller_config("auto.leader.rebalance.enable").lower() != "true":
            return None
        return max(1.0, float(self.controller_config("leader.imbalance.check.interval.seconds")))

    def _balance_leaders(self) -> None:
        """``auto.leader.rebalance.enable``: every check interval, each partition whose
        preferred replica is alive and in sync but does not lead gets it back as
        leader (KRaft's controller balances every such partition)."""
        interval = self._balance_interval()
        if interval is None:
            self._next_balance_at = None
            return
        if self._next_balance_at is None:
            self._next_balance_at = self._now + interval
        if self._now < self._next_balance_at:
            return
        while self._next_balance_at <= self._now:
            self._next_balance_at += interval
        for p in self._all_partitions():
            if p.leader != p.replicas[0] and self._can_lead_preferred(p):
                self._touch(p)
                self._set_leader(p, p.replicas[0])
                self.auto_balanced_leaders += 1

    def _flows(self) -> _Flows:
        """Who copies how fast right now: leaders taking writes, followers fetching,
        future replicas copying between directories."""
        flows = _Flows()
        flows.partitions = {id(p): p for p in self._busy}
        for p in self._busy:
            if p.produce_rate > 0 and self._refuses_writes(p) is None:
                flows.growth[id(p)] = p.produce_rate
        # Followers: the caught-up ones take what is written (keep-up demand); those
        # behind share the rest of their broker's bandwidth, capped by throttles.
        keep_up: dict[int, list[tuple[_Partition, int, float]]] = {}
        behind: list[tuple[_Partition, int, bool, bool]] = []
        throttled: dict[str, tuple[_Throttled, _Throttled]] = {}
        for p in self._busy:
            if p.topic not in throttled:
                configs = self._topics[p.topic].configs
                throttled[p.topic] = (
                    _throttled_set(configs.get("leader.replication.throttled.replicas")),
                    _throttled_set(configs.get("follower.replication.throttled.replicas")),
                )
            leader_throttled, follower_throttled = throttled[p.topic]
            if p.leader == NO_LEADER or not self._fetching(p.leader):
                continue
            top = p.replica_bytes[p.leader]
            grow = flows.growth.get(id(p), 0.0)
            for r in p.replicas:
                if r == p.leader or not self._fetching(r):
                    continue
                if p.replica_bytes[r] >= top:
                    if grow > 0:
                        keep_up.setdefault(r, []).append((p, r, grow))
                    continue
                # Throttles apply to out-of-sync replicas only, as in Kafka.
                out_of_sync = r not in p.isr
                behind.append(
                    (
                        p,
                        r,
                        out_of_sync and _is_throttled(leader_throttled, p.index, p.leader),
                        out_of_sync and _is_throttled(follower_throttled, p.index, r),
                    )
                )
        spare = {b: broker.rate for b, broker in self._brokers.items()}
        for b, demands in keep_up.items():
            total = sum(d for _, _, d in demands)
            share = 1.0 if total <= spare[b] else spare[b] / total
            for p, r, d in demands:
                flows.follower[(id(p), r)] = d * share
            spare[b] = max(0.0, spare[b] - total)
        per_follower: dict[int, int] = {}
        throttled_follower: dict[int, int] = {}
        throttled_leader: dict[int, int] = {}
        for p, r, lt, ft in behind:
            per_follower[r] = per_follower.get(r, 0) + 1
            if ft:
                throttled_follower[r] = throttled_follower.get(r, 0) + 1
            if lt:
                throttled_leader[p.leader] = throttled_leader.get(p.leader, 0) + 1
        for p, r, lt, ft in behind:
            rate = spare[r] / per_follower[r]
            if ft:
                cap = int(self.broker_config(r, "follower.replication.throttled.rate"))
                rate = min(rate, cap / throttled_follower[r])
            if lt:
                cap = int(self.broker_config(p.leader, "leader.replication.throttled.rate"))
                rate = min(rate, cap / throttled_leader[p.leader])
            flows.follower[(id(p), r)] = rate
        # Future replicas copy from their broker's current replica.
        moving: dict[int, list[_Partition]] = {}
        for p in self._busy:
            for r in p.future:
                if self._fetching(r):
                    moving.setdefault(r, []).append(p)
        for b, parts in moving.items():
            cap = int(self.broker_config(b, "replica.alter.log.dirs.io.max.bytes.per.second"))
            rate = min(self._brokers[b].disk_rate, float(cap)) / len(parts)
            for p in parts:
                flows.future[(id(p), b)] = rate
        return flows

    def _growth_of(self, flows: _Flows, p: _Partition, replica: int) -> float:
        """How fast ``replica`` of ``p`` gains bytes under ``flows``."""
        if replica == p.leader:
            return flows.growth.get(id(p), 0.0)
        return flows.follower.get((id(p), replica), 0.0)

    def _events(self, flows: _Flows) -> Iterator[float]:
        """Times at which something changes under ``flows``."""
        lag = self.replica_lag_time_max_s
        for p in flows.partitions.values():
            if p.leader == NO_LEADER:
                continue
            grow = flows.growth.get(id(p), 0.0)
            top = p.replica_bytes[p.leader]
            leading = self._fetching(p.leader)
            for r in p.replicas:
                if r == p.leader:
                    continue
                rate = flows.follower.get((id(p), r), 0.0)
                if p.replica_bytes[r] < top and rate > grow:
                    yield self._now + (top - p.replica_bytes[r]) / (rate - grow)
                keeps_up = self._fetching(r) and p.replica_bytes[r] >= top and rate >= grow
                if leading and r in p.isr and not keeps_up:
                    yield p.caught_up_at.get(r, self._now) + lag
            for r, future in p.future.items():
                rate = flows.future.get((id(p), r), 0.0)
                gain = rate - self._growth_of(flows, p, r)
                if gain > 0:
                    yield self._now + (p.replica_bytes[r] - future.bytes) / gain
        if self._next_balance_at is not None:
            yield self._next_balance_at

    def _flow(self, flows: _Flows, step: float) -> None:
        """Let ``step`` seconds of ``flows`` happen."""
        for p in flows.partitions.values():
            grow = flows.growth.get(id(p), 0.0)
            if p.leader != NO_LEADER:
                top = p.replica_bytes[p.leader] + grow * step
                for r in p.replicas:
                    if r == p.leader:
                        continue
                    rate = flows.follower.get((id(p), r), 0.0)
                    if rate <= 0:
                        continue
                    got = p.replica_bytes[r] + rate * step
                    # Float steps must not leave a replica a hair short of its leader.
                    p.replica_bytes[r] = top if got >= top - _slack(top) else got
                p.replica_bytes[p.leader] = top
                if grow > 0:
                    p.acked = max(p.acked, min(p.replica_bytes[r] for r in p.isr))
            for r, future in p.future.items():
                rate = flows.future.get((id(p), r), 0.0)
                got = future.bytes + rate * step
                current = p.replica_bytes[r]
                future.bytes = current if got >= current - _slack(current) else got


def _slack(value: float) -> float:
    """How far below ``value`` a float sum still counts as equal to it."""
    return max(1e-6, abs(value) * 1e-12)


class _Flows:
    """Rates in bytes per second for one stretch of time, keyed by ``id(partition)``."""

    __slots__ = ("follower", "future", "growth", "partitions")

    def __init__(self) -> None:
        self.growth: dict[int, float] = {}
        self.follower: dict[tuple[int, int], float] = {}
        self.future: dict[tuple[int, int], float] = {}
        self.partitions: dict[int, _Partition] = {}


_HANDLERS: Final[Mapping[type, Handler]] = MappingProxyType(
    {
        CreateTopic: ClusterModel._create_topic,
        CreatePartitions: ClusterModel._create_partitions,
        DeleteTopic: ClusterModel._delete_topic,
        AlterReassignment: ClusterModel._alter_reassignment,
        ElectLeader: ClusterModel._elect_leader,
        AlterConfigs: ClusterModel._alter_configs,
        KillBroker: ClusterModel._kill_broker,
        PauseBroker: ClusterModel._pause_broker,
        ReviveBroker: ClusterModel._revive_broker,
        SetSize: ClusterModel._set_size,
        Produce: ClusterModel._produce,
        SetByteRate: ClusterModel._set_byte_rate,
        SetProduceRate: ClusterModel._set_produce_rate,
        AlterReplicaLogDir: ClusterModel._alter_replica_log_dir,
    }
)

#: Every command type, for tests that check the table is complete.
COMMAND_TYPES: Final = tuple(_HANDLERS)


def _unknown_topic(what: str) -> Outcome:
    return Outcome(
        error_code=UNKNOWN_TOPIC_OR_PARTITION,
        message=f"This server does not host this topic-partition: {what}",
    )


def _unknown_broker(node_id: int) -> Outcome:
    return Outcome(error_code=BROKER_NOT_AVAILABLE, message=f"no broker {node_id}")


def _check_topic_name(name: str) -> Outcome | None:
    if (
        not name
        or len(name) > 249
        or name in (".", "..")
        or any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in name)
    ):
        return Outcome(
            error_code=INVALID_TOPIC_EXCEPTION,
            message=f"Topic name {name!r} is illegal: use 1-249 of [a-zA-Z0-9._-].",
        )
    return None


def _check_configs(configs: Mapping[str, str], resource_type: int) -> Outcome | None:
    known = DEFAULT_TOPIC_CONFIGS if resource_type == RESOURCE_TOPIC else DEFAULT_BROKER_CONFIGS
    for name, value in configs.items():
        if name not in known:
            return Outcome(error_code=INVALID_CONFIG, message=f"Unknown config {name!r}")
        if name in _INT_CONFIGS:
            try:
                number = int(value)
            except ValueError:
                return Outcome(
                    error_code=INVALID_CONFIG,
                    message=f"Invalid value {value} for configuration {name}: Not a number "
                    "of type LONG",
                )
            if name == "min.insync.replicas" and number < 1:
                return Outcome(
                    error_code=INVALID_CONFIG,
                    message=f"Invalid value {value} for configuration {name}: Value must be "
                    "at least 1",
                )
            if name.endswith("throttled.rate") and number < 0:
                return Outcome(
                    error_code=INVALID_CONFIG,
                    message=f"Invalid value {value} for configuration {name}: Value must be "
                    "at least 0",
                )
        elif name in _BOOL_CONFIGS and value.lower() not in ("true", "false"):
            return Outcome(
                error_code=INVALID_CONFIG,
                message=f"Invalid value {value} for configuration {name}: Expected value "
                "to be either true or false",
            )
        elif name in _LIST_CONFIGS and value not in ("", "*"):
            for item in value.split(","):
                part, sep, broker = item.strip().partition(":")
                if not (sep and part.isdigit() and broker.isdigit()):
                    return Outcome(
                        error_code=INVALID_CONFIG,
                        message=f"Invalid value {value} for configuration {name}: must be "
                        "'*' or a list of partition:broker pairs",
                    )
    return None


_Throttled = frozenset[tuple[int, int]] | None


def _throttled_set(value: str | None) -> _Throttled:
    """None: nothing throttled; an empty set: everything ('*')."""
    if not value:
        return None
    if value.strip() == "*":
        return frozenset()
    pairs = set()
    for item in value.split(","):
        part, _, broker = item.strip().partition(":")
        pairs.add((int(part), int(broker)))
    return frozenset(pairs)


def _is_throttled(
    throttled: frozenset[tuple[int, int]] | None, partition: int, broker: int
) -> bool:
    if throttled is None:
        return False
    return not throttled or (partition, broker) in throttled
