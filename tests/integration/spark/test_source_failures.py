"""The data source when the user got something wrong (issue 35, case 4).

* A read against an address where no broker listens failed after 61-66 s (the 60 s API
  timeout), after about 1,160 log lines, with an error that did not name the address;
  now it fails within option ``fetchOffset.timeoutMs`` (15 s by default) with an error
  naming ``kafka.bootstrap.servers`` and the option. Planning runs the reader's
  ``partitions()``, called here as Spark calls it (no session needed).
* docs/spark.md's data-source example, run as written with a local master from a
  virtual environment that is not activated, failed with "No module named
  'coopconsumer'": Spark's Python workers ran ``python3`` from ``PATH``. Now
  ``register_data_source`` makes a local session's workers run this interpreter.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from coopconsumer import ConfigurationError, RequestTimeoutError
from coopconsumer.spark import CoopConsumerDataSource
from coopconsumer.testing import EmbeddedBroker


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_read_of_an_unreachable_broker_fails_in_bounded_time_naming_the_address(
    caplog: pytest.LogCaptureFixture,
) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    options = {
        "kafka.bootstrap.servers": address,
        "subscribe": "clicks",
        "fetchOffset.timeoutMs": "2000",
    }
    source = CoopConsumerDataSource(options)
    reader = source.reader(source.schema())
    began = time.monotonic()
    with (
        caplog.at_level(logging.DEBUG, logger="coopconsumer"),
        pytest.raises(RequestTimeoutError) as failure,
    ):
        reader.partitions()
    took = time.monotonic() - began
    message = str(failure.value)
    assert f"kafka.bootstrap.servers={address}" in message
    assert "fetchOffset.timeoutMs" in message
    assert took < 2.0 + 30  # the option's bound, generously (the machine is shared)
    # Each distinct failure is logged once per backoff window, not every ~50 ms.
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) <= 3, [r.getMessage() for r in warnings]


def test_the_option_is_checked() -> None:
    source = CoopConsumerDataSource(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "fetchOffset.timeoutMs": "-1"}
    )
    with pytest.raises(ConfigurationError, match=r"fetchOffset\.timeoutMs"):
        source.reader(source.schema())


_PROGRAM = """
    from pyspark.sql import SparkSession
    from coopconsumer.spark import register_data_source

    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_data_source(spark)
    rows = (
        spark.read.format("coopconsumer")
        .option("kafka.bootstrap.servers", BOOTSTRAP)
        .option("subscribe", TOPIC)
        .load()
        .count()
    )
    print("ROWS", rows)
    spark.stop()
"""


def test_the_data_source_example_works_from_a_venv_with_a_local_master(
    broker: EmbeddedBroker, unique_topic: str
) -> None:
    broker.create_topic(unique_topic, partitions=1)
    from integration.test_consumer import produce

    produce(broker.bootstrap, unique_topic, [b"a", b"b", b"c"], partition=0)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "VIRTUAL_ENV")}
    venv_bin = os.path.dirname(sys.executable)
    # As a user who runs .venv/bin/python without activating the venv: python3 on PATH
    # is another interpreter, one without coopconsumer.
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if os.path.abspath(p) != venv_bin
    )
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    program = f"BOOTSTRAP = {broker.bootstrap!r}\nTOPIC = {unique_topic!r}\n"
    program += textwrap.dedent(_PROGRAM)
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd="/",
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ROWS 3" in done.stdout
