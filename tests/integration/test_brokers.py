"""The test brokers themselves: they serve records, stop cleanly, and inject faults.

Every other integration test trusts these fixtures, so this file proves, per broker
kind, that a confluent-kafka producer and a manually assigned consumer (what our
fetcher is) round-trip records, that no broker process survives its context, and that
each mock fault is observable from a client's point of view.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import KafkaError as CKafkaError
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient

from coopconsumer import (
    BrokerConnectionError,
    ConfigurationError,
    KafkaError,
    ProtocolError,
    RequestTimeoutError,
)
from coopconsumer.testing import (
    BrokerStartupError,
    EmbeddedBroker,
    MockRequest,
    embedded_broker,
    external_broker,
    free_port,
    probe_api_versions,
    unique_name,
)

# The harness's promises hold for every kind it starts: the ``broker`` tests run on all.
pytestmark = [pytest.mark.integration, pytest.mark.brokers("kafka", "tansu", "mock")]

API_VERSIONS = 18
JOIN_GROUP = 11
SYNC_GROUP = 14
HEARTBEAT = 12
LEAVE_GROUP = 13
FIND_COORDINATOR = 10
REBALANCE_IN_PROGRESS = 27
UNSUPPORTED_VERSION = 35

#: Generous bound for eventually-true conditions on a shared 2-core machine; reaching it
#: means the behaviour is missing, not slow.
PATIENCE_S = 30.0


def _produce(bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    """Produce (partition, value) records and fail unless every one is acknowledged."""
    errors: list[CKafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, value in records:
        producer.produce(
            topic,
            value=value,
            partition=partition,
            on_delivery=lambda err, _msg: errors.append(err) if err is not None else None,
        )
    assert producer.flush(PATIENCE_S) == 0, "records still queued after flush"
    assert errors == []


def _fetch_assigned(
    bootstrap: str, group: str, topic: str, partitions: int, expected: int
) -> set[tuple[int, int, bytes]]:
    """Read ``expected`` records with assign() + poll(), the way our fetcher does."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([CTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        seen: set[tuple[int, int, bytes]] = set()
        deadline = time.monotonic() + PATIENCE_S
        while len(seen) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            partition, offset, value = message.partition(), message.offset(), message.value()
            assert partition is not None
            assert offset is not None
            assert isinstance(value, bytes)
            seen.add((partition, offset, value))
        return seen
    finally:
        consumer.close()


def test_records_round_trip_through_manual_assignment(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    partitions = 3
    broker.create_topic(unique_topic, partitions)
    records = [(i % partitions, f"record-{i}".encode()) for i in range(30)]
    _produce(broker.bootstrap, unique_topic, records)

    seen = _fetch_assigned(broker.bootstrap, unique_group, unique_topic, partitions, 30)

    assert {(p, v) for p, _, v in seen} == set(records)
    for partition in range(partitions):
        offsets = sorted(o for p, o, _ in seen if p == partition)
        assert offsets == list(range(10)), f"partition {partition} offsets {offsets}"


def test_broker_answers_api_versions_with_the_group_apis(broker: EmbeddedBroker) -> None:
    address = broker.bootstrap.split(",")[0]
    versions = probe_api_versions(address)
    assert versions == broker.api_versions
    for api_key in (FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, 8, 9):
        assert api_key in versions, f"api {api_key} not advertised"


def test_create_topic_twice_is_a_kafka_error(broker: EmbeddedBroker, unique_topic: str) -> None:
    broker.create_topic(unique_topic, 2)
    with pytest.raises(KafkaError) as info:
        broker.create_topic(unique_topic, 2)
    assert info.value.code == 36  # TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("bad", ["", "has space", "x" * 250, "..", "semi;colon"])
def test_create_topic_rejects_invalid_names(broker: EmbeddedBroker, bad: str) -> None:
    with pytest.raises(ConfigurationError):
        broker.create_topic(bad, 1)


# --- lifecycle: nothing survives the context -----------------------------------------


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie holds no socket)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def _session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes whose session id is ``sid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        # After the comm field: state, ppid, pgrp, session, ... (proc(5)).
        if fields[0] != "Z" and int(fields[3]) == sid:
            members.append(int(entry.name))
    return members


def _wait_until_gone(sid: int) -> list[int]:
    deadline = time.monotonic() + PATIENCE_S
    while (left := _session_members(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


@needs_proc
@pytest.mark.parametrize("kind", ["tansu", "mock"])
def test_exit_stops_every_broker_process(kind: str) -> None:
    with embedded_broker(kind) as started:  # type: ignore[arg-type]
        pid = started.pid
        assert pid is not None
        assert started.running
        sid = os.getsid(pid)
        assert sid != os.getsid(0), "broker must run in its own session"
        address = started.bootstrap.split(",")[0]
    assert not _running(pid)
    assert _session_members(sid) == []
    assert not started.running
    with pytest.raises(BrokerConnectionError):
        probe_api_versions(address, timeout_s=2.0)


@needs_proc
@pytest.mark.parametrize("kind", ["tansu", "mock"])
def test_exception_in_body_still_stops_the_broker(kind: str) -> None:
    pids: list[int] = []

    def body_that_fails() -> None:
        with embedded_broker(kind) as started:  # type: ignore[arg-type]
            assert started.pid is not None
            pids.extend([started.pid, os.getsid(started.pid)])
            raise RuntimeError("test body failed")

    with pytest.raises(RuntimeError, match="test body failed"):
        body_that_fails()
    pid, sid = pids
    assert not _running(pid)
    assert _session_members(sid) == []


_ORPHAN_SCRIPT = """
import json, os, sys, time
from coopconsumer.testing import embedded_broker
with embedded_broker(sys.argv[1]) as broker:
    print(json.dumps({"pid": broker.pid, "sid": os.getsid(broker.pid)}), flush=True)
    time.sleep(600)
"""


@needs_proc
@pytest.mark.parametrize("kind", ["tansu", "mock"])
def test_killed_test_process_leaves_no_orphan(kind: str) -> None:
    # SIGKILL skips every finally/atexit hook: only the helpers' stdin-EOF watch can
    # clean up, which is exactly what this checks.
    owner = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT, kind], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        info = json.loads(owner.stdout.readline())
        assert _running(info["pid"])
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert _wait_until_gone(info["sid"]) == []
    assert not _running(info["pid"])


def test_startup_failure_reports_the_broker_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\necho 'fake tansu: cannot bind the listener' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr("coopconsumer.testing._tansu_broker.find_tansu_binary", lambda: fake)
    with pytest.raises(BrokerStartupError, match="cannot bind the listener") as info:  # noqa: SIM117
        with embedded_broker("tansu"):
            pytest.fail("a broker that exits must not be yielded")
    assert "cannot bind the listener" in info.value.stderr_tail


def test_external_broker_wraps_a_running_cluster(tansu_broker: EmbeddedBroker) -> None:
    external = external_broker(tansu_broker.bootstrap)
    assert external.kind == "external"
    assert not external.supports_faults
    assert external.pid is None
    topic = unique_name("external")
    external.create_topic(topic, 2)
    _produce(external.bootstrap, topic, [(1, b"via-external")])
    assert _fetch_assigned(external.bootstrap, unique_name("g"), topic, 2, 1) == {
        (1, 0, b"via-external")
    }
    with pytest.raises(NotImplementedError, match="kind='mock'"):
        external.set_broker_down(1)


def test_external_broker_that_never_answers_is_a_startup_error() -> None:
    with pytest.raises(BrokerStartupError, match="did not answer ApiVersions"):
        external_broker(f"127.0.0.1:{free_port()}", timeout_s=0.5)


# --- Tansu: capabilities and the quirks tests may meet ---------------------------------


def test_tansu_has_no_fault_injection(tansu_broker: EmbeddedBroker) -> None:
    assert tansu_broker.kind == "tansu"
    assert not tansu_broker.supports_faults
    assert tansu_broker.broker_ids == ()
    calls: list[Callable[[], object]] = [
        lambda: tansu_broker.set_broker_down(1),
        lambda: tansu_broker.set_broker_up(1),
        lambda: tansu_broker.push_request_errors(JOIN_GROUP, [REBALANCE_IN_PROGRESS]),
        lambda: tansu_broker.set_coordinator("g", 1),
        lambda: tansu_broker.set_api_version(JOIN_GROUP, 0, 5),
    ]
    for call in calls:
        with pytest.raises(NotImplementedError, match="fault injection needs kind='mock'"):
            call()


def test_tansu_advertises_the_group_api_versions_design_md_lists(
    tansu_broker: EmbeddedBroker,
) -> None:
    versions = tansu_broker.api_versions
    # The versions Kafka 3.9/4.x brokers advertise: the highest our client negotiates down from.
    assert versions[FIND_COORDINATOR][1] >= 6
    assert versions[JOIN_GROUP][1] >= 9
    assert versions[SYNC_GROUP][1] >= 5
    assert versions[HEARTBEAT][1] >= 4
    assert versions[LEAVE_GROUP][1] >= 5
    assert versions[8][1] >= 9  # OffsetCommit
    assert versions[9][1] >= 9  # OffsetFetch


@pytest.mark.parametrize("fixture", ["tansu_broker", "mock_broker"])
def test_quirk_metadata_auto_creates_topics_with_4_partitions(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    # Quirk of both embedded brokers: a Metadata request that allows auto-creation (a
    # producer's does) creates the topic with 4 partitions, as a real Kafka does only
    # with auto.create.topics.enable=true and num.partitions=4. A test that forgets
    # create_topic() passes here and fails on a stricter cluster, so create topics
    # explicitly; and our own client must send allow_auto_topic_creation=false.
    embedded: EmbeddedBroker = request.getfixturevalue(fixture)
    topic = unique_name("autocreate")
    _produce(embedded.bootstrap, topic, [(0, b"first")])
    assert _fetch_assigned(embedded.bootstrap, unique_name("g"), topic, 4, 1) == {(0, 0, b"first")}
    _produce(embedded.bootstrap, topic, [(3, b"last partition")])


# --- mock cluster: every fault is observable ---------------------------------------------


def test_mock_caps_the_group_apis_it_implements_badly(mock_broker: EmbeddedBroker) -> None:
    assert mock_broker.supports_faults
    assert mock_broker.broker_ids == (1, 2, 3)
    versions = mock_broker.api_versions
    assert versions[JOIN_GROUP][1] == 5
    assert versions[SYNC_GROUP][1] == 3
    assert versions[LEAVE_GROUP][1] == 2


def test_mock_set_api_version_changes_what_api_versions_advertises(
    mock_broker: EmbeddedBroker,
) -> None:
    address = mock_broker.bootstrap.split(",")[0]
    mock_broker.set_api_version(HEARTBEAT, 0, 3)
    assert probe_api_versions(address)[HEARTBEAT] == (0, 3)
    mock_broker.set_api_version(HEARTBEAT, -1, -1)
    assert HEARTBEAT not in probe_api_versions(address)


def test_mock_broker_down_refuses_connections_until_up(mock_broker: EmbeddedBroker) -> None:
    first, second = mock_broker.bootstrap.split(",")[:2]
    mock_broker.set_broker_down(1)
    with pytest.raises(BrokerConnectionError):
        probe_api_versions(first, timeout_s=2.0)
    assert JOIN_GROUP in probe_api_versions(second)
    mock_broker.set_broker_up(1)
    assert JOIN_GROUP in probe_api_versions(first)


def test_mock_broker_down_fails_delivery_to_its_partitions(
    mock_broker: EmbeddedBroker, unique_topic: str
) -> None:
    mock_broker.create_topic(unique_topic, 1)
    mock_broker.set_partition_leader(unique_topic, 0, 2)
    mock_broker.set_broker_down(2)
    outcomes: list[CKafkaError | None] = []
    producer = Producer({"bootstrap.servers": mock_broker.bootstrap, "message.timeout.ms": 1000})
    producer.produce(
        unique_topic, b"lost", partition=0, on_delivery=lambda e, _m: outcomes.append(e)
    )
    producer.flush(PATIENCE_S)
    assert len(outcomes) == 1
    assert outcomes[0] is not None
    assert outcomes[0].code() == CKafkaError._MSG_TIMED_OUT

    # A fresh producer with the default 300 s message timeout: the first one's 1 s
    # could expire inside its own reconnect backoff and prove nothing about the broker.
    mock_broker.set_broker_up(2)
    _produce(mock_broker.bootstrap, unique_topic, [(0, b"kept")])


def test_mock_push_request_errors_are_served_in_order(mock_broker: EmbeddedBroker) -> None:
    address = mock_broker.bootstrap.split(",")[0]
    mock_broker.push_request_errors(API_VERSIONS, [UNSUPPORTED_VERSION, 0, UNSUPPORTED_VERSION])
    with pytest.raises(ProtocolError, match="error code 35"):
        probe_api_versions(address)
    assert JOIN_GROUP in probe_api_versions(address)
    mock_broker.clear_request_errors(API_VERSIONS)
    assert JOIN_GROUP in probe_api_versions(address)


def _join_once(bootstrap: str, group: str, topic: str) -> list[CTopicPartition]:
    assigned: list[CTopicPartition] = []
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000}
    )
    try:
        consumer.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(parts))
        deadline = time.monotonic() + PATIENCE_S
        while not assigned and time.monotonic() < deadline:
            consumer.poll(0.05)
        return assigned
    finally:
        consumer.close()


def test_mock_group_recovers_from_injected_join_errors_on_the_set_coordinator(
    mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    mock_broker.create_topic(unique_topic, 2)
    mock_broker.set_coordinator(unique_group, 3)
    mock_broker.push_request_errors(JOIN_GROUP, [REBALANCE_IN_PROGRESS, REBALANCE_IN_PROGRESS])
    mock_broker.start_request_tracking()

    assigned = _join_once(mock_broker.bootstrap, unique_group, unique_topic)

    assert sorted(tp.partition for tp in assigned) == [0, 1]
    group_requests = [
        r for r in mock_broker.requests() if r.api_key in (JOIN_GROUP, SYNC_GROUP, LEAVE_GROUP)
    ]
    # Two JoinGroups failed as injected, the third succeeded; every group request went
    # to the coordinator we placed.
    assert [r.api_key for r in group_requests].count(JOIN_GROUP) == 3
    assert {r.broker_id for r in group_requests} == {3}


def test_mock_rejects_unknown_broker_ids(mock_broker: EmbeddedBroker) -> None:
    with pytest.raises(ConfigurationError, match="broker_id 9"):
        mock_broker.set_broker_down(9)
    with pytest.raises(ConfigurationError):
        mock_broker.push_request_errors(JOIN_GROUP, [])


def test_mock_commands_after_stop_raise_connection_error() -> None:
    with embedded_broker("mock") as started:
        started.set_broker_down(1)
    with pytest.raises(BrokerConnectionError, match="mock cluster process is gone"):
        started.set_broker_down(1)


def test_mock_broker_rtt_delays_answers_past_a_client_timeout(
    mock_broker: EmbeddedBroker,
) -> None:
    address = mock_broker.bootstrap.split(",")[0]
    mock_broker.set_broker_rtt(1, 5000)
    with pytest.raises(RequestTimeoutError):
        probe_api_versions(address, timeout_s=0.5)
    mock_broker.set_broker_rtt(1, 0)
    assert JOIN_GROUP in probe_api_versions(address)


def test_mock_topic_error_shows_in_metadata(mock_broker: EmbeddedBroker, unique_topic: str) -> None:
    mock_broker.create_topic(unique_topic, 2)
    mock_broker.set_topic_error(unique_topic, 29)  # TOPIC_AUTHORIZATION_FAILED
    admin = AdminClient({"bootstrap.servers": mock_broker.bootstrap})
    topic = admin.list_topics(timeout=PATIENCE_S).topics[unique_topic]
    assert topic.error is not None
    assert topic.error.code() == CKafkaError.TOPIC_AUTHORIZATION_FAILED
    mock_broker.set_topic_error(unique_topic, 0)
    assert admin.list_topics(timeout=PATIENCE_S).topics[unique_topic].error is None


def test_mock_request_tracking_records_clears_and_stops(mock_broker: EmbeddedBroker) -> None:
    first = mock_broker.bootstrap.split(",")[0]
    third = mock_broker.bootstrap.split(",")[2]
    mock_broker.start_request_tracking()
    probe_api_versions(first)
    probe_api_versions(third)
    assert mock_broker.requests() == [
        MockRequest(broker_id=1, api_key=API_VERSIONS),
        MockRequest(broker_id=3, api_key=API_VERSIONS),
    ]
    mock_broker.clear_requests()
    assert mock_broker.requests() == []
    mock_broker.stop_request_tracking()
    probe_api_versions(first)
    assert mock_broker.requests() == []
