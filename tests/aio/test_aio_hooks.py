"""The asyncio host's coupling to the sync classes it builds on stays declared.

``LoopDriver`` and ``LoopKafkaClient`` subclass ``Driver`` and ``KafkaClient`` and
override or use some of their protected names. Each base class lists that surface in
``_ASYNCIO_HOST_SURFACE`` (docs/architecture.md, "The asyncio host's hooks"). Read from
the source: every name aio overrides or uses is listed, and every listed name still
exists in the base, so a refactor of a base class that renames a hook fails here
rather than leaving an override that nothing calls any more.

The consumer itself is not subclassed: ``Consumer`` and ``AsyncConsumer`` both compose a
``ConsumerCore`` and use only its public names (checked here too).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

from coopconsumer import _consumer as sync_consumer
from coopconsumer._io._client import KafkaClient
from coopconsumer._io._member_driver import Driver
from coopconsumer.aio import _consumer as aio_consumer
from coopconsumer.aio import _listener_tasks
from coopconsumer.aio._loop_client import LoopKafkaClient
from coopconsumer.aio._loop_driver import LoopDriver

CASES = [(LoopDriver, Driver), (LoopKafkaClient, KafkaClient)]


def _class_tree(cls: type) -> ast.ClassDef:
    node = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(node, ast.ClassDef)
    return node


def _self_attributes(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names assigned as ``self.x``, names read or called as ``self.x``)."""
    assigned: set[str] = set()
    used: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            (assigned if isinstance(node.ctx, ast.Store) else used).add(node.attr)
    return assigned, used


def _defines(cls: type) -> set[str]:
    """Methods, class attributes and ``self.x`` assignments of ``cls`` itself."""
    assigned, _ = _self_attributes(_class_tree(cls))
    return set(vars(cls)) | assigned


def _uses_of(sub: type, base: type) -> set[str]:
    """What ``sub`` overrides of ``base``, and the protected names of ``base`` it uses."""
    own = set(vars(sub)) - {"__module__", "__doc__", "__qualname__", "__dict__"}
    base_names = set().union(*(_defines(b) for b in base.__mro__ if b is not object))
    overridden = {name for name in own if name in base_names and not name.startswith("__")}
    assigned, used = _self_attributes(_class_tree(sub))
    protected = {
        name
        for name in used | assigned
        if name.startswith("_") and not name.startswith("__") and name in base_names
    }
    return overridden | (protected - own) | (protected & assigned)


#: How the facades and the listener tasks name the core they compose.
_CORE_NAMES = {"core", "self._core", "self._core.positions", "core.positions"}


def _core_uses(module_file: str) -> set[str]:
    """Protected names a module reads or changes on its ``ConsumerCore`` (or on the
    core's positions)."""
    tree = ast.parse(Path(module_file).read_text())
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and ast.unparse(node.value) in _CORE_NAMES
    }


@pytest.mark.parametrize(
    "module", [sync_consumer, aio_consumer, _listener_tasks], ids=lambda m: m.__name__
)
def test_the_facades_use_only_the_cores_public_names(module: object) -> None:
    used = _core_uses(module.__file__)  # type: ignore[attr-defined]
    assert used == set(), f"{module} reaches into the consumer core: {sorted(used)}"


def test_the_core_check_sees_a_protected_name(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text("def f(core):\n    return core._fatal, self._core.positions._fetch_starts\n")
    assert _core_uses(str(path)) == {"_fatal", "_fetch_starts"}


@pytest.mark.parametrize(("sub", "base"), CASES, ids=lambda c: c.__name__)
def test_every_name_aio_relies_on_is_declared_by_the_base(sub: type, base: type) -> None:
    declared: frozenset[str] = base._ASYNCIO_HOST_SURFACE  # type: ignore[attr-defined]
    used = _uses_of(sub, base)
    undeclared = sorted(used - declared)
    assert undeclared == [], (
        f"{sub.__name__} overrides or uses {undeclared} of {base.__name__}: add them to "
        f"{base.__name__}._ASYNCIO_HOST_SURFACE (and docs/architecture.md) or stop"
    )


@pytest.mark.parametrize(("sub", "base"), CASES, ids=lambda c: c.__name__)
def test_every_declared_hook_still_exists_in_the_base(sub: type, base: type) -> None:
    declared: frozenset[str] = base._ASYNCIO_HOST_SURFACE  # type: ignore[attr-defined]
    gone = sorted(declared - _defines(base))
    assert gone == [], f"{base.__name__} no longer has {gone}; aio relies on them"


def test_the_check_sees_an_override_of_an_undeclared_method() -> None:
    class Sneaky(Driver):
        def _run(self) -> None:  # the thread's body: not part of the surface
            pass

    assert "_run" in _uses_of(Sneaky, Driver)
    assert "_run" not in Driver._ASYNCIO_HOST_SURFACE
