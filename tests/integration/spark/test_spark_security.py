"""The Spark side over SASL_SSL (issue 10): ``KafkaWriter`` writes and
``run_consume_job`` reads with the same security keys as a Consumer, against the SASL
gateway (SCRAM-SHA-512 over TLS)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Message
from pyspark import TaskContext, cloudpickle

from coopconsumer.spark import KafkaWriter, run_consume_job
from coopconsumer.testing import (
    EmbeddedBroker,
    SaslServer,
    TestCertificates,
    embedded_broker,
    unique_name,
    write_test_certificates,
)
from integration.conftest import EXTERNAL_BOOTSTRAP

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

pytestmark = pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP), reason="starts its own broker")

RECORDS = 40


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return write_test_certificates(tmp_path_factory.mktemp("spark-certs"))


@pytest.fixture(scope="module")
def secured(certs: TestCertificates) -> Iterator[EmbeddedBroker]:
    server = SaslServer(mechanisms=("SCRAM-SHA-512",), users={"spark": "spark-secret"})
    with embedded_broker("tansu", tls=certs.tls_files(), sasl=server) as broker:
        yield broker


class LineSink:
    """Appends each record's value to this task attempt's file under ``out``."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def __call__(self, batch: list[Message]) -> None:
        context = TaskContext.get()
        assert context is not None
        name = f"member-{context.partitionId()}-{context.attemptNumber()}.txt"
        with (self.out / name).open("a") as f:
            f.write("".join(f"{(m.value() or b'').decode()}\n" for m in batch))


def test_writer_and_consume_job_over_sasl_ssl(
    spark: SparkSession, secured: EmbeddedBroker, certs: TestCertificates, tmp_path: Path
) -> None:
    security: dict[str, Any] = {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": str(certs.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "spark",
        "sasl.password": "spark-secret",
    }
    topic = unique_name("spark-sec")
    secured.create_topic(topic, 2)
    writer = KafkaWriter({"bootstrap.servers": secured.bootstrap, **security}, topic)
    rows = spark.createDataFrame([(f"v{i}".encode(),) for i in range(RECORDS)], "value binary")
    rows.repartition(2).foreachPartition(writer)
    config = {
        "bootstrap.servers": secured.bootstrap,
        "group.id": unique_name("spark-sec"),
        "session.timeout.ms": 2000,
        "heartbeat.interval.ms": 500,
        "max.poll.interval.ms": 20000,
        **security,
    }
    run_consume_job(spark, config, topic, LineSink(tmp_path), members=2, timeout_s=60).collect()
    values = [line for f in tmp_path.glob("member-*.txt") for line in f.read_text().split()]
    assert sorted(values) == sorted(f"v{i}" for i in range(RECORDS))
    mechanisms = set(secured.gateway.stats.mechanisms)  # type: ignore[attr-defined]
    assert mechanisms == {"SCRAM-SHA-512"}
