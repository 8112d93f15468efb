"""What ``import coopconsumer`` pulls in, checked in a fresh interpreter.

The package imports its exceptions eagerly and everything else on first use (PEP 562),
so a process that only imports it pays for no client. Timing is never asserted here;
``benchmarks/import_time.py`` prints it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_HEAVY = ("confluent_kafka", "coopconsumer.admin", "coopconsumer.testing")


def _modules_after(statement: str) -> set[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return set(json.loads(out))


def _loaded(modules: set[str], package: str) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(package + "."))


def test_import_coopconsumer_loads_no_client() -> None:
    modules = _modules_after("import coopconsumer")
    for package in (*_HEAVY, "coopconsumer._consumer", "coopconsumer._protocol", "attrs"):
        assert not _loaded(modules, package), package


@pytest.mark.parametrize(
    "statement",
    ["from coopconsumer import Consumer", "import coopconsumer; coopconsumer.Consumer"],
)
def test_the_consumer_path_loads_neither_admin_nor_testing_nor_confluent_kafka(
    statement: str,
) -> None:
    modules = _modules_after(statement)
    assert "coopconsumer._consumer" in modules
    for package in _HEAVY:
        assert not _loaded(modules, package), package


def test_lazy_names_resolve_to_their_definitions() -> None:
    import coopconsumer
    from coopconsumer import _consumer, _listener, _transactional, _types

    assert coopconsumer.Consumer is _consumer.Consumer
    assert coopconsumer.RebalanceListener is _listener.RebalanceListener
    assert coopconsumer.TransactionalProcessor is _transactional.TransactionalProcessor
    assert coopconsumer.TopicPartition is _types.TopicPartition
    assert set(coopconsumer.__all__) <= set(dir(coopconsumer))
    with pytest.raises(AttributeError, match="no_such_name"):
        coopconsumer.no_such_name  # noqa: B018
