"""In-process fakes to run ``Consumer`` and its driver thread without sockets.

* ``FakeCluster``: one ``FakeGroupCoordinator`` (tests/member) behind a lock, the
  topic table, and a shared record log, for several consumers in one process.
* ``FakeClient``: the ``KafkaClient`` surface the driver uses (``send``/``poll``/
  ``wakeup``/...). FindCoordinator, Metadata and ListOffsets are answered by the
  cluster itself;
  group requests go to the fake coordinator, whose answers are routed back by client.
  ``fail_sends`` makes ``send`` raise, to prove a broken client cannot kill the driver
  silently.
* ``FakeFetcher``: the ``Fetcher`` surface over the cluster's in-memory log.
  ``refuse`` makes its next ``seek``/``assign`` calls raise ``KafkaError``, as
  librdkafka refuses a seek or an assignment in a state it does not accept.

Real clock (the driver thread reads ``time.monotonic``); tests keep session timeouts
short so they stay fast.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "member"))

from fake_group_coordinator import FakeGroupCoordinator

from coopconsumer import Consumer, KafkaError, RequestTimeoutError, TopicPartition
from coopconsumer._io._failure_log import FailureLog
from coopconsumer._io._future import PendingRequest
from coopconsumer._protocol._schema import Request
from coopconsumer._protocol.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
    OffsetFetchRequest,
)

COORDINATOR_NODE = 1
OFFSET_BEGINNING = -2
OFFSET_END = -1
#: librdkafka's position() of a partition that has returned no record yet.
OFFSET_INVALID = -1001


class FakeMessage:
    """The slice of confluent-kafka's ``Message`` the tests read."""

    __slots__ = ("_offset", "_partition", "_topic", "_value")

    def __init__(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._value = value

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value

    def error(self) -> None:
        return None


class FakeCluster:
    """Topics, records and one group coordinator shared by every fake client."""

    def __init__(self, group_id: str, topics: Mapping[str, int]) -> None:
        self.lock = threading.RLock()
        self.coordinator = FakeGroupCoordinator(group_id, node_id=COORDINATOR_NODE)
        self.topics: dict[str, int] = dict(topics)
        self.log: dict[TopicPartition, list[bytes]] = {
            TopicPartition(t, p): [] for t, n in topics.items() for p in range(n)
        }
        self.clients: list[FakeClient] = []
        self.consumers: list[Consumer] = []
        #: The error code every ListOffsets partition is answered with (0: none).
        self.list_offsets_error = 0
        self.fetchers: list[FakeFetcher] = []

    def produce(self, tp: TopicPartition, values: Iterable[bytes]) -> None:
        with self.lock:
            self.log[tp].extend(values)

    def set_partitions(self, topic: str, count: int) -> None:
        """Create a topic, grow it (new partitions are empty), or delete it (0)."""
        with self.lock:
            if count == 0:
                self.topics.pop(topic, None)
                return
            self.topics[topic] = count
            for p in range(count):
                self.log.setdefault(TopicPartition(topic, p), [])

    def metadata(self) -> MetadataResponse:
        with self.lock:
            topics = tuple(
                MetadataResponseTopic(
                    name=name,
                    is_internal=name.startswith("__"),
                    partitions=tuple(
                        MetadataResponsePartition(
                            partition_index=p, leader_id=COORDINATOR_NODE, replica_nodes=(1,)
                        )
                        for p in range(count)
                    ),
                )
                for name, count in self.topics.items()
            )
        return MetadataResponse(
            brokers=(MetadataResponseBroker(node_id=COORDINATOR_NODE, host="fake", port=1),),
            topics=topics,
        )

    def list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        """The log start (0) or end of each partition asked for (``-2``/``-1``)."""
        with self.lock:
            return ListOffsetsResponse(
                topics=tuple(
                    ListOffsetsTopicResponse(
                        name=topic.name,
                        partitions=tuple(
                            ListOffsetsPartitionResponse(
                                partition_index=p.partition_index,
                                error_code=self.list_offsets_error,
                                offset=0
                                if p.timestamp == OFFSET_BEGINNING
                                else len(self.log[TopicPartition(topic.name, p.partition_index)]),
                            )
                            for p in topic.partitions
                        ),
                    )
                    for topic in request.topics
                )
            )

    def consumer(self, settings: Mapping[str, object]) -> tuple[Consumer, FakeClient]:
        client = FakeClient(self, f"client-{len(self.clients)}")
        self.clients.append(client)
        config = {"bootstrap.servers": "fake:1", **settings}
        fetcher = FakeFetcher(self)
        self.fetchers.append(fetcher)
        consumer = Consumer._with_io(config, fetcher, client)
        self.consumers.append(consumer)
        return consumer, client

    def close_all(self) -> None:
        """Close every consumer made here (test teardown); errors are the test's."""
        for consumer in self.consumers:
            with contextlib.suppress(Exception):
                consumer.close(timeout=5.0)


class FakeClient:
    """The driver's view of ``KafkaClient``, backed by a ``FakeCluster``."""

    def __init__(self, cluster: FakeCluster, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.closed = False
        self.fail_sends = False
        #: While set, poll() blocks: the driver thread is stuck inside the client.
        self.hang = threading.Event()
        #: Error codes for the next FindCoordinator answers, consumed in order.
        self.find_coordinator_errors: list[int] = []
        self.sent: list[Request] = []
        #: Node ids registered through ``add_coordinator`` (one per coordinator found).
        self.coordinator_connections: list[int] = []
        self._wake = threading.Event()
        self._next_id = 0
        self._pending: dict[int, PendingRequest[Any]] = {}
        self._ready: list[tuple[PendingRequest[Any], object]] = []

    # -- ClientLike --------------------------------------------------------------------

    def send(
        self,
        node_id: int,
        request: Request,
        *,
        timeout_ms: float | None = None,
        api_version: int | None = None,
    ) -> PendingRequest[Any]:
        if self.fail_sends:
            raise RuntimeError("injected send failure")
        self.sent.append(request)
        # The request's own timeout, as the real client enforces it (see poll()).
        timeout_s = 30.0 if timeout_ms is None else timeout_ms / 1000.0
        future: PendingRequest[Any] = PendingRequest(
            request, node_id=node_id, broker="fake", deadline=time.monotonic() + timeout_s
        )
        future.api_version = api_version
        if isinstance(request, FindCoordinatorRequest):
            if self.find_coordinator_errors:
                code = self.find_coordinator_errors.pop(0)
                self._ready.append((future, FindCoordinatorResponse(error_code=code)))
            else:
                self._ready.append(
                    (
                        future,
                        FindCoordinatorResponse(node_id=COORDINATOR_NODE, host="fake", port=1),
                    )
                )
        elif isinstance(request, MetadataRequest):
            self._ready.append((future, self.cluster.metadata()))
        elif isinstance(request, ListOffsetsRequest):
            self._ready.append((future, self.cluster.list_offsets(request)))
        else:
            self._next_id += 1
            self._pending[self._next_id] = future
            with self.cluster.lock:
                self.cluster.coordinator.submit(
                    self.name, node_id, self._next_id, request, time.monotonic()
                )
        return future

    def poll(self, timeout_s: float) -> None:
        while self.hang.is_set():
            time.sleep(0.01)
        if not self._ready and not self._has_delivery():
            self._wake.wait(min(timeout_s, 0.01))
        self._wake.clear()
        with self.cluster.lock:
            self.cluster.coordinator.advance(time.monotonic())
            mine = [d for d in self.cluster.coordinator.outbox if d.client == self.name]
            self.cluster.coordinator.outbox = [
                d for d in self.cluster.coordinator.outbox if d.client != self.name
            ]
        ready, self._ready = self._ready, []
        for delivery in mine:
            future = self._pending.pop(delivery.request_id, None)
            if future is not None:
                ready.append((future, delivery.response))
        for future, response in ready:
            future._set_result(response)
            future._run_callbacks()
        now = time.monotonic()
        for request_id, future in list(self._pending.items()):
            if now >= future.deadline:  # an answer the coordinator dropped
                del self._pending[request_id]
                future._set_exception(RequestTimeoutError("no answer in time", broker="fake"))
                future._run_callbacks()

    def _has_delivery(self) -> bool:
        with self.cluster.lock:
            return any(d.client == self.name for d in self.cluster.coordinator.outbox)

    def wakeup(self) -> None:
        self._wake.set()

    def ready(self, node_id: int) -> bool:
        return True

    def try_negotiated_version(self, node_id: int, api_key: int | type[Request]) -> int | None:
        # The fake coordinator speaks the single-group OffsetFetch form (v1-7), up to
        # v7 so that KIP-447's require_stable is written; v3 for everything else.
        key = api_key if isinstance(api_key, int) else api_key.API_KEY
        return 7 if key == OffsetFetchRequest.API_KEY else 3

    def least_loaded_node(self) -> int | None:
        return COORDINATOR_NODE

    def add_broker(self, node_id: int, host: str, port: int) -> None:
        return None

    def add_coordinator(self, node_id: int, host: str, port: int) -> int:
        # One fake cluster answers on every node id: the coordinator keeps its own.
        self.coordinator_connections.append(node_id)
        return node_id

    def connection_losses(self, node_id: int) -> int:
        return 0  # the in-process cluster never drops a connection

    def close(self) -> None:
        self.closed = True


class FakeFetcher:
    """The consumer's view of ``Fetcher`` over the cluster's in-memory log.

    ``positions`` answers as librdkafka's ``position()`` does: the offset after the last
    record returned, and OFFSET_INVALID (-1001) for a partition that has returned no
    record since it was assigned or sought.
    """

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self._position: dict[TopicPartition, int] = {}
        #: Partitions that returned a record since they were assigned or sought.
        self._returned: set[TopicPartition] = set()
        self._paused: set[TopicPartition] = set()
        self.closed = False
        self.assign_calls: list[dict[TopicPartition, int]] = []
        self.client_errors: list[KafkaError] = []
        self.failures = FailureLog(logging.getLogger("coopconsumer.librdkafka"), 10.0)
        #: How many times the driver cut a consume() short (``Fetcher.wake``).
        self.wakes = 0
        #: Injected refusals: call name ("seek", "assign") -> how many of its next calls
        #: raise ``KafkaError`` without changing anything.
        self.refuse: dict[str, int] = {}

    def _maybe_refuse(self, what: str) -> None:
        left = self.refuse.get(what, 0)
        if left > 0:
            self.refuse[what] = left - 1
            raise KafkaError(
                -172, "_STATE", message=f"librdkafka fetcher: {what}: injected refusal"
            )

    @property
    def assigned(self) -> frozenset[TopicPartition]:
        return frozenset(self._position)

    def wake(self) -> None:
        self.wakes += 1

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        self._maybe_refuse("assign")
        self.assign_calls.append(dict(starts))
        with self.cluster.lock:
            for tp, offset in starts.items():
                if tp in self._position:
                    continue
                if offset == OFFSET_BEGINNING:
                    offset = 0
                elif offset == OFFSET_END:
                    offset = len(self.cluster.log[tp])
                self._position[tp] = offset

    def serve_events(self) -> None:
        pass

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._position.pop(tp, None)
            self._paused.discard(tp)
            self._returned.discard(tp)

    def consume(self, max_records: int, timeout_s: float) -> list[Any]:
        out: list[Any] = []
        with self.cluster.lock:
            for tp in sorted(self._position):
                if tp in self._paused:
                    continue
                log = self.cluster.log[tp]
                start = self._position[tp]
                take = log[start : start + max_records - len(out)]
                out.extend(
                    FakeMessage(tp.topic, tp.partition, start + i, v) for i, v in enumerate(take)
                )
                self._position[tp] = start + len(take)
                if take:
                    self._returned.add(tp)
                if len(out) >= max_records:
                    break
        if not out:
            time.sleep(min(timeout_s, 0.005))
        return out

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {
            tp: self._position[tp] if tp in self._returned else OFFSET_INVALID
            for tp in partitions
            if tp in self._position
        }

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._maybe_refuse("seek")
        self._position[tp] = offset
        self._returned.discard(tp)

    def watermarks(
        self, tp: TopicPartition, timeout_s: float | None, *, cached: bool
    ) -> tuple[int, int]:
        with self.cluster.lock:
            return 0, len(self.cluster.log[tp])

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_s: float | None
    ) -> dict[TopicPartition, int | None]:
        raise NotImplementedError("the in-memory log has no timestamps")

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self._paused |= set(partitions) & set(self._position)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._paused -= set(partitions)

    def close(self) -> None:
        self.closed = True
        self._position.clear()
