"""What the shared phase handlers need of a member: ``GroupHost``.

Coordinator lookup (``_discovery``) and committed-offset fetches (``_fetch``) behave the
same in the classic group protocol and in KIP-848's (docs/architecture.md, "Two group
protocols, one set of shared rules"). Their handlers take any member core with these
members: the classic ``MemberCore`` and KIP-848's ``kip848.MemberCore`` both have them.

Also the commit answers both members give without looking at their group state
(``commit_not_member``, ``commit_fatal``).

Pure: a typing ``Protocol`` and two handlers; never I/O, threads or clocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from .._errors import CommitFailedError, CoopConsumerError
from .._types import TopicPartition
from ._effects import CommitDone, Effect, OffsetAndMetadata
from ._error_actions import Api
from ._inputs import CommitRequested
from ._jobs import FetchJob
from ._states import CoordinatorLookup

__all__ = ["GroupHost", "HostConfig", "commit_fatal", "commit_not_member"]


class HostConfig(Protocol):
    """The settings the shared handlers read."""

    @property
    def group_id(self) -> str: ...

    @property
    def retry_backoff_ms(self) -> int: ...

    @property
    def require_stable(self) -> bool: ...

    @property
    def request_timeout_ms(self) -> int: ...


class GroupHost(Protocol):
    """A member core, as the shared handlers of ``_discovery`` and ``_fetch`` see it."""

    @property
    def config(self) -> HostConfig: ...

    coordinator_id: int | None
    live_node: int | None
    lookup: CoordinatorLookup
    lookup_retry_at: float | None
    fatal_error: CoopConsumerError | None
    fetches: dict[int, FetchJob]
    next_fetch_id: int

    def emit(self, effect: Effect) -> None: ...

    def log(self, level: int, message: str) -> None: ...

    def send(
        self,
        api: Api,
        request: object,
        now: float,
        *,
        token: object = None,
        generation: int | None = None,
    ) -> int: ...

    def cancel(self, *apis: Api) -> None: ...

    def ensure_coordinator(self, now: float) -> None: ...

    def coordinator_dead(self, reason: str, now: float) -> None: ...

    def fatal(self, error: CoopConsumerError, now: float) -> None: ...

    def finish_fetch(
        self,
        fetch_id: int,
        *,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | None] | None = None,
        error: CoopConsumerError | None = None,
    ) -> None: ...


def commit_not_member(m: GroupHost, event: CommitRequested, now: float) -> None:
    """Not in a group (never joined, left, closed): the commit cannot be made."""
    m.emit(
        CommitDone(
            token=event.token,
            error=CommitFailedError(
                "the commit cannot complete: the consumer is not part of an active group"
            ),
        )
    )


def commit_fatal(m: GroupHost, event: CommitRequested, now: float) -> None:
    """FATAL: every commit fails with the error that stopped the member."""
    assert m.fatal_error is not None
    m.emit(CommitDone(token=event.token, error=m.fatal_error))
