"""The package's import directions (docs/architecture.md), checked by walking every AST.

_protocol <- _member <- _io <- _consumer_core <- _consumer and aio (inside
_member: the classic/ and kip848/ wings on the shared base, neither importing the
other), and _protocol <- _session <- _io; the sans-I/O layers and the exactly-once loop
never import blocking modules, and confluent_kafka is imported only by the fetcher and
the producer in _io.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "src" / "coopconsumer"

BLOCKING = {"socket", "selectors", "threading", "time", "asyncio", "subprocess", "confluent_kafka"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, *, at_run_time: bool = False) -> Iterator[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved);
    ``at_run_time``: not those under ``if TYPE_CHECKING:`` (names for the checker only)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    checker_only: set[int] = set()
    if at_run_time:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                checker_only.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    for node in ast.walk(tree):
        if id(node) in checker_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: -(node.level - 1)]
                prefix = ".".join(base)
                yield f"{prefix}.{node.module}" if node.module else prefix
            elif node.module:
                yield node.module


def _modules(subpackage: str) -> list[Path]:
    root = PKG / subpackage
    return sorted(root.rglob("*.py")) if root.is_dir() else []


def _top(name: str) -> str:
    return name.split(".")[0]


@pytest.mark.parametrize("path", _modules("_protocol"), ids=lambda p: p.name)
def test_protocol_imports_only_the_errors_leaf(path: Path) -> None:
    for name in _imports(path):
        if name.startswith("coopconsumer"):
            assert name.startswith(("coopconsumer._protocol", "coopconsumer._errors")), name
        assert _top(name) not in BLOCKING, name


@pytest.mark.parametrize("path", _modules("_member"), ids=lambda p: p.name)
def test_coordinator_is_sans_io(path: Path) -> None:
    for name in _imports(path):
        assert _top(name) not in BLOCKING, name
        assert not name.startswith(("coopconsumer._io", "coopconsumer._consumer")), name


_WINGS = ("coopconsumer._member.classic", "coopconsumer._member.kip848")


def test_the_member_has_two_wings_on_a_shared_base() -> None:
    # Both wings exist, so the two tests below walk something.
    assert _modules("_member/classic")
    assert _modules("_member/kip848")


@pytest.mark.parametrize(
    "path",
    [p for p in _modules("_member") if p.parent == PKG / "_member"],
    ids=lambda p: p.name,
)
def test_the_shared_member_base_imports_no_wing(path: Path) -> None:
    if path.name == "__init__.py":
        return  # the package face re-exports the classic member (GroupMember, ...)
    for name in _imports(path):
        assert not name.startswith(_WINGS), name


@pytest.mark.parametrize(
    ("path", "other"),
    [(p, _WINGS[1]) for p in _modules("_member/classic")]
    + [(p, _WINGS[0]) for p in _modules("_member/kip848")],
    ids=lambda v: v.name if isinstance(v, Path) else v.rpartition(".")[2],
)
def test_a_member_wing_never_imports_the_other(path: Path, other: str) -> None:
    for name in _imports(path):
        assert not name.startswith(other), name


#: What the broker session may build on: the wire protocol, the errors, the SASL
#: mechanisms and the table kit. ``ssl`` is allowed (not in BLOCKING): the session runs
#: TLS over ``ssl.MemoryBIO``, which reads and writes memory only.
_SESSION_MAY_IMPORT = (
    "coopconsumer._session",
    "coopconsumer._protocol",
    "coopconsumer._errors",
    "coopconsumer._security._sasl",
    "coopconsumer._transition_table",
)


@pytest.mark.parametrize("path", _modules("_session"), ids=lambda p: p.name)
def test_session_is_sans_io_and_below_io(path: Path) -> None:
    for name in _imports(path):
        assert _top(name) not in BLOCKING, name
        if name.startswith("coopconsumer"):
            assert name.startswith(_SESSION_MAY_IMPORT), name


@pytest.mark.parametrize(
    "module", ["_transition_table.py", "_security/_sasl.py", "_security/_settings.py"]
)
def test_the_table_kit_the_sasl_mechanisms_and_the_security_settings_are_leaves(
    module: str,
) -> None:
    for name in _imports(PKG / module):
        assert _top(name) not in BLOCKING | {"ssl"}, name
        if name.startswith("coopconsumer"):
            assert name == "coopconsumer._errors", name


#: The security package's I/O edge: the TLS context (reads certificate files) and the
#: credentials (HTTP to an OIDC token endpoint, a token refresh thread). Everything
#: else of the package is pure, so the broker session can run the SASL mechanisms.
_SECURITY_IO = ("coopconsumer._security._tls", "coopconsumer._security._credentials")


def test_the_security_package_face_loads_nothing_that_blocks() -> None:
    for name in _imports(PKG / "_security" / "__init__.py"):
        assert name.startswith("coopconsumer._security._settings"), name


@pytest.mark.parametrize("path", _modules("_security"), ids=lambda p: p.name)
def test_the_security_package_sits_below_session_and_io(path: Path) -> None:
    for name in _imports(path):
        assert _top(name) not in {"selectors", "asyncio", "subprocess", "confluent_kafka"}, name
        if name.startswith("coopconsumer"):
            assert name.startswith(("coopconsumer._errors", "coopconsumer._security")), name
        if _module_name(path) not in _SECURITY_IO:
            assert _top(name) not in BLOCKING | {"ssl"}, name


def test_only_the_wire_client_uses_the_security_io_edge() -> None:
    importers = {
        _module_name(path)
        for path in PKG.rglob("*.py")
        if not _module_name(path).startswith(("coopconsumer._security", "coopconsumer.testing"))
        and any(name.startswith(_SECURITY_IO) for name in _imports(path))
    }
    assert importers
    assert all(name.startswith("coopconsumer._io") for name in importers), importers


def test_the_transaction_loop_is_sans_io() -> None:
    # The exactly-once loop decides; the threaded and the asyncio processors perform
    # what it asks (docs/exactly-once.md, "One core, two loops"). The record and header
    # types it names for the checker come from _io, at no run-time cost.
    for name in _imports(PKG / "_transaction_loop.py", at_run_time=True):
        assert _top(name) not in BLOCKING, name
        if name.startswith("coopconsumer"):
            assert name in ("coopconsumer._errors", "coopconsumer._types"), name


# The shared GC pause counts concurrent passes (two consumers leading at once) under a
# lock; it starts no thread and blocks on nothing.
_ASSIGNOR_LOCK_USERS = {"_gc.py": {"threading"}}


@pytest.mark.parametrize("path", _modules("assignors"), ids=lambda p: p.name)
def test_assignors_are_pure(path: Path) -> None:
    allowed = _ASSIGNOR_LOCK_USERS.get(path.name, set())
    for name in _imports(path):
        assert _top(name) not in BLOCKING - allowed, name
        assert not name.startswith(("coopconsumer._io", "coopconsumer._member")), name


def test_errors_module_is_a_leaf() -> None:
    for name in _imports(PKG / "_errors.py"):
        assert not name.startswith("coopconsumer"), name


def test_only_the_fetcher_and_producer_import_confluent_kafka() -> None:
    # coopconsumer.testing is a test-support module (it drives the brokers with
    # confluent-kafka's admin client and the mock cluster) and coopconsumer._demo an
    # application that needs a producer; the library proper has three, all in _io: the
    # fetcher, the idempotent producer and the transactional producer.
    importers = {
        _module_name(path)
        for path in PKG.rglob("*.py")
        if not _module_name(path).startswith(("coopconsumer.testing", "coopconsumer._demo"))
        and any(_top(name) == "confluent_kafka" for name in _imports(path))
    }
    assert importers <= {
        "coopconsumer._io._fetcher",
        "coopconsumer._io._producer",
        "coopconsumer._io._txn_producer",
    }


#: What the consumer core may build on: everything below the facades.
_CORE_MAY_NOT_IMPORT = (
    "coopconsumer._consumer",  # the sync facade (not coopconsumer._consumer_core)
    "coopconsumer.aio",
    "coopconsumer._transactional",
    "coopconsumer.spark",
)


@pytest.mark.parametrize("path", _modules("_consumer_core"), ids=lambda p: p.name)
def test_the_consumer_core_sits_below_both_facades(path: Path) -> None:
    # Consumer and AsyncConsumer compose the core; it never imports either of them,
    # nor confluent_kafka (records are the fetcher's).
    for name in _imports(path):
        assert _top(name) != "confluent_kafka", name
        below = name == "coopconsumer._consumer_core" or name.startswith(
            "coopconsumer._consumer_core."
        )
        assert below or not name.startswith(_CORE_MAY_NOT_IMPORT), name


def test_the_consumer_core_is_walked() -> None:
    assert {p.name for p in _modules("_consumer_core")} >= {"_core.py", "_positions.py"}


@pytest.mark.parametrize("path", _modules("_io"), ids=lambda p: p.name)
def test_io_never_imports_the_consumer_above_it(path: Path) -> None:
    for name in _imports(path):
        assert not name.startswith(
            ("coopconsumer._consumer", "coopconsumer.aio", "coopconsumer._transactional")
        ), name


def test_the_async_facade_composes_the_core_and_subclasses_no_consumer() -> None:
    # aio reaches the consumer's decisions through the core only, and its wire client
    # through the factory beside the member's: it imports nothing of the sync facade.
    for path in _modules("aio"):
        assert "coopconsumer._consumer" not in set(_imports(path)), path.name
