"""The healer's state topic and election on a real group coordinator (Tansu), with
the reassignment part on the replication test cluster: exactly one active healer, a
standby that takes over from the stored state (docs/admin.md, "Healing after a
broker failure").

The replication cluster has no group coordinator and Tansu has no reassignment, so
each side runs where it can: the healer's admin client talks to the replication
cluster, its state topic and consumer group live on Tansu.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coopconsumer.__main__ import main
from coopconsumer.admin import AdminClient, BalancedReplicaAssignor
from coopconsumer.admin.heal import ChunkState, HealConfig, Healer
from coopconsumer.admin.heal._kafka import KafkaStateTopic, create_state_topic
from coopconsumer.testing import (
    EmbeddedBroker,
    embedded_broker,
    replication_cluster,
    unique_name,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PATIENCE_S = 30.0


@pytest.fixture(scope="module")
def tansu() -> Iterator[EmbeddedBroker]:
    with embedded_broker("tansu") as broker:
        yield broker


def state_topic(broker: EmbeddedBroker, topic: str, group: str) -> KafkaStateTopic:
    return KafkaStateTopic(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "session.timeout.ms": 2000,
            "heartbeat.interval.ms": 200,
        },
        topic=topic,
    )


def until_one_active(*members: KafkaStateTopic) -> KafkaStateTopic:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        active = [m for m in members if m.is_active()]
        assert len(active) <= 1, "two active healers"
        if active:
            return active[0]
    raise AssertionError("no active healer")


def test_exactly_one_instance_is_active_and_a_standby_reads_the_state(
    tansu: EmbeddedBroker,
) -> None:
    topic, group = unique_name("heal-state"), unique_name("heal")
    with AdminClient({"bootstrap.servers": tansu.bootstrap}) as admin:
        assert create_state_topic(admin, topic)
        assert not create_state_topic(admin, topic)
    a, b = state_topic(tansu, topic, group), state_topic(tansu, topic, group)
    try:
        active = until_one_active(a, b)
        standby = b if active is a else a
        assert active.load() == {}
        active.write("failure/3", {"first_seen": 12.5, "failed": True})
        active.write("chunk/3-1", {"state": "running"})
        active.write("chunk/3-1", {"state": "done"})
        active.write("chunk/3-0", {"state": "done"})
        active.write("chunk/3-0", None)
        for _ in range(5):
            assert not standby.is_active()
        active.close()
        assert until_one_active(standby) is standby
        assert standby.load() == {
            "failure/3": {"first_seen": 12.5, "failed": True},
            "chunk/3-1": {"state": "done"},
        }
    finally:
        for member in (a, b):
            member.close()  # idempotent


def test_a_standby_healer_takes_over_mid_chunk_and_finishes(tansu: EmbeddedBroker) -> None:
    topic, group = unique_name("heal-state"), unique_name("heal")
    with AdminClient({"bootstrap.servers": tansu.bootstrap}) as admin:
        create_state_topic(admin, topic)
    with replication_cluster(6, racks=["a", "b", "c"], manual_clock=True) as cluster:
        cluster.create_topic("t", [[1 + i % 6, 1 + (i + 2) % 6] for i in range(30)])
        for i in range(30):
            cluster.set_partition_size("t", i, 1_000_000)
        for b in range(1, 7):
            cluster.set_replication_rate(b, 100_000)  # a chunk takes a while
        stores = [state_topic(tansu, topic, group) for _ in range(2)]
        admins = [AdminClient({"bootstrap.servers": cluster.bootstrap}) for _ in range(2)]
        healers = [
            Healer(
                admins[i],
                BalancedReplicaAssignor(),
                config=HealConfig(failure_interval_ms=10_000, chunk_size=4),
                store=stores[i],
                election=stores[i],
                clock=lambda: cluster.now,
            )
            for i in range(2)
        ]
        try:
            cluster.kill_broker(3)
            active = _active_healer(healers)
            cluster.advance_time(10.0)
            active.step()
            assert active.core is not None
            first_seen = active.core.absent_since[3]
            assert active.core.chunks()[0][2] is ChunkState.RUNNING
            # The active healer goes away mid-chunk; the other one takes over.
            active.close()
            standby = next(h for h in healers if h is not active)
            deadline = time.monotonic() + PATIENCE_S
            while not standby.step():
                assert time.monotonic() < deadline, "the standby never took over"
            assert standby.core is not None
            assert standby.core.absent_since[3] == first_seen
            for _ in range(2000):
                if all(3 not in p.replicas and not p.reassigning for p in cluster.partitions("t")):
                    break
                cluster.advance_time(1.0)
                standby.step()
            for p in cluster.partitions("t"):
                assert 3 not in p.replicas
                assert len(set(p.replicas)) == 2
            assert {c[2] for c in standby.core.chunks()} == {ChunkState.DONE}
        finally:
            for h in healers:
                h.close()  # idempotent
            for a in admins:
                a.close()


def _active_healer(healers: list[Healer]) -> Healer:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        active = [h for h in healers if h.step()]
        assert len(active) <= 1, "two active healers"
        if active:
            return active[0]
    raise AssertionError("no active healer")


def test_coopconsumer_heal_command(
    tansu: EmbeddedBroker, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Tansu holds a JoinGroup for half the session timeout: keep it short.
    group = tmp_path / "state.properties"
    group.write_text("session.timeout.ms=2000\nheartbeat.interval.ms=200\n")
    with replication_cluster(4, racks=["a", "b"]) as cluster:
        cluster.create_topic("t", [[1 + i % 4, 1 + (i + 1) % 4] for i in range(8)])
        cluster.kill_broker(2)
        status = main(
            [
                "heal",
                "--bootstrap-server",
                cluster.bootstrap,
                "--state-bootstrap-server",
                tansu.bootstrap,
                "--state-config",
                str(group),
                "--state-topic",
                unique_name("heal-state"),
                "--group-id",
                unique_name("heal"),
                "--replica-assignor",
                "balanced",
                "--failure-interval-ms",
                "500",
                "--chunk-size",
                "3",
                "--poll-interval",
                "0.2",
                "--max-steps",
                "60",
            ]
        )
        assert status == 0
        out = capsys.readouterr().out
        assert "created the state topic" in out
        assert "failure interval 500 ms, chunks of 3" in out
        assert "chunks-done-total 2" in out  # 4 partitions had a replica on broker 2
        for p in cluster.partitions("t"):
            assert 2 not in p.replicas
            assert len(set(p.replicas)) == 2


def test_a_standby_takes_over_from_a_healer_killed_mid_chunk(
    tansu: EmbeddedBroker, tmp_path: Path
) -> None:
    """``coopconsumer heal`` processes: the active one is SIGKILLed while a chunk moves
    (no LeaveGroup, no goodbye); the standby waits out its session, resumes from the
    state topic and finishes. Never two replicas on one broker, none on the dead one."""
    settings = tmp_path / "state.properties"
    settings.write_text("session.timeout.ms=2000\nheartbeat.interval.ms=200\n")
    state_topic_name, group = unique_name("heal-state"), unique_name("heal")
    with replication_cluster(6, racks=["a", "b", "c"]) as cluster:
        cluster.create_topic("t", [[1 + i % 6, 1 + (i + 2) % 6] for i in range(30)])
        for i in range(30):
            cluster.set_partition_size("t", i, 600_000)
        for b in range(1, 7):
            cluster.set_replication_rate(b, 300_000)  # about 2 s a move
        command = [
            sys.executable,
            "-m",
            "coopconsumer",
            "heal",
            "--bootstrap-server",
            cluster.bootstrap,
            "--state-bootstrap-server",
            tansu.bootstrap,
            "--state-config",
            str(settings),
            "--state-topic",
            state_topic_name,
            "--group-id",
            group,
            "--replica-assignor",
            "balanced",
            "--failure-interval-ms",
            "500",
            "--chunk-size",
            "4",
            "--poll-interval",
            "0.2",
        ]
        cluster.kill_broker(3)
        first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        second: subprocess.Popen[bytes] | None = None
        try:
            deadline = time.monotonic() + PATIENCE_S
            while not any(p.reassigning for p in cluster.partitions("t")):
                assert time.monotonic() < deadline, "the first healer never started a chunk"
                assert first.poll() is None, first.stderr.read() if first.stderr else ""
                time.sleep(0.1)
            second = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(1.0)  # the standby joins the group; the first stays active
            assert any(p.reassigning for p in cluster.partitions("t")), "killed mid-chunk"
            first.kill()
            first.wait()
            deadline = time.monotonic() + 2 * PATIENCE_S
            while not all(
                3 not in p.replicas and not p.reassigning for p in cluster.partitions("t")
            ):
                assert time.monotonic() < deadline, "the standby never finished the healing"
                assert second.poll() is None, second.stderr.read() if second.stderr else ""
                time.sleep(0.2)
            for p in cluster.partitions("t"):
                assert len(set(p.replicas)) == len(p.replicas) == 2
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(10)


def test_heal_status_reads_the_state_without_taking_it_from_the_active_healer(
    tansu: EmbeddedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = unique_name("heal-state"), unique_name("heal")
    with AdminClient({"bootstrap.servers": tansu.bootstrap}) as admin:
        assert create_state_topic(admin, topic) == 1  # min(3, brokers): Tansu is one
    active = state_topic(tansu, topic, group)
    try:
        until_one_active(active)
        active.write("failure/4", {"first_seen": time.time() - 90, "failed": True})
        active.write(
            "chunk/4-1-00000.r2",
            {
                "broker": 4,
                "partitions": [["t", 7]],
                "state": "queued",
                "executor": None,
                "error": None,
                "attempt": 2,
                "not_before": time.time() + 30,
                "unhealed": {},
                "left_alone": {"t:7": "another tool is moving it (replicas [1, 4])"},
            },
        )
        server = ["--bootstrap-server", "127.0.0.1:1", "--state-bootstrap-server", tansu.bootstrap]
        assert main(["heal", "status", *server, "--state-topic", topic]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == f"healer state in {topic}: 2 record(s)"
        assert out[3].split()[:3] == ["4", "90", "s"]
        retry = out[-1]
        assert retry.startswith("retry: chunk 4-1-00000.r2 (attempt 2): 1 partition(s) of broker 4")
        assert "(t:7: another tool is moving it (replicas [1, 4]))" in retry
        assert active.is_active()  # the reader joined no group
    finally:
        active.close()
