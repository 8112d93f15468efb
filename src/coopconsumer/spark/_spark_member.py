"""The executor side of the consume job: one Spark task, one group member.

``Member`` is a cooperative-sticky :class:`coopconsumer.Consumer` subscribed to the
job's topics. Its loop is *consume, deliver, commit*: each batch goes to the job's
``BatchDelivery`` (the per-batch commit hook: :class:`AtLeastOnceDelivery` calls the
sink and then commits the batch's offsets). In an exactly-once job (``Plan.exactly_once``)
the member is a :class:`coopconsumer.TransactionalProcessor` instead, stepped by the
same loop: the sink's output records and the batch's offsets commit in one Kafka
transaction, fenced by the member's generation (docs/spark.md, "The exactly-once
job"). Between batches the member reports its statistics to the driver over the
control channel (``_control``), and it stops

* in a bounded job (``Plan.ends`` set), once the group's committed offsets reached the
  end offsets the driver read at the start, or at the job's deadline;
* in a long-running job, when the driver says stop (or hangs up).

Imports the public ``Consumer`` and ``TransactionalProcessor``, the control channel and
small helpers; never pyspark at import time (``run_task`` reads the TaskContext) and
never ``confluent_kafka``.
"""

from __future__ import annotations

import abc
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

import attrs

from .._consumer import Consumer
from .._errors import (
    BrokerConnectionError,
    CommitFailedError,
    CoopConsumerError,
    KafkaError,
    RebalanceInProgressError,
    RequestTimeoutError,
    TransactionError,
)
from .._listener import RebalanceListener
from .._metrics import max_reading
from .._transaction_loop import TransactionalOutput
from .._transactional import TransactionalProcessor
from .._types import ConsumerGroupMetadata, TopicPartition
from ._control import ControlAddress, ControlClient

if TYPE_CHECKING:
    from .._io._fetcher import Record as Message

__all__ = [
    "AtLeastOnceDelivery",
    "BatchDelivery",
    "ExactlyOnce",
    "Member",
    "MemberStats",
    "Plan",
    "Sink",
    "TransactionalSink",
    "partition_names",
    "run_task",
]

log = logging.getLogger("coopconsumer.spark")

#: The sink: called on the executor with each batch of records (confluent-kafka
#: ``Message`` objects); its return value is ignored.
Sink = Callable[["list[Message]"], object]
#: The sink of an exactly-once job: called on the executor with each batch of records
#: and the open transaction's output (``output.produce(topic, value, key)``); what it
#: produces there commits together with the batch's offsets.
TransactionalSink = Callable[["list[Message]", TransactionalOutput], object]

#: How often an idle bounded member asks the group coordinator for the committed offsets.
_CHECK_INTERVAL_S: Final = 0.5
#: consume() calls in a row that raised before the member gives up (a fatal error is
#: raised by every call; one the group reported only once).
_MAX_CONSECUTIVE_ERRORS: Final = 5
#: How often the member samples ``rebalance-latency-max`` (a windowed metric).
_SAMPLE_INTERVAL_S: Final = 1.0
#: Attempts to commit what is pending when a member stops (a commit may meet a
#: rebalance, which the next consume() completes).
_FINAL_COMMIT_ATTEMPTS: Final = 5


def partition_names(partitions: Iterable[TopicPartition]) -> tuple[str, ...]:
    """``"topic-3"`` names, sorted."""
    return tuple(str(tp) for tp in sorted(partitions))


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@attrs.frozen(kw_only=True)
class MemberStats:
    """What one member attempt of a consume job did: one row of its result.

    ``member`` is the member's index (its Spark partition, ``0 .. members-1``) and
    ``attempt`` Spark's attempt number of that task (0 first, 1 for the first retry).
    ``records`` were handed to the sink in ``batches`` calls; ``skipped`` records were
    fetched but not handed over because they lie at or past the end offsets of a
    bounded job. ``rebalances`` is the ``rebalance-total`` metric (successful
    rebalances this member took part in, the first join included).
    ``rebalance_latency_avg_ms`` is the mean over all of them
    (``rebalance-latency-total / rebalance-total``) and ``rebalance_latency_max_ms``
    the largest ``rebalance-latency-max`` sampled during the run (NaN without a
    rebalance). ``failed_commits`` counts offsets of batches the sink took that could
    not be committed: refused (e.g. ``CommitFailedError``) or abandoned because their
    partitions were lost; those records are delivered again. ``assigned`` are the
    partitions the member owned when it stopped (``"topic-3"``), or owns now in a
    live report; ``member_id`` its last group member id, ``seconds`` the attempt's
    wall time (so far).
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
    assigned: tuple[str, ...] = attrs.field(converter=_strings)
    seconds: float

    def as_row(self) -> tuple[Any, ...]:
        """The values in :attr:`SCHEMA` order (``assigned`` as a list)."""
        row = attrs.astuple(self, recurse=False)
        return (*row[:10], list(self.assigned), row[11])

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-friendly dict (``assigned`` as a list)."""
        values = attrs.asdict(self, recurse=False)
        values["assigned"] = list(self.assigned)
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> MemberStats:
        """The inverse of :meth:`as_dict`; unknown keys are ignored."""
        names = {f.name for f in attrs.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


class BatchDelivery(abc.ABC):
    """How a member hands one batch over and commits its offsets: the consume job's
    per-batch commit hook. One instance per member attempt, created once the member's
    consumer exists; every method runs on the member's thread, the rebalance callbacks
    inside ``consume()``.

    :class:`AtLeastOnceDelivery` calls the sink and then commits. A delivery that makes
    the sink's output and the offsets one atomic step (a Kafka transaction per batch)
    implements the same methods."""

    def __init__(self, consumer: Consumer, who: str) -> None:
        self.consumer = consumer
        self.who = who
        #: Batches whose offsets could not be committed (their records come again).
        self.failed_commits = 0

    @abc.abstractmethod
    def deliver(self, batch: list[Message]) -> None:
        """Hand ``batch`` over and commit its offsets, or keep them pending when the
        commit must wait (a rebalance in progress); raises what the sink raised."""

    @property
    @abc.abstractmethod
    def pending(self) -> bool:
        """Whether offsets of delivered batches still wait for a commit."""

    @abc.abstractmethod
    def retry_pending(self) -> None:
        """Try again to commit what is pending (after the next ``consume()``)."""

    @abc.abstractmethod
    def on_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        """``partitions`` go to another member: settle their pending offsets now
        (the member is still in the generation, KIP-429)."""

    @abc.abstractmethod
    def on_lost(self, partitions: frozenset[TopicPartition]) -> None:
        """``partitions`` are gone without a hand-over: give up their pending offsets."""

    def finish(self) -> None:
        """The member is stopping: commit what is pending, trying a few times."""
        for _ in range(_FINAL_COMMIT_ATTEMPTS):
            if not self.pending:
                return
            self.retry_pending()
            if self.pending:
                # A rebalance in progress: consume() completes it (records it returns
                # are not delivered; their partitions start from the commit next time).
                self.consumer.consume(1, 0.2)
        if self.pending:
            self.failed_commits += 1
            log.warning("%s: offsets still pending at stop: they are delivered again", self.who)


class AtLeastOnceDelivery(BatchDelivery):
    """Calls the sink, then commits the batch's offsets synchronously.

    Offsets the sink took but that are not committed yet (``_pending``: a commit met a
    rebalance) are committed when their partitions are revoked, and forgotten when
    they are lost."""

    def __init__(self, sink: Sink, consumer: Consumer, who: str) -> None:
        super().__init__(consumer, who)
        self._sink = sink
        self._pending: dict[TopicPartition, int] = {}

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def deliver(self, batch: list[Message]) -> None:
        self._sink(batch)
        for message in batch:
            tp = TopicPartition(message.topic(), message.partition())  # type: ignore[arg-type]
            self._pending[tp] = message.offset() + 1  # type: ignore[operator]
        self.retry_pending()

    def retry_pending(self) -> None:
        if not self._pending:
            return
        offsets = dict(self._pending)
        try:
            self.consumer.commit(offsets)
        except RebalanceInProgressError:
            # Retried after the next consume(), which completes the rebalance (and
            # commits for revoked partitions in on_partitions_revoked).
            return
        except CommitFailedError as exc:
            # The generation is gone and the partitions may have moved: these records
            # are consumed again from the last commit (at-least-once).
            self.failed_commits += 1
            log.warning("%s: commit failed, records will be redelivered: %s", self.who, exc)
            self._forget(offsets)
            return
        except (KafkaError, BrokerConnectionError, RequestTimeoutError) as exc:
            if not exc.retriable:
                raise
            log.info("%s: commit failed, retrying: %s", self.who, exc)
            return
        self._forget(offsets)

    def _forget(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Drop ``offsets`` (committed, or given up) from what awaits a commit; an entry
        that no longer holds the same offset is left alone."""
        for tp, offset in offsets.items():
            if self._pending.get(tp) == offset:
                del self._pending[tp]

    def on_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        # Still a member of the generation (KIP-429: a cooperative revocation runs after
        # SyncGroup), so the offsets of what the sink took can be committed before the
        # next owner starts: a hand-over between live members repeats nothing.
        offsets = {tp: self._pending.pop(tp) for tp in partitions if tp in self._pending}
        if not offsets:
            return
        try:
            self.consumer.commit(offsets)
        except CoopConsumerError as exc:
            # Raising here would surface from the next consume(): log instead.
            self.failed_commits += 1
            log.warning(
                "%s: commit before revoking %s failed (%s); their records are consumed "
                "again by the next owner",
                self.who,
                ", ".join(partition_names(offsets)),
                exc,
            )

    def on_lost(self, partitions: frozenset[TopicPartition]) -> None:
        # Another member may own them already: a commit would fail; the next owner
        # consumes these records again (at-least-once).
        dropped = [tp for tp in partitions if self._pending.pop(tp, None) is not None]
        if dropped:
            self.failed_commits += 1
            log.warning(
                "%s: lost %s before committing what the sink took; their records are "
                "consumed again by the next owner",
                self.who,
                ", ".join(partition_names(dropped)),
            )


#: Builds a member attempt's delivery from its consumer and a name for log lines.
DeliveryFactory = Callable[[Consumer, str], BatchDelivery]


@attrs.frozen(kw_only=True)
class Plan:
    """Everything a member task needs; pickled to the executors."""

    config: dict[str, object]
    topics: tuple[str, ...]
    #: The at-least-once delivery (None in an exactly-once job).
    delivery: DeliveryFactory | None
    batch_size: int
    poll_timeout_s: float
    #: Bounded job: (low, high) watermarks per partition when the job started; the
    #: members stop once the committed offsets reach every ``high``. None: the
    #: members run until the driver says stop.
    ends: dict[TopicPartition, tuple[int, int]] | None
    #: Wall-clock (``time.time()``) end of a bounded job, shared by every attempt.
    deadline: float | None
    timeout_s: float | None
    control: ControlAddress | None
    report_interval_s: float
    #: Set in an exactly-once job: the member is a ``TransactionalProcessor``.
    exactly_once: ExactlyOnce | None = None


@attrs.frozen(kw_only=True)
class ExactlyOnce:
    """The exactly-once part of a :class:`Plan`: the sink and the transactional
    producer's configuration (without ``transactional.id``, which each attempt
    derives from ``transactional_id_prefix``: :meth:`transactional_id`)."""

    sink: TransactionalSink
    producer_config: dict[str, object]
    transactional_id_prefix: str

    def transactional_id(self, member: int, attempt: int) -> str:
        """One id per task attempt: unique among the attempts running at once (a
        retry, a speculative copy), so attempts never fence each other's producers;
        the same for the same attempt of the next run of the job, whose
        ``init_transactions`` then ends what that one left open."""
        return f"{self.transactional_id_prefix}-{member}-{attempt}"


class _GroupView(Protocol):
    """What the statistics read of a member: a ``Consumer`` or a
    ``TransactionalProcessor``."""

    def metrics(self) -> dict[str, float]: ...

    def assignment(self) -> frozenset[TopicPartition]: ...

    def group_metadata(self) -> ConsumerGroupMetadata: ...


def run_task(plan: Plan, index: int, _items: Iterator[int]) -> Iterator[tuple[Any, ...]]:
    """A Spark task's body (``mapPartitionsWithIndex``): run one member attempt."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    yield Member(plan, index, attempt).run().as_row()


def _close_quietly(close: Callable[[], None], who: str) -> None:
    """Close after a failure: the original error matters more than this one."""
    try:
        close()
    except Exception as exc:
        log.warning("%s: close after a failure failed: %s", who, exc)


def _reached(committed: int | None, low: int, high: int) -> bool:
    """Whether a partition is done: committed at its end, or empty (nothing to read)."""
    return high <= low or (committed is not None and committed >= high)


class Member(RebalanceListener):
    """One member attempt; also its own rebalance listener, which hands revocations and
    losses to the delivery."""

    def __init__(self, plan: Plan, index: int, attempt: int) -> None:
        self._plan = plan
        self._index = index
        self._attempt = attempt
        self._who = f"member {index} (attempt {attempt})"
        self._ends = None if plan.ends is None else {tp: h for tp, (_l, h) in plan.ends.items()}
        self._delivery: BatchDelivery | None = None
        self._processor: TransactionalProcessor | None = None
        self._errors = 0  # consume() calls in a row that raised
        self._control = (
            None if plan.control is None else ControlClient(plan.control, index, attempt)
        )
        self._started = time.monotonic()
        self._records = 0
        self._skipped = 0
        self._batches = 0
        self._latency_max = math.nan
        self._short: list[str] = []

    # ------------------------------------------------------------------ listener

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        pass

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        if self._delivery is not None:
            self._delivery.on_revoked(partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        if self._delivery is not None:
            self._delivery.on_lost(partitions)

    # ------------------------------------------------------------------ run

    def run(self) -> MemberStats:
        control = self._control
        if control is not None and control.poll():
            # Asked to stop before it started (a task that waited for a free slot).
            stats = self._stats(None)
        else:
            try:
                if self._plan.exactly_once is not None:
                    stats = self._run_exactly_once(self._plan.exactly_once)
                else:
                    stats = self._run_at_least_once()
            except BaseException:
                if control is not None:
                    control.close()
                raise
        if control is not None:
            control.report(stats.as_dict(), final=True)
            control.close()
        return stats

    def _run_at_least_once(self) -> MemberStats:
        consumer = Consumer(self._plan.config)
        try:
            assert self._plan.delivery is not None
            delivery = self._delivery = self._plan.delivery(consumer, self._who)
            consumer.subscribe(list(self._plan.topics), listener=self)
            self._loop(consumer, lambda: self._deliver_turn(consumer, delivery), consumer)
            delivery.finish()
            stats = self._stats(consumer)
        except BaseException:
            _close_quietly(consumer.close, self._who)
            raise
        consumer.close()
        return stats

    def _run_exactly_once(self, exactly_once: ExactlyOnce) -> MemberStats:
        """The member as a ``TransactionalProcessor``: one transaction per batch
        (``commit_interval_ms=0``), its own transactional id per attempt. A bounded
        job reads the group's committed offsets with a second consumer that never
        joins (the processor's consumer is its own)."""
        plan = self._plan
        producer_config = dict(exactly_once.producer_config)
        producer_config["transactional.id"] = exactly_once.transactional_id(
            self._index, self._attempt
        )
        sink = exactly_once.sink

        def process(records: list[Message], output: TransactionalOutput) -> None:
            sink(records, output)

        processor = self._processor = TransactionalProcessor(
            plan.config,
            producer_config,
            process,
            topics=plan.topics,
            batch_size=plan.batch_size,
            commit_interval_ms=0,
        )
        checker: Consumer | None = None
        try:
            if plan.ends is not None:
                checker = Consumer(plan.config)
            self._loop(processor, lambda: self._transaction_turn(processor), checker)
            stats = self._stats(processor)
        except BaseException:
            # close() commits a transaction still open (its batches were processed);
            # after the sink raised there is none: step() aborted it.
            _close_quietly(processor.close, self._who)
            if checker is not None:
                _close_quietly(checker.close, self._who)
            raise
        processor.close()  # commits the open transaction, leaves the group
        if checker is not None:
            checker.close()
        return self._stats(None, stats)

    def _failed_commits(self) -> int:
        if self._processor is not None:
            return self._processor.stats().transactions_aborted
        return 0 if self._delivery is None else self._delivery.failed_commits

    def _stats(self, view: _GroupView | None, last: MemberStats | None = None) -> MemberStats:
        """Statistics so far, read from ``view``; with ``last`` (read before the
        member closed), those with the final record and abort counts."""
        rebalances, latency_avg, member_id = 0, math.nan, ""
        assigned: frozenset[TopicPartition] = frozenset()
        if last is not None:
            return attrs.evolve(
                last,
                records=self._records,
                batches=self._batches,
                failed_commits=self._failed_commits(),
                seconds=time.monotonic() - self._started,
            )
        if view is not None:
            metrics = view.metrics()
            rebalances = int(metrics["rebalance-total"])
            if rebalances:
                latency_avg = metrics["rebalance-latency-total"] / rebalances
            self._latency_max = max_reading(self._latency_max, metrics["rebalance-latency-max"])
            assigned = view.assignment()
            member_id = view.group_metadata().member_id
        return MemberStats(
            member=self._index,
            attempt=self._attempt,
            member_id=member_id,
            records=self._records,
            skipped=self._skipped,
            batches=self._batches,
            rebalances=rebalances,
            rebalance_latency_avg_ms=latency_avg,
            rebalance_latency_max_ms=self._latency_max if rebalances else math.nan,
            failed_commits=self._failed_commits(),
            assigned=partition_names(assigned),
            seconds=time.monotonic() - self._started,
        )

    def _report(self, view: _GroupView) -> None:
        if self._control is None:
            return
        stats = self._stats(view).as_dict()
        lags = view.records_lag() if isinstance(view, Consumer) else None
        stats["records_lag"] = sum(lags.values()) if lags else None
        stats["generation_id"] = view.group_metadata().generation_id
        self._control.report(stats)

    def _group_error(self, exc: CoopConsumerError) -> None:
        """An error the group reported through ``consume()`` (e.g. a failed SyncGroup):
        the consumer rejoins by itself and carries on. A fatal one is raised by every
        call: the fifth in a row is raised."""
        self._errors += 1
        if self._errors >= _MAX_CONSECUTIVE_ERRORS:
            raise exc
        log.warning("%s: %s (the consumer carries on)", self._who, exc)

    def _deliver_turn(self, consumer: Consumer, delivery: BatchDelivery) -> bool:
        """Consume a batch, hand it over and commit; True when idle (nothing handed
        over, nothing pending)."""
        try:
            messages = consumer.consume(self._plan.batch_size, self._plan.poll_timeout_s)
        except CoopConsumerError as exc:
            self._group_error(exc)
            return False
        self._errors = 0
        batch = self._take(consumer, messages)
        if batch:
            delivery.deliver(batch)
            self._batches += 1
            self._records += len(batch)
            if self._ends is not None:
                self._pause_finished(consumer, batch)
        elif delivery.pending:
            delivery.retry_pending()
        return not batch and not delivery.pending

    def _transaction_turn(self, processor: TransactionalProcessor) -> bool:
        """One ``step()`` of the processor (consume, sink, commit the transaction);
        True when idle (no record arrived; the open transaction, if any, committed)."""
        try:
            processed = processor.step(self._plan.poll_timeout_s)
        except TransactionError:
            raise  # fatal (fenced) or permanent: replaying cannot help
        except CoopConsumerError as exc:
            self._group_error(exc)
            return False
        self._errors = 0
        if processed:
            self._batches += 1
            self._records += processed
        return not processed

    def _loop(
        self, view: _GroupView, turn: Callable[[], bool], committed_by: Consumer | None
    ) -> None:
        """Run ``turn`` until the driver says stop or a bounded job is done (read with
        ``committed_by``), reporting and sampling metrics between turns."""
        plan = self._plan
        next_check = 0.0
        now = time.monotonic()
        next_sample = now + _SAMPLE_INTERVAL_S
        next_report = now + plan.report_interval_s
        self._report(view)
        while True:
            if self._control is not None and self._control.poll():
                log.info("%s: stopping, as the driver asked", self._who)
                return
            if plan.deadline is not None and time.time() >= plan.deadline:
                assert committed_by is not None
                if not self._all_committed(committed_by):  # also names what is missing
                    raise RequestTimeoutError(
                        f"consume job timed out after {plan.timeout_s:.0f}s ({self._who}): "
                        "committed offsets short of the end offsets: "
                        f"{', '.join(self._short) or 'unknown'}"
                    )
                return
            idle = turn()
            now = time.monotonic()
            if now >= next_sample:
                next_sample = now + _SAMPLE_INTERVAL_S
                self._latency_max = max_reading(
                    self._latency_max, view.metrics()["rebalance-latency-max"]
                )
            if now >= next_report:
                next_report = now + plan.report_interval_s
                self._report(view)
            if self._ends is not None and idle and now >= next_check:
                assert committed_by is not None
                next_check = now + _CHECK_INTERVAL_S
                if self._all_committed(committed_by):
                    return

    def _take(self, consumer: Consumer, messages: list[Message]) -> list[Message]:
        """The records before the end offsets (all of them in a long-running job);
        pause the partitions that went past."""
        ends = self._ends
        if ends is None:
            return messages
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

    def _pause_finished(self, consumer: Consumer, batch: list[Message]) -> None:
        """Pause the partitions whose records in ``batch`` reached their end offset."""
        assert self._ends is not None
        done = set()
        for message in batch:
            tp = TopicPartition(message.topic(), message.partition())  # type: ignore[arg-type]
            if message.offset() + 1 >= self._ends[tp]:  # type: ignore[operator]
                done.add(tp)
        if done:
            consumer.pause(done)

    def _all_committed(self, consumer: Consumer) -> bool:
        assert self._plan.ends is not None
        try:
            committed = consumer.committed(self._plan.ends.keys())
        except CoopConsumerError as exc:
            if not exc.retriable:
                raise
            log.info("%s: reading committed offsets failed: %s", self._who, exc)
            return False
        self._short = [
            f"{tp} at {committed.get(tp)} of {high}"
            for tp, (low, high) in sorted(self._plan.ends.items())
            if not _reached(committed.get(tp), low, high)
        ]
        return not self._short
