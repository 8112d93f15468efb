"""The committed message modules are what the generator makes of Kafka's JSON specs.

``coopconsumer._protocol._generate`` reads ``common/message/*.json`` from the
``kafka-clients`` jar of the release it names (``SPEC_VERSION``); the jar comes from
``coopconsumer.testing.kafka_distribution`` (Maven Central, cached). A difference means
someone edited a generated module, or changed the generator without regenerating:

    python -m coopconsumer._protocol._generate --jar <kafka-clients jar>
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coopconsumer._protocol import _generate
from coopconsumer.testing import kafka_distribution

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spec_jar() -> Path:
    return kafka_distribution(_generate.SPEC_VERSION).jar("kafka-clients")


@pytest.mark.parametrize("module", _generate.MODULES, ids=lambda m: m.filename)
def test_regenerating_changes_nothing(spec_jar: Path, module: _generate.Module) -> None:
    committed = Path(_generate.__file__).with_name(module.filename).read_text()
    assert _generate.generate(spec_jar)[module.filename] == committed


def test_check_mode_reports_a_stale_module(spec_jar: Path, tmp_path: Path) -> None:
    assert _generate.main(["--jar", str(spec_jar), "--out", str(tmp_path)]) == 0
    assert _generate.main(["--jar", str(spec_jar), "--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "messages.py").write_text("# edited by hand\n")
    assert _generate.main(["--jar", str(spec_jar), "--out", str(tmp_path), "--check"]) == 1


def test_snake_case_names() -> None:
    assert _generate.snake("GenerationIdOrMemberEpoch") == "generation_id_or_member_epoch"
    assert _generate.snake("ZkMigrationReady") == "zk_migration_ready"
    assert _generate.snake("IsrNodes") == "isr_nodes"
