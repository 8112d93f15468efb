"""The driver thread's I/O duties: lookups, OffsetFetch, metadata translation.

Pure helpers are tested directly; the retry paths run the real driver on the fake
cluster of ``_consumer_fakes`` with faults injected through its public API.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from _consumer_fakes import FakeCluster

from coopconsumer import KafkaError, OffsetAndMetadata, TopicPartition
from coopconsumer._io._client import ClusterSnapshot
from coopconsumer._io._driver import _metadata_update, _parse_offset_fetch
from coopconsumer._protocol import errors
from coopconsumer._protocol.messages import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TP2 = TopicPartition("t", 2)


def test_offset_fetch_single_group_form() -> None:
    response = OffsetFetchResponse(
        topics=(
            OffsetFetchResponseTopic(
                name="t",
                partitions=(
                    OffsetFetchResponsePartition(
                        partition_index=0,
                        committed_offset=7,
                        metadata="m",
                        committed_leader_epoch=3,
                    ),
                    OffsetFetchResponsePartition(partition_index=1, committed_offset=-1),
                    OffsetFetchResponsePartition(partition_index=9, committed_offset=5),
                ),
            ),
        )
    )
    got = _parse_offset_fetch(response, frozenset({TP0, TP1, TP2}), version=7)
    # Not asked (partition 9) is ignored; -1 and missing mean "nothing committed".
    assert got == {
        TP0: OffsetAndMetadata(offset=7, metadata="m", leader_epoch=3),
        TP1: None,
        TP2: None,
    }


def test_offset_fetch_batched_form_and_errors() -> None:
    ok = OffsetFetchResponse(
        groups=(
            OffsetFetchResponseGroup(
                group_id="g",
                topics=(
                    OffsetFetchResponseTopics(
                        name="t",
                        partitions=(
                            OffsetFetchResponsePartitions(partition_index=0, committed_offset=4),
                        ),
                    ),
                ),
            ),
        )
    )
    assert _parse_offset_fetch(ok, frozenset({TP0}), version=8) == {
        TP0: OffsetAndMetadata(offset=4)
    }
    group_error = OffsetFetchResponse(
        groups=(OffsetFetchResponseGroup(group_id="g", error_code=errors.NOT_COORDINATOR),)
    )
    with pytest.raises(KafkaError) as info:
        _parse_offset_fetch(group_error, frozenset({TP0}), version=8)
    assert info.value.code == errors.NOT_COORDINATOR
    top_error = OffsetFetchResponse(error_code=errors.GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaError):
        _parse_offset_fetch(top_error, frozenset({TP0}), version=7)
    partition_error = OffsetFetchResponse(
        topics=(
            OffsetFetchResponseTopic(
                name="t",
                partitions=(
                    OffsetFetchResponsePartition(
                        partition_index=0, error_code=errors.UNSTABLE_OFFSET_COMMIT
                    ),
                ),
            ),
        )
    )
    with pytest.raises(KafkaError) as info:
        _parse_offset_fetch(partition_error, frozenset({TP0}), version=7)
    assert info.value.code == errors.UNSTABLE_OFFSET_COMMIT


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
            MetadataResponseTopic(name="gone", error_code=errors.UNKNOWN_TOPIC_OR_PARTITION),
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
    client.find_coordinator_errors = [errors.COORDINATOR_NOT_AVAILABLE] * 3
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
    client.find_coordinator_errors = [errors.GROUP_AUTHORIZATION_FAILED]
    consumer.subscribe(["t"])
    deadline = time.monotonic() + 10
    with pytest.raises(KafkaError) as info:  # noqa: PT012 - poll until the error surfaces
        while time.monotonic() < deadline:
            consumer.poll(0.05)
    assert info.value.code == errors.GROUP_AUTHORIZATION_FAILED
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
    cluster.coordinator.fail_next(9, errors.COORDINATOR_LOAD_IN_PROGRESS, count=2)
    assert consumer.committed([TP0, TP1]) == {TP0: 3, TP1: None}
    cluster.coordinator.fail_next(9, errors.GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaError) as info:
        consumer.committed([TP0])
    assert info.value.code == errors.GROUP_AUTHORIZATION_FAILED
    consumer.close()


def test_logical_offsets_match_librdkafka() -> None:
    from coopconsumer import _consumer
    from coopconsumer._io import _fetcher

    assert _consumer._OFFSET_BEGINNING == _fetcher.OFFSET_BEGINNING
    assert _consumer._OFFSET_END == _fetcher.OFFSET_END


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
