"""The KIP-848 member's states (one enum, one docstring per state).

Java's ``MemberState`` for the consumer protocol is the model. Which states may
follow which is the transition table's business (``_table.py``).

Pure: imports nothing but ``enum``.
"""

from __future__ import annotations

import enum

__all__ = ["HEARTBEAT_STATES", "IN_GROUP_STATES", "ConsumerMemberState"]


class ConsumerMemberState(enum.Enum):
    """Where a ``ConsumerGroupMember`` is in the consumer group protocol (KIP-848)."""

    UNSUBSCRIBED = "unsubscribed"
    """Not in the group: not subscribed yet, or unsubscribed (initial state)."""

    JOINING = "joining"
    """Heartbeating with member epoch 0 (every field filled in) until the coordinator
    answers with an epoch and a first target assignment."""

    RECONCILING = "reconciling"
    """A target assignment differs from what is owned: revoking first (commit before
    revoke, ``on_partitions_revoked``, Unassign), then Assign and
    ``on_partitions_assigned`` for what was added. Heartbeats go on meanwhile."""

    ACKNOWLEDGING = "acknowledging"
    """Reconciled: the next heartbeat, sent at once, reports the owned partitions."""

    STABLE = "stable"
    """Owns its acknowledged target assignment; heartbeats at the broker's interval."""

    FENCED = "fenced"
    """The coordinator fenced the member (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
    ``on_partitions_lost`` runs for what it owned; then it rejoins at epoch 0."""

    STALE = "stale"
    """``max.poll.interval.ms`` passed without a poll: the member left the group (leave
    heartbeat), its partitions were LOST, and the next ``PollCalled`` rejoins."""

    PREPARE_LEAVING = "prepare-leaving"
    """Closing or unsubscribing: ``on_partitions_revoked`` runs for what it owns (after
    the commit-before-revoke of ``enable.auto.commit``)."""

    LEAVING = "leaving"
    """The leave heartbeat (member epoch -1, or -2 for a static member) is in flight."""

    CLOSED = "closed"
    """Terminal: the member is closed."""

    MANUAL = "manual"
    """Partitions assigned by the application (``AssignRequested``), not by the
    group: no heartbeat and no listener; commits are the "simple consumer" commit
    (member epoch -1, no member id). Back to UNSUBSCRIBED when nothing is assigned
    (``_manual.py``)."""

    FATAL = "fatal"
    """Terminal: a non-recoverable error (``Fatal`` effect), such as
    UNRELEASED_INSTANCE_ID or GROUP_AUTHORIZATION_FAILED. Only ``CloseRequested``
    leaves it (to CLOSED)."""

    @property
    def stopped(self) -> bool:
        """Closed, or failed for good: nothing but ``CloseRequested`` moves it."""
        return self in (ConsumerMemberState.CLOSED, ConsumerMemberState.FATAL)

    @property
    def unjoined(self) -> bool:
        """Out of the group after an unsubscribe (or never in it)."""
        return self is ConsumerMemberState.UNSUBSCRIBED

    @property
    def manual(self) -> bool:
        """Partitions assigned by the application, not by a group."""
        return self is ConsumerMemberState.MANUAL

    @property
    def quiet(self) -> bool:
        """The member queues no work for ``poll()`` until the application acts. Not
        STABLE: a heartbeat answer there can carry a revocation that is queued at once."""
        return self is ConsumerMemberState.MANUAL

    @property
    def rejoining(self) -> bool:
        """Never: a KIP-848 member's epoch moves without a JoinGroup round, and a
        transactional commit carries the current one."""
        return False


#: States in which the member heartbeats with its epoch.
HEARTBEAT_STATES = frozenset(
    {
        ConsumerMemberState.JOINING,
        ConsumerMemberState.RECONCILING,
        ConsumerMemberState.ACKNOWLEDGING,
        ConsumerMemberState.STABLE,
    }
)

#: States in which the member is (or is becoming) part of the group.
IN_GROUP_STATES = frozenset(
    {
        *HEARTBEAT_STATES,
        ConsumerMemberState.FENCED,
        ConsumerMemberState.STALE,
    }
)
