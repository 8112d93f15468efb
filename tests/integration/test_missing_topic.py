"""A topic that does not exist (issue 35, case 2): ``subscribe()``, ``assign()`` and
``TransactionalProcessor(topics=[...])`` used to sit idle forever with only DEBUG lines
naming the topic. Now each says so at once, as Kafka's clients do: ``error_cb`` (or a
WARNING) with ``UNKNOWN_TOPIC_OR_PARTITION`` naming the topic, repeated every 30 s
while it stays missing (not at every metadata answer), ``missing-topics`` in the
metrics and stats; and each keeps waiting: once the topic is created its records
arrive."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from coopconsumer import (
    Consumer,
    KafkaError,
    TopicPartition,
    TransactionalOutput,
    TransactionalProcessor,
)
from coopconsumer.testing import EmbeddedBroker
from integration.test_consumer import PATIENCE_S, config, produce

pytestmark = pytest.mark.integration


def _until(step: Callable[[], object], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not done():
        assert time.monotonic() < deadline, f"no {what} within {PATIENCE_S} s"
        step()


def _missing(errors: list[KafkaError], topic: str) -> list[KafkaError]:
    return [e for e in errors if e.name == "UNKNOWN_TOPIC_OR_PARTITION" and topic in str(e)]


def test_subscribe_to_a_missing_topic_says_so_and_consumes_it_once_created(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    errors: list[KafkaError] = []
    consumer = Consumer(config(broker, unique_group, error_cb=errors.append))
    try:
        consumer.subscribe([unique_topic])
        began = time.monotonic()
        _until(lambda: consumer.poll(0.2), lambda: bool(_missing(errors, unique_topic)), "report")
        assert consumer.metrics()["missing-topics"] == 1.0
        # Still missing: said once, not at every one-second metadata refresh.
        while time.monotonic() - began < 3.5:
            consumer.poll(0.2)
        assert len(_missing(errors, unique_topic)) == 1, errors
        broker.create_topic(unique_topic, partitions=2)
        produce(broker.bootstrap, unique_topic, [b"a", b"b"])
        got: list[object] = []
        _until(lambda: got.extend(consumer.consume(10, 0.2)), lambda: len(got) >= 2, "records")
        assert consumer.metrics()["missing-topics"] == 0.0
    finally:
        consumer.close()


def test_assign_of_a_missing_topic_warns_naming_it_and_consumes_it_once_created(
    broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = config(broker, unique_group)
    del settings["partition.assignment.strategy"]
    consumer = Consumer(settings)
    tp = TopicPartition(unique_topic, 0)

    def warned() -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.levelno == logging.WARNING
            and "UNKNOWN_TOPIC_OR_PARTITION" in r.getMessage()
            and unique_topic in r.getMessage()
        ]

    try:
        with caplog.at_level(logging.WARNING, logger="coopconsumer"):
            consumer.assign([tp])
            _until(lambda: consumer.poll(0.2), lambda: bool(warned()), "warning")
            assert broker.bootstrap.split(",")[0] in warned()[0].getMessage()
            broker.create_topic(unique_topic, partitions=1)
            produce(broker.bootstrap, unique_topic, [b"a"], partition=0)
            got: list[object] = []
            _until(lambda: got.extend(consumer.consume(10, 0.2)), lambda: bool(got), "records")
            _until(
                lambda: consumer.poll(0.2),
                lambda: consumer.metrics()["missing-topics"] == 0.0,
                "the topic seen",
            )
        assert len(warned()) == 1
        assert any(f"{unique_topic} exist now" in r.getMessage() for r in caplog.records)
    finally:
        consumer.close()


def test_a_transactional_processor_of_a_missing_topic_says_so_in_its_stats(
    tansu_broker: EmbeddedBroker,
    unique_topic: str,
    unique_group: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def process(records: list[Any], out: TransactionalOutput) -> None:
        return None

    processor = TransactionalProcessor(
        config(tansu_broker, unique_group),
        {"transactional.id": f"tx-{unique_group}", "transaction.timeout.ms": 10000},
        process,
        topics=[unique_topic],
    )
    try:
        with caplog.at_level(logging.WARNING, logger="coopconsumer"):
            _until(
                lambda: processor.step(0.2),
                lambda: processor.stats().missing_topics == 1,
                "missing topic in the stats",
            )
        assert any(
            unique_topic in r.getMessage() and "UNKNOWN_TOPIC_OR_PARTITION" in r.getMessage()
            for r in caplog.records
        )
    finally:
        processor.close()
