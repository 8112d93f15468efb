"""KIP-848 broker-side regular expressions on librdkafka's mock cluster.

With ``group.protocol=consumer`` a ``^`` subscription is matched by the coordinator
(ConsumerGroupHeartbeat v1 ``SubscribedTopicRegex``), as librdkafka sends it. The
mock matches it; a coordinator that only speaks v0 cannot, and ``poll()`` says so.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from coopconsumer import Consumer, TopicPartition
from coopconsumer._errors import ConfigurationError
from coopconsumer.testing import EmbeddedBroker

CONSUMER_GROUP_HEARTBEAT = 68


def _consumer(broker: EmbeddedBroker, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def _poll_for(consumer: Consumer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.2)


@pytest.fixture
def topics(mock_broker: EmbeddedBroker, unique_topic: str) -> list[str]:
    names = [f"{unique_topic}-rx-a", f"{unique_topic}-rx-b", f"{unique_topic}-other"]
    for name in names:
        mock_broker.create_topic(name, partitions=2)
    producer = Producer({"bootstrap.servers": mock_broker.bootstrap})
    for name in names:
        for i in range(10):
            producer.produce(name, value=f"{name}:{i}".encode(), partition=i % 2)
    assert producer.flush(10) == 0
    return names


def test_the_coordinator_matches_the_regex(
    mock_broker: EmbeddedBroker, topics: list[str], unique_group: str
) -> None:
    prefix = topics[0].rsplit("-rx-", 1)[0]
    consumer = _consumer(mock_broker, unique_group)
    try:
        consumer.subscribe(f"^{prefix}-rx-.*")
        seen: dict[str, int] = {}
        deadline = time.monotonic() + 40
        while sum(seen.values()) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                topic = message.topic()
                assert topic is not None
                seen[topic] = seen.get(topic, 0) + 1
        assert seen == {topics[0]: 10, topics[1]: 10}
        assert consumer.assignment() == {TopicPartition(t, p) for t in topics[:2] for p in range(2)}
    finally:
        consumer.close()


def test_a_v0_coordinator_cannot_match_a_regex(
    mock_broker: EmbeddedBroker, topics: list[str], unique_group: str
) -> None:
    mock_broker.set_api_version(CONSUMER_GROUP_HEARTBEAT, 0, 0)
    consumer = _consumer(mock_broker, unique_group)
    try:
        consumer.subscribe("^rx-.*")
        with pytest.raises(ConfigurationError, match="does not match regular expressions"):
            _poll_for(consumer, 20.0)
    finally:
        consumer.close()
