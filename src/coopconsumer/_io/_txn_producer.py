"""A transactional confluent-kafka producer for exactly-once processing (KIP-98, KIP-447).

One of the library modules that import ``confluent_kafka`` (with the fetcher and the
idempotent producer). It knows nothing of consumer groups beyond the
``ConsumerGroupMetadata`` it is handed: the processing loop
(``coopconsumer._transactional``) decides when to begin, commit and abort.

What it adds to confluent-kafka's transactional API:

* one classification of librdkafka's errors into *retriable* (the same call is
  repeated until the transaction timeout), *abortable* (``TransactionAbortedError``,
  raised while the transaction is still open: the caller aborts it and replays) and
  *fatal* (``TransactionError(fatal=True)``, ``ProducerFencedError``), with a fenced
  producer fatal even where librdkafka calls it abortable (PRODUCER_FENCED on
  TxnOffsetCommit, as Java treats it; docs/exactly-once.md, "Failures");
* aborts bounded in time, so a coordinator that never answers an abort (a fenced
  producer on some brokers) ends in a fatal error instead of a hang;
* a refusal to send offsets without a generation or member id (that would commit
  without KIP-447 fencing) and a check, at first use, that the group metadata bytes
  coopconsumer writes are the ones the installed confluent-kafka writes itself;
* per-transaction delivery counts and the first delivery failure, for error messages.

Not thread-safe: one thread uses a producer, as the processing loop does.
"""

from __future__ import annotations

import functools
import logging
import string
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import attrs
import confluent_kafka

from .._errors import (
    ConfigurationError,
    IncompatibleVersionError,
    ProducerFencedError,
    TransactionAbortedError,
    TransactionError,
)
from .._types import ConsumerGroupMetadata, TopicPartition
from ._failure_log import FailureLog, LibrdkafkaLog
from ._producer import Headers, common_producer_config

__all__ = [
    "TransactionalProducer",
    "check_group_metadata",
    "group_metadata_format_mismatch",
    "librdkafka_group_metadata",
    "transactional_producer_config",
    "verify_group_metadata_format",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: librdkafka's default ``transaction.timeout.ms``.
DEFAULT_TRANSACTION_TIMEOUT_MS: Final = 60_000
#: Pause between retries of a retriable transactional call.
_RETRY_PAUSE_S: Final = 0.1
#: How long produce() waits for room in a full queue before polling again.
_QUEUE_FULL_POLL_S: Final = 0.05
#: produce() serves (error) delivery reports every this many records, plus one.
_POLL_EVERY_MASK: Final = 1023

_KE = confluent_kafka.KafkaError
#: Errors meaning another producer owns the transactional id now. librdkafka makes
#: INVALID_PRODUCER_EPOCH fatal (``_FENCED``) but PRODUCER_FENCED answered to
#: TxnOffsetCommit, AddOffsetsToTxn or Produce only abortable; Java makes both fatal, and
#: an abort after them cannot complete on every broker, so both are fatal here.
_FENCED_CODES: Final = frozenset({_KE._FENCED, _KE.INVALID_PRODUCER_EPOCH, _KE.PRODUCER_FENCED})
_PRINTABLE: Final = frozenset(string.printable) - frozenset("\t\n\r\x0b\x0c")


def transactional_producer_config(config: Mapping[str, object]) -> dict[str, Any]:
    """Validate a transactional producer configuration and return it completed.

    As the idempotent producer's (``enable.idempotence=true``, ``acks=all``, the
    security keys, librdkafka's own checks), plus: ``transactional.id`` is required
    (a non-empty string of printable ASCII); ``transaction.timeout.ms``, when given,
    is a positive number of milliseconds, and ``message.timeout.ms`` is left to
    librdkafka, which derives it from the transaction timeout. Raises
    ``ConfigurationError`` naming the key.
    """
    conf = common_producer_config(config, transactional=True)
    txn_id = conf.get("transactional.id")
    if not isinstance(txn_id, str) or not txn_id.strip():
        raise ConfigurationError(
            "exactly-once needs a transactional.id in the producer config: one per "
            "process, stable across its restarts (docs/exactly-once.md, 'Choosing the "
            "transactional.id')"
        )
    if not set(txn_id) <= _PRINTABLE:
        raise ConfigurationError(
            f"transactional.id {txn_id!r} must be printable ASCII (librdkafka's limit)"
        )
    return conf


def transaction_timeout_ms(conf: Mapping[str, Any]) -> int:
    """The ``transaction.timeout.ms`` a completed config gives (librdkafka's default
    when absent). Raises ``ConfigurationError`` for a value that is not a positive
    number of milliseconds."""
    value = conf.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)
    try:
        ms = int(str(value).strip()) if not isinstance(value, bool) else -1
    except ValueError:
        ms = -1
    if ms <= 0:
        raise ConfigurationError(
            f"invalid value {value!r} for 'transaction.timeout.ms': expected a positive "
            "number of milliseconds"
        )
    return ms


def check_group_metadata(metadata: ConsumerGroupMetadata) -> None:
    """Refuse metadata that would commit offsets without KIP-447 fencing or that
    librdkafka cannot read.

    Kafka accepts a transactional offset commit with generation -1, no member id and
    no instance id on any group, fencing nothing: a member that lost its partitions
    would commit over their new owner. Raises ``TransactionAbortedError`` for a
    member outside a generation, ``ConfigurationError`` for ids librdkafka refuses
    (not printable ASCII)."""
    for what, value in (
        ("group.id", metadata.group_id),
        ("member id", metadata.member_id),
        ("group.instance.id", metadata.group_instance_id or ""),
    ):
        if not set(value) <= _PRINTABLE:
            raise ConfigurationError(
                f"{what} {value!r} cannot be sent with a transaction: confluent-kafka "
                "accepts only printable ASCII there"
            )
    if metadata.generation_id < 0 or not metadata.member_id:
        raise TransactionAbortedError(
            f"the consumer is not in a generation of group {metadata.group_id!r} "
            f"(generation {metadata.generation_id}, member id {metadata.member_id!r}): "
            "offsets sent now would not be fenced (KIP-447), so the transaction is aborted",
            reason="not in a generation",
        )


#: The known states compared: a consumer that never joined, without and with a static
#: instance id (generation -1, member id "").
_FORMAT_CHECK_GROUP: Final = "coopconsumer-format-check"
_FORMAT_CHECK_INSTANCES: Final = (None, "coopconsumer-format-check-instance")


def librdkafka_group_metadata(group_id: str, group_instance_id: str | None) -> bytes:
    """What the installed confluent-kafka's ``consumer_group_metadata()`` returns for a
    consumer of ``group_id`` that never joined (no broker is contacted)."""
    conf: dict[str, object] = {"group.id": group_id, "log_level": 0}
    if group_instance_id is not None:
        conf["group.instance.id"] = group_instance_id
    probe = confluent_kafka.Consumer(conf)
    try:
        blob = probe.consumer_group_metadata()
    finally:
        probe.close()
    return bytes(blob)


def group_metadata_format_mismatch(
    probe: Callable[[str, str | None], bytes],
) -> tuple[bytes, bytes] | None:
    """``(theirs, ours)`` for the first known state whose bytes ``probe`` (a reference
    implementation, normally :func:`librdkafka_group_metadata`) writes differently from
    :class:`ConsumerGroupMetadata`; None when all agree."""
    for instance in _FORMAT_CHECK_INSTANCES:
        theirs = probe(_FORMAT_CHECK_GROUP, instance)
        ours = bytes(
            ConsumerGroupMetadata(group_id=_FORMAT_CHECK_GROUP, group_instance_id=instance)
        )
        if theirs != ours:
            return theirs, ours
    return None


@functools.cache
def verify_group_metadata_format() -> None:
    """Check, once per process, that :class:`ConsumerGroupMetadata`'s bytes are what
    the installed confluent-kafka writes for the same state.

    librdkafka's serialized group metadata is private to it (``rdkafka_cgrp.c``);
    coopconsumer writes it itself from its own member. A consumer that never joined
    has a known state, read without any broker. Raises ``IncompatibleVersionError``
    naming confluent-kafka's and librdkafka's versions if the bytes differ: no offsets
    are sent then.
    """
    mismatch = group_metadata_format_mismatch(librdkafka_group_metadata)
    if mismatch is not None:
        theirs, ours = mismatch
        raise IncompatibleVersionError(
            f"confluent-kafka {_client_version()} (librdkafka "
            f"{confluent_kafka.libversion()[0]}) serializes consumer group metadata as "
            f"{theirs!r}, not as coopconsumer writes it ({ours!r}): transactional offset "
            "commits are refused rather than sent with metadata librdkafka may misread"
        )


@attrs.define(kw_only=True)
class _Deliveries:
    """Failed deliveries of the open transaction."""

    failed: int = 0
    first_failure: confluent_kafka.KafkaError | None = None
    first_failure_topic: str = ""


class TransactionalProducer:
    """A confluent-kafka ``Producer`` with a ``transactional.id``.

    ``config`` goes through :func:`transactional_producer_config`. Call :meth:`init`
    once, then per transaction :meth:`begin`, :meth:`produce` (any number),
    :meth:`send_offsets`, and :meth:`commit` or :meth:`abort`.

    Errors: a retriable one is retried inside the call until the call's timeout
    (``transaction.timeout.ms`` by default); an abortable one raises
    ``TransactionAbortedError`` (the transaction is still open: call :meth:`abort`);
    a fatal one raises
    ``TransactionError(fatal=True)`` or ``ProducerFencedError``, after which every call
    raises it again.
    """

    def __init__(
        self,
        config: Mapping[str, object],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        checked = transactional_producer_config(config)
        self.transactional_id: str = checked["transactional.id"]
        self.transaction_timeout_s = transaction_timeout_ms(checked) / 1000.0
        self._clock = clock
        conf: dict[str, object] = dict(checked)
        conf["error_cb"] = self._on_client_error
        # Each distinct failure once per reconnect.backoff.max.ms (issue 35).
        self._failures = FailureLog.for_config(log, conf)
        conf["logger"] = LibrdkafkaLog(log, self._failures)
        # Only failed records are reported: a callback per delivered record would cost
        # a Python call per record, and commit_transaction() waits for every delivery
        # anyway (it fails, abortably, when one failed).
        conf["on_delivery"] = self._on_delivery
        conf["delivery.report.only.error"] = True
        try:
            self._producer = confluent_kafka.Producer(conf)
        except confluent_kafka.KafkaException as exc:  # checked already; kept as a net
            raise ConfigurationError(f"invalid producer configuration: {exc}") from exc
        self._fatal: TransactionError | None = None
        self._initialized = False
        self._in_transaction = False
        self._deliveries = _Deliveries()
        self._produced = 0
        self._closed = False

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (begun, not yet committed or aborted)."""
        return self._in_transaction

    @property
    def fatal_error(self) -> TransactionError | None:
        """The fatal error that made this producer unusable, if any."""
        return self._fatal

    def init(self, timeout_s: float | None = None) -> None:
        """``init_transactions``: fence older producers with this ``transactional.id``
        and abort what they left open. Retried until ``timeout_s`` (default: twice the
        transaction timeout, librdkafka's own bound)."""
        if self._initialized:
            return
        bound = 2 * self.transaction_timeout_s if timeout_s is None else timeout_s
        self._call("init_transactions", self._producer.init_transactions, bound)
        # init_transactions() serves no callbacks: hand over the log lines of the
        # failures it waited through first, so the recovery is said after them.
        self._producer.poll(0)
        self._failures.recovered("the transaction coordinator answered")
        self._initialized = True

    def begin(self) -> None:
        """Open a transaction."""
        self._check()
        if not self._initialized:
            raise TransactionError("begin() before init()", fatal=True)
        self._call("begin_transaction", lambda _t: self._producer.begin_transaction(), None)
        self._in_transaction = True
        self._deliveries = _Deliveries()

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
        """Queue one record in the open transaction (``partition=None``: the
        partitioner chooses). Waits while librdkafka's queue is full. Raises
        ``TransactionAbortedError`` (permanent) if librdkafka refuses the record (too
        large, unknown partition...): the transaction must be aborted."""
        if self._fatal is not None or not self._in_transaction or self._closed:
            self._check()
            raise TransactionError("produce() outside a transaction", fatal=False)
        # The common case without keywords: this runs once per output record.
        plain = partition is None and not headers and timestamp is None
        while True:
            try:
                if plain:
                    self._producer.produce(topic, value, key)
                else:
                    self._producer.produce(
                        topic,
                        value,
                        key,
                        **_produce_options(partition, headers, timestamp),
                    )
            except BufferError:
                # Room appears as records are delivered; librdkafka fails them at the
                # transaction timeout at the latest, so this wait is bounded.
                self._producer.poll(_QUEUE_FULL_POLL_S)
                continue
            except confluent_kafka.KafkaException as exc:
                err = _error_of(exc)
                self._raise_fatal_if(err, "produce")
                raise _aborted("record refused", err, permanent=True) from exc
            break
        self._produced += 1
        if not self._produced & _POLL_EVERY_MASK:
            # Delivery reports are errors only (delivery.report.only.error); serving
            # them now and then keeps the queue of reports short.
            self._producer.poll(0)

    def send_offsets(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: ConsumerGroupMetadata,
        timeout_s: float | None = None,
    ) -> None:
        """Add the consumed ``offsets`` (the next offset to read, per partition) to the
        open transaction, fenced by ``group_metadata`` (KIP-447).

        Raises ``TransactionAbortedError`` for metadata outside a generation and when
        the group refuses them (a generation that
        is gone, an unknown member: this member's partitions may belong to another
        now), the fatal errors otherwise."""
        self._check()
        verify_group_metadata_format()
        check_group_metadata(group_metadata)
        positions = [
            confluent_kafka.TopicPartition(tp.topic, tp.partition, offset)
            for tp, offset in sorted(offsets.items())
        ]
        blob = bytes(group_metadata)
        self._call(
            "send_offsets_to_transaction",
            lambda t: self._producer.send_offsets_to_transaction(positions, blob, t),
            timeout_s,
        )

    def commit(self, timeout_s: float | None = None) -> None:
        """Flush and commit the open transaction. ``TransactionAbortedError`` when it
        cannot commit (a record failed, the coordinator aborted it): call :meth:`abort`."""
        self._check()
        self._call("commit_transaction", self._producer.commit_transaction, timeout_s)
        self._failures.recovered("a transaction was committed")
        self._in_transaction = False

    def abort(self, timeout_s: float | None = None) -> None:
        """Abort the open transaction: queued records are purged, what was written is
        marked aborted, the offsets sent with it are discarded. Retried until
        ``timeout_s`` (default: the transaction timeout); an abort that cannot complete
        by then is fatal (the coordinator aborts the transaction itself when it times
        out)."""
        self._check()
        try:
            self._call("abort_transaction", self._producer.abort_transaction, timeout_s)
        except TransactionAbortedError as exc:  # librdkafka never asks to abort an abort
            self._set_fatal(TransactionError(f"abort_transaction failed: {exc}", fatal=True), exc)
            raise self._fatal from exc  # type: ignore[misc]
        self._in_transaction = False

    def delivery_failure(self) -> str | None:
        """The first delivery failure of the open (or last) transaction, as text."""
        d = self._deliveries
        if d.first_failure is None:
            return None
        return (
            f"{d.failed} record(s) not delivered; first to {d.first_failure_topic!r}: "
            f"{d.first_failure.name()} ({d.first_failure.str()})"
        )

    def poll(self, timeout_s: float = 0.0) -> None:
        """Serve delivery reports."""
        if not self._closed:
            self._producer.poll(timeout_s)
            self._failures.settle()

    def close(self, timeout_s: float = 5.0) -> None:
        """Release librdkafka. An open transaction is left to be aborted by the
        coordinator (call :meth:`abort` first to end it now). Idempotent."""
        if self._closed:
            return
        self._closed = True
        # flush() waits for outstanding records; in a transaction there are none after
        # commit or abort, and the fatal state needs no flush.
        if self._fatal is None and not self._in_transaction:
            self._producer.flush(timeout_s)

    # ------------------------------------------------------------------ internals

    def _check(self) -> None:
        if self._closed:
            raise TransactionError("the transactional producer is closed", fatal=True)
        if self._fatal is not None:
            raise self._fatal

    def _call(self, what: str, fn: Callable[[float], _T], timeout_s: float | None) -> _T:
        """Run a transactional call, repeating it while librdkafka says it is retriable
        (send_offsets_to_transaction is repeated with the same arguments, as librdkafka
        asks), until ``timeout_s`` (default: the transaction timeout)."""
        bound = self.transaction_timeout_s if timeout_s is None else timeout_s
        deadline = self._clock() + bound
        while True:
            remaining = max(0.0, deadline - self._clock())
            try:
                return fn(remaining)
            except confluent_kafka.KafkaException as exc:
                err = _error_of(exc)
                self._raise_fatal_if(err, what)
                if err.txn_requires_abort():
                    raise _aborted(
                        self._abort_reason(err), err, permanent=self._permanent(err)
                    ) from exc
                if err.retriable() and self._clock() + _RETRY_PAUSE_S < deadline:
                    log.info("%s: %s, retrying", what, err.str())
                    time.sleep(_RETRY_PAUSE_S)
                    continue
                if err.retriable():
                    error = TransactionError(
                        f"{what} did not complete within {bound:.1f} s: {err.name()}: {err.str()}",
                        fatal=True,
                        code=err.code(),
                        name=err.name(),
                    )
                else:
                    # _STATE, _BAD_MSG, _CONFLICT: a misuse librdkafka does not classify;
                    # its documentation says to treat them as fatal.
                    error = TransactionError(
                        f"{what} failed: {err.name()}: {err.str()}",
                        fatal=True,
                        code=err.code(),
                        name=err.name(),
                    )
                self._set_fatal(error, exc)
                raise error from exc

    def _raise_fatal_if(self, err: confluent_kafka.KafkaError, what: str) -> None:
        first = self._deliveries.first_failure
        if first is not None and first.code() in _FENCED_CODES:
            err = first  # a record refused because another producer took the id over
        if err.code() in _FENCED_CODES:
            error: TransactionError = ProducerFencedError(
                f"{what}: the producer with transactional.id {self.transactional_id!r} was "
                f"fenced ({err.name()}: {err.str()}): another producer uses this id now, "
                "or the coordinator aborted the transaction. This process must stop; "
                "close the processor",
                code=err.code(),
                name=err.name(),
            )
        elif err.fatal():
            error = TransactionError(
                f"{what}: fatal producer error {err.name()}: {err.str()}",
                fatal=True,
                code=err.code(),
                name=err.name(),
            )
        else:
            return
        self._set_fatal(error, None)
        raise error

    def _set_fatal(self, error: TransactionError, cause: BaseException | None) -> None:
        if cause is not None:
            error.__cause__ = cause
        if self._fatal is None:
            self._fatal = error
            log.error("transactional producer %r: %s", self.transactional_id, error)
        self._in_transaction = False

    def _abort_reason(self, err: confluent_kafka.KafkaError) -> str:
        code = err.code()
        if code in (_KE.ILLEGAL_GENERATION, _KE.UNKNOWN_MEMBER_ID, _KE.FENCED_INSTANCE_ID):
            return "group generation fenced"
        if code == _KE.REBALANCE_IN_PROGRESS:
            return "rebalance in progress"
        if self._deliveries.first_failure is not None:
            return "delivery failed"
        return "transaction aborted by the coordinator"

    def _permanent(self, err: confluent_kafka.KafkaError) -> bool:
        first = self._deliveries.first_failure
        candidates = [err] if first is None else [err, first]
        return any(e.code() in _PERMANENT_CODES for e in candidates)

    def _on_delivery(
        self, err: confluent_kafka.KafkaError | None, msg: confluent_kafka.Message
    ) -> None:
        if err is None:  # not reported (delivery.report.only.error); kept safe
            return
        d = self._deliveries
        d.failed += 1
        if d.first_failure is None:
            d.first_failure = err
            d.first_failure_topic = msg.topic() or ""

    def _on_client_error(self, err: confluent_kafka.KafkaError) -> None:
        self._failures.note_client_error(err.str())
        if err.fatal():
            log.error(
                "transactional producer %r: fatal error %s: %s",
                self.transactional_id,
                err.name(),
                err.str(),
            )
        else:
            log.debug(
                "transactional producer %r: %s: %s", self.transactional_id, err.name(), err.str()
            )


#: Errors that replaying the same records cannot cure: the record, the topic or the
#: permissions are wrong.
_PERMANENT_CODES: Final = frozenset(
    {
        _KE.MSG_SIZE_TOO_LARGE,
        _KE.INVALID_RECORD,
        _KE.RECORD_LIST_TOO_LARGE,
        _KE.TOPIC_AUTHORIZATION_FAILED,
        _KE.UNKNOWN_TOPIC_OR_PART,
        _KE._UNKNOWN_TOPIC,
        _KE._UNKNOWN_PARTITION,
        _KE.TOPIC_EXCEPTION,
    }
)


def _aborted(
    reason: str, err: confluent_kafka.KafkaError, *, permanent: bool
) -> TransactionAbortedError:
    return TransactionAbortedError(
        f"{reason}: {err.name()}: {err.str()}",
        reason=reason,
        permanent=permanent,
        code=err.code(),
        name=err.name(),
    )


def _produce_options(
    partition: int | None, headers: Headers | None, timestamp: int | None
) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if partition is not None:
        options["partition"] = partition
    if headers:
        options["headers"] = list(headers)
    if timestamp is not None:
        options["timestamp"] = timestamp
    return options


def _error_of(exc: confluent_kafka.KafkaException) -> confluent_kafka.KafkaError:
    err = exc.args[0] if exc.args else None
    if isinstance(err, confluent_kafka.KafkaError):
        return err
    return confluent_kafka.KafkaError(_KE._FAIL, str(exc))


def _client_version() -> str:
    version: object = confluent_kafka.version()
    # confluent-kafka's version() is a (str, int) tuple in most releases, a str in some.
    return version[0] if isinstance(version, tuple) else str(version)
