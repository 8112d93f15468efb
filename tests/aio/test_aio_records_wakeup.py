"""librdkafka wakes the event loop through a file descriptor (``RecordsWakeup``): a
produced record wakes it, an idle queue does not, and close() detaches it; the handle
read from confluent-kafka's private layout is validated first, and a layout that does
not hold is a typed error and a fallback to polling."""

from __future__ import annotations

import asyncio
import logging

import confluent_kafka
import pytest

from coopconsumer._io import _librdkafka
from coopconsumer._io._fetcher import OFFSET_BEGINNING, Fetcher
from coopconsumer._io._librdkafka import HandleLayoutError, librdkafka_handle, loaded_librdkafka
from coopconsumer._types import TopicPartition
from coopconsumer.aio import _records_wakeup
from coopconsumer.aio._records_wakeup import RecordsWakeup
from coopconsumer.aio._signal import Signal
from coopconsumer.testing import EmbeddedBroker, unique_name

WAIT_S = 30.0


def test_a_record_wakes_the_loop_and_an_idle_queue_does_not(kafka: EmbeddedBroker) -> None:
    topic = unique_name("wake")
    kafka.create_topic(topic, 1)
    tp = TopicPartition(topic, 0)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap})

    async def drain(fetcher: Fetcher) -> int:
        count = 0
        while batch := fetcher.consume(100, 0):
            count += len(batch)
        return count

    async def main() -> None:
        fetcher = Fetcher({"bootstrap.servers": kafka.bootstrap})
        signal = Signal()
        wakeup = RecordsWakeup.create(asyncio.get_running_loop(), fetcher._consumer, signal.set)
        assert wakeup is not None
        assert loaded_librdkafka() is not None
        try:
            fetcher.assign({tp: OFFSET_BEGINNING})
            loop = asyncio.get_running_loop()
            # Let the assignment settle (the first fetches), then drain the queue.
            await asyncio.sleep(1.0)
            await drain(fetcher)
            signal.clear()
            before = wakeup.wakeups
            await signal.wait(1.5)
            assert wakeup.wakeups == before  # nothing queued: no wake-up
            for round_ in range(3):
                producer.produce(topic, b"r%d" % round_, partition=0)
                producer.flush(10)
                deadline = loop.time() + WAIT_S
                got = 0
                while got == 0 and loop.time() < deadline:
                    woken = wakeup.wakeups
                    await signal.wait(deadline - loop.time())
                    assert wakeup.wakeups > woken  # librdkafka woke it, not the timeout
                    got += await drain(fetcher)
                assert got == 1
            assert wakeup.wakeups > before
        finally:
            wakeup.close()
            wakeup.close()  # idempotent
            fetcher.close()

    asyncio.run(main())


def _offline_consumer() -> confluent_kafka.Consumer:
    # Nothing listens there; librdkafka only tries in the background.
    return confluent_kafka.Consumer(
        {"bootstrap.servers": "127.0.0.1:9", "group.id": "layout", "client.id": "layout-probe"}
    )


def test_the_handle_is_validated_before_librdkafka_gets_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lib = loaded_librdkafka()
    assert lib is not None  # Linux: the consumer's own tests rely on it
    consumer = _offline_consumer()
    producer = confluent_kafka.Producer({"bootstrap.servers": "127.0.0.1:9"})
    try:
        assert librdkafka_handle(lib, consumer) > 0
        with pytest.raises(HandleLayoutError, match=r"is not a confluent_kafka\.Consumer"):
            librdkafka_handle(lib, producer)
        # A confluent-kafka whose Handle keeps something else after the object header:
        # read one word further, as a changed layout would.
        monkeypatch.setattr(_librdkafka, "_RK_OFFSET", _librdkafka._RK_OFFSET + 8)
        with pytest.raises(HandleLayoutError, match=r"confluent-kafka \d+\.\d+"):
            librdkafka_handle(lib, consumer)
        # The consumer then falls back to polling, and says why once.
        monkeypatch.setattr(_records_wakeup, "_layout_warned", False)

        async def attach() -> object:
            return RecordsWakeup.create(asyncio.get_running_loop(), consumer, lambda: None)

        with caplog.at_level(logging.WARNING, "coopconsumer.aio.wakeup"):
            assert asyncio.run(attach()) is None
            assert asyncio.run(attach()) is None
        warnings = [r.getMessage() for r in caplog.records]
        assert len(warnings) == 1
        assert "polls for records every 50 ms" in warnings[0]
    finally:
        consumer.close()
