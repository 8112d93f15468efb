"""Where ``auto.offset.reset`` puts partitions without a committed offset, asked of
their leaders with ListOffsets on the driver's turn: ``OffsetLookup``.

The fetcher (librdkafka) could resolve ``earliest``/``latest`` itself, but it asks only
once it knows the partition's leader, and a partition of a topic it has not seen yet
waits out a fixed half-second retry before its first fetch (docs/architecture.md,
"Start offsets"). Java's consumer resolves such positions with its own ListOffsets;
so does this: one Metadata request for the partitions' leaders, then one ListOffsets
per leader, all through ``VersionedCalls``. A partition that any step could not answer
for (no leader, an error, a timeout) is left out of the result, and the consumer hands
it to the fetcher with the logical offset as before: the lookup only ever makes the
first fetch sooner, it never decides where a partition starts on its own.

Runs on the driver's thread (or the asyncio host's loop) only. Imports the wire
protocol; never the group member, ``confluent_kafka`` or the consumer.
"""

from __future__ import annotations

import collections
import functools
import logging
from collections.abc import Callable, Iterable
from typing import Any

from .._errors import CoopConsumerError
from .._protocol.cluster import ClusterSnapshot
from .._protocol.queries import ListOffsetsQuery, MetadataQuery, list_offsets_answer
from .._types import TopicPartition
from ._driver_calls import ClientLike, VersionedCalls

__all__ = ["OffsetLookup"]

log = logging.getLogger("coopconsumer.driver")


def _node(node_id: int) -> int | None:
    return node_id


class OffsetLookup:
    """One lookup of the offsets at ``timestamp`` of ``partitions``; ``done`` gets the
    offsets found (possibly none) exactly once, on the driver's turn."""

    def __init__(
        self,
        calls: VersionedCalls,
        client: ClientLike,
        clock: Callable[[], float],
        *,
        partitions: Iterable[TopicPartition],
        timestamp: int,
        read_committed: bool,
        timeout_s: float,
        done: Callable[[dict[TopicPartition, int]], None],
    ) -> None:
        self._calls = calls
        self._client = client
        self._clock = clock
        self._partitions = frozenset(partitions)
        self._timestamp = timestamp
        self._read_committed = read_committed
        self._deadline = clock() + timeout_s
        self._done = done
        self._found: dict[TopicPartition, int] = {}
        #: ListOffsets requests not answered yet (None before the Metadata answer).
        self._waiting: int | None = None
        self._finished = False

    def start(self) -> None:
        """Ask for the partitions' leaders."""
        if not self._partitions:
            self._finish()
            return
        topics = sorted({tp.topic for tp in self._partitions})
        self._calls.add(
            MetadataQuery(topics=topics),
            self._client.least_loaded_node,
            self._remaining_s(),
            self._on_metadata,
            self._on_error,
        )

    def _remaining_s(self) -> float:
        return max(0.0, self._deadline - self._clock())

    def _on_metadata(self, response: Any, version: int) -> None:
        snapshot = ClusterSnapshot.from_response(response)
        for broker in snapshot.brokers.values():
            self._client.add_broker(broker.node_id, broker.host, broker.port)
        by_leader: dict[int, dict[str, list[int]]] = collections.defaultdict(
            lambda: collections.defaultdict(list)
        )
        for tp in sorted(self._partitions):
            topic = snapshot.topics.get(tp.topic)
            partition = None if topic is None else topic.partitions.get(tp.partition)
            if topic is None or topic.error_code != 0 or partition is None:
                continue
            if partition.leader_id < 0 or partition.leader_id not in snapshot.brokers:
                continue
            by_leader[partition.leader_id][tp.topic].append(tp.partition)
        self._waiting = len(by_leader)
        if not by_leader:
            self._finish()
            return
        for leader, partitions in sorted(by_leader.items()):
            query = ListOffsetsQuery(
                partitions={t: tuple(ps) for t, ps in partitions.items()},
                timestamp=self._timestamp,
                read_committed=self._read_committed,
            )
            self._calls.add(
                query,
                functools.partial(_node, leader),
                self._remaining_s(),
                functools.partial(self._on_offsets, query),
                self._on_error,
            )

    def _on_offsets(self, query: ListOffsetsQuery, response: Any, version: int) -> None:
        for (topic, partition), offset in list_offsets_answer(response, query, version).items():
            tp = TopicPartition(topic, partition)
            if tp in self._partitions:
                self._found[tp] = offset
        self._answered()

    def _on_error(self, error: CoopConsumerError) -> None:
        log.debug("looking up reset offsets: %s (the fetcher resets those itself)", error)
        if self._waiting is None:
            self._finish()  # the Metadata request failed: nothing else was sent
        else:
            self._answered()

    def _answered(self) -> None:
        assert self._waiting is not None
        self._waiting -= 1
        if self._waiting <= 0:
            self._finish()

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        self._done(dict(self._found))
