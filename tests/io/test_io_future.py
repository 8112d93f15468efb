"""PendingRequest: completion, errors, callbacks (no sockets)."""

from __future__ import annotations

from typing import Any

import pytest

from coopconsumer._errors import BrokerConnectionError
from coopconsumer._io import PendingRequest
from coopconsumer._protocol.messages import HeartbeatRequest, HeartbeatResponse


def pending() -> PendingRequest[HeartbeatResponse]:
    return PendingRequest(HeartbeatRequest(group_id="g"), node_id=1, broker="b:1", deadline=0.0)


def test_result_before_done_is_a_usage_error() -> None:
    future = pending()
    assert not future.done()
    with pytest.raises(RuntimeError, match="not done"):
        future.result()
    with pytest.raises(RuntimeError, match="not done"):
        future.exception()
    assert future.api_key == 12
    assert future.api_name == "Heartbeat"
    assert "pending" in repr(future)


def test_success_and_first_completion_wins() -> None:
    future = pending()
    response = HeartbeatResponse(error_code=0)
    assert future._set_result(response)
    assert not future._set_exception(BrokerConnectionError("late"))
    assert future.succeeded()
    assert not future.failed()
    assert future.result() is response
    assert future.exception() is None


def test_failure_raises_the_typed_error() -> None:
    future = pending()
    error = BrokerConnectionError("gone", broker="b:1")
    future._set_exception(error)
    assert future.failed()
    with pytest.raises(BrokerConnectionError) as info:
        future.result()
    assert info.value is error
    assert "BrokerConnectionError" in repr(future)


def test_callbacks_run_once_when_the_owner_runs_them() -> None:
    future = pending()
    calls: list[PendingRequest[Any]] = []
    future.add_done_callback(calls.append)
    future._set_result(HeartbeatResponse())
    assert calls == []  # completion alone does not call back: the owner's poll() does
    future._run_callbacks()
    future._run_callbacks()
    assert calls == [future]


def test_raising_callback_is_logged_and_the_rest_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    future = pending()
    calls: list[str] = []

    def boom(_: PendingRequest[Any]) -> None:
        raise ValueError("bug in callback")

    future.add_done_callback(boom)
    future.add_done_callback(lambda f: calls.append("after"))
    future._set_result(HeartbeatResponse())
    future._run_callbacks()
    assert calls == ["after"]
    assert "bug in callback" in caplog.text
