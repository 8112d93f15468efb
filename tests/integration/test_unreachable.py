"""A consumer whose brokers cannot be reached: it says so, through confluent-kafka's
channels (``error_cb``, Python logging), and librdkafka writes nothing to stderr."""

from __future__ import annotations

import logging
import re
import socket
import time

import pytest

from coopconsumer import Consumer, KafkaError

#: The client's name in librdkafka's log lines, e.g. ``[coopconsumer#consumer-3]``.
_CLIENT = re.compile(r"\[([^\]\s]+#consumer-\d+)\]")


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
    # stderr is the process's: another librdkafka client still alive from an earlier
    # test (a raw confluent-kafka producer whose cluster is gone, say) writes its own
    # "Connect to ... failed" lines there. What this test checks is that none comes from
    # this consumer's client, named in every line it logs ("[rdkafka-name#consumer-N]").
    names = {m.group(1) for r in librdkafka_lines if (m := _CLIENT.search(r.getMessage()))}
    assert names, [r.getMessage() for r in librdkafka_lines[:3]]
    mine = [
        line
        for line in capfd.readouterr().err.splitlines()
        if any(re.search(re.escape(name) + r"(?!\d)", line) for name in names)
    ]
    assert mine == []
