"""A minimal coopconsumer consumer: subscribe, poll, commit, close.

    python examples/minimal_consumer.py                     # starts an embedded Tansu broker
    python examples/minimal_consumer.py --bootstrap host:9092

Creates a topic, produces a few records with confluent-kafka, consumes them all in a
consumer group with cooperative rebalancing, commits, and exits 0. Exits 1 if the
records did not all arrive within --timeout seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack

from confluent_kafka import Producer

from coopconsumer import Consumer, RebalanceListener, TopicPartition
from coopconsumer.testing import EmbeddedBroker, embedded_broker, external_broker, unique_name


class PrintingListener(RebalanceListener):
    """Shows what the group gives and takes (called from inside poll())."""

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        print(f"assigned: {sorted(tp.partition for tp in partitions)}", flush=True)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        print(f"revoked: {sorted(tp.partition for tp in partitions)}", flush=True)


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
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
    parser.add_argument("--records", type=int, default=10, help="records to produce")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait")
    args = parser.parse_args(argv)

    with ExitStack() as stack:
        broker: EmbeddedBroker
        if args.bootstrap:
            broker = external_broker(args.bootstrap)
        else:
            print(f"starting an embedded {args.broker} broker", flush=True)
            broker = stack.enter_context(embedded_broker(args.broker))
        topic = unique_name("minimal")
        broker.create_topic(topic, partitions=args.partitions)
        produce(broker.bootstrap, topic, args.records)
        print(f"produced {args.records} records to {topic}", flush=True)

        config = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_name("minimal-group"),
            "partition.assignment.strategy": "cooperative-sticky",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # Short timeouts so a crashed run is noticed quickly by the broker.
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
        received = 0
        with Consumer(config) as consumer:
            consumer.subscribe([topic], listener=PrintingListener())
            deadline = time.monotonic() + args.timeout
            while received < args.records and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is None:
                    continue
                value = message.value() or b""  # None for a tombstone (null value)
                print(
                    f"partition {message.partition()} offset {message.offset()}: {value.decode()}",
                    flush=True,
                )
                received += 1
            if received:
                consumer.commit()  # synchronous: the positions of what poll() returned
                committed = consumer.committed(consumer.assignment())
                print(
                    f"committed offsets: {sorted((tp.partition, o) for tp, o in committed.items())}"
                )
    if received < args.records:
        print(f"FAILED: received {received} of {args.records} records", file=sys.stderr)
        return 1
    print(f"consumed {received} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
