"""A consumer whose brokers cannot be reached: it says so, through confluent-kafka's
channels (``error_cb``, Python logging), and librdkafka writes nothing to stderr."""

from __future__ import annotations

import logging
import socket
import time

import pytest

from coopconsumer import Consumer, KafkaError


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends


@pytest.mark.integration
def test_all_brokers_down_reaches_error_cb_and_librdkafka_logs_go_to_logging(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    errors: list[KafkaError] = []
    consumer = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{_closed_port()}",
            "group.id": "nobody-home",
            "error_cb": errors.append,
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 1000,
        }
    )
    began = time.monotonic()
    with caplog.at_level(logging.DEBUG, logger="coopconsumer.librdkafka"):
        try:
            consumer.subscribe(["t"])
            while time.monotonic() - began < 15 and not any(
                e.name == "_ALL_BROKERS_DOWN" for e in errors
            ):
                assert consumer.poll(0.2) is None
        finally:
            consumer.close(timeout=2.0)
    assert any(e.name == "_ALL_BROKERS_DOWN" for e in errors), [e.name for e in errors]
    librdkafka_lines = [r for r in caplog.records if r.name == "coopconsumer.librdkafka"]
    assert librdkafka_lines, "librdkafka's log lines should reach Python logging"
    assert "Connect to" not in capfd.readouterr().err
