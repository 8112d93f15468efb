"""Exactly-once Kafka -> Python -> Kafka with coopconsumer's TransactionalProcessor.

    python examples/exactly_once.py                     # starts an embedded Tansu broker
    python examples/exactly_once.py --bootstrap host:9092

Starts a processor of a consumer group, then produces --records orders over about 10
seconds; meanwhile a second processor joins (a cooperative rebalance moves partitions to
it while a transaction holds their records: that transaction commits first) and leaves
again. Each processor turns an order into a priced record, committed in one transaction
with the order's offset. Finally an independent read_committed confluent-kafka consumer
counts the output: exit 0 when every order appears exactly once, 1 otherwise. See
docs/exactly-once.md.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from coopconsumer import TransactionalOutput, TransactionalProcessor
from coopconsumer.testing import EmbeddedBroker, embedded_broker, external_broker, unique_name

PARTITIONS = 4


def produce_orders(broker: EmbeddedBroker, topic: str, count: int, seconds: float) -> None:
    """Produce ``count`` orders, spread over ``seconds``."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(count):
        order = {"order_id": f"o{i}", "quantity": i % 5 + 1, "unit_price": 3}
        producer.produce(topic, json.dumps(order), key=f"customer-{i % 17}")
        producer.poll(0)
        time.sleep(seconds / count)
    producer.flush(30)


class Member:
    """One processor of the group, on its own thread (in production: its own process)."""

    def __init__(self, name: str, config: dict[str, object], source: str, sink: str) -> None:
        def price(records: list[Any], out: TransactionalOutput) -> None:
            # The process function: its only effect is the records it produces.
            for record in records:
                order = json.loads(record.value())
                total = order["quantity"] * order["unit_price"]
                out.produce(sink, json.dumps({**order, "total": total}), record.key())

        self.name = name
        # One transactional.id per process, stable across its restarts: a restarted
        # process fences its previous incarnation and aborts what it left open.
        producer_config = {"transactional.id": f"pricing-{socket.gethostname()}-{name}"}
        # Transactions of up to a second: fewer commits, output visible a little later.
        self.processor = TransactionalProcessor(
            config, producer_config, price, topics=[source], commit_interval_ms=1000
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        with self.processor:  # close() commits the open transaction and leaves the group
            while not self._stop.is_set():
                self.processor.step(0.2)

    def owns(self) -> int:
        return len(self.processor.assignment())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        stats = self.processor.stats()
        print(
            f"{self.name}: {stats.records_processed} orders in "
            f"{stats.transactions_committed} transactions, {stats.transactions_aborted} "
            f"aborted, {stats.commits_on_revoke} committed on revocation",
            flush=True,
        )


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def count_output(
    broker: EmbeddedBroker, topic: str, expected: int, timeout_s: float
) -> Counter[str]:
    reader = KafkaConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_name("verify"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.assign([KafkaTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: Counter[str] = Counter()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and seen.total() < expected:
        message = reader.poll(0.5)
        value = None if message is None or message.error() else message.value()
        if value is not None:
            seen[json.loads(value)["order_id"]] += 1
    time.sleep(1.0)  # anything late would be a duplicate: look once more
    while (message := reader.poll(0.2)) is not None:
        value = None if message.error() else message.value()
        if value is not None:
            seen[json.loads(value)["order_id"]] += 1
    reader.close()
    return seen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="an existing cluster (default: an embedded broker)")
    parser.add_argument(
        "--broker",
        choices=("tansu", "kafka"),
        default="tansu",
        help="the embedded broker: tansu (pip only) or kafka (Apache Kafka; Java 17, Maven)",
    )
    parser.add_argument("--records", type=int, default=2000, help="orders to produce")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait")
    args = parser.parse_args(argv)

    with ExitStack() as stack:
        broker: EmbeddedBroker
        if args.bootstrap:
            broker = external_broker(args.bootstrap)
        else:
            print(f"starting an embedded {args.broker} broker", flush=True)
            broker = stack.enter_context(embedded_broker(args.broker))
        source, sink = unique_name("orders"), unique_name("priced-orders")
        broker.create_topic(source, partitions=PARTITIONS)
        broker.create_topic(sink, partitions=PARTITIONS)
        config: dict[str, object] = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_name("pricing"),
            "partition.assignment.strategy": "cooperative-sticky",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
        first = Member("first", config, source, sink)
        wait_until(lambda: first.owns() == PARTITIONS, "the first processor to join")
        # Orders keep arriving while the group changes.
        feeder = threading.Thread(target=produce_orders, args=(broker, source, args.records, 10.0))
        feeder.start()
        time.sleep(2.0)
        second = Member("second", config, source, sink)  # a cooperative rebalance moves
        wait_until(lambda: second.owns() > 0, "the second processor to get partitions")
        time.sleep(3.0)
        second.stop()  # it leaves; the first takes its partitions back
        feeder.join()
        seen = count_output(broker, sink, args.records, args.timeout)
        first.stop()

    missing = args.records - len(seen)
    duplicated = sum(1 for n in seen.values() if n > 1)
    print(
        f"{len(seen)} of {args.records} orders priced: {duplicated} duplicated, {missing} missing"
    )
    return 0 if missing == 0 and duplicated == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
