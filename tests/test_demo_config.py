"""The demo's --config option (issue 10): validated without echoing values, and only
meaningful with --bootstrap."""

from __future__ import annotations

import argparse

import pytest

from coopconsumer._demo._demo_cli import _config_item, run_demo


def test_config_items_split_once_and_never_echo_the_value() -> None:
    assert _config_item("sasl.password=a=b") == ("sasl.password", "a=b")
    with pytest.raises(argparse.ArgumentTypeError) as info:
        _config_item("hunter2")
    assert "hunter2" not in str(info.value)


def test_config_needs_bootstrap(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_demo(["--config", "sasl.password=hunter2"]) == 2
    captured = capsys.readouterr()
    assert "--config needs --bootstrap" in captured.err
    assert "hunter2" not in captured.out + captured.err
