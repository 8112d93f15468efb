"""Fixtures for integration tests against real Kafka-protocol brokers.

* ``broker`` (session scope): parametrized over the broker kinds a test runs on:
  Apache Kafka (id ``kafka``) unless the test or its module names others with
  ``@pytest.mark.brokers("kafka", "tansu", ...)`` (docs/testing.md, "Which broker a
  test uses"); only the external cluster (id ``external``) when
  ``COOPCONSUMER_BOOTSTRAP=host:port`` is set. Shared by every test in the session:
  isolate with ``unique_topic``/``unique_group`` and never inject faults through it.
* ``kafka_broker`` (session scope, from tests/conftest.py): Apache Kafka only, one
  combined KRaft node; the default for new integration tests (docs/testing.md, "Which
  broker a test uses").
* ``tansu_broker`` (session scope): Tansu only, for tests of Tansu-specific behaviour.
* ``proxied`` (module scope): Tansu behind coopconsumer's transactions proxy
  (``embedded_broker("tansu", transactions=True)``), for fencing and fault injection.
* ``mock_broker`` (function scope): a fresh 3-broker mock cluster per test, for fault
  injection; nothing a test injects leaks into the next one.
* ``unique_topic`` / ``unique_group`` (function scope): names no other test uses.

The kind-specific fixtures skip (naming ``COOPCONSUMER_BOOTSTRAP``) when an external
cluster was requested. Embedded brokers start with
``group.initial.rebalance.delay.ms=0`` on the mock (Tansu has no such delay), as test
setups of Kafka usually do; the mock's default is 3000.

Every test under this directory gets the ``integration`` marker.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from coopconsumer.testing import (
    BOOTSTRAP_ENV,
    EmbeddedBroker,
    TransactionalBroker,
    embedded_broker,
    external_broker,
    unique_name,
)

EXTERNAL_BOOTSTRAP = os.environ.get(BOOTSTRAP_ENV, "").strip()
#: The kinds a ``broker`` test runs on when it names none (``@pytest.mark.brokers``).
DEFAULT_KINDS: tuple[str, ...] = ("kafka",)
KINDS: tuple[str, ...] = ("kafka", "tansu", "mock")
_SKIP_EXTERNAL = f"{BOOTSTRAP_ENV} is set: integration tests use only the external cluster"
#: Broker count of the mock clusters the fixtures start (several, like a real cluster,
#: so the group coordinator is not always the bootstrap broker).
MOCK_BROKERS = 3

_HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "brokers(*kinds): the broker kinds ('kafka', 'tansu', 'mock') the `broker` fixture "
        "runs the test on (default: kafka)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "broker" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("brokers")
    kinds = list(marker.args) if marker is not None else list(DEFAULT_KINDS)
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: brokers{tuple(kinds)}")
    if EXTERNAL_BOOTSTRAP:
        kinds = ["external"]
    metafunc.parametrize("broker", kinds, ids=kinds, indirect=True, scope="session")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.resolve().is_relative_to(_HERE):
            item.add_marker(pytest.mark.integration)


def _start(kind: str) -> Iterator[EmbeddedBroker]:
    if kind == "tansu":
        with embedded_broker("tansu") as broker:
            yield broker
    else:
        with embedded_broker("mock", num_brokers=MOCK_BROKERS) as broker:
            broker.set_group_initial_rebalance_delay_ms(0)
            yield broker


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
    """A running broker of the kind the test is parametrized with (or the external
    cluster), shared by the session."""
    kind: str = request.param
    if kind == "external":
        yield external_broker(EXTERNAL_BOOTSTRAP)
        return
    if kind == "kafka":  # one Kafka JVM per worker, shared with ``kafka_broker``
        yield request.getfixturevalue("kafka_broker")
        return
    yield from _start(kind)


@pytest.fixture(scope="session")
def tansu_broker() -> Iterator[EmbeddedBroker]:
    """A Tansu broker shared by the session (skipped when an external cluster is set)."""
    if EXTERNAL_BOOTSTRAP:
        pytest.skip(_SKIP_EXTERNAL)
    yield from _start("tansu")


@pytest.fixture(scope="module")
def proxied() -> Iterator[TransactionalBroker]:
    """Tansu behind the transactions proxy, which fences TxnOffsetCommit by generation,
    member id and group instance id as Kafka does (docs/testing.md); one per module."""
    if EXTERNAL_BOOTSTRAP:
        pytest.skip(_SKIP_EXTERNAL)
    with embedded_broker("tansu", transactions=True) as broker:
        assert isinstance(broker, TransactionalBroker)
        yield broker


@pytest.fixture
def mock_broker() -> Iterator[EmbeddedBroker]:
    """A fresh 3-broker librdkafka mock cluster for one fault-injection test."""
    if EXTERNAL_BOOTSTRAP:
        pytest.skip(f"fault injection needs the mock cluster; {_SKIP_EXTERNAL}")
    yield from _start("mock")


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """A topic name derived from the test's name, unique to this test run."""
    return unique_name(f"t-{request.node.name}")


@pytest.fixture
def unique_group(request: pytest.FixtureRequest) -> str:
    """A consumer group id derived from the test's name, unique to this test run."""
    return unique_name(f"g-{request.node.name}")
