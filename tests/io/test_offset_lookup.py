"""``OffsetLookup``: where ``auto.offset.reset`` puts partitions, asked of their leaders
(one Metadata request, then one ListOffsets per leader) on the driver's turn. Every
partition it cannot answer for is left out, so that the consumer falls back to the
logical offset; ``done`` is called exactly once. A scripted client stands in for the
brokers: the test answers each request it sent."""

from __future__ import annotations

import time
from typing import Any

from coopconsumer import TopicPartition
from coopconsumer._errors import BrokerConnectionError
from coopconsumer._io._driver_calls import VersionedCalls
from coopconsumer._io._future import PendingRequest
from coopconsumer._io._offset_lookup import OffsetLookup
from coopconsumer._protocol._schema import Request
from coopconsumer._protocol.messages import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from coopconsumer._protocol.queries import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsQuery,
    list_offsets_answer,
)

NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3


class ScriptedClient:
    """Records what is sent; the test answers it (``answer``/``fail``)."""

    def __init__(self, version: int = 9) -> None:
        self.version = version
        self.sent: list[tuple[int, Request, PendingRequest[Any]]] = []
        self.brokers: dict[int, tuple[str, int]] = {}

    def send(
        self,
        node_id: int,
        request: Request,
        *,
        timeout_ms: float | None = None,
        api_version: int | None = None,
    ) -> PendingRequest[Any]:
        future: PendingRequest[Any] = PendingRequest(
            request, node_id=node_id, broker=f"b{node_id}", deadline=time.monotonic() + 30.0
        )
        future.api_version = api_version
        self.sent.append((node_id, request, future))
        return future

    def try_negotiated_version(self, node_id: int, api_key: int | type[Request]) -> int | None:
        return self.version

    def least_loaded_node(self) -> int | None:
        return 1

    def add_broker(self, node_id: int, host: str, port: int) -> None:
        self.brokers[node_id] = (host, port)

    def ready(self, node_id: int) -> bool:
        return True

    def poll(self, timeout_s: float) -> None:
        return None

    def wakeup(self) -> None:
        return None

    def add_coordinator(self, node_id: int, host: str, port: int) -> int:
        return node_id

    def connection_losses(self, node_id: int) -> int:
        return 0

    def close(self) -> None:
        return None

    def answer(self, index: int, response: object) -> None:
        future = self.sent[index][2]
        future._set_result(response)
        future._run_callbacks()

    def fail(self, index: int, error: BaseException) -> None:
        future = self.sent[index][2]
        future._set_exception(error)
        future._run_callbacks()


def metadata(
    leaders: dict[tuple[str, int], int], missing: tuple[str, ...] = ()
) -> MetadataResponse:
    topics: dict[str, list[MetadataResponsePartition]] = {}
    for (topic, partition), leader in sorted(leaders.items()):
        topics.setdefault(topic, []).append(
            MetadataResponsePartition(partition_index=partition, leader_id=leader)
        )
    return MetadataResponse(
        brokers=tuple(
            MetadataResponseBroker(node_id=n, host=f"host{n}", port=9000 + n) for n in (1, 2)
        ),
        topics=tuple(
            MetadataResponseTopic(name=name, partitions=tuple(ps)) for name, ps in topics.items()
        )
        + tuple(
            MetadataResponseTopic(name=name, error_code=UNKNOWN_TOPIC_OR_PARTITION)
            for name in missing
        ),
    )


def offsets(request: ListOffsetsRequest, error: int = 0, base: int = 100) -> ListOffsetsResponse:
    return ListOffsetsResponse(
        topics=tuple(
            ListOffsetsTopicResponse(
                name=t.name,
                partitions=tuple(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=error,
                        offset=-1 if error else base + p.partition_index,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    )


class Run:
    """One lookup over a scripted client; ``results`` collects each ``done`` call."""

    def __init__(
        self,
        partitions: set[TopicPartition],
        *,
        timestamp: int = EARLIEST_TIMESTAMP,
        read_committed: bool = False,
        version: int = 9,
    ) -> None:
        self.client = ScriptedClient(version)
        self.calls = VersionedCalls(self.client, time.monotonic)
        self.results: list[dict[TopicPartition, int]] = []
        OffsetLookup(
            self.calls,
            self.client,
            time.monotonic,
            partitions=partitions,
            timestamp=timestamp,
            read_committed=read_committed,
            timeout_s=5.0,
            done=self.results.append,
        ).start()

    def turn(self) -> None:
        """The driver's turn: send what is ready, deliver what was answered."""
        self.calls.step(time.monotonic())
        self.calls.deliver()
        self.calls.step(time.monotonic())


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def test_each_leader_is_asked_for_its_own_partitions() -> None:
    run = Run({tp("a", 0), tp("a", 1), tp("b", 0)}, timestamp=LATEST_TIMESTAMP)
    assert [type(r) for _, r, _ in run.client.sent] == [MetadataRequest]
    run.client.answer(0, metadata({("a", 0): 1, ("a", 1): 2, ("b", 0): 1}))
    run.turn()
    assert run.client.brokers == {1: ("host1", 9001), 2: ("host2", 9002)}
    asked = {node: r for node, r, _ in run.client.sent[1:]}
    assert sorted(asked) == [1, 2]
    assert isinstance(asked[1], ListOffsetsRequest)
    assert {
        (t.name, p.partition_index, p.timestamp) for t in asked[1].topics for p in t.partitions
    } == {
        ("a", 0, LATEST_TIMESTAMP),
        ("b", 0, LATEST_TIMESTAMP),
    }
    assert asked[1].isolation_level == 0
    assert run.results == []
    for index, (_, request, _) in enumerate(run.client.sent[1:], start=1):
        assert isinstance(request, ListOffsetsRequest)
        run.client.answer(index, offsets(request))
    run.turn()
    assert run.results == [{tp("a", 0): 100, tp("a", 1): 101, tp("b", 0): 100}]


def test_partitions_a_leader_refused_or_could_not_answer_are_left_out() -> None:
    run = Run({tp("a", 0), tp("a", 1), tp("a", 2)}, read_committed=True)
    run.client.answer(0, metadata({("a", 0): 1, ("a", 1): 2, ("a", 2): 2}))
    run.turn()
    requests = {node: (i, r) for i, (node, r, _) in enumerate(run.client.sent) if i > 0}
    assert all(r.isolation_level == 1 for _, r in requests.values())  # type: ignore[attr-defined]
    index_1, request_1 = requests[1]
    index_2, request_2 = requests[2]
    assert isinstance(request_1, ListOffsetsRequest)
    assert isinstance(request_2, ListOffsetsRequest)
    run.client.answer(index_1, offsets(request_1, error=NOT_LEADER_OR_FOLLOWER))
    run.turn()
    assert run.results == []  # leader 2 has not answered yet
    run.client.fail(index_2, BrokerConnectionError("connection lost"))
    run.turn()
    assert run.results == [{}]


def test_a_failed_metadata_request_ends_the_lookup_with_nothing_found() -> None:
    run = Run({tp("a", 0)})
    run.client.fail(0, BrokerConnectionError("connection refused"))
    run.turn()
    assert run.results == [{}]
    assert len(run.client.sent) == 1


def test_partitions_without_a_leader_or_topic_are_not_asked_for() -> None:
    run = Run({tp("a", 0), tp("a", 1), tp("gone", 0)})
    run.client.answer(0, metadata({("a", 0): -1, ("a", 1): 7}, missing=("gone",)))
    run.turn()
    # No partition has a leader the answer names (7 is not among its brokers).
    assert run.results == [{}]
    assert len(run.client.sent) == 1


def test_nothing_to_look_up_is_answered_at_once() -> None:
    run = Run(set())
    assert run.results == [{}]
    assert run.client.sent == []


def test_the_last_stable_offset_is_not_read_from_a_version_that_cannot_say_it() -> None:
    query = ListOffsetsQuery(
        partitions={"a": (0,)}, timestamp=LATEST_TIMESTAMP, read_committed=True
    )
    request = query.build(1)
    assert request.isolation_level == 0  # v1 has no isolation level
    answer = offsets(request)
    assert list_offsets_answer(answer, query, 1) == {}
    assert list_offsets_answer(answer, query, 2) == {("a", 0): 100}
    assert query.build(2).isolation_level == 1
