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

The decisions above live once, in ``_transaction_loop.TransactionLoop`` (sans-I/O):
generators that yield what they need done (a producer call, a consume, the process
function) and get the result back. ``TransactionalProcessor`` performs those requests
on its thread; ``coopconsumer.aio.AsyncTransactionalProcessor`` awaits them
(docs/exactly-once.md, "One core, two loops"). What both drivers share is here too:
checking the configuration, building the consumer and the producer, the KIP-447 check
of the brokers.

Imports the facade (``_consumer``), the transactional producer, the loop and config;
with ``aio._transactional`` the only modules of the package that drive both a consumer
and a producer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol, Self, TypeVar

import attrs

from ._config import ConsumerConfig
from ._consumer import Consumer
from ._errors import ConfigurationError, CoopConsumerError, IncompatibleVersionError
from ._io._member_factory import client_for
from ._listener import RebalanceListener, RebalanceListenerLike
from ._security import is_security_key
from ._transaction_loop import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_COMMIT_INTERVAL_MS,
    DEFAULT_MAX_RECORDS_PER_TRANSACTION,
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    CheckBrokers,
    Consume,
    Process,
    ProducerCall,
    ProducerLike,
    Steps,
    TransactionalOutput,
    TransactionLoop,
    TransactionStats,
)
from ._types import ConsumerGroupMetadata, TopicPartition

if TYPE_CHECKING:
    # Imported when a processor is built, not with the package: it loads librdkafka.
    from ._io._fetcher import Record as Message

# TransactionalOutput and TransactionStats are the processor's public face too
# (coopconsumer's lazy names point here).
__all__ = ["ProcessFunction", "TransactionStats", "TransactionalOutput", "TransactionalProcessor"]

_R = TypeVar("_R")

#: TxnOffsetCommit v3 carries the generation, member id and instance id (KIP-447).
_TXN_OFFSET_COMMIT: Final = 28
_KIP447_VERSION: Final = 3


#: ``process(records, output)``: handle a batch of consumed records, writing what
#: they produce through ``output``. Called on the thread running the processor.
ProcessFunction = Callable[[list["Message"], TransactionalOutput], None]


class _ConsumerLike(Protocol):
    """What the processor needs of ``Consumer`` (tests substitute a scripted fake)."""

    def subscribe(self, topics: list[str], listener: RebalanceListener) -> None: ...

    def consume(self, num_messages: int, timeout: float) -> list[Message]: ...

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    def assignment(self) -> frozenset[TopicPartition]: ...

    def group_metadata(self) -> ConsumerGroupMetadata: ...

    def metrics(self) -> dict[str, float]: ...

    def close(self, timeout: float | None = None) -> None: ...


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


def perform_blocking(
    request: ProducerCall | CheckBrokers,
    producer: ProducerLike,
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
        producer: ProducerLike,
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
        producer: ProducerLike,
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
            stopping=threading.Event(),
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
