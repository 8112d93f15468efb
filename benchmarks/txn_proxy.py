"""Benchmark: what the transaction proxy (``embedded_broker("tansu", transactions=True)``)
adds to every request, and to producing and consuming through it.

    python benchmarks/txn_proxy.py [--requests N] [--records M] [--rounds R]

1. **Round trip.** One Tansu behind the proxy. One socket to the proxy and one to
   Tansu's own port (the same broker process), ``N`` (default 2,000) requests sent one
   at a time on each, the two paths alternating ``R`` times (default 5). Two kinds:
   *relayed* (Metadata v4 for no topic: the proxy reads the header only) and *decoded*
   (Heartbeat v4 for an unknown member: the proxy decodes the request and Tansu's
   answer, as for every group and transaction API). The timed window of a pass is from
   sending its first request to reading its last answer; the client runs in a child
   process (not sharing the proxy's interpreter lock). Prints the median over rounds
   of the per-request time of each path and their difference, the proxy's added
   latency per request, and the CPU time this process (the proxy's threads: the
   client is elsewhere) spent per request through the proxy, which other processes'
   load disturbs much less than wall time.
2. **Records.** A plain Tansu and a proxied Tansu (two broker processes, the same
   binary), ``M`` records (default 100,000, 100 bytes) each:
   *produce* with confluent-kafka (``acks=all``, ``linger.ms=20``), timed from the first
   ``produce`` to the end of ``flush``; *read_committed* of those records plus
   transactions of 1,000 records of which every tenth is aborted (so the proxy fills
   ``AbortedTransactions``), timed from the first record to the last one delivered.
   The broker that goes first alternates between rounds. Prints records/s of each
   broker and the ratio proxied / plain, per round and the median.

Nothing is asserted: figures only. Imports coopconsumer's testing module, its wire codec
and confluent-kafka.
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import statistics
import struct
import time
import uuid
from concurrent.futures import ProcessPoolExecutor

import confluent_kafka
from _common import describe_machine, print_table, produce

from coopconsumer._protocol import Request, encode_request
from coopconsumer._protocol.messages import HeartbeatRequest, MetadataRequest
from coopconsumer.testing import EmbeddedBroker, TransactionalBroker, embedded_broker


def _frame(request: Request, version: int, correlation_id: int) -> bytes:
    body = encode_request(
        request, api_version=version, correlation_id=correlation_id, client_id="b"
    )
    return struct.pack(">i", len(body)) + body


def _read(sock: socket.socket) -> None:
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    sock.recv(size, socket.MSG_WAITALL)


def _per_request_us(address: tuple[str, int], request: Request, version: int, count: int) -> float:
    frames = [_frame(request, version, n) for n in range(count)]
    with socket.create_connection(address) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(frames[0])  # warm the connection up (and the proxy's codec plans)
        _read(sock)
        started = time.perf_counter()
        for frame in frames:
            sock.sendall(frame)
            _read(sock)
        return (time.perf_counter() - started) / count * 1e6


def round_trips(broker: TransactionalBroker, count: int, rounds: int) -> None:
    host, port = broker.bootstrap.rsplit(":", 1)
    proxy = (host, int(port))
    direct = broker.proxy.upstream
    kinds: list[tuple[str, Request, int]] = [
        ("relayed (Metadata v4)", MetadataRequest(topics=()), 4),
        ("decoded (Heartbeat v4)", HeartbeatRequest(group_id="bench", member_id="nobody"), 4),
    ]
    rows = []
    # The client runs in a child process, so that it does not share this process's
    # interpreter lock with the proxy's threads.
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
        child.submit(int).result()  # started before the first timed pass
        for name, request, version in kinds:
            via, plain, cpu = [], [], []
            for _ in range(rounds):
                plain.append(
                    child.submit(_per_request_us, direct, request, version, count).result()
                )
                cpu_before = time.process_time()
                via.append(child.submit(_per_request_us, proxy, request, version, count).result())
                cpu.append((time.process_time() - cpu_before) / (count + 1) * 1e6)
            rows.append(
                [
                    name,
                    f"{statistics.median(plain):.0f}",
                    f"{statistics.median(via):.0f}",
                    f"{statistics.median(v - p for v, p in zip(via, plain, strict=True)):.0f}",
                    f"{statistics.median(cpu):.0f}",
                ]
            )
    print(f"\nround trip, {count} sequential requests x {rounds} rounds (median per request)")
    print_table(["request", "Tansu us", "via proxy us", "added us", "proxy CPU us"], rows)


def _transactions(bootstrap: str, topic: str, count: int) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex, "linger.ms": 20}
    )
    producer.init_transactions(30)
    for n in range(count // 1000):
        producer.begin_transaction()
        for _ in range(1000):
            producer.produce(topic, b"t" * 100, partition=0)
        producer.flush(60)
        if n % 10 == 9:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


def _read_committed(bootstrap: str, topic: str, expected: int) -> float:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen = 0
    started = 0.0
    deadline = time.monotonic() + 120
    while seen < expected and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                if not seen:
                    started = time.perf_counter()
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    if seen < expected:
        raise RuntimeError(f"read {seen} of {expected} records")
    return seen / elapsed


def records(plain: EmbeddedBroker, proxied: EmbeddedBroker, count: int, rounds: int) -> None:
    produce_ratio, read_ratio = [], []
    rows = []
    for round_ in range(rounds):
        rates = {}
        order = [("plain", plain), ("proxied", proxied)]
        for label, broker in order if round_ % 2 == 0 else order[::-1]:  # first goes first
            topic = f"bench-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, 1)
            rates[label, "produce"] = count / produce(broker.bootstrap, topic, count)
            _transactions(broker.bootstrap, topic, count)
            # Plain Tansu delivers the aborted tenth too (its gap), the proxy does not.
            committed = count + (count * 9 // 10 if label == "proxied" else count)
            rates[label, "read"] = _read_committed(broker.bootstrap, topic, committed)
        produce_ratio.append(rates["proxied", "produce"] / rates["plain", "produce"])
        read_ratio.append(rates["proxied", "read"] / rates["plain", "read"])
        rows.append(
            [
                str(round_ + 1),
                f"{rates['plain', 'produce']:,.0f}",
                f"{rates['proxied', 'produce']:,.0f}",
                f"{produce_ratio[-1]:.2f}",
                f"{rates['plain', 'read']:,.0f}",
                f"{rates['proxied', 'read']:,.0f}",
                f"{read_ratio[-1]:.2f}",
            ]
        )
    print(f"\nrecords/s, {count} records + {count} in transactions (10% aborted) per round")
    print_table(
        [
            "round",
            "produce plain",
            "produce proxied",
            "ratio",
            "read_c plain",
            "read_c proxied",
            "ratio",
        ],
        rows,
    )
    print(
        f"median ratio proxied/plain: produce {statistics.median(produce_ratio):.2f}, "
        f"read_committed {statistics.median(read_ratio):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(describe_machine())
    with embedded_broker("tansu", transactions=True) as proxied:
        assert isinstance(proxied, TransactionalBroker)
        round_trips(proxied, args.requests, args.rounds)
        with embedded_broker("tansu") as plain:
            records(plain, proxied, args.records, max(1, args.rounds // 2))
        print(f"\nproxy: {proxied.proxy.stats}")
        if proxied.proxy.failures:
            print(f"proxy failures: {proxied.proxy.failures}")


if __name__ == "__main__":
    main()
