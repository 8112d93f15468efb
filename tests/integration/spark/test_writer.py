"""KafkaWriter: the rows of Spark partitions produced to Kafka, every delivery awaited.

Without Spark: argument validation on the driver, pickling, the row conversions, and
write_rows/map_in_pandas against a closed port and against both embedded brokers.
On the session's standalone cluster (conftest.py): foreachPartition and mapInPandas write
every row exactly once (read back from the topic: key, value, partition, headers), and
an unreachable broker fails the job with a DeliveryError naming the topic and partition
-1, bounded by a short message.timeout.ms.

Both brokers grant the idempotent producer a producer id (InitProducerId: Tansu v0-5,
the mock v0-4), so no test here depends on a broker quirk.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import pandas as pd  # type: ignore[import-untyped,unused-ignore]
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as CkTopicPartition

from coopconsumer import ConfigurationError, DeliveryError, TopicPartition
from coopconsumer.spark import KafkaWriter
from coopconsumer.spark._writer import _to_bytes, _to_headers, _to_partition
from coopconsumer.testing import EmbeddedBroker, free_port

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Bound for reading records back on a shared 2-core machine; reaching it means records
#: are missing, not slow.
PATIENCE_S = 30.0
PARTITIONS = 3
ROWS = 60


@pytest.fixture
def closed_port() -> str:
    """``127.0.0.1:PORT`` where nothing listens: every connection is refused."""
    return f"127.0.0.1:{free_port()}"


# --------------------------------------------------------------------------- driver side


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"topic": ""}, "topic"),
        ({"topic": "bad topic"}, "topic"),
        ({"topic": "x" * 250}, "topic"),
        ({"topic": ".."}, "topic"),
        ({"value_column": ""}, "value_column"),
        ({"value_column": None}, "value_column"),
        ({"key_column": 3}, "key_column"),
        ({"partition_column": ""}, "partition_column"),
        ({"headers_column": b"h"}, "headers_column"),
        ({"value_serializer": "json"}, "value_serializer"),
        ({"key_serializer": 1}, "key_serializer"),
        ({"config": {"bootstrap.servers": "h:1", "enable.idempotence": False}}, "idempotence"),
        ({"config": {"bootstrap.servers": "h:1", "acks": 1}}, "acks"),
        ({"config": {"bootstrap.servers": "h:1", "no.such.key": 1}}, "no.such.key"),
        ({"config": {"acks": "all"}}, "bootstrap"),
    ],
)
def test_bad_arguments_fail_on_the_driver(kwargs: dict[str, Any], named: str) -> None:
    args: dict[str, Any] = {"config": {"bootstrap.servers": "127.0.0.1:9092"}, "topic": "t"}
    args.update(kwargs)
    with pytest.raises(ConfigurationError, match=named):
        KafkaWriter(args.pop("config"), args.pop("topic"), **args)


def _upper(value: object) -> bytes:
    return str(value).upper().encode()


def test_writer_pickles_with_its_config_and_columns() -> None:
    writer = KafkaWriter(
        {"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 2},
        "events",
        key_column="id",
        headers_column="h",
        value_serializer=_upper,
    )
    copy = pickle.loads(pickle.dumps(writer))
    assert copy.config == writer.config
    assert copy.config["enable.idempotence"] is True
    assert copy.columns == ("value", "id", "h")
    assert repr(copy) == repr(writer)
    assert copy.topic == "events"


def test_importing_the_writer_loads_neither_pyspark_nor_pandas() -> None:
    # Executors import it to unpickle the writer; pandas only matters to mapInPandas.
    code = (
        "import sys, coopconsumer.spark._writer; "
        "print(sorted(m for m in ('pyspark', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"\x00a", b"\x00a"),
        (bytearray(b"ab"), b"ab"),
        (memoryview(b"mv"), b"mv"),
        ("héllo", "héllo".encode()),
        ("", b""),
        (None, None),
    ],
)
def test_bytes_and_text_are_written_as_is(value: object, expected: bytes | None) -> None:
    assert _to_bytes(value, "value", None, "") == expected


@pytest.mark.parametrize("value", [1, 2.5, True, {"a": 1}, [b"x"]])
def test_other_types_need_a_serializer(value: object) -> None:
    with pytest.raises(TypeError, match=r"column 'v'.*value_serializer="):
        _to_bytes(value, "v", None, "; pass value_serializer= to convert it")
    assert _to_bytes(value, "v", _upper, "") == str(value).upper().encode()


def test_serializer_must_return_bytes_text_or_none() -> None:
    assert _to_bytes(1, "v", lambda _v: None, "") is None
    with pytest.raises(TypeError, match="serializer returned a int"):
        _to_bytes(1, "v", lambda v: v, "")


@pytest.mark.parametrize(
    ("value", "expected"), [(None, None), (float("nan"), None), (2, 2), (3.0, 3), (0, 0)]
)
def test_partition_values(value: object, expected: int | None) -> None:
    assert _to_partition(value, "p") == expected


def test_numpy_integers_are_partitions() -> None:
    import numpy as np

    assert _to_partition(np.int64(4), "p") == 4
    assert _to_partition(np.int32(1), "p") == 1


@pytest.mark.parametrize(
    ("value", "error"),
    [(True, TypeError), (1.5, TypeError), ("1", TypeError), (-1, ValueError)],
)
def test_bad_partitions(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="column 'p'"):
        _to_partition(value, "p")


@pytest.mark.parametrize(
    "value",
    [
        {"a": b"1", "b": "2", "c": None},
        [("a", b"1"), ("b", "2"), ("c", None)],
        [{"key": "a", "value": b"1"}, {"key": "b", "value": "2"}, {"key": "c", "value": None}],
    ],
)
def test_headers_from_maps_and_pair_arrays(value: object) -> None:
    assert _to_headers(value, "h") == [("a", b"1"), ("b", b"2"), ("c", None)]


def test_header_rows_are_read_by_field_name() -> None:
    from pyspark.sql import Row

    # A struct<value, key> column: the Row's field order must not matter.
    pairs = [Row(value=b"1", key="a"), Row(value=None, key="b")]
    assert _to_headers(pairs, "h") == [("a", b"1"), ("b", None)]


@pytest.mark.parametrize(
    "value",
    ["a=1", b"x", 5, [("a", b"1", "extra")], [(1, b"x")], [{"name": "a", "value": b"1"}]],
)
def test_bad_headers(value: object) -> None:
    with pytest.raises(TypeError, match="column 'h'"):
        _to_headers(value, "h")


# --------------------------------------------------------------------------- task side


def test_no_rows_write_nothing_and_need_no_broker(closed_port: str) -> None:
    writer = KafkaWriter({"bootstrap.servers": closed_port}, "t")
    assert writer.write_rows([]) == {}
    (frame,) = list(writer.map_in_pandas(iter([])))
    assert list(frame.columns) == ["topic", "partition", "records"]
    assert len(frame) == 0


def test_missing_column_is_named_before_anything_is_produced(closed_port: str) -> None:
    writer = KafkaWriter({"bootstrap.servers": closed_port}, "t", key_column="id")
    with pytest.raises(ConfigurationError, match=r"\['id'\] not in the data"):
        writer.write_rows([{"value": b"x"}])
    with pytest.raises(ConfigurationError, match=r"\['id'\] not in the data"):
        list(writer.map_in_pandas(iter([pd.DataFrame({"value": [b"x"]})])))


def test_rows_must_be_rows_or_mappings(closed_port: str) -> None:
    writer = KafkaWriter({"bootstrap.servers": closed_port}, "t")
    with pytest.raises(TypeError, match="pyspark Rows or mappings"):
        writer.write_rows([(b"x",)])


def test_unconvertible_value_raises_after_waiting_for_produced_rows(closed_port: str) -> None:
    writer = KafkaWriter(
        {"bootstrap.servers": closed_port, "message.timeout.ms": 500}, "t", key_column="k"
    )
    with pytest.raises(TypeError, match=r"column 'value': cannot write a int.*value_serializer"):
        writer.write_rows([{"value": b"ok", "k": None}, {"value": 7, "k": None}])


def test_unreachable_broker_is_a_delivery_error_for_partition_minus_one(closed_port: str) -> None:
    writer = KafkaWriter({"bootstrap.servers": closed_port, "message.timeout.ms": 1000}, "t")
    rows = [{"value": f"v{i}"} for i in range(3)]
    with pytest.raises(DeliveryError) as caught:
        writer.write_rows(rows)
    err = caught.value
    assert (err.topic, err.partition, err.name, err.failed) == ("t", -1, "_MSG_TIMED_OUT", 3)
    assert "topic 't' partition -1" in str(err)
    with pytest.raises(DeliveryError, match="topic 't' partition -1"):
        list(writer.map_in_pandas(iter([pd.DataFrame({"value": ["a", "b"]})])))


def test_the_task_stops_producing_at_the_first_failure(closed_port: str) -> None:
    writer = KafkaWriter(
        {"bootstrap.servers": closed_port, "message.max.bytes": 1000, "message.timeout.ms": 500},
        "t",
    )
    rows = [{"value": b"x" * 5000}] + [{"value": b"small"}] * 5
    with pytest.raises(DeliveryError) as caught:
        writer.write_rows(rows)
    # Refused by produce() itself, so the five small rows were never queued.
    assert (caught.value.name, caught.value.failed) == ("MSG_SIZE_TOO_LARGE", 1)
    assert str(caught.value).startswith("1 of 1 records were not delivered")


def read_back(bootstrap: str, topic: str, count: int) -> list[Any]:
    """Every record of ``topic`` from the beginning, once ``count`` arrived (or patience ran
    out), as (partition, key, value, headers); manual assignment, no group."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "writer-read-back",
            "enable.auto.commit": False,
        }
    )
    got: list[Any] = []
    try:
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + PATIENCE_S
        while len(got) < count and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.2):
                if m.error() is None:
                    got.append((m.partition(), m.key(), m.value(), m.headers()))
        # Anything beyond ``count`` would be a duplicate: give it a moment to show up.
        got.extend(
            (m.partition(), m.key(), m.value(), m.headers())
            for m in consumer.consume(500, 0.5)
            if m.error() is None
        )
    finally:
        consumer.close()
    return got


def expected_rows(n: int) -> list[dict[str, Any]]:
    """Row i: key "k<i>" (null for every 7th), value b"v<i>", partition i % 3 (null,
    i.e. the partitioner's choice, for every 5th) and one header n=<i>."""
    return [
        {
            "key": None if i % 7 == 3 else f"k{i}",
            "value": f"v{i}".encode(),
            "partition": None if i % 5 == 0 else i % PARTITIONS,
            "headers": {"n": str(i)},
        }
        for i in range(n)
    ]


def describe_log(bootstrap: str, topic: str) -> str:
    """Per partition: the records a ``read_uncommitted`` reader finds, and the high
    watermark as of its last fetch. A row missing from both was never written (or was
    lost by the broker); one found here only was written but is not visible to the
    ``read_committed`` read-back."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "writer-describe",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    seen: Counter[int] = Counter()
    try:
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            for m in consumer.consume(500, 0.2):
                if m.error() is None:
                    seen[m.partition() or 0] += 1
        marks = [
            consumer.get_watermark_offsets(CkTopicPartition(topic, p), cached=True)
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()
    return "; ".join(
        f"partition {p}: {seen[p]} record(s) read uncommitted, watermarks {marks[p]}"
        for p in range(PARTITIONS)
    )


def check_topic(bootstrap: str, topic: str, n: int) -> None:
    """Every expected row is in the topic exactly once, where it was sent."""
    got = read_back(bootstrap, topic, n)
    by_value = Counter(value for _p, _k, value, _h in got)
    if len(got) != n:
        missing = sorted(
            {row["value"] for row in expected_rows(n)} - set(by_value), key=lambda v: int(v[1:])
        )
        raise AssertionError(
            f"{len(got)} records for {n} rows; missing {missing!r}; "
            f"{describe_log(bootstrap, topic)}"
        )
    assert all(c == 1 for c in by_value.values()), "a row was written twice"
    records = {value: (p, key, headers) for p, key, value, headers in got}
    for row in expected_rows(n):
        partition, key, headers = records[row["value"]]
        assert key == (None if row["key"] is None else row["key"].encode())
        if row["partition"] is not None:
            assert partition == row["partition"]
        assert headers == [("n", row["headers"]["n"].encode())]


def columns_writer(bootstrap: str, topic: str) -> KafkaWriter:
    """A writer of expected_rows()' columns."""
    return KafkaWriter(
        {"bootstrap.servers": bootstrap},
        topic,
        key_column="key",
        partition_column="partition",
        headers_column="headers",
    )


def test_write_rows_delivers_every_row(broker: EmbeddedBroker, unique_topic: str) -> None:
    broker.create_topic(unique_topic, partitions=PARTITIONS)
    writer = columns_writer(broker.bootstrap, unique_topic)
    delivered = writer.write_rows(expected_rows(ROWS))
    assert sum(delivered.values()) == ROWS
    assert {tp.topic for tp in delivered} == {unique_topic}
    assert {tp.partition for tp in delivered} <= set(range(PARTITIONS))
    check_topic(broker.bootstrap, unique_topic, ROWS)


def test_a_record_for_a_missing_partition_names_that_partition(
    broker: EmbeddedBroker, unique_topic: str
) -> None:
    broker.create_topic(unique_topic, partitions=PARTITIONS)
    writer = KafkaWriter(
        {"bootstrap.servers": broker.bootstrap}, unique_topic, partition_column="p"
    )
    # The bad record last: once a failure is seen the writer stops producing.
    rows = [{"value": b"a", "p": 1}, {"value": b"b", "p": 2}, {"value": b"c", "p": 7}]
    with pytest.raises(DeliveryError) as caught:
        writer.write_rows(rows)
    err = caught.value
    assert (err.topic, err.partition, err.name, err.failed) == (
        unique_topic,
        7,
        "_UNKNOWN_PARTITION",
        1,
    )
    assert str(err).startswith(
        f"1 of 3 records were not delivered; first failure: topic {unique_topic!r} partition 7"
    )


# --------------------------------------------------------------------------- Spark


def rows_frame(spark: SparkSession, n: int, *, header_pairs: bool = False) -> DataFrame:
    """expected_rows(n) as a DataFrame of 4 partitions: binary values, string keys,
    nullable int partitions, and headers as a map<string,string> or (``header_pairs``)
    an array<struct<key: string, value: binary>>."""
    headers = (
        "array(named_struct('key', 'n', 'value', cast(cast(id as string) as binary)))"
        if header_pairs
        else "map('n', cast(id as string))"
    )
    return spark.range(n, numPartitions=4).selectExpr(
        "case when id % 7 = 3 then null else concat('k', id) end as key",
        "cast(concat('v', id) as binary) as value",
        f"case when id % 5 = 0 then null else cast(id % {PARTITIONS} as int) end as partition",
        f"{headers} as headers",
    )


def test_foreach_partition_delivers_every_row_once(
    spark: SparkSession, kafka_broker: EmbeddedBroker, unique_topic: str
) -> None:
    kafka_broker.create_topic(unique_topic, partitions=PARTITIONS)
    writer = columns_writer(kafka_broker.bootstrap, unique_topic)
    rows_frame(spark, ROWS).foreachPartition(writer)
    check_topic(kafka_broker.bootstrap, unique_topic, ROWS)


def test_map_in_pandas_delivers_every_row_once_and_reports_counts(
    spark: SparkSession, broker: EmbeddedBroker, unique_topic: str
) -> None:
    broker.create_topic(unique_topic, partitions=PARTITIONS)
    writer = columns_writer(broker.bootstrap, unique_topic)
    frame = rows_frame(spark, ROWS, header_pairs=True)
    report = frame.mapInPandas(writer.map_in_pandas, writer.output_schema)
    counts: Counter[TopicPartition] = Counter()
    for row in report.collect():
        counts[TopicPartition(row["topic"], row["partition"])] += row["records"]
    assert sum(counts.values()) == ROWS
    assert {tp.topic for tp in counts} == {unique_topic}
    assert {tp.partition for tp in counts} <= set(range(PARTITIONS))
    check_topic(broker.bootstrap, unique_topic, ROWS)


def test_unreachable_broker_fails_the_spark_job_with_a_readable_error(
    spark: SparkSession, closed_port: str
) -> None:
    from pyspark.errors import PySparkException

    writer = KafkaWriter(
        {"bootstrap.servers": closed_port, "message.timeout.ms": 1000}, "nowhere", key_column="key"
    )
    frame = spark.range(4, numPartitions=1).selectExpr("cast(id as string) as key", "'v' as value")
    with pytest.raises(PySparkException) as caught:
        frame.foreachPartition(writer)
    text = str(caught.value)
    assert "DeliveryError" in text
    assert "topic 'nowhere' partition -1" in text
    assert "_MSG_TIMED_OUT" in text
