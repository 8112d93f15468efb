"""KIP-848 broker-side regular expressions on Apache Kafka and librdkafka's mock.

With ``group.protocol=consumer`` a ``^`` subscription is matched by the coordinator
(ConsumerGroupHeartbeat v1 ``SubscribedTopicRegex``), as librdkafka sends it. Kafka
(RE2/J) and the mock match it; a coordinator that only speaks v0 cannot, and
``poll()`` says so (the mock, limited to v0 with ``set_api_version``).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from coopconsumer import Consumer, TopicPartition
from coopconsumer._errors import ConfigurationError
from coopconsumer.testing import EmbeddedBroker, MockBroker

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


@pytest.fixture(params=["mock"])
def rx_broker(request: pytest.FixtureRequest) -> EmbeddedBroker:
    """The mock (for its ``set_api_version``), or Kafka where a test names it."""
    broker: EmbeddedBroker = request.getfixturevalue(f"{request.param}_broker")
    return broker


@pytest.fixture
def topics(rx_broker: EmbeddedBroker, unique_topic: str) -> list[str]:
    names = [f"{unique_topic}-rx-a", f"{unique_topic}-rx-b", f"{unique_topic}-other"]
    for name in names:
        rx_broker.create_topic(name, partitions=2)
    producer = Producer({"bootstrap.servers": rx_broker.bootstrap})
    for name in names:
        for i in range(10):
            producer.produce(name, value=f"{name}:{i}".encode(), partition=i % 2)
    assert producer.flush(10) == 0
    return names


@pytest.mark.parametrize("rx_broker", ["kafka", "mock"], indirect=True)
def test_the_coordinator_matches_the_regex(
    rx_broker: EmbeddedBroker, topics: list[str], unique_group: str
) -> None:
    prefix = topics[0].rsplit("-rx-", 1)[0]
    consumer = _consumer(rx_broker, unique_group)
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
    rx_broker: EmbeddedBroker, topics: list[str], unique_group: str
) -> None:
    assert isinstance(rx_broker, MockBroker)
    rx_broker.set_api_version(CONSUMER_GROUP_HEARTBEAT, 0, 0)
    consumer = _consumer(rx_broker, unique_group)
    try:
        consumer.subscribe("^rx-.*")
        with pytest.raises(ConfigurationError, match="does not match regular expressions"):
            _poll_for(consumer, 20.0)
    finally:
        consumer.close()
