"""Turning ``partition.assignment.strategy`` into assignor instances; protocol choice.

``load_assignors`` resolves names, Java class names and import paths to fresh
instances; ``select_rebalance_protocol`` picks the rebalance protocol the way Java's
``ConsumerCoordinator`` constructor does. Both fail with ``ConfigurationError`` at
construction time, before anything is started.

Imports the assignor modules and ``importlib`` (to load user assignors); no I/O
beyond importing the modules a user names, no clock.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

from .._errors import ConfigurationError
from ._api import ConsumerPartitionAssignor, RebalanceProtocol
from ._range import RangeAssignor
from ._roundrobin import RoundRobinAssignor
from ._sticky import CooperativeStickyAssignor, StickyAssignor

__all__ = ["BUILTIN_ASSIGNORS", "AssignorSpec", "load_assignors", "select_rebalance_protocol"]

#: The built-in assignors by protocol name (Java's names, so mixed groups agree).
BUILTIN_ASSIGNORS: dict[str, Callable[[], ConsumerPartitionAssignor]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}

# A configuration copied from a Java client names classes; map them to ours.
_JAVA_CLASS_NAMES: dict[str, str] = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}

_CONFIG_KEY = "partition.assignment.strategy"

#: One entry of ``partition.assignment.strategy``: a name or import path, an assignor
#: class, or an assignor instance.
AssignorSpec: TypeAlias = str | type[ConsumerPartitionAssignor] | ConsumerPartitionAssignor


def load_assignors(
    spec: AssignorSpec | Sequence[AssignorSpec],
) -> list[ConsumerPartitionAssignor]:
    """Build the assignors named by ``partition.assignment.strategy``, in order.

    ``spec`` is a comma-separated string or a sequence (list/tuple) of entries;
    whitespace around entries is ignored. Each entry is one of:

    - a built-in name: ``range``, ``roundrobin``, ``sticky``, ``cooperative-sticky``;
    - Java's class name of a built-in, e.g.
      ``org.apache.kafka.clients.consumer.CooperativeStickyAssignor``;
    - an import path to a ``ConsumerPartitionAssignor`` subclass, as ``module:Class``
      or dotted ``module.Class``;
    - a ``ConsumerPartitionAssignor`` subclass, or (in a sequence) an instance.

    Classes are instantiated with no arguments on every call, so two consumers never
    share assignor state. An instance passed in is used as is: it must belong to this
    consumer alone. The order is the preference order sent in JoinGroup.

    Raises ``ConfigurationError`` (nothing is kept) for: an empty spec or empty entry,
    an unknown name (the message lists the valid ones), a module that cannot be
    imported (the message names it and says why), a missing attribute, an object that
    is not a ``ConsumerPartitionAssignor`` subclass (or is abstract), a constructor that
    raises, an assignor without a usable ``name``, or two assignors with one name.
    """
    entries = _entries(spec)
    if not entries:
        raise ConfigurationError(
            f"{_CONFIG_KEY} is empty: name at least one assignor (built-ins: {_builtin_list()})"
        )
    assignors = [_load_one(entry) for entry in entries]

    seen: dict[str, int] = {}
    for index, assignor in enumerate(assignors):
        name = _name_of(assignor, entries[index])
        if name in seen:
            raise ConfigurationError(
                f"{_CONFIG_KEY} lists two assignors named {name!r} "
                f"(entries {seen[name] + 1} and {index + 1}: {_describe(entries[seen[name]])} "
                f"and {_describe(entries[index])}); JoinGroup protocol names must be unique"
            )
        seen[name] = index
    return assignors


def select_rebalance_protocol(
    assignors: Sequence[ConsumerPartitionAssignor],
) -> RebalanceProtocol:
    """The rebalance protocol for these assignors: the highest one *all* support.

    As Java's ``ConsumerCoordinator``: ``[cooperative-sticky, range]`` gives EAGER
    (the first bounce of the KIP-429 upgrade), ``[cooperative-sticky]`` COOPERATIVE.
    Which assignor runs is decided separately, by the group's vote on names.

    Raises ``ConfigurationError`` when ``assignors`` is empty, when they have no
    protocol in common (the message lists each assignor with what it supports), or
    when an assignor's ``supported_protocols()`` raises or returns something other
    than a non-empty collection of ``RebalanceProtocol`` values.
    """
    if not assignors:
        raise ConfigurationError(f"{_CONFIG_KEY} is empty: no assignor to choose a protocol")
    supported: list[tuple[str, frozenset[RebalanceProtocol]]] = []
    for assignor in assignors:
        label = _label(assignor)
        supported.append((label, _supported_protocols(assignor, label)))
    common = frozenset.intersection(*(protocols for _, protocols in supported))
    if not common:
        detail = "; ".join(
            f"{label} supports {', '.join(p.name for p in sorted(protocols))}"
            for label, protocols in supported
        )
        raise ConfigurationError(
            f"the assignors in {_CONFIG_KEY} have no rebalance protocol in common: {detail}"
        )
    return max(common)


def _entries(spec: object) -> list[object]:
    """Split the spec into entries; strings may hold several, comma-separated."""
    if isinstance(spec, str):
        return _split(spec) if spec.strip() else []
    if isinstance(spec, type | ConsumerPartitionAssignor):
        return [spec]
    if not isinstance(spec, Sequence) or isinstance(spec, bytes | bytearray):
        raise ConfigurationError(
            f"{_CONFIG_KEY} must be a comma-separated string or a list of names, "
            f"classes or instances, not {type(spec).__name__}"
        )
    entries: list[object] = []
    for item in spec:
        if isinstance(item, str):
            entries.extend(_split(item))
        else:
            entries.append(item)
    return entries


def _split(text: str) -> list[object]:
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise ConfigurationError(
            f"{_CONFIG_KEY} has an empty entry in {text!r} (blank name or stray comma)"
        )
    return list(names)


def _load_one(entry: object) -> ConsumerPartitionAssignor:
    if isinstance(entry, ConsumerPartitionAssignor):
        return entry
    if isinstance(entry, type):
        return _instantiate(entry, _describe(entry))
    if not isinstance(entry, str):
        raise ConfigurationError(
            f"{_CONFIG_KEY} entry {entry!r} is a {type(entry).__name__}; expected an "
            f"assignor name, an import path, a ConsumerPartitionAssignor subclass or instance"
        )
    builtin = BUILTIN_ASSIGNORS.get(entry) or BUILTIN_ASSIGNORS.get(
        _JAVA_CLASS_NAMES.get(entry, "")
    )
    if builtin is not None:
        return _call_factory(builtin, repr(entry))
    if ":" not in entry and "." not in entry:
        raise ConfigurationError(
            f"unknown assignor {entry!r} in {_CONFIG_KEY}: valid names are "
            f"{_builtin_list()}, Java's class names for them, or an import path "
            f"'module:Class' / 'module.Class' to a ConsumerPartitionAssignor subclass"
        )
    return _instantiate(_resolve(entry), repr(entry))


def _resolve(path: str) -> object:
    """Import ``module:Qual.Name`` or ``package.module.Name``."""
    if ":" in path:
        module_name, _, qualname = path.partition(":")
        if not module_name or not qualname:
            raise ConfigurationError(
                f"assignor path {path!r} in {_CONFIG_KEY} must look like 'module:Class'"
            )
        module = _import(module_name, path)
        return _getattr_chain(module, module_name, qualname.split("."), path)

    parts = path.split(".")
    if not all(parts):
        raise ConfigurationError(
            f"assignor path {path!r} in {_CONFIG_KEY} must look like 'module.Class'"
        )
    # The longest importable prefix is the module; the rest are attributes. Only a
    # "no such module" for the prefix itself moves on to a shorter prefix: any other
    # failure is a real error inside an existing module and is reported as such.
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (
                module_name == exc.name or module_name.startswith(exc.name + ".")
            ):
                continue
            raise _import_error(module_name, path, exc) from exc
        except Exception as exc:
            raise _import_error(module_name, path, exc) from exc
        return _getattr_chain(module, module_name, parts[split:], path)
    raise ConfigurationError(
        f"cannot import assignor {path!r} in {_CONFIG_KEY}: no module {parts[0]!r} "
        f"(is it installed and on sys.path?)"
    )


def _import(module_name: str, path: str) -> object:
    try:
        return importlib.import_module(module_name)
    except Exception as exc:
        raise _import_error(module_name, path, exc) from exc


def _import_error(module_name: str, path: str, exc: BaseException) -> ConfigurationError:
    return ConfigurationError(
        f"cannot import module {module_name!r} for assignor {path!r} in {_CONFIG_KEY}: "
        f"{type(exc).__name__}: {exc}"
    )


def _getattr_chain(module: object, module_name: str, names: list[str], path: str) -> object:
    obj = module
    for index, name in enumerate(names):
        owner = ".".join([module_name, *names[:index]])
        try:
            obj = getattr(obj, name)
        except AttributeError:
            raise ConfigurationError(
                f"cannot load assignor {path!r} in {_CONFIG_KEY}: {owner!r} has no "
                f"attribute {name!r}"
            ) from None
        except Exception as exc:
            # A module-level __getattr__ (lazy loading) or a descriptor may raise
            # anything; it is still a configuration error naming the path.
            raise ConfigurationError(
                f"cannot load assignor {path!r} in {_CONFIG_KEY}: reading {name!r} from "
                f"{owner!r} raised {type(exc).__name__}: {exc}"
            ) from exc
    return obj


def _instantiate(factory: object, what: str) -> ConsumerPartitionAssignor:
    if isinstance(factory, ConsumerPartitionAssignor):
        raise ConfigurationError(
            f"assignor {what} in {_CONFIG_KEY} names an instance, not a class: name the "
            f"class so that every consumer builds its own"
        )
    if not (isinstance(factory, type) and issubclass(factory, ConsumerPartitionAssignor)):
        raise ConfigurationError(
            f"assignor {what} in {_CONFIG_KEY} is not a ConsumerPartitionAssignor "
            f"subclass (got {_describe(factory)})"
        )
    if inspect.isabstract(factory):
        missing = ", ".join(sorted(getattr(factory, "__abstractmethods__", ())))
        raise ConfigurationError(
            f"assignor {what} in {_CONFIG_KEY} is abstract: it does not implement {missing}"
        )
    return _call_factory(factory, what)


def _call_factory(factory: Callable[[], object], what: str) -> ConsumerPartitionAssignor:
    # BUILTIN_ASSIGNORS is a public, mutable registry: a factory there may be any
    # callable, so its product is checked too.
    try:
        assignor = factory()
    except Exception as exc:
        raise ConfigurationError(
            f"constructing assignor {what} in {_CONFIG_KEY} raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(assignor, ConsumerPartitionAssignor):
        raise ConfigurationError(
            f"assignor {what} in {_CONFIG_KEY} built {type(assignor).__name__} {assignor!r}, not a "
            f"ConsumerPartitionAssignor"
        )
    return assignor


def _name_of(assignor: ConsumerPartitionAssignor, entry: object) -> str:
    try:
        name = assignor.name
    except Exception as exc:
        raise ConfigurationError(
            f"assignor {_describe(entry)} in {_CONFIG_KEY}: reading its name raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(name, str) or not name:
        raise ConfigurationError(
            f"assignor {_describe(entry)} in {_CONFIG_KEY} has no usable name "
            f"(got {name!r}); it must be a non-empty string"
        )
    return name


def _supported_protocols(
    assignor: ConsumerPartitionAssignor, label: str
) -> frozenset[RebalanceProtocol]:
    try:
        raw = assignor.supported_protocols()
    except Exception as exc:
        raise ConfigurationError(
            f"{label}.supported_protocols() raised {type(exc).__name__}: {exc}"
        ) from exc
    if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
        raise ConfigurationError(
            f"{label}.supported_protocols() must return a list of RebalanceProtocol, got {raw!r}"
        )
    protocols: set[RebalanceProtocol] = set()
    for value in raw:
        # Plain ints are accepted when they are a protocol id (Java uses bytes 0/1).
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(
                f"{label}.supported_protocols() returned {value!r}, not a RebalanceProtocol"
            )
        try:
            protocols.add(RebalanceProtocol(value))
        except ValueError:
            raise ConfigurationError(
                f"{label}.supported_protocols() returned unknown protocol id {value!r}"
            ) from None
    if not protocols:
        raise ConfigurationError(f"{label}.supported_protocols() returned no protocol")
    return frozenset(protocols)


def _label(assignor: object) -> str:
    try:
        name = getattr(assignor, "name", None)
    except Exception:
        name = None
    cls = type(assignor).__qualname__
    return f"assignor {name!r} ({cls})" if isinstance(name, str) else f"assignor {cls}"


def _describe(obj: object) -> str:
    if isinstance(obj, str):
        return repr(obj)
    if isinstance(obj, type):
        return f"class {obj.__module__}.{obj.__qualname__}"
    return f"{type(obj).__name__} {obj!r}"


def _builtin_list() -> str:
    return ", ".join(repr(name) for name in BUILTIN_ASSIGNORS)
