"""Turning ``replica.assignor`` into a ``ReplicaAssignor``: a built-in name, an import
path (``module:Class`` or ``module.Class``), a class or an instance.

Fails with ``ConfigurationError`` when the client is built, before anything is sent.
Imports ``importlib`` to load user assignors; no I/O beyond that import.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import TypeAlias

from .._errors import ConfigurationError
from ._balanced import BalancedReplicaAssignor
from ._kraft import KRaftReplicaAssignor
from ._replica_assignor import ReplicaAssignor
from ._zookeeper import ZooKeeperReplicaAssignor

__all__ = ["BUILTIN_REPLICA_ASSIGNORS", "ReplicaAssignorSpec", "load_replica_assignor"]

#: The built-in assignors by name; ``default`` is the default one, ``kraft``.
BUILTIN_REPLICA_ASSIGNORS: dict[str, Callable[[], ReplicaAssignor]] = {
    "kraft": KRaftReplicaAssignor,
    "default": KRaftReplicaAssignor,
    "zookeeper": ZooKeeperReplicaAssignor,
    "balanced": BalancedReplicaAssignor,
}

#: What ``replica.assignor`` may be.
ReplicaAssignorSpec: TypeAlias = str | type[ReplicaAssignor] | ReplicaAssignor

_KEY = "replica.assignor"


def load_replica_assignor(spec: ReplicaAssignorSpec) -> ReplicaAssignor:
    """The assignor ``spec`` names; a class is instantiated with no arguments, an
    instance is used as is.

    Raises ``ConfigurationError`` for an empty or unknown name (listing the built-ins),
    a module that cannot be imported, a missing attribute, something that is not a
    concrete ``ReplicaAssignor`` subclass, or a constructor that raises.
    """
    if isinstance(spec, ReplicaAssignor):
        return spec
    if isinstance(spec, type):
        return _instantiate(spec, repr(spec))
    if not isinstance(spec, str):
        raise ConfigurationError(
            f"{_KEY} must be a name, 'module:Class', a ReplicaAssignor class or instance; "
            f"got {type(spec).__name__}"
        )
    text = spec.strip()
    builtin = BUILTIN_REPLICA_ASSIGNORS.get(text)
    if builtin is not None:
        return builtin()
    if ":" in text:
        module_name, _, attr = text.partition(":")
    elif "." in text:
        module_name, _, attr = text.rpartition(".")
    else:
        known = ", ".join(sorted(BUILTIN_REPLICA_ASSIGNORS))
        raise ConfigurationError(
            f"{_KEY}: unknown assignor {text!r}; use a built-in ({known}) or 'module:Class'"
        )
    if not module_name or not attr:
        raise ConfigurationError(f"{_KEY}: {text!r} is not 'module:Class'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigurationError(
            f"{_KEY}: cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        target = getattr(module, attr)
    except AttributeError:
        raise ConfigurationError(
            f"{_KEY}: module {module_name!r} has no attribute {attr!r}"
        ) from None
    if not isinstance(target, type):
        raise ConfigurationError(f"{_KEY}: {text!r} is not a class")
    return _instantiate(target, text)


def _instantiate(cls: type, what: str) -> ReplicaAssignor:
    if not issubclass(cls, ReplicaAssignor):
        raise ConfigurationError(f"{_KEY}: {what} is not a ReplicaAssignor subclass")
    if inspect.isabstract(cls):
        raise ConfigurationError(f"{_KEY}: {what} is abstract (implement assign())")
    try:
        return cls()
    except Exception as exc:
        raise ConfigurationError(f"{_KEY}: {what}() raised {type(exc).__name__}: {exc}") from exc
