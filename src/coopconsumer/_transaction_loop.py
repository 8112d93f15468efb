"""``TransactionLoop``: the exactly-once loop's state and decisions (KIP-447), sans-I/O.

When to begin, commit and abort a transaction, what to rewind, what a rebalance callback
does to the open transaction, which errors abort and which are fatal (docs/exactly-once.md).
The loop is written as generators that yield what they need done (``Request``: a producer
call, the brokers' KIP-447 check, a consume, the process function) and get the result
back; it performs none of them. The threaded ``_transactional.TransactionalProcessor``
and ``aio.AsyncTransactionalProcessor`` are its drivers ("One core, two loops").

Imports the errors and the value types only: no socket, thread, clock, consumer or
producer (the record and header types are named for the type checker alone);
``tests/test_layering.py`` keeps it so.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

import attrs

from ._errors import CoopConsumerError, TransactionAbortedError, TransactionError
from ._types import ConsumerGroupMetadata, TopicPartition

if TYPE_CHECKING:
    from ._io._fetcher import Record as Message
    from ._io._producer import Headers

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_COMMIT_INTERVAL_MS",
    "DEFAULT_MAX_RECORDS_PER_TRANSACTION",
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "CheckBrokers",
    "Consume",
    "Process",
    "ProducerCall",
    "ProducerLike",
    "Request",
    "Steps",
    "StopFlag",
    "TransactionLoop",
    "TransactionStats",
    "TransactionalOutput",
]

log = logging.getLogger("coopconsumer.transactional")

_R = TypeVar("_R")

#: Kafka Streams' default ``commit.interval.ms`` under exactly-once.
DEFAULT_COMMIT_INTERVAL_MS: Final = 100
DEFAULT_MAX_RECORDS_PER_TRANSACTION: Final = 10_000
DEFAULT_BATCH_SIZE: Final = 500
#: Longest single consume() inside step(): how soon stop() takes effect.
_STOP_CHECK_S: Final = 0.5
#: How often a due commit that waits for the member's rejoin is looked at again.
_REJOIN_CHECK_S: Final = 0.05
#: librdkafka's default ``transaction.timeout.ms`` (the loop's fakes use it).
DEFAULT_TRANSACTION_TIMEOUT_MS: Final = 60_000


class TransactionalOutput:
    """Where the process function writes its output records: each goes into the open
    transaction, committed together with the offsets of the records being processed.

    Valid only during the call of the process function it was given to.
    """

    def __init__(self, producer: ProducerLike) -> None:
        self._producer = producer
        self._open = False
        #: Records produced into the open transaction.
        self.produced = 0

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        *,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
    ) -> None:
        """Write one record (``partition=None``: Java's murmur2 partitioner chooses by
        key). Raises ``TransactionError`` outside the process function."""
        if not self._open:
            raise TransactionError("produce() outside the process function", fatal=False)
        self._producer.produce(
            topic, value, key, partition=partition, headers=headers, timestamp=timestamp
        )
        self.produced += 1


def _counts(value: Mapping[str, int]) -> Mapping[str, int]:
    return dict(sorted(value.items()))


@attrs.frozen(kw_only=True)
class TransactionStats:
    """What a :class:`TransactionalProcessor` did so far.

    ``records_processed``/``records_produced`` count committed transactions only;
    ``records_replayed`` counts records of aborted transactions, consumed again after
    the rewind. ``aborts`` counts aborted transactions by reason (``"group generation
    fenced"``, ``"partitions lost"``, ``"process function raised"``, ...).
    """

    transactions_committed: int = 0
    transactions_aborted: int = 0
    aborts: Mapping[str, int] = attrs.field(factory=dict, converter=_counts)
    records_processed: int = 0
    records_produced: int = 0
    records_replayed: int = 0
    #: Commits made inside a revocation callback (the revoked partitions were in the
    #: open transaction).
    commits_on_revoke: int = 0
    commit_latency_avg_ms: float = 0.0
    commit_latency_max_ms: float = 0.0
    #: Subscribed topics the cluster does not have (a typo, or not created yet): the
    #: processor waits for them, and says so (``error_cb`` of the consumer config,
    #: else a warning) when this changes and every 30 s while it is not 0.
    missing_topics: int = 0


@attrs.define(kw_only=True)
class _Transaction:
    started: float
    #: Per partition, the offset of the first record consumed in this transaction (the
    #: rewind target) and the next offset to consume (what is committed).
    first: dict[TopicPartition, int] = attrs.field(factory=dict)
    next: dict[TopicPartition, int] = attrs.field(factory=dict)
    records: int = 0


class ProducerLike(Protocol):
    """What the processor needs of ``TransactionalProducer``."""

    @property
    def transactional_id(self) -> str: ...

    def init(self, timeout_s: float | None = None) -> None: ...

    def begin(self) -> None: ...

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        *,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
    ) -> None: ...

    def send_offsets(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: ConsumerGroupMetadata,
        timeout_s: float | None = None,
    ) -> None: ...

    def commit(self, timeout_s: float | None = None) -> None: ...

    def abort(self, timeout_s: float | None = None) -> None: ...

    def delivery_failure(self) -> str | None: ...

    def close(self) -> None: ...


class StopFlag(Protocol):
    """What ``TransactionLoop.stopping`` is: a flag the driver sets from any thread (its
    ``threading.Event``); the loop only reads it."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...

    def clear(self) -> None: ...


# ------------------------------------------------------------------ the shared core
#
# The loop's decisions live in ``TransactionLoop``, written once as generators that
# yield what they need done (docs/exactly-once.md, "One core, two loops"): a producer
# call, the brokers' KIP-447 check, a consume, the process function. A driver performs
# each request and sends its result back (or throws its exception in); the sync
# ``TransactionalProcessor`` calls straight through, ``coopconsumer.aio``'s
# ``AsyncTransactionalProcessor`` awaits the producer's blocking calls in an executor.
# No request is performed by the core itself, so both loops make the same calls in the
# same order and tests can read the requests as a transcript.


@attrs.frozen
class ProducerCall:
    """Call ``method`` of the transactional producer with ``args``: ``init``, ``begin``,
    ``send_offsets``, ``commit`` or ``abort``. These block (librdkafka waits for the
    transaction coordinator); the result is None."""

    method: str
    args: tuple[Any, ...] = ()


@attrs.frozen
class CheckBrokers:
    """Check, once, that the brokers support KIP-447 (blocks: it asks a broker)."""


@attrs.frozen
class Consume:
    """Consume up to ``count`` records within ``timeout`` seconds; the result is the
    list of records. Rebalance callbacks run inside, and must have completed when the
    result is sent back."""

    count: int
    timeout: float


@attrs.frozen(eq=False)
class Process:
    """Call the process function with ``records`` and the loop's output; the result is
    ignored (an async driver awaits a coroutine the function returns)."""

    records: list[Message]


#: What a step of the core asks its driver to do.
Request = ProducerCall | CheckBrokers | Consume | Process
#: A step of the core: yields requests, receives their results, returns ``_R``.
Steps = Generator[Request, Any, _R]


class _LoopConsumer(Protocol):
    """What the core reads and changes on the consumer directly (none of it blocks)."""

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    def assignment(self) -> frozenset[TopicPartition]: ...

    def group_metadata(self) -> ConsumerGroupMetadata: ...

    def _rejoining(self) -> bool: ...


class TransactionLoop:
    """The exactly-once loop's state and decisions, shared by the sync and the async
    processor: when to begin, commit and abort a transaction, what to rewind, what a
    rebalance callback does to the open transaction, which errors abort and which are
    fatal. Every method that needs I/O is a generator of :data:`Request` (see above);
    nothing here blocks, awaits or reads a clock but ``clock``.

    Not thread-safe: one driver at a time (a rebalance callback's steps run inside the
    ``Consume`` request of the step that consumes, never beside it).
    """

    def __init__(
        self,
        consumer: _LoopConsumer,
        producer: ProducerLike,
        *,
        batch_size: int,
        commit_interval_ms: int,
        max_records_per_transaction: int,
        clock: Callable[[], float],
        contiguous_generations: bool,
        stopping: StopFlag,
        transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
    ) -> None:
        self._consumer = consumer
        self._producer = producer
        self.output = TransactionalOutput(producer)
        self._batch_size = batch_size
        self._commit_interval_s = commit_interval_ms / 1000.0
        self._max_records = max_records_per_transaction
        self._clock = clock
        # The classic protocol numbers its generations one by one, so a member that
        # finds its generation more than one past the last it saw missed one (see
        # _missed_a_generation); a KIP-848 member epoch jumps by design.
        self._contiguous_generations = contiguous_generations
        self._generation_seen: int | None = None
        # While the member rejoins, a due commit waits for the new generation, but a
        # transaction is never kept open past half of transaction.timeout.ms for it
        # (see _may_commit).
        self._rejoin_wait_limit_s = transaction_timeout_ms / 2000.0
        #: Set by ``stop()`` (from any thread): ends a sliced wait and ``run()``.
        self.stopping = stopping
        self._started = False
        self.failure: TransactionError | None = None
        self.txn: _Transaction | None = None
        self._committed = 0
        self._aborted: Counter[str] = Counter()
        self._records_processed = 0
        self._records_produced = 0
        self._records_replayed = 0
        self._commits_on_revoke = 0
        self._latency_total_ms = 0.0
        self._latency_max_ms = 0.0

    # ------------------------------------------------------------------ steps

    def step(self, timeout: float) -> Steps[int]:
        """One turn of the loop (``TransactionalProcessor.step``); returns the number
        of records processed."""
        self.check()
        yield from self._start()
        now = self._clock()
        txn = self.txn
        if txn is not None and self._due(txn, now) and self._may_commit(txn, now):
            yield from self._commit("interval")
        wait = max(0.0, timeout)
        txn = self.txn
        if txn is not None:
            due_in = txn.started + self._commit_interval_s - now
            # A due commit waiting for a rejoin is looked at again every slice.
            wait = min(wait, due_in if due_in > 0 else _REJOIN_CHECK_S)
        # Waited in slices so that stop() ends run() within a slice, however long the
        # timeout (a long one makes "nothing arrived" commits rare).
        deadline = now + wait
        while True:
            remaining = max(0.0, deadline - self._clock())
            records: list[Message] = yield Consume(self._batch_size, min(_STOP_CHECK_S, remaining))
            if records or remaining <= _STOP_CHECK_S or self.stopping.is_set():
                break
        if not records:
            txn = self.txn
            if txn is not None and self._may_commit(txn, self._clock()):
                yield from self._commit("interval" if self._due(txn, self._clock()) else "idle")
            return 0
        yield from self._process(records)
        txn = self.txn
        now = self._clock()
        if txn is not None and self._due(txn, now) and self._may_commit(txn, now):
            yield from self._commit("interval")
        return len(records)

    def finish(self, why: str) -> Steps[None]:
        """Commit the open transaction, if any (``run()`` returning)."""
        if self.txn is not None:
            yield from self._commit(why)

    def close(self) -> Steps[None]:
        """Commit the open transaction unless the loop failed; a failure to commit is
        logged (closing goes on)."""
        if self.txn is None or self.failure is not None:
            return
        try:
            yield from self._commit("close")
        except CoopConsumerError as exc:
            log.warning("close: the open transaction did not commit: %s", exc)

    def on_assigned(self) -> Steps[None]:
        """Settle the open transaction before the application's
        ``on_partitions_assigned``."""
        yield from self._missed_a_generation()

    def on_revoked(self, partitions: frozenset[TopicPartition]) -> Steps[None]:
        """Before the application's ``on_partitions_revoked``: a revocation that touches
        the open transaction's partitions commits it first (so the next owner starts
        exactly after it); one that does not leaves it open (no needless abort)."""
        yield from self._missed_a_generation(exclude=partitions)
        txn = self.txn
        if txn is None or self.failure is not None:
            return
        if not (txn.first.keys() & partitions):
            return  # the open transaction holds nothing of them: keep it open
        if (yield from self._commit("revocation", exclude=partitions)):
            self._commits_on_revoke += 1

    def on_lost(self, partitions: frozenset[TopicPartition]) -> Steps[None]:
        """Before the application's ``on_partitions_lost``: abort the open transaction
        (another member may own its partitions already)."""
        self._generation_seen = None  # the member has no generation until it joins again
        if self.txn is None or self.failure is not None:
            return
        yield from self._abort("partitions lost", exclude=partitions)

    # ------------------------------------------------------------------ state

    def check(self) -> None:
        """Raise the fatal error the loop met, if any."""
        if self.failure is not None:
            raise self.failure

    def stats(self) -> TransactionStats:
        """What the loop did so far."""
        return TransactionStats(
            transactions_committed=self._committed,
            transactions_aborted=self._aborted.total(),
            aborts=self._aborted,
            records_processed=self._records_processed,
            records_produced=self._records_produced,
            records_replayed=self._records_replayed,
            commits_on_revoke=self._commits_on_revoke,
            commit_latency_avg_ms=(self._latency_total_ms / self._committed)
            if self._committed
            else 0.0,
            commit_latency_max_ms=self._latency_max_ms,
        )

    # ------------------------------------------------------------------ decisions

    def _start(self) -> Steps[None]:
        if self._started:
            return
        yield CheckBrokers()
        yield from self._guard(ProducerCall("init"), "init")
        self._started = True

    def _due(self, txn: _Transaction, now: float) -> bool:
        return txn.records >= self._max_records or now - txn.started >= self._commit_interval_s

    def _may_commit(self, txn: _Transaction, now: float) -> bool:
        """Whether a commit of the loop's own (due, or idle) may go now: not while the
        classic member rejoins, whose generation the offsets would carry is about to be
        superseded, so the coordinator would refuse them and the transaction abort
        (Kafka Streams skips its commits during a rebalance for the same reason). The
        commits a revocation or the end of the loop makes do not wait; nor does one
        whose transaction has been open half of ``transaction.timeout.ms``, which the
        coordinator would otherwise abort."""
        return not self._consumer._rejoining() or now - txn.started >= self._rejoin_wait_limit_s

    def _process(self, records: list[Message]) -> Steps[None]:
        txn = self.txn
        if txn is None:
            yield from self._guard(ProducerCall("begin"), "begin")
            txn = self.txn = _Transaction(started=self._clock())
        # One pass over the batch: where each partition starts (the rewind target, kept
        # from the transaction's first batch) and the next offset after it.
        first = txn.first
        # librdkafka's records always carry topic, partition and offset (the stubs say
        # Optional): Any keeps this per-record loop free of checks.
        batch_next: dict[tuple[Any, Any], Any] = {}
        for record in records:
            key: tuple[Any, Any] = (record.topic(), record.partition())
            offset: Any = record.offset()
            if key not in batch_next:
                tp = TopicPartition(*key)
                if tp not in first:
                    first[tp] = offset
            batch_next[key] = offset + 1
        output = self.output
        output._open = True
        try:
            yield Process(records)
        except GeneratorExit:  # the driver dropped this step: nothing more may be asked
            output._open = False
            raise
        except TransactionAbortedError as exc:
            output._open = False
            yield from self._abort(exc.reason)
            raise TransactionAbortedError(
                f"a record the process function produced was refused; the transaction "
                f"was aborted: {exc}",
                reason=exc.reason,
                permanent=True,
                code=exc.code,
                name=exc.name,
            ) from exc
        except BaseException:
            # Cancellation of an async process function included: its batch is replayed.
            output._open = False
            yield from self._abort("process function raised")
            raise
        output._open = False
        for (topic, partition), offset in batch_next.items():
            txn.next[TopicPartition(topic, partition)] = offset
        txn.records += len(records)

    def _commit(self, why: str, *, exclude: frozenset[TopicPartition] = frozenset()) -> Steps[bool]:
        """Commit the open transaction with its offsets; True when committed. An
        abortable failure aborts it and rewinds (``exclude``: partitions being revoked,
        not sought); a permanent one is raised after that."""
        txn = self.txn
        assert txn is not None
        started = self._clock()
        try:
            if txn.next:
                yield ProducerCall(
                    "send_offsets", (dict(txn.next), self._consumer.group_metadata())
                )
            yield ProducerCall("commit")
        except TransactionAbortedError as exc:
            detail = self._producer.delivery_failure() or str(exc)
            yield from self._abort(exc.reason, exclude=exclude)
            if exc.permanent:
                raise TransactionAbortedError(
                    f"the transaction cannot commit and was aborted: {detail}",
                    reason=exc.reason,
                    permanent=True,
                    code=exc.code,
                    name=exc.name,
                ) from exc
            return False
        except TransactionError as exc:  # fatal
            self._fail(exc)
            raise
        except CoopConsumerError as exc:
            # The offsets cannot be sent with this metadata at all (its format or ids):
            # abort, and stop, since every later transaction would meet the same.
            error = TransactionError(
                f"the offsets cannot be sent: {exc}; the transaction was aborted",
                fatal=True,
            )
            try:
                yield from self._abort("offsets refused", exclude=exclude)
            finally:
                self._fail(error)
            raise error from exc
        elapsed_ms = (self._clock() - started) * 1000.0
        self.txn = None
        self._committed += 1
        self._records_processed += txn.records
        self._records_produced += self.output.produced
        self.output.produced = 0
        self._latency_total_ms += elapsed_ms
        self._latency_max_ms = max(self._latency_max_ms, elapsed_ms)
        log.debug("committed a transaction of %d record(s) (%s)", txn.records, why)
        return True

    def _abort(
        self, reason: str, *, exclude: frozenset[TopicPartition] = frozenset()
    ) -> Steps[None]:
        """Abort the open transaction and seek its partitions (but ``exclude``) back to
        where it started consuming them."""
        txn = self.txn
        if txn is None:
            return
        self.txn = None
        self.output.produced = 0
        try:
            yield ProducerCall("abort")
        except TransactionError as exc:
            self._fail(exc)
            raise
        self._aborted[reason] += 1
        self._records_replayed += txn.records
        owned = self._consumer.assignment() - exclude
        for tp, offset in sorted(txn.first.items()):
            if tp in owned:
                self._consumer.seek(tp, offset)
        log.info(
            "aborted a transaction of %d record(s) (%s); %d partition(s) rewound",
            txn.records,
            reason,
            len(owned & txn.first.keys()),
        )

    def _guard(self, call: ProducerCall, what: str) -> Steps[None]:
        try:
            yield call
        except TransactionAbortedError as exc:  # begin/init are never abortable; kept safe
            error = TransactionError(f"{what}: {exc}", fatal=True)
            self._fail(error)
            raise error from exc
        except TransactionError as exc:
            self._fail(exc)
            raise

    def _fail(self, error: TransactionError) -> None:
        if self.failure is None:
            self.failure = error
        self.txn = None

    def _missed_a_generation(
        self, *, exclude: frozenset[TopicPartition] = frozenset()
    ) -> Steps[None]:
        """Abort the open transaction when the member's generation skipped one since the
        last rebalance callback: the member was not in that generation, so the
        partitions it kept reading may have had another owner meanwhile, who read the
        same records (docs/exactly-once.md, "Failures and what each does"). Kafka expels such a
        member (its next request gets UNKNOWN_MEMBER_ID, and its partitions are lost);
        a coordinator that ends a round without a live member and lets it back under
        its old member id (Tansu does) would otherwise see this transaction commit
        with the new generation, its records already processed by the other owner."""
        if not self._contiguous_generations:
            return
        generation = self._consumer.group_metadata().generation_id
        seen, self._generation_seen = self._generation_seen, generation
        if seen is None or generation <= seen + 1 or generation < 0:
            return
        if self.txn is not None and self.failure is None:
            log.warning(
                "the member's generation went from %d to %d: it missed a generation, in "
                "which its partitions may have had another owner; the open transaction "
                "is aborted",
                seen,
                generation,
            )
            yield from self._abort("missed a generation", exclude=exclude)
