"""Project-wide pytest configuration: Hypothesis profiles.

The "ci" profile is loaded unless ``HYPOTHESIS_PROFILE`` names another: no per-example
deadline (the machine is shared, so timing is noise) and modest example counts so the
whole suite stays well under the project's time budget. "dev" is quicker still,
"thorough" is for hunting bugs locally.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("dev", deadline=None, max_examples=25)
settings.register_profile("thorough", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


_HERE = Path(__file__).resolve().parent
#: Tests that start a Spark session: kept on one xdist worker so the session-scoped
#: SparkSession (a JVM) starts once, not once per worker.
_SPARK = (_HERE / "integration" / "spark", _HERE / "test_examples.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path.resolve()
        if any(path == p or path.is_relative_to(p) for p in _SPARK) and (
            path.name != "test_examples.py" or "spark" in item.name
        ):
            item.add_marker(pytest.mark.xdist_group("spark"))
