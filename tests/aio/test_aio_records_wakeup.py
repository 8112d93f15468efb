"""librdkafka wakes the event loop through a file descriptor (``RecordsWakeup``): a
produced record wakes it, an idle queue does not, and close() detaches it."""

from __future__ import annotations

import asyncio

import confluent_kafka

from coopconsumer._io._fetcher import OFFSET_BEGINNING, Fetcher
from coopconsumer._types import TopicPartition
from coopconsumer.aio._records_wakeup import RecordsWakeup, loaded_librdkafka
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
