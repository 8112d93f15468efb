"""The thin driver of the reassignment executor: observes the cluster, feeds the
core, carries out its actions through the admin client and persists the core after
every step (docs/admin.md, "Reassigning partitions").

It never decides anything itself; the decisions are in ``_executor``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

import attrs

from ..._errors import BrokerConnectionError, RequestTimeoutError
from ..._types import TopicPartition
from .._admin_types import (
    AdminOperationError,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ElectionResult,
    ElectionType,
    LogDirDescription,
    PartitionReassignment,
    TopicDescription,
    TopicPartitionReplica,
)
from ._executor import (
    LIST_KEYS,
    RATE_KEYS,
    TERMINAL,
    Action,
    AlterLogDirs,
    Cancel,
    CancelRequested,
    CancelSent,
    ClusterObserved,
    ConfigChanged,
    ElectPreferred,
    ExecutorConfig,
    ExecutorCore,
    Input,
    LeadersElected,
    LogDirsAltered,
    ObservedPartition,
    Progress,
    ReadThrottles,
    ReassignmentError,
    RemoveThrottles,
    SetThrottles,
    Submit,
    Submitted,
    TargetChangeRequested,
    ThrottlesRead,
    ThrottlesRemoved,
    ThrottlesSet,
)
from ._plan import ReassignmentPlan

__all__ = [
    "ExecutorBusyError",
    "ReassignmentAdmin",
    "ReassignmentExecutor",
    "load_state",
    "observed_partitions",
    "partition_sizes",
    "perform",
    "request_cancel",
    "request_target_change",
]

log = logging.getLogger("coopconsumer.admin.reassign")


class ExecutorBusyError(ReassignmentError):
    """Another executor holds this state file's lock."""


class LogDirsAdmin(Protocol):
    """What :func:`partition_sizes` calls."""

    def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        *,
        partitions: Iterable[TopicPartition] | None = None,
        timeout_ms: float | None = None,
    ) -> dict[int, tuple[LogDirDescription, ...]]: ...


class ReassignmentAdmin(LogDirsAdmin, Protocol):
    """The admin calls the executor makes (:class:`~coopconsumer.admin.AdminClient`
    has them)."""

    def describe_topics(
        self, topics: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, TopicDescription]: ...

    def list_partition_reassignments(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]: ...

    def alter_partition_reassignments(
        self,
        targets: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: float | None = None,
    ) -> None: ...

    def describe_configs(
        self, resources: Iterable[ConfigResource], *, timeout_ms: float | None = None
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]: ...

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None: ...

    def elect_leaders(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        election_type: ElectionType = ElectionType.PREFERRED,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, ElectionResult]: ...

    def alter_replica_log_dirs(
        self, moves: Mapping[TopicPartitionReplica, str], *, timeout_ms: float | None = None
    ) -> None: ...


def load_state(path: str | os.PathLike[str]) -> ExecutorCore:
    """The executor persisted at ``path``."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ReassignmentError(f"cannot read the executor state {path}: {exc}") from exc
    return ExecutorCore.from_dict(data)


def state_json(data: Mapping[str, Any]) -> str:
    """The executor state as JSON with one move per line (diffable, and written by
    the C encoder: a pretty-printed state of 2,000 moves took about a second)."""
    head = {k: v for k, v in data.items() if k != "moves"}
    lines = ",\n  ".join(json.dumps(m, separators=(",", ":")) for m in data.get("moves", ()))
    return f'{json.dumps(head)[:-1]}, "moves": [\n  {lines}\n]}}\n'


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _requests_path(state: Path) -> Path:
    return state.with_name(state.name + ".requests")


def _lock_path(state: Path) -> Path:
    return state.with_name(state.name + ".lock")


@contextlib.contextmanager
def _flock(path: Path, *, blocking: bool) -> Iterator[IO[str] | None]:
    f = open(path, "a")  # noqa: SIM115 - held across the yield
    try:
        flags = fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB)
        try:
            fcntl.flock(f.fileno(), flags)
        except BlockingIOError:
            yield None
            return
        try:
            yield f
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    finally:
        f.close()


def _append_request(state: Path, request: Mapping[str, Any]) -> None:
    path = _requests_path(state)
    with _flock(path.with_name(path.name + ".lock"), blocking=True), open(path, "a") as f:
        f.write(json.dumps(request) + "\n")


def _take_requests(state: Path) -> list[dict[str, Any]]:
    path = _requests_path(state)
    if not path.exists():
        return []
    with _flock(path.with_name(path.name + ".lock"), blocking=True):
        lines = path.read_text().splitlines()
        path.unlink()
    return [json.loads(line) for line in lines if line.strip()]


def executor_running(state_path: str | os.PathLike[str]) -> bool:
    """Whether an executor holds ``state_path``'s lock now."""
    with _flock(_lock_path(Path(state_path)), blocking=False) as held:
        return held is None


def request_cancel(
    state_path: str | os.PathLike[str], partitions: Iterable[TopicPartition] | None = None
) -> None:
    """Ask the executor running on ``state_path`` to cancel ``partitions`` (None:
    everything not finished); it acts on its next step."""
    tps = None if partitions is None else [[tp.topic, tp.partition] for tp in partitions]
    _append_request(Path(state_path), {"cancel": tps})


def request_target_change(
    state_path: str | os.PathLike[str], tp: TopicPartition, replicas: Sequence[int]
) -> None:
    """Ask the executor running on ``state_path`` to change one partition's target."""
    _append_request(
        Path(state_path), {"change": [tp.topic, tp.partition, [int(r) for r in replicas]]}
    )


def _request_input(request: Mapping[str, Any]) -> Input:
    if "cancel" in request:
        tps = request["cancel"]
        return CancelRequested(
            None if tps is None else frozenset(TopicPartition(t, int(p)) for t, p in tps)
        )
    topic, partition, replicas = request["change"]
    return TargetChangeRequested(TopicPartition(topic, int(partition)), tuple(replicas))


class ReassignmentExecutor:
    """Runs one plan to its end through ``admin``, persisting its progress to
    ``state_path`` after every step (None: not persisted).

    ``clock`` gives the time recorded in the progress (wall-clock seconds by
    default); ``sleep`` waits between polls. ``checkpoint`` is called with a label
    before each observation, after each persist, and before and after every admin
    call that changes something; an exception it raises
    stops the executor right there (the tests kill it that way) and
    :meth:`resume` continues from the file.

    While it runs it holds a lock next to the state file; another process asks it to
    cancel or change targets through :func:`request_cancel` and
    :func:`request_target_change`.
    """

    def __init__(
        self,
        admin: ReassignmentAdmin,
        core: ExecutorCore,
        *,
        state_path: str | os.PathLike[str] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        poll_interval_s: float = 1.0,
        checkpoint: Callable[[str], None] | None = None,
        throttle_check_interval_s: float = 10.0,
    ) -> None:
        self.admin = admin
        self.core = core
        self.state_path = None if state_path is None else Path(state_path)
        self._clock = clock
        self._sleep = sleep
        self.poll_interval_s = poll_interval_s
        self._checkpoint = checkpoint or (lambda label: None)
        self._min_isr: dict[str, int] = {}
        self._started = False
        self._pending_config: ExecutorConfig | None = None
        #: How often the throttled brokers' rates are read back while moves copy.
        self.throttle_check_interval_s = throttle_check_interval_s
        self._throttles_checked_at = clock()

    @classmethod
    def create(
        cls,
        admin: ReassignmentAdmin,
        plan: ReassignmentPlan,
        config: ExecutorConfig | None = None,
        **kwargs: Any,
    ) -> ReassignmentExecutor:
        """A new executor for ``plan``; its state file (if any) is written at once."""
        executor = cls(admin, ExecutorCore(plan, config), **kwargs)
        executor.persist()
        return executor

    @classmethod
    def resume(
        cls, admin: ReassignmentAdmin, state_path: str | os.PathLike[str], **kwargs: Any
    ) -> ReassignmentExecutor:
        """The executor persisted at ``state_path``, to run on."""
        return cls(admin, load_state(state_path), state_path=state_path, **kwargs)

    # ------------------------------------------------------------------ running

    def run(
        self,
        *,
        on_progress: Callable[[Progress], None] | None = None,
        max_steps: int | None = None,
    ) -> Progress:
        """Step until the plan is finished (or ``max_steps`` polls); the progress.

        ``ExecutorBusyError`` when another executor runs on the same state file.
        Admin errors other than per-partition refusals propagate; the state file is
        consistent at every point, so :meth:`resume` continues.
        """
        with self._exclusive():
            steps = 0
            while not self.core.finished:
                self.step()
                steps += 1
                if on_progress is not None:
                    on_progress(self.core.progress())
                if self.core.finished or (max_steps is not None and steps >= max_steps):
                    break
                self._sleep(self.poll_interval_s)
        return self.core.progress()

    def step(self) -> None:
        """One round: take pending requests, observe, decide, act, persist."""
        if not self._started:
            self._started = True
            self._act(self.core.start(self._clock()))
            if self._pending_config is not None:
                config, self._pending_config = self._pending_config, None
                self.feed(ConfigChanged(config))
        if self.state_path is not None:
            for request in _take_requests(self.state_path):
                try:
                    self.feed(_request_input(request))
                except ReassignmentError as exc:
                    log.warning("request %s refused: %s", request, exc)
        if self.core.finished:
            return
        self._checkpoint("before observe")
        observed = self.observe()
        self.feed(ClusterObserved(observed, throttle_rates=self._throttle_rates()))

    def feed(self, event: Input) -> None:
        """Give the core one input and carry out what it decides."""
        actions = self.core.handle(event, self._clock())
        self.persist()
        self._checkpoint(f"persisted {type(event).__name__}")
        self._act(actions)

    def cancel(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Cancel in this process: queued moves are dropped, in-flight ones cancelled
        through the API (Kafka reverts them)."""
        self.feed(CancelRequested(None if partitions is None else frozenset(partitions)))

    def change_target(self, tp: TopicPartition, replicas: Sequence[int]) -> None:
        """Change one partition's target (the rule for an in-flight one)."""
        self.feed(TargetChangeRequested(tp, tuple(replicas)))

    def change_config(self, config: ExecutorConfig) -> None:
        """Change the window, per-broker cap, throttle or flags from now on (a new
        throttle rate is set on the brokers at once). Before :meth:`run` starts, the
        change waits for it (and for its lock)."""
        if not self._started:
            self._pending_config = config
            return
        self.feed(ConfigChanged(config))

    def persist(self) -> None:
        if self.state_path is not None:
            _write_atomically(self.state_path, state_json(self.core.to_dict()))

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        if self.state_path is None:
            yield
            return
        with _flock(_lock_path(self.state_path), blocking=False) as held:
            if held is None:
                raise ExecutorBusyError(f"another executor runs on {self.state_path}")
            yield

    # ------------------------------------------------------------------ I/O

    def observe(self) -> dict[TopicPartition, ObservedPartition]:
        """The plan's partitions as the cluster shows them."""
        topics = sorted({m.topic for m in self.core.plan.moves})
        # Reassignments first, Metadata second: a move that ends between the two reads
        # then shows as still moving, never as its old replicas without a reassignment.
        moving = self.admin.list_partition_reassignments()
        try:
            described = self.admin.describe_topics(topics)
        except AdminOperationError as exc:
            described = dict(exc.completed or {})  # deleted topics: their moves fail
        self._learn_min_isr([t for t in described if t not in self._min_isr])
        wanted = set(self.core.plan.by_partition())
        observed = observed_partitions(described, moving, self._min_isr)
        observed = {tp: p for tp, p in observed.items() if tp in wanted}
        return with_log_dirs(self.admin, self.core, observed)

    def _throttle_rates(self) -> dict[int, dict[str, str | None]] | None:
        """The throttled brokers' rates, read at most every
        ``throttle_check_interval_s`` (None when not read this step)."""
        brokers = self.core.throttled_brokers()
        now = self._clock()
        if not brokers or now - self._throttles_checked_at < self.throttle_check_interval_s:
            return None
        self._throttles_checked_at = now
        read = read_throttles(self.admin, ReadThrottles(topics=(), brokers=brokers))
        return {b: dict(r) for b, r in read.rates.items()}

    def _learn_min_isr(self, topics: Sequence[str]) -> None:
        if not topics:
            return
        resources = [ConfigResource(ConfigResourceType.TOPIC, t) for t in topics]
        try:
            configs = self.admin.describe_configs(resources)
        except AdminOperationError as exc:
            configs = dict(exc.completed or {})
        for resource, entries in configs.items():
            entry = entries.get("min.insync.replicas")
            if entry is not None and entry.value is not None:
                self._min_isr[resource.name] = int(entry.value)

    def _act(self, actions: list[Action]) -> None:
        for action in actions:
            label = type(action).__name__
            self._checkpoint(f"before {label}")
            result = self._perform(action)
            self._checkpoint(f"after {label}")
            if result is not None:
                self.feed(result)

    def _perform(self, action: Action) -> Input | None:
        return perform(self.admin, action)


def perform(admin: ReassignmentAdmin, action: Action) -> Input | None:
    """Carry out one executor action through ``admin``; the input that reports its
    result (None for none). Per-partition refusals are part of the result; other admin
    errors propagate."""
    if isinstance(action, Submit):
        return Submitted(
            frozenset(action.targets),
            _refusals(lambda: admin.alter_partition_reassignments(action.targets)),
        )
    if isinstance(action, Cancel):
        targets: dict[TopicPartition, Sequence[int] | None] = dict.fromkeys(action.partitions)
        return CancelSent(
            frozenset(action.partitions),
            _refusals(lambda: admin.alter_partition_reassignments(targets)),
        )
    if isinstance(action, ReadThrottles):
        return read_throttles(admin, action)
    if isinstance(action, SetThrottles):
        admin.incremental_alter_configs(_throttle_changes(action))
        return ThrottlesSet()
    if isinstance(action, RemoveThrottles):
        admin.incremental_alter_configs(_throttle_changes(action))
        _delete_emptied_lists(admin, action)
        return ThrottlesRemoved()
    if isinstance(action, ElectPreferred):
        return LeadersElected(_elect(admin, action.partitions))
    if isinstance(action, AlterLogDirs):
        return _alter_dirs(admin, action)
    raise TypeError(f"not an executor action: {action!r}")


def _alter_dirs(admin: ReassignmentAdmin, action: AlterLogDirs) -> LogDirsAltered:
    moves = {
        TopicPartitionReplica(tp.topic, tp.partition, b): d for (tp, b), d in action.dirs.items()
    }
    refused: dict[tuple[TopicPartition, int], str] = {}
    try:
        admin.alter_replica_log_dirs(moves)
    except AdminOperationError as exc:
        for replica, error in exc.errors.items():
            name = getattr(error, "name", type(error).__name__)
            if isinstance(replica, TopicPartitionReplica) and name != "REPLICA_NOT_AVAILABLE":
                key = (TopicPartition(replica.topic, replica.partition), replica.broker_id)
                refused[key] = f"{name}: {error}"
    return LogDirsAltered(frozenset(action.dirs), refused)


def with_log_dirs(
    admin: ReassignmentAdmin,
    core: ExecutorCore,
    observed: Mapping[TopicPartition, ObservedPartition],
) -> dict[TopicPartition, ObservedPartition]:
    """``observed`` with the log directories (DescribeLogDirs) of the partitions whose
    moves name directories and are not over, asking only the brokers concerned."""
    asked: dict[TopicPartition, set[int]] = {}
    for move, state, _ in core.moves():
        if move.target_dirs and state not in TERMINAL and move.tp in observed:
            asked[move.tp] = set(move.target_dirs)
    out = dict(observed)
    if not asked:
        return out
    brokers = sorted(set().union(*asked.values()))
    try:
        described = admin.describe_log_dirs(brokers, partitions=sorted(asked))
    except AdminOperationError as exc:
        described = dict(exc.completed or {})  # a broker that is down: not done yet
    dirs: dict[TopicPartition, dict[int, str]] = {}
    futures: dict[TopicPartition, dict[int, str]] = {}
    for broker, per_dir in described.items():
        for d in per_dir:
            for r in d.replicas:
                tp = TopicPartition(r.topic, r.partition)
                (futures if r.is_future else dirs).setdefault(tp, {})[broker] = d.path
    for tp in asked:
        out[tp] = attrs.evolve(out[tp], log_dirs=dirs.get(tp, {}), future_dirs=futures.get(tp, {}))
    return out


def read_throttles(admin: ReassignmentAdmin, action: ReadThrottles) -> ThrottlesRead:
    """The brokers' own throttle rates (a rate from the cluster-wide default or
    Kafka's default counts as not set: deleting ours brings it back) and the topics'
    throttled replica lists."""
    configs = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, t) for t in action.topics]
    )
    unreachable: set[int] = set()
    for b in action.brokers:
        # One broker at a time: each answers for itself, and one that is down (a failed
        # broker being healed) must not stop the others.
        resource = ConfigResource(ConfigResourceType.BROKER, str(b))
        try:
            configs.update(admin.describe_configs([resource]))
        except (BrokerConnectionError, RequestTimeoutError) as exc:
            log.info("throttles: broker %d cannot be asked (%s); not throttled", b, exc)
            unreachable.add(b)
    rates: dict[int, dict[str, str | None]] = {}
    lists: dict[str, dict[str, tuple[str, ...]]] = {}
    for resource, entries in configs.items():
        if resource.type is ConfigResourceType.BROKER:
            rates[int(resource.name)] = {
                key: entry.value
                if (entry := entries.get(key)) is not None
                and entry.source is ConfigSource.DYNAMIC_BROKER_CONFIG
                else None
                for key in RATE_KEYS
            }
        else:
            lists[resource.name] = {
                key: tuple(
                    item.strip()
                    for item in (getattr(entries.get(key), "value", None) or "").split(",")
                    if item.strip()
                )
                for key in LIST_KEYS
            }
    return ThrottlesRead(rates=rates, replicas=lists, unreachable=frozenset(unreachable))


def _elect(
    admin: ReassignmentAdmin, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, str]:
    try:
        results = admin.elect_leaders(partitions)
    except AdminOperationError as exc:
        out = {
            tp: f"{getattr(e, 'name', type(e).__name__)}: {e}"
            for tp, e in exc.errors.items()
            if isinstance(tp, TopicPartition)
        }
        done = exc.completed if isinstance(exc.completed, Mapping) else {}
        out.update({tp: r.value.replace("_", " ") for tp, r in done.items()})
        return out
    return {tp: r.value.replace("_", " ") for tp, r in results.items()}


def _refusals(call: Callable[[], None]) -> dict[TopicPartition, str]:
    try:
        call()
    except AdminOperationError as exc:
        return {
            tp: f"{getattr(e, 'name', type(e).__name__)}: {e}"
            for tp, e in exc.errors.items()
            if isinstance(tp, TopicPartition)
        }
    return {}


def observed_partitions(
    described: Mapping[str, TopicDescription],
    moving: Mapping[TopicPartition, PartitionReassignment],
    min_insync_replicas: Mapping[str, int] | None = None,
) -> dict[TopicPartition, ObservedPartition]:
    """Every partition of ``described`` as the executor
    core takes it: Metadata's ISR and leader, ListPartitionReassignments' replicas,
    adding and removing when it is moving."""
    out: dict[TopicPartition, ObservedPartition] = {}
    for name, topic in described.items():
        for p in topic.partitions:
            tp = TopicPartition(name, p.partition)
            r = moving.get(tp)
            out[tp] = ObservedPartition(
                replicas=r.replicas if r else p.replicas,
                isr=p.isr,
                leader=p.leader,
                adding=r.adding if r else (),
                removing=r.removing if r else (),
                min_insync_replicas=(min_insync_replicas or {}).get(name, 1),
            )
    return out


def partition_sizes(admin: LogDirsAdmin) -> dict[TopicPartition, int]:
    """Each partition's size: its largest replica in DescribeLogDirs (brokers that do
    not answer are left out; their partitions count 0)."""
    try:
        dirs = admin.describe_log_dirs()
    except AdminOperationError as exc:
        dirs = dict(exc.completed or {})
    sizes: dict[TopicPartition, int] = {}
    for per_broker in dirs.values():
        for d in per_broker:
            for r in d.replicas:
                if not r.is_future:
                    tp = TopicPartition(r.topic, r.partition)
                    sizes[tp] = max(sizes.get(tp, 0), r.size_bytes)
    return sizes


def _delete_emptied_lists(admin: ReassignmentAdmin, action: RemoveThrottles) -> None:
    """DELETE the throttled-replica lists that were absent before the run and are
    empty now: Kafka keeps a list SUBTRACTed to nothing as an empty value, which
    kafka-configs shows as set. A list someone else added entries to meanwhile is
    not empty, so it stays."""
    if not action.absent_before:
        return
    resources = [ConfigResource(ConfigResourceType.TOPIC, t) for t in action.absent_before]
    try:
        configs = admin.describe_configs(resources)
    except AdminOperationError as exc:
        configs = dict(exc.completed or {})  # a deleted topic has nothing to restore
    changes: dict[ConfigResource, list[AlterConfigOp]] = {}
    for resource, entries in configs.items():
        for key in action.absent_before.get(resource.name, ()):
            entry = entries.get(key)
            if (
                entry is not None
                and entry.source is not ConfigSource.DEFAULT_CONFIG
                and not (entry.value or "").strip()
            ):
                changes.setdefault(resource, []).append(
                    AlterConfigOp(key, AlterConfigOpType.DELETE)
                )
    if changes:
        admin.incremental_alter_configs(changes)


def _throttle_changes(
    action: SetThrottles | RemoveThrottles,
) -> dict[ConfigResource, list[AlterConfigOp]]:
    remove = isinstance(action, RemoveThrottles)
    list_op = AlterConfigOpType.SUBTRACT if remove else AlterConfigOpType.APPEND
    changes: dict[ConfigResource, list[AlterConfigOp]] = {}
    for key, entries in zip(
        LIST_KEYS, (action.leader_replicas, action.follower_replicas), strict=True
    ):
        for topic, items in entries.items():
            changes.setdefault(ConfigResource(ConfigResourceType.TOPIC, topic), []).append(
                AlterConfigOp(key, list_op, ",".join(items))
            )
    for broker in action.brokers:
        ops = changes.setdefault(ConfigResource(ConfigResourceType.BROKER, str(broker)), [])
        for key in RATE_KEYS:
            if isinstance(action, SetThrottles):
                ops.append(AlterConfigOp(key, AlterConfigOpType.SET, str(action.rate)))
            elif (previous := action.rates[broker].get(key)) is not None:
                ops.append(AlterConfigOp(key, AlterConfigOpType.SET, previous))
            else:
                ops.append(AlterConfigOp(key, AlterConfigOpType.DELETE))
    return changes
