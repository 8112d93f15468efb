"""Exactly-once consume -> process -> produce on real brokers (``TransactionalProcessor``).

What each broker can verify (docs/testing.md, "Transactions"): Apache Kafka has it all
(transactional offsets stored, open and aborted transactions hidden from
``read_committed``, KIP-447 fencing by generation or member epoch), so the
resume-after-rebalance and fencing runs are on Kafka, with classic and KIP-848 groups,
counted by an independent ``read_committed`` confluent-kafka consumer. librdkafka's mock
stores no transactional offsets and hides nothing, but injects transaction-coordinator
errors: the abort, retry and fencing paths run there. A static member's
``FENCED_INSTANCE_ID`` runs on Kafka for real (a replacement takes the instance id)
and, injected, on Tansu behind coopconsumer's transactions proxy, whose records show
the KIP-447 fields on the wire.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import confluent_kafka
import pytest

from coopconsumer import (
    CoopConsumerError,
    IncompatibleVersionError,
    ProducerFencedError,
    TransactionalOutput,
    TransactionalProcessor,
    TransactionStats,
)
from coopconsumer.testing import (
    EmbeddedBroker,
    TransactionalBroker,
    unique_name,
)

pytestmark = pytest.mark.slow

# Error codes and API keys (Kafka's protocol).
TXN_OFFSET_COMMIT = 28
END_TXN = 26
ADD_OFFSETS_TO_TXN = 25
ILLEGAL_GENERATION = 22
COORDINATOR_NOT_AVAILABLE = 15
INVALID_PRODUCER_EPOCH = 47
PARTITIONS = 4


def produce_inputs(broker: EmbeddedBroker, topic: str, first: int, count: int) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **broker.client_config}
    )
    for i in range(first, first + count):
        producer.produce(topic, f"v{i}".encode(), key=f"k{i}".encode())
    assert producer.flush(30) == 0


def read_committed(broker: EmbeddedBroker, topic: str, expected: int) -> Counter[bytes]:
    """Every record of ``topic`` a ``read_committed`` confluent-kafka consumer sees,
    counted, reading until ``expected`` arrived and then 1 s more."""
    reader = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_name("verify"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            **broker.client_config,
        }
    )
    reader.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: Counter[bytes] = Counter()
    deadline = time.monotonic() + 60
    quiet_until: float | None = None
    try:
        while time.monotonic() < deadline:
            message = reader.poll(0.2)
            value = None if message is None or message.error() else message.value()
            if value is not None:
                seen[value] += 1
                continue
            if seen.total() >= expected:
                quiet_until = quiet_until or time.monotonic() + 1.0
                if time.monotonic() >= quiet_until:
                    break
    finally:
        reader.close()
    return seen


def written(broker: EmbeddedBroker, topic: str) -> int:
    """Records and transaction markers in ``topic``'s log, open transactions included
    (the sum of its partitions' high watermarks)."""
    reader = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_name("hw"),
            **broker.client_config,
        }
    )
    try:
        return sum(
            reader.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        )
    finally:
        reader.close()


def exactly_once(seen: Counter[bytes], count: int) -> tuple[list[bytes], list[bytes]]:
    """(missing, duplicated) output values for inputs v0..v{count-1}."""
    want = {f"out-v{i}".encode() for i in range(count)}
    missing = sorted(want - seen.keys())
    duplicated = sorted(v for v, n in seen.items() if n > 1)
    extra = sorted(seen.keys() - want)
    assert not extra, extra[:5]
    return missing, duplicated


def copy_to(topic: str) -> Any:
    def process(records: list[Any], out: TransactionalOutput) -> None:
        for record in records:
            out.produce(topic, b"out-" + record.value(), record.key())

    return process


class Runner:
    """A processor running on its own thread until stopped."""

    def __init__(self, processor: TransactionalProcessor, poll_timeout: float = 0.2) -> None:
        self.processor = processor
        self.poll_timeout = poll_timeout
        self.error: BaseException | None = None
        self.stats: TransactionStats | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.stats = self.processor.run(poll_timeout=self.poll_timeout)
        except BaseException as exc:
            self.error = exc
        finally:
            try:
                self.processor.close(10)
            except BaseException as exc:
                self.error = self.error or exc

    def stop(self) -> TransactionStats:
        self.processor.stop()
        self._thread.join(60)
        assert not self._thread.is_alive()
        if self.error is not None:
            raise self.error
        assert self.stats is not None
        return self.stats


@pytest.fixture
def topics(broker: EmbeddedBroker) -> tuple[str, str]:
    source, sink = unique_name("eos-in"), unique_name("eos-out")
    broker.create_topic(source, PARTITIONS)
    broker.create_topic(sink, PARTITIONS)
    return source, sink


def consumer_config(broker: EmbeddedBroker, group: str, **extra: object) -> dict[str, object]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "cooperative-sticky",
        **broker.client_config,
        **extra,
    }


def _step_until_error(processor: TransactionalProcessor, steps: int = 100) -> None:
    """Run the loop until it raises (or ``steps`` turns pass without error)."""
    for _ in range(steps):
        processor.step(0.2)


def wait_for(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_one_member_copies_every_record_exactly_once(
    broker: EmbeddedBroker, topics: tuple[str, str], unique_group: str
) -> None:
    source, sink = topics
    produce_inputs(broker, source, 0, 3000)
    processor = TransactionalProcessor(
        consumer_config(broker, unique_group),
        {"transactional.id": unique_name("txn")},
        copy_to(sink),
        topics=[source],
    )
    with processor:
        deadline = time.monotonic() + 60
        processed = 0
        while processed < 3000 and time.monotonic() < deadline:
            processed += processor.step(0.2)
        processor.step(0.2)  # idle: commit what is open
        stats = processor.stats()
        metadata = processor.group_metadata()
    assert processed == 3000
    assert stats.transactions_aborted == 0
    assert stats.records_processed == 3000
    missing, duplicated = exactly_once(read_committed(broker, sink, 3000), 3000)
    assert missing == []
    assert duplicated == []
    assert metadata.generation_id >= 0
    if broker.kind != "mock":  # the mock keeps no transactional offsets
        checker = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": unique_group}
        )
        committed = checker.committed(
            [confluent_kafka.TopicPartition(source, p) for p in range(PARTITIONS)], timeout=10
        )
        checker.close()
        assert sum(tp.offset for tp in committed) == 3000


#: Records fed after B owns partitions: B must have input to process whatever the
#: rebalance took (milliseconds on Kafka, seconds on Tansu).
FED_AFTER_B_OWNS = 2000


def _scale_out_and_in(
    broker: EmbeddedBroker, source: str, sink: str, group: str, strategy: str
) -> tuple[TransactionStats, TransactionStats, int]:
    """A processes alone, B joins while input keeps arriving, then B leaves; returns
    (A's, B's) figures and the number of input records after the output was checked
    exactly once."""
    first = 2000
    produce_inputs(broker, source, 0, first)
    if strategy == "consumer":  # KIP-848: the broker assigns
        config = consumer_config(broker, group, **{"group.protocol": "consumer"})
        for key in ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"):
            del config[key]
    else:
        config = consumer_config(broker, group, **{"partition.assignment.strategy": strategy})

    def make() -> TransactionalProcessor:
        # A long interval keeps a transaction open while records flow, so rebalances
        # meet open transactions (the case this test is about); so does a long poll
        # timeout, since a poll that returns nothing commits (see Runner below).
        return TransactionalProcessor(
            config,
            {"transactional.id": unique_name("txn")},
            copy_to(sink),
            topics=[source],
            commit_interval_ms=20_000,
            batch_size=50,
        )

    # Polls wait up to 5 s: only a pause that long in the input commits for idleness.
    a = Runner(make(), poll_timeout=5.0)
    b_owns = threading.Event()
    give_up = threading.Event()
    fed: list[int] = []  # the number of input records, once all are flushed

    def feed() -> None:
        # A steady stream (about 1,000 records/s) so that polls keep returning records
        # and transactions stay open across the rebalances; it goes on until B owns
        # partitions and FED_AFTER_B_OWNS records more.
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 2, **broker.client_config}
        )
        i, end = first, None
        while not give_up.is_set() and (end is None or i < end):
            if end is None and b_owns.is_set():
                end = i + FED_AFTER_B_OWNS
            producer.produce(source, f"v{i}".encode(), key=f"k{i}".encode())
            producer.poll(0)
            time.sleep(0.001)
            i += 1
        if producer.flush(30) == 0:
            fed.append(i)

    feeder = threading.Thread(target=feed, daemon=True)
    try:
        wait_for(lambda: len(a.processor.assignment()) == PARTITIONS, 30, "A to own everything")
        feeder.start()
        # B joins once A's open transaction holds records (its output is in the log, not
        # committed): A's first transaction waits for its producer id, and Kafka makes
        # __transaction_state on the first request for one, so a B that joined at once
        # could take partitions before A read any, and no revocation would meet an open
        # transaction (the case this test is about).
        wait_for(lambda: written(broker, sink) >= 500, 60, "A's open transaction to hold records")
        b = Runner(make(), poll_timeout=5.0)
        wait_for(
            lambda: (
                len(b.processor.assignment()) > 0
                and len(a.processor.assignment()) + len(b.processor.assignment()) == PARTITIONS
            ),
            60,
            "B to take partitions",
        )
        b_owns.set()
        wait_for(lambda: b.processor.stats().records_processed >= 200, 60, "B to process records")
        b_stats = b.stop()  # leaves the group: A takes its partitions back
    except BaseException:
        give_up.set()  # the test failed: no more input
        raise
    feeder.join(120)
    wait_for(lambda: len(a.processor.assignment()) == PARTITIONS, 60, "A to own everything again")
    time.sleep(1.0)
    a_stats = a.stop()
    assert len(fed) == 1, "the feeder did not flush every input record"
    total = fed[0]
    missing, duplicated = exactly_once(read_committed(broker, sink, total), total)
    assert missing == [], f"{len(missing)} missing, e.g. {missing[:5]}"
    assert duplicated == [], f"{len(duplicated)} duplicated, e.g. {duplicated[:5]}"
    return a_stats, b_stats, total


# "consumer": the KIP-848 protocol, its member epoch fencing TxnOffsetCommit on Kafka.
@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range", "consumer"])
def test_scale_out_and_in_commits_every_record_once(
    kafka_broker: EmbeddedBroker, strategy: str
) -> None:
    source, sink = unique_name("eos-in"), unique_name("eos-out")
    kafka_broker.create_topic(source, PARTITIONS)
    kafka_broker.create_topic(sink, PARTITIONS)
    a, b, total = _scale_out_and_in(kafka_broker, source, sink, unique_name("g-eos"), strategy)
    # Revocations met open transactions and committed them: nothing had to be aborted.
    assert a.transactions_aborted == 0, a.aborts
    assert b.transactions_aborted == 0, b.aborts
    assert a.commits_on_revoke + b.commits_on_revoke >= 1
    assert a.records_processed + b.records_processed == total


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
    kafka_broker: EmbeddedBroker, unique_group: str
) -> None:
    source, sink = unique_name("eos-in"), unique_name("eos-out")
    kafka_broker.create_topic(source, PARTITIONS)
    kafka_broker.create_topic(sink, PARTITIONS)
    produce_inputs(kafka_broker, source, 0, 200)
    txn_id = unique_name("txn")
    config = consumer_config(kafka_broker, unique_group)
    first = TransactionalProcessor(
        config,
        {"transactional.id": txn_id},
        copy_to(sink),
        topics=[source],
        commit_interval_ms=30_000,
    )
    try:
        wait_for(lambda: first.step(0.2) > 0, 30, "the first processor to read")
        # The first processor's transaction is open; a second one takes the id over.
        second = TransactionalProcessor(
            config, {"transactional.id": txn_id}, copy_to(sink), topics=[source]
        )
        try:
            second.step(0.2)  # init_transactions fences the first
            produce_inputs(kafka_broker, source, 200, 1)
            with pytest.raises(ProducerFencedError, match=txn_id):
                _step_until_error(first)
            with pytest.raises(ProducerFencedError):
                first.step(0.1)  # stays fatal
        finally:
            second.close(10)
    finally:
        first.close(10)


def test_a_refused_generation_aborts_and_the_batch_is_replayed(
    mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    sink = unique_topic + "-out"
    mock_broker.create_topic(unique_topic, PARTITIONS)
    mock_broker.create_topic(sink, PARTITIONS)
    produce_inputs(mock_broker, unique_topic, 0, 400)
    processor = TransactionalProcessor(
        consumer_config(mock_broker, unique_group),
        {"transactional.id": unique_name("txn")},
        copy_to(sink),
        topics=[unique_topic],
    )
    # The first transaction's offsets: AddOffsetsToTxn is retried three times (not
    # an abort), then the group refuses the generation (an abort and a replay).
    mock_broker.push_request_errors(TXN_OFFSET_COMMIT, [ILLEGAL_GENERATION])
    mock_broker.push_request_errors(ADD_OFFSETS_TO_TXN, [COORDINATOR_NOT_AVAILABLE] * 3)
    with processor:
        deadline = time.monotonic() + 60
        while processor.stats().records_processed < 400 and time.monotonic() < deadline:
            processor.step(0.2)
        stats = processor.stats()
    assert stats.aborts == {"group generation fenced": 1}  # the retried ones did not abort
    assert stats.records_replayed > 0
    assert stats.records_processed == 400  # every record committed once, after the replay


def test_an_invalid_producer_epoch_is_fatal(
    mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    sink = unique_topic + "-out"
    mock_broker.create_topic(unique_topic, PARTITIONS)
    mock_broker.create_topic(sink, PARTITIONS)
    produce_inputs(mock_broker, unique_topic, 0, 50)
    processor = TransactionalProcessor(
        consumer_config(mock_broker, unique_group),
        {"transactional.id": unique_name("txn")},
        copy_to(sink),
        topics=[unique_topic],
    )
    with processor:
        mock_broker.push_request_errors(END_TXN, [INVALID_PRODUCER_EPOCH])
        with pytest.raises(ProducerFencedError, match="fenced"):
            _step_until_error(processor)
        assert processor.stats().transactions_committed == 0


def test_a_broker_without_kip447_is_refused(
    mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    mock_broker.create_topic(unique_topic, 1)
    mock_broker.set_api_version(TXN_OFFSET_COMMIT, 0, 2)
    processor = TransactionalProcessor(
        consumer_config(mock_broker, unique_group),
        {"transactional.id": unique_name("txn")},
        copy_to(unique_topic),
        topics=[unique_topic],
    )
    with processor, pytest.raises(IncompatibleVersionError, match="TxnOffsetCommit up to v2"):
        processor.step(0.1)


def test_kip848_member_epoch_fences_transactions(
    mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    sink = unique_topic + "-out"
    mock_broker.create_topic(unique_topic, PARTITIONS)
    mock_broker.create_topic(sink, PARTITIONS)
    produce_inputs(mock_broker, unique_topic, 0, 500)
    config = consumer_config(mock_broker, unique_group, **{"group.protocol": "consumer"})
    del config["partition.assignment.strategy"]
    del config["session.timeout.ms"]
    del config["heartbeat.interval.ms"]
    mock_broker.start_request_tracking()
    processor = TransactionalProcessor(
        config, {"transactional.id": unique_name("txn")}, copy_to(sink), topics=[unique_topic]
    )
    with processor:
        deadline = time.monotonic() + 60
        while processor.stats().records_processed < 500 and time.monotonic() < deadline:
            processor.step(0.2)
        metadata = processor.group_metadata()
        stats = processor.stats()
    assert stats.records_processed == 500
    assert stats.transactions_aborted == 0
    assert metadata.generation_id > 0  # the member epoch
    commits = [r for r in mock_broker.requests() if r.api_key == TXN_OFFSET_COMMIT]
    assert commits, "no TxnOffsetCommit reached the broker"
    missing, duplicated = exactly_once(read_committed(mock_broker, sink, 500), 500)
    assert (missing, duplicated) == ([], [])


# ---------------------------------------------------------------- static membership (KIP-345)

FENCED_INSTANCE_ID = 82


def test_a_static_member_commits_with_its_instance_id_and_a_fenced_instance_aborts(
    proxied: TransactionalBroker, unique_group: str
) -> None:
    """KIP-447 on a static member (KIP-345): its TxnOffsetCommits carry its member id,
    generation and group.instance.id, and FENCED_INSTANCE_ID (the answer a zombie gets
    once a replacement took its instance id) aborts the transaction, whose records are
    processed again and appear once. The fence itself is injected: Tansu hands a static
    member that joins again the same member id (Kafka makes a new one), so it cannot fence
    the zombie of a restarted static member (docs/testing.md, Transactions)."""
    source, sink = unique_name("eos-in"), unique_name("eos-out")
    proxied.create_topic(source, PARTITIONS)
    proxied.create_topic(sink, PARTITIONS)
    produce_inputs(proxied, source, 0, 300)
    processor = TransactionalProcessor(
        consumer_config(proxied, unique_group, **{"group.instance.id": "static-1"}),
        {"transactional.id": unique_name("txn")},
        copy_to(sink),
        topics=[source],
    )
    with processor:
        wait_for(
            lambda: processor.step(0.2) == 0 and processor.stats().records_processed >= 300,
            60,
            "the static member to commit its first records",
        )
        identity = processor.group_metadata()
        proxied.proxy.push_request_errors(TXN_OFFSET_COMMIT, [FENCED_INSTANCE_ID])
        produce_inputs(proxied, source, 300, 100)
        wait_for(
            lambda: processor.step(0.2) >= 0 and processor.stats().records_processed >= 400,
            60,
            "the member to process the fenced batch again",
        )
        processor.step(0.2)
        stats = processor.stats()
    commits = [r for r in proxied.proxy.txn_offset_commits if r.group_id == unique_group]
    assert {(r.member_id, r.group_instance_id) for r in commits} == {
        (identity.member_id, "static-1")
    }
    assert {r.generation_id for r in commits} == {identity.generation_id}
    assert min(r.api_version for r in commits) >= 3  # KIP-447's fields are on the wire
    assert [r.error_code for r in commits].count(FENCED_INSTANCE_ID) == 1
    assert stats.aborts == {"group generation fenced": 1}
    assert stats.records_replayed > 0
    missing, duplicated = exactly_once(read_committed(proxied, sink, 400), 400)
    assert (missing, duplicated) == ([], [])


def test_a_replaced_static_member_is_fenced_by_kafka(
    kafka_broker: EmbeddedBroker, unique_group: str
) -> None:
    """KIP-447 with KIP-345 on Kafka itself, where the test above injects the fence: a
    replacement that joins with the static member's ``group.instance.id`` takes its
    place under a new member id, Kafka fences the old instance (FENCED_INSTANCE_ID),
    and the zombie's open transaction, whose records the replacement reads again,
    never commits."""
    source, sink = unique_name("eos-in"), unique_name("eos-out")
    kafka_broker.create_topic(source, PARTITIONS)
    kafka_broker.create_topic(sink, PARTITIONS)
    produce_inputs(kafka_broker, source, 0, 300)
    config = consumer_config(kafka_broker, unique_group, **{"group.instance.id": "static-1"})

    def make() -> TransactionalProcessor:
        return TransactionalProcessor(
            config,
            # An abandoned transaction ends within half a minute (the broker checks
            # every second, tests/conftest.py), not librdkafka's default minute; the
            # zombie is not stepped while the replacement works, so it commits only
            # when closed.
            {"transactional.id": unique_name("txn"), "transaction.timeout.ms": 30_000},
            copy_to(sink),
            topics=[source],
            commit_interval_ms=20_000,
        )

    zombie = make()
    replacement: TransactionalProcessor | None = None
    try:
        wait_for(
            lambda: zombie.step(0.2) == 0 and zombie.stats().records_processed >= 300,
            60,
            "the static member to commit its first records",
        )
        produce_inputs(kafka_broker, source, 300, 100)
        # The zombie reads the new records into a transaction and stops before an idle
        # step would commit it (the step that read the last record returned it).
        seen = 300  # processed, committed or not
        deadline = time.monotonic() + 60
        while seen < 400:
            assert time.monotonic() < deadline, "the static member did not read the batch"
            seen += zombie.step(0.2)
        held = seen - zombie.stats().records_processed  # in its open transaction
        assert held > 0
        replacement = make()
        wait_for(
            lambda: (
                replacement is not None
                and replacement.step(0.2) == 0
                and replacement.stats().records_processed >= held
            ),
            60,
            "the replacement to commit what the zombie holds",
        )
    finally:
        try:
            zombie.close(10)  # commits its transaction if it can: Kafka must refuse
        except CoopConsumerError as exc:
            print(f"zombie close: {exc!r}")
        if replacement is not None:
            replacement.close(10)
    # Kafka refused the zombie's TxnOffsetCommit (its member id was replaced): the
    # close aborted the transaction instead of committing it.
    assert zombie.stats().aborts == {"group generation fenced": 1}, zombie.stats()
    assert zombie.stats().records_processed == 400 - held, zombie.stats()
    missing, duplicated = exactly_once(read_committed(kafka_broker, sink, 400), 400)
    assert (missing, duplicated) == ([], [])
    # The zombie's records did reach the log (uncommitted, then aborted): the fence
    # met work in flight.
    assert written(kafka_broker, sink) >= 400 + held
