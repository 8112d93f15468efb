"""Offset commits of a KIP-848 member: OffsetCommit with the member epoch where the
classic member puts its generation (the request is built by the classic
``_core.offset_commit_request``; error codes map through the shared table).

- In the group (an epoch): sent to the coordinator.
- Joining or fenced: ``RebalanceInProgressError`` (retriable: poll, then retry).
- Not in the group: ``CommitFailedError``.
- STALE_MEMBER_EPOCH in the answer: the epoch moved on meanwhile,
  ``RebalanceInProgressError``; UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH:
  ``CommitFailedError`` (the heartbeat learns of the fencing and rejoins).

Pure: imports the core and the shared commit helpers; never I/O, threads or clocks.
"""

from __future__ import annotations

from ..._errors import CommitFailedError, RebalanceInProgressError
from ..._protocol import errors
from .._core import first_commit_error, offset_commit_request
from .._effects import CommitDone
from .._error_actions import Api, ErrorAction, action_for
from .._host import commit_fatal as commit_fatal
from .._host import commit_not_member as commit_not_member
from .._inputs import CommitRequested
from .._manual import refuse_simple_commit
from .._outcomes import OffsetCommitOutcome
from ._kip848_core import MemberCore


def commit_send(m: MemberCore, event: CommitRequested, now: float) -> None:
    """RECONCILING, ACKNOWLEDGING, STABLE and PREPARE_LEAVING: REVOKED listeners must
    be able to commit."""
    if not event.offsets:
        m.emit(CommitDone(token=event.token))
        return
    if m.member_epoch <= 0:
        commit_not_member(m, event, now)
        return
    if m.coordinator_id is None:
        m.ensure_coordinator(now)
        m.emit(
            CommitDone(
                token=event.token,
                error=errors.to_exception(
                    errors.COORDINATOR_NOT_AVAILABLE, api_key=Api.OFFSET_COMMIT.value
                ),
            )
        )
        return
    request = offset_commit_request(
        group_id=m.config.group_id,
        generation_id=m.member_epoch,
        member_id=m.member_id,
        group_instance_id=m.config.group_instance_id,
        offsets=event.offsets,
    )
    m.send(Api.OFFSET_COMMIT, request, now, token=event.token)


def commit_rejoining(m: MemberCore, event: CommitRequested, now: float) -> None:
    if not event.offsets:
        m.emit(CommitDone(token=event.token))
        return
    m.emit(
        CommitDone(
            token=event.token,
            error=RebalanceInProgressError(
                "the offset commit cannot complete: the consumer is joining the group; "
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
    if code == errors.NONE:
        m.emit(CommitDone(token=token))
        return
    if refuse_simple_commit(m, event, code):
        return
    name = errors.info(code).name
    action = action_for(Api.OFFSET_COMMIT, code)
    if code == errors.STALE_MEMBER_EPOCH:
        m.emit(
            CommitDone(
                token=token,
                error=RebalanceInProgressError(
                    "the offset commit carried a member epoch the group has moved past; "
                    "call poll() to catch up, then retry the commit"
                ),
            )
        )
    elif action is ErrorAction.RESET_AND_REJOIN:
        m.emit(
            CommitDone(
                token=token,
                error=CommitFailedError(
                    f"the commit failed with {name}: the member was fenced and its "
                    f"partitions may have been reassigned"
                ),
            )
        )
    elif action is ErrorAction.FIND_COORDINATOR:
        m.emit(
            CommitDone(
                token=token, error=errors.to_exception(code, api_key=Api.OFFSET_COMMIT.value)
            )
        )
        m.coordinator_dead(f"{name} from OffsetCommit", now)
    else:
        m.emit(
            CommitDone(
                token=token, error=errors.to_exception(code, api_key=Api.OFFSET_COMMIT.value)
            )
        )
