"""``end_offsets`` (the librdkafka-backed end-offset query of ``_io/_fetcher.py``) asks a
partition again while the broker answers a retriable error: Kafka answers
NOT_LEADER_OR_FOLLOWER for a partition it lists but does not lead yet (seen right
after CreateTopics on one KRaft node, where a Spark job starting on a fresh topic failed
on it). A fake librdkafka consumer stands in for the broker."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import confluent_kafka
import pytest

from coopconsumer import TopicPartition
from coopconsumer._errors import KafkaError
from coopconsumer._io import _fetcher

NOT_LEADER_OR_FOLLOWER = 6
TOPIC_AUTHORIZATION_FAILED = 29


class _FakeConsumer:
    """One topic of two empty partitions; partition 1's first answers are ``codes``."""

    answers: list[int] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.asked: list[int] = []

    def list_topics(self, topic: str, timeout: float) -> Any:
        partitions = {0: object(), 1: object()}
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions=partitions, error=None)})

    def get_watermark_offsets(self, tp: Any, timeout: float, cached: bool) -> tuple[int, int]:
        self.asked.append(tp.partition)
        if tp.partition == 1 and self.answers:
            code = self.answers.pop(0)
            raise confluent_kafka.KafkaException(confluent_kafka.KafkaError(code))
        return (0, 0)

    def close(self) -> None:
        pass


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[_FakeConsumer]:
    monkeypatch.setattr(confluent_kafka, "Consumer", _FakeConsumer)
    return _FakeConsumer


def test_a_partition_without_its_leader_yet_is_asked_again(fake: type[_FakeConsumer]) -> None:
    fake.answers = [NOT_LEADER_OR_FOLLOWER, NOT_LEADER_OR_FOLLOWER]
    marks = _fetcher.end_offsets({"bootstrap.servers": "x:1"}, ["t"], timeout_s=10)
    assert marks == {TopicPartition("t", 0): (0, 0), TopicPartition("t", 1): (0, 0)}
    assert fake.answers == []  # both refusals were met, then the answer came


def test_a_lasting_retriable_error_fails_at_the_timeout(fake: type[_FakeConsumer]) -> None:
    fake.answers = [NOT_LEADER_OR_FOLLOWER] * 1000
    with pytest.raises(KafkaError) as info:
        _fetcher.end_offsets({"bootstrap.servers": "x:1"}, ["t"], timeout_s=0.5)
    assert info.value.code == NOT_LEADER_OR_FOLLOWER


def test_a_non_retriable_error_fails_at_once(fake: type[_FakeConsumer]) -> None:
    fake.answers = [TOPIC_AUTHORIZATION_FAILED, 0]
    with pytest.raises(KafkaError) as info:
        _fetcher.end_offsets({"bootstrap.servers": "x:1"}, ["t"], timeout_s=10)
    assert info.value.code == TOPIC_AUTHORIZATION_FAILED
    assert fake.answers == [0]  # not asked again
