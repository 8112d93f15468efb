"""Project-wide pytest configuration: Hypothesis profiles.

The "ci" profile is loaded unless ``HYPOTHESIS_PROFILE`` names another: no per-example
deadline (the machine is shared, so timing is noise) and modest example counts so the
whole suite stays well under the project's time budget. "dev" is quicker still,
"thorough" is for hunting bugs locally.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from coopconsumer.testing import BOOTSTRAP_ENV, EmbeddedBroker, external_broker, kafka_cluster

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
#: Spark cluster and session (several JVMs) start once, not once per worker.
_SPARK = (_HERE / "integration" / "spark", _HERE / "test_examples.py")


def _is_spark(path: Path, name: str) -> bool:
    return any(path == p or path.is_relative_to(p) for p in _SPARK) and (
        path.name != "test_examples.py" or "spark" in name
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_spark(item.path.resolve(), item.name):
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` that puts the Spark tests in one group by their path.

    xdist's own loadgroup finds a test's group in a ``@group`` suffix that its workers
    append to ``item._nodeid``; since pytest 9.2 the node id no longer comes from that
    attribute, so the suffix never reaches the scheduler and the ``xdist_group`` mark
    above is lost: every worker would start its own Spark cluster."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

    class SparkGroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            file, _, rest = nodeid.partition("::")
            if _is_spark((config.rootpath / file).resolve(), rest):
                return "spark"
            return str(super()._split_scope(nodeid))

    return SparkGroupScheduling(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test that used Apache Kafka shows the end of each node's log."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, EmbeddedBroker) and value.kind == "kafka":
            report.sections.append((f"Kafka log: fixture {name}", value.output_tail(8000)))


#: Broker settings of the tests' Kafka on top of the launcher's test defaults: a
#: transaction left open by a killed member is aborted within about a second of its
#: timeout (Kafka checks every 10 s by default), so the exactly-once tests that kill a
#: member wait seconds, not tens of seconds, for its partitions.
KAFKA_TEST_CONFIG: dict[str, str] = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


def start_test_kafka() -> Iterator[EmbeddedBroker]:
    """One combined KRaft node of Apache Kafka with :data:`KAFKA_TEST_CONFIG`."""
    with kafka_cluster(brokers=1, broker_config=KAFKA_TEST_CONFIG) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[EmbeddedBroker]:
    """Apache Kafka (one combined KRaft node) shared by every test of a worker that
    asks for it (integration, asyncio, protocol, admin); the external cluster when
    ``COOPCONSUMER_BOOTSTRAP`` is set (docs/testing.md, "Which broker a test uses")."""
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if external:
        yield external_broker(external)
        return
    yield from start_test_kafka()
