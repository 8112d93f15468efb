"""load_assignors (partition.assignment.strategy) and select_rebalance_protocol."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from coopconsumer import assignors as public
from coopconsumer._errors import ConfigurationError
from coopconsumer.assignors import (
    BUILTIN_ASSIGNORS,
    ClusterMetadata,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    GroupAssignment,
    GroupSubscription,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    load_assignors,
    select_rebalance_protocol,
)

CUSTOM_MODULE = """
from coopconsumer.assignors import ConsumerPartitionAssignor, GroupAssignment, RebalanceProtocol

CONSTRUCTED = []


class MyAssignor(ConsumerPartitionAssignor):
    name = "mine"

    def __init__(self):
        CONSTRUCTED.append(self)

    def supported_protocols(self):
        return [RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE]

    def assign(self, metadata, group_subscription):
        return GroupAssignment(assignments={})


class Outer:
    class Inner(MyAssignor):
        name = "inner"


class NotAnAssignor:
    name = "nope"


def a_function():
    return MyAssignor()


INSTANCE = MyAssignor()


class Exploding(MyAssignor):
    name = "exploding"

    def __init__(self):
        raise RuntimeError("no config file")


class NeedsArgs(MyAssignor):
    name = "needs-args"

    def __init__(self, required):
        super().__init__()


class Abstract(ConsumerPartitionAssignor):
    name = "abstract"


class Unnamed(MyAssignor):
    name = ""


class NumberNamed(MyAssignor):
    name = 42


class PropertyRaises(MyAssignor):
    @property
    def name(self):
        raise KeyError("lookup")


class AlsoRange(MyAssignor):
    name = "range"
"""


@pytest.fixture
def custom_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``custom_assignors`` (good and bad classes), ``custom_pkg.sub`` (dotted path),
    ``broken_on_import`` (raises) and ``missing_dependency`` (imports a missing module),
    all importable from ``tmp_path`` for the duration of one test."""
    (tmp_path / "custom_assignors.py").write_text(textwrap.dedent(CUSTOM_MODULE))
    package = tmp_path / "custom_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sub.py").write_text("from custom_assignors import MyAssignor as PkgAssignor\n")
    (tmp_path / "broken_on_import.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "missing_dependency.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ["custom_assignors", "custom_pkg", "custom_pkg.sub", "broken_on_import"]
    names.append("missing_dependency")
    yield tmp_path
    for name in names:
        sys.modules.pop(name, None)


# --- built-ins ---------------------------------------------------------------------------


def test_builtin_registry_has_javas_four_names() -> None:
    assert set(BUILTIN_ASSIGNORS) == {"range", "roundrobin", "sticky", "cooperative-sticky"}
    for name, factory in BUILTIN_ASSIGNORS.items():
        assert factory().name == name


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("range", [RangeAssignor]),
        ("roundrobin", [RoundRobinAssignor]),
        ("sticky", [StickyAssignor]),
        ("cooperative-sticky", [CooperativeStickyAssignor]),
        ("cooperative-sticky,range", [CooperativeStickyAssignor, RangeAssignor]),
        ("  range ,\troundrobin  ", [RangeAssignor, RoundRobinAssignor]),
        (["range", " roundrobin "], [RangeAssignor, RoundRobinAssignor]),
        (("sticky",), [StickyAssignor]),
        (["range, roundrobin"], [RangeAssignor, RoundRobinAssignor]),
    ],
)
def test_builtin_names_in_order(spec: str | list[str], expected: list[type]) -> None:
    assert [type(a) for a in load_assignors(spec)] == expected


@pytest.mark.parametrize(
    ("java_name", "expected"),
    [
        ("org.apache.kafka.clients.consumer.RangeAssignor", RangeAssignor),
        ("org.apache.kafka.clients.consumer.RoundRobinAssignor", RoundRobinAssignor),
        ("org.apache.kafka.clients.consumer.StickyAssignor", StickyAssignor),
        ("org.apache.kafka.clients.consumer.CooperativeStickyAssignor", CooperativeStickyAssignor),
    ],
)
def test_java_class_names_map_to_builtins(java_name: str, expected: type) -> None:
    (assignor,) = load_assignors(java_name)
    assert type(assignor) is expected


def test_java_config_line_copied_verbatim() -> None:
    spec = (
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor, "
        "org.apache.kafka.clients.consumer.RangeAssignor"
    )
    assert [a.name for a in load_assignors(spec)] == ["cooperative-sticky", "range"]


def test_every_call_builds_fresh_instances() -> None:
    first = load_assignors("range,roundrobin,sticky,cooperative-sticky")
    second = load_assignors("range,roundrobin,sticky,cooperative-sticky")
    assert all(a is not b for a, b in zip(first, second, strict=True))
    assert len({id(a) for a in first + second}) == 8


def test_classes_and_instances_are_accepted() -> None:
    mine = RoundRobinAssignor()
    loaded = load_assignors([RangeAssignor, mine, "sticky"])
    assert type(loaded[0]) is RangeAssignor
    assert loaded[1] is mine
    assert type(loaded[2]) is StickyAssignor
    assert type(load_assignors(RangeAssignor)[0]) is RangeAssignor
    assert load_assignors(mine) == [mine]
    # A class gives a new instance every time.
    assert load_assignors([RangeAssignor])[0] is not load_assignors([RangeAssignor])[0]


def test_registry_factories_may_be_any_callable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BUILTIN_ASSIGNORS, "rr-alias", lambda: RoundRobinAssignor())
    monkeypatch.setitem(BUILTIN_ASSIGNORS, "bogus", lambda: "not an assignor")
    assert [type(a) for a in load_assignors("rr-alias")] == [RoundRobinAssignor]
    with pytest.raises(ConfigurationError, match="built str 'not an assignor', not a Consumer"):
        load_assignors("bogus")


# --- user assignors by import path --------------------------------------------------------


@pytest.mark.usefixtures("custom_modules")
@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("custom_assignors:MyAssignor", "mine"),
        ("custom_assignors.MyAssignor", "mine"),
        ("custom_assignors:Outer.Inner", "inner"),
        ("custom_assignors.Outer.Inner", "inner"),
        ("custom_pkg.sub:PkgAssignor", "mine"),
        ("custom_pkg.sub.PkgAssignor", "mine"),
    ],
)
def test_import_paths(path: str, name: str) -> None:
    (assignor,) = load_assignors(f" {path} ")
    assert assignor.name == name


@pytest.mark.usefixtures("custom_modules")
def test_import_path_builds_a_fresh_instance_per_call() -> None:
    first = load_assignors("custom_assignors:MyAssignor, range")
    second = load_assignors("custom_assignors:MyAssignor, range")
    import custom_assignors  # type: ignore[import-not-found]

    assert first[0] is not second[0]
    assert first[0] in custom_assignors.CONSTRUCTED
    assert second[0] in custom_assignors.CONSTRUCTED


# --- errors -----------------------------------------------------------------------------------


def _error(spec: object) -> str:
    with pytest.raises(ConfigurationError) as info:
        load_assignors(spec)  # type: ignore[arg-type]
    return str(info.value)


def test_configuration_error_is_a_value_error() -> None:
    assert issubclass(ConfigurationError, ValueError)


def test_unknown_name_lists_valid_names() -> None:
    message = _error("range,rangee")
    assert "'rangee'" in message
    for name in BUILTIN_ASSIGNORS:
        assert repr(name) in message


def test_unknown_name_is_case_sensitive_like_java() -> None:
    assert "'Range'" in _error("Range")


@pytest.mark.parametrize("spec", ["", "   ", [], ()])
def test_empty_spec(spec: object) -> None:
    assert "empty" in _error(spec)


@pytest.mark.parametrize("spec", ["range,,roundrobin", "range,", ",range", ["range", ""], [" "]])
def test_empty_entry(spec: object) -> None:
    assert "empty entry" in _error(spec)


@pytest.mark.parametrize("spec", [42, b"range", None, {"range": 1}])
def test_spec_of_wrong_type(spec: object) -> None:
    assert "partition.assignment.strategy must be" in _error(spec)


def test_entry_of_wrong_type() -> None:
    message = _error(["range", 3.5])
    assert "3.5" in message
    assert "float" in message


@pytest.mark.usefixtures("custom_modules")
def test_module_that_fails_to_import_names_module_and_reason() -> None:
    for path in ("broken_on_import:Thing", "broken_on_import.Thing"):
        message = _error(path)
        assert "'broken_on_import'" in message
        assert "RuntimeError: boom at import" in message


@pytest.mark.usefixtures("custom_modules")
def test_missing_dependency_inside_a_module_is_not_mistaken_for_a_missing_module() -> None:
    for path in ("missing_dependency:Thing", "missing_dependency.Thing"):
        message = _error(path)
        assert "'missing_dependency'" in message
        assert "no_such_dependency_xyz" in message


def test_missing_module() -> None:
    assert "no_such_module_abc" in _error("no_such_module_abc:Thing")
    assert "no module 'no_such_module_abc'" in _error("no_such_module_abc.sub.Thing")


@pytest.mark.usefixtures("custom_modules")
def test_missing_attribute() -> None:
    message = _error("custom_assignors:Missing")
    assert "'custom_assignors' has no attribute 'Missing'" in message
    message = _error("custom_assignors.Outer.Missing")
    assert "'custom_assignors.Outer' has no attribute 'Missing'" in message


@pytest.mark.usefixtures("custom_modules")
def test_attribute_lookup_that_raises_is_a_configuration_error(tmp_path: Path) -> None:
    # A lazy-loading module __getattr__ may raise ImportError (or anything else).
    (tmp_path / "lazy_assignors.py").write_text(
        "def __getattr__(name):\n    raise ImportError(f'lazy load of {name} failed')\n"
    )
    try:
        for path in ("lazy_assignors:Thing", "lazy_assignors.Thing"):
            message = _error(path)
            assert "reading 'Thing' from 'lazy_assignors' raised ImportError" in message
            assert "lazy load of Thing failed" in message
    finally:
        sys.modules.pop("lazy_assignors", None)


@pytest.mark.parametrize("path", [":Thing", "module:", "a..b", "a.b."])
def test_malformed_paths(path: str) -> None:
    assert repr(path) in _error(path)


@pytest.mark.usefixtures("custom_modules")
@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("custom_assignors:NotAnAssignor", "not a ConsumerPartitionAssignor subclass"),
        ("custom_assignors:a_function", "not a ConsumerPartitionAssignor subclass"),
        ("custom_assignors:CONSTRUCTED", "not a ConsumerPartitionAssignor subclass"),
        ("custom_assignors:INSTANCE", "names an instance, not a class"),
        ("custom_assignors:Abstract", "is abstract: it does not implement assign"),
        ("coopconsumer.assignors:ConsumerPartitionAssignor", "is abstract"),
    ],
)
def test_not_an_assignor_class(path: str, fragment: str) -> None:
    assert fragment in _error(path)


def test_non_assignor_class_and_instance_in_list() -> None:
    assert "not a ConsumerPartitionAssignor subclass" in _error([dict])
    assert "object" in _error([object()])


@pytest.mark.usefixtures("custom_modules")
def test_constructor_failures() -> None:
    message = _error("custom_assignors:Exploding")
    assert "constructing assignor 'custom_assignors:Exploding'" in message
    assert "RuntimeError: no config file" in message
    assert "TypeError" in _error("custom_assignors.NeedsArgs")


@pytest.mark.usefixtures("custom_modules")
def test_unusable_names() -> None:
    assert "no usable name" in _error("custom_assignors:Unnamed")
    assert "no usable name" in _error("custom_assignors:NumberNamed")
    assert "KeyError" in _error("custom_assignors:PropertyRaises")


@pytest.mark.usefixtures("custom_modules")
@pytest.mark.parametrize(
    "spec",
    [
        "range,range",
        "range, org.apache.kafka.clients.consumer.RangeAssignor",
        ["roundrobin", RoundRobinAssignor],
        "range, custom_assignors:AlsoRange",
        "custom_assignors:MyAssignor, custom_assignors.MyAssignor",
    ],
)
def test_duplicate_names(spec: object) -> None:
    message = _error(spec)
    assert "two assignors named" in message


# --- select_rebalance_protocol ---------------------------------------------------------------


class _Custom(ConsumerPartitionAssignor):
    def __init__(self, name: str, protocols: object) -> None:
        self._name = name
        self._protocols = protocols

    @property
    def name(self) -> str:
        return self._name

    def supported_protocols(self) -> list[RebalanceProtocol]:
        if isinstance(self._protocols, Exception):
            raise self._protocols
        return self._protocols  # type: ignore[return-value]

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        return GroupAssignment(assignments={})


EAGER, COOPERATIVE = RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE


def test_kip429_upgrade_path_with_builtins() -> None:
    # First bounce: both assignors listed -> still EAGER; second bounce: COOPERATIVE.
    assert select_rebalance_protocol(load_assignors("cooperative-sticky,range")) is EAGER
    assert select_rebalance_protocol(load_assignors("cooperative-sticky")) is COOPERATIVE
    assert select_rebalance_protocol(load_assignors("range,roundrobin,sticky")) is EAGER


def test_highest_common_protocol() -> None:
    both = _Custom("both", [EAGER, COOPERATIVE])
    coop = _Custom("coop", [COOPERATIVE])
    eager = _Custom("eager", [EAGER])
    assert select_rebalance_protocol([both]) is COOPERATIVE
    assert select_rebalance_protocol([both, coop]) is COOPERATIVE
    assert select_rebalance_protocol([both, eager]) is EAGER
    assert select_rebalance_protocol([_Custom("ints", [1, 0])]) is COOPERATIVE
    assert select_rebalance_protocol([_Custom("tuple", (COOPERATIVE, EAGER)), coop]) is COOPERATIVE


def test_no_common_protocol_names_each_assignor() -> None:
    with pytest.raises(ConfigurationError) as info:
        select_rebalance_protocol([_Custom("coop-only", [COOPERATIVE]), RangeAssignor()])
    message = str(info.value)
    assert "no rebalance protocol in common" in message
    assert "'coop-only' (_Custom) supports COOPERATIVE" in message
    assert "'range' (RangeAssignor) supports EAGER" in message


@pytest.mark.parametrize(
    ("protocols", "fragment"),
    [
        (RuntimeError("kaput"), "raised RuntimeError: kaput"),
        (None, "must return a list"),
        ("EAGER", "must return a list"),
        (3, "must return a list"),
        ([], "returned no protocol"),
        ([5], "unknown protocol id 5"),
        ([True], "not a RebalanceProtocol"),
        (["EAGER"], "not a RebalanceProtocol"),
        ([EAGER, None], "not a RebalanceProtocol"),
    ],
)
def test_broken_supported_protocols(protocols: object, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        select_rebalance_protocol([RangeAssignor(), _Custom("broken", protocols)])
    assert fragment in str(info.value)
    assert "'broken'" in str(info.value)


def test_no_assignors() -> None:
    with pytest.raises(ConfigurationError, match="empty"):
        select_rebalance_protocol([])


def test_public_exports() -> None:
    assert public.load_assignors is load_assignors
    assert public.select_rebalance_protocol is select_rebalance_protocol
    assert public.BUILTIN_ASSIGNORS is BUILTIN_ASSIGNORS
