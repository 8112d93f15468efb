"""Jobs a member core keeps beside its state: committed-offset fetches being served and
commits of a manual assignment waiting for the coordinator. Shared by both members.

Pure data.
"""

from __future__ import annotations

import attrs

from .._errors import CoopConsumerError
from .._types import TopicPartition
from ._inputs import CommitRequested

__all__ = ["FetchJob", "WaitingCommit"]


@attrs.define(kw_only=True)
class FetchJob:
    """A committed-offsets request being served (see ``_fetch``): what was asked, by
    when, and where its OffsetFetch is (in flight, or waiting for ``retry_at``)."""

    partitions: frozenset[TopicPartition]
    token: object
    deadline: float
    retry_at: float | None = None
    request_id: int | None = None
    last_error: CoopConsumerError | None = None


@attrs.frozen(kw_only=True)
class WaitingCommit:
    """A commit of a manual assignment asked for before the coordinator was found:
    sent once it is, failed (retriable) at ``deadline`` (see ``_manual``)."""

    event: CommitRequested
    deadline: float
