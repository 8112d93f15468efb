"""The consume job's control channel (``coopconsumer.spark._control``) on loopback, no
Spark: members say hello and report, the driver's board tracks each member attempt's
state, a stop request reaches members connected before and after it, a connection
without the job's token is refused, and a member that cannot reach the driver keeps
going."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import pytest

from coopconsumer.spark._control import (
    ControlAddress,
    ControlClient,
    ControlServer,
    ReportBoard,
    decode_line,
    encode_line,
)
from coopconsumer.testing import free_port

PATIENCE_S = 10.0


@pytest.fixture
def server() -> Iterator[ControlServer]:
    server = ControlServer("127.0.0.1", 0, "secret-token")
    try:
        yield server
    finally:
        server.close()


def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def test_lines_round_trip_and_garbage_is_refused() -> None:
    message = {"report": {"records": 3, "rebalance_latency_max_ms": float("nan")}}
    decoded = decode_line(encode_line(message).rstrip(b"\n"))
    assert decoded["report"]["records"] == 3
    with pytest.raises(ValueError, match="not a message"):
        decode_line(b"[1, 2]")
    with pytest.raises(ValueError, match="Expecting property name"):
        decode_line(b"{not json")


def test_board_tracks_each_member_attempt() -> None:
    board = ReportBoard()
    board.hello(1, 0, now=1.0)
    board.hello(0, 0, now=1.0)
    board.report(0, 0, {"records": 5}, final=False, now=2.0)
    board.report(1, 0, {"records": 7}, final=True, now=2.0)
    board.gone(0, 0)
    board.gone(1, 0)  # finished before its connection closed: stays finished
    board.hello(0, 1, now=3.0)
    states = [(r.member, r.attempt, r.state, r.stats.get("records")) for r in board.reports()]
    assert states == [(0, 0, "gone", 5), (0, 1, "running", None), (1, 0, "finished", 7)]


def test_members_report_and_stop_reaches_them_before_and_after(server: ControlServer) -> None:
    first = ControlClient(server.address, member=0, attempt=0)
    assert first.poll() is False  # connects, the driver says "not yet"
    first.report({"records": 10})
    eventually(
        lambda: [r.stats for r in server.board.reports()] == [{"records": 10}],
        "the report arrives",
    )
    server.request_stop()
    eventually(first.poll, "the stop reaches a connected member")
    first.report({"records": 11}, final=True)
    first.close()
    eventually(
        lambda: [r.state for r in server.board.reports()] == ["finished"], "finished is recorded"
    )
    # A member whose task starts after the stop request is told at once.
    late = ControlClient(server.address, member=1, attempt=0)
    assert late.poll() is True
    late.close()
    eventually(lambda: [r.state for r in server.board.reports()][1:] == ["gone"], "late one gone")


def test_a_connection_without_the_token_is_refused(server: ControlServer) -> None:
    wrong = ControlAddress(host="127.0.0.1", port=server.address.port, token="guess")
    intruder = ControlClient(wrong, member=0, attempt=0)
    intruder.poll()
    intruder.report({"records": 1})
    time.sleep(0.3)
    assert server.board.reports() == []
    with socket.create_connection(("127.0.0.1", server.address.port), timeout=5) as raw:
        raw.sendall(b"not json at all\n")
        raw.settimeout(5)
        assert raw.recv(100) == b""  # hung up
    assert server.board.reports() == []


def test_closing_the_server_stops_connected_members(server: ControlServer) -> None:
    member = ControlClient(server.address, member=0, attempt=0)
    assert member.poll() is False
    server.close()
    eventually(member.poll, "a member whose driver hung up stops")


def test_an_unreachable_driver_does_not_stop_the_member() -> None:
    nobody = ControlAddress(host="127.0.0.1", port=free_port(), token="t")
    member = ControlClient(nobody, member=0, attempt=0)
    started = time.monotonic()
    assert member.poll() is False
    member.report({"records": 1})  # dropped, logged
    assert member.poll() is False  # no new attempt before the reconnect interval
    assert time.monotonic() - started < 2.0


def test_a_server_on_every_interface_advertises_the_given_host() -> None:
    server = ControlServer("", 0, "t", advertised_host="127.0.0.1")
    try:
        assert server.address.host == "127.0.0.1"
        member = ControlClient(server.address, member=3, attempt=1)
        assert member.poll() is False
        eventually(lambda: len(server.board.reports()) == 1, "the member is seen")
        member.close()
    finally:
        server.close()
