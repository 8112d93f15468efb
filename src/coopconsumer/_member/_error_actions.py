"""Error code -> action: the one table the member consults for every response error.

A default action per error code, overridden per API where Java's response handlers
differ (``AbstractCoordinator``'s Join/Sync/Heartbeat/LeaveGroup handlers and
``ConsumerCoordinator``'s OffsetCommit handler) and for KIP-848's
ConsumerGroupHeartbeat. Pure: imports only the error table.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from .._protocol import error_codes

__all__ = ["Api", "ErrorAction", "action_for"]


class Api(enum.Enum):
    """The group APIs whose error codes the member acts on (value = Kafka API key)."""

    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    CONSUMER_GROUP_HEARTBEAT = 68


class ErrorAction(enum.Enum):
    """What the member does about an error code."""

    RETRY = "retry"
    """Send the same request again after ``retry.backoff.ms`` (JoinGroup); for a
    commit: fail it with a retriable error (the Consumer decides to retry)."""

    FIND_COORDINATOR = "find-coordinator"
    """Mark the coordinator unknown and look it up again; the request's own follow-up
    (rejoin, retriable commit failure) as for RETRY."""

    RESET_AND_REJOIN = "reset-and-rejoin"
    """Generation reset (and member id cleared for UNKNOWN_MEMBER_ID): owned
    partitions are LOST, then rejoin with nothing owned (KIP-429 1.4)."""

    REJOIN = "rejoin"
    """Rejoin keeping the generation and owned partitions (REBALANCE_IN_PROGRESS)."""

    MEMBER_ID_REQUIRED = "member-id-required"
    """Take the member id from the JoinGroup response and rejoin at once (KIP-394)."""

    FAIL_REQUEST = "fail-request"
    """Only this request fails (a commit's KafkaError); the group state is unchanged."""

    IGNORE = "ignore"
    """Nothing to do (e.g. REBALANCE_IN_PROGRESS on a heartbeat mid-rebalance; any
    LeaveGroup error: the member is gone either way)."""

    REPORT_AND_REJOIN = "report-and-rejoin"
    """An error this API should not see: raise it from the next ``poll()``
    (``ReportError``) and rejoin after ``retry.backoff.ms``, keeping what is owned (Java's
    ``joinGroupIfNeeded`` requests a rejoin, then throws the "Unexpected error")."""

    FATAL = "fatal"
    """The member cannot continue: FATAL state, ``Fatal`` effect."""


_DEFAULTS: Mapping[int, ErrorAction] = MappingProxyType(
    {
        error_codes.COORDINATOR_LOAD_IN_PROGRESS: ErrorAction.RETRY,
        error_codes.COORDINATOR_NOT_AVAILABLE: ErrorAction.FIND_COORDINATOR,
        error_codes.NOT_COORDINATOR: ErrorAction.FIND_COORDINATOR,
        error_codes.REQUEST_TIMED_OUT: ErrorAction.FIND_COORDINATOR,
        error_codes.UNKNOWN_MEMBER_ID: ErrorAction.RESET_AND_REJOIN,
        error_codes.ILLEGAL_GENERATION: ErrorAction.RESET_AND_REJOIN,
        error_codes.REBALANCE_IN_PROGRESS: ErrorAction.REJOIN,
        error_codes.MEMBER_ID_REQUIRED: ErrorAction.MEMBER_ID_REQUIRED,
        error_codes.FENCED_INSTANCE_ID: ErrorAction.FATAL,
        error_codes.GROUP_AUTHORIZATION_FAILED: ErrorAction.FATAL,
        error_codes.INCONSISTENT_GROUP_PROTOCOL: ErrorAction.FATAL,
        error_codes.INVALID_SESSION_TIMEOUT: ErrorAction.FATAL,
        error_codes.INVALID_GROUP_ID: ErrorAction.FATAL,
        error_codes.GROUP_MAX_SIZE_REACHED: ErrorAction.FATAL,
        error_codes.UNSUPPORTED_VERSION: ErrorAction.FATAL,
        error_codes.GROUP_ID_NOT_FOUND: ErrorAction.FATAL,
    }
)

_OVERRIDES: Mapping[tuple[Api, int], ErrorAction] = MappingProxyType(
    {
        # Java's SyncGroup handler: coordinator loss means rejoin, not resend.
        (Api.SYNC_GROUP, error_codes.COORDINATOR_LOAD_IN_PROGRESS): ErrorAction.REJOIN,
        # Java's OffsetCommit handler: per-partition errors only fail the commit.
        (Api.OFFSET_COMMIT, error_codes.UNKNOWN_TOPIC_OR_PARTITION): ErrorAction.RETRY,
        (Api.OFFSET_COMMIT, error_codes.OFFSET_METADATA_TOO_LARGE): ErrorAction.FAIL_REQUEST,
        (Api.OFFSET_COMMIT, error_codes.INVALID_COMMIT_OFFSET_SIZE): ErrorAction.FAIL_REQUEST,
        (Api.OFFSET_COMMIT, error_codes.TOPIC_AUTHORIZATION_FAILED): ErrorAction.FAIL_REQUEST,
        (Api.OFFSET_COMMIT, error_codes.UNSTABLE_OFFSET_COMMIT): ErrorAction.RETRY,
        # Java's OffsetFetch handler: a pending transactional offset (KIP-447) and a
        # coordinator still loading are retried; errors about the member or the group
        # only fail this fetch (they reach the group through its own requests).
        (Api.OFFSET_FETCH, error_codes.UNSTABLE_OFFSET_COMMIT): ErrorAction.RETRY,
        **{
            (Api.OFFSET_FETCH, code): ErrorAction.FAIL_REQUEST
            for code, action in _DEFAULTS.items()
            if action
            in (
                ErrorAction.RESET_AND_REJOIN,
                ErrorAction.REJOIN,
                ErrorAction.MEMBER_ID_REQUIRED,
                ErrorAction.FATAL,
            )
        },
        # KIP-848's heartbeat (Java's ConsumerHeartbeatRequestManager): a fenced epoch is
        # a reset (partitions lost, rejoin at epoch 0); what the group or the member's
        # settings refuse cannot be retried.
        (
            Api.CONSUMER_GROUP_HEARTBEAT,
            error_codes.FENCED_MEMBER_EPOCH,
        ): ErrorAction.RESET_AND_REJOIN,
        (Api.CONSUMER_GROUP_HEARTBEAT, error_codes.UNRELEASED_INSTANCE_ID): ErrorAction.FATAL,
        (Api.CONSUMER_GROUP_HEARTBEAT, error_codes.UNSUPPORTED_ASSIGNOR): ErrorAction.FATAL,
        (Api.CONSUMER_GROUP_HEARTBEAT, error_codes.INVALID_REQUEST): ErrorAction.FATAL,
        (Api.CONSUMER_GROUP_HEARTBEAT, error_codes.INVALID_REGULAR_EXPRESSION): ErrorAction.FATAL,
        # A commit with a member epoch the coordinator has moved past (KIP-848): the
        # member learns the new epoch from its next heartbeat; the commit may be retried.
        (Api.OFFSET_COMMIT, error_codes.STALE_MEMBER_EPOCH): ErrorAction.RETRY,
        (Api.OFFSET_COMMIT, error_codes.FENCED_MEMBER_EPOCH): ErrorAction.RESET_AND_REJOIN,
        # A member that is leaving does not care why the coordinator objects.
        **{
            (Api.LEAVE_GROUP, code): ErrorAction.IGNORE
            for code in (
                error_codes.UNKNOWN_MEMBER_ID,
                error_codes.ILLEGAL_GENERATION,
                error_codes.REBALANCE_IN_PROGRESS,
                error_codes.COORDINATOR_LOAD_IN_PROGRESS,
                error_codes.COORDINATOR_NOT_AVAILABLE,
                error_codes.NOT_COORDINATOR,
                error_codes.FENCED_INSTANCE_ID,
            )
        },
    }
)


def action_for(api: Api, code: int) -> ErrorAction:
    """The action for error ``code`` (non-zero) answered to ``api``.

    Unlisted codes: a commit or an offset fetch fails with the error (retriable or
    not, as Kafka's table says); a LeaveGroup error is ignored; a retriable code is
    retried; any other code on JoinGroup/SyncGroup is reported and the member rejoins,
    and on a heartbeat it only waits for the next heartbeat (Java's heartbeat thread
    logs it and carries on).
    """
    found = _OVERRIDES.get((api, code))
    if found is not None:
        return found
    found = _DEFAULTS.get(code)
    if found is not None:
        return found
    if api in (Api.OFFSET_COMMIT, Api.OFFSET_FETCH):
        return ErrorAction.RETRY if error_codes.is_retriable(code) else ErrorAction.FAIL_REQUEST
    if api is Api.LEAVE_GROUP:
        return ErrorAction.IGNORE
    if error_codes.is_retriable(code) or api is Api.HEARTBEAT:
        return ErrorAction.RETRY
    if api is Api.CONSUMER_GROUP_HEARTBEAT:
        # Java's consumer-protocol member treats an unexpected heartbeat error as fatal.
        return ErrorAction.FATAL
    return ErrorAction.REPORT_AND_REJOIN
