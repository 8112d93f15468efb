"""Fixtures of the asyncio consumer's tests.

The unit tests reuse the wire client's fake broker (tests/io); the integration tests
run on Apache Kafka (``kafka``, session scope), or on the cluster named by
``COOPCONSUMER_BOOTSTRAP``, and get the ``integration`` marker.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from coopconsumer.testing import BOOTSTRAP_ENV, EmbeddedBroker, external_broker

_HERE = Path(__file__).resolve().parent
# The fake broker of the wire client's unit tests.
sys.path.insert(0, str(_HERE.parent / "io"))

EXTERNAL = os.environ.get(BOOTSTRAP_ENV, "").strip()
#: Apache Kafka: the asyncio consumer's integration tests inject no faults, so the
#: stand-ins add nothing here (docs/testing.md, "Which broker a test uses").
_KINDS = ["external"] if EXTERNAL else ["kafka"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.resolve().is_relative_to(_HERE) and "kafka" in getattr(
            item, "fixturenames", ()
        ):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", params=_KINDS, ids=_KINDS)
def kafka(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
    """The broker of the asyncio integration tests, shared by the session (isolate with
    unique names): tests/conftest.py's ``kafka_broker``, or the external cluster."""
    if request.param == "external":
        yield external_broker(EXTERNAL)
        return
    broker: EmbeddedBroker = request.getfixturevalue("kafka_broker")
    yield broker
