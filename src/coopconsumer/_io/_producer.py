"""Producing records through confluent-kafka (librdkafka) with the idempotent producer.

One of the two library modules that import ``confluent_kafka`` (the other is the
fetcher). General-purpose: it knows nothing of Spark or of consumer groups, and it is
what the Kafka writers (``coopconsumer.spark``) and, later, admin tools build on.

``producer_config`` validates and completes a Kafka-style configuration once (on a
Spark driver, long before any executor runs); ``IdempotentProducer`` produces, counts
every delivery report per partition, and ``flush`` waits until each record produced
was either acknowledged or failed, within a bound derived from ``message.timeout.ms``.

Security keys (``security.protocol``, ``ssl.*``, ``sasl.*``, ``oauth_cb``) are checked by
the same parser as the consumer's (``_security``), so a contradiction is the same
``ConfigurationError`` naming the key, and a secret is never quoted.

Imports ``_errors``, ``_security`` and ``_types`` of the library and nothing else of it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType, TracebackType
from typing import Any, TypeAlias

import attrs
import confluent_kafka

from .._errors import ConfigurationError, DeliveryError
from .._security import is_security_key, parse_security
from .._types import TopicPartition
from ._failure_log import FailureLog, LibrdkafkaLog

__all__ = [
    "DEFAULT_MESSAGE_TIMEOUT_MS",
    "DEFAULT_PARTITIONER",
    "ConfigValue",
    "DeliveryFailure",
    "DeliveryReport",
    "Headers",
    "IdempotentProducer",
    "common_producer_config",
    "producer_config",
]

log = logging.getLogger(__name__)

ConfigValue: TypeAlias = str | int | float | bool
#: Record headers as confluent-kafka takes them: (name, value) pairs, names repeatable.
Headers: TypeAlias = Sequence[tuple[str, bytes | None]]

#: Default ``message.timeout.ms``: how long a record may wait for its acknowledgement
#: before it fails. librdkafka's own default is 300000 (5 min), far too long for a Spark
#: task facing an unreachable cluster; 30 s still rides out a leader election.
DEFAULT_MESSAGE_TIMEOUT_MS = 30_000

#: Default ``partitioner``: Java's (murmur2 of the key, random for null keys), so that
#: keyed records land on the same partition as when Java or Kafka Streams produce them.
#: librdkafka's own default (``consistent_random``, CRC32) would not.
DEFAULT_PARTITIONER = "murmur2_random"

# Slack on top of message.timeout.ms before flush() gives up on librdkafka: it scans
# for timed-out records about once a second and a request already in flight may
# still be answered, so reports can arrive slightly after the timeout itself.
_FLUSH_SLACK_S = 10.0
# Longest single flush() call, so that the loop re-checks its own deadline.
_FLUSH_STEP_S = 1.0
# How long produce() waits for room when librdkafka's queue is full before retrying.
_QUEUE_FULL_POLL_S = 0.1

_TRUE = frozenset({"true", "t", "1"})
_FALSE = frozenset({"false", "f", "0"})

# Keys the producer owns. The delivery-report callback and flush loop need a report for
# every record; transactions need one transactional.id per producer, which a writer
# running as N identical Spark tasks cannot hand out safely.
_FORBIDDEN = {
    "transactional.id": "transactions are not supported (the producer is idempotent only)",
    "delivery.report.only.error": "the producer must see every delivery report",
    "dr_cb": "the producer owns the delivery callbacks",
    "dr_msg_cb": "the producer owns the delivery callbacks",
    "on_delivery": "the producer owns the delivery callbacks",
    "error_cb": "the producer owns the error callback",
    "logger": "the producer routes librdkafka's log to Python logging itself",
}
_TIMEOUT_KEYS = ("message.timeout.ms", "delivery.timeout.ms")


def _as_bool(key: str, value: ConfigValue) -> bool:
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigurationError(f"invalid value {value!r} for {key!r}: expected true or false")


def _positive_ms(key: str, value: ConfigValue) -> int:
    try:
        ms = int(str(value).strip()) if not isinstance(value, bool) else -1
    except ValueError:
        ms = -1
    if ms <= 0:
        # librdkafka reads 0 as "wait forever", which is exactly the hang to avoid.
        raise ConfigurationError(
            f"invalid value {value!r} for {key!r}: expected a positive number of "
            "milliseconds (0 would wait for an acknowledgement forever)"
        )
    return ms


def producer_config(config: Mapping[str, object]) -> dict[str, Any]:
    """Validate a producer configuration and return it completed.

    ``config`` holds librdkafka/Kafka keys with ``str``/``int``/``float``/``bool``
    values and must name ``bootstrap.servers``. The result always has
    ``enable.idempotence=true`` and ``acks=all`` (asking for anything else is a
    ``ConfigurationError``), ``message.timeout.ms`` (default
    :data:`DEFAULT_MESSAGE_TIMEOUT_MS`, or the value of its alias
    ``delivery.timeout.ms``; 0 is refused because it means "forever") and
    ``partitioner`` (default :data:`DEFAULT_PARTITIONER`). Callback keys,
    ``transactional.id`` and ``delivery.report.only.error`` are refused. librdkafka
    itself then checks every key and value (unknown keys, bad values, settings the
    idempotent producer cannot have such as ``max.in.flight`` > 5) without connecting
    anywhere; what it rejects is a ``ConfigurationError`` carrying its message.
    Security keys go through coopconsumer's own checks first (``oauth_cb`` may be a
    callable, as confluent-kafka's); the result holds them in librdkafka's form,
    secrets included: do not log it.
    """
    return common_producer_config(config, transactional=False)


def common_producer_config(config: Mapping[str, object], *, transactional: bool) -> dict[str, Any]:
    """:func:`producer_config`, or with ``transactional`` the checks a transactional
    producer shares with it: ``transactional.id`` is allowed, and no
    ``message.timeout.ms`` is filled in (librdkafka derives it from
    ``transaction.timeout.ms`` and refuses one above it)."""
    if not isinstance(config, Mapping):
        raise ConfigurationError(
            f"producer config must be a mapping of Kafka keys, not {type(config).__name__}"
        )
    conf: dict[str, Any] = {}
    security: dict[str, object] = {}
    for key, value in config.items():
        if not isinstance(key, str):
            raise ConfigurationError(f"configuration keys must be strings, not {key!r}")
        if key in _FORBIDDEN and not (transactional and key == "transactional.id"):
            raise ConfigurationError(f"{key!r} cannot be set: {_FORBIDDEN[key]}")
        if is_security_key(key.strip()):
            security[key.strip()] = value
            continue
        if not isinstance(value, str | int | float | bool):
            raise ConfigurationError(
                f"invalid value {value!r} for {key!r}: expected a string, number or boolean"
            )
        conf[key] = value
    if security:
        conf.update(parse_security(security).librdkafka_config())
    servers = conf.get("bootstrap.servers")
    if not isinstance(servers, str) or not servers.strip():
        raise ConfigurationError("producer config needs bootstrap.servers ('host:port,...')")
    if "enable.idempotence" in conf and not _as_bool(
        "enable.idempotence", conf["enable.idempotence"]
    ):
        raise ConfigurationError(
            "enable.idempotence cannot be false: the producer is always idempotent, so "
            "librdkafka's retries never write a record twice"
        )
    conf["enable.idempotence"] = True
    for key in ("acks", "request.required.acks"):
        if key in conf and str(conf[key]).strip().lower() not in {"all", "-1"}:
            raise ConfigurationError(
                f"invalid value {conf[key]!r} for {key!r}: the idempotent producer "
                "needs acks=all (-1)"
            )
    if "request.required.acks" not in conf:
        conf.setdefault("acks", "all")
    given = [key for key in _TIMEOUT_KEYS if key in conf]
    for key in given:
        _positive_ms(key, conf[key])
    if not given and not transactional:
        conf["message.timeout.ms"] = DEFAULT_MESSAGE_TIMEOUT_MS
    conf.setdefault("partitioner", DEFAULT_PARTITIONER)
    _check_with_librdkafka(conf)
    return conf


def _check_with_librdkafka(conf: Mapping[str, Any]) -> None:
    # A handle with no bootstrap.servers validates every setting and never connects;
    # log_level 0 hides the warning that no broker is configured.
    probe = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    probe["log_level"] = 0
    try:
        handle = confluent_kafka.Producer(probe)
    except confluent_kafka.KafkaException as exc:
        err = exc.args[0] if exc.args else None
        text = err.str() if isinstance(err, confluent_kafka.KafkaError) else str(exc)
        raise ConfigurationError(f"invalid producer configuration: {text}") from exc
    handle.close()


def _message_timeout_ms(conf: Mapping[str, Any]) -> int:
    # Both keys name the same librdkafka property; the later one in the mapping wins
    # there, so it wins here too.
    ms = DEFAULT_MESSAGE_TIMEOUT_MS
    for key, value in conf.items():
        if key in _TIMEOUT_KEYS:
            ms = _positive_ms(key, value)
    return ms


@attrs.frozen(kw_only=True)
class DeliveryFailure:
    """Why one record was not acknowledged.

    ``partition`` is -1 when the record was never assigned one (e.g. no broker could
    be reached to learn the topic's partitions). ``code``/``name`` are Kafka's error
    (positive codes) or librdkafka's local one (negative, names starting with ``_``).
    """

    topic: str
    partition: int
    code: int
    name: str
    description: str
    retriable: bool


def _frozen_counts(counts: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
    return MappingProxyType(dict(sorted(counts.items())))


@attrs.frozen(kw_only=True)
class DeliveryReport:
    """Delivery reports of every record a producer was given, counted per partition.

    ``delivered`` counts acknowledged records per partition; ``failed`` counts failed
    ones (partition -1: never assigned one); ``first_failure`` is the earliest failure
    reported; ``client_error`` the last error librdkafka reported for the client as a
    whole (e.g. "all brokers down"), which often says why records failed.
    """

    delivered: Mapping[TopicPartition, int] = attrs.field(converter=_frozen_counts)
    failed: Mapping[TopicPartition, int] = attrs.field(converter=_frozen_counts)
    first_failure: DeliveryFailure | None = None
    client_error: str | None = None

    @property
    def delivered_total(self) -> int:
        """Records acknowledged."""
        return sum(self.delivered.values())

    @property
    def failed_total(self) -> int:
        """Records that failed."""
        return sum(self.failed.values())

    def raise_for_failure(self) -> None:
        """Raise :class:`~coopconsumer.DeliveryError` if any record failed."""
        first = self.first_failure
        if first is None:
            return
        failed = self.failed_total
        total = failed + self.delivered_total
        text = (
            f"{failed} of {total} records were not delivered; first failure: "
            f"topic {first.topic!r} partition {first.partition}: {first.name} "
            f"({first.description})"
        )
        if self.client_error:
            text += f"; last client error: {self.client_error}"
        raise DeliveryError(
            text,
            topic=first.topic,
            partition=first.partition,
            code=first.code,
            name=first.name,
            retriable=first.retriable,
            failed=failed,
        )


class IdempotentProducer:
    """A confluent-kafka ``Producer`` with ``enable.idempotence=true`` and ``acks=all``.

    ``config`` goes through :func:`producer_config` (which raises
    ``ConfigurationError``). Every record given to :meth:`produce` gets exactly one
    delivery report; :meth:`flush` waits for all of them and returns the counts.
    librdkafka's log goes to this module's Python logger instead of stderr.

    Within one producer, librdkafka's retries never duplicate or reorder a record
    (KIP-98 sequence numbers); a *new* producer writing the same records again (a
    retried Spark task) does write them again.

    Not thread-safe: use it from one thread. Delivery callbacks run inside
    ``produce``/``flush`` on that thread.
    """

    def __init__(
        self,
        config: Mapping[str, object],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        checked = producer_config(config)
        self._timeout_s = _message_timeout_ms(checked) / 1000.0
        conf: dict[str, object] = dict(checked)
        self._clock = clock
        conf["error_cb"] = self._on_client_error
        # Each distinct failure once per reconnect.backoff.max.ms (issue 35).
        self._failures = FailureLog.for_config(log, conf)
        conf["logger"] = LibrdkafkaLog(log, self._failures)
        try:
            self._producer = confluent_kafka.Producer(conf)
        except confluent_kafka.KafkaException as exc:  # checked already; kept as a net
            raise ConfigurationError(f"invalid producer configuration: {exc}") from exc
        self._pending: Counter[str] = Counter()  # per topic
        self._last_produce = clock()
        self._delivered: Counter[TopicPartition] = Counter()
        self._failed: Counter[TopicPartition] = Counter()
        self._first_failure: DeliveryFailure | None = None
        self._client_error: str | None = None
        self._closed = False

    @property
    def message_timeout_s(self) -> float:
        """``message.timeout.ms`` in seconds: the longest a record waits to be acked."""
        return self._timeout_s

    @property
    def pending(self) -> int:
        """Records produced whose delivery report has not arrived yet."""
        return self._pending.total()

    @property
    def has_failed(self) -> bool:
        """Whether any record failed so far (reports served by produce/flush only)."""
        return self._first_failure is not None

    def produce(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        """Queue one record; ``partition=None`` lets the partitioner choose.

        Waits while librdkafka's queue is full (serving delivery reports meanwhile;
        records time out after ``message.timeout.ms``, so the wait is bounded). A
        record librdkafka refuses outright (e.g. larger than ``message.max.bytes``, or
        a queue that stayed full for ``message.timeout.ms``) is counted as a failed
        delivery, not raised: :meth:`flush` reports it with the others.
        Raises ``RuntimeError`` after :meth:`close`.
        """
        if self._closed:
            raise RuntimeError("produce() on a closed IdempotentProducer")
        full_since: float | None = None
        while True:
            try:
                self._producer.produce(
                    topic,
                    value,
                    key,
                    partition=-1 if partition is None else partition,
                    on_delivery=self._on_delivery,
                    headers=list(headers) if headers else None,
                )
            except BufferError:
                # Queued records leave by delivery or by timing out, so room appears
                # within message.timeout.ms; the bound guards against librdkafka
                # never freeing it.
                now = self._clock()
                if full_since is None:
                    full_since = now
                elif now - full_since > self._timeout_s + _FLUSH_SLACK_S:
                    full = confluent_kafka.KafkaError(confluent_kafka.KafkaError._QUEUE_FULL)
                    self._record_failure(topic, -1 if partition is None else partition, full)
                    return
                self._producer.poll(_QUEUE_FULL_POLL_S)
                continue
            except confluent_kafka.KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if not isinstance(err, confluent_kafka.KafkaError):
                    raise
                self._record_failure(topic, -1 if partition is None else partition, err)
                return
            break
        self._pending[topic] += 1
        self._last_produce = self._clock()
        self._producer.poll(0)

    def flush(self, timeout_s: float | None = None) -> DeliveryReport:
        """Wait until every record produced so far was acknowledged or failed.

        Waits at most ``timeout_s`` (default: ``message.timeout.ms`` after the last
        :meth:`produce`, plus a few seconds of slack; librdkafka fails records by
        then). Records still unreported at that point are purged from librdkafka's
        queues and count as failed (``_PURGE_QUEUE``/``_PURGE_INFLIGHT``); one in
        flight may still have been written. Returns the counts since the producer was
        created; it raises nothing, call :meth:`DeliveryReport.raise_for_failure`.
        """
        if timeout_s is None:
            deadline = self._last_produce + self._timeout_s + _FLUSH_SLACK_S
        else:
            deadline = self._clock() + timeout_s
        while self.pending > 0:
            left = deadline - self._clock()
            if left <= 0:
                self._give_up()
                break
            self._producer.flush(min(left, _FLUSH_STEP_S))
            self._failures.settle()
        return self.report()

    def report(self) -> DeliveryReport:
        """The delivery reports received so far (no waiting)."""
        return DeliveryReport(
            delivered=self._delivered,
            failed=self._failed,
            first_failure=self._first_failure,
            client_error=self._client_error,
        )

    def close(self) -> None:
        """Wait for outstanding deliveries (as :meth:`flush`) and release librdkafka.

        Idempotent. The counts stay readable through :meth:`report`.
        """
        if self._closed:
            return
        try:
            if self.pending:
                self.flush()
        finally:
            self._closed = True
            self._producer.close()

    def __enter__(self) -> IdempotentProducer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _give_up(self) -> None:
        log.warning(
            "producer: %d deliveries still unreported after the flush deadline; purging",
            self.pending,
        )
        self._producer.purge(in_queue=True, in_flight=True, blocking=False)
        # Purged records are reported through the ordinary callback, from poll().
        self._producer.poll(0)
        # Whatever librdkafka still has not reported counts as failed, unassigned.
        err = confluent_kafka.KafkaError(confluent_kafka.KafkaError._TIMED_OUT)
        for topic, count in list(self._pending.items()):
            if count > 0:
                self._record_failure(topic, -1, err, count)
        self._pending.clear()

    def _on_delivery(
        self, err: confluent_kafka.KafkaError | None, msg: confluent_kafka.Message
    ) -> None:
        topic = msg.topic() or ""
        self._pending[topic] -= 1
        partition = msg.partition()
        # confluent-kafka reports RD_KAFKA_PARTITION_UA (-1) as None.
        tp = TopicPartition(topic, -1 if partition is None else partition)
        if err is None:
            self._delivered[tp] += 1
            self._failures.recovered("a record was delivered")
        else:
            self._record_failure(tp.topic, tp.partition, err)

    def _record_failure(
        self, topic: str, partition: int, err: confluent_kafka.KafkaError, count: int = 1
    ) -> None:
        self._failed[TopicPartition(topic, partition)] += count
        if self._first_failure is None:
            self._first_failure = DeliveryFailure(
                topic=topic,
                partition=partition,
                code=err.code(),
                name=err.name(),
                description=err.str(),
                retriable=bool(err.retriable()),
            )

    def _on_client_error(self, err: confluent_kafka.KafkaError) -> None:
        # Transport errors (broker down, connection refused) come here and librdkafka
        # retries them itself; they only matter as the likely reason records fail.
        self._client_error = f"{err.name()}: {err.str()}"
        self._failures.note_client_error(err.str())
        if err.fatal():
            log.error("producer: fatal error %s", self._client_error)
        else:
            log.debug("producer: %s", self._client_error)
