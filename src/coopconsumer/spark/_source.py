"""The ``coopconsumer`` Spark data source (Spark 4's Python Data Source API).

``spark.read.format("coopconsumer")`` and ``spark.readStream.format("coopconsumer")``
read Kafka with the schema and most options of Spark's own Kafka source; offsets are
planned on the driver as that source plans them (``_planning``); the executors read
each offset range with a :class:`coopconsumer.Consumer` in manual-assignment mode. What
Spark's source does not do: with ``kafka.group.id`` set, the streaming reader commits
each finished micro-batch's end offsets to the consumer group (a simple-consumer
commit, generation -1), so ``kafka-consumer-groups`` and lag exporters see the query's
progress. ``df.write.format("coopconsumer")`` produces rows with :class:`KafkaWriter`.

Where each part runs (docs/spark.md, "The data source"): the driver-side methods of the
stream reader (``initialOffset``, ``latestOffset``, ``partitions``, ``commit``) in one
long-lived Python process next to the driver, the batch reader's ``partitions`` in a
planning process, ``read`` and the writer's ``write`` in executor Python workers. The
readers hold only options until a driver-side method first needs a client.

Imports pyspark (this module is loaded only through ``coopconsumer.spark``), pyarrow in
``read``, the public ``Consumer``, the end-offset helper of ``_io`` and the writer.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, Literal, NoReturn

import attrs
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .._config import ConsumerConfig
from .._consumer import Consumer
from .._errors import (
    BrokerConnectionError,
    ConfigurationError,
    CoopConsumerError,
    KafkaError,
    RequestTimeoutError,
)
from .._io._fetcher import end_offsets
from .._types import TopicPartition
from ._local import use_this_python_locally
from ._planning import (
    DataLossError,
    OffsetRange,
    PartitionOffsets,
    delay_batch,
    duration_ms,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    split_ranges,
)
from ._writer import KafkaWriter

__all__ = ["CoopConsumerDataSource", "register_data_source"]

log = logging.getLogger("coopconsumer.spark")

#: The format name: ``spark.read.format("coopconsumer")``.
FORMAT: Final = "coopconsumer"
#: Spark's Kafka source schema; ``headers`` is added with ``includeHeaders``. Built
#: from types rather than parsed from DDL: the executors have no JVM to parse it.
_FIELDS: Final = (
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
)
_HEADERS: Final = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
)
#: group.id of the executors' readers when the query names none (they never commit).
_READER_GROUP: Final = "coopconsumer-spark-source"
#: Default of option ``fetchOffset.timeoutMs``: long enough for a cluster that is
#: electing a leader, short enough that a wrong address fails a read quickly.
_FETCH_OFFSET_TIMEOUT_MS: Final = 15_000
#: librdkafka's errors for brokers it cannot reach (or that never answered).
_UNREACHABLE: Final = frozenset({"_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE"})
#: Records per Arrow batch a reader yields.
_ARROW_BATCH: Final = 10_000
_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no"}

Starting = Literal["earliest", "latest", "group"] | PartitionOffsets


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name.lower())
    if value is None:
        return default
    text = str(value).strip().lower()
    if text not in _TRUE | _FALSE:
        raise ConfigurationError(f"option {name}: expected true or false, not {value!r}")
    return text in _TRUE


def _count(options: Mapping[str, str], name: str) -> int | None:
    value = options.get(name.lower())
    if value is None:
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigurationError(
            f"option {name}: expected a positive integer, not {value!r}"
        ) from None
    if number <= 0:
        raise ConfigurationError(f"option {name}: expected a positive integer, not {value!r}")
    return number


def _position(value: str | None, name: str, allowed: tuple[str, ...]) -> str | PartitionOffsets:
    text = (value or "").strip()
    if text.lower() in allowed:
        return text.lower()
    if text.startswith("{"):
        return offsets_from_json(text, f"option {name}")
    raise ConfigurationError(
        f"option {name}: expected {', '.join(allowed)} or JSON offsets, not {value!r}"
    )


@attrs.frozen(kw_only=True)
class SourceOptions:
    """The data source's options, parsed and checked once (case-insensitive names, as
    Spark hands them over). ``kafka.*`` options are the consumer configuration."""

    consumer_config: dict[str, object]
    topics: tuple[str, ...]
    group_id: str | None
    starting: str | PartitionOffsets
    #: Where a partition starts that ``startingOffsets=group`` finds uncommitted, or
    #: that JSON offsets do not list: ``earliest`` or ``latest``.
    fallback: Literal["earliest", "latest"]
    ending: str | PartitionOffsets
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    commit_offsets: bool
    commit_on_next_trigger: bool
    poll_timeout_ms: int
    #: How long the driver waits for the brokers to answer an offset lookup
    #: (watermarks, committed offsets) before the read fails naming the bootstrap
    #: address (option ``fetchOffset.timeoutMs``).
    fetch_offset_timeout_ms: int = _FETCH_OFFSET_TIMEOUT_MS

    @classmethod
    def parse(cls, raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        """Raises ``ConfigurationError`` naming the option at fault."""
        options = {str(k).lower(): v for k, v in raw.items()}
        config: dict[str, object] = {
            key[len("kafka.") :]: value
            for key, value in raw.items()
            if str(key).lower().startswith("kafka.")
        }
        if "bootstrap.servers" not in config:
            raise ConfigurationError("option kafka.bootstrap.servers is required")
        for key in ("enable.auto.commit", "group.instance.id"):
            if key in config:
                raise ConfigurationError(f"option kafka.{key} is not supported by the source")
        reset = str(config.pop("auto.offset.reset", "latest" if streaming else "earliest"))
        if reset.lower() not in ("earliest", "latest"):
            raise ConfigurationError(
                f"option kafka.auto.offset.reset: expected earliest or latest, not {reset!r}"
            )
        topics = tuple(t.strip() for t in str(options.get("subscribe", "")).split(",") if t.strip())
        if not topics:
            raise ConfigurationError("option subscribe (comma-separated topic names) is required")
        for other in ("assign", "subscribepattern"):
            if other in options:
                raise ConfigurationError(f"option {other} is not supported: use subscribe")
        group = config.get("group.id")
        group_id = str(group) if group else None
        default_start = "group" if group_id else ("latest" if streaming else "earliest")
        starting = _position(
            options.get("startingoffsets", default_start),
            "startingOffsets",
            ("earliest", "latest", "group"),
        )
        if starting == "group" and group_id is None:
            raise ConfigurationError("startingOffsets=group needs option kafka.group.id")
        ending = _position(options.get("endingoffsets", "latest"), "endingOffsets", ("latest",))
        if streaming and "endingoffsets" in options:
            raise ConfigurationError("option endingOffsets is for batch reads only")
        commit = _flag(options, "commitOffsets", group_id is not None)
        if commit and group_id is None:
            raise ConfigurationError("commitOffsets=true needs option kafka.group.id")
        poll = _count(options, "pollTimeoutMs")
        lookup = _count(options, "fetchOffset.timeoutMs")
        parsed = cls(
            consumer_config=config,
            topics=tuple(sorted(set(topics))),
            group_id=group_id,
            starting=starting,
            fallback="earliest" if reset.lower() == "earliest" else "latest",
            ending=ending,
            max_offsets_per_trigger=_count(options, "maxOffsetsPerTrigger"),
            min_offsets_per_trigger=_count(options, "minOffsetsPerTrigger"),
            max_trigger_delay_ms=duration_ms(
                options.get("maxtriggerdelay", "15m"), "option maxTriggerDelay"
            ),
            min_partitions=_count(options, "minPartitions"),
            fail_on_data_loss=_flag(options, "failOnDataLoss", True),
            include_headers=_flag(options, "includeHeaders", False),
            commit_offsets=commit,
            commit_on_next_trigger=_flag(options, "commitOnNextTrigger", True),
            poll_timeout_ms=poll if poll is not None else 120_000,
            fetch_offset_timeout_ms=lookup if lookup is not None else _FETCH_OFFSET_TIMEOUT_MS,
        )
        parsed.librdkafka_config()  # checks the kafka.* keys now, on the driver
        return parsed

    def parsed_config(self) -> ConsumerConfig:
        return ConsumerConfig.from_mapping(self.client_config())

    def librdkafka_config(self) -> dict[str, str | int | float | bool]:
        """What ``end_offsets`` takes."""
        return self.parsed_config().fetcher_config()

    def client_config(self) -> dict[str, object]:
        """A :class:`coopconsumer.Consumer` configuration: the query's group (or the
        readers' own), auto-commit off."""
        merged = dict(self.consumer_config)
        merged.setdefault("group.id", self.group_id or _READER_GROUP)
        merged["enable.auto.commit"] = False
        merged["auto.offset.reset"] = self.fallback
        return merged

    def schema(self) -> StructType:
        """Spark's Kafka source schema, with ``headers`` when asked for."""
        return StructType([*_FIELDS, _HEADERS] if self.include_headers else list(_FIELDS))

    def report_data_loss(self, message: str) -> None:
        if self.fail_on_data_loss:
            raise DataLossError(
                f"{message}. Set option failOnDataLoss=false to skip lost records instead"
            )
        log.warning("%s; going on (failOnDataLoss=false)", message)


@attrs.frozen
class _Start:
    """A partition with a start offset, as ``Consumer.assign`` takes it."""

    topic: str
    partition: int
    offset: int


class RangePartition(InputPartition):
    """One Spark task of a read: the records ``[from_offset, until_offset)`` of one
    partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


# ---------------------------------------------------------------------- driver side


class _Offsets:
    """The driver's Kafka access: watermarks (``end_offsets``), and, for a query with a
    group, a :class:`Consumer` with a paused manual assignment that reads and commits
    the group's offsets (Kafka takes such commits, generation -1, while the group has
    no subscribed members)."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._consumer: Consumer | None = None
        self._assigned: frozenset[TopicPartition] = frozenset()

    def watermarks(self) -> dict[TopicPartition, tuple[int, int]]:
        options = self._options
        timeout = options.fetch_offset_timeout_ms / 1000.0
        with self._unreachable("the end offsets"):
            return end_offsets(options.librdkafka_config(), options.topics, timeout_s=timeout)

    @contextlib.contextmanager
    def _unreachable(self, what: str) -> Iterator[None]:
        """A lookup the brokers did not answer in time fails naming the bootstrap
        address and the option that bounds the wait (issue 35: it took the 60 s API
        timeout and named no address)."""
        try:
            yield
        except KafkaError as exc:
            if exc.name not in _UNREACHABLE:
                raise
            self._fail_unreachable(what, exc)
        except (RequestTimeoutError, BrokerConnectionError) as exc:
            self._fail_unreachable(what, exc)

    def _fail_unreachable(self, what: str, exc: CoopConsumerError) -> NoReturn:
        servers = self._options.consumer_config.get("bootstrap.servers")
        raise RequestTimeoutError(
            f"{what} of {', '.join(self._options.topics)}: no answer from "
            f"kafka.bootstrap.servers={servers} within "
            f"{self._options.fetch_offset_timeout_ms} ms (option fetchOffset.timeoutMs; "
            f"is the address right and the cluster up?): {exc}"
        ) from exc

    def _client(self, partitions: frozenset[TopicPartition]) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(self._options.client_config())
        if not partitions <= self._assigned:
            self._assigned = self._assigned | partitions
            self._consumer.assign(sorted(self._assigned))
            self._consumer.pause(self._assigned)  # it only commits; it never fetches
        return self._consumer

    def committed(self, partitions: frozenset[TopicPartition]) -> dict[TopicPartition, int | None]:
        with self._unreachable("the committed offsets"):
            return self._client(partitions).committed(
                partitions, timeout=self._options.fetch_offset_timeout_ms / 1000.0
            )

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._client(frozenset(offsets)).commit(dict(offsets))

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _resolve(
    position: str | PartitionOffsets,
    marks: Mapping[TopicPartition, tuple[int, int]],
    offsets: _Offsets,
    options: SourceOptions,
    *,
    unlisted: Literal["earliest", "latest"],
) -> PartitionOffsets:
    """``startingOffsets``/``endingOffsets`` as offsets of every current partition.
    JSON offsets -2 and -1 mean earliest and latest, as in Spark; partitions the JSON
    does not list, or the group has no offset for, go to ``unlisted``."""
    if position == "earliest":
        return {tp: low for tp, (low, _high) in marks.items()}
    if position == "latest":
        return {tp: high for tp, (_low, high) in marks.items()}
    fallback = {tp: low if unlisted == "earliest" else high for tp, (low, high) in marks.items()}
    if position == "group":
        committed = offsets.committed(frozenset(marks))
        return {
            tp: fallback[tp] if committed.get(tp) is None else int(committed[tp] or 0)
            for tp in marks
        }
    assert isinstance(position, dict)
    unknown = set(position) - set(marks)
    if unknown:
        options.report_data_loss(
            "offsets were given for partitions that do not exist: "
            + ", ".join(str(tp) for tp in sorted(unknown))
        )
    resolved = dict(fallback)
    for tp, offset in position.items():
        if tp in marks:
            low, high = marks[tp]
            resolved[tp] = low if offset == -2 else high if offset == -1 else offset
    return resolved


def _read_partition(options: SourceOptions, partition: InputPartition) -> Iterator[Any]:
    """The rows of one planned range. A plan with no range (an empty topic, or offsets
    that select nothing) reaches ``read`` as Spark's stand-in ``InputPartition(None)``:
    nothing to read, as Spark's own Kafka source gives an empty frame."""
    if not isinstance(partition, RangePartition):
        if partition.value is None:
            return iter(())
        raise TypeError(f"coopconsumer source: not a planned range: {partition!r}")
    return read_range(options, partition.offset_range)


class _BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        offsets = _Offsets(options)
        try:
            marks = offsets.watermarks()
            start = _resolve(options.starting, marks, offsets, options, unlisted=options.fallback)
            end = _resolve(options.ending, marks, offsets, options, unlisted="latest")
        finally:
            offsets.close()
        for tp in sorted(start):
            if start[tp] > end[tp]:
                raise ConfigurationError(
                    f"{tp}: the starting offset {start[tp]} is after the ending offset {end[tp]}"
                )
        ranges = split_ranges(
            plan_ranges(start, end, {}, options.report_data_loss), options.min_partitions
        )
        log.info("coopconsumer source: batch read of %d range(s)", len(ranges))
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_partition(self.options, partition)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side of a streaming query (one instance per query, in its own Python
    process); the executors get a pickled copy for :meth:`read`."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._offsets: _Offsets | None = None
        self._latest: PartitionOffsets = {}
        self._earliest: PartitionOffsets = {}
        self._last_trigger_ms = 0
        self._available_now: PartitionOffsets | None = None
        self._committed: PartitionOffsets = {}
        self._initial: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}  # what read() needs, never a client

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    def _kafka(self) -> _Offsets:
        if self._offsets is None:
            self._offsets = _Offsets(self.options)
        return self._offsets

    def _refresh(self) -> PartitionOffsets:
        marks = self._kafka().watermarks()
        self._latest = {tp: high for tp, (_low, high) in marks.items()}
        self._earliest = {tp: low for tp, (low, _high) in marks.items()}
        return dict(self._latest)

    def initialOffset(self) -> dict[str, Any]:
        # Resolved once: Spark may ask again before the first batch is in its offset
        # log, and the group's offsets (startingOffsets=group) move once we commit.
        if self._initial is not None:
            return self._initial
        marks = self._kafka().watermarks()
        start = _resolve(
            self.options.starting,
            marks,
            self._kafka(),
            self.options,
            unlisted=self.options.fallback,
        )
        self._last_trigger_ms = int(time.time() * 1000)
        self._initial = offsets_to_json(start)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._refresh()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start, "start offset")
        if self.options.commit_on_next_trigger:
            # Spark asks for the next batch's end only after the previous batch's
            # commit-log entry is written (one batch at a time): ``start`` is done.
            self._commit(begin)
        latest = self._available_now if self._available_now is not None else self._refresh()
        if isinstance(limit, ReadAllAvailable):
            return offsets_to_json(latest)
        return offsets_to_json(self._limited(begin, latest, limit))

    def _limited(
        self, begin: PartitionOffsets, latest: PartitionOffsets, limit: ReadLimit
    ) -> PartitionOffsets:
        options = self.options
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else None
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        # Both options may be set; Spark hands over only one of them.
        min_rows = min_rows or options.min_offsets_per_trigger
        max_rows = max_rows or options.max_offsets_per_trigger
        if min_rows is not None:
            skip, self._last_trigger_ms = delay_batch(
                min_rows,
                latest,
                begin,
                now_ms=int(time.time() * 1000),
                last_trigger_ms=self._last_trigger_ms,
                max_delay_ms=options.max_trigger_delay_ms,
            )
            if skip:
                return begin
        if max_rows is not None:
            return rate_limit(max_rows, begin, latest, self._earliest)
        return latest

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start, "start offset")
        until = offsets_from_json(end, "end offset")
        if set(until) - set(begin) and not self._earliest:
            self._refresh()
        ranges = plan_ranges(begin, until, self._earliest, self.options.report_data_loss)
        return [RangePartition(r) for r in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_partition(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        self._commit(offsets_from_json(end, "end offset"))

    def _commit(self, offsets: PartitionOffsets) -> None:
        """Commit ``offsets`` (a finished batch's end) to the group, if they moved.
        A failed commit is logged, never raised: the query's own checkpoint is what it
        resumes from, and the next batch commits again."""
        if not self.options.commit_offsets:
            return
        moved = {tp: o for tp, o in offsets.items() if self._committed.get(tp) != o}
        if not moved:
            return
        try:
            self._kafka().commit(moved)
        except CoopConsumerError as exc:
            log.warning(
                "coopconsumer source: committing the group %s's offsets failed (the next "
                "batch tries again): %s",
                self.options.group_id,
                exc,
            )
            return
        self._committed.update(moved)

    def stop(self) -> None:
        if self._offsets is not None:
            self._offsets.close()
            self._offsets = None


# ---------------------------------------------------------------------- executor side

_readers: dict[str, Consumer] = {}
_readers_lock = threading.Lock()


def _close_readers() -> None:
    with _readers_lock:
        readers = list(_readers.values())
        _readers.clear()
    for reader in readers:
        with contextlib.suppress(Exception):
            reader.close(5.0)


atexit.register(_close_readers)


def _reader(options: SourceOptions) -> Consumer:
    """This Python worker's consumer for ``options``: created once, reused by every
    task the worker runs (Spark reuses Python workers), so a micro-batch does not pay
    for a new client per partition."""
    key = json.dumps(options.client_config(), sort_keys=True, default=str)
    with _readers_lock:
        consumer = _readers.get(key)
        if consumer is None:
            consumer = _readers[key] = Consumer(options.client_config())
        return consumer


def read_range(options: SourceOptions, offset_range: OffsetRange) -> Iterator[Any]:
    """The records of ``offset_range`` as Arrow record batches in the source's schema.

    Checks the partition's low watermark first: records before it are gone (retention),
    which is data loss (raised, or skipped with ``failOnDataLoss=false``). Reading ends
    at the range's end or when the consumer's position passes it (the last offsets may
    be transaction markers, which are never delivered); ``RequestTimeoutError`` if no
    record comes for ``pollTimeoutMs`` (the partition was truncated, or the broker is
    unreachable)."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(options.schema(), timezone="UTC")
    tp = offset_range.topic_partition
    begin, until = offset_range.from_offset, offset_range.until_offset
    consumer = _reader(options)
    timeout_s = options.poll_timeout_ms / 1000.0
    low, _high = consumer.get_watermark_offsets(tp, timeout_s)
    if begin < low:
        options.report_data_loss(
            f"{tp}: offsets {begin}..{low - 1} were deleted before they could be read"
        )
        begin = low
    if begin >= until:
        return
    consumer.assign([_Start(tp.topic, tp.partition, begin)])
    columns: list[list[Any]] = [[] for _ in schema.names]
    position = begin
    deadline = time.monotonic() + timeout_s
    try:
        while position < until:
            messages = consumer.consume(min(_ARROW_BATCH, until - position), 0.2)
            for message in messages:
                offset: int = message.offset()  # type: ignore[assignment]
                if offset >= until:
                    position = until
                    break
                _append(columns, message, options.include_headers)
                position = offset + 1
            if len(columns[0]) >= _ARROW_BATCH or (position >= until and columns[0]):
                yield pa.RecordBatch.from_arrays(
                    [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)],
                    schema=schema,
                )
                columns = [[] for _ in schema.names]
            if messages:
                deadline = time.monotonic() + timeout_s
                continue
            now_at = consumer.position([tp]).get(tp)
            if now_at is not None and now_at >= until:
                position = until  # the rest are markers or compacted away
            elif time.monotonic() >= deadline:
                raise RequestTimeoutError(
                    f"{tp}: no record of [{position}, {until}) within "
                    f"{options.poll_timeout_ms} ms (pollTimeoutMs); was the partition "
                    "truncated or the broker unreachable?"
                )
        if columns[0]:
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)],
                schema=schema,
            )
    finally:
        consumer.unassign()


def _append(columns: list[list[Any]], message: Any, headers: bool) -> None:
    kind, timestamp = message.timestamp()
    columns[0].append(message.key())
    columns[1].append(message.value())
    columns[2].append(message.topic())
    columns[3].append(message.partition())
    columns[4].append(message.offset())
    columns[5].append(None if timestamp is None or timestamp < 0 else timestamp * 1000)
    # confluent-kafka: 1 create time, 2 log-append time; Spark's Kafka source: 0, 1.
    columns[6].append(kind - 1 if kind in (1, 2) else -1)
    if headers:
        pairs = message.headers()
        columns[7].append(None if pairs is None else [{"key": k, "value": v} for k, v in pairs])


# ---------------------------------------------------------------------- writer


@attrs.frozen
class _Written(WriterCommitMessage):
    records: int


class _Writer(DataSourceWriter):
    """``df.write.format("coopconsumer")``: each task produces its rows with
    :class:`KafkaWriter` (idempotent producer, every delivery awaited)."""

    def __init__(self, writer: KafkaWriter) -> None:
        self.writer = writer

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _Written(sum(self.writer.write_rows(iterator).values()))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        written = sum(m.records for m in messages if isinstance(m, _Written))
        log.info("coopconsumer sink: %d record(s) written to %s", written, self.writer.topic)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        written = sum(m.records for m in messages if isinstance(m, _Written))
        log.warning(
            "coopconsumer sink: the write to %s failed; %d record(s) of finished tasks stay "
            "in the topic (Kafka cannot take records back)",
            self.writer.topic,
            written,
        )


def _writer_for(options: Mapping[str, str], schema: StructType, overwrite: bool) -> _Writer:
    if overwrite:
        raise ConfigurationError(
            "the coopconsumer sink appends to a Kafka topic: use mode('append'), not overwrite"
        )
    lowered = {str(k).lower(): v for k, v in options.items()}
    topic = lowered.get("topic")
    if not topic:
        raise ConfigurationError("option topic (the topic to write to) is required")
    config = {
        key[len("kafka.") :]: value
        for key, value in options.items()
        if str(key).lower().startswith("kafka.")
    }
    names = set(schema.fieldNames())
    if "value" not in names:
        raise ConfigurationError(f"the data needs a value column; its columns are {sorted(names)}")
    if "topic" in names:
        raise ConfigurationError(
            "a topic column is not supported: the sink writes to the topic option"
        )
    return _Writer(
        KafkaWriter(
            config,
            str(topic),
            value_column="value",
            key_column="key" if "key" in names else None,
            partition_column="partition" if "partition" in names else None,
            headers_column="headers" if "headers" in names else None,
            transactional_id=lowered.get("transactionalidprefix") or None,
        )
    )


# ---------------------------------------------------------------------- the source


class CoopConsumerDataSource(DataSource):
    """Kafka for ``spark.read``, ``spark.readStream`` and ``df.write`` under the format
    name ``"coopconsumer"`` (register it with :func:`register_data_source`).

    Reading takes Spark's Kafka source options (``kafka.*``, ``subscribe``,
    ``startingOffsets``, ``endingOffsets``, ``maxOffsetsPerTrigger``,
    ``minOffsetsPerTrigger``, ``maxTriggerDelay``, ``minPartitions``,
    ``failOnDataLoss``, ``includeHeaders``) and its schema; a streaming query with
    ``kafka.group.id`` commits its progress to that consumer group. Writing takes
    ``topic``, ``kafka.*`` producer settings and ``transactionalIdPrefix`` (each task
    writes in one transaction, as ``KafkaWriter(transactional_id=...)``) and the
    columns ``value`` (required), ``key``, ``partition``, ``headers``. See
    docs/spark.md, "The data source".
    """

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return SourceOptions.parse(self.options, streaming=False).schema()

    def _checked(self, schema: StructType, streaming: bool) -> SourceOptions:
        options = SourceOptions.parse(self.options, streaming=streaming)
        if schema != options.schema():
            raise ConfigurationError(
                f"the coopconsumer source has a fixed schema ({options.schema().simpleString()}); "
                f"it cannot read {schema.simpleString()}"
            )
        return options

    def reader(self, schema: StructType) -> DataSourceReader:
        return _BatchReader(self._checked(schema, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _StreamReader(self._checked(schema, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _writer_for(self.options, schema, overwrite)


def register_data_source(spark: Any) -> None:
    """Make ``format("coopconsumer")`` available in ``spark`` (a SparkSession):
    ``spark.dataSource.register(CoopConsumerDataSource)``. With a local master and
    neither ``PYSPARK_PYTHON`` nor ``spark.pyspark.python`` set, the session's Python
    workers run this interpreter (the one coopconsumer is installed in), not
    ``python3`` from ``PATH``."""
    use_this_python_locally(spark)
    spark.dataSource.register(CoopConsumerDataSource)
