"""What a transition table is, for both members: rows, the checked build, and the moves
and predecessors derived from it.

A table maps ``(state, input type)`` to a ``Transition``: the handler, and the states
it may move the member to (``MemberBase.enter`` refuses any other). ``build`` turns
the rows a member's ``_table.py`` writes (``(states, input type, handler, next
states)``) into that mapping and refuses a pair written twice; ``moves`` and
``predecessors`` read it back, so the predecessors of a state are never written by
hand (docs/architecture.md, "The group member's state machine").

Pure: no I/O, threads or clocks.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import attrs

__all__ = ["Row", "Transition", "build", "moves", "predecessors"]

S = TypeVar("S", bound=enum.Enum)

#: A row as a table writes it: the states it serves, the input type, the handler
#: (``handler(core, input, now)``) and the states the handler may move the member to.
Row = tuple[Iterable[S], type, Callable[[Any, Any, float], None], Iterable[S]]


@attrs.frozen(kw_only=True)
class Transition(Generic[S]):
    """One row: the handler of a ``(state, input type)`` pair and the states it may
    move the member to."""

    handler: Callable[[Any, Any, float], None]
    next_states: frozenset[S]


def build(rows: Iterable[Row[S]]) -> Mapping[tuple[S, type], Transition[S]]:
    """The table of ``rows``; ``AssertionError`` for a pair written twice."""
    table: dict[tuple[S, type], Transition[S]] = {}
    for states, input_type, handler, next_states in rows:
        targets = frozenset(next_states)
        for state in states:
            key = (state, input_type)
            if key in table:
                raise AssertionError(f"two rows for {state.name} x {input_type.__name__}")
            table[key] = Transition(handler=handler, next_states=targets)
    return MappingProxyType(table)


def moves(
    transitions: Mapping[tuple[S, type], Transition[S]],
    states: Iterable[S],
    input_types: Iterable[type],
) -> dict[tuple[S, S], tuple[type, ...]]:
    """Every move the table allows, ``(from, to) -> input types`` that may cause it, in
    the order of ``states`` and ``input_types``."""
    ordered = list(states)
    inputs = list(input_types)
    found: dict[tuple[S, S], list[type]] = {}
    for source in ordered:
        for input_type in inputs:
            row = transitions.get((source, input_type))
            if row is None:
                continue
            for target in ordered:
                if target in row.next_states and target is not source:
                    found.setdefault((source, target), []).append(input_type)
    return {edge: tuple(kinds) for edge, kinds in found.items()}


def predecessors(
    transitions: Mapping[tuple[S, type], Transition[S]],
    states: Iterable[S],
    input_types: Iterable[type],
    state: S,
) -> frozenset[S]:
    """The states from which one input may move a member to ``state``."""
    return frozenset(
        source for (source, target) in moves(transitions, states, input_types) if target is state
    )
