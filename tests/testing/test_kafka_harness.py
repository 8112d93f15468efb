"""coopconsumer.testing's Apache Kafka: setup errors that say what to do, and node control.

The setup errors run against fake ``java`` and ``mvn`` scripts on an otherwise empty PATH,
so no JVM starts. The node-control tests start real KRaft nodes (jars from the Maven
cache) and check each operation against what Kafka itself then reports.
"""

from __future__ import annotations

import socket
import stat
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

import coopconsumer.testing._ports
from coopconsumer import ConfigurationError
from coopconsumer.testing import (
    BrokerStartupError,
    KafkaCluster,
    KafkaSetupError,
    embedded_broker,
    kafka_cluster,
    kafka_container,
    kafka_distribution,
    unique_name,
)
from coopconsumer.testing import _kafka as kafka_module


def _script(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holding only an empty directory, and an empty jar cache."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # The fake tools start with #!/bin/sh, so PATH needs nothing else.
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("COOPCONSUMER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COOPCONSUMER_KAFKA_VERSION", raising=False)
    return bin_dir


def test_no_java_on_path_says_to_install_a_jdk(bare_path: Path) -> None:
    with pytest.raises(KafkaSetupError, match=r"no 'java' on PATH.*install a JDK"):
        kafka_distribution()


def test_a_java_older_than_17_is_refused_by_name(bare_path: Path) -> None:
    _script(bare_path, "java", "echo 'openjdk version \"11.0.22\" 2024-01-16' >&2\n")
    with pytest.raises(KafkaSetupError, match=r"needs Java 17 or newer; .* is Java 11"):
        kafka_distribution()


def test_java_8_version_strings_read_as_8(bare_path: Path) -> None:
    _script(bare_path, "java", "echo 'java version \"1.8.0_392\"' >&2\n")
    with pytest.raises(KafkaSetupError, match=r"is Java 8$"):
        kafka_distribution()


def test_no_mvn_and_no_cached_jars_says_to_install_maven(bare_path: Path) -> None:
    _script(bare_path, "java", "echo 'openjdk version \"17.0.15\" 2025-04-15' >&2\n")
    with pytest.raises(KafkaSetupError, match=r"no 'mvn' on PATH"):
        kafka_distribution()


def test_a_resolution_failure_shows_what_maven_said_and_leaves_no_half_cache(
    bare_path: Path, tmp_path: Path
) -> None:
    _script(bare_path, "java", "echo 'openjdk version \"17.0.15\" 2025-04-15' >&2\n")
    _script(
        bare_path,
        "mvn",
        "echo '[ERROR] Could not resolve dependencies: org.apache.kafka:kafka_2.13:jar:4.4.0'\n"
        "exit 1\n",
    )
    with pytest.raises(
        KafkaSetupError, match=r"Maven could not resolve Apache Kafka 4\.4\.0"
    ) as info:
        kafka_distribution()
    assert "Could not resolve dependencies" in str(info.value)
    home = tmp_path / "cache" / "kafka" / "4.4.0"
    assert not (home / "libs").exists()
    assert not list(home.glob("libs.staging-*"))


def test_a_version_that_is_not_a_version_is_refused(bare_path: Path) -> None:
    with pytest.raises(KafkaSetupError, match=r"not like '4\.4\.0'"):
        kafka_distribution("latest")


def test_bad_cluster_arguments_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="brokers"):
        kafka_module.start_kafka_cluster(0)
    with pytest.raises(ConfigurationError, match="log_dirs"):
        kafka_module.start_kafka_cluster(1, log_dirs=0)
    with (
        pytest.raises(ConfigurationError, match="version needs kind='kafka'"),
        embedded_broker("tansu", version="4.4.0"),
    ):
        pass


@pytest.fixture
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Kafka's node directories go under this test's tmp_path, so a leftover JVM of this
    test is told apart from other test processes' brokers by its command line."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return str(tmp_path)


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xF8 encodes to "-" first: kafka-storage format -t would read it as an option.
    drawn = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(drawn))
    cluster_id = kafka_module._cluster_id()
    assert cluster_id == "AQEBAQEBAQEBAQEBAQEBAQ"
    assert next(drawn, None) is None  # the dash one was drawn and refused


def test_kafka_container_says_what_it_lacks_without_docker() -> None:
    # No Docker engine runs here: the adapter must refuse at once, naming the remedy.
    with pytest.raises(KafkaSetupError, match=r"testcontainers|Docker engine") as info:  # noqa: SIM117
        with kafka_container():
            pass
    assert "embedded_broker('kafka')" in str(info.value)


def _java_processes_under(directory: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "kafka.Kafka" in cmdline and directory in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.integration
def test_a_config_kafka_rejects_fails_at_format_with_its_reason(own_tmp: str) -> None:
    with pytest.raises(BrokerStartupError, match="kafka-storage format failed") as info:
        kafka_module.start_kafka_cluster(1, broker_config={"num.io.threads": "none"})
    assert "Invalid value none for configuration num.io.threads" in str(info.value)
    assert not _java_processes_under(own_tmp)


@pytest.mark.integration
def test_a_node_that_exits_during_start_fails_at_once_with_its_first_errors(own_tmp: str) -> None:
    started = time.monotonic()
    # Passes the format (nothing opens the keystore then), fails when the listener starts.
    broken = {
        "listener.security.protocol.map": "CLIENT:SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "listener.name.client.ssl.keystore.location": "/nonexistent/keystore.jks",
        "listener.name.client.ssl.keystore.password": "secret",
    }
    with pytest.raises(BrokerStartupError, match="exited during start") as info:
        kafka_module.start_kafka_cluster(1, broker_config=broken, startup_timeout_s=100)
    # The node's own complaint, not a timeout: the cause is in the message itself.
    assert "/nonexistent/keystore.jks" in str(info.value).split("--- broker output")[0]
    assert time.monotonic() - started < 100, "waited for the startup timeout"
    assert not _java_processes_under(own_tmp)


@pytest.mark.integration
def test_a_port_that_will_not_bind_is_named_after_the_retries(
    monkeypatch: pytest.MonkeyPatch, own_tmp: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        real_free_port = coopconsumer.testing._ports.free_port
        calls = iter(range(1_000_000))

        def client_port_taken() -> int:
            # Every node's first port (its client listener) is the one held above.
            return port if next(calls) % 3 == 0 else real_free_port()

        monkeypatch.setattr(kafka_module, "free_port", client_port_taken)
        with pytest.raises(BrokerStartupError, match="Address already in use") as info:
            kafka_module.start_kafka_cluster(1)
        assert f"127.0.0.1:{port}" in str(info.value)
    assert not _java_processes_under(own_tmp)


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with kafka_cluster(brokers=3, log_dirs=2, racks=["r1", "r2", "r3"]) as running:
        yield running


def _leaders(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int]]]:
    meta = admin.list_topics(topic=topic, timeout=10).topics[topic]
    return {p: (m.leader, list(m.isrs)) for p, m in meta.partitions.items()}


def _wait(condition: object, what: str, timeout_s: float = 60.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.mark.integration
def test_the_cluster_shows_its_nodes_racks_and_log_dirs(cluster: KafkaCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert sorted(n.id for n in described.nodes) == [1, 2, 3]
    assert {n.id: n.rack for n in described.nodes} == {1: "r1", 2: "r2", 3: "r3"}
    for node in cluster.nodes:
        assert len(node.log_dirs) == 2
        assert all((d / "meta.properties").is_file() for d in node.log_dirs)
    listed = cluster.run_tool(
        "org.apache.kafka.tools.TopicCommand",
        "--bootstrap-server",
        cluster.internal_bootstrap,
        "--list",
    )
    assert listed.returncode == 0, listed.stderr[-2000:]


@pytest.mark.integration
def test_kill_pause_and_restart_act_on_one_node(cluster: KafkaCluster) -> None:
    topic = unique_name("harness")
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})

    # Each node learns of the topic from the controller on its own: the node this admin
    # asks may not list it yet (seen on Kafka 3.9.2).
    _wait(
        lambda: [leader >= 0 for leader, _ in _leaders(admin, topic).values()] == [True] * 3,
        "every node to list the topic with its leaders",
    )
    victim = _leaders(admin, topic)[0][0]
    pid = cluster.node(victim).pid
    cluster.kill(victim)
    assert not cluster.node(victim).running
    assert pid is not None
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    _wait(
        lambda: all(leader != victim for leader, _ in _leaders(admin, topic).values()),
        "leadership to leave the killed node",
    )
    # Still writable with acks=all: min.insync.replicas is 1 by default.
    producer.produce(topic, b"during", partition=0)
    assert producer.flush(30) == 0

    cluster.start_node(victim)
    assert cluster.node(victim).running
    _wait(
        lambda: all(victim in isr for _, isr in _leaders(admin, topic).values()),
        "the restarted node to rejoin every ISR",
    )

    paused = next(n for n in cluster.node_ids if n != victim)
    cluster.pause(paused)
    assert cluster.node(paused).paused
    cluster.resume(paused)
    assert not cluster.node(paused).paused

    with pytest.raises(ConfigurationError, match="is running"):
        cluster.start_node(victim)
    with pytest.raises(ConfigurationError, match="no Kafka node 9"):
        cluster.kill(9)


@pytest.mark.integration
def test_stop_node_is_a_controlled_shutdown(cluster: KafkaCluster) -> None:
    topic = unique_name("harness-stop")
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    node = cluster.nodes[-1]
    cluster.stop_node(node.node_id)
    assert not node.running
    assert "shut down completed" in node.output_tail(200_000) or "Shutdown completed" in (
        node.output_tail(200_000)
    )
    cluster.start_node(node.node_id)
    assert node.running
