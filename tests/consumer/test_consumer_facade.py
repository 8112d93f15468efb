"""The Consumer facade and its driver thread on in-process fakes (no sockets).

A ``FakeGroupCoordinator`` (tests/member) sits behind a fake ``KafkaClient``, and
an in-memory fetcher serves records, so these tests exercise the real driver loop, the
real group member and the real facade: listener callbacks on the polling thread,
committed offsets as start positions, commit errors, heartbeats between polls, the
poll timeout, a broken client, and close().
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator

import confluent_kafka
import pytest
from _consumer_fakes import OFFSET_BEGINNING, FakeClient, FakeCluster, FakeFetcher

from coopconsumer import (
    CommitFailedError,
    ConfigurationError,
    Consumer,
    CoopConsumerError,
    IllegalStateError,
    KafkaError,
    OffsetAndMetadata,
    RebalanceInProgressError,
    RebalanceListener,
    RequestTimeoutError,
    TopicPartition,
)
from coopconsumer._io._member_driver import DriverFailedError
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import ListOffsetsRequest, OffsetFetchRequest
from coopconsumer.assignors import RebalanceProtocol

GROUP = "g"
TOPIC = "t"
PATIENCE_S = 10.0
TPS = frozenset(TopicPartition(TOPIC, p) for p in range(4))


def settings(**extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "group.id": GROUP,
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 1000,
        "heartbeat.interval.ms": 100,
        "max.poll.interval.ms": 5000,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "default.api.timeout.ms": 5000,
    }
    base.update(extra)
    return base


class Recorder(RebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []
        self.threads: set[int] = set()
        self.on_assigned: Callable[[frozenset[TopicPartition]], None] | None = None
        self.raise_in: set[str] = set()

    def _record(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append((kind, partitions))
        self.threads.add(threading.get_ident())
        if kind in self.raise_in:
            raise ValueError(kind)

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self._record("assigned", partitions)
        if self.on_assigned is not None:
            self.on_assigned(partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self._record("revoked", partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self._record("lost", partitions)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    c = FakeCluster(GROUP, {TOPIC: 4, "other": 2, "__consumer_offsets": 1})
    for tp in sorted(TPS):
        c.produce(tp, [f"{tp.partition}-{i}".encode() for i in range(5)])
    yield c
    c.close_all()
    # Every consumer closed: no driver thread may survive.
    alive = [t.name for t in threading.enumerate() if t.name == "coopconsumer-driver"]
    assert alive == []


def poll_until(
    consumer: Consumer, condition: Callable[[], bool], got: list[bytes] | None = None
) -> list[bytes]:
    """Consume (into ``got``) until ``condition()``; fails after PATIENCE_S."""
    got = [] if got is None else got
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        for m in consumer.consume(100, 0.05):
            value = m.value()
            assert isinstance(value, bytes)
            got.append(value)
    return got


def test_subscribe_poll_commit_close(cluster: FakeCluster) -> None:
    consumer, client = cluster.consumer(settings())
    listener = Recorder()
    consumer.subscribe([TOPIC], listener)
    got: list[bytes] = []
    poll_until(consumer, lambda: len(got) >= 20, got)
    assert sorted(got) == sorted(f"{p}-{i}".encode() for p in range(4) for i in range(5))
    assert listener.calls == [("assigned", TPS)]
    assert listener.threads == {threading.get_ident()}  # callbacks on the polling thread
    assert consumer.assignment() == TPS
    assert consumer.position(TPS) == dict.fromkeys(TPS, 5)
    consumer.commit()
    assert cluster.coordinator.committed_offsets() == dict.fromkeys(TPS, 5)
    assert consumer.committed(TPS) == dict.fromkeys(TPS, 5)
    assert consumer.group_metadata().generation_id >= 1
    assert consumer.metrics()["assigned-partitions"] == 4
    consumer.close()
    assert listener.calls[-1] == ("revoked", TPS)  # close revokes on this thread
    assert client.closed
    assert cluster.coordinator.members == {}  # LeaveGroup reached the coordinator
    consumer.close()  # idempotent
    with pytest.raises(Exception, match="closed"):
        consumer.poll(0)


def test_committed_at_its_deadline_is_a_timeout_caused_by_the_last_answer(
    cluster: FakeCluster,
) -> None:
    # The lookup's own RequestTimeoutError (a TimeoutError) is raised as it is, at once: the
    # facade must not take it for "no answer yet" and replace it with a bare one.
    cluster.coordinator.fail_next(9, error_codes.UNSTABLE_OFFSET_COMMIT, count=1_000)
    consumer, _ = cluster.consumer(settings())
    with pytest.raises(RequestTimeoutError) as info:
        consumer.committed(TPS, timeout=0.5)
    cause = info.value.__cause__
    assert isinstance(cause, KafkaError)
    assert cause.code == error_codes.UNSTABLE_OFFSET_COMMIT
    consumer.close()


def test_the_driver_wakes_the_fetcher_for_queued_work_and_completed_commits(
    cluster: FakeCluster,
) -> None:
    """The poll() thread waits inside the fetcher's consume(); the driver cuts that wait
    short whenever it hands that thread work (here: the assignment) or completes a
    commit, instead of leaving it to the end of the slice (docs/architecture.md)."""
    consumer, _ = cluster.consumer(settings())
    fetcher = cluster.fetchers[-1]
    consumer.subscribe([TOPIC], Recorder())
    poll_until(consumer, lambda: consumer.assignment() == TPS)
    assigned = fetcher.wakes
    assert assigned >= 1
    consumer.commit(asynchronous=False)
    assert fetcher.wakes > assigned
    consumer.close()


def _starts(fetcher: FakeFetcher) -> dict[TopicPartition, int]:
    return {tp: off for call in fetcher.assign_calls for tp, off in call.items()}


def test_successor_starts_from_committed_offsets_and_reset_policy(cluster: FakeCluster) -> None:
    cluster.coordinator.committed[TopicPartition(TOPIC, 0)] = 3
    cluster.produce(TopicPartition(TOPIC, 1), [b"a", b"b"])
    consumer, client = cluster.consumer(settings(**{"auto.offset.reset": "latest"}))
    consumer.subscribe([TOPIC])
    fetcher = consumer._fetcher
    assert isinstance(fetcher, FakeFetcher)
    poll_until(consumer, lambda: _starts(fetcher).keys() == TPS)
    # The committed offset where there is one, else where auto.offset.reset puts the
    # partition: its end, as its leader answered ListOffsets (latest, read_uncommitted).
    assert _starts(fetcher) == {TopicPartition(TOPIC, 0): 3, TopicPartition(TOPIC, 1): 7} | {
        TopicPartition(TOPIC, p): 5 for p in (2, 3)
    }
    asked = [r for r in client.sent if isinstance(r, ListOffsetsRequest)]
    assert [p.timestamp for r in asked for t in r.topics for p in t.partitions] == [-1] * 3
    assert {r.isolation_level for r in asked} == {0}
    consumer.close()


def test_a_reset_its_leader_does_not_answer_starts_from_the_logical_offset(
    cluster: FakeCluster,
) -> None:
    """The leader's answer only makes the first fetch sooner: a partition it answered
    with an error starts from OFFSET_BEGINNING, which the fetcher resolves itself."""
    cluster.list_offsets_error = 6  # NOT_LEADER_OR_FOLLOWER
    consumer, client = cluster.consumer(
        settings(**{"auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    )
    consumer.subscribe([TOPIC])
    fetcher = consumer._fetcher
    assert isinstance(fetcher, FakeFetcher)
    poll_until(consumer, lambda: _starts(fetcher).keys() == TPS)
    assert _starts(fetcher) == dict.fromkeys(TPS, OFFSET_BEGINNING)
    asked = [r for r in client.sent if isinstance(r, ListOffsetsRequest)]
    assert [p.timestamp for r in asked for t in r.topics for p in t.partitions] == [-2] * 4
    assert {r.isolation_level for r in asked} == {1}
    consumer.close()


def test_reset_none_raises_from_poll_for_partitions_without_commit(cluster: FakeCluster) -> None:
    cluster.coordinator.committed[TopicPartition(TOPIC, 0)] = 0
    consumer, _ = cluster.consumer(settings(**{"auto.offset.reset": "none"}))
    consumer.subscribe([TOPIC])
    with pytest.raises(KafkaError, match="no committed offset") as info:
        poll_until(consumer, lambda: False)
    assert info.value.code == error_codes.OFFSET_OUT_OF_RANGE
    # The partition with a commit is fetched; the others can be seeked explicitly.
    values = [m.value() for m in consumer.consume(100, 0.2)]
    assert {v.split(b"-")[0] for v in values if v is not None} == {b"0"}
    assert len(values) == 5
    consumer.seek(TopicPartition(TOPIC, 1), 4)
    assert [m.value() for m in consumer.consume(100, 0.2)] == [b"1-4"]
    consumer.close()


def test_seek_inside_on_partitions_assigned_wins(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings())
    listener = Recorder()

    def seek_all(partitions: frozenset[TopicPartition]) -> None:
        for tp in partitions:
            consumer.seek(tp, 4)

    listener.on_assigned = seek_all
    consumer.subscribe([TOPIC], listener)
    got: list[bytes] = []
    poll_until(consumer, lambda: len(got) >= 4, got)
    assert sorted(got) == [f"{p}-4".encode() for p in range(4)]
    consumer.close()


def _refusing_fetcher(consumer: object) -> FakeFetcher:
    fetcher = getattr(consumer, "_fetcher")  # noqa: B009 - the fake behind the facade
    assert isinstance(fetcher, FakeFetcher)
    return fetcher


def test_a_refused_restart_leaves_the_partition_delivering_from_where_it_was(
    cluster: FakeCluster,
) -> None:
    """Issue 35: librdkafka refuses the seek, then the re-assignment that restarts the
    partition at the sought offset. ``seek`` raises, and the partition, unassigned for
    the restart, is assigned again at its position: it never stalls."""
    tp = TopicPartition(TOPIC, 0)
    consumer, _ = cluster.consumer(settings())
    consumer.assign([tp])
    got: list[bytes] = []
    poll_until(consumer, lambda: len(got) >= 5, got)
    fetcher = _fake_fetcher(consumer)
    fetcher.refuse = {"seek": 1, "assign": 1}
    with pytest.raises(KafkaError, match="injected refusal"):
        consumer.seek(tp, 0)
    assert tp in fetcher.assigned
    assert consumer.assignment() == frozenset({tp})
    cluster.produce(tp, [b"0-5"])
    poll_until(consumer, lambda: b"0-5" in got, got)
    # From where it was: no record twice, none skipped.
    assert got == [f"0-{i}".encode() for i in range(6)]
    consumer.close()


def test_a_refused_restart_before_the_first_record_keeps_the_start(cluster: FakeCluster) -> None:
    """The same refusal while nothing was returned yet (the position is not known): the
    partition is assigned again at the offset it was started at."""
    tp = TopicPartition(TOPIC, 1)
    consumer, _ = cluster.consumer(settings())
    fetcher = _fake_fetcher(consumer)
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 1, 3)])
    consumer.pause([tp])  # nothing returned before the seek
    poll_until(consumer, lambda: tp in fetcher.assigned)
    fetcher.refuse = {"assign": 1}
    with pytest.raises(KafkaError, match="injected refusal"):
        consumer.seek(tp, 0)
    assert tp in fetcher.assigned
    consumer.resume([tp])
    got: list[bytes] = []
    poll_until(consumer, lambda: len(got) >= 2, got)
    assert got == [b"1-3", b"1-4"]
    consumer.close()


def _fake_fetcher(consumer: Consumer) -> FakeFetcher:
    fetcher = consumer._fetcher
    assert isinstance(fetcher, FakeFetcher)
    return fetcher


def test_pattern_subscription_skips_internal_topics(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings())
    listener = Recorder()
    consumer.subscribe("^.*", listener)
    poll_until(consumer, lambda: bool(listener.calls))
    assert {tp.topic for tp in consumer.assignment()} == {TOPIC, "other"}
    consumer.close()
    # A compiled pattern matches whole names (Java); "^..." strings match from the
    # start (librdkafka).
    consumer2, _ = cluster.consumer(settings())
    consumer2.subscribe(re.compile("oth"))
    consumer2.poll(0.3)
    assert consumer2.assignment() == frozenset()
    consumer2.subscribe(re.compile("oth.*"))
    poll_until(consumer2, lambda: bool(consumer2.assignment()))
    assert {tp.topic for tp in consumer2.assignment()} == {"other"}
    consumer2.close()
    consumer3, _ = cluster.consumer(settings())
    consumer3.subscribe("^oth")
    poll_until(consumer3, lambda: bool(consumer3.assignment()))
    assert {tp.topic for tp in consumer3.assignment()} == {"other"}
    consumer3.close()


def test_bad_arguments_are_configuration_errors(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings())
    with pytest.raises(ConfigurationError):
        consumer.subscribe([TOPIC, "^x"])
    with pytest.raises(ConfigurationError):
        consumer.subscribe(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        consumer.commit({TopicPartition(TOPIC, 0): -5})
    with pytest.raises(ConfigurationError):
        consumer.consume(0)
    with pytest.raises(ConfigurationError):
        consumer.seek(TopicPartition(TOPIC, 0), 1)  # not assigned
    consumer.close()
    with pytest.raises(ConfigurationError):
        Consumer({"bootstrap.servers": "x:1"})  # no group.id


def test_commit_errors_are_typed(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings())
    consumer.subscribe([TOPIC])
    poll_until(consumer, lambda: consumer.assignment() == TPS)
    offsets = {TopicPartition(TOPIC, 0): OffsetAndMetadata(offset=1, metadata="m")}
    cluster.coordinator.fail_next(8, error_codes.REBALANCE_IN_PROGRESS)
    with pytest.raises(RebalanceInProgressError):
        consumer.commit(offsets)
    consumer.poll(0.2)
    cluster.coordinator.fail_next(8, error_codes.ILLEGAL_GENERATION)
    with pytest.raises(CommitFailedError):
        consumer.commit(offsets)
    future = consumer.commit({TopicPartition(TOPIC, 0): 2}, asynchronous=True)
    # The generation was reset: the member rejoins; commits fail until it is back.
    with pytest.raises((CommitFailedError, RebalanceInProgressError)):
        future.result(PATIENCE_S)
    consumer.close()


def test_listener_exception_is_raised_once_and_other_callbacks_run(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings())
    listener = Recorder()
    listener.raise_in = {"assigned"}
    consumer.subscribe([TOPIC], listener)
    with pytest.raises(ValueError, match="assigned"):
        poll_until(consumer, lambda: False)
    got = consumer.consume(100, 0.2)  # the assignment stands; no second exception
    assert len(got) == 20
    listener.raise_in = {"revoked"}
    with pytest.raises(ValueError, match="revoked"):
        consumer.unsubscribe()
    assert consumer.assignment() == frozenset()
    assert [k for k, _ in listener.calls] == ["assigned", "revoked"]
    consumer.close()


def test_heartbeats_continue_between_polls(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings())
    listener = Recorder()
    consumer.subscribe([TOPIC], listener)
    poll_until(consumer, lambda: consumer.assignment() == TPS)
    generation = consumer.group_metadata().generation_id
    time.sleep(2.5)  # > session.timeout.ms without polling: the driver heartbeats
    consumer.poll(0.1)
    assert consumer.group_metadata().generation_id == generation
    assert [k for k, _ in listener.calls] == ["assigned"]
    consumer.close()


def test_poll_timeout_expiry_loses_partitions_then_rejoins(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings(**{"max.poll.interval.ms": 400}))
    listener = Recorder()
    consumer.subscribe([TOPIC], listener)
    poll_until(consumer, lambda: consumer.assignment() == TPS)
    time.sleep(1.0)
    # The next poll runs LOST (the member left) and rejoins; assigned follows.
    poll_until(
        consumer,
        lambda: [k for k, _ in listener.calls][-1:] == ["assigned"] and len(listener.calls) >= 3,
    )
    assert [k for k, _ in listener.calls][:3] == ["assigned", "lost", "assigned"]
    consumer.close()


def test_two_members_cooperative_handover(cluster: FakeCluster) -> None:
    first, _ = cluster.consumer(settings())
    second, _ = cluster.consumer(settings())
    l1, l2 = Recorder(), Recorder()
    first.subscribe([TOPIC], l1)
    poll_until(first, lambda: first.assignment() == TPS)
    second.subscribe([TOPIC], l2)
    deadline = time.monotonic() + PATIENCE_S
    while not (len(first.assignment()) == 2 and len(second.assignment()) == 2):
        assert time.monotonic() < deadline
        first.poll(0.01)
        second.poll(0.01)
        assert not first.assignment() & second.assignment()
    revoked = frozenset().union(*(ps for k, ps in l1.calls if k == "revoked"))
    # KIP-429: only the partitions that move are revoked; the kept ones never are.
    assert revoked == TPS - first.assignment()
    assert not any(ps for k, ps in l1.calls[1:] if k == "assigned")
    first.close()
    second.close()


def test_broken_client_surfaces_from_poll_and_close_still_works(cluster: FakeCluster) -> None:
    consumer, client = cluster.consumer(settings())
    consumer.subscribe([TOPIC])
    poll_until(consumer, lambda: consumer.assignment() == TPS)
    client.fail_sends = True
    with pytest.raises(DriverFailedError, match="injected send failure"):
        poll_until(consumer, lambda: False)
    with pytest.raises(DriverFailedError):
        consumer.poll(0)  # and every later call
    consumer.close()
    assert client.closed


def test_metadata_refresh_assigns_new_partitions_and_drops_deleted_topics(
    cluster: FakeCluster,
) -> None:
    consumer, _ = cluster.consumer(settings(**{"metadata.max.age.ms": 100}))
    listener = Recorder()
    consumer.subscribe([TOPIC, "other"], listener)
    other = frozenset(TopicPartition("other", p) for p in range(2))
    poll_until(consumer, lambda: consumer.assignment() == TPS | other)
    # A partition is added: the periodic refresh makes the leader rejoin and assign it.
    cluster.set_partitions(TOPIC, 5)
    cluster.produce(TopicPartition(TOPIC, 4), [b"new"])
    got: list[bytes] = []
    poll_until(consumer, lambda: b"new" in got, got)
    assert TopicPartition(TOPIC, 4) in consumer.assignment()
    # A subscribed topic is deleted: its partitions are revoked and not reassigned.
    cluster.set_partitions("other", 0)
    poll_until(consumer, lambda: not consumer.assignment() & other)
    revoked = frozenset().union(*(ps for k, ps in listener.calls if k in ("revoked", "lost")))
    assert revoked == other
    consumer.close()


def test_auto_commit_commits_consumed_positions(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(
        settings(**{"enable.auto.commit": True, "auto.commit.interval.ms": 50})
    )
    consumer.subscribe([TOPIC])
    got: list[bytes] = []
    poll_until(consumer, lambda: len(got) >= 20, got)
    poll_until(consumer, lambda: cluster.coordinator.committed_offsets() == dict.fromkeys(TPS, 5))
    consumer.close()


def test_unsubscribe_then_subscribe_again(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings())
    listener = Recorder()
    consumer.subscribe([TOPIC], listener)
    poll_until(consumer, lambda: consumer.assignment() == TPS)
    consumer.unsubscribe()
    assert consumer.assignment() == frozenset()
    assert cluster.coordinator.members == {}
    consumer.subscribe(["other"], listener)
    other = frozenset(TopicPartition("other", p) for p in range(2))
    poll_until(consumer, lambda: consumer.assignment() == other)
    consumer.subscribe([])  # Java: subscribing to nothing is unsubscribing
    assert consumer.assignment() == frozenset()
    consumer.subscribe(["other"], listener)
    poll_until(consumer, lambda: consumer.assignment() == other)
    assert [k for k, _ in listener.calls] == [
        "assigned",
        "revoked",
        "assigned",
        "revoked",
        "assigned",
    ]
    consumer.close()


def test_close_is_bounded_when_leave_group_gets_no_answer(cluster: FakeCluster) -> None:
    consumer, client = cluster.consumer(settings())
    consumer.subscribe([TOPIC])
    poll_until(consumer, lambda: consumer.assignment() == TPS)
    cluster.coordinator.drop_next(13)  # LeaveGroup is processed but never answered
    consumer.close(timeout=0.5)
    assert client.closed
    assert consumer.assignment() == frozenset()


def test_fatal_group_error_is_raised_after_lost_and_on_every_later_call(
    cluster: FakeCluster,
) -> None:
    consumer, client = cluster.consumer(settings())
    listener = Recorder()
    consumer.subscribe([TOPIC], listener)
    poll_until(consumer, lambda: consumer.assignment() == TPS)
    cluster.coordinator.fail_next(12, error_codes.FENCED_INSTANCE_ID)  # next heartbeat
    with pytest.raises(KafkaError) as info:
        poll_until(consumer, lambda: False)
    assert info.value.code == error_codes.FENCED_INSTANCE_ID
    # The member dropped its partitions (LOST ran first, on this thread), and the
    # error sticks until close().
    assert listener.calls[-1] == ("lost", TPS)
    assert consumer.assignment() == frozenset()
    with pytest.raises(KafkaError):
        consumer.poll(0)
    with pytest.raises(KafkaError):
        consumer.commit({TopicPartition(TOPIC, 0): 1})
    consumer.close()
    assert client.closed


def test_commit_accepts_confluent_style_lists(cluster: FakeCluster) -> None:
    import confluent_kafka

    consumer, _ = cluster.consumer(settings())
    consumer.subscribe([TOPIC])
    poll_until(consumer, lambda: consumer.assignment() == TPS)
    consumer.commit([confluent_kafka.TopicPartition(TOPIC, 1, 3)])
    assert cluster.coordinator.committed_offsets() == {TopicPartition(TOPIC, 1): 3}
    with pytest.raises(ConfigurationError):
        consumer.commit([confluent_kafka.TopicPartition(TOPIC, 1)])  # no offset
    consumer.close()


def test_a_consumer_dropped_without_close_stops_its_thread(cluster: FakeCluster) -> None:
    import gc

    def join_and_forget() -> FakeClient:
        consumer, client = cluster.consumer(settings())
        consumer.subscribe([TOPIC])
        poll_until(consumer, lambda: consumer.assignment() == TPS)
        cluster.consumers.clear()  # the fixture must not keep it alive
        return client

    client = join_and_forget()
    gc.collect()
    deadline = time.monotonic() + PATIENCE_S
    while not client.closed:  # the driver thread closes the client as it exits
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("cooperative-sticky", RebalanceProtocol.COOPERATIVE),
        ("cooperative-sticky,range", RebalanceProtocol.EAGER),
        ("range", RebalanceProtocol.EAGER),
    ],
)
def test_rebalance_protocol_is_the_highest_every_assignor_supports(
    cluster: FakeCluster, strategy: str, expected: RebalanceProtocol
) -> None:
    consumer, _ = cluster.consumer(settings(**{"partition.assignment.strategy": strategy}))
    assert consumer.rebalance_protocol is expected
    with pytest.raises(AttributeError):
        consumer.rebalance_protocol = RebalanceProtocol.EAGER  # type: ignore[misc]


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "cooperative-sticky,range", "range"])
def test_assignor_and_leadership_follow_the_last_join(cluster: FakeCluster, strategy: str) -> None:
    first, _ = cluster.consumer(settings(**{"partition.assignment.strategy": strategy}))
    assert first.assignor is None
    assert not first.is_leader
    first.subscribe([TOPIC])
    poll_until(first, lambda: first.assignment() == TPS)
    # The broker votes over the members' lists: alone, the member's first choice wins.
    assert first.assignor == strategy.split(",")[0]
    assert first.is_leader
    with pytest.raises(AttributeError):
        first.assignor = "range"

    second, _ = cluster.consumer(settings(**{"partition.assignment.strategy": strategy}))
    second.subscribe([TOPIC])
    deadline = time.monotonic() + PATIENCE_S
    while not (first.assignment() and second.assignment()):
        assert time.monotonic() < deadline, "the second member never got partitions"
        first.poll(0.01)
        second.poll(0.01)
    assert second.assignor == first.assignor == strategy.split(",")[0]
    assert [first.is_leader, second.is_leader].count(True) == 1


# --------------------------------------------------------------------------- client errors


def _down(name: str = "_ALL_BROKERS_DOWN") -> KafkaError:
    return KafkaError(-187, name, retriable=True, description="1/1 brokers are down")


def test_client_errors_reach_error_cb_on_the_polling_thread(cluster: FakeCluster) -> None:
    seen: list[tuple[KafkaError, int]] = []
    consumer, _ = cluster.consumer(
        settings(error_cb=lambda err: seen.append((err, threading.get_ident())))
    )
    consumer.subscribe([TOPIC])
    fetcher = cluster.fetchers[-1]
    fetcher.client_errors.extend([_down("_TRANSPORT"), _down()])
    consumer.poll(0.2)
    assert [(err.name, thread) for err, thread in seen] == [
        ("_TRANSPORT", threading.get_ident()),
        ("_ALL_BROKERS_DOWN", threading.get_ident()),
    ]
    assert fetcher.client_errors == []
    consumer.poll(0.1)
    assert len(seen) == 2, "an error is delivered once"


def test_client_errors_without_error_cb_are_logged(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    consumer, _ = cluster.consumer(settings())
    consumer.subscribe([TOPIC])
    cluster.fetchers[-1].client_errors.append(_down())
    with caplog.at_level("WARNING", logger="coopconsumer.consumer"):
        consumer.poll(0.1)
    assert any("_ALL_BROKERS_DOWN" in r.getMessage() for r in caplog.records)


def test_error_cb_that_raises_is_raised_from_poll_after_every_error_was_delivered(
    cluster: FakeCluster,
) -> None:
    seen: list[str] = []

    def callback(err: KafkaError) -> None:
        seen.append(err.name)
        raise RuntimeError(f"app refused {err.name}")

    consumer, _ = cluster.consumer(settings(error_cb=callback))
    consumer.subscribe([TOPIC])
    cluster.fetchers[-1].client_errors.extend([_down("_TRANSPORT"), _down()])
    with pytest.raises(RuntimeError, match="_TRANSPORT"):
        consumer.poll(0.1)
    assert seen == ["_TRANSPORT", "_ALL_BROKERS_DOWN"]
    consumer.poll(0.05)  # nothing left to raise: the consumer carries on


def test_error_cb_and_logger_must_have_the_right_types() -> None:
    with pytest.raises(ConfigurationError, match="error_cb"):
        Consumer({"bootstrap.servers": "fake:1", "group.id": GROUP, "error_cb": "print"})
    with pytest.raises(ConfigurationError, match="logger"):
        Consumer({"bootstrap.servers": "fake:1", "group.id": GROUP, "logger": "root"})


def test_close_reports_a_background_thread_that_did_not_stop(cluster: FakeCluster) -> None:
    consumer, client = cluster.consumer(settings())
    consumer.subscribe([TOPIC])
    consumer.poll(0.2)
    client.hang.set()
    try:
        began = time.monotonic()
        with pytest.raises(CoopConsumerError, match=r"did not stop within 0\.5 s"):
            consumer.close(timeout=0.5)
        assert time.monotonic() - began < 5.0
    finally:
        client.hang.clear()  # let the thread end
        for thread in threading.enumerate():
            if thread.name == "coopconsumer-driver":
                thread.join(5.0)
    consumer.close()  # closed all the same: a second close is a no-op


def test_poll_keeps_its_timeout_while_committed_offsets_do_not_come(cluster: FakeCluster) -> None:
    # The coordinator takes OffsetFetch but never answers. poll() used to wait for the
    # first position lookup up to default.api.timeout.ms (5 s here); it now returns
    # within its timeout while the lookup is pending (issue 15, item 1).
    cluster.coordinator.drop_next(OffsetFetchRequest.API_KEY, count=1_000_000)
    consumer, _ = cluster.consumer(settings())
    consumer.subscribe([TOPIC])
    worst = 0.0
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        began = time.monotonic()
        assert consumer.poll(0.1) is None  # no position known: no record
        worst = max(worst, time.monotonic() - began - 0.1)
    assert consumer.assignment() == TPS
    assert worst < 0.5, f"poll(0.1) overran by {worst:.3f} s"
    cluster.coordinator.drop_next(OffsetFetchRequest.API_KEY, count=0)  # answers again
    got: list[object] = []
    deadline = time.monotonic() + PATIENCE_S
    while not got and time.monotonic() < deadline:
        got += consumer.consume(100, 0.1)
    assert got, "records flow once the committed offsets arrive"


def test_fetch_metrics_count_records_and_read_lag_from_the_fetcher(cluster: FakeCluster) -> None:
    consumer, _ = cluster.consumer(settings())
    assert consumer.records_lag() == {}  # nothing assigned yet
    before = consumer.fetch_metrics()
    assert before["records-consumed-total"] == 0
    assert before["records-lag-max"] != before["records-lag-max"]  # NaN: no lag known
    consumer.subscribe([TOPIC])
    got: list[bytes] = []
    poll_until(consumer, lambda: len(got) >= 20, got)
    assert consumer.records_lag() == dict.fromkeys(TPS, 0)
    cluster.produce(TopicPartition(TOPIC, 2), [b"x"] * 7)
    cluster.produce(TopicPartition(TOPIC, 3), [b"y"] * 3)
    lags = consumer.records_lag()
    assert lags[TopicPartition(TOPIC, 2)] == 7
    assert lags[TopicPartition(TOPIC, 3)] == 3
    metrics = consumer.fetch_metrics()
    assert metrics["records-consumed-total"] == 20
    assert metrics["records-consumed-rate"] > 0
    assert metrics["records-lag-max"] == 7
    consumer.close()
    assert consumer.records_lag() == {}


def test_manual_assignment_works_with_the_consumer_group_protocol(
    cluster: FakeCluster,
) -> None:
    config = settings(**{"group.protocol": "consumer"})
    del config["partition.assignment.strategy"]
    consumer, _ = cluster.consumer(config)
    consumer.assign([TopicPartition(TOPIC, 0)])
    assert consumer.assignment() == frozenset({TopicPartition(TOPIC, 0)})
    assert consumer.group_metadata().generation_id == -1
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.subscribe([TOPIC])
    consumer.unassign()
    assert consumer.assignment() == frozenset()
    consumer.close()


def test_records_fetched_after_an_outage_say_the_failure_stopped(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 35: the consumer's "no longer failing" line comes from a positive sign,
    records fetched, not from a window of silence."""
    tp = TopicPartition(TOPIC, 0)
    consumer, _ = cluster.consumer(settings())
    consumer.assign([tp])
    got: list[bytes] = []
    poll_until(consumer, lambda: len(got) >= 5, got)
    failures = _fake_fetcher(consumer).failures
    with caplog.at_level(logging.DEBUG, logger="coopconsumer"):
        for _ in range(3):
            failures.report(logging.ERROR, "h:1/1: Connect to ipv4#h:1 failed: Connection refused")
            failures.note_client_error("1/1 brokers are down")
        cluster.produce(tp, [b"0-5"])
        poll_until(consumer, lambda: b"0-5" in got, got)
    over = [r.getMessage() for r in caplog.records if "no longer failing" in r.getMessage()]
    assert len(over) == 2, over
    assert all(line.startswith("no longer failing (records were fetched, 3 time") for line in over)
    consumer.close()
