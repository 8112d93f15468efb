"""An asyncio service consuming with ``coopconsumer.aio.AsyncConsumer``.

    python examples/asyncio_service.py                     # starts an embedded Tansu broker
    python examples/asyncio_service.py --bootstrap host:9092

Two consumers of one group run as tasks on one event loop beside the rest of the
service (here a ticker that reports progress, standing in for an HTTP server). Each
handles its records with an ``await`` (a pretend call to another service), commits
after every batch, and commits what it handled of a partition in its coroutine
``on_partitions_revoked`` before the partition moves. The second consumer joins while
the first is busy: with ``cooperative-sticky`` the first gives up only the partitions
that move and keeps reading the others; the second half of the records is produced
once both share the partitions. Exits 0 once every record was handled exactly
once, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack

from confluent_kafka import Producer

from coopconsumer import RebalanceInProgressError, TopicPartition
from coopconsumer.aio import AsyncConsumer
from coopconsumer.testing import EmbeddedBroker, embedded_broker, external_broker, unique_name


class Worker:
    """One group member: handle records, commit, hand partitions over cleanly."""

    def __init__(self, name: str, config: dict[str, object], topic: str, seen: Counter[str]):
        self.name = name
        self.config = config
        self.topic = topic
        self.seen = seen
        self.pending: dict[TopicPartition, int] = {}  # handled, not yet committed
        self.consumer: AsyncConsumer | None = None
        self.owned: set[TopicPartition] = set()
        self.handled = 0

    # The rebalance listener: coroutines, awaited in the sync consumer's order.
    async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.owned |= partitions
        print(f"{self.name} assigned {sorted(tp.partition for tp in partitions)}", flush=True)

    async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        await self.commit(partitions)  # before the next owner starts reading
        self.owned -= partitions
        print(f"{self.name} revoked {sorted(tp.partition for tp in partitions)}", flush=True)

    async def commit(self, only: frozenset[TopicPartition] | None = None) -> None:
        offsets = {tp: o for tp, o in self.pending.items() if only is None or tp in only}
        if not offsets or self.consumer is None:
            return
        try:
            await self.consumer.commit(offsets)
        except RebalanceInProgressError:
            return  # a rebalance runs: the next consume() moves it on, commit then
        for tp in offsets:
            del self.pending[tp]

    async def run(self, stop: asyncio.Event) -> None:
        async with AsyncConsumer(self.config) as consumer:
            self.consumer = consumer
            consumer.subscribe([self.topic], listener=self)
            while not stop.is_set():
                for record in await consumer.consume(100, timeout=0.2):
                    await asyncio.sleep(0.002)  # the pretend call to another service
                    self.seen[(record.key() or b"").decode()] += 1
                    self.handled += 1
                    # A record returned by consume() always has all three.
                    topic, partition, offset = record.topic(), record.partition(), record.offset()
                    if topic is not None and partition is not None and offset is not None:
                        self.pending[TopicPartition(topic, partition)] = offset + 1
                await self.commit()
            await self.commit()
        # Leaving the block closed the consumer: it left the group after
        # on_partitions_revoked committed what was still pending.


async def service(broker: EmbeddedBroker, topic: str, records: int, timeout_s: float) -> int:
    seen: Counter[str] = Counter()
    config: dict[str, object] = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": unique_name("asyncio-service"),
        "partition.assignment.strategy": "cooperative-sticky",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
    }
    stop = asyncio.Event()

    async def ticker() -> None:  # the rest of the service keeps running meanwhile
        while not stop.is_set():
            await asyncio.sleep(1.0)
            print(f"handled {len(seen)}/{records}", flush=True)

    first = Worker("worker-1", config, topic, seen)
    second = Worker("worker-2", config, topic, seen)
    tasks = [asyncio.create_task(first.run(stop)), asyncio.create_task(ticker())]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while len(seen) < records // 4 and loop.time() < deadline:
        await asyncio.sleep(0.05)
    tasks.append(asyncio.create_task(second.run(stop)))  # a rebalance while busy
    while not second.owned and loop.time() < deadline:
        await asyncio.sleep(0.05)
    # The second half arrives once both share the partitions.
    rest = records - records // 2
    await loop.run_in_executor(None, produce, broker.bootstrap, topic, rest, records // 2)
    while len(seen) < records and loop.time() < deadline:
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.gather(*tasks)
    twice = sum(1 for count in seen.values() if count > 1)
    if len(seen) < records or twice or not second.handled:
        print(f"FAILED: handled {len(seen)} of {records}, {twice} twice", file=sys.stderr)
        return 1
    print(f"worker-1 handled {first.handled}, worker-2 {second.handled}")
    print(f"handled {records} records exactly once with two consumers on one loop")
    return 0


def produce(bootstrap: str, topic: str, count: int, first: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(first, first + count):
        producer.produce(topic, key=f"key-{i}".encode(), value=f"record {i}".encode())
    if producer.flush(30) != 0:
        raise SystemExit("the producer could not deliver every record")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="an existing cluster (default: an embedded broker)")
    parser.add_argument(
        "--broker",
        choices=("tansu", "kafka"),
        default="tansu",
        help="the embedded broker: tansu (pip only) or kafka (Apache Kafka; Java 17, Maven)",
    )
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait")
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        broker: EmbeddedBroker
        if args.bootstrap:
            broker = external_broker(args.bootstrap)
        else:
            print(f"starting an embedded {args.broker} broker", flush=True)
            broker = stack.enter_context(embedded_broker(args.broker))
        topic = unique_name("asyncio")
        broker.create_topic(topic, partitions=args.partitions)
        produce(broker.bootstrap, topic, args.records // 2)
        print(f"produced {args.records // 2} records to {topic}", flush=True)
        return asyncio.run(service(broker, topic, args.records, args.timeout))


if __name__ == "__main__":
    sys.exit(main())
