"""Fixtures of the asyncio consumer's tests.

The unit tests reuse the wire client's fake broker (tests/io); the integration tests
run on both embedded brokers (``kafka``, session scope), or on the cluster named by
``COOPCONSUMER_BOOTSTRAP``, and get the ``integration`` marker.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from coopconsumer.testing import BOOTSTRAP_ENV, EmbeddedBroker, embedded_broker, external_broker

_HERE = Path(__file__).resolve().parent
# The fake broker of the wire client's unit tests.
sys.path.insert(0, str(_HERE.parent / "io"))

EXTERNAL = os.environ.get(BOOTSTRAP_ENV, "").strip()
_KINDS = ["external"] if EXTERNAL else ["tansu", "mock"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.resolve().is_relative_to(_HERE) and "kafka" in getattr(
            item, "fixturenames", ()
        ):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", params=_KINDS, ids=_KINDS)
def kafka(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
    """A broker of each kind, shared by the session (isolate with unique names)."""
    if request.param == "external":
        yield external_broker(EXTERNAL)
        return
    if request.param == "tansu":
        with embedded_broker("tansu") as broker:
            yield broker
        return
    with embedded_broker("mock", num_brokers=3) as broker:
        broker.set_group_initial_rebalance_delay_ms(0)
        yield broker
