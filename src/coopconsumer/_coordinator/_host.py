"""What the shared phase handlers take: ``GroupHost``, a member core of either protocol.

Coordinator lookup (``_discovery``), committed-offset fetches (``_fetch``), manual
assignment (``_manual``) and dispatching (``_dispatch``) behave the same in the classic
group protocol and in KIP-848's (docs/architecture.md, "Two group protocols, one set of
shared rules"). Their handlers take any ``_base.MemberBase``: the classic
``MemberCore`` and KIP-848's ``kip848.MemberCore`` both are one.

Also the commit answers both members give without looking at their group state
(``commit_not_member``, ``commit_fatal``).

Pure: a type alias and two handlers; never I/O, threads or clocks.
"""

from __future__ import annotations

from typing import Any

from .._errors import CommitFailedError
from ._base import MemberBase
from ._effects import CommitDone
from ._inputs import CommitRequested

__all__ = ["GroupHost", "commit_fatal", "commit_not_member"]


#: A member core of either group protocol, as the shared handlers see it.
GroupHost = MemberBase[Any]


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
