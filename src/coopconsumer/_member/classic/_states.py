"""The group member's states (one enum, one docstring per state).

Pure: imports nothing but ``enum``. Each docstring says what the state means; which
states may follow which is the transition table's business (``_table.py``), from which
the predecessors of every state are derived and drawn in docs/architecture.md.
"""

from __future__ import annotations

import enum

__all__ = [
    "HEARTBEAT_STATES",
    "JOIN_REQUEST_STATES",
    "JOIN_STAGE_STATES",
    "REBALANCING_STATES",
    "TERMINAL_STATES",
    "MemberState",
]


class MemberState(enum.Enum):
    """Where a ``GroupMember`` is in the classic group protocol."""

    UNJOINED = "unjoined"
    """Not subscribed (initial state), or unsubscribed after a ``LeaveRequested``."""

    MANUAL = "manual"
    """The application assigned partitions itself (``AssignRequested``; never empty
    here): not a group member, so no JoinGroup, heartbeats, LeaveGroup or listeners.
    Commits carry generation -1 and an empty member id (Kafka's "simple consumer"
    commit, accepted only while the group has no members); committed offsets and the
    coordinator are looked up as in the group states. ``Subscribe`` is refused here,
    and ``AssignRequested`` in the group states (docs/architecture.md, "Manual
    assignment")."""

    PREPARING_JOIN = "preparing-join"
    """A (re)join is due. Runs the pre-join listeners first: LOST for every owned
    partition when the generation was reset, then REVOKED for every owned partition
    (EAGER) or for owned partitions no longer subscribed (COOPERATIVE), and waits for
    every outstanding listener to complete before JoinGroup. Carries the rejoin reason."""

    JOINING = "joining"
    """A JoinGroup is in flight, or waits for the coordinator or a retry backoff.
    While none is in flight and it still has a generation, it times its session: at
    expiry its partitions are LOST and it rejoins as a new member (PREPARING_JOIN)."""

    LEADER_AWAITING_METADATA = "leader-awaiting-metadata"
    """Elected leader, before its SyncGroup. With followers: it asked for fresh
    metadata of the group subscription (``MetadataNeeded``, as librdkafka's leader
    does), assigns when the ``MetadataUpdate`` answering it arrives, and sends SyncGroup
    once ``LEADER_SYNC_DELAY_S`` has passed since its JoinGroup answer, so that the
    followers sync first. Alone: only when its metadata lacks topics of the group
    subscription (Java's rule), and it syncs as soon as it has assigned."""

    AWAITING_SYNC = "awaiting-sync"
    """A SyncGroup is in flight (the leader's carries every member's assignment); the
    coordinator holds it, so the session is not timed locally."""

    ASSIGNING = "assigning"
    """SyncGroup succeeded: applying the assignment. COOPERATIVE: REVOKED for owned
    partitions not assigned any more (then Unassign, and a follow-up rebalance is
    owed), then ``on_assignment``, then Assign + ASSIGNED for the added partitions."""

    STABLE = "stable"
    """In a generation with an applied assignment; heartbeating."""

    POLL_EXPIRED = "poll-expired"
    """``max.poll.interval.ms`` passed without a poll: the member left the group (a
    dynamic member sent LeaveGroup), dropped its partitions as LOST and waits for the
    next ``PollCalled`` to rejoin with a reset generation."""

    LEAVING = "leaving"
    """Closing or unsubscribing: REVOKED (or LOST when the generation is gone or a
    rebalance is in progress, as Java's ``onLeavePrepare``) for owned partitions, then
    LeaveGroup unless this is a static member closing without ``leave_group``."""

    CLOSED = "closed"
    """Terminal: the member is closed."""

    FATAL = "fatal"
    """Terminal: a non-recoverable error (``Fatal`` effect) such as FENCED_INSTANCE_ID
    or GROUP_AUTHORIZATION_FAILED. Only ``CloseRequested`` leaves it (to CLOSED)."""

    @property
    def stopped(self) -> bool:
        """Closed, or failed for good: nothing but ``CloseRequested`` moves it."""
        return self in TERMINAL_STATES

    @property
    def unjoined(self) -> bool:
        """Out of the group after an unsubscribe (or never in it)."""
        return self is MemberState.UNJOINED

    @property
    def manual(self) -> bool:
        """Partitions assigned by the application, not by a group."""
        return self is MemberState.MANUAL

    @property
    def quiet(self) -> bool:
        """The member queues no work for ``poll()`` until the application acts, or until
        it has joined and synced a rebalance on the driver thread (so ``poll()`` may
        wait longer between looks)."""
        return self in (MemberState.STABLE, MemberState.MANUAL)

    @property
    def rejoining(self) -> bool:
        """A JoinGroup or SyncGroup is under way: the generation a transactional commit
        would carry is about to be superseded."""
        return self in (
            MemberState.PREPARING_JOIN,
            MemberState.JOINING,
            MemberState.LEADER_AWAITING_METADATA,
            MemberState.AWAITING_SYNC,
        )


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

#: States in which a JoinGroup or SyncGroup is under way (Java's PREPARING_REBALANCE and
#: COMPLETING_REBALANCE): leaving from one reports the partitions lost, and a commit
#: cannot be made with a generation until the SyncGroup answer.
JOIN_STAGE_STATES = frozenset(
    {MemberState.JOINING, MemberState.LEADER_AWAITING_METADATA, MemberState.AWAITING_SYNC}
)

#: States in which a rebalance is in progress (commits get RebalanceInProgressError
#: unless the generation is still valid, see ``_commit``).
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
