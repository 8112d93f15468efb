"""The sync phase: AWAITING_SYNC and ASSIGNING.

SyncGroup's answer and its errors, then applying the assignment: REVOKED for what is
taken away (KIP-429 3.3, a follow-up rebalance under COOPERATIVE), ``on_assignment``,
then Assign and ASSIGNED for what is added, and STABLE. ``_table.py`` says which state
and input each handler serves and where it may move the member.

Pure: imports the core and the join, leave and stable phases; never I/O, threads or clocks.
"""

from __future__ import annotations

from ... import consumer_protocol
from ..._errors import AssignorError, ProtocolError
from ..._protocol import error_codes
from ..._types import TopicPartition
from ...assignors._api import Assignment, RebalanceProtocol
from .._diff import diff_assignment
from .._effects import Assign, ListenerKind, Observation, ReportError
from .._error_actions import Api, ErrorAction, action_for
from .._inputs import ListenerDone
from .._outcomes import SyncGroupOutcome
from ._core import PROTOCOL_TYPE, MemberCore
from ._join import enter_prepare, rejoin_now
from ._leave import leave_if_pending
from ._stable import check_rejoin_needed
from ._states import MemberState


def _sorted(partitions: frozenset[TopicPartition] | set[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in sorted(partitions)) or "none"


def sync_outcome(m: MemberCore, event: SyncGroupOutcome, now: float) -> None:
    if event.error is not None or event.response is None:
        m.rebalance_failed(now)
        m.coordinator_dead(f"SyncGroup failed: {event.error}", now)
        rejoin_now(m, f"SyncGroup failed: {event.error}", now)
        return
    response = event.response
    code = response.error_code
    if code != error_codes.NONE:
        m.rebalance_failed(now)
        name = error_codes.info(code).name
        action = action_for(Api.SYNC_GROUP, code)
        if action is ErrorAction.FATAL:
            m.fatal(m.kafka_error(code, Api.SYNC_GROUP), now)
        elif action is ErrorAction.RESET_AND_REJOIN:
            m.reset_generation(clear_member_id=code == error_codes.UNKNOWN_MEMBER_ID)
            enter_prepare(m, f"encountered {name} from SyncGroup", now)
        elif action is ErrorAction.FIND_COORDINATOR:
            m.coordinator_dead(f"{name} from SyncGroup", now)
            rejoin_now(m, f"encountered {name} from SyncGroup", now, backoff=True)
        elif action is ErrorAction.REPORT_AND_REJOIN:
            m.emit(ReportError(error=m.kafka_error(code, Api.SYNC_GROUP)))
            reason = f"rebalance failed: unexpected {name} from SyncGroup"
            rejoin_now(m, reason, now, backoff=True)
        else:  # REBALANCE_IN_PROGRESS and the like: rejoin at once
            rejoin_now(m, f"encountered {name} from SyncGroup", now)
        return
    if response.protocol_type is not None and response.protocol_type != PROTOCOL_TYPE:
        m.fatal(m.inconsistent(Api.SYNC_GROUP, response.protocol_type), now)
        return
    # As Java's SyncGroup handler: sync-latency for error NONE with a consistent
    # protocol type (error responses are not recorded, unlike heartbeats and commits).
    m.observe(Observation.SYNC_COMPLETED, now, now - event.pending.sent_at)
    if response.protocol_name is not None and response.protocol_name != m.protocol_name:
        m.fatal(m.inconsistent(Api.SYNC_GROUP, f"protocol {response.protocol_name!r}"), now)
        return
    m.session_ok_at = now
    if leave_if_pending(m, now, synced=True):
        return  # the generation is valid: leave from here, committing first
    try:
        assignment = consumer_protocol.decode_assignment(response.assignment, member_id=m.member_id)
    except Exception as exc:
        error = (
            exc
            if isinstance(exc, ProtocolError)
            else ProtocolError(f"malformed assignment: {exc}", member_id=m.member_id)
        )
        m.emit(ReportError(error=error))
        enter_prepare(m, f"could not decode the assignment: {error}", now)
        return
    assigned = frozenset(assignment.partitions)
    unsubscribed = sorted({tp.topic for tp in assigned} - m.subscribed)
    if unsubscribed:
        # Java: the subscription changed since the join; apply nothing and rejoin.
        enter_prepare(
            m,
            f"received an assignment with topics [{', '.join(unsubscribed)}] outside the "
            f"current subscription",
            now,
        )
        return
    start_assigning(m, assignment, now)


def start_assigning(m: MemberCore, assignment: Assignment, now: float) -> None:
    m.enter(MemberState.ASSIGNING)
    m.assignment_to_apply = assignment
    m.assigned_generation_id = m.generation_id
    m.follow_up_reason = None
    diff = diff_assignment(m.owned, assignment.partitions)
    if diff.revoked:
        # KIP-429 3.3: revoke before the assignment changes, then rejoin.
        m.revoke(diff.revoked)
        if m.protocol is RebalanceProtocol.COOPERATIVE:
            m.follow_up_reason = (
                f"need to revoke partitions [{_sorted(set(diff.revoked))}] as indicated by "
                f"the current assignment and re-join"
            )
    assign_step(m, now)


def assign_step(m: MemberCore, now: float) -> None:
    """ASSIGNING's two steps, each once no listener is outstanding: apply the
    assignment (after the REVOKED listener of what it takes away), then, after the
    ASSIGNED listener, finish the rebalance."""
    if m.listeners:
        return
    assignment = m.assignment_to_apply
    if assignment is not None:
        m.assignment_to_apply = None
        assert m.protocol_name is not None
        assignor = m.assignor_by_name[m.protocol_name]
        try:
            assignor.on_assignment(assignment, m.group_metadata)
        except Exception as exc:  # user code; KIP-429: report, keep going
            error = AssignorError(
                f"assignor {assignor.name!r} on_assignment raised {type(exc).__name__}: {exc}"
            )
            error.__cause__ = exc
            m.emit(ReportError(error=error))
        assigned = frozenset(assignment.partitions)
        added = assigned - m.owned
        m.owned = set(assigned)
        if added:
            m.emit(Assign(partitions=added))
        m.invoke(ListenerKind.ASSIGNED, added)  # always, even empty (KIP-429)
        return
    started = m.rebalance_started_at
    m.rebalance_started_at = None
    m.observe(Observation.REBALANCE_COMPLETED, now, None if started is None else now - started)
    follow_up = m.follow_up_reason
    m.follow_up_reason = None
    if follow_up is not None:
        enter_prepare(m, follow_up, now)
        return
    m.enter(MemberState.STABLE)
    check_rejoin_needed(m, now)


def assign_listener_done(m: MemberCore, event: ListenerDone, now: float) -> None:
    assign_step(m, now)
