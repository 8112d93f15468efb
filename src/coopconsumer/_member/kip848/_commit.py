"""Offset commits of a KIP-848 member: OffsetCommit with the member epoch where the
classic member puts its generation (the request is built by the classic
``_core.offset_commit_request``; error codes map through the shared table).

- In the group (an epoch): sent to the coordinator.
- Joining or fenced: ``RebalanceInProgressError`` (retriable: poll, then retry).
- Not in the group: ``CommitFailedError``.
- STALE_MEMBER_EPOCH in the answer: the epoch moved on meanwhile (a revocation was
  acknowledged while the commit was on its way): the commit is sent again with the
  member's next epoch, as Java does (the error's own text: retry after the updated
  epoch comes with a heartbeat); ``RebalanceInProgressError`` only if no new epoch
  comes within ``request.timeout.ms`` or the member leaves the group meanwhile.
  UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: ``CommitFailedError`` (the heartbeat learns
  of the fencing and rejoins).

Pure: imports the core and the shared commit helpers; never I/O, threads or clocks.
"""

from __future__ import annotations

import logging

from ..._errors import CommitFailedError, RebalanceInProgressError
from ..._protocol import error_codes
from .._base import commit_fatal as commit_fatal
from .._base import commit_not_member as commit_not_member
from .._base import first_commit_error, ms, offset_commit_request
from .._effects import CommitDone
from .._error_actions import Api, ErrorAction, action_for
from .._inputs import CommitRequested
from .._manual import refuse_simple_commit
from .._outcomes import OffsetCommitOutcome
from ._core import MemberCore, StaleCommit


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
                error=error_codes.to_exception(
                    error_codes.COORDINATOR_NOT_AVAILABLE, api_key=Api.OFFSET_COMMIT.value
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
    m.commits_sent.append(event)


def _take_sent(m: MemberCore, token: object) -> CommitRequested | None:
    """The commit in flight that ``token`` names, forgotten (None: not one of ours)."""
    for i, sent in enumerate(m.commits_sent):
        if sent.token is token:
            return m.commits_sent.pop(i)
    return None


def _stale_error() -> RebalanceInProgressError:
    return RebalanceInProgressError(
        "the offset commit carried a member epoch the group has moved past; "
        "call poll() to catch up, then retry the commit"
    )


def drive_stale_commits(m: MemberCore, now: float) -> None:
    """Send again, with the current epoch, the commits answered STALE_MEMBER_EPOCH
    once the member's epoch moved past the one they carried; fail them when the member
    is out of the group (joining again: epoch 0 or less) or their deadline passed."""
    if not m.stale_commits:
        return
    waiting, m.stale_commits = m.stale_commits, []
    for stale in waiting:
        if m.member_epoch <= 0 or now >= stale.deadline:
            m.emit(CommitDone(token=stale.event.token, error=_stale_error()))
        elif m.member_epoch != stale.epoch and m.coordinator_id is not None:
            commit_send(m, stale.event, now)
        else:
            m.stale_commits.append(stale)


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
    sent = _take_sent(m, token)
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
    if code == error_codes.STALE_MEMBER_EPOCH:
        if sent is None:
            m.emit(CommitDone(token=token, error=_stale_error()))
            return
        m.log(
            logging.DEBUG,
            f"OffsetCommit with member epoch {event.pending.generation_id} answered "
            f"{name}; sending it again with the next epoch",
        )
        m.stale_commits.append(
            StaleCommit(
                event=sent,
                epoch=event.pending.generation_id,
                deadline=now + ms(m.config.request_timeout_ms),
            )
        )
        drive_stale_commits(m, now)  # the new epoch may have come before this answer
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
                token=token, error=error_codes.to_exception(code, api_key=Api.OFFSET_COMMIT.value)
            )
        )
        m.coordinator_dead(f"{name} from OffsetCommit", now)
    else:
        m.emit(
            CommitDone(
                token=token, error=error_codes.to_exception(code, api_key=Api.OFFSET_COMMIT.value)
            )
        )
