"""Two consumers sharing a topic through a custom Python assignor, loaded by name.

    python examples/custom_assignor.py                      # starts an embedded Tansu broker
    python examples/custom_assignor.py --bootstrap host:9092

The assignor is ``my_assignors:HashAssignor`` (examples/my_assignors.py, next to this
file; Python puts the script's directory on sys.path, so the name resolves). It
supports COOPERATIVE rebalancing, so when the second consumer joins, the first one
gives up only the partitions that move, and keeps consuming the others.

Exits 0 when every record was consumed exactly once and the two consumers ended with
disjoint assignments covering the topic; 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack

from confluent_kafka import Producer

from coopconsumer import Consumer, RebalanceListener, TopicPartition
from coopconsumer.testing import EmbeddedBroker, embedded_broker, external_broker, unique_name

STRATEGY = "my_assignors:HashAssignor"


class Narrator(RebalanceListener):
    """Prints every callback with the consumer's name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rebalances = 0  # on_partitions_assigned ends every rebalance, even empty

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.rebalances += 1
        print(f"{self.name}: assigned {sorted(tp.partition for tp in partitions)}", flush=True)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        print(f"{self.name}: revoked {sorted(tp.partition for tp in partitions)}", flush=True)


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(first, first + count):
        producer.produce(topic, key=f"key-{i}".encode(), value=str(i).encode())
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
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--records", type=int, default=60, help="records per phase")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds to wait")
    args = parser.parse_args(argv)

    with ExitStack() as stack:
        broker: EmbeddedBroker
        if args.bootstrap:
            broker = external_broker(args.bootstrap)
        else:
            print(f"starting an embedded {args.broker} broker", flush=True)
            broker = stack.enter_context(embedded_broker(args.broker))
        topic = unique_name("hashed")
        broker.create_topic(topic, partitions=args.partitions)
        everything = frozenset(TopicPartition(topic, p) for p in range(args.partitions))
        config = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_name("hashed-group"),
            "partition.assignment.strategy": STRATEGY,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
        seen: Counter[bytes] = Counter()
        deadline = time.monotonic() + args.timeout

        def poll_all(consumers: Sequence[Consumer]) -> None:
            for consumer in consumers:
                for message in consumer.consume(50, 0.1):
                    value = message.value()
                    assert isinstance(value, bytes)
                    seen[value] += 1

        first = stack.enter_context(Consumer(config))
        first.subscribe([topic], listener=Narrator("consumer-1"))
        produce(broker.bootstrap, topic, 0, args.records)
        print(f"phase 1: one consumer, {args.records} records", flush=True)
        while len(seen) < args.records and time.monotonic() < deadline:
            poll_all([first])

        second = stack.enter_context(Consumer(config))
        joiner = Narrator("consumer-2")
        second.subscribe([topic], listener=joiner)
        print("phase 2: a second consumer joins", flush=True)
        # Both consumers must poll: the group's rebalance work runs inside poll(). The
        # hand-over is done when the joiner finished a rebalance and, after the
        # follow-up rebalance for moved partitions, every partition is owned again.
        while time.monotonic() < deadline and not (
            joiner.rebalances and first.assignment() | second.assignment() == everything
        ):
            poll_all([first, second])
        produce(broker.bootstrap, topic, args.records, args.records)
        while len(seen) < 2 * args.records and time.monotonic() < deadline:
            poll_all([first, second])

        one, two = first.assignment(), second.assignment()
        print(f"consumer-1 owns {sorted(tp.partition for tp in one)}")
        print(f"consumer-2 owns {sorted(tp.partition for tp in two)}")
        print(f"consumer-1 metrics: rebalance-total={first.metrics()['rebalance-total']:.0f}")

    expected = {str(i).encode() for i in range(2 * args.records)}
    duplicates = sorted(int(v) for v, n in seen.items() if n > 1)
    problems = []
    if set(seen) != expected:
        problems.append(f"missing records: {sorted(int(v) for v in expected - set(seen))}")
    if duplicates:
        problems.append(f"records consumed twice: {duplicates}")
    if one & two or one | two != everything:
        problems.append("the final assignments do not split the topic between the two")
    if problems:
        print("FAILED: " + "; ".join(problems), file=sys.stderr)
        return 1
    print(f"consumed {len(seen)} records exactly once with {STRATEGY}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
