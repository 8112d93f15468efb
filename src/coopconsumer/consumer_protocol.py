"""PLACEHOLDER: being written (issue 2)."""

from __future__ import annotations

from .assignors._api import Assignment, Subscription


def encode_subscription(subscription: Subscription) -> bytes:
    raise NotImplementedError


def decode_subscription(data: bytes, *, member_id: str | None = None) -> Subscription:
    raise NotImplementedError


def encode_assignment(assignment: Assignment) -> bytes:
    raise NotImplementedError


def decode_assignment(data: bytes, *, member_id: str | None = None) -> Assignment:
    raise NotImplementedError
