"""``coopconsumer demo``: the report's arithmetic, and the demo end to end on Tansu.

The unit tests feed the report hand-made facts. The integration tests run
``python -m coopconsumer._demo`` as a user would: ``--quick`` must show that the
cooperative run revoked fewer partitions and paused kept partitions no longer than the
eager run, and Ctrl-C must stop it leaving no broker behind.
"""

from __future__ import annotations

import math
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from coopconsumer._demo import _demo_cli as cli
from coopconsumer._demo import _report as report
from coopconsumer._demo import run_demo
from coopconsumer._demo._demo_cli import TANSU_NOTE
from coopconsumer._demo._run import Event, MemberStats, Recorder, ScenarioResult

# ------------------------------------------------------------------ the report


def _result(recorder: Recorder, *, teardown_at: float, produced: set[int]) -> ScenarioResult:
    return ScenarioResult(
        label="test",
        strategy="cooperative-sticky",
        recorder=recorder,
        members=(
            MemberStats(
                name="member-1",
                rebalance_total=2,
                rebalance_latency_total_ms=300.0,
                rebalance_latency_max_ms=200.0,
                failed_rebalance_total=1,
            ),
            MemberStats(
                name="member-2",
                rebalance_total=1,
                rebalance_latency_total_ms=600.0,
                rebalance_latency_max_ms=math.nan,
                failed_rebalance_total=0,
            ),
        ),
        produced=frozenset(produced),
        teardown_at=teardown_at,
        duration_s=teardown_at - recorder.start,
    )


def _event(
    recorder: Recorder, at: float, member: str, kind: str, parts: set[int], gen: int
) -> None:
    recorder.record_event(
        Event(
            at=recorder.start + at,
            member=member,
            kind=kind,
            partitions=frozenset(parts),
            generation=gen,
        )
    )


def _sample() -> ScenarioResult:
    recorder = Recorder(2)
    t0 = recorder.start
    # p0: member-1 throughout, with a 2.0 s gap it kept (the pause to report).
    for at in (1.0, 1.1, 3.1, 3.2):
        recorder.record_batch(t0 + at, "member-1", [(0, int(at * 10))])
    # p1: member-1, then handed to member-2 after a 5 s gap: not a kept partition.
    recorder.record_batch(t0 + 1.0, "member-1", [(1, 100)])
    recorder.record_batch(t0 + 6.0, "member-2", [(1, 101), (1, 101)])  # 101 twice
    recorder.record_batch(t0 + 9.5, "member-1", [(0, 200)])  # after teardown: ignored
    _event(recorder, 0.5, "member-1", "assigned", {0, 1}, 1)
    _event(recorder, 2.0, "member-1", "revoked", {1}, 1)
    _event(recorder, 2.1, "member-1", "assigned", set(), 2)
    _event(recorder, 2.2, "member-2", "assigned", {1}, 2)
    _event(recorder, 9.8, "member-1", "revoked", {0}, 2)  # the final shutdown
    return _result(recorder, teardown_at=t0 + 9.0, produced={10, 11, 31, 32, 100, 101, 555})


def test_summary_counts_what_happened_before_the_teardown() -> None:
    summary = report.summarize(_sample())
    assert summary.rebalances == 2
    assert summary.partitions_revoked == 1
    assert summary.longest_kept_pause_s == pytest.approx(2.0)
    assert summary.longest_kept_pause_at == ("member-1", 0)
    assert summary.records_processed == 8
    assert summary.duplicates == 1
    assert summary.lost == 1  # 555 was acknowledged but never processed
    assert summary.rebalance_latency_avg_ms == pytest.approx(300.0)
    assert summary.rebalance_latency_max_ms == 200.0
    assert summary.failed_rebalances == 1


def test_table_puts_the_runs_side_by_side() -> None:
    summary = report.summarize(_sample())
    table = report.format_table([summary, summary])
    revoked = next(line for line in table.splitlines() if line.startswith("partitions revoked"))
    assert re.split(r"\s{2,}", revoked.strip())[1:] == ["1", "1"]
    for label, _ in report.ROWS:
        assert label in table


def test_ascii_timeline_shows_pauses_and_hand_overs() -> None:
    result = _sample()
    lines = report.ascii_timeline(result, columns=9).splitlines()
    p0 = next(line for line in lines if line.startswith("  p0"))
    p1 = next(line for line in lines if line.startswith("  p1"))
    # one column per second: member-1 processes p0 at 1 s and 3 s, nothing in between
    assert p0.split()[1] == ".1.1....."
    assert p1.split()[1] == ".1....2.."


def test_timeline_marks_a_column_where_two_members_processed() -> None:
    recorder = Recorder(1)
    recorder.record_batch(recorder.start + 0.5, "member-1", [(0, 1)])
    recorder.record_batch(recorder.start + 0.6, "member-2", [(0, 2)])
    result = _result(recorder, teardown_at=recorder.start + 2.0, produced={1, 2})
    line = report.ascii_timeline(result, columns=2).splitlines()[-1]
    assert line.split()[1] == "*."


def test_png_is_skipped_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_module(name: str) -> object:
        raise ImportError(name)

    monkeypatch.setattr("importlib.import_module", no_module)
    target = tmp_path / "timeline.png"
    assert report.write_png([_sample()], target) is False
    assert not target.exists()


def test_png_is_written_with_matplotlib(tmp_path: Path) -> None:
    # The demo extra installs matplotlib (so does the test extra).
    target = tmp_path / "timeline.png"
    assert report.write_png([_sample()], target) is True
    assert target.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_default_picture_goes_to_a_new_temporary_file() -> None:
    first, second = cli._temporary_png(), cli._temporary_png()
    try:
        assert first != second
        assert first.parent == Path(tempfile.gettempdir())
        assert first.name.startswith("coopconsumer-demo-")
        assert first.suffix == ".png"
    finally:
        first.unlink()
        second.unlink()


def test_bad_arguments_exit_2() -> None:
    assert run_demo(["--partitions", "2"]) == 2
    with pytest.raises(SystemExit) as raised:
        run_demo(["--no-such-flag"])
    assert raised.value.code == 2


# ------------------------------------------------------------------ end to end

#: Catches hangs only; --quick normally takes under a minute.
TIMEOUT_S = 300


def _table_row(out: str, label: str) -> tuple[float, float]:
    line = next(line for line in out.splitlines() if line.startswith(label))
    eager, cooperative = re.split(r"\s{2,}", line.strip())[1:]
    return float(eager), float(cooperative)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("broker", ["tansu", "kafka"])
def test_quick_demo_shows_the_cooperative_benefit(tmp_path: Path, broker: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "coopconsumer._demo", "--quick", "--no-png", "--broker", broker],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    out = done.stdout
    eager_revoked, coop_revoked = _table_row(out, "partitions revoked")
    assert coop_revoked < eager_revoked
    eager_pause, coop_pause = _table_row(out, "longest pause of kept partitions (s)")
    if broker == "tansu":
        # Tansu's rebalances take seconds, so an eager one stops every partition far
        # longer than records are apart. Kafka's take about 0.1 s, as long as the gap
        # between two records of a partition at the quick demo's rate on a busy machine
        # (0.14 s eager against 0.16 s cooperative was seen): there the revocations above
        # are the difference, and docs/demo.md says so.
        assert coop_pause <= eager_pause
    # Duplicates are shown (the row must parse) but not asserted here: no duplicates on a
    # graceful hand-over is the Consumer's promise, checked by its own integration tests.
    _table_row(out, "duplicates")
    assert _table_row(out, "records lost") == (0, 0)
    eager_records, coop_records = _table_row(out, "records processed")
    assert eager_records > 0
    assert coop_records > 0
    assert "range: partition ownership" in out
    assert "cooperative-sticky: partition ownership" in out
    assert (TANSU_NOTE in out) == (broker == "tansu")


@pytest.mark.integration
@pytest.mark.slow
def _default_sigint() -> None:
    # A process started with SIGINT ignored (pytest-xdist's workers ignore it) passes
    # that on, and Python then installs no KeyboardInterrupt handler: Ctrl-C must reach
    # the demo as it would from a terminal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_demo_and_its_broker(tmp_path: Path) -> None:
    demo = subprocess.Popen(
        [sys.executable, "-m", "coopconsumer._demo", "--quick", "--no-png"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        preexec_fn=_default_sigint,
    )
    try:
        assert demo.stdout is not None
        first = demo.stdout.readline()
        found = re.search(r"\(pid (\d+)\)", first)
        assert found is not None, first
        broker_pid = int(found.group(1))
        assert _running(broker_pid)
        for line in demo.stdout:
            if "scaling to 4 members" in line:
                break
        demo.send_signal(signal.SIGINT)
        _out, err = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert demo.returncode == 130, err[-3000:]
    assert "interrupted" in err
    deadline = time.monotonic() + 15
    while _running(broker_pid):
        assert time.monotonic() < deadline, f"broker pid {broker_pid} still running"
        time.sleep(0.1)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_phase_is_settled_only_on_the_balanced_assignment() -> None:
    # The cooperative scale-out as the demo saw it: after the first round the new
    # members own nothing while the old ones still hold six partitions each. Every
    # partition has an owner, but the follow-up rebalance is still to come.
    members = ["m1", "m2", "m3", "m4"]
    recorder = Recorder(12)
    _event(recorder, 0.0, "m1", "assigned", set(range(6)), 1)
    _event(recorder, 0.0, "m2", "assigned", set(range(6, 12)), 1)
    _event(recorder, 0.0, "m3", "assigned", set(), 1)
    _event(recorder, 0.0, "m4", "assigned", set(), 1)
    assert not recorder.settled(members, settle_s=0.0)
    assert recorder.ownership(members) == "m1=6 m2=6 m3=0 m4=0"
    _event(recorder, 0.0, "m1", "revoked", {3, 4, 5}, 1)
    _event(recorder, 0.0, "m2", "revoked", {9, 10, 11}, 1)
    assert not recorder.settled(members, settle_s=0.0)  # six partitions without owner
    _event(recorder, 0.0, "m3", "assigned", {3, 4, 5}, 1)
    _event(recorder, 0.0, "m4", "assigned", {9, 10, 11}, 1)
    assert recorder.settled(members, settle_s=0.0)
    assert not recorder.settled(members, settle_s=60.0)  # callbacks not quiet yet


def test_an_unbalanced_complete_assignment_is_not_settled() -> None:
    recorder = Recorder(12)
    _event(recorder, 0.0, "a", "assigned", set(range(6)), 1)
    _event(recorder, 0.0, "b", "assigned", set(range(6, 9)), 1)
    _event(recorder, 0.0, "c", "assigned", set(range(9, 12)), 1)
    assert not recorder.settled(["a", "b", "c"], settle_s=0.0)
    assert not recorder.settled(["a", "b"], settle_s=0.0)  # b holds 3 of its 6
    recorder2 = Recorder(10)
    _event(recorder2, 0.0, "a", "assigned", set(range(4)), 1)
    _event(recorder2, 0.0, "b", "assigned", set(range(4, 7)), 1)
    _event(recorder2, 0.0, "c", "assigned", set(range(7, 10)), 1)
    assert recorder2.settled(["a", "b", "c"], settle_s=0.0)  # 4/3/3: within one
