"""The transaction proxy in front of Tansu, checked with confluent-kafka clients (and
coopconsumer's Consumer where it reads offsets or group metadata).

Each feature has a test through the proxy and a ``test_plain_tansu_*`` twin showing
the gap on Tansu alone: the same steps, where Tansu gives the answer Kafka would not.
If a Tansu release closes a gap, its twin fails and says so.
"""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from coopconsumer import Consumer, KafkaError, RequestTimeoutError, TopicPartition
from coopconsumer._protocol import decode_response, encode_request
from coopconsumer._protocol import error_codes as kerr
from coopconsumer._protocol.messages import (
    ApiVersionsRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    MetadataRequest,
)
from coopconsumer.testing import (
    EmbeddedBroker,
    TransactionalBroker,
    TransactionProxy,
    embedded_broker,
    unique_name,
)
from coopconsumer.testing._txn_messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

pytestmark = pytest.mark.integration

TXN_OFFSET_COMMIT, END_TXN, ADD_OFFSETS, METADATA, OFFSET_FETCH = 28, 26, 25, 3, 9


@pytest.fixture
def proxied() -> Iterator[TransactionalBroker]:
    with embedded_broker("tansu", transactions=True) as broker:
        assert isinstance(broker, TransactionalBroker)
        yield broker
        assert broker.proxy.failures == ()


@pytest.fixture
def plain() -> Iterator[EmbeddedBroker]:
    with embedded_broker("tansu") as broker:
        yield broker


def transactional(broker: EmbeddedBroker, **extra: Any) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": unique_name("txn"),
            "linger.ms": 5,
            **extra,
        }
    )
    producer.init_transactions(20)
    return producer


def plain_producer(broker: EmbeddedBroker) -> Producer:
    return Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})


def send(producer: Producer, topic: str, value: bytes) -> None:
    producer.produce(topic, value, partition=0)
    assert producer.flush(10) == 0


def read_all(
    broker: EmbeddedBroker,
    topic: str,
    isolation: str,
    expected: int,
    start: int = 0,
    patience_s: float = 5.0,
) -> list[tuple[int, bytes]]:
    """(offset, value) of partition 0 from ``start``: ``expected`` records, or what came
    within ``patience_s``, plus anything that arrives in a further 0.3 s."""
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_name("reader"),
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign([KafkaTopicPartition(topic, 0, start)])
        records: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + patience_s
        while len(records) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                records.append(record(message))
        records += [record(m) for m in consumer.consume(100, 0.3) if m.error() is None]
        return records
    finally:
        consumer.close()


def record(message: Any) -> tuple[int, bytes]:
    offset, value = message.offset(), message.value()
    assert offset is not None
    assert value is not None
    return offset, value


def values(records: list[tuple[int, bytes]]) -> list[bytes]:
    return [value for _offset, value in records]


def cgmd(group: str, generation: int, member: str, instance: str | None = None) -> bytes:
    """librdkafka's serialized consumer group metadata (CGMDv2, native byte order)."""
    tail = b"\x01" if instance is None else b"\x00" + instance.encode() + b"\x00"
    return (
        b"CGMDv2:"
        + struct.pack("=i", generation)
        + group.encode()
        + b"\x00"
        + member.encode()
        + b"\x00"
        + tail
    )


def wait_assigned(consumer: Consumer, partitions: frozenset[TopicPartition]) -> None:
    """Poll coopconsumer's ``consumer`` until it owns exactly ``partitions``."""
    deadline = time.monotonic() + 20
    while consumer.assignment() != partitions:
        assert time.monotonic() < deadline, f"owns {consumer.assignment()}, not {partitions}"
        consumer.poll(0.1)


def wait_until(condition: Callable[[], bool], what: str, patience_s: float = 20.0) -> None:
    deadline = time.monotonic() + patience_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# --------------------------------------------------------------------------- aborted records


def write_transactions(broker: EmbeddedBroker, topic: str) -> None:
    """Committed, aborted and interleaved transactions of two producers, and a plain
    producer's record in the middle of an aborted transaction."""
    a, b, p = transactional(broker), transactional(broker), plain_producer(broker)
    a.begin_transaction()
    send(a, topic, b"a1")
    send(a, topic, b"a2")
    a.commit_transaction(10)
    a.begin_transaction()
    send(a, topic, b"x1")
    send(p, topic, b"p1")
    send(a, topic, b"x2")
    a.abort_transaction(10)
    b.begin_transaction()
    send(b, topic, b"b1")
    a.begin_transaction()
    send(a, topic, b"x3")
    b.commit_transaction(10)
    a.abort_transaction(10)
    a.begin_transaction()
    send(a, topic, b"a3")
    a.commit_transaction(10)


COMMITTED = [b"a1", b"a2", b"p1", b"b1", b"a3"]
EVERYTHING = [b"a1", b"a2", b"x1", b"p1", b"x2", b"b1", b"x3", b"a3"]


def test_read_committed_consumers_skip_aborted_transactions(proxied: TransactionalBroker) -> None:
    topic = unique_name("aborted")
    proxied.create_topic(topic, 1)
    write_transactions(proxied, topic)
    assert values(read_all(proxied, topic, "read_committed", 5)) == COMMITTED
    everything = read_all(proxied, topic, "read_uncommitted", 8)
    assert values(everything) == EVERYTHING
    offset = {value: offset for offset, value in everything}
    # What the proxy read in the log: x1..x2 and x3 aborted, one entry each.
    aborted = proxied.proxy.aborted_transactions(topic, 0)
    assert [(t.first_offset, t.last_offset > offset[b"x2"]) for t in aborted] == [
        (offset[b"x1"], True),
        (offset[b"x3"], True),
    ]
    # Starting inside an aborted transaction: the rest of it stays hidden.
    assert values(read_all(proxied, topic, "read_committed", 2, start=offset[b"x2"])) == [
        b"b1",
        b"a3",
    ]
    assert proxied.proxy.stats.fetches_rewritten >= 2


def test_coopconsumer_read_committed_skips_aborted_transactions(
    proxied: TransactionalBroker,
) -> None:
    topic = unique_name("aborted")
    proxied.create_topic(topic, 1)
    write_transactions(proxied, topic)
    config = {
        "bootstrap.servers": proxied.bootstrap,
        "group.id": unique_name("g"),
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 2000,
        "heartbeat.interval.ms": 300,
    }
    seen: list[tuple[int, bytes]] = []
    with Consumer(config) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while len(seen) < 5 and time.monotonic() < deadline:
            seen += [record(m) for m in consumer.consume(10, 0.2) if m.error() is None]
        seen += [record(m) for m in consumer.consume(10, 0.5) if m.error() is None]
    assert values(seen) == COMMITTED


def test_plain_tansu_shows_aborted_records_to_read_committed(plain: EmbeddedBroker) -> None:
    topic = unique_name("aborted")
    plain.create_topic(topic, 1)
    write_transactions(plain, topic)
    assert values(read_all(plain, topic, "read_committed", 8)) == EVERYTHING


# --------------------------------------------------------------------------- KIP-447 fencing


def group_member(broker: EmbeddedBroker, group: str, **extra: Any) -> KafkaConsumer:
    return KafkaConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "session.timeout.ms": 2000,
            "heartbeat.interval.ms": 300,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **extra,
        }
    )


def poll_until_assigned(*consumers: KafkaConsumer) -> None:
    """Poll every consumer until each owns partitions and none is mid-rebalance."""
    deadline = time.monotonic() + 30
    while not all(c.assignment() for c in consumers):
        assert time.monotonic() < deadline, "the group did not settle"
        for consumer in consumers:
            consumer.poll(0.1)
    for _ in range(5):  # a round more for followers that just got their assignment
        for consumer in consumers:
            consumer.poll(0.05)


def settle_after(
    proxy: TransactionProxy, group: str, generation: int, *consumers: KafkaConsumer
) -> int:
    """Poll until the group has a generation after ``generation`` and every consumer
    owns partitions; return the new generation."""
    deadline = time.monotonic() + 30
    while True:
        poll_until_assigned(*consumers)
        view = proxy.group_view(group)
        if view is not None and view[0] > generation:
            return view[0]
        assert time.monotonic() < deadline, "no new generation"


def commit_offsets(producer: Producer, topic: str, group_metadata: bytes, offset: int) -> None:
    """One transaction: a record and the group's offset of partition 0. Tansu needs a
    record in each transaction for its offsets to apply (the research notes, 6.2)."""
    producer.begin_transaction()
    send(producer, topic, b"out")
    try:
        producer.send_offsets_to_transaction(
            [KafkaTopicPartition(topic, 0, offset)], group_metadata, 10
        )
    except KafkaException:
        producer.abort_transaction(10)
        raise
    producer.commit_transaction(10)


def refused_code(error: KafkaException) -> int:
    return int(error.args[0].code())


def test_txn_offset_commits_are_fenced_by_generation_and_member(
    proxied: TransactionalBroker,
) -> None:
    topic, group = unique_name("in"), unique_name("g")
    proxied.create_topic(topic, 2)
    first = group_member(proxied, group)
    first.subscribe([topic])
    poll_until_assigned(first)
    before = first.consumer_group_metadata()
    producer = transactional(proxied)
    commit_offsets(producer, topic, before, 1)
    view = proxied.proxy.group_view(group)
    assert view is not None
    generation, members = view
    assert len(members) == 1

    second = group_member(proxied, group)
    second.subscribe([topic])
    settle_after(proxied.proxy, group, generation, first, second)
    (member,) = set(members)
    with pytest.raises(KafkaException) as stale:
        commit_offsets(producer, topic, before, 2)  # the generation before `second` joined
    assert stale.value.args[0].txn_requires_abort()
    assert refused_code(stale.value) == kerr.ILLEGAL_GENERATION
    current = proxied.proxy.group_view(group)
    assert current is not None
    with pytest.raises(KafkaException) as unknown:
        commit_offsets(producer, topic, cgmd(group, current[0], "not-a-member"), 3)
    assert refused_code(unknown.value) == kerr.UNKNOWN_MEMBER_ID
    # The member's current metadata, and the unfenced generation -1 path, are accepted.
    commit_offsets(producer, topic, first.consumer_group_metadata(), 4)
    commit_offsets(producer, topic, cgmd(group, -1, ""), 5)
    records = proxied.proxy.txn_offset_commits
    assert [(r.offsets[0][2], r.error_code, r.fenced_by_proxy) for r in records] == [
        (1, 0, False),
        (2, kerr.ILLEGAL_GENERATION, True),
        (3, kerr.UNKNOWN_MEMBER_ID, True),
        (4, 0, False),
        (5, 0, False),
    ]
    assert records[1].member_id == member
    assert records[1].generation_id == generation
    first.close()
    second.close()


def test_static_members_are_fenced_by_instance_id(proxied: TransactionalBroker) -> None:
    topic, group = unique_name("in"), unique_name("g")
    proxied.create_topic(topic, 1)
    member = group_member(proxied, group, **{"group.instance.id": "instance-1"})
    member.subscribe([topic])
    poll_until_assigned(member)
    view = proxied.proxy.group_view(group)
    assert view is not None
    generation, members = view
    assert set(members.values()) == {"instance-1"}
    producer = transactional(proxied)
    commit_offsets(producer, topic, member.consumer_group_metadata(), 1)
    with pytest.raises(KafkaException) as fenced:
        commit_offsets(producer, topic, cgmd(group, generation, "old-member", "instance-1"), 2)
    assert refused_code(fenced.value) == kerr.FENCED_INSTANCE_ID
    member.close()


def test_coopconsumer_group_metadata_passes_the_fence_until_it_leaves(
    proxied: TransactionalBroker,
) -> None:
    topic, group = unique_name("in"), unique_name("g")
    proxied.create_topic(topic, 1)
    config = {
        "bootstrap.servers": proxied.bootstrap,
        "group.id": group,
        "session.timeout.ms": 2000,
        "heartbeat.interval.ms": 300,
    }
    producer = transactional(proxied)
    consumer = Consumer(config)
    consumer.subscribe([topic])
    wait_assigned(consumer, frozenset({TopicPartition(topic, 0)}))
    metadata = consumer.group_metadata()
    blob = cgmd(group, metadata.generation_id, metadata.member_id)
    commit_offsets(producer, topic, blob, 1)
    consumer.close()  # LeaveGroup: the member id is gone
    with pytest.raises(KafkaException) as left:
        commit_offsets(producer, topic, blob, 2)
    assert refused_code(left.value) == kerr.UNKNOWN_MEMBER_ID
    assert [r.member_id for r in proxied.proxy.txn_offset_commits] == [metadata.member_id] * 2


def test_plain_tansu_accepts_stale_generations_and_unknown_members(plain: EmbeddedBroker) -> None:
    topic, group = unique_name("in"), unique_name("g")
    plain.create_topic(topic, 1)
    member = group_member(plain, group)
    member.subscribe([topic])
    poll_until_assigned(member)
    producer = transactional(plain)
    commit_offsets(producer, topic, cgmd(group, 1000, "not-a-member"), 1)
    commit_offsets(producer, topic, cgmd(group, 1000, "not-a-member", "not-an-instance"), 2)
    member.close()


# --------------------------------------------------------------------------- require_stable


def committed_offset(broker: EmbeddedBroker, group: str, topic: str, timeout_s: float) -> int:
    """What a read_committed confluent-kafka consumer reads as the group's offset of
    partition 0 (it sends require_stable and retries UNSTABLE_OFFSET_COMMIT until
    ``timeout_s``, then raises KafkaException)."""
    consumer = group_member(broker, group, **{"isolation.level": "read_committed"})
    try:
        (tp,) = consumer.committed([KafkaTopicPartition(topic, 0)], timeout=timeout_s)
        return int(tp.offset)
    finally:
        consumer.close()


def open_transaction_with_offset(producer: Producer, topic: str, group: str, offset: int) -> None:
    producer.begin_transaction()
    send(producer, topic, b"out")
    producer.send_offsets_to_transaction(
        [KafkaTopicPartition(topic, 0, offset)], cgmd(group, -1, ""), 10
    )


def test_offsets_of_an_unfinished_transaction_are_unstable(proxied: TransactionalBroker) -> None:
    topic, group = unique_name("in"), unique_name("g")
    proxied.create_topic(topic, 1)
    producer = transactional(proxied)
    commit_offsets(producer, topic, cgmd(group, -1, ""), 7)
    open_transaction_with_offset(producer, topic, group, 42)
    assert proxied.proxy.pending_offsets() == {
        (group, topic, 0): frozenset({producer_txn_id(proxied)})
    }
    with pytest.raises(KafkaException):
        committed_offset(proxied, group, topic, 1.5)
    config = {
        "bootstrap.servers": proxied.bootstrap,
        "group.id": group,
        "isolation.level": "read_committed",
    }
    requests_before = proxied.proxy.stats.requests.get(OFFSET_FETCH, 0)
    with Consumer(config) as consumer, pytest.raises(RequestTimeoutError) as unstable:
        consumer.committed([TopicPartition(topic, 0)], timeout=1.5)
    # coopconsumer retried (every retry.backoff.ms) until the timeout, then reported a
    # timeout caused by the last answer.
    cause = unstable.value.__cause__
    assert isinstance(cause, KafkaError)
    assert cause.code == kerr.UNSTABLE_OFFSET_COMMIT
    assert proxied.proxy.stats.requests[OFFSET_FETCH] - requests_before >= 3
    producer.commit_transaction(10)
    assert committed_offset(proxied, group, topic, 10) == 42
    with Consumer(config) as consumer:
        assert consumer.committed([TopicPartition(topic, 0)], timeout=10) == {
            TopicPartition(topic, 0): 42
        }
    # An abort ends it too (and its offset is dropped).
    open_transaction_with_offset(producer, topic, group, 50)
    producer.abort_transaction(10)
    assert committed_offset(proxied, group, topic, 10) == 42
    # So does a new producer of the same transactional id (Tansu aborts what it finds).
    open_transaction_with_offset(producer, topic, group, 60)
    successor = Producer(
        {"bootstrap.servers": proxied.bootstrap, "transactional.id": producer_txn_id(proxied)}
    )
    successor.init_transactions(20)
    assert proxied.proxy.pending_offsets() == {}
    assert committed_offset(proxied, group, topic, 10) == 42


def producer_txn_id(broker: TransactionalBroker) -> str:
    """The transactional id of the (single) producer whose offsets are pending."""
    ids = {r.transactional_id for r in broker.proxy.txn_offset_commits}
    (only,) = ids
    return only


def test_plain_tansu_ignores_require_stable(plain: EmbeddedBroker) -> None:
    topic, group = unique_name("in"), unique_name("g")
    plain.create_topic(topic, 1)
    producer = transactional(plain)
    commit_offsets(producer, topic, cgmd(group, -1, ""), 7)
    open_transaction_with_offset(producer, topic, group, 42)
    assert committed_offset(plain, group, topic, 5) == 7  # Kafka: UNSTABLE_OFFSET_COMMIT
    producer.abort_transaction(10)


def commits_behind_an_open_transaction(broker: EmbeddedBroker) -> tuple[int, int]:
    """A opens a transaction on the output partition; then C commits offset 10 and B
    offset 20 of the input partition, each with a record on that output partition; then
    A commits. Returns the group's offset read after B's commit and after A's."""
    source, sink, group = unique_name("in"), unique_name("out"), unique_name("g")
    broker.create_topic(source, 1)
    broker.create_topic(sink, 1)
    ids = unique_name("txn")
    a = transactional(broker)
    b = transactional(broker, **{"transactional.id": f"{ids}-1"})
    c = transactional(broker, **{"transactional.id": f"{ids}-2"})
    a.begin_transaction()
    send(a, sink, b"a")
    for producer, offset in ((c, 10), (b, 20)):
        producer.begin_transaction()
        send(producer, sink, b"out")
        producer.send_offsets_to_transaction(
            [KafkaTopicPartition(source, 0, offset)], cgmd(group, -1, ""), 10
        )
        producer.commit_transaction(10)
    after_commits = committed_offset(broker, group, source, 10)
    a.commit_transaction(10)
    return after_commits, committed_offset(broker, group, source, 10)


def test_offsets_of_a_committed_transaction_show_at_once(proxied: TransactionalBroker) -> None:
    assert commits_behind_an_open_transaction(proxied) == (20, 20)


def test_plain_tansu_holds_offsets_behind_an_earlier_open_transaction(
    plain: EmbeddedBroker,
) -> None:
    # Kafka: 20 as soon as B committed. Tansu applies B's and C's offsets only when A
    # (which began earlier on a partition they wrote) ends, in the order of their
    # transactional ids: C's older 10 lands last.
    assert commits_behind_an_open_transaction(plain) == (-1001, 10)


# --------------------------------------------------------------------------- faults


def test_injected_transaction_errors_reach_librdkafka_as_kafka_would_send_them(
    proxied: TransactionalBroker,
) -> None:
    topic, group = unique_name("in"), unique_name("g")
    proxied.create_topic(topic, 1)
    producer = transactional(proxied)
    simple = cgmd(group, -1, "")
    proxy = proxied.proxy
    # Retried inside librdkafka: the transaction commits.
    proxy.push_request_errors(
        TXN_OFFSET_COMMIT, [kerr.COORDINATOR_NOT_AVAILABLE, proxy.DROP_CONNECTION]
    )
    proxy.push_request_errors(ADD_OFFSETS, [kerr.CONCURRENT_TRANSACTIONS])
    proxy.push_response_errors(END_TXN, [proxy.DROP_CONNECTION])  # Tansu commits, answer lost
    commit_offsets(producer, topic, simple, 1)
    assert proxy.stats.faults_applied == {TXN_OFFSET_COMMIT: 2, ADD_OFFSETS: 1, END_TXN: 1}
    # Abortable: the transaction is aborted and the next one commits.
    proxy.push_request_errors(TXN_OFFSET_COMMIT, [kerr.ILLEGAL_GENERATION])
    with pytest.raises(KafkaException) as abortable:
        commit_offsets(producer, topic, simple, 2)
    assert abortable.value.args[0].txn_requires_abort()
    commit_offsets(producer, topic, simple, 3)
    assert committed_offset(proxied, group, topic, 10) == 3
    # Fatal: the producer is fenced for good.
    proxy.push_request_errors(END_TXN, [kerr.INVALID_PRODUCER_EPOCH])
    with pytest.raises(KafkaException) as fatal:
        commit_offsets(producer, topic, simple, 4)
    assert fatal.value.args[0].fatal()
    assert [r.error_code for r in proxy.txn_offset_commits] == [
        kerr.COORDINATOR_NOT_AVAILABLE,
        0,
        kerr.ILLEGAL_GENERATION,
        0,
        0,
    ]


def test_coordinator_moves_are_survived(proxied: TransactionalBroker) -> None:
    topic, group = unique_name("in"), unique_name("g")
    proxied.create_topic(topic, 2)
    config = {
        "bootstrap.servers": proxied.bootstrap,
        "group.id": group,
        "session.timeout.ms": 3000,
        "heartbeat.interval.ms": 200,
        "enable.auto.commit": False,
    }
    everything = frozenset(TopicPartition(topic, p) for p in range(2))
    producer = transactional(proxied)
    with Consumer(config) as consumer:
        consumer.subscribe([topic])
        wait_assigned(consumer, everything)
        proxied.proxy.move_coordinators(1.0)
        commit_offsets(producer, topic, cgmd(group, -1, ""), 1)  # retried until it moved
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            consumer.poll(0.1)
        refused = proxied.proxy.stats.faults_applied
        assert refused.get(12, 0) >= 1  # heartbeats got NOT_COORDINATOR
        assert sum(refused.get(api, 0) for api in (24, 25, 26, 28)) >= 1  # and the producer
        wait_assigned(consumer, everything)
    assert committed_offset(proxied, group, topic, 10) == 1


# --------------------------------------------------------------------------- timeouts


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(
    proxied: TransactionalBroker,
) -> None:
    topic = unique_name("out")
    proxied.create_topic(topic, 1)
    producer = transactional(proxied, **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    send(producer, topic, b"stuck")
    send(plain_producer(proxied), topic, b"after")
    wait_until(lambda: bool(proxied.proxy.timed_out_transactions), "the timeout abort", 10)
    (timed_out,) = proxied.proxy.timed_out_transactions
    assert timed_out.timeout_ms == 1000
    assert timed_out.open_for_s >= 1.0
    # The marker moved the last stable offset past the abandoned transaction.
    assert values(read_all(proxied, topic, "read_committed", 1)) == [b"after"]
    with pytest.raises(KafkaException) as fenced:
        producer.commit_transaction(5)
    assert fenced.value.args[0].fatal()


def test_plain_tansu_never_times_out_a_transaction(plain: EmbeddedBroker) -> None:
    topic = unique_name("out")
    plain.create_topic(topic, 1)
    producer = transactional(plain, **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    send(producer, topic, b"stuck")
    send(plain_producer(plain), topic, b"after")
    time.sleep(2.0)  # twice the timeout: Kafka would have aborted it
    # The last stable offset is stuck below "stuck": nothing after it is readable.
    assert read_all(plain, topic, "read_committed", 1, patience_s=1.0) == []
    producer.commit_transaction(5)  # and the producer commits long after its timeout


# --------------------------------------------------------------------------- the relay


def roundtrip(sock: socket.socket, frame: bytes) -> bytes:
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    return read_frame(sock)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    return sock.recv(size, socket.MSG_WAITALL)


def test_answers_stay_in_request_order_when_the_proxy_answers_some_itself(
    proxied: TransactionalBroker,
) -> None:
    proxied.proxy.set_response_delay(0.3, api_keys=[METADATA])
    proxied.proxy.push_request_errors(ADD_OFFSETS, [kerr.NOT_COORDINATOR])
    frames = [
        encode_request(MetadataRequest(topics=()), api_version=4, correlation_id=1, client_id="t"),
        encode_request(
            AddOffsetsToTxnRequest(transactional_id="x", group_id="g"),
            api_version=0,
            correlation_id=2,
            client_id="t",
        ),
        encode_request(ApiVersionsRequest(), api_version=0, correlation_id=3, client_id="t"),
    ]
    with socket.create_connection(split(proxied.bootstrap)) as sock:
        started = time.monotonic()
        sock.sendall(b"".join(struct.pack(">i", len(f)) + f for f in frames))
        answers = [read_frame(sock) for _ in frames]
        elapsed = time.monotonic() - started
    assert [struct.unpack_from(">i", a)[0] for a in answers] == [1, 2, 3]
    _cid, refused = decode_response(AddOffsetsToTxnResponse, answers[1], api_version=0)
    assert isinstance(refused, AddOffsetsToTxnResponse)
    assert refused.error_code == kerr.NOT_COORDINATOR
    assert elapsed >= 0.3  # the delayed first answer held back the other two


def split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def test_many_concurrent_connections_and_a_clean_stop() -> None:
    with embedded_broker("tansu", transactions=True) as broker:
        assert isinstance(broker, TransactionalBroker)
        errors: list[BaseException] = []

        def client() -> None:
            try:
                with socket.create_connection(split(broker.bootstrap)) as sock:
                    for cid in range(20):
                        request = ApiVersionsRequest() if cid % 2 else MetadataRequest(topics=())
                        version = 0 if cid % 2 else 4
                        frame = encode_request(
                            request, api_version=version, correlation_id=cid, client_id="c"
                        )
                        answer = roundtrip(sock, frame)
                        assert struct.unpack_from(">i", answer)[0] == cid
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=client) for _ in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert broker.proxy.stats.connections >= 40
        idle = [socket.create_connection(split(broker.bootstrap)) for _ in range(10)]
        wait_until(lambda: broker.proxy.stats.open_connections >= 10, "idle connections")
        started = time.monotonic()
        broker.proxy.stop()
        assert time.monotonic() - started < 5
        for sock in idle:
            sock.settimeout(5)
            assert sock.recv(1) == b""  # hung up
            sock.close()
        # Only this proxy's threads: a session-scoped proxy of other tests (the Spark
        # ones) may share this process.
        prefix = broker.proxy.thread_prefix
        assert not [t for t in threading.enumerate() if t.name.startswith(prefix)]


# --------------------------------------------------------------------------- the docs


def test_the_testing_page_example_passes(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    (block,) = [
        b
        for b in re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
        if "transactions=True" in b
    ]
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_example.py").write_text(block)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout


def test_stats_show_how_long_tansu_has_held_a_request(proxied: TransactionalBroker) -> None:
    join = JoinGroupRequest(
        group_id=unique_name("g"),
        session_timeout_ms=6000,
        rebalance_timeout_ms=6000,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
    )
    with socket.create_connection(split(proxied.bootstrap)) as sock:
        # Tansu answers the first join MEMBER_ID_REQUIRED (KIP-394) and holds the
        # second for about half the session timeout.
        first = encode_request(join, api_version=5, correlation_id=1, client_id="t")
        _cid, answer = decode_response(JoinGroupRequest, roundtrip(sock, first), api_version=5)
        assert isinstance(answer, JoinGroupResponse)
        assert answer.error_code == kerr.MEMBER_ID_REQUIRED
        again = attrs.evolve(join, member_id=answer.member_id)
        second = encode_request(again, api_version=5, correlation_id=2, client_id="t")
        sock.sendall(struct.pack(">i", len(second)) + second)
        wait_until(lambda: proxied.proxy.stats.oldest_unanswered_s >= 0.5, "a held JoinGroup", 5)
        assert proxied.proxy.stats.oldest_unanswered_api == 11
        read_frame(sock)
    assert proxied.proxy.stats.oldest_unanswered_s < 0.5


def test_answers_tansu_gives_after_the_client_hung_up_still_count(
    proxied: TransactionalBroker,
) -> None:
    """Tansu acts on a request whatever becomes of its client: the proxy reads the
    answer it still owes a closed connection and learns from it (here the generation
    a held JoinGroup formed; a committed EndTxn is the case that matters)."""
    group = unique_name("g")
    join = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=6000,
        rebalance_timeout_ms=6000,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
    )
    with socket.create_connection(split(proxied.bootstrap)) as sock:
        first = encode_request(join, api_version=5, correlation_id=1, client_id="t")
        _cid, answer = decode_response(JoinGroupRequest, roundtrip(sock, first), api_version=5)
        assert isinstance(answer, JoinGroupResponse)
        second = attrs.evolve(join, member_id=answer.member_id)
        frame = encode_request(second, api_version=5, correlation_id=2, client_id="t")
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        wait_until(lambda: proxied.proxy.stats.oldest_unanswered_s > 0.2, "a held JoinGroup", 5)
    # Hung up while Tansu holds the JoinGroup; it answers seconds later.
    assert proxied.proxy.group_view(group) is None
    wait_until(lambda: proxied.proxy.group_view(group) is not None, "the generation", 10)
    generation, members = proxied.proxy.group_view(group) or (None, {})
    assert answer.member_id in members
    assert generation is not None
    wait_until(lambda: proxied.proxy.stats.open_connections == 0, "the drained connection", 5)


def test_a_joining_member_asks_a_moving_coordinator_at_the_retry_backoff(
    proxied: TransactionalBroker,
) -> None:
    # The heartbeat twin is tests/integration/test_coordinator_move.py. Java's
    # AbstractCoordinator.joinGroupIfNeeded sleeps retry.backoff.ms after a retriable
    # JoinGroup failure; librdkafka sent 2 JoinGroups in such a window here.
    join_group, move_s, backoff_ms = 11, 2.0, 100
    topic = unique_name("move-join")
    proxied.create_topic(topic, 2)
    consumer = Consumer(
        {
            "bootstrap.servers": proxied.bootstrap,
            "group.id": unique_name("g-move-join"),
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 6000,
            "retry.backoff.ms": backoff_ms,
        }
    )
    with consumer:
        before = proxied.proxy.stats.requests
        proxied.proxy.move_coordinators(move_s, transaction=False)
        consumer.subscribe([topic])
        until = time.monotonic() + move_s
        while time.monotonic() < until:
            consumer.poll(0.1)
        joins = proxied.proxy.stats.requests.get(join_group, 0) - before.get(join_group, 0)
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2:  # it joins once the move is over
            assert time.monotonic() < deadline, "the member never got its partitions"
            consumer.poll(0.1)
    # At most one JoinGroup per retry.backoff.ms while the coordinator moves; generous
    # for a loaded machine. The chaos run saw about 470 a second per member.
    bound = move_s / (backoff_ms / 1000) + 10
    assert joins <= bound, f"{joins} JoinGroups in {move_s:.0f} s"
