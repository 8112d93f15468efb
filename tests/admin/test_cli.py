"""``coopconsumer topics create|describe`` and ``coopconsumer cluster describe``."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from coopconsumer.__main__ import main
from coopconsumer.admin._admin_cli import format_table
from coopconsumer.testing import ReplicationCluster, replication_cluster

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster() -> Iterator[ReplicationCluster]:
    with replication_cluster(3, racks=["a", "b", "c"], manual_clock=True) as c:
        yield c


def test_format_table() -> None:
    assert format_table(("A", "LONGER"), [(1, (2, 3)), ("xyz", None)]).splitlines() == [
        "A    LONGER",
        "---  ------",
        "1    2,3",
        "xyz  -",
    ]


def test_topics_create_then_describe(
    cluster: ReplicationCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    properties = tmp_path / "admin.properties"
    properties.write_text("# Kafka tools' format\nclient.id = ops-cli\nretry.backoff.ms=20\n")
    status = main(
        [
            "topics",
            "create",
            "--bootstrap-server",
            cluster.bootstrap,
            "--command-config",
            str(properties),
            "--topic",
            "orders",
            "--partitions",
            "3",
            "--replication-factor",
            "2",
            "--config",
            "retention.ms=1000",
            "--replica-assignor",
            "balanced",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "Created topic orders with 3 partition(s) placed by balanced:" in out
    assert out.splitlines()[1].split() == ["PARTITION", "LEADER", "REPLICAS"]
    assert [p.replicas for p in cluster.partitions("orders")] == [
        tuple(int(b) for b in line.split()[2].split(",")) for line in out.splitlines()[3:]
    ]
    cluster.kill_broker(cluster.partition("orders", 0).leader)
    assert main(["topics", "describe", "--bootstrap-server", cluster.bootstrap]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "TOPIC",
        "PARTITION",
        "LEADER",
        "EPOCH",
        "REPLICAS",
        "ISR",
        "OFFLINE",
    ]
    first = lines[2].split()
    assert (first[0], first[1], first[3]) == ("orders", "0", "1")  # a new leader, epoch 1
    assert first[6] != "-"  # the dead broker is listed offline


def test_topics_errors_exit_1(
    cluster: ReplicationCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.create_topic("orders", [[1]])
    args = ["topics", "create", "--bootstrap-server", cluster.bootstrap, "--topic", "orders"]
    assert main(args) == 1
    assert "TOPIC_ALREADY_EXISTS" in capsys.readouterr().err
    args = ["topics", "describe", "--bootstrap-server", cluster.bootstrap, "--topic", "nope"]
    assert main(args) == 1
    assert "nope" in capsys.readouterr().err
    args = [
        "topics",
        "create",
        "--bootstrap-server",
        cluster.bootstrap,
        "--topic",
        "x",
        "--replication-factor",
        "4",
    ]
    assert main(args) == 1
    assert "cannot be reached because only 3 broker(s)" in capsys.readouterr().err
    bad = ["topics", "describe", "--bootstrap-server", "h:1", "--command-config", "/no/such"]
    assert main(bad) == 1
    assert "cannot read --command-config" in capsys.readouterr().err


def test_cluster_describe(cluster: ReplicationCluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster.create_topic("t", [[1, 2]])
    cluster.set_partition_size("t", 0, 2048)
    assert main(["cluster", "describe", "--bootstrap-server", cluster.bootstrap]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Cluster id: coopconsumer-test-cluster   controller: 1")
    assert lines[1].split() == [
        "BROKER",
        "ADDRESS",
        "RACK",
        "REPLICAS",
        "LEADERS",
        "USED",
        "CAPACITY",
    ]
    assert lines[3].split()[2:] == ["a", "1", "1", "2.0", "KiB", "1.0", "TiB"]
    assert lines[5].split()[2:] == ["c", "0", "0", "0", "B", "1.0", "TiB"]
    with pytest.raises(SystemExit):
        main(["cluster", "describe"])  # --bootstrap-server is required


def test_topics_alter_delete_and_the_failure_filters(
    cluster: ReplicationCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    server = ["--bootstrap-server", cluster.bootstrap]
    cluster.create_topic("orders", [[1, 2], [2, 3], [3, 1]])
    cluster.create_topic("logs", [[1], [2]])
    assert main(["topics", "alter", *server, "--topic", "orders", "--partitions", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Added 2 partition(s) to orders, placed by kraft:"
    assert out[1].split() == ["PARTITION", "LEADER", "REPLICAS"]
    assert [line.split()[0] for line in out[3:]] == ["3", "4"]
    assert len(cluster.partitions("orders")) == 5

    cluster.kill_broker(2)
    describe = ["topics", "describe", *server]
    assert main([*describe, "--under-replicated-partitions"]) == 0
    rows = [line.split()[:2] for line in capsys.readouterr().out.splitlines()[2:]]
    shrunk = [["orders", str(p.partition)] for p in cluster.partitions("orders") if 2 in p.replicas]
    assert rows == shrunk  # logs-1 (only replica on 2) has no leader: not under-replicated
    assert main([*describe, "--unavailable-partitions"]) == 0
    rows = [line.split()[:3] for line in capsys.readouterr().out.splitlines()[2:]]
    assert rows == [["logs", "1", "none"]]
    assert main([*describe, "--topic", "logs"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4  # no filter: both partitions

    assert main(["topics", "delete", *server, "--topic", "logs", "--topic", "nope"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["TOPIC", "RESULT"]
    assert out[2].split() == ["logs", "deleted"]
    assert out[3].startswith("nope")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in out[3]
    assert cluster.topics() == ["orders"]
    assert cluster.topics_being_deleted() == {"logs": [(1, 2)]}  # broker 2 is down


def test_cluster_describe_on_a_closed_port_says_so_plainly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 35, case 5: the message read "connection closed before the DescribeCluster
    v? response: cannot connect: ... (broker X) (broker X)"."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["cluster", "describe", "--bootstrap-server", f"127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "v?" not in err
    assert "connection closed before" not in err
    assert err.count(f"127.0.0.1:{port}") == 1
    assert err.startswith("error: DescribeCluster request not sent: cannot connect:")
