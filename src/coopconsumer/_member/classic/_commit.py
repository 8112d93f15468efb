"""Offset commits in every state: sent with the current generation where there is
one, failed with Java's errors where there is none, and OffsetCommit answers mapped
to ``CommitDone`` (plus a rejoin or a reset where the error says the generation is
gone). ``_table.py`` says which state and input each handler serves and where it may
move the member.

Pure: imports the core and the join and stable phases; never I/O, threads or clocks.
"""

from __future__ import annotations

from ..._errors import CommitFailedError, RebalanceInProgressError
from ..._protocol import error_codes
from .._base import commit_fatal as commit_fatal
from .._base import commit_not_member as commit_not_member
from .._base import first_commit_error
from .._effects import CommitDone
from .._error_actions import Api, ErrorAction, action_for
from .._inputs import CommitRequested
from .._manual import refuse_simple_commit
from .._outcomes import OffsetCommitOutcome
from ._core import MemberCore
from ._join import enter_prepare
from ._stable import request_rejoin
from ._states import MemberState


def commit_send(m: MemberCore, event: CommitRequested, now: float) -> None:
    """STABLE, ASSIGNING, PREPARING_JOIN and LEAVING (before LeaveGroup) commit with
    the current generation: the REVOKED listeners of PREPARING_JOIN (Java's
    ``onJoinPrepare`` runs while still STABLE) and LEAVING must be able to commit."""
    if not event.offsets:
        m.emit(CommitDone(token=event.token))
        return
    if not m.has_generation() or m.in_flight(Api.LEAVE_GROUP):
        m.emit(
            CommitDone(
                token=event.token,
                error=CommitFailedError(
                    "the commit cannot complete: the member is not in an active "
                    "generation of the group (its partitions may have been reassigned)"
                ),
            )
        )
        return
    if m.coordinator_id is None:
        m.ensure_coordinator(now)
        m.emit(
            CommitDone(
                token=event.token,
                error=m.kafka_error(error_codes.COORDINATOR_NOT_AVAILABLE, Api.OFFSET_COMMIT),
            )
        )
        return
    m.send_commit(event, now, generation_id=m.generation_id, member_id=m.member_id)


def commit_rebalancing(m: MemberCore, event: CommitRequested, now: float) -> None:
    """JoinGroup/SyncGroup in flight (Java: PREPARING_REBALANCE or
    COMPLETING_REBALANCE): no generation to commit with yet."""
    m.emit(
        CommitDone(
            token=event.token,
            error=RebalanceInProgressError(
                "the offset commit cannot complete: the consumer is rebalancing; "
                "call poll() to complete the rebalance, then retry the commit"
            ),
        )
    )


def commit_outcome(m: MemberCore, event: OffsetCommitOutcome, now: float) -> None:
    token = event.pending.token
    if event.error is not None or event.response is None:
        m.coordinator_dead(f"OffsetCommit failed: {event.error}", now)
        m.emit(CommitDone(token=token, error=event.error))
        return
    code = first_commit_error(event.response)
    if code == error_codes.NONE:
        m.emit(CommitDone(token=token))
        return
    if refuse_simple_commit(m, event, code):
        return
    name = error_codes.info(code).name
    action = action_for(Api.OFFSET_COMMIT, code)
    same_generation = (
        event.pending.generation_id == m.generation_id and event.pending.member_id == m.member_id
    )
    if action is ErrorAction.RESET_AND_REJOIN:
        m.emit(
            CommitDone(
                token=token,
                error=CommitFailedError(
                    f"the commit failed with {name}: the generation is gone and the "
                    f"partitions may have been reassigned"
                ),
            )
        )
        if same_generation and m.has_generation():
            m.reset_generation(clear_member_id=code == error_codes.UNKNOWN_MEMBER_ID)
            if m.state is not MemberState.LEAVING:
                enter_prepare(m, f"encountered {name} from OffsetCommit", now)
    elif action is ErrorAction.REJOIN:
        m.emit(
            CommitDone(
                token=token,
                error=RebalanceInProgressError(
                    "the offset commit cannot complete: the group is rebalancing; "
                    "call poll() to complete the rebalance, then retry the commit"
                ),
            )
        )
        if same_generation:
            request_rejoin(m, f"encountered {name} from OffsetCommit", now)
    elif action is ErrorAction.FIND_COORDINATOR:
        m.emit(CommitDone(token=token, error=m.kafka_error(code, Api.OFFSET_COMMIT)))
        m.coordinator_dead(f"{name} from OffsetCommit", now)
    elif action is ErrorAction.FATAL:
        error = m.kafka_error(code, Api.OFFSET_COMMIT)
        m.emit(CommitDone(token=token, error=error))
        if m.state is not MemberState.FATAL:
            m.fatal(error, now)
    else:
        m.emit(CommitDone(token=token, error=m.kafka_error(code, Api.OFFSET_COMMIT)))
