"""The documentation under docs/ stays true to the code.

* configuration.md is exactly what docs/gen_config_reference.py renders from the config
  parser today;
* every Python block in docs/ compiles, and the blocks that need no broker run;
* metrics.md lists every metric of the registry, and nothing else, with the right
  KIP-429 aliases;
* the assignor shown in custom-assignor.md is the one in examples/my_assignors.py;
* the quickstart program and the test files shown in testing.md run against embedded
  brokers (integration).
"""

from __future__ import annotations

import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from coopconsumer._metrics import CoordinatorMetrics, FetchMetrics

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"

#: Blocks that need a running broker; they are run by the integration tests below.
_NEEDS_BROKER = {
    ("exactly-once.md", 0),  # compiled only; examples/exactly_once.py runs the loop
    ("quickstart.md", 0),
    ("quickstart.md", 3),  # compiled only; tests/integration/test_consumer.py runs these calls
    ("quickstart.md", 4),  # run by test_quickstart_manual_assignment_runs
    ("testing.md", 0),
    ("testing.md", 1),
    ("testing.md", 2),
}

_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _python_blocks(name: str) -> list[str]:
    return _BLOCK.findall((DOCS / name).read_text())


def _doc_names() -> list[str]:
    return sorted(path.name for path in DOCS.glob("*.md"))


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_config_reference", DOCS / "gen_config_reference.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_page_of_the_index_exists() -> None:
    index = (DOCS / "index.md").read_text()
    linked = set(re.findall(r"\]\(([a-z-]+\.md)\)", index))
    assert linked == set(_doc_names()) - {"index.md"}


def test_configuration_reference_is_current() -> None:
    generator = _load_generator()
    committed = (DOCS / "configuration.md").read_text()
    assert generator.render() == committed, (
        "docs/configuration.md is out of date: run python docs/gen_config_reference.py"
    )


def test_architecture_state_machine_part_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(DOCS / "gen_architecture.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_configuration_reference_lists_every_documented_key() -> None:
    from coopconsumer._config import documented_keys

    text = (DOCS / "configuration.md").read_text()
    rows = set(re.findall(r"^\| `([^`]+)` \|", text, re.M))
    assert {row.key for row in documented_keys()} <= rows


def test_generator_check_mode_detects_a_stale_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    generator = _load_generator()
    stale = tmp_path / "configuration.md"
    stale.write_text("# stale\n")
    monkeypatch.setattr(generator, "OUTPUT", stale)
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0


@pytest.mark.parametrize("name", _doc_names())
def test_python_blocks_compile(name: str) -> None:
    for number, block in enumerate(_python_blocks(name)):
        compile(block, f"{name}[block {number}]", "exec")


@pytest.mark.parametrize("name", _doc_names())
def test_python_blocks_without_broker_run(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))  # custom-assignor.md imports my_assignors
    for number, block in enumerate(_python_blocks(name)):
        if (name, number) in _NEEDS_BROKER:
            continue
        code = compile(block, f"{name}[block {number}]", "exec")
        exec(code, {"__name__": f"docs_{number}"})


def _metric_table(text: str) -> dict[str, str]:
    """Reference table rows: code name -> KIP-429 name column."""
    section = text.split("## Reference", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z-]+)` \| [^|]+ \| [^|]+ \| ([^|]+) \|", section, re.M)
    return {name: alias.strip() for name, alias in rows}


def test_metrics_reference_matches_the_registry() -> None:
    metrics = CoordinatorMetrics()
    snapshot = metrics.snapshot(0.0)
    table = _metric_table((DOCS / "metrics.md").read_text())
    assert sorted(table) == sorted(metrics.registry.names())
    documented_aliases = {
        alias.strip("`"): name for name, alias in table.items() if alias.startswith("`")
    }
    assert documented_aliases == dict(snapshot.aliases)
    for alias, name in documented_aliases.items():
        assert metrics.registry.resolve(alias) == name


def test_every_metric_name_mentioned_in_the_docs_exists() -> None:
    metrics = CoordinatorMetrics()
    fetch = FetchMetrics(list)
    known = (
        set(metrics.registry.names())
        | set(metrics.snapshot(0.0).aliases)
        | set(fetch.registry.names())
    )
    pattern = re.compile(
        r"`([a-z]+(?:-[a-z]+)*-(?:avg|max|total|rate|rate-per-hour|seconds-ago)"
        r"|assigned-partitions)`"
    )
    for name in ("metrics.md", "upgrade.md", "quickstart.md", "testing.md"):
        mentioned = set(pattern.findall((DOCS / name).read_text()))
        assert mentioned <= known, f"{name} mentions unknown metrics {mentioned - known}"
    text = (DOCS / "metrics.md").read_text()
    for code_name in known:
        assert f"`{code_name}`" in text


def test_custom_assignor_page_shows_the_example_module() -> None:
    shown = _python_blocks("custom-assignor.md")[0]
    module = (EXAMPLES / "my_assignors.py").read_text()
    assert shown.strip() in module
    assert (
        '"partition.assignment.strategy": "my_assignors:HashAssignor"'
        in (DOCS / "custom-assignor.md").read_text()
    )


# ----------------------------------------------------------------- with brokers

#: Generous bound for a subprocess on a shared 2-core machine; reaching it is a hang.
_SUBPROCESS_TIMEOUT_S = 240


@pytest.mark.integration
def test_quickstart_program_runs(tmp_path: Path) -> None:
    script = tmp_path / "quickstart.py"
    script.write_text(_python_blocks("quickstart.md")[0])
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=_SUBPROCESS_TIMEOUT_S,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if "b'order " in line]
    assert len(lines) == 10
    assert {line.split()[-1] for line in lines} == {f"{i}'" for i in range(10)}


@pytest.mark.integration
def test_quickstart_manual_assignment_runs(tmp_path: Path) -> None:
    script = tmp_path / "manual.py"
    script.write_text(_python_blocks("quickstart.md")[4])
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=_SUBPROCESS_TIMEOUT_S,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("manual ")]
    assert sorted(lines) == [
        "manual 0 0 b'entry 0'",
        "manual 0 1 b'entry 2'",
        "manual 1 0 b'entry 1'",
        "manual 1 1 b'entry 3'",
    ]
    assert "TopicPartition(topic='audit', partition=0)" in done.stdout


@pytest.mark.integration
@pytest.mark.slow
def test_testing_page_examples_pass(tmp_path: Path) -> None:
    fixtures, basic, faults = (_python_blocks("testing.md")[i] for i in range(3))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(fixtures)
    (tmp_path / "test_basic.py").write_text(basic)
    (tmp_path / "test_faults.py").write_text(faults)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=_SUBPROCESS_TIMEOUT_S,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout


def test_group_errors_the_docs_call_fatal_are_fatal() -> None:
    # upgrade.md, assignors.md and quickstart.md say a consumer refused with
    # INCONSISTENT_GROUP_PROTOCOL (or fenced) raises from every poll() until close().
    from coopconsumer._member._error_actions import Api, ErrorAction, action_for
    from coopconsumer._protocol import error_codes

    for code in (error_codes.INCONSISTENT_GROUP_PROTOCOL, error_codes.FENCED_INSTANCE_ID):
        assert action_for(Api.JOIN_GROUP, code) is ErrorAction.FATAL
    for name in ("upgrade.md", "assignors.md", "quickstart.md"):
        assert "INCONSISTENT_GROUP_PROTOCOL" in (DOCS / name).read_text()


def test_metric_rules_the_docs_state_hold() -> None:
    # metrics.md: NaN for an empty window, -1 before the first event, whole seconds,
    # and a rate over at least one full 30 s window (three events read 0.1/s).
    metrics = CoordinatorMetrics()
    start = 1000.0
    empty = metrics.snapshot(start)
    assert math.isnan(empty["rebalance-latency-avg"])
    assert empty["last-rebalance-seconds-ago"] == -1
    for _ in range(3):
        metrics.commit_completed(0.004, start)
    assert metrics.snapshot(start)["commit-rate"] == pytest.approx(0.1)
    metrics.rebalance_started(start)
    metrics.rebalance_completed(start + 2.5)
    later = metrics.snapshot(start + 4.9)
    assert later["last-rebalance-seconds-ago"] == 2
    assert later["rebalance-latency-max"] == pytest.approx(2500.0)
