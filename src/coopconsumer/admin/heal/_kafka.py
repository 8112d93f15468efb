"""The healer's state in Kafka: a compacted topic, and the election of the active
healer through a coopconsumer consumer group over it (docs/admin.md, "Healing after
a broker failure").

The topic has one partition. Every healer instance subscribes to it in the same
group; the group gives that partition to exactly one member, which is the active
healer. On receiving it, the member reads the topic from the beginning (the latest
value per key is the state) and is active once it reached the end; it writes each
change with the idempotent producer and waits for the acknowledgement. When it dies
or leaves, the group hands the partition to a standby, which reads the state and
resumes.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from ..._consumer import Consumer
from ..._errors import KafkaError
from ..._io._producer import IdempotentProducer
from ..._listener import RebalanceListener
from ..._types import TopicPartition
from .._admin_client import AdminClient
from .._admin_types import AdminOperationError, NewTopic
from ._heal_core import HealerError

__all__ = [
    "DEFAULT_GROUP_ID",
    "DEFAULT_STATE_TOPIC",
    "KafkaStateTopic",
    "create_state_topic",
    "read_state",
    "state_topic_settings",
]

log = logging.getLogger("coopconsumer.admin.heal")

#: ``heal.state.topic`` default.
DEFAULT_STATE_TOPIC = "__coopconsumer_heal"
#: ``heal.group.id`` default.
DEFAULT_GROUP_ID = "coopconsumer-heal"

#: Keys of the consumer's configuration the producer takes too (connection, security).
_SHARED_PREFIXES = ("bootstrap.servers", "client.id", "security.", "ssl.", "sasl.")


def state_topic_settings(brokers: int, replication_factor: int | None = None) -> NewTopic:
    """The state topic to create on a cluster of ``brokers`` live brokers: compacted,
    one partition, ``replication_factor`` replicas (default: min(3, brokers), so the
    state and the election survive the loss of a broker as Kafka's own internal
    topics do) and ``min.insync.replicas`` one less (at least 1, at most 2)."""
    rf = min(3, max(1, brokers)) if replication_factor is None else replication_factor
    return NewTopic(
        DEFAULT_STATE_TOPIC,
        num_partitions=1,
        replication_factor=rf,
        configs={
            "cleanup.policy": "compact",
            "min.insync.replicas": str(min(2, max(1, rf - 1))),
        },
    )


def create_state_topic(
    admin: AdminClient,
    topic: str = DEFAULT_STATE_TOPIC,
    *,
    replication_factor: int | None = None,
) -> int | None:
    """Create the compacted one-partition state topic with ``replication_factor``
    replicas (None: min(3, live brokers), see :func:`state_topic_settings`); the
    replication factor it got, None when it exists already."""
    settings = state_topic_settings(len(admin.describe_cluster().brokers), replication_factor)
    settings = attrs.evolve(settings, name=topic)
    try:
        admin.create_topics([settings])
    except AdminOperationError as exc:
        error = exc.errors.get(topic)
        if isinstance(error, KafkaError) and error.name == "TOPIC_ALREADY_EXISTS":
            return None
        raise
    return settings.replication_factor


def read_state(
    config: Mapping[str, object], topic: str = DEFAULT_STATE_TOPIC, *, timeout_s: float = 10.0
) -> dict[str, Mapping[str, Any]]:
    """The healer state in ``topic`` (the latest value per key), read to its end by a
    consumer that assigns itself the partition: it joins no group, so it never takes
    the state partition from the active healer. ``HealerError`` when the end is not
    reached within ``timeout_s`` or a record is not JSON."""
    settings = {
        k: v for k, v in config.items() if k.startswith((*_SHARED_PREFIXES, "session.", "request."))
    }
    settings["group.id"] = f"coopconsumer-heal-status-{uuid.uuid4().hex[:12]}"
    settings["enable.auto.commit"] = False
    partition = TopicPartition(topic, 0)
    consumer = Consumer(settings)
    records: dict[str, Mapping[str, Any]] = {}
    try:
        low, high = consumer.get_watermark_offsets(partition, timeout=timeout_s)
        if high <= low:
            return records
        consumer.assign([partition])
        consumer.seek_to_beginning([partition])
        deadline = time.monotonic() + timeout_s
        position = low
        while position < high:
            if time.monotonic() > deadline:
                raise HealerError(f"could not read {topic} to its end within {timeout_s} s")
            for message in consumer.consume(500, 0.2):
                offset = message.offset()
                if offset is not None:
                    position = max(position, offset + 1)
                key, value = message.key(), message.value()
                if key is None:
                    continue
                if value is None:
                    records.pop(key.decode(), None)
                    continue
                try:
                    records[key.decode()] = json.loads(value)
                except ValueError:
                    raise HealerError(f"state record {key.decode()!r} is not JSON") from None
    finally:
        consumer.close()
    return records


class KafkaStateTopic(RebalanceListener):
    """A :class:`HealStateStore` and :class:`HealerElection` over one compacted topic.

    ``config`` holds the consumer's keys (``bootstrap.servers``, security, and group
    timings such as ``session.timeout.ms``); ``group.id`` defaults to
    ``coopconsumer-heal``. Not thread-safe: call it from the healer's thread.
    """

    def __init__(
        self,
        config: Mapping[str, object],
        *,
        topic: str = DEFAULT_STATE_TOPIC,
        poll_timeout_s: float = 0.2,
    ) -> None:
        settings = dict(config)
        settings.setdefault("group.id", DEFAULT_GROUP_ID)
        # Sticky leadership: a standby that joins must not take the state partition
        # from a working active healer (the default range assignor could hand it over
        # to whichever member id sorts first).
        settings.setdefault("partition.assignment.strategy", "cooperative-sticky")
        settings["enable.auto.commit"] = False  # the state is re-read, never skipped
        settings["auto.offset.reset"] = "earliest"
        self.topic = topic
        self._partition = TopicPartition(topic, 0)
        self._poll_timeout_s = poll_timeout_s
        self._records: dict[str, Mapping[str, Any]] = {}
        self._owned = False
        self._caught_up = False
        self._end: int | None = None
        producer_keys = {k: v for k, v in settings.items() if k.startswith(_SHARED_PREFIXES)}
        self._consumer = Consumer(settings)
        try:
            self._producer = IdempotentProducer(producer_keys)
        except BaseException:
            self._consumer.close()
            raise
        self._consumer.subscribe([topic], listener=self)

    # ------------------------------------------------------------------ listener

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        if self._partition in partitions:
            self._owned = True
            self._caught_up = False
            self._records.clear()
            self._consumer.seek_to_beginning([self._partition])
            self._end = None

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        if self._partition in partitions:
            self._owned = False
            self._caught_up = False

    # ------------------------------------------------------------------ election

    def is_active(self) -> bool:
        """Poll the group; True once this member owns the state partition and has
        read it to the end."""
        for message in self._consumer.consume(500, self._poll_timeout_s):
            self._apply(message.key(), message.value())
        if self._owned and not self._caught_up:
            if self._end is None:
                self._end = self._consumer.get_watermark_offsets(self._partition)[1]
            position = self._consumer.position([self._partition]).get(self._partition)
            if self._end == 0 or (position is not None and position >= self._end):
                self._caught_up = True
                log.info("state topic %s read: %d key(s)", self.topic, len(self._records))
        return self._owned and self._caught_up

    def close(self) -> None:
        """Leave the group (a standby takes over) and release the clients."""
        try:
            self._consumer.close()
        finally:
            self._producer.close()

    # ------------------------------------------------------------------ store

    def load(self) -> dict[str, Mapping[str, Any]]:
        if not self._caught_up:
            raise HealerError("the state topic is not read to its end: not the active healer")
        return dict(self._records)

    def write(self, key: str, value: Mapping[str, Any] | None) -> None:
        payload = None if value is None else json.dumps(value, sort_keys=True).encode()
        self._producer.produce(self.topic, payload, key=key.encode(), partition=0)
        report = self._producer.flush()
        report.raise_for_failure()
        if value is None:
            self._records.pop(key, None)
        else:
            self._records[key] = value

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        name = key.decode()
        if value is None:
            self._records.pop(name, None)
            return
        try:
            self._records[name] = json.loads(value)
        except ValueError:
            raise HealerError(f"state record {name!r} is not JSON") from None
