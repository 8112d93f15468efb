"""Every program in examples/ runs to success against a broker.

Each example is run as a subprocess, as a user would run it: by default it starts its own
embedded Tansu broker (the pip-only path), and the consumer, assignor and exactly-once
examples run once more with ``--broker kafka`` (Apache Kafka, the referee); with
``COOPCONSUMER_BOOTSTRAP`` set every example gets ``--bootstrap`` and uses that cluster.
The subprocess timeout only catches hangs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from coopconsumer.testing import BOOTSTRAP_ENV

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
#: Generous bound for a shared 2-core machine; reaching it means the example hangs.
TIMEOUT_S = 240


#: The embedded brokers the main examples run on.
BROKERS = ["tansu", "kafka"]


def run_example(name: str, *args: str, broker: str = "tansu") -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(EXAMPLES / name), *args]
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if external:
        if broker != "tansu":
            pytest.skip(f"{BOOTSTRAP_ENV} is set: the examples use that cluster")
        argv += ["--bootstrap", external]
    else:
        argv += ["--broker", broker]
    # Run from elsewhere: the examples must not depend on the caller's directory.
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, cwd="/")
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.parametrize("broker", BROKERS)
def test_minimal_consumer(broker: str) -> None:
    out = run_example("minimal_consumer.py", "--records", "12", broker=broker).stdout
    values = re.findall(r"offset \d+: record (\d+)$", out, re.M)
    assert sorted(map(int, values)) == list(range(12))
    assert "consumed 12 records" in out
    committed = re.search(r"committed offsets: (.*)$", out, re.M)
    assert committed is not None
    # Committed offsets are the next offsets to read: they add up to the records read.
    assert sum(int(o) for o in re.findall(r"\(\d+, (\d+)\)", committed.group(1))) == 12


@pytest.mark.parametrize("broker", BROKERS)
def test_custom_assignor_loaded_by_name(broker: str) -> None:
    out = run_example("custom_assignor.py", "--records", "30", broker=broker).stdout
    assert "consumed 60 records exactly once with my_assignors:HashAssignor" in out
    owned_1 = re.search(r"^consumer-1 owns \[(.*)\]$", out, re.M)
    owned_2 = re.search(r"^consumer-2 owns \[(.*)\]$", out, re.M)
    assert owned_1 is not None
    assert owned_2 is not None
    parts_1 = {int(p) for p in owned_1.group(1).split(",") if p.strip()}
    parts_2 = {int(p) for p in owned_2.group(1).split(",") if p.strip()}
    assert parts_1 | parts_2 == set(range(12))
    assert not parts_1 & parts_2
    # COOPERATIVE: while the second consumer joined, the first revoked only what moved
    # to the second (the revocations at close come after the final report).
    report_at = out.index("consumer-1 owns")
    revoked = re.findall(r"^consumer-1: revoked \[(.*)\]$", out[:report_at], re.M)
    moved = {int(p) for line in revoked for p in line.split(",") if p.strip()}
    assert moved == parts_2


def test_prometheus_metrics() -> None:
    out = run_example("prometheus_metrics.py").stdout
    assert "consumed 20 of 20 records" in out
    total = re.search(r"^kafka_consumer_coordinator_rebalance_total = ([\d.]+)$", out, re.M)
    assert total is not None
    assert float(total.group(1)) >= 1
    latency = re.search(r"^kafka_consumer_coordinator_rebalance_latency_max = ([\d.]+)$", out, re.M)
    assert latency is not None
    assert float(latency.group(1)) > 0
    assigned = re.search(r"^kafka_consumer_coordinator_assigned_partitions = ([\d.]+)$", out, re.M)
    assert assigned is not None
    assert float(assigned.group(1)) == 4


def test_spark_pipeline() -> None:
    out = run_example("spark_pipeline.py", "--records", "1000", "--users", "20").stdout
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", out, re.M)  # the stats table
    assert sorted(int(member) for member, _attempt, _records in rows) == [0, 1]
    assert sum(int(records) for _m, _a, records in rows) == 1000
    assert "consumed 1000 records" in out
    assert "parquet rows: 1000 distinct of 1000 produced" in out
    assert re.search(r"^wrote 20 aggregate records to user-totals-", out, re.M)
    assert "read back 20 aggregate records" in out
    assert "pipeline OK: 1000 events -> 20 user totals" in out


@pytest.mark.parametrize("broker", BROKERS)
def test_exactly_once(broker: str) -> None:
    out = run_example("exactly_once.py", "--records", "1500", broker=broker).stdout
    assert "1500 of 1500 orders priced: 0 duplicated, 0 missing" in out
    processed = re.findall(
        r"^(first|second): (\d+) orders in \d+ transactions, (\d+) aborted", out, re.M
    )
    assert {name for name, _, _ in processed} == {"first", "second"}
    # Each order was committed by exactly one processor, and nothing had to be aborted.
    assert sum(int(n) for _, n, _ in processed) == 1500
    assert all(aborted == "0" for _, _, aborted in processed)
