"""Issue 32: an independent referee for exactly-once output, on Apache Kafka.

test_exactly_once.py's scale-out-and-in run (``TransactionalProcessor`` members A and B,
B joining and leaving while input flows and transactions are open) runs here on a real
Kafka broker, and its output is counted twice: by that test's own ``read_committed``
confluent-kafka reader, and by Kafka's Java client, a ``read_committed`` consumer
(tests/peers/java, ``referee``) that reads every partition of the output topic to its
last stable offset on its own and counts duplicates and gaps by key.
"""

from __future__ import annotations

import time

import pytest

from coopconsumer.testing import EmbeddedBroker, unique_name
from integration._ledger import OwnershipLedger, RecordAccounting
from integration.test_exactly_once import PARTITIONS, _scale_out_and_in
from peers._build import java_peer
from peers._process import run_referee
from peers._scenario import report_row

pytestmark = pytest.mark.slow


def test_java_read_committed_referee_counts_exactly_once(kafka_broker: EmbeddedBroker) -> None:
    started_at = time.monotonic()
    java = java_peer()
    source, sink = unique_name("eos-in"), unique_name("eos-out")
    kafka_broker.create_topic(source, PARTITIONS)
    kafka_broker.create_topic(sink, PARTITIONS)
    a, b, total = _scale_out_and_in(
        kafka_broker, source, sink, unique_name("g-eos"), "cooperative-sticky"
    )
    summary = run_referee(
        java.argv(
            "referee",
            "--bootstrap",
            kafka_broker.bootstrap,
            "--topics",
            sink,
            "--count",
            str(total),
        )
    )
    assert summary["duplicates"] == 0, summary
    assert summary["gaps"] == 0, summary
    assert summary["records"] == total, summary
    assert summary["distinct"] == total, summary
    report_row(
        "exactly-once scale out/in, Java read_committed referee",
        members={"coop (TransactionalProcessor)": 2, "java referee": 1},
        events=[
            "B joins and leaves with open transactions",
            f"referee: {summary['records']} records, {summary['duplicates']} duplicates, "
            f"{summary['gaps']} gaps",
            f"aborted: A {a.transactions_aborted}, B {b.transactions_aborted}",
        ],
        ledger=OwnershipLedger(),
        accounting=RecordAccounting(),
        duplicates={},
        kept_but_revoked=0,
        commit_refusals={},
        started_at=started_at,
    )
