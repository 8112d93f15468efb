"""A local SparkSession shared by the Spark tests (docs/spark.md).

``local[2,2]``: two task slots, and a task may fail once and be retried (local mode
ignores ``spark.task.maxFailures``; the second number is what counts). Each retry runs
in a new Python worker, which is what the injected-failure tests rely on. The session
starts in ~4 s, so it is started once per test session; the UI is off, shuffles use two
partitions and the driver gets 512 MiB.

The broker fixtures come from ``tests/integration/conftest.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The session's local Spark, ``local[2,2]``."""
    # Workers must run this interpreter (it has coopconsumer installed); loopback only.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("coopconsumer-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "512m")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
