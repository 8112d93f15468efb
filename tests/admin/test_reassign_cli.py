"""``coopconsumer reassign plan|execute|status|cancel|rollback`` against the
replication test cluster (docs/admin.md, "Reassigning partitions")."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coopconsumer.__main__ import main
from coopconsumer._types import TopicPartition
from coopconsumer.admin import AdminClient
from coopconsumer.admin.reassign import (
    ExecutorConfig,
    MoveState,
    ReassignmentExecutor,
    ReassignmentPlan,
    load_state,
)
from coopconsumer.testing import ReplicationCluster, replication_cluster

pytestmark = pytest.mark.integration

MB = 1_000_000


def build(cluster: ReplicationCluster, count: int, size: int) -> None:
    cluster.create_topic("t", [[1 + i % 3, 1 + (i + 1) % 3] for i in range(count)])
    for i in range(count):
        cluster.set_partition_size("t", i, size)


def placement(cluster: ReplicationCluster) -> dict[int, frozenset[int]]:
    return {p.partition: frozenset(p.replicas) for p in cluster.partitions("t")}


def test_plan_execute_status_rollback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with replication_cluster(4, racks=["a", "b"]) as cluster:
        build(cluster, 12, MB)
        before = placement(cluster)
        server = ["--bootstrap-server", cluster.bootstrap]
        plan_file, state = tmp_path / "plan.json", tmp_path / "move.state"
        assert (
            main(["reassign", "plan", *server, "--move-off", "1", "--output", str(plan_file)]) == 0
        )
        assert "8 partition(s) to move, 7.6 MiB to copy" in capsys.readouterr().out
        plan = ReassignmentPlan.from_json(plan_file.read_text())
        assert all(1 not in m.replicas and 1 in m.original_replicas for m in plan.moves)
        assert all(m.size_bytes == MB for m in plan.moves)
        # The file diffs line by line: one partition per line.
        assert sum('"topic": "t"' in line for line in plan_file.read_text().splitlines()) == 8

        args = ["--plan", str(plan_file), "--state", str(state), "--max-partitions", "3"]
        assert main(["reassign", "execute", *server, *args, "--poll-interval", "0.05"]) == 0
        out = capsys.readouterr().out
        assert "[##############################] 8/8 done, 0 in flight, 0 queued" in out
        assert all(1 not in r for r in placement(cluster).values())

        assert main(["reassign", "status", "--state", str(state)]) == 0
        out = capsys.readouterr().out
        assert "executor: not running" in out
        assert "done        8" in out

        back, back_state = tmp_path / "back.json", tmp_path / "back.state"
        assert main(["reassign", "rollback", "--state", str(state), "--output", str(back)]) == 0
        assert "8 finished move(s) to take back" in capsys.readouterr().out
        run_back = ["--plan", str(back), "--state", str(back_state), "--poll-interval", "0.05"]
        assert main(["reassign", "execute", *server, *run_back]) == 0
        assert placement(cluster) == before


def test_cancel_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with replication_cluster(4, manual_clock=True) as cluster:
        build(cluster, 6, 50 * MB)
        state = tmp_path / "move.state"
        plan = ReassignmentPlan.from_dict(
            {
                "version": 1,
                "partitions": [
                    {
                        "topic": "t",
                        "partition": i,
                        "replicas": [4, *cluster.partition("t", i).replicas[1:]],
                        "original_replicas": list(cluster.partition("t", i).replicas),
                        "size_bytes": 50 * MB,
                    }
                    for i in range(6)
                ],
            }
        )
        before = placement(cluster)
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
            executor = ReassignmentExecutor.create(
                admin,
                plan,
                ExecutorConfig(max_partitions=2, throttle_bytes_per_s=MB),
                state_path=state,
                clock=lambda: cluster.now,
                sleep=cluster.advance_time,
            )
            asked: list[int] = []

            def cancel_once(_: object) -> None:
                # While this executor runs, the CLI only leaves a request for it.
                if not asked:
                    asked.append(
                        main(["reassign", "cancel", "--state", str(state), "--partition", "t:0"])
                    )

            executor.run(on_progress=cancel_once, max_steps=2)
            assert asked == [0]
            assert "asked the running executor to cancel 1 partition(s)" in capsys.readouterr().out
            assert executor.core.state_of(TopicPartition("t", 0)) is MoveState.CANCELLED

        # No executor now: the CLI cancels itself, through the API.
        assert cluster.partition("t", 1).reassigning
        server = ["--bootstrap-server", cluster.bootstrap]
        assert main(["reassign", "cancel", "--state", str(state), *server]) == 0
        out = capsys.readouterr().out
        assert "cancelled every unfinished move" in out
        assert "(finished)" in out
        assert placement(cluster) == before
        assert not any(p.reassigning for p in cluster.partitions("t"))
        saved = load_state(state)
        assert saved.progress().counts[MoveState.CANCELLED] == 6
        assert json.loads(state.read_text())["phase"] == "finished"


def test_bad_input_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.json").write_text("{}")
    assert main(["reassign", "status", "--state", str(tmp_path / "missing")]) == 1
    assert "cannot read the executor state" in capsys.readouterr().err
    with replication_cluster(3) as cluster:
        server = ["--bootstrap-server", cluster.bootstrap]
        args = ["--plan", str(tmp_path / "p.json"), "--state", str(tmp_path / "s")]
        assert main(["reassign", "execute", *server, *args]) == 1
        assert "not a version-1 reassignment plan" in capsys.readouterr().err
        assert main(["reassign", "cancel", "--state", str(tmp_path / "s"), "--partition", "x"]) == 1
        assert "topic:partition" in capsys.readouterr().err


def test_execute_killed_with_sigkill_resumes_from_its_state_file(tmp_path: Path) -> None:
    with replication_cluster(4) as cluster:
        build(cluster, 12, 20 * MB)
        plan_file, state = tmp_path / "plan.json", tmp_path / "move.state"
        server = ["--bootstrap-server", cluster.bootstrap]
        assert (
            main(["reassign", "plan", *server, "--move-off", "1", "--output", str(plan_file)]) == 0
        )
        plan = ReassignmentPlan.from_json(plan_file.read_text())
        run = [
            *server,
            "--state",
            str(state),
            "--max-partitions",
            "2",
            "--throttle",
            str(20 * MB),
            "--poll-interval",
            "0.1",
        ]
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "coopconsumer",
                "reassign",
                "execute",
                "--plan",
                str(plan_file),
                *run,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while not (state.exists() and load_state(state).progress().done >= 1):
                assert time.monotonic() < deadline, "no move finished"
                time.sleep(0.05)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        killed_at = load_state(state).progress()
        assert 1 <= killed_at.done < len(plan)
        assert main(["reassign", "execute", *run]) == 0  # no --plan: resume
        resumed = load_state(state)
        assert resumed.progress().done == len(plan)
        for m in plan.moves:
            assert set(cluster.partition("t", m.partition).replicas) == set(m.replicas)


def test_a_typo_names_what_does_not_exist_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35, case 5: a broker or topic that does not exist planned nothing and
    exited 0; now every such option names it in one line and exits 1."""
    with replication_cluster(3) as cluster:
        build(cluster, 3, MB)
        server = ["--bootstrap-server", cluster.bootstrap]
        typos = {
            ("plan", "--move-off", "99"): "no such broker: 99",
            ("plan", "--move-off", "1,99"): "no such broker: 99",
            ("plan", "--rebalance", "--topic", "ghost"): "no such topic: ghost",
            ("plan", "--move-off", "1", "--topic", "ghost"): "no such topic: ghost",
            ("plan", "--add-brokers", "99"): "not a live broker: 99",
            ("plan", "--balance-disks", "--topic", "ghost"): "no such topic: ghost",
            ("list", "--topic", "ghost"): "ghost: UNKNOWN_TOPIC_OR_PARTITION",
        }
        for argv, message in typos.items():
            assert main(["reassign", argv[0], *server, *argv[1:]]) == 1, argv
            captured = capsys.readouterr()
            assert captured.out == "", argv  # no empty plan written
            assert captured.err.count("\n") == 1, (argv, captured)
            assert message in captured.err, (argv, captured)
        # A planned partition that is mistyped when cancelling is named too.
        plan_file, state = tmp_path / "plan.json", tmp_path / "s"
        assert (
            main(["reassign", "plan", *server, "--move-off", "1", "--output", str(plan_file)]) == 0
        )
        run = ["--plan", str(plan_file), "--state", str(state), "--poll-interval", "0.05"]
        assert main(["reassign", "execute", *server, *run]) == 0
        capsys.readouterr()
        cancel = ["reassign", "cancel", "--state", str(state), *server, "--partition", "ghost:0"]
        assert main(cancel) == 1
        assert "not in the plan of" in capsys.readouterr().err
