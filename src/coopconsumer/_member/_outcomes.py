"""Routed inputs: what a ``ResponseReceived``/``RequestFailed`` becomes inside the member.

The member keeps a ``Pending`` record per request it sent; an answer is matched to its
record and turned into the outcome input of that API (``JoinGroupOutcome``, ...),
which is what the transition table dispatches on (docs/architecture.md, "The group
member's state machine"). Pure data: imports messages and value types only.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from .._errors import CoopConsumerError
from .._protocol.messages import (
    FindCoordinatorResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    MetadataResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)
from ._error_actions import Api

__all__ = [
    "RESPONSE_TYPES",
    "FindCoordinatorOutcome",
    "HeartbeatOutcome",
    "JoinGroupOutcome",
    "LeaveGroupOutcome",
    "OffsetCommitOutcome",
    "OffsetFetchOutcome",
    "Outcome",
    "Pending",
    "SyncGroupOutcome",
]


@attrs.frozen(kw_only=True)
class Pending:
    """A request in flight: what it was and which generation sent it."""

    api: Api
    sent_at: float
    generation_id: int
    member_id: str
    token: object = None
    node_id: int | None = None  # the coordinator it was sent to (None: any broker)


@attrs.frozen(kw_only=True)
class JoinGroupOutcome:
    """Routed input: the answer (``response``) or failure (``error``) of our JoinGroup."""

    pending: Pending
    response: JoinGroupResponse | None = None
    error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class SyncGroupOutcome:
    """Routed input: the answer or failure of our SyncGroup."""

    pending: Pending
    response: SyncGroupResponse | None = None
    error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class HeartbeatOutcome:
    """Routed input: the answer or failure of a heartbeat of the current generation."""

    pending: Pending
    response: HeartbeatResponse | None = None
    error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class LeaveGroupOutcome:
    """Routed input: the answer or failure of our LeaveGroup."""

    pending: Pending
    response: LeaveGroupResponse | None = None
    error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class OffsetCommitOutcome:
    """Routed input: the answer or failure of a commit (``pending.token`` names it)."""

    pending: Pending
    response: OffsetCommitResponse | None = None
    error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class FindCoordinatorOutcome:
    """Routed input: the answer or failure of our coordinator lookup."""

    pending: Pending
    response: FindCoordinatorResponse | None = None
    error: CoopConsumerError | None = None
    api_version: int | None = None


@attrs.frozen(kw_only=True)
class OffsetFetchOutcome:
    """Routed input: the answer or failure of an OffsetFetch (``pending.token`` is the
    fetch it serves)."""

    pending: Pending
    response: OffsetFetchResponse | None = None
    error: CoopConsumerError | None = None
    api_version: int | None = None


Outcome = (
    JoinGroupOutcome
    | SyncGroupOutcome
    | HeartbeatOutcome
    | LeaveGroupOutcome
    | OffsetCommitOutcome
    | FindCoordinatorOutcome
    | OffsetFetchOutcome
)

#: The response type each API's answer must have (anything else is a ProtocolError).
RESPONSE_TYPES: Mapping[Api, type] = {
    Api.JOIN_GROUP: JoinGroupResponse,
    Api.SYNC_GROUP: SyncGroupResponse,
    Api.HEARTBEAT: HeartbeatResponse,
    Api.LEAVE_GROUP: LeaveGroupResponse,
    Api.OFFSET_COMMIT: OffsetCommitResponse,
    Api.FIND_COORDINATOR: FindCoordinatorResponse,
    Api.OFFSET_FETCH: OffsetFetchResponse,
    Api.METADATA: MetadataResponse,
}
