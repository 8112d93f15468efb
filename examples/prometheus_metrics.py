"""Export a consumer's KIP-429 rebalance metrics to Prometheus.

    pip install 'coopconsumer[prometheus]'
    python examples/prometheus_metrics.py                   # starts an embedded Tansu broker
    python examples/prometheus_metrics.py --bootstrap host:9092 --port 9464 --serve 60

Consumes a few records, serves the metrics on http://127.0.0.1:PORT/metrics (port 0:
any free port) and scrapes that endpoint itself to show what Prometheus would see.
--serve keeps the endpoint up for that many seconds for a real Prometheus to scrape.
Exits 0 when the scrape shows the rebalance that joined the group; 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.request
from collections.abc import Sequence
from contextlib import ExitStack

from confluent_kafka import Producer

from coopconsumer import Consumer
from coopconsumer.metrics_export import register_prometheus
from coopconsumer.testing import EmbeddedBroker, embedded_broker, external_broker, unique_name

#: The KIP-429 families to print from the scrape.
SHOWN = (
    "rebalance_total",
    "rebalance_latency_avg",
    "rebalance_latency_max",
    "failed_rebalance_total",
    "last_rebalance_seconds_ago",
    "partition_assigned_latency_avg",
    "assigned_partitions",
)


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=f"record {i}".encode())
    if producer.flush(30) != 0:
        raise SystemExit("the producer could not deliver every record")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        body: bytes = response.read()
    return body.decode()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="an existing cluster (default: an embedded broker)")
    parser.add_argument(
        "--broker",
        choices=("tansu", "kafka"),
        default="tansu",
        help="the embedded broker: tansu (pip only) or kafka (Apache Kafka; Java 17, Maven)",
    )
    parser.add_argument("--port", type=int, default=0, help="HTTP port (0: any free port)")
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--serve", type=float, default=0.0, help="keep serving N seconds")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait")
    args = parser.parse_args(argv)
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError:
        print("this example needs prometheus_client: pip install 'coopconsumer[prometheus]'")
        return 2

    with ExitStack() as stack:
        broker: EmbeddedBroker
        if args.bootstrap:
            broker = external_broker(args.bootstrap)
        else:
            print(f"starting an embedded {args.broker} broker", flush=True)
            broker = stack.enter_context(embedded_broker(args.broker))
        topic = unique_name("metered")
        broker.create_topic(topic, partitions=4)
        produce(broker.bootstrap, topic, args.records)

        group = unique_name("metered-group")
        consumer = stack.enter_context(
            Consumer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "group.id": group,
                    "client.id": "metered-1",
                    "partition.assignment.strategy": "cooperative-sticky",
                    "auto.offset.reset": "earliest",
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 1000,
                }
            )
        )
        # One registry per consumer; the exporter reads consumer.metrics at scrape time.
        registry = CollectorRegistry()
        exporter = register_prometheus(
            consumer.metrics, registry, labels={"client_id": "metered-1", "group_id": group}
        )
        stack.callback(registry.unregister, exporter)
        server, thread = start_http_server(args.port, addr="127.0.0.1", registry=registry)
        stack.callback(thread.join, 5)
        stack.callback(server.server_close)
        stack.callback(server.shutdown)
        port = server.server_port
        print(f"serving metrics on http://127.0.0.1:{port}/metrics", flush=True)

        consumer.subscribe([topic])
        received = 0
        deadline = time.monotonic() + args.timeout
        while received < args.records and time.monotonic() < deadline:
            received += len(consumer.consume(100, 0.5))
        print(f"consumed {received} of {args.records} records", flush=True)

        text = scrape(port)
        samples = {
            line.split("{", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("kafka_consumer_coordinator_")
        }
        for family in SHOWN:
            name = f"kafka_consumer_coordinator_{family}"
            print(f"{name} = {samples.get(name, float('nan'))}")
        if args.serve > 0:
            print(f"serving for {args.serve:.0f} s more", flush=True)
            end = time.monotonic() + args.serve
            while time.monotonic() < end:
                consumer.poll(0.5)  # keep the member alive in the group while serving

    rebalances = samples.get("kafka_consumer_coordinator_rebalance_total", 0.0)
    if received < args.records or rebalances < 1:
        print(f"FAILED: {received} records, rebalance_total={rebalances}", file=sys.stderr)
        return 1
    print("the scrape shows the group join as a rebalance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
