"""The consume job's configuration (``spark._consume._job_config``), checked on the driver
before any Spark task starts: parsed once, its assignors built once, and the settings
the job fills in or refuses. No Spark, no broker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from coopconsumer import ConfigurationError
from coopconsumer._config import ConsumerConfig
from coopconsumer.assignors import CooperativeStickyAssignor
from coopconsumer.spark import _consume

BASE: dict[str, object] = {"bootstrap.servers": "localhost:9092", "group.id": "g"}


class CountingAssignor(CooperativeStickyAssignor):
    built = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        type(self).built += 1


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[Mapping[str, object]]:
    """Every mapping ``ConsumerConfig.from_mapping`` is asked to parse."""
    seen: list[Mapping[str, object]] = []
    original = ConsumerConfig.from_mapping.__func__  # type: ignore[attr-defined]

    def counting(cls: type[ConsumerConfig], settings: Mapping[str, object]) -> ConsumerConfig:
        seen.append(settings)
        parsed: ConsumerConfig = original(cls, settings)
        return parsed

    monkeypatch.setattr(ConsumerConfig, "from_mapping", classmethod(counting))
    return seen


def test_the_job_parses_its_config_once_and_builds_its_assignors_once(
    parses: list[Mapping[str, object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(CountingAssignor, "built", 0)
    merged, parsed = _consume._job_config(
        {**BASE, "partition.assignment.strategy": [CountingAssignor]}
    )
    assert len(parses) == 1
    assert CountingAssignor.built == 1
    assert merged["partition.assignment.strategy"] == [CountingAssignor]
    assert not parsed.kip848


def test_the_filled_in_assignor_is_built_once_in_one_parse(
    parses: list[Mapping[str, object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[object] = []
    init = CooperativeStickyAssignor.__init__

    def counting_init(self: CooperativeStickyAssignor, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(CooperativeStickyAssignor, "__init__", counting_init)
    _consume._job_config(BASE)
    assert len(parses) == 1
    assert len(built) == 1


def test_the_job_fills_in_its_settings_and_hands_the_members_names() -> None:
    merged, parsed = _consume._job_config(BASE)
    assert merged == {
        **BASE,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
    }
    assert parsed.group_id == "g"
    assert not parsed.enable_auto_commit
    assert parsed.auto_offset_reset == "earliest"


def test_the_kip848_job_gets_no_assignor() -> None:
    merged, parsed = _consume._job_config({**BASE, " group.protocol": " Consumer "})
    assert parsed.kip848
    assert "partition.assignment.strategy" not in merged
    with pytest.raises(ConfigurationError, match=r"cannot be set with group\.protocol=consumer"):
        _consume._job_config(
            {**BASE, "group.protocol": "consumer", "partition.assignment.strategy": "range"}
        )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"partition.assignment.strategy": "range"}, "needs cooperative rebalancing"),
        ({"partition.assignment.strategy": "roundrobin"}, "needs cooperative rebalancing"),
        ({"partition_assignment_strategy": "range"}, "unknown configuration key"),
        # None is the library's default (range first): not cooperative.
        ({"partition.assignment.strategy": None}, "needs cooperative rebalancing"),
        ({"partition.assignment.strategy": "no-such-assignor"}, "no-such-assignor"),
        ({"enable.auto.commit": True}, "enable.auto.commit must be false"),
        ({"auto.offset.reset": "latest"}, "must be 'earliest'"),
        ({"group.id": None}, "group.id"),
        ({"group.protocol": "nonsense"}, "group.protocol"),
    ],
)
def test_the_job_refuses_what_it_cannot_run(extra: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        _consume._job_config({**BASE, **extra})


def test_a_long_running_job_takes_any_offset_reset() -> None:
    _, parsed = _consume._job_config({**BASE, "auto.offset.reset": "latest"}, bounded=False)
    assert parsed.auto_offset_reset == "latest"


def test_cooperative_assignors_the_user_names_are_kept() -> None:
    merged, _ = _consume._job_config(
        {**BASE, " partition.assignment.strategy": "cooperative-sticky"}
    )
    assert merged[" partition.assignment.strategy"] == "cooperative-sticky"
    assert "partition.assignment.strategy" not in merged
