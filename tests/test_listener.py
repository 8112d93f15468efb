"""ListenerInvoker: KIP-429 call rules, first-exception handling and timing."""

from __future__ import annotations

import enum
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer._errors import ConfigurationError
from coopconsumer._listener import (
    ListenerInvoker,
    ListenerKind,
    RebalanceListener,
    RebalanceListenerLike,
)
from coopconsumer._types import TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TP2 = TopicPartition("u", 0)


class FakeClock:
    """Advances by ``step`` seconds on every read."""

    def __init__(self, start: float = 100.0, step: float = 0.25) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> float:
        value = self.now
        self.now += self.step
        return value


class RecordingSink:
    def __init__(self) -> None:
        self.records: list[tuple[ListenerKind, float, float]] = []

    def listener_latency(self, kind: ListenerKind, seconds: float, now: float) -> None:
        self.records.append((kind, seconds, now))


class Recorder(RebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("revoked", partitions))

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("assigned", partitions))


class RecorderWithLost(Recorder):
    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("lost", partitions))


def test_calls_in_the_order_invoked_with_frozensets() -> None:
    listener = RecorderWithLost()
    invoker = ListenerInvoker(listener, now_fn=FakeClock())
    invoker.invoke(ListenerKind.LOST, [TP2])
    invoker.invoke(ListenerKind.REVOKED, (TP0,))
    invoker.invoke(ListenerKind.ASSIGNED, {TP1})
    assert listener.calls == [
        ("lost", frozenset({TP2})),
        ("revoked", frozenset({TP0})),
        ("assigned", frozenset({TP1})),
    ]
    assert all(type(parts) is frozenset for _, parts in listener.calls)


def test_log_names_the_first_partitions_in_order_and_counts_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    partitions = [TopicPartition(topic, p) for topic in ("b", "a") for p in range(15)]
    invoker = ListenerInvoker(Recorder(), now_fn=FakeClock())
    with caplog.at_level(logging.INFO, logger="coopconsumer.listener"):
        invoker.invoke(ListenerKind.ASSIGNED, partitions)
        invoker.invoke(ListenerKind.ASSIGNED, [])
    first, empty = (rec.getMessage() for rec in caplog.records)
    expected = [f"a-{p}" for p in range(15)] + [f"b-{p}" for p in range(5)]
    assert first == (
        f"Calling on_partitions_assigned with 30 partition(s): {', '.join(expected)}, ... (10 more)"
    )
    assert empty == "Calling on_partitions_assigned with 0 partition(s): (none)"


def test_revoked_and_lost_skipped_for_empty_set_assigned_always_called() -> None:
    listener = RecorderWithLost()
    sink = RecordingSink()
    invoker = ListenerInvoker(listener, sink, now_fn=FakeClock())
    invoker.invoke(ListenerKind.REVOKED, [])
    invoker.invoke(ListenerKind.LOST, frozenset())
    assert listener.calls == []
    assert sink.records == []
    invoker.invoke(ListenerKind.ASSIGNED, [])
    assert listener.calls == [("assigned", frozenset())]
    assert [kind for kind, _, _ in sink.records] == [ListenerKind.ASSIGNED]


def test_lost_defaults_to_revoked_for_base_class_subclass() -> None:
    listener = Recorder()
    invoker = ListenerInvoker(listener, now_fn=FakeClock())
    invoker.invoke(ListenerKind.LOST, [TP0, TP1])
    assert listener.calls == [("revoked", frozenset({TP0, TP1}))]


def test_lost_defaults_to_revoked_for_duck_typed_listener() -> None:
    calls: list[tuple[str, frozenset[TopicPartition]]] = []

    class Duck:
        def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
            calls.append(("revoked", partitions))

        def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
            calls.append(("assigned", partitions))

    duck = Duck()
    assert isinstance(duck, RebalanceListenerLike)
    invoker = ListenerInvoker(duck, now_fn=FakeClock())
    invoker.invoke(ListenerKind.LOST, [TP0])
    invoker.invoke(ListenerKind.ASSIGNED, [TP1])
    assert calls == [("revoked", frozenset({TP0})), ("assigned", frozenset({TP1}))]


def test_partial_duck_listener_missing_methods_are_no_ops() -> None:
    calls: list[frozenset[TopicPartition]] = []

    class OnlyAssigned:
        def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
            calls.append(partitions)

    sink = RecordingSink()
    invoker = ListenerInvoker(OnlyAssigned(), sink, now_fn=FakeClock())  # type: ignore[arg-type]
    invoker.invoke(ListenerKind.REVOKED, [TP0])
    invoker.invoke(ListenerKind.LOST, [TP0])
    invoker.invoke(ListenerKind.ASSIGNED, [TP1])
    assert calls == [frozenset({TP1})]
    assert invoker.take_error() is None
    # Missing callbacks still count as (empty) callback time, as Java's no-op listener.
    assert [kind for kind, _, _ in sink.records] == [
        ListenerKind.REVOKED,
        ListenerKind.LOST,
        ListenerKind.ASSIGNED,
    ]


def test_none_listener_is_a_no_op_that_still_records_latency() -> None:
    sink = RecordingSink()
    invoker = ListenerInvoker(None, sink, now_fn=FakeClock(start=5.0, step=0.5))
    invoker.invoke(ListenerKind.ASSIGNED, [TP0])
    assert invoker.listener is None
    assert sink.records == [(ListenerKind.ASSIGNED, 0.5, 5.5)]


def test_object_without_callbacks_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="none of the methods"):
        ListenerInvoker(lambda parts: None)  # type: ignore[arg-type]


def test_non_callable_callback_attribute_is_a_configuration_error() -> None:
    class Broken:
        on_partitions_assigned = 3

        def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
            pass

    with pytest.raises(ConfigurationError, match="'on_partitions_assigned' is not callable"):
        ListenerInvoker(Broken())  # type: ignore[arg-type]


def test_async_callback_is_a_configuration_error() -> None:
    # poll() calls callbacks synchronously: an async def would silently never run.
    class Async(RebalanceListener):
        async def on_partitions_assigned(  # type: ignore[override]
            self, partitions: frozenset[TopicPartition]
        ) -> None:
            pass

    with pytest.raises(ConfigurationError, match="on_partitions_assigned is a coroutine"):
        ListenerInvoker(Async())


class Failing(RebalanceListener):
    def __init__(self, fail_on: set[str]) -> None:
        self.fail_on = fail_on
        self.calls: list[str] = []

    def _maybe_fail(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail_on:
            raise RuntimeError(f"{name} failed")

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self._maybe_fail("revoked")

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self._maybe_fail("assigned")

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self._maybe_fail("lost")


def test_first_exception_is_kept_and_later_callbacks_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    listener = Failing({"revoked", "assigned"})
    invoker = ListenerInvoker(listener, now_fn=FakeClock())
    with caplog.at_level(logging.ERROR, logger="coopconsumer.listener"):
        invoker.invoke(ListenerKind.REVOKED, [TP0])
        invoker.invoke(ListenerKind.ASSIGNED, [TP1])
    assert listener.calls == ["revoked", "assigned"]
    assert invoker.has_error
    error = invoker.take_error()
    assert isinstance(error, RuntimeError)
    assert str(error) == "revoked failed"
    assert not invoker.has_error
    assert invoker.take_error() is None
    assert sum("raised" in rec.getMessage() for rec in caplog.records) == 2


def test_error_after_take_error_starts_a_new_rebalance() -> None:
    listener = Failing({"assigned"})
    invoker = ListenerInvoker(listener, now_fn=FakeClock())
    invoker.invoke(ListenerKind.ASSIGNED, [])
    first = invoker.take_error()
    invoker.invoke(ListenerKind.ASSIGNED, [TP0])
    second = invoker.take_error()
    assert first is not None
    assert second is not None
    assert first is not second


def test_keyboard_interrupt_propagates_and_records_no_latency() -> None:
    class Interrupting(RebalanceListener):
        def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
            raise KeyboardInterrupt

    sink = RecordingSink()
    invoker = ListenerInvoker(Interrupting(), sink, now_fn=FakeClock())
    with pytest.raises(KeyboardInterrupt):
        invoker.invoke(ListenerKind.ASSIGNED, [TP0])
    assert invoker.take_error() is None
    assert sink.records == []


def test_latency_measured_with_injected_clock_only_for_calls_that_return() -> None:
    # Java records the callback sensor after the call returns: a raising call is
    # not part of partition-*-latency-avg/max.
    sink = RecordingSink()
    clock = FakeClock(start=10.0, step=0.125)
    invoker = ListenerInvoker(Failing({"lost"}), sink, now_fn=clock)
    invoker.invoke(ListenerKind.LOST, [TP0])
    invoker.invoke(ListenerKind.ASSIGNED, [TP1])
    assert sink.records == [(ListenerKind.ASSIGNED, 0.125, 10.25)]
    assert isinstance(invoker.take_error(), RuntimeError)


def test_per_call_clock_overrides_the_constructor_clock() -> None:
    sink = RecordingSink()
    invoker = ListenerInvoker(Recorder(), sink, now_fn=FakeClock(step=1.0))
    invoker.invoke(ListenerKind.ASSIGNED, [TP0], FakeClock(start=0.0, step=2.0))
    assert sink.records == [(ListenerKind.ASSIGNED, 2.0, 2.0)]


def test_clock_going_backwards_records_zero_latency() -> None:
    sink = RecordingSink()
    invoker = ListenerInvoker(Recorder(), sink, now_fn=FakeClock(start=3.0, step=-1.0))
    invoker.invoke(ListenerKind.ASSIGNED, [TP0])
    assert sink.records == [(ListenerKind.ASSIGNED, 0.0, 2.0)]


def test_kind_method_names() -> None:
    assert [kind.method_name for kind in ListenerKind] == [
        "on_partitions_revoked",
        "on_partitions_assigned",
        "on_partitions_lost",
    ]


_tps = st.frozensets(
    st.builds(TopicPartition, st.sampled_from(["a", "b"]), st.integers(0, 5)), max_size=6
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(list(ListenerKind)), _tps, st.booleans()),
        max_size=8,
    )
)
def test_property_call_rules_and_first_error(
    steps: list[tuple[ListenerKind, frozenset[TopicPartition], bool]],
) -> None:
    """Every invocation follows the empty-set rule; the first raised error is kept."""
    calls: list[tuple[ListenerKind, frozenset[TopicPartition]]] = []
    errors: list[Exception] = []
    pending: list[tuple[ListenerKind, bool]] = []

    class Scripted(RebalanceListener):
        def _call(self, kind: ListenerKind, partitions: frozenset[TopicPartition]) -> None:
            calls.append((kind, partitions))
            _, fail = pending.pop(0)
            if fail:
                exc = ValueError(len(errors))
                errors.append(exc)
                raise exc

        def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
            self._call(ListenerKind.REVOKED, partitions)

        def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
            self._call(ListenerKind.ASSIGNED, partitions)

        def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
            self._call(ListenerKind.LOST, partitions)

    sink = RecordingSink()
    invoker = ListenerInvoker(Scripted(), sink, now_fn=FakeClock())
    expected: list[tuple[ListenerKind, frozenset[TopicPartition]]] = []
    returned: list[ListenerKind] = []
    for kind, parts, fail in steps:
        if parts or kind is ListenerKind.ASSIGNED:
            expected.append((kind, parts))
            pending.append((kind, fail))
            if not fail:
                returned.append(kind)
        invoker.invoke(kind, parts)
    assert calls == expected
    assert [kind for kind, _, _ in sink.records] == returned
    assert invoker.take_error() is (errors[0] if errors else None)


class ForeignKind(enum.Enum):
    """Stands in for the coordinator's own kind enum (same values)."""

    REVOKED = "revoked"
    ASSIGNED = "assigned"
    LOST = "lost"
    OTHER = "other"


def test_kinds_of_another_enum_map_by_value() -> None:
    listener = RecorderWithLost()
    sink = RecordingSink()
    invoker = ListenerInvoker(listener, sink, now_fn=FakeClock())
    invoker.invoke(ForeignKind.LOST, [TP0])
    invoker.invoke(ForeignKind.REVOKED, [])
    invoker.invoke(ForeignKind.ASSIGNED, [])
    assert listener.calls == [("lost", frozenset({TP0})), ("assigned", frozenset())]
    assert [kind for kind, _, _ in sink.records] == [ListenerKind.LOST, ListenerKind.ASSIGNED]
    assert ListenerKind.of(ListenerKind.REVOKED) is ListenerKind.REVOKED
    with pytest.raises(ValueError, match="'other' is not a valid ListenerKind"):
        invoker.invoke(ForeignKind.OTHER, [TP0])
