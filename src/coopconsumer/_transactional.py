"""``TransactionalProcessor``: exactly-once consume -> process -> produce (KIP-447).

A ``Consumer`` (the library's own group member, ``read_committed``, no auto-commit)
and a transactional producer (``_io._txn_producer``) used from one thread: records are
consumed, handed to the user's function, whose output records go into the open
transaction together with the consumed offsets, fenced by the member's generation. The
rules, and why each holds, are in docs/exactly-once.md; in short:

* a transaction is committed when ``commit.interval.ms`` has passed since it began,
  when ``max.records.per.transaction`` records are in it, when no record arrived within
  a poll, and before :meth:`TransactionalProcessor.run` returns;
* rebalance callbacks run inside ``consume()``, never while the user's function runs.
  A revocation that touches the open transaction's partitions commits it first (so
  the next owner starts exactly after it); one that does not leaves it open (no
  needless abort); lost partitions abort it;
* offsets are sent with the generation read at that moment (KAFKA-9741) and never
  without one (``_io._txn_producer.check_group_metadata``); the broker's refusal of
  that generation aborts the transaction;
* after an abort every partition of the transaction still assigned is sought back to
  the first offset the transaction consumed, so its records are processed again, and
  what the aborted transaction wrote is invisible to ``read_committed`` readers.

The decisions above live once, in ``TransactionLoop``: generators that yield what they
need done (a producer call, a consume, the process function) and get the result back.
``TransactionalProcessor`` performs those requests on its thread;
``coopconsumer.aio.AsyncTransactionalProcessor`` awaits them (docs/exactly-once.md,
"One core, two loops").

Imports the facade (``_consumer``), the transactional producer and config; with
``aio._transactional`` the only modules of the package that drive both a consumer and a
producer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol, Self, TypeVar

import attrs

from ._config import ConsumerConfig
from ._consumer import Consumer
from ._errors import (
    ConfigurationError,
    CoopConsumerError,
    IncompatibleVersionError,
    TransactionAbortedError,
    TransactionError,
)
from ._io._member_factory import client_for
from ._listener import RebalanceListener, RebalanceListenerLike
from ._security import is_security_key
from ._types import ConsumerGroupMetadata, TopicPartition

if TYPE_CHECKING:
    # Imported when a processor is built, not with the package: they load librdkafka.
    from ._io._fetcher import Record as Message
    from ._io._producer import Headers

__all__ = ["ProcessFunction", "TransactionStats", "TransactionalOutput", "TransactionalProcessor"]

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
#: TxnOffsetCommit v3 carries the generation, member id and instance id (KIP-447).
_TXN_OFFSET_COMMIT: Final = 28
_KIP447_VERSION: Final = 3


class TransactionalOutput:
    """Where the process function writes its output records: each goes into the open
    transaction, committed together with the offsets of the records being processed.

    Valid only during the call of the process function it was given to.
    """

    def __init__(self, producer: _ProducerLike) -> None:
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


#: ``process(records, output)``: handle a batch of consumed records, writing what
#: they produce through ``output``. Called on the thread running the processor.
ProcessFunction = Callable[[list["Message"], TransactionalOutput], None]


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


class _ConsumerLike(Protocol):
    """What the processor needs of ``Consumer`` (tests substitute a scripted fake)."""

    def subscribe(self, topics: list[str], listener: RebalanceListener) -> None: ...

    def consume(self, num_messages: int, timeout: float) -> list[Message]: ...

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    def assignment(self) -> frozenset[TopicPartition]: ...

    def group_metadata(self) -> ConsumerGroupMetadata: ...

    def metrics(self) -> dict[str, float]: ...

    def close(self, timeout: float | None = None) -> None: ...


class _ProducerLike(Protocol):
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


def _check_brokers(cfg: ConsumerConfig) -> None:
    """Refuse brokers without TxnOffsetCommit v3, the first version carrying the
    generation, member id and instance id (KIP-447): librdkafka would silently send the
    offsets without them, which fences nothing. Also checks, once per process, that
    confluent-kafka reads the group metadata bytes coopconsumer writes."""
    from ._io._txn_producer import verify_group_metadata_format

    verify_group_metadata_format()
    timeout_ms = cfg.default_api_timeout_ms
    with client_for(cfg) as client:
        cluster = client.metadata(timeout_ms=timeout_ms)
        for node_id in sorted(cluster.brokers):
            versions = client.api_versions(node_id, timeout_ms=timeout_ms)
            highest = versions.get(_TXN_OFFSET_COMMIT, (0, -1))[1]
            if highest < _KIP447_VERSION:
                raise IncompatibleVersionError(
                    f"broker {node_id} supports TxnOffsetCommit up to v{highest}; "
                    f"exactly-once needs v{_KIP447_VERSION} (Kafka 2.5+, KIP-447) to fence "
                    "offsets by generation"
                )
            return  # one broker answers for the cluster (it runs one version)


def _consumer_keys(config: Mapping[str, object]) -> dict[str, object]:
    """The consumer config with exactly-once's settings, refusing contradictions."""
    if not isinstance(config, Mapping):
        raise ConfigurationError(f"consumer_config must be a mapping, not {type(config).__name__}")
    conf = dict(config)
    auto = str(conf.get("enable.auto.commit", "false")).strip().lower()
    if auto not in ("false", "0"):
        raise ConfigurationError(
            "enable.auto.commit must be false for exactly-once: the consumed offsets are "
            "committed in each transaction, never by the consumer"
        )
    isolation = str(conf.get("isolation.level", "read_committed")).strip().lower()
    if isolation != "read_committed":
        raise ConfigurationError(
            "isolation.level must be read_committed for exactly-once: a read_uncommitted "
            "input would process records of transactions that are later aborted"
        )
    conf["enable.auto.commit"] = False
    conf["isolation.level"] = "read_committed"
    return conf


def _producer_keys(
    producer_config: Mapping[str, object], consumer_config: Mapping[str, object]
) -> dict[str, object]:
    """The producer config, with ``bootstrap.servers`` and the security keys taken
    from the consumer config where it does not set them (one setting for every
    connection)."""
    if not isinstance(producer_config, Mapping):
        raise ConfigurationError(
            f"producer_config must be a mapping, not {type(producer_config).__name__}"
        )
    conf = dict(producer_config)
    security_given = any(isinstance(k, str) and is_security_key(k) for k in conf)
    for key, value in consumer_config.items():
        if not isinstance(key, str) or key in conf:
            continue
        if key == "bootstrap.servers" or (not security_given and is_security_key(key)):
            conf[key] = value
    return conf


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
        producer: _ProducerLike,
        *,
        batch_size: int,
        commit_interval_ms: int,
        max_records_per_transaction: int,
        clock: Callable[[], float],
        contiguous_generations: bool,
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
        self.stopping = threading.Event()
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


def perform_blocking(
    request: ProducerCall | CheckBrokers,
    producer: _ProducerLike,
    broker_check: Callable[[], None],
) -> None:
    """Perform a blocking request (both loops; the async one on an executor thread)."""
    if isinstance(request, CheckBrokers):
        broker_check()
        return
    getattr(producer, request.method)(*request.args)


@attrs.frozen(kw_only=True)
class ProcessorSettings:
    """A processor's checked configuration (shared by the sync and the async one)."""

    consumer_keys: dict[str, object]
    producer_keys: dict[str, object]
    cfg: ConsumerConfig

    def broker_check(self) -> None:
        """The KIP-447 check of the brokers (blocks)."""
        _check_brokers(self.cfg)

    @property
    def contiguous_generations(self) -> bool:
        return not self.cfg.kip848

    @property
    def transaction_timeout_ms(self) -> int:
        from ._io._txn_producer import transaction_timeout_ms

        return transaction_timeout_ms(self.producer_keys)


def processor_settings(
    consumer_config: Mapping[str, object],
    producer_config: Mapping[str, object],
    process: object,
    *,
    batch_size: int,
    commit_interval_ms: int,
    max_records_per_transaction: int,
) -> ProcessorSettings:
    """Check a processor's arguments (the rules of ``TransactionalProcessor``);
    raises ``ConfigurationError`` naming what to change. Connects to nothing."""
    if not callable(process):
        raise ConfigurationError(f"process must be callable, not {process!r}")
    for name, value in (
        ("batch_size", batch_size),
        ("max_records_per_transaction", max_records_per_transaction),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigurationError(f"{name} must be a positive int: {value!r}")
    if (
        not isinstance(commit_interval_ms, int)
        or isinstance(commit_interval_ms, bool)
        or commit_interval_ms < 0
    ):
        raise ConfigurationError(f"commit_interval_ms must be an int >= 0: {commit_interval_ms!r}")
    from ._io._txn_producer import transaction_timeout_ms, transactional_producer_config

    consumer_keys = _consumer_keys(consumer_config)
    cfg = ConsumerConfig.from_mapping(consumer_keys)
    for key, text in (
        ("group.id", cfg.require_group_id()),
        ("group.instance.id", cfg.group_instance_id or ""),
    ):
        if not text.isascii() or not text.isprintable():
            raise ConfigurationError(
                f"{key} {text!r} cannot be used with transactions: confluent-kafka "
                "sends only printable ASCII ids with transactional offsets"
            )
    producer_keys = transactional_producer_config(_producer_keys(producer_config, consumer_config))
    txn_timeout_ms = transaction_timeout_ms(producer_keys)
    if txn_timeout_ms > cfg.max_poll_interval_ms:
        raise ConfigurationError(
            f"transaction.timeout.ms ({txn_timeout_ms}) exceeds the consumer's "
            f"max.poll.interval.ms ({cfg.max_poll_interval_ms}): a transaction left "
            "open by a member that stopped (crash, pause) would keep the next owner "
            "of its partitions waiting longer than a rebalance may take. Lower "
            "transaction.timeout.ms in producer_config (or raise max.poll.interval.ms)"
        )
    if txn_timeout_ms <= commit_interval_ms:
        raise ConfigurationError(
            f"transaction.timeout.ms ({txn_timeout_ms}) must exceed commit_interval_ms "
            f"({commit_interval_ms}), or the coordinator aborts transactions before "
            "they are committed: raise transaction.timeout.ms in producer_config or "
            "lower commit_interval_ms"
        )
    return ProcessorSettings(consumer_keys=consumer_keys, producer_keys=producer_keys, cfg=cfg)


class ProcessorBase:
    """What the sync and the async processor share: building the producer and the
    consumer from a checked configuration, the core, the listener's subscription, and
    the reads. Subclasses say which consumer (``_consumer_type``), which listener
    (``_start_io``), and how to drive the core's requests."""

    _process_fn: Callable[..., Any]
    _consumer: Any  # the sync or the async consumer (or a test's fake)
    _closed: bool

    def _open(
        self,
        consumer_config: Mapping[str, object],
        producer_config: Mapping[str, object],
        process: Callable[..., Any],
        *,
        topics: Iterable[str] | str,
        listener: object | None,
        batch_size: int,
        commit_interval_ms: int,
        max_records_per_transaction: int,
    ) -> None:
        settings = processor_settings(
            consumer_config,
            producer_config,
            process,
            batch_size=batch_size,
            commit_interval_ms=commit_interval_ms,
            max_records_per_transaction=max_records_per_transaction,
        )
        from ._io._txn_producer import TransactionalProducer

        producer = TransactionalProducer(settings.producer_keys)
        try:
            consumer = self._consumer_type(settings.consumer_keys)
        except BaseException:
            producer.close()
            raise
        self._setup(
            consumer=consumer,
            producer=producer,
            process=process,
            topics=topics,
            listener=listener,
            batch_size=batch_size,
            commit_interval_ms=commit_interval_ms,
            max_records_per_transaction=max_records_per_transaction,
            broker_check=settings.broker_check,
            contiguous_generations=settings.contiguous_generations,
            transaction_timeout_ms=settings.transaction_timeout_ms,
        )

    def _consumer_type(self, config: Mapping[str, object]) -> Any:
        raise NotImplementedError

    def _start_io(self, user: object | None) -> object:
        """Set up what driving the core needs; the listener to subscribe with, which
        settles the open transaction before ``user``'s callbacks."""
        raise NotImplementedError

    def _abandon(self) -> None:
        """Release what the subclass holds when subscribing failed in construction."""

    @classmethod
    def _with_io(
        cls,
        consumer: Any,
        producer: _ProducerLike,
        process: Callable[..., Any],
        *,
        topics: Iterable[str] | str,
        listener: object | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS,
        max_records_per_transaction: int = DEFAULT_MAX_RECORDS_PER_TRANSACTION,
        clock: Callable[[], float] = time.monotonic,
        contiguous_generations: bool = True,
        transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
    ) -> Self:
        """A processor on the given consumer and producer (tests run the loop's
        decisions on fakes, without brokers)."""
        self = cls.__new__(cls)
        self._setup(
            consumer=consumer,
            producer=producer,
            process=process,
            topics=topics,
            listener=listener,
            batch_size=batch_size,
            commit_interval_ms=commit_interval_ms,
            max_records_per_transaction=max_records_per_transaction,
            broker_check=lambda: None,
            clock=clock,
            contiguous_generations=contiguous_generations,
            transaction_timeout_ms=transaction_timeout_ms,
        )
        return self

    def _setup(
        self,
        *,
        consumer: Any,
        producer: _ProducerLike,
        process: Callable[..., Any],
        topics: Iterable[str] | str,
        listener: object | None,
        batch_size: int,
        commit_interval_ms: int,
        max_records_per_transaction: int,
        broker_check: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
        contiguous_generations: bool = True,
        transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
    ) -> None:
        self._process_fn = process
        self._broker_check = broker_check
        self._closed = False
        self._producer = producer
        self._consumer = consumer
        self._loop = TransactionLoop(
            consumer,
            producer,
            batch_size=batch_size,
            commit_interval_ms=commit_interval_ms,
            max_records_per_transaction=max_records_per_transaction,
            clock=clock,
            contiguous_generations=contiguous_generations,
            transaction_timeout_ms=transaction_timeout_ms,
        )
        listening = self._start_io(listener)
        try:
            consumer.subscribe([topics] if isinstance(topics, str) else list(topics), listening)
        except BaseException:
            self._abandon()
            producer.close()
            raise

    @property
    def transactional_id(self) -> str:
        """The producer's ``transactional.id``."""
        return self._producer.transactional_id

    def stop(self) -> None:
        """Ask ``run()`` to return after the current batch (thread-safe)."""
        self._loop.stopping.set()

    def stats(self) -> TransactionStats:
        """What the processor did so far."""
        missing = self._consumer.metrics().get("missing-topics", 0.0)
        return attrs.evolve(self._loop.stats(), missing_topics=int(missing))

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions the member owns (as the consumer's ``assignment``)."""
        frozen: frozenset[TopicPartition] = self._consumer.assignment()
        return frozen

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The member's group metadata (as the consumer's ``group_metadata``)."""
        metadata: ConsumerGroupMetadata = self._consumer.group_metadata()
        return metadata

    def metrics(self) -> dict[str, float]:
        """The member's ``consumer-coordinator-metrics`` (as the consumer's ``metrics``)."""
        values: dict[str, float] = self._consumer.metrics()
        return values


class _Listener(RebalanceListener):
    """Settles the open transaction before the application's listener runs."""

    def __init__(
        self, processor: TransactionalProcessor, user: RebalanceListenerLike | None
    ) -> None:
        self._processor = processor
        self._user = user

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        processor = self._processor
        processor._drive(processor._loop.on_revoked(partitions))
        if self._user is not None:
            self._user.on_partitions_revoked(partitions)

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        processor = self._processor
        processor._drive(processor._loop.on_assigned())
        if self._user is not None:
            self._user.on_partitions_assigned(partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        processor = self._processor
        processor._drive(processor._loop.on_lost(partitions))
        if self._user is None:
            return
        lost = getattr(self._user, "on_partitions_lost", None)
        if lost is None:
            self._user.on_partitions_revoked(partitions)
        else:
            lost(partitions)


class TransactionalProcessor(ProcessorBase):
    """Exactly-once Kafka -> Python -> Kafka across cooperative rebalances (KIP-447).

    ``consumer_config`` configures the group member reading ``topics`` (a
    :class:`~coopconsumer.Consumer` config: ``group.id`` is required; both group
    protocols, static membership and any assignor work). ``enable.auto.commit`` is
    false and ``isolation.level`` is ``read_committed`` (asking for anything else is a
    ``ConfigurationError``). ``producer_config`` configures the transactional producer
    and must hold ``transactional.id`` (one per process, stable across its restarts:
    docs/exactly-once.md); ``bootstrap.servers`` and the security keys default to the
    consumer's.

    ``process(records, output)`` is called with each batch of consumed records (at
    most ``batch_size``) and writes its results with ``output.produce``. Its output and
    the batch's offsets commit in one transaction, shared by the batches of up to
    ``commit_interval_ms`` (Kafka Streams' ``commit.interval.ms``) and
    ``max_records_per_transaction`` records: longer intervals mean fewer, larger
    transactions and more latency before ``read_committed`` readers see the output.

    Every input record's output is committed exactly once as long as the process
    function's only effects are the records it produces; docs/exactly-once.md says
    what happens in every failure. A ``listener`` gets the rebalance callbacks after
    the processor settled the open transaction.

    Construction checks the configuration (``transaction.timeout.ms`` at most the
    consumer's ``max.poll.interval.ms`` and at least ``commit_interval_ms``; errors
    name the key to change) and connects to nothing; :meth:`run` or the first
    :meth:`step` initializes the producer (fencing older producers with the same
    ``transactional.id``) and checks that the brokers support KIP-447. Use from one
    thread; :meth:`stop` may be called from any thread (or a signal handler).
    ``coopconsumer.aio.AsyncTransactionalProcessor`` is the same loop for asyncio.
    """

    _consumer: _ConsumerLike
    _process_fn: ProcessFunction

    def __init__(
        self,
        consumer_config: Mapping[str, object],
        producer_config: Mapping[str, object],
        process: ProcessFunction,
        *,
        topics: Iterable[str] | str,
        listener: RebalanceListenerLike | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS,
        max_records_per_transaction: int = DEFAULT_MAX_RECORDS_PER_TRANSACTION,
    ) -> None:
        self._open(
            consumer_config,
            producer_config,
            process,
            topics=topics,
            listener=listener,
            batch_size=batch_size,
            commit_interval_ms=commit_interval_ms,
            max_records_per_transaction=max_records_per_transaction,
        )

    def _consumer_type(self, config: Mapping[str, object]) -> Consumer:
        return Consumer(config)

    def _start_io(self, user: object | None) -> _Listener:
        return _Listener(self, user)  # type: ignore[arg-type]

    def _abandon(self) -> None:
        self._consumer.close(0)

    def _drive(self, steps: Steps[_R]) -> _R:
        """Perform the core's requests on this thread until the step returns."""
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                result: _R = done.value
                return result
            value = error = None
            try:
                if isinstance(request, Consume):
                    value = self._consumer.consume(request.count, request.timeout)
                elif isinstance(request, Process):
                    self._process_fn(request.records, self._loop.output)
                else:
                    perform_blocking(request, self._producer, self._broker_check)
            except BaseException as exc:
                error = exc

    # ------------------------------------------------------------------ public

    def run(self, *, poll_timeout: float = 0.5) -> TransactionStats:
        """Process until :meth:`stop` is called: then commit the open transaction and
        return (the processor stays open; :meth:`close` it). Raises what the process
        function raised (after aborting the transaction that held its batch; the next
        call replays that batch), ``TransactionError`` when a transaction cannot succeed
        (after aborting it; ``fatal`` errors such as ``ProducerFencedError`` leave the
        processor unusable) and the consumer's errors (as ``Consumer.poll``)."""
        stopping = self._loop.stopping
        stopping.clear()
        while not stopping.is_set():
            self.step(poll_timeout)
        self._drive(self._loop.finish("stop"))
        return self.stats()

    def step(self, timeout: float = 0.5) -> int:
        """One turn of the loop: commit the open transaction if it is due, consume a
        batch (waiting at most ``timeout`` seconds, less when the open transaction is
        due sooner; rebalance callbacks run here), process it in the open transaction
        (beginning one if needed), commit when due. A wait that brings no record
        commits the open transaction (the input paused: its output should not wait).
        Returns the number of records processed. Errors as :meth:`run`."""
        if self._closed:
            raise CoopConsumerError("the processor is closed")
        return self._drive(self._loop.step(timeout))

    def close(self, timeout: float | None = None) -> None:
        """Commit the open transaction (abort it if that fails, or after a fatal
        error), leave the group (``Consumer.close``) and close the producer.
        Idempotent; the processor is closed when this returns or raises."""
        if self._closed:
            return
        try:
            self._drive(self._loop.close())
        finally:
            self._closed = True
            try:
                self._consumer.close(timeout)
            finally:
                self._producer.close()

    def __enter__(self) -> TransactionalProcessor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
