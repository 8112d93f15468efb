"""``KafkaWriter``: the rows of a Spark partition produced to Kafka, every delivery awaited.

The writer is pickled to the executors, so it holds only the validated configuration
and the column choices; the confluent-kafka producer (``_io._producer``, or the
transactional one of ``_io._txn_producer`` with ``transactional_id``) is created
inside the task, on the first record.

Executors import this module: it must not import pyspark (only under TYPE_CHECKING) and
imports pandas only when :meth:`KafkaWriter.map_in_pandas` runs.
"""

from __future__ import annotations

import logging
import math
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, SupportsIndex, cast

from .._errors import ConfigurationError, TransactionError
from .._io._producer import (
    DeliveryReport,
    Headers,
    IdempotentProducer,
    producer_config,
)
from .._io._txn_producer import TransactionalProducer, transactional_producer_config
from .._types import TopicPartition

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

__all__ = ["KafkaWriter", "Serializer"]

_log = logging.getLogger("coopconsumer.spark")

#: Turns a column value the writer cannot send as is into ``bytes`` (or ``str``,
#: encoded as UTF-8, or ``None`` for a null). Must be picklable (Spark's cloudpickle
#: handles lambdas and local functions).
Serializer = Callable[[Any], "bytes | bytearray | memoryview | str | None"]

# Kafka's legal topic names (clients' org.apache.kafka.common.internals.Topic).
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_REPORT_COLUMNS = ("topic", "partition", "records")


class _Record(NamedTuple):
    value: object
    key: object
    partition: object
    headers: object


def _column(name: object, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"{what} must be a column name (a non-empty string), not {name!r}")
    return name


def _optional_column(name: object, what: str) -> str | None:
    return None if name is None else _column(name, what)


def _check_serializer(fn: object, what: str) -> Serializer | None:
    if fn is not None and not callable(fn):
        raise ConfigurationError(f"{what} must be a callable or None, not {fn!r}")
    return cast("Serializer | None", fn)


def _to_bytes(value: object, column: str, serializer: Serializer | None, hint: str) -> bytes | None:
    if value is None:
        return None
    if serializer is not None:
        value = serializer(value)
        if value is None:
            return None
        hint = ""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if serializer is not None:
        raise TypeError(
            f"column {column!r}: the serializer returned a {type(value).__name__}; "
            "expected bytes, str or None"
        )
    raise TypeError(
        f"column {column!r}: cannot write a {type(value).__name__} value to Kafka "
        f"(bytes, bytearray, str and null are written as is){hint}"
    )


def _to_partition(value: object, column: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, float):
        # pandas turns an integer column with nulls into floats, nulls into NaN.
        if math.isnan(value):
            return None
        if not value.is_integer():
            raise TypeError(f"column {column!r}: partition {value!r} is not an integer")
        value = int(value)
    if isinstance(value, bool):
        raise TypeError(f"column {column!r}: partition must be an integer, not a bool")
    if not isinstance(value, SupportsIndex):  # int and numpy integers
        raise TypeError(
            f"column {column!r}: partition must be an integer or null, not a {type(value).__name__}"
        )
    partition = operator.index(value)
    if partition < 0:
        raise ValueError(f"column {column!r}: partition {partition} is negative")
    return partition


def _to_headers(value: object, column: str) -> Headers | None:
    """A map column (dict) or an array of (key, value) structs as confluent-kafka headers."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        pairs: Iterable[object] = value.items()
    elif isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(
            f"column {column!r}: headers must be a map or an array of (key, value) "
            f"pairs, not a {type(value).__name__}"
        )
    else:
        pairs = value
    headers: list[tuple[str, bytes | None]] = []
    for pair in pairs:
        as_dict = getattr(pair, "asDict", None)
        if as_dict is not None:  # a pyspark Row: by field name, whatever the field order
            pair = as_dict()
        if isinstance(pair, Mapping):  # a struct as pandas (or asDict) hands it over
            if "key" not in pair or "value" not in pair:
                raise TypeError(
                    f"column {column!r}: header structs need fields 'key' and 'value', "
                    f"not {sorted(map(str, pair))!r}"
                )
            name, raw = pair["key"], pair["value"]
        elif isinstance(pair, Sequence) and len(pair) == 2:
            name, raw = pair[0], pair[1]
        else:
            raise TypeError(f"column {column!r}: header {pair!r} is not a (key, value) pair")
        if not isinstance(name, str):
            raise TypeError(f"column {column!r}: header name {name!r} is not a string")
        headers.append((name, _to_bytes(raw, column, None, "")))
    return headers


def _task_partition() -> int:
    """The Spark partition id of the running task (0 outside Spark)."""
    try:
        from pyspark import TaskContext
    except ImportError:
        return 0
    context = TaskContext.get()
    return 0 if context is None else context.partitionId()


class KafkaWriter:
    """Produces the rows of a Spark DataFrame partition to one Kafka topic.

    Use it from either side of a DataFrame::

        writer = KafkaWriter({"bootstrap.servers": "kafka:9092"}, "events",
                             key_column="id", value_column="payload")
        df.foreachPartition(writer)                                 # an action
        report = df.mapInPandas(writer.map_in_pandas, writer.output_schema)

    ``config`` is a librdkafka/Kafka producer configuration (string, number or
    boolean values; ``bootstrap.servers`` required). It is validated here, on the
    driver, and a bad key or value is a ``ConfigurationError``: the producer is always
    idempotent with ``acks=all`` (``enable.idempotence=false`` or another ``acks`` is a
    ``ConfigurationError``), ``message.timeout.ms`` (alias ``delivery.timeout.ms``)
    defaults to 30000 so an unreachable cluster fails the task within about that time
    instead of librdkafka's 5 minutes, ``partitioner`` defaults to Java's
    ``murmur2_random``, and ``transactional.id`` and callback keys are refused. Security
    keys (``security.protocol``, ``ssl.*``, ``sasl.*``, ``oauth_cb``) are checked as the
    consumer's are (docs/security.md). Every other key is checked by librdkafka itself.

    Columns: ``value_column`` (default ``"value"``) is required; ``key_column``,
    ``partition_column`` (an integer column; null lets the partitioner choose) and
    ``headers_column`` (a ``map<string, binary|string>`` or an
    ``array<struct<key: string, value: binary|string>>``) are optional. ``bytes``
    (``BinaryType``) are written as is, ``str`` as UTF-8, null as a null key or value;
    any other type raises ``TypeError`` naming the column unless
    ``value_serializer``/``key_serializer`` turn it into bytes (they are called on
    every non-null value of their column and must be picklable). Column names and
    serializers are checked here; whether the columns exist is checked by the task,
    before it produces anything.

    Each task (one Spark partition) creates one producer on its first row, produces
    every row, then waits until every record is acknowledged or failed (bounded by
    ``message.timeout.ms`` plus a few seconds). If any failed it raises
    :class:`coopconsumer.DeliveryError` naming the first failed record's topic and
    partition (-1 if none was assigned, e.g. the broker was unreachable), its error and
    the number of failed records; the task fails and Spark retries it as configured.
    Once a failure is seen the task stops producing its remaining rows. A row that
    cannot be converted raises ``TypeError``/``ValueError`` after the records already
    produced were waited for.

    Delivery is at least once: the idempotent producer never duplicates a record
    within one task attempt, but a retried task (or stage) writes its partition again.

    With ``transactional_id`` (a prefix) each task writes all its rows in one Kafka
    transaction, with the ``transactional.id`` ``<prefix>-<Spark partition id>``:
    ``read_committed`` readers see all of a task attempt's rows or none, and a retry
    (same id) fences the attempt before it and aborts whatever that one left open, so
    a failed or killed attempt never leaves rows behind. An attempt that had committed
    and is still run again (a recomputed stage, or a speculative copy started after
    the first one committed) writes its rows again. ``config`` may then hold
    ``transaction.timeout.ms``; a record that fails aborts the transaction and raises
    ``TransactionError``. The counts reported per Kafka partition use partition -1
    for records whose partition the partitioner chose (every one of them committed).

    The writer holds only configuration and is safe to pickle and to reuse.
    """

    #: The Spark schema (DDL) of :meth:`map_in_pandas`'s output: one row per Kafka
    #: partition written to, with the number of records acknowledged there.
    output_schema = "topic string, partition int, records long"

    def __init__(
        self,
        config: Mapping[str, object],
        topic: str,
        *,
        value_column: str = "value",
        key_column: str | None = None,
        partition_column: str | None = None,
        headers_column: str | None = None,
        value_serializer: Serializer | None = None,
        key_serializer: Serializer | None = None,
        transactional_id: str | None = None,
    ) -> None:
        if not isinstance(topic, str) or not _TOPIC.fullmatch(topic) or topic in {".", ".."}:
            raise ConfigurationError(
                f"invalid topic {topic!r}: expected 1-249 characters from [a-zA-Z0-9._-]"
            )
        if transactional_id is None:
            self._config = producer_config(config)
        else:
            if not isinstance(transactional_id, str) or not transactional_id:
                raise ConfigurationError(
                    f"transactional_id must be a non-empty string: {transactional_id!r}"
                )
            if isinstance(config, Mapping) and "transactional.id" in config:
                raise ConfigurationError(
                    "pass the transactional id prefix as transactional_id=, not in config "
                    "(each task derives its own id from it)"
                )
            checked = transactional_producer_config(
                {**config, "transactional.id": f"{transactional_id}-0"}
            )
            del checked["transactional.id"]
            self._config = checked
        self._transactional_id = transactional_id
        self._topic = topic
        self._value_column = _column(value_column, "value_column")
        self._key_column = _optional_column(key_column, "key_column")
        self._partition_column = _optional_column(partition_column, "partition_column")
        self._headers_column = _optional_column(headers_column, "headers_column")
        self._value_serializer = _check_serializer(value_serializer, "value_serializer")
        self._key_serializer = _check_serializer(key_serializer, "key_serializer")

    @property
    def topic(self) -> str:
        """The topic every row is written to."""
        return self._topic

    @property
    def transactional_id(self) -> str | None:
        """The prefix of the tasks' ``transactional.id`` (None: not transactional)."""
        return self._transactional_id

    @property
    def config(self) -> Mapping[str, object]:
        """The producer configuration as validated and completed (a copy)."""
        return dict(self._config)

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the writer reads, value column first."""
        names = (self._value_column, self._key_column, self._partition_column)
        return tuple(c for c in (*names, self._headers_column) if c is not None)

    def __repr__(self) -> str:
        return (
            f"KafkaWriter(topic={self._topic!r}, "
            f"bootstrap.servers={self._config['bootstrap.servers']!r}, "
            f"columns={self.columns!r})"
        )

    def __call__(self, rows: Iterable[Any]) -> None:
        """Write one partition's rows (``df.foreachPartition(writer)``).

        ``rows`` are pyspark ``Row`` objects or mappings, read by column name.
        Raises :class:`coopconsumer.DeliveryError` if any record failed.
        """
        self.write_rows(rows)

    def write_rows(self, rows: Iterable[Any]) -> dict[TopicPartition, int]:
        """Write rows as :meth:`__call__` does; return the records acknowledged per
        Kafka partition (for use outside Spark, e.g. on the driver or in tests)."""
        return dict(self._write(self._records_from_rows(rows)).delivered)

    def map_in_pandas(self, batches: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        """Write one partition's pandas batches (``df.mapInPandas``).

        Use with :attr:`output_schema`. Yields one DataFrame once every record was
        acknowledged: a row per Kafka partition written to (``topic``, ``partition``,
        ``records``), empty if the Spark partition had no rows. Sum ``records`` to
        count deliveries. Raises :class:`coopconsumer.DeliveryError` if any failed.
        """
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]

        report = self._write(self._records_from_batches(batches))
        rows = [(tp.topic, tp.partition, n) for tp, n in report.delivered.items()]
        yield pd.DataFrame(
            {
                "topic": pd.Series([r[0] for r in rows], dtype=object),
                "partition": pd.Series([r[1] for r in rows], dtype="int32"),
                "records": pd.Series([r[2] for r in rows], dtype="int64"),
            },
            columns=list(_REPORT_COLUMNS),
        )

    # --- rows -> records -------------------------------------------------------------

    def _missing(self, available: Iterable[str]) -> None:
        have = set(available)
        missing = [c for c in self.columns if c not in have]
        if missing:
            raise ConfigurationError(
                f"KafkaWriter: column(s) {missing!r} not in the data; "
                f"its columns are {sorted(have)!r}"
            )

    def _records_from_rows(self, rows: Iterable[Any]) -> Iterator[_Record]:
        checked = False
        value_c, key_c = self._value_column, self._key_column
        partition_c, headers_c = self._partition_column, self._headers_column
        for row in rows:
            if not checked:
                fields = getattr(row, "__fields__", None)  # pyspark Row
                if fields is None and isinstance(row, Mapping):
                    fields = list(row.keys())
                if fields is None:
                    raise TypeError(
                        f"KafkaWriter: rows must be pyspark Rows or mappings, "
                        f"not {type(row).__name__}"
                    )
                self._missing(fields)
                checked = True
            yield _Record(
                row[value_c],
                None if key_c is None else row[key_c],
                None if partition_c is None else row[partition_c],
                None if headers_c is None else row[headers_c],
            )

    def _records_from_batches(self, batches: Iterable[pd.DataFrame]) -> Iterator[_Record]:
        for batch in batches:
            self._missing(str(c) for c in batch.columns)
            n = len(batch)

            def column(name: str | None, batch: Any = batch, n: int = n) -> list[Any]:
                if name is None:
                    return [None] * n
                # tolist() hands back Python objects; Spark's nullable integer columns
                # arrive as pandas' Int32/Int64 whose nulls are pd.NA, other nulls as
                # None or NaN: isna() finds them all.
                series = batch[name]
                return [
                    None if na else v
                    for v, na in zip(series.tolist(), series.isna().tolist(), strict=True)
                ]

            yield from map(
                _Record,
                column(self._value_column),
                column(self._key_column),
                column(self._partition_column),
                column(self._headers_column),
            )

    # --- producing -------------------------------------------------------------------

    def _converted(
        self, record: _Record
    ) -> tuple[bytes | None, bytes | None, int | None, Headers | None]:
        value = _to_bytes(
            record.value,
            self._value_column,
            self._value_serializer,
            "; pass value_serializer= to convert it",
        )
        key = (
            None
            if self._key_column is None
            else _to_bytes(
                record.key,
                self._key_column,
                self._key_serializer,
                "; pass key_serializer= to convert it",
            )
        )
        partition = (
            None
            if self._partition_column is None
            else _to_partition(record.partition, self._partition_column)
        )
        headers = (
            None
            if self._headers_column is None
            else _to_headers(record.headers, self._headers_column)
        )
        return value, key, partition, headers

    def _write_transaction(self, records: Iterator[_Record]) -> DeliveryReport:
        """Every record in one transaction of this task's own transactional id."""
        assert self._transactional_id is not None
        producer: TransactionalProducer | None = None
        counts: dict[TopicPartition, int] = {}
        try:
            for record in records:
                value, key, partition, headers = self._converted(record)
                if producer is None:
                    txn_id = f"{self._transactional_id}-{_task_partition()}"
                    producer = TransactionalProducer({**self._config, "transactional.id": txn_id})
                    producer.init()  # fences an earlier attempt, aborts what it left open
                    producer.begin()
                producer.produce(self._topic, value, key, partition=partition, headers=headers)
                tp = TopicPartition(self._topic, -1 if partition is None else partition)
                counts[tp] = counts.get(tp, 0) + 1
            if producer is not None:
                producer.commit()
        except BaseException:
            if producer is not None and producer.in_transaction and producer.fatal_error is None:
                try:
                    producer.abort()
                except TransactionError as exc:  # the original error matters more
                    _log.warning("KafkaWriter: abort after a failure failed: %s", exc)
            raise
        finally:
            if producer is not None:
                producer.close()
        return DeliveryReport(delivered=counts, failed={})

    def _write(self, records: Iterator[_Record]) -> DeliveryReport:
        if self._transactional_id is not None:
            return self._write_transaction(records)
        producer: IdempotentProducer | None = None
        try:
            for record in records:
                value, key, partition, headers = self._converted(record)
                if producer is None:
                    producer = IdempotentProducer(self._config)
                producer.produce(self._topic, value, key=key, partition=partition, headers=headers)
                if producer.has_failed:
                    break  # the task fails anyway; do not queue records bound to fail
            if producer is None:
                return DeliveryReport(delivered={}, failed={})
            report = producer.flush()
        finally:
            # On an exception from a row, close() still waits for what was produced.
            if producer is not None:
                producer.close()
        report.raise_for_failure()
        return report
