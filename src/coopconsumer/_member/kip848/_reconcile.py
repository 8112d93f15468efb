"""Reconciling the target assignment (KIP-848), one reconciliation at a time.

The target's topic ids are resolved through Metadata (``MetadataUpdate.topic_ids``);
ids not known yet wait for the next update (Java reconciles the resolvable part and
keeps the rest for later). The diff against what is owned is the classic one
(``_diff.diff_assignment``). Revoke first: commit before revoke (``enable.auto.commit``),
``on_partitions_revoked``, Unassign when it returns; then Assign and
``on_partitions_assigned`` for what was added (called even when empty, as the classic
member). Then ACKNOWLEDGING: the next heartbeat, sent at once, reports what is owned;
when nothing was added it goes out as the empty ``on_partitions_assigned`` is invoked,
not after it returns, since the partitions released wait for it.

Pure: imports the core and the shared diff; never I/O, threads or clocks.
"""

from __future__ import annotations

from ..._types import TopicPartition
from .._diff import diff_assignment
from .._effects import Assign, ListenerKind, Observation
from .._inputs import ListenerDone
from .._metadata import want_metadata
from ._core import MemberCore
from ._states import ConsumerMemberState

JOINING = ConsumerMemberState.JOINING
RECONCILING = ConsumerMemberState.RECONCILING
ACKNOWLEDGING = ConsumerMemberState.ACKNOWLEDGING
STABLE = ConsumerMemberState.STABLE


def resolved_target(m: MemberCore) -> tuple[frozenset[TopicPartition], bool]:
    """The target by topic name, and whether some topic id is still unknown."""
    assert m.target is not None
    resolved: set[TopicPartition] = set()
    unresolved = False
    for topic_id, partition in m.target:
        name = m.topic_names.get(topic_id)
        if name is None:
            unresolved = True
        else:
            resolved.add(TopicPartition(name, partition))
    return frozenset(resolved), unresolved


def maybe_reconcile(m: MemberCore, now: float) -> None:
    """Start reconciling when a target differs from what is owned (or is the first
    one since joining), unless a reconciliation is under way."""
    if m.state not in (JOINING, ACKNOWLEDGING, STABLE) or m.target is None:
        return
    if m.member_epoch <= 0:
        return
    target, unresolved = resolved_target(m)
    if unresolved:
        sub = m.subscription
        every = sub is not None and (sub.pattern is not None or sub.regex is not None)
        want_metadata(m, None if every else m.subscribed, now)
    if m.state is not JOINING and target == frozenset(m.owned):
        return
    m.enter(RECONCILING)
    m.rebalance_started_at = now
    m.observe(Observation.REBALANCE_STARTED, now)
    diff = diff_assignment(m.owned, target)
    m.to_add = diff.added
    if diff.revoked:
        m.revoke(diff.revoked)  # Unassign when its ListenerDone arrives
    else:
        _assign(m, now)


def _assign(m: MemberCore, now: float) -> None:
    added = m.to_add if m.to_add is not None else frozenset()
    m.to_add = None
    if added:
        m.owned |= added
        m.emit(Assign(partitions=added))
    m.invoke(ListenerKind.ASSIGNED, added)
    if not added:
        # Nothing added: what the member owns is final, and the partitions it released
        # wait for this acknowledgement before the coordinator hands them on (issue
        # 24); the empty on_partitions_assigned runs meanwhile (its ListenerDone only
        # closes the invocation).
        _acknowledge(m, now)


def _acknowledge(m: MemberCore, now: float) -> None:
    started = m.rebalance_started_at
    m.rebalance_started_at = None
    m.observe(Observation.REBALANCE_COMPLETED, now, None if started is None else now - started)
    m.reconciled = frozenset(m.owned)
    m.enter(ACKNOWLEDGING)
    m.heartbeat_due = now


def reconcile_listener_done(m: MemberCore, event: ListenerDone, now: float) -> None:
    """A reconciliation's listener returned (the member already released what a
    REVOKED one covered): assign next, or acknowledge once the ASSIGNED one is done."""
    if m.listeners:
        return
    if m.to_add is not None:
        _assign(m, now)
        return
    _acknowledge(m, now)
