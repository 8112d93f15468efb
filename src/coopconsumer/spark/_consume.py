"""The consume job of ``coopconsumer.spark``: N Spark tasks, each a group member.

Driver side, :func:`run_consume_job`: validate the configuration, read the end offsets
of the topics (``_io._fetcher.end_offsets``), run one Spark task per member and turn
their statistics into a DataFrame. Executor side, ``_Member``: a cooperative-sticky
:class:`coopconsumer.Consumer` that hands batches to the sink, commits each batch only
after the sink returned, and stops once the group's committed offsets reached the end
offsets of every partition.

Imports pyspark, the public ``Consumer`` and the end-offset helper of ``_io``; never
``confluent_kafka`` itself.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs

from .._config import ConsumerConfig
from .._consumer import Consumer
from .._errors import (
    BrokerConnectionError,
    CommitFailedError,
    ConfigurationError,
    CoopConsumerError,
    KafkaError,
    RebalanceInProgressError,
    RequestTimeoutError,
)
from .._io._fetcher import end_offsets
from .._listener import RebalanceListener
from .._metrics import max_reading
from .._types import TopicPartition
from ..assignors import RebalanceProtocol, load_assignors, select_rebalance_protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .._io._fetcher import Record as Message

__all__ = ["MemberStats", "Sink", "run_consume_job"]

log = logging.getLogger("coopconsumer.spark")

#: The sink: called on the executor with each batch of records (confluent-kafka
#: ``Message`` objects); its return value is ignored.
Sink = Callable[["list[Message]"], object]

#: How often an idle member asks the group coordinator for the committed offsets.
_CHECK_INTERVAL_S: Final = 0.5
#: consume() calls in a row that raised before the member gives up (a fatal error is
#: raised by every call; one the group reported only once).
_MAX_CONSECUTIVE_ERRORS: Final = 5
#: How often the member samples ``rebalance-latency-max`` (a windowed metric).
_SAMPLE_INTERVAL_S: Final = 1.0

#: The classic protocol's assignor setting (not set with group.protocol=consumer).
_STRATEGY: Final = "partition.assignment.strategy"
# Settings the job needs; filled in when the caller did not give them (under either
# spelling), refused when the caller gave something else (see _job_config).
_DEFAULTS: Final[dict[str, tuple[str, object]]] = {
    "partition.assignment.strategy": ("partition_assignment_strategy", "cooperative-sticky"),
    "enable.auto.commit": ("enable_auto_commit", False),
    "auto.offset.reset": ("auto_offset_reset", "earliest"),
}


def _partition_names(partitions: Iterable[TopicPartition]) -> tuple[str, ...]:
    return tuple(str(tp) for tp in sorted(partitions))


@attrs.frozen(kw_only=True)
class MemberStats:
    """What one member attempt of :func:`run_consume_job` did: one row of its result.

    ``member`` is the member's index (its Spark partition, ``0 .. members-1``) and
    ``attempt`` Spark's attempt number of that task (0 first, 1 for the first retry).
    ``records`` were handed to the sink in ``batches`` calls; ``skipped`` records were
    fetched but not handed over because they lie at or past the end offsets of the job.
    ``rebalances`` is the ``rebalance-total`` metric (successful rebalances this member
    took part in, the first join included). ``rebalance_latency_avg_ms`` is the mean
    over all of them (``rebalance-latency-total / rebalance-total``) and
    ``rebalance_latency_max_ms`` the largest ``rebalance-latency-max`` sampled during the
    run (NaN without a rebalance). ``failed_commits`` counts offsets of batches the sink
    took that could not be committed: refused (e.g. ``CommitFailedError``) or abandoned
    because their partitions were lost; those records are delivered again.
    ``assigned`` are the partitions the member owned when it stopped (``"topic-3"``),
    ``member_id`` its last group member id, ``seconds`` the attempt's wall time.
    """

    #: The DataFrame schema of :meth:`as_row`'s tuples, in Spark DDL.
    SCHEMA: ClassVar[str] = (
        "member INT, attempt INT, member_id STRING, records LONG, skipped LONG, "
        "batches LONG, rebalances LONG, rebalance_latency_avg_ms DOUBLE, "
        "rebalance_latency_max_ms DOUBLE, failed_commits LONG, assigned ARRAY<STRING>, "
        "seconds DOUBLE"
    )

    member: int
    attempt: int
    member_id: str
    records: int
    skipped: int
    batches: int
    rebalances: int
    rebalance_latency_avg_ms: float
    rebalance_latency_max_ms: float
    failed_commits: int
    assigned: tuple[str, ...]
    seconds: float

    def as_row(self) -> tuple[Any, ...]:
        """The values in :attr:`SCHEMA` order (``assigned`` as a list)."""
        return (
            self.member,
            self.attempt,
            self.member_id,
            self.records,
            self.skipped,
            self.batches,
            self.rebalances,
            self.rebalance_latency_avg_ms,
            self.rebalance_latency_max_ms,
            self.failed_commits,
            list(self.assigned),
            self.seconds,
        )


def _given(config: Mapping[str, object], *names: str) -> bool:
    return any(isinstance(k, str) and k.strip() in names for k in config)


def _job_config(config: Mapping[str, object]) -> tuple[dict[str, object], ConsumerConfig]:
    """The members' configuration: ``config`` plus the job's required settings."""
    if not isinstance(config, Mapping):
        raise ConfigurationError(f"config must be a mapping, not {type(config).__name__}")
    merged = dict(config)
    for key, (alias, value) in _DEFAULTS.items():
        if key != _STRATEGY and not _given(merged, key, alias):
            merged[key] = value
    parsed = ConsumerConfig.from_mapping(merged)
    alias, strategy = _DEFAULTS[_STRATEGY]
    # With group.protocol=consumer (KIP-848) the broker assigns and every rebalance is
    # incremental: no client-side assignor is filled in (setting one is refused).
    if parsed.group_protocol != "consumer" and not _given(merged, _STRATEGY, alias):
        merged[_STRATEGY] = strategy
        parsed = ConsumerConfig.from_mapping(merged)
    parsed.require_group_id()
    if parsed.enable_auto_commit:
        raise ConfigurationError(
            "the consume job commits each batch after the sink returned: "
            "enable.auto.commit must be false"
        )
    if parsed.auto_offset_reset != "earliest":
        raise ConfigurationError(
            "the consume job reads every record up to the end offsets: auto.offset.reset "
            f"must be 'earliest', not {parsed.auto_offset_reset!r}"
        )
    if parsed.group_protocol == "consumer":
        return merged, parsed
    protocol = select_rebalance_protocol(
        load_assignors(list(parsed.partition_assignment_strategy))  # type: ignore[arg-type]
    )
    if protocol is not RebalanceProtocol.COOPERATIVE:
        raise ConfigurationError(
            "the consume job needs cooperative rebalancing: set "
            "partition.assignment.strategy to 'cooperative-sticky' (or assignors that all "
            "support COOPERATIVE)"
        )
    return merged, parsed


def _topic_names(topics: Iterable[str] | str) -> tuple[str, ...]:
    names = [topics] if isinstance(topics, str) else list(topics)
    if not names or not all(isinstance(t, str) and t for t in names):
        raise ConfigurationError(f"topics must be one or more topic names, not {topics!r}")
    return tuple(sorted(set(names)))


def _positive(name: str, value: object, *, integer: bool = False) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (integer and not isinstance(value, int))
        or value <= 0
    ):
        what = "int" if integer else "number"
        raise ConfigurationError(f"{name} must be a positive {what}: {value!r}")


def run_consume_job(
    spark: SparkSession,
    config: Mapping[str, object],
    topics: Iterable[str] | str,
    sink: Sink,
    *,
    members: int | None = None,
    batch_size: int = 500,
    poll_timeout_s: float = 0.2,
    timeout_s: float = 600.0,
) -> DataFrame:
    """Consume ``topics`` up to their current end offsets with ``members`` Spark tasks,
    each a member of the consumer group ``config["group.id"]``; return their statistics.

    When the job starts the driver reads the end offset of every partition of
    ``topics``. Each task is a :class:`coopconsumer.Consumer` with
    ``partition.assignment.strategy=cooperative-sticky`` and
    ``enable.auto.commit=false`` (filled in when ``config`` does not set them; setting
    anything else is a ``ConfigurationError``, as is an ``auto.offset.reset`` other
    than ``earliest``). With ``group.protocol=consumer`` (KIP-848) the broker assigns
    and no assignor is filled in; its rebalances are incremental too. It consumes its
    partitions from the group's committed offsets, calls ``sink(batch)`` on the
    executor with each batch of records, and only after the
    sink returned commits the batch's offsets synchronously. Records at or past the end
    offsets are not handed to the sink and their partition is paused. A member stops
    once the group's committed offsets reached the end offsets of every partition.

    ``sink`` gets a ``list`` of confluent-kafka ``Message`` objects, exactly as
    :meth:`coopconsumer.Consumer.consume` returns them (``topic()``, ``partition()``,
    ``offset()``, ``key()``, ``value()``, ``headers()``, ``timestamp()``), at most
    ``batch_size`` of them, never empty. It must be picklable (it is shipped to the
    executors) and must return within ``max.poll.interval.ms``. What it returns is
    ignored; what it raises fails the task, and Spark retries it.

    Delivery: at-least-once; exactly once when no task fails. A batch is committed only
    after the sink returned, and offsets still waiting for a commit when a cooperative
    rebalance revokes their partitions are committed in ``on_partitions_revoked``, so a
    hand-over between live members repeats nothing. A failed task leaves the group; its
    partitions move to the other members (cooperative rebalance), and the records it
    handed to the sink without committing them are delivered again. The retried task
    (a new Python worker) rejoins and takes partitions back in a cooperative rebalance.
    Commits refused during a rebalance are retried; an error the group reports from
    ``consume()`` (e.g. a failed SyncGroup, after which the consumer rejoins) is logged
    and the member carries on, but five such errors in a row fail the task.

    Run at most as many members as the application has executor cores: tasks that do
    not get a core wait, and join after the others have finished the work. Needs a
    classic (not Spark Connect) session; executors need this package and network access
    to the brokers.

    Returns a DataFrame (already computed: the job ran exactly once) with one row per
    member attempt that finished, in :attr:`MemberStats.SCHEMA`; a failed attempt has
    no row, its retry's row has ``attempt >= 1``.

    Raises ``ConfigurationError`` for invalid arguments (nothing ran), ``KafkaError`` if
    a topic does not exist, and Spark's own exception when a task failed beyond its
    retries: a sink exception, or the job timeout -- after ``timeout_s`` seconds from the
    start (a shared deadline; retries do not restart it) a member raises
    ``RequestTimeoutError`` naming the partitions whose committed offsets are short of
    the end offsets.
    """
    merged, parsed = _job_config(config)
    names = _topic_names(topics)
    if not callable(sink):
        raise ConfigurationError(f"sink must be callable, not {sink!r}")
    _positive("batch_size", batch_size, integer=True)
    _positive("poll_timeout_s", poll_timeout_s)
    _positive("timeout_s", timeout_s)
    if members is not None:
        _positive("members", members, integer=True)

    from pyspark import cloudpickle

    try:
        cloudpickle.dumps(sink)  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise ConfigurationError(f"sink must be picklable to run on executors: {exc}") from exc

    started = time.time()
    ends = end_offsets(
        parsed.fetcher_config(), names, timeout_s=parsed.default_api_timeout_ms / 1000.0
    )
    context = spark.sparkContext
    count = members if members is not None else max(1, min(context.defaultParallelism, len(ends)))
    if count > context.defaultParallelism:
        log.warning(
            "consume job: %d members but the application has about %d task slots; the "
            "members without a slot start only after the others finished",
            count,
            context.defaultParallelism,
        )
    plan = _Plan(
        config=merged,
        topics=names,
        ends=ends,
        sink=sink,
        batch_size=batch_size,
        poll_timeout_s=float(poll_timeout_s),
        deadline=started + timeout_s,
        timeout_s=float(timeout_s),
    )
    log.info(
        "consume job: %d member(s), group %s, %d partition(s), %d record(s) to the end offsets",
        count,
        parsed.group_id,
        len(ends),
        sum(max(0, high - low) for low, high in ends.values()),
    )
    rows = (
        context.parallelize(range(count), count)
        .mapPartitionsWithIndex(functools.partial(_run_task, plan))
        .collect()
    )
    rows.sort(key=lambda row: (row[0], row[1]))
    return spark.createDataFrame(rows, schema=MemberStats.SCHEMA)


@attrs.frozen(kw_only=True)
class _Plan:
    """Everything a member task needs; pickled to the executors."""

    config: dict[str, object]
    topics: tuple[str, ...]
    #: (low, high) watermarks per partition when the job started.
    ends: dict[TopicPartition, tuple[int, int]]
    sink: Sink
    batch_size: int
    poll_timeout_s: float
    #: Wall-clock (``time.time()``) end of the job, shared by every attempt.
    deadline: float
    timeout_s: float


def _run_task(plan: _Plan, index: int, _items: Iterator[int]) -> Iterator[tuple[Any, ...]]:
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    yield _Member(plan, index, attempt).run().as_row()


def _reached(committed: int | None, low: int, high: int) -> bool:
    """Whether a partition is done: committed at its end, or empty (nothing to read)."""
    return high <= low or (committed is not None and committed >= high)


class _Member(RebalanceListener):
    """One member attempt. Also its own rebalance listener: offsets of batches the sink
    took but that are not committed yet (``_pending``) are committed when their
    partitions are revoked, and forgotten when they are lost."""

    def __init__(self, plan: _Plan, index: int, attempt: int) -> None:
        self._plan = plan
        self._index = index
        self._attempt = attempt
        self._ends = {tp: high for tp, (_low, high) in plan.ends.items()}
        self._pending: dict[TopicPartition, int] = {}
        self._consumer: Consumer | None = None
        self._records = 0
        self._skipped = 0
        self._batches = 0
        self._failed_commits = 0
        self._latency_max = math.nan
        self._short: list[str] = []

    # ------------------------------------------------------------------ listener

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        pass

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        # Still a member of the generation (KIP-429: a cooperative revocation runs after
        # SyncGroup), so the offsets of what the sink took can be committed before the
        # next owner starts: a hand-over between live members repeats nothing.
        offsets = {tp: self._pending.pop(tp) for tp in partitions if tp in self._pending}
        if offsets and self._consumer is not None:
            try:
                self._consumer.commit(offsets)
            except CoopConsumerError as exc:
                # Raising here would surface from the next consume(): log instead.
                self._failed_commits += 1
                log.warning(
                    "member %d: commit before revoking %s failed (%s); their records are "
                    "consumed again by the next owner",
                    self._index,
                    ", ".join(_partition_names(offsets)),
                    exc,
                )

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        # Another member may own them already: a commit would fail; the next owner
        # consumes these records again (at-least-once).
        dropped = [tp for tp in partitions if self._pending.pop(tp, None) is not None]
        if dropped:
            self._failed_commits += 1
            log.warning(
                "member %d: lost %s before committing what the sink took; their records "
                "are consumed again by the next owner",
                self._index,
                ", ".join(_partition_names(dropped)),
            )

    # ------------------------------------------------------------------ run

    def run(self) -> MemberStats:
        started = time.monotonic()
        consumer = Consumer(self._plan.config)
        self._consumer = consumer
        try:
            consumer.subscribe(list(self._plan.topics), listener=self)
            self._loop(consumer)
            metrics = consumer.metrics()
            assigned = consumer.assignment()
            member_id = consumer.group_metadata().member_id
        except BaseException:
            try:
                consumer.close()
            except Exception as exc:  # the original error matters more
                log.warning("member %d: close after a failure failed: %s", self._index, exc)
            raise
        consumer.close()
        rebalances = int(metrics["rebalance-total"])
        latency_max = max_reading(self._latency_max, metrics["rebalance-latency-max"])
        return MemberStats(
            member=self._index,
            attempt=self._attempt,
            member_id=member_id,
            records=self._records,
            skipped=self._skipped,
            batches=self._batches,
            rebalances=rebalances,
            rebalance_latency_avg_ms=(
                metrics["rebalance-latency-total"] / rebalances if rebalances else math.nan
            ),
            rebalance_latency_max_ms=latency_max if rebalances else math.nan,
            failed_commits=self._failed_commits,
            assigned=_partition_names(assigned),
            seconds=time.monotonic() - started,
        )

    def _loop(self, consumer: Consumer) -> None:
        plan = self._plan
        next_check = 0.0
        next_sample = time.monotonic() + _SAMPLE_INTERVAL_S
        errors = 0  # consume() calls in a row that raised
        while True:
            if time.time() >= plan.deadline:
                if not self._all_committed(consumer):  # also names what is missing
                    raise RequestTimeoutError(
                        f"consume job timed out after {plan.timeout_s:.0f}s (member "
                        f"{self._index}, attempt {self._attempt}): committed offsets short of "
                        f"the end offsets: {', '.join(self._short) or 'unknown'}"
                    )
                return
            try:
                messages = consumer.consume(plan.batch_size, plan.poll_timeout_s)
            except CoopConsumerError as exc:
                # An error the group reported (e.g. a failed SyncGroup): the consumer
                # rejoins by itself and carries on. A fatal one is raised by every call.
                errors += 1
                if errors >= _MAX_CONSECUTIVE_ERRORS:
                    raise
                log.warning("member %d: %s (the consumer carries on)", self._index, exc)
                continue
            errors = 0
            batch = self._take(consumer, messages)
            if batch:
                plan.sink(batch)
                self._batches += 1
                self._records += len(batch)
                for message in batch:
                    tp = TopicPartition(message.topic(), message.partition())  # type: ignore[arg-type]
                    self._pending[tp] = message.offset() + 1  # type: ignore[operator]
                done = [tp for tp, offset in self._pending.items() if offset >= self._ends[tp]]
                if done:
                    consumer.pause(done)
            if self._pending:
                self._commit(consumer)
            now = time.monotonic()
            if now >= next_sample:
                next_sample = now + _SAMPLE_INTERVAL_S
                self._latency_max = max_reading(
                    self._latency_max, consumer.metrics()["rebalance-latency-max"]
                )
            if not batch and not self._pending and now >= next_check:
                next_check = now + _CHECK_INTERVAL_S
                if self._all_committed(consumer):
                    return

    def _take(self, consumer: Consumer, messages: list[Message]) -> list[Message]:
        """The records before the end offsets; pause the partitions that went past."""
        ends = self._ends
        kept: list[Message] = []
        past: set[TopicPartition] = set()
        for message in messages:
            tp = TopicPartition(message.topic(), message.partition())  # type: ignore[arg-type]
            offset: int = message.offset()  # type: ignore[assignment]
            if offset < ends.get(tp, 0):
                kept.append(message)
            else:
                # A partition created after the job started has no end offset: none of
                # its records belong to the job.
                past.add(tp)
        if past:
            self._skipped += len(messages) - len(kept)
            consumer.pause(past)
        return kept

    def _commit(self, consumer: Consumer) -> None:
        offsets = dict(self._pending)
        try:
            consumer.commit(offsets)
        except RebalanceInProgressError:
            # Retried after the next consume(), which completes the rebalance (and
            # commits for revoked partitions in on_partitions_revoked).
            return
        except CommitFailedError as exc:
            # The generation is gone and the partitions may have moved: these records
            # are consumed again from the last commit (at-least-once).
            self._failed_commits += 1
            log.warning(
                "member %d: commit failed, records will be redelivered: %s", self._index, exc
            )
            self._forget(offsets)
            return
        except (KafkaError, BrokerConnectionError, RequestTimeoutError) as exc:
            if not exc.retriable:
                raise
            log.info("member %d: commit failed, retrying: %s", self._index, exc)
            return
        self._forget(offsets)

    def _forget(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Drop ``offsets`` (committed, or given up) from what awaits a commit; an entry
        that no longer holds the same offset is left alone."""
        for tp, offset in offsets.items():
            if self._pending.get(tp) == offset:
                del self._pending[tp]

    def _all_committed(self, consumer: Consumer) -> bool:
        try:
            committed = consumer.committed(self._plan.ends.keys())
        except CoopConsumerError as exc:
            if not exc.retriable:
                raise
            log.info("member %d: reading committed offsets failed: %s", self._index, exc)
            return False
        self._short = [
            f"{tp} at {committed.get(tp)} of {high}"
            for tp, (low, high) in sorted(self._plan.ends.items())
            if not _reached(committed.get(tp), low, high)
        ]
        return not self._short
