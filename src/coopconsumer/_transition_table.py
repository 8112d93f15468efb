"""The table kit for every state machine: rows, the checked build, the moves and
predecessors derived from them, and the one ``IllegalTransition``.

A table maps ``(state, input type)`` to a ``Transition``: the handler, and the states
it may move the machine to (the machine's ``enter`` refuses any other). ``build``
turns the rows a machine's table module writes (``(states, input type, handler, next
states)``) into that mapping and refuses a pair written twice; ``moves`` and
``predecessors`` read it back, so the predecessors of a state are never written by
hand. docs/architecture.md draws each table from the same rows
(``docs/gen_architecture.py``).

Every state machine of the package is built on it: the two group members
(``_member``), the broker session (``_session``), and the admin side's
machines whose inputs an owner dispatches itself (a reassignment's moves, the healer's
chunks, the test cluster's replicas and partitions): their rows name no handler
(``build_moves``) and each move is checked with ``check_move``.

Pure: imports only the package's exception hierarchy and attrs; no I/O, threads or
clocks.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import attrs

from ._errors import CoopConsumerError

__all__ = [
    "IllegalTransition",
    "MoveRow",
    "Outside",
    "Row",
    "Transition",
    "build",
    "build_moves",
    "check_move",
    "moves",
    "predecessors",
]

S = TypeVar("S", bound=enum.Enum)

#: A row as a table writes it: the states it serves, the input type, the handler
#: (``handler(machine, input, now)``) and the states the handler may move it to.
Row = tuple[Iterable[S], type, Callable[[Any, Any, float], None], Iterable[S]]
#: A row of a machine whose owner dispatches the inputs itself (one input may move many
#: of its objects): the states it serves, the input type and the states one move may
#: reach from there. A state may list itself: unlike a dispatching machine's, such a
#: machine checks every move, staying included.
MoveRow = tuple[Iterable[S], type, Iterable[S]]


class Outside:
    """The input type of a machine that is handling no input: no row allows a move."""


class IllegalTransition(CoopConsumerError):
    """A state machine was asked to do something its transition table forbids: a
    driver or core bug, never a broker's or a user's doing.

    Two cases, told apart by ``target``:

    - ``target is None``: ``input_type`` arrived in ``state``, which rejects it. The
      machine is unchanged.
    - ``target`` is a state: the handler of ``(state, input_type)`` tried to move the
      machine to ``target``, which that row does not allow. The machine is left
      part-way through the handler and must be discarded.

    ``machine`` names the machine in the message ("member", "connection", "move",
    "chunk", "replica", "partition").
    """

    def __init__(
        self,
        state: enum.Enum,
        input_type: type,
        detail: str = "",
        *,
        target: enum.Enum | None = None,
        machine: str = "state machine",
    ) -> None:
        if target is None:
            text = f"{input_type.__name__} is not allowed in state {state.name}"
        else:
            text = (
                f"{input_type.__name__} in state {state.name} may not move the {machine} "
                f"to {target.name}"
            )
        super().__init__(f"{text}: {detail}" if detail else text)
        self.state = state
        self.input_type = input_type
        self.target = target


@attrs.frozen(kw_only=True)
class Transition(Generic[S]):
    """One row: the handler of a ``(state, input type)`` pair and the states it may
    move the machine to."""

    #: None in a table whose owner dispatches the inputs itself (``build_moves``).
    handler: Callable[[Any, Any, float], None] | None
    next_states: frozenset[S]


def build(rows: Iterable[Row[S]]) -> Mapping[tuple[S, type], Transition[S]]:
    """The table of ``rows``; ``AssertionError`` for a pair written twice."""
    return _build(rows)


def build_moves(rows: Iterable[MoveRow[S]]) -> Mapping[tuple[S, type], Transition[S]]:
    """The table of a machine whose owner dispatches the inputs (rows without a
    handler); ``AssertionError`` for a pair written twice."""
    return _build((states, t, None, targets) for states, t, targets in rows)


def _build(
    rows: Iterable[tuple[Iterable[S], type, Callable[[Any, Any, float], None] | None, Iterable[S]]],
) -> Mapping[tuple[S, type], Transition[S]]:
    table: dict[tuple[S, type], Transition[S]] = {}
    for states, input_type, handler, next_states in rows:
        targets = frozenset(next_states)
        for state in states:
            key = (state, input_type)
            if key in table:
                raise AssertionError(f"two rows for {state.name} x {input_type.__name__}")
            table[key] = Transition(handler=handler, next_states=targets)
    return MappingProxyType(table)


def check_move(
    transitions: Mapping[tuple[S, type], Transition[S]],
    state: S,
    input_type: type,
    target: S,
    *,
    machine: str,
    detail: str = "",
) -> None:
    """``IllegalTransition`` unless the row of ``(state, input_type)`` lists ``target``
    (a machine built with ``build_moves``: staying is checked too)."""
    row = transitions.get((state, input_type))
    if row is None or target not in row.next_states:
        raise IllegalTransition(state, input_type, detail, target=target, machine=machine)


def moves(
    transitions: Mapping[tuple[S, type], Transition[S]],
    states: Iterable[S],
    input_types: Iterable[type],
    *,
    loops: bool = False,
) -> dict[tuple[S, S], tuple[type, ...]]:
    """Every move the table allows, ``(from, to) -> input types`` that may cause it, in
    the order of ``states`` and ``input_types``; a row listing its own state is a move
    only with ``loops`` (for a dispatching machine, staying is no move)."""
    ordered = list(states)
    inputs = list(input_types)
    found: dict[tuple[S, S], list[type]] = {}
    for source in ordered:
        for input_type in inputs:
            row = transitions.get((source, input_type))
            if row is None:
                continue
            for target in ordered:
                if target in row.next_states and (loops or target is not source):
                    found.setdefault((source, target), []).append(input_type)
    return {edge: tuple(kinds) for edge, kinds in found.items()}


def predecessors(
    transitions: Mapping[tuple[S, type], Transition[S]],
    states: Iterable[S],
    input_types: Iterable[type],
    state: S,
    *,
    loops: bool = False,
) -> frozenset[S]:
    """The states from which one input may move a machine to ``state`` (``loops``: as
    ``moves``)."""
    return frozenset(
        source
        for (source, target) in moves(transitions, states, input_types, loops=loops)
        if target is state
    )
