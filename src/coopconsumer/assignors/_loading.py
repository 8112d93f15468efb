"""Turning ``partition.assignment.strategy`` into assignor instances; protocol choice.

PLACEHOLDER: being written (issue 2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._api import ConsumerPartitionAssignor, RebalanceProtocol

BUILTIN_ASSIGNORS: dict[str, Callable[[], ConsumerPartitionAssignor]] = {}


def load_assignors(spec: str | Sequence[str]) -> list[ConsumerPartitionAssignor]:
    raise NotImplementedError


def select_rebalance_protocol(
    assignors: Sequence[ConsumerPartitionAssignor],
) -> RebalanceProtocol:
    raise NotImplementedError
