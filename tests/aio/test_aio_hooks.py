"""The asyncio host's coupling to the sync classes it builds on stays declared.

``HostedConsumer``, ``LoopDriver`` and ``LoopKafkaClient`` subclass ``Consumer``,
``Driver`` and ``KafkaClient`` and override or use some of their protected names;
``AsyncConsumer`` drives a ``HostedConsumer``. Each base class lists that surface in
``_ASYNCIO_HOST_SURFACE`` (docs/architecture.md, "The asyncio host's hooks"). Read from
the source: every name aio overrides or uses is listed, and every listed name still
exists in the base, so a refactor of a base class that renames a hook fails here
rather than leaving an override that nothing calls any more.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

from coopconsumer._consumer import Consumer
from coopconsumer._io._client import KafkaClient
from coopconsumer._io._member_driver import Driver
from coopconsumer.aio import _consumer as aio_consumer
from coopconsumer.aio._hosted import HostedConsumer
from coopconsumer.aio._loop_client import LoopKafkaClient
from coopconsumer.aio._loop_driver import LoopDriver

CASES = [(HostedConsumer, Consumer), (LoopDriver, Driver), (LoopKafkaClient, KafkaClient)]


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


def _facade_uses() -> set[str]:
    """Protected names ``AsyncConsumer`` reads on its ``HostedConsumer``."""
    tree = ast.parse(Path(aio_consumer.__file__).read_text())
    hosted = {"hosted", "self._hosted"}
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and ast.unparse(node.value) in hosted
    }


@pytest.mark.parametrize(("sub", "base"), CASES, ids=lambda c: c.__name__)
def test_every_name_aio_relies_on_is_declared_by_the_base(sub: type, base: type) -> None:
    declared: frozenset[str] = base._ASYNCIO_HOST_SURFACE  # type: ignore[attr-defined]
    used = _uses_of(sub, base)
    if base is Consumer:
        used |= _facade_uses() - set(vars(HostedConsumer)) - {"_init_async", "_listener_error"}
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
