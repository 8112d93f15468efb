"""The driver thread against the fake cluster: lookups, OffsetFetch, metadata translation.

The member parses what the driver feeds back (transcripts in
tests/member/test_lookup_and_fetch.py); here the real driver runs on the fake
cluster of ``_consumer_fakes`` with faults injected through its public API.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from _consumer_fakes import FakeCluster

from coopconsumer import KafkaError, TopicPartition
from coopconsumer._member._metadata import metadata_update as _metadata_update
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.cluster import ClusterSnapshot
from coopconsumer._protocol.messages import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
    OffsetFetchRequest,
)

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TP2 = TopicPartition("t", 2)


def test_metadata_update_flags_internal_topics_and_skips_errors() -> None:
    response = MetadataResponse(
        brokers=(MetadataResponseBroker(node_id=1, host="h", port=1, rack="r1"),),
        topics=(
            MetadataResponseTopic(
                name="t",
                partitions=tuple(
                    MetadataResponsePartition(partition_index=p, replica_nodes=(1,))
                    for p in range(2)
                ),
            ),
            MetadataResponseTopic(
                name="__consumer_offsets",
                is_internal=True,
                partitions=(MetadataResponsePartition(partition_index=0),),
            ),
            MetadataResponseTopic(name="gone", error_code=error_codes.UNKNOWN_TOPIC_OR_PARTITION),
        ),
    )
    update = _metadata_update(ClusterSnapshot.from_response(response))
    assert dict(update.metadata.partition_counts) == {"t": 2, "__consumer_offsets": 1}
    assert update.internal_topics == frozenset({"__consumer_offsets"})
    assert update.metadata.racks_for_partition(TP0) == frozenset({"r1"})


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    c = FakeCluster("g", {"t": 2})
    yield c
    c.close_all()
    assert [t for t in threading.enumerate() if t.name == "coopconsumer-driver"] == []


SETTINGS: dict[str, object] = {
    "group.id": "g",
    "partition.assignment.strategy": "cooperative-sticky",
    "session.timeout.ms": 1000,
    "heartbeat.interval.ms": 100,
    "retry.backoff.ms": 20,
    "enable.auto.commit": False,
    "default.api.timeout.ms": 5000,
}


def test_coordinator_lookup_errors_are_retried_by_the_member(cluster: FakeCluster) -> None:
    consumer, client = cluster.consumer(SETTINGS)
    client.find_coordinator_errors = [error_codes.COORDINATOR_NOT_AVAILABLE] * 3
    consumer.subscribe(["t"])
    deadline = time.monotonic() + 10
    while consumer.assignment() != {TP0, TP1}:
        assert time.monotonic() < deadline
        consumer.poll(0.05)
    assert client.find_coordinator_errors == []  # every failed lookup was retried
    # the coordinator found was registered on a connection of its own
    assert client.coordinator_connections
    consumer.close()


def test_coordinator_lookup_refused_for_authorization_fails_poll(cluster: FakeCluster) -> None:
    consumer, client = cluster.consumer(SETTINGS)
    client.find_coordinator_errors = [error_codes.GROUP_AUTHORIZATION_FAILED]
    consumer.subscribe(["t"])
    deadline = time.monotonic() + 10
    with pytest.raises(KafkaError) as info:  # noqa: PT012 - poll until the error surfaces
        while time.monotonic() < deadline:
            consumer.poll(0.05)
    assert info.value.code == error_codes.GROUP_AUTHORIZATION_FAILED
    assert consumer.assignment() == frozenset()
    consumer.close()


def test_committed_retries_coordinator_errors(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(SETTINGS)
    consumer.subscribe(["t"])
    deadline = time.monotonic() + 10
    while consumer.assignment() != {TP0, TP1}:
        assert time.monotonic() < deadline
        consumer.poll(0.05)
    consumer.commit({TP0: 3})
    cluster.coordinator.fail_next(9, error_codes.COORDINATOR_LOAD_IN_PROGRESS, count=2)
    assert consumer.committed([TP0, TP1]) == {TP0: 3, TP1: None}
    cluster.coordinator.fail_next(9, error_codes.GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaError) as info:
        consumer.committed([TP0])
    assert info.value.code == error_codes.GROUP_AUTHORIZATION_FAILED
    consumer.close()


def test_read_committed_fetches_stable_offsets(cluster: FakeCluster) -> None:
    """KIP-447: with isolation.level=read_committed every OffsetFetch asks for stable
    offsets, and an offset a transaction still holds is fetched again, not read."""
    consumer, client = cluster.consumer({**SETTINGS, "isolation.level": "read_committed"})
    consumer.subscribe(["t"])
    deadline = time.monotonic() + 10
    while consumer.assignment() != {TP0, TP1}:
        assert time.monotonic() < deadline
        consumer.poll(0.05)
    consumer.commit({TP0: 5})
    cluster.coordinator.fail_next(9, error_codes.UNSTABLE_OFFSET_COMMIT)
    assert consumer.committed([TP0]) == {TP0: 5}
    fetches = [r for r in client.sent if isinstance(r, OffsetFetchRequest)]
    assert len(fetches) >= 2  # the unstable answer was asked again
    assert all(r.require_stable for r in fetches)
    consumer.close()


def test_logical_offsets_match_librdkafka() -> None:
    from coopconsumer._consumer_core import _arguments
    from coopconsumer._io import _fetcher

    assert _arguments.OFFSET_BEGINNING == _fetcher.OFFSET_BEGINNING
    assert _arguments.OFFSET_END == _fetcher.OFFSET_END


def test_importing_the_package_does_not_load_librdkafka() -> None:
    import subprocess
    import sys

    code = "import sys, coopconsumer; sys.exit('confluent_kafka' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_fetcher_forces_manual_mode_and_shortens_fetch_queue_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import confluent_kafka

    from coopconsumer._io import _fetcher

    seen: list[dict[str, object]] = []

    class Stub:
        def __init__(self, conf: dict[str, object]) -> None:
            seen.append(conf)

        def close(self) -> None:
            return None

    monkeypatch.setattr(confluent_kafka, "Consumer", Stub)
    _fetcher.Fetcher({"bootstrap.servers": "h:1", "enable.auto.commit": True}).close()
    _fetcher.Fetcher({"bootstrap.servers": "h:1", "fetch.queue.backoff.ms": 700}).close()
    assert seen[0]["enable.auto.commit"] is False  # commits belong to the group member
    assert seen[0]["fetch.queue.backoff.ms"] == 50
    assert seen[1]["fetch.queue.backoff.ms"] == 700  # the user's setting wins
