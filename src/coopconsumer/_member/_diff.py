"""Pure set arithmetic of a rebalance: what a member adds, keeps and revokes.

Imports only value types; no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from .._types import TopicPartition
from ..assignors._api import RebalanceProtocol

__all__ = ["AssignmentDiff", "diff_assignment", "revoke_before_join"]


@attrs.frozen(kw_only=True)
class AssignmentDiff:
    """``added`` = assigned - owned, ``revoked`` = owned - assigned, ``kept`` = both."""

    added: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    kept: frozenset[TopicPartition]


def diff_assignment(
    owned: Iterable[TopicPartition], assigned: Iterable[TopicPartition]
) -> AssignmentDiff:
    """Split a new assignment against what the member owns (KIP-429 step 3.1)."""
    owned_set = frozenset(owned)
    assigned_set = frozenset(assigned)
    return AssignmentDiff(
        added=assigned_set - owned_set,
        revoked=owned_set - assigned_set,
        kept=owned_set & assigned_set,
    )


def revoke_before_join(
    protocol: RebalanceProtocol,
    owned: Iterable[TopicPartition],
    subscribed_topics: Iterable[str],
) -> frozenset[TopicPartition]:
    """The partitions a member with a valid generation revokes before JoinGroup.

    EAGER: everything it owns. COOPERATIVE: only partitions of topics it no longer
    subscribes to. Java's ``onJoinPrepare`` filters by subscription only: a partition of
    a deleted topic that is still subscribed is kept here and revoked after SyncGroup
    when the new assignment lacks it (KIP-429's text says "lost"; Java revokes).
    """
    owned_set = frozenset(owned)
    if protocol is RebalanceProtocol.EAGER:
        return owned_set
    topics = frozenset(subscribed_topics)
    return frozenset(tp for tp in owned_set if tp.topic not in topics)
