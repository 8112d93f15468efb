"""Committed offsets: the group's OffsetFetch, in every live state.

A ``CommittedOffsetsRequested`` becomes a fetch job: its OffsetFetch goes to the
coordinator (looked up first if unknown), is retried after ``retry.backoff.ms`` on the
errors Java's ``fetchCommittedOffsets`` retries (a coordinator loading or gone, a
transaction still holding offsets under KIP-447's ``require_stable``, a lost
connection), and ends in exactly one ``CommittedOffsetsDone``: the offsets, the error,
or ``RequestTimeoutError`` at the request's deadline (naming, and caused by, the last
retriable error). Answers are read by
``_protocol.queries.offset_fetch_answer``, the one reader of OffsetFetch.

Shared by both group protocols (``_base.GroupHost``). Pure: imports only the core;
never I/O, threads or clocks.
"""

from __future__ import annotations

import logging

from .._errors import CoopConsumerError, RequestTimeoutError
from .._protocol import error_codes
from .._protocol.messages import OffsetFetchRequest
from .._protocol.queries import OffsetFetchQuery, offset_fetch_answer
from .._types import TopicPartition
from ._base import GroupHost, ms
from ._effects import CommittedOffsetsDone, OffsetAndMetadata
from ._error_actions import Api, ErrorAction, action_for
from ._inputs import CommittedOffsetsRequested
from ._offset_jobs import FetchJob
from ._outcomes import OffsetFetchOutcome


def fetch_committed(m: GroupHost, event: CommittedOffsetsRequested, now: float) -> None:
    if not event.partitions:
        m.emit(CommittedOffsetsDone(token=event.token))
        return
    fetch_id = m.next_fetch_id
    m.next_fetch_id += 1
    m.fetches[fetch_id] = FetchJob(
        partitions=event.partitions, token=event.token, deadline=now + event.timeout_s
    )
    _step(m, fetch_id, now)


def fetch_fatal(m: GroupHost, event: CommittedOffsetsRequested, now: float) -> None:
    assert m.fatal_error is not None
    m.emit(CommittedOffsetsDone(token=event.token, error=m.fatal_error))


def fetch_closed(m: GroupHost, event: CommittedOffsetsRequested, now: float) -> None:
    m.emit(
        CommittedOffsetsDone(token=event.token, error=CoopConsumerError("the consumer is closed"))
    )


def drive_fetches(m: GroupHost, now: float) -> None:
    """Time out fetches past their deadline; send those whose retry is due."""
    for fetch_id, job in list(m.fetches.items()):
        if now >= job.deadline:
            m.finish_fetch(fetch_id, error=_timed_out(job))
        else:
            _step(m, fetch_id, now)


def fetch_outcome(m: GroupHost, event: OffsetFetchOutcome, now: float) -> None:
    fetch_id = event.pending.token
    if not isinstance(fetch_id, int) or fetch_id not in m.fetches:
        # route drops answers of finished fetches; only a harness gets here
        m.log(logging.DEBUG, f"dropping an OffsetFetch answer for no fetch ({fetch_id!r})")
        return
    job = m.fetches[fetch_id]
    job.request_id = None
    response = event.response
    if event.error is not None or response is None:
        m.coordinator_dead(f"OffsetFetch failed: {event.error}", now)
        _retry(m, fetch_id, event.error, now)
        return
    version = event.api_version
    if version is None:  # not said: read the layout the answer has
        version = 8 if response.groups else 7
    answer = offset_fetch_answer(response, m.config.group_id, version)
    code = answer.error_code
    offsets: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(job.partitions)
    for (topic, partition), row in answer.partitions.items():
        tp = TopicPartition(topic, partition)
        if tp not in offsets or code != error_codes.NONE:
            continue
        if row.error_code == error_codes.UNKNOWN_TOPIC_OR_PARTITION:
            continue  # nothing committed for a partition the broker does not know
        if row.error_code != error_codes.NONE:
            code = row.error_code
        elif row.offset >= 0:
            offsets[tp] = OffsetAndMetadata(
                offset=row.offset, metadata=row.metadata or "", leader_epoch=row.leader_epoch
            )
    if code == error_codes.NONE:
        m.finish_fetch(fetch_id, offsets=offsets)
        return
    error = error_codes.to_exception(code, api_key=OffsetFetchRequest.API_KEY, api_version=version)
    action = action_for(Api.OFFSET_FETCH, code)
    if action is ErrorAction.FIND_COORDINATOR:
        m.coordinator_dead(f"{error_codes.info(code).name} from OffsetFetch", now)
        _retry(m, fetch_id, error, now)
    elif action is ErrorAction.RETRY:
        _retry(m, fetch_id, error, now)
    else:
        m.finish_fetch(fetch_id, error=error)


def _step(m: GroupHost, fetch_id: int, now: float) -> None:
    job = m.fetches[fetch_id]
    if job.request_id is not None or (job.retry_at is not None and now < job.retry_at):
        return
    if m.coordinator_id is None:
        m.ensure_coordinator(now)  # CoordinatorFound drives this fetch again
        return
    job.retry_at = None
    by_topic: dict[str, tuple[int, ...]] = {}
    for tp in sorted(job.partitions):
        by_topic[tp.topic] = (*by_topic.get(tp.topic, ()), tp.partition)
    query = OffsetFetchQuery(
        group_id=m.config.group_id,
        partitions=by_topic,
        require_stable=m.config.require_stable,
    )
    job.request_id = m.send(Api.OFFSET_FETCH, query, now, token=fetch_id)


def _retry(m: GroupHost, fetch_id: int, error: CoopConsumerError | None, now: float) -> None:
    job = m.fetches[fetch_id]
    retry_at = now + ms(m.config.retry_backoff_ms)
    if retry_at >= job.deadline:
        job.last_error = error or job.last_error
        m.finish_fetch(fetch_id, error=_timed_out(job))
        return
    job.last_error = error
    job.retry_at = retry_at


def _timed_out(job: FetchJob) -> RequestTimeoutError:
    """The deadline's error, as Java's TimeoutException: it names the last retriable
    error (an open transaction's UNSTABLE_OFFSET_COMMIT, a lost connection) and
    carries it as its cause."""
    last = job.last_error
    error = RequestTimeoutError(
        f"no committed offsets for {len(job.partitions)} partition(s) within the timeout"
        + ("" if last is None else f"; the last attempt failed: {last}"),
        api_key=OffsetFetchRequest.API_KEY,
    )
    error.__cause__ = last
    return error
