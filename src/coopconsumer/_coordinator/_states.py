"""The group member's states (one enum, one docstring per state).

Pure: imports nothing but ``enum``. Each docstring names the valid predecessors, in the
manner of Kafka's ``MemberState.java``.
"""

from __future__ import annotations

import enum

__all__ = [
    "HEARTBEAT_STATES",
    "JOIN_REQUEST_STATES",
    "REBALANCING_STATES",
    "TERMINAL_STATES",
    "MemberState",
]


class MemberState(enum.Enum):
    """Where a ``GroupMember`` is in the classic group protocol."""

    UNJOINED = "unjoined"
    """Not subscribed (initial state), or unsubscribed after a ``LeaveRequested``.

    Predecessors: none (initial), LEAVING (after an unsubscribe)."""

    PREPARING_JOIN = "preparing-join"
    """A (re)join is due. Runs the pre-join listeners first: LOST for every owned
    partition when the generation was reset, then REVOKED for every owned partition
    (EAGER) or for owned partitions no longer subscribed (COOPERATIVE), and waits for
    every outstanding listener to complete before JoinGroup. Carries the rejoin reason.

    Predecessors: UNJOINED (subscribe), STABLE, ASSIGNING (follow-up rebalance or a
    reset), JOINING/AWAITING_SYNC/LEADER_AWAITING_METADATA (a reset generation),
    POLL_EXPIRED (the next poll)."""

    JOINING = "joining"
    """A JoinGroup is in flight, or waits for the coordinator or a retry backoff.
    While none is in flight and it still has a generation, it times its session: at
    expiry its partitions are LOST and it rejoins as a new member (PREPARING_JOIN).

    Predecessors: PREPARING_JOIN, JOINING (MEMBER_ID_REQUIRED, retriable errors),
    AWAITING_SYNC and LEADER_AWAITING_METADATA (REBALANCE_IN_PROGRESS, coordinator
    loss, an assignment failure)."""

    LEADER_AWAITING_METADATA = "leader-awaiting-metadata"
    """The leader's metadata lacks topics of the group subscription: it asked for
    metadata (``MetadataNeeded``) and assigns when the next ``MetadataUpdate`` arrives
    (Java's leader refreshes metadata before assigning).

    Predecessors: JOINING."""

    AWAITING_SYNC = "awaiting-sync"
    """A SyncGroup is in flight (the leader's carries every member's assignment); the
    coordinator holds it, so the session is not timed locally.

    Predecessors: JOINING, LEADER_AWAITING_METADATA."""

    ASSIGNING = "assigning"
    """SyncGroup succeeded: applying the assignment. COOPERATIVE: REVOKED for owned
    partitions not assigned any more (then Unassign, and a follow-up rebalance is
    owed), then ``on_assignment``, then Assign + ASSIGNED for the added partitions.

    Predecessors: AWAITING_SYNC."""

    STABLE = "stable"
    """In a generation with an applied assignment; heartbeating.

    Predecessors: ASSIGNING."""

    POLL_EXPIRED = "poll-expired"
    """``max.poll.interval.ms`` passed without a poll: the member left the group (a
    dynamic member sent LeaveGroup), dropped its partitions as LOST and waits for the
    next ``PollCalled`` to rejoin with a reset generation.

    Predecessors: PREPARING_JOIN, LEADER_AWAITING_METADATA, ASSIGNING, STABLE."""

    LEAVING = "leaving"
    """Closing or unsubscribing: REVOKED (or LOST when the generation is gone or a
    rebalance is in progress, as Java's ``onLeavePrepare``) for owned partitions, then
    LeaveGroup unless this is a static member closing without ``leave_group``.

    Predecessors: every state but CLOSED and FATAL."""

    CLOSED = "closed"
    """Terminal: the member is closed. Predecessors: LEAVING, FATAL, UNJOINED."""

    FATAL = "fatal"
    """Terminal: a non-recoverable error (``Fatal`` effect) such as FENCED_INSTANCE_ID
    or GROUP_AUTHORIZATION_FAILED. Only ``CloseRequested`` leaves it (to CLOSED).

    Predecessors: every state but CLOSED."""


#: States in which the member heartbeats and watches the session and poll timeouts.
#: (PREPARING_JOIN only while it still holds a generation.)
HEARTBEAT_STATES = frozenset(
    {
        MemberState.PREPARING_JOIN,
        MemberState.LEADER_AWAITING_METADATA,
        MemberState.ASSIGNING,
        MemberState.STABLE,
    }
)

#: States that do not heartbeat but may still own partitions with a generation: the
#: coordinator keeps the session alive only while their JoinGroup/SyncGroup is in
#: flight, so the member times its session locally whenever none is (waiting for the
#: coordinator, a lookup or a retry backoff).
JOIN_REQUEST_STATES = frozenset({MemberState.JOINING, MemberState.AWAITING_SYNC})

#: States in which a rebalance is in progress (commits get RebalanceInProgressError
#: unless the generation is still valid, see ``GroupMember`` commit rules).
REBALANCING_STATES = frozenset(
    {
        MemberState.PREPARING_JOIN,
        MemberState.JOINING,
        MemberState.LEADER_AWAITING_METADATA,
        MemberState.AWAITING_SYNC,
        MemberState.ASSIGNING,
    }
)

TERMINAL_STATES = frozenset({MemberState.CLOSED, MemberState.FATAL})
