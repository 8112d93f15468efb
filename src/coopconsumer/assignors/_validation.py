"""PLACEHOLDER: being written (issue 2)."""

from __future__ import annotations

from ._api import GroupAssignment, GroupSubscription


def validate_cooperative_assignment(
    group_subscription: GroupSubscription,
    group_assignment: GroupAssignment,
    *,
    assignor_name: str,
) -> None:
    raise NotImplementedError
