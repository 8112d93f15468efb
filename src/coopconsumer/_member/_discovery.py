"""Finding the group coordinator, in every live state.

The member asks for a lookup (``FindCoordinator``, from ``MemberCore.ensure_coordinator``),
reads the raw answer itself (``_protocol.queries.coordinator_answer``, the one reader of
FindCoordinator), backs off ``retry.backoff.ms`` after a failure, fails for good on an
error no retry can cure, and asks the driver to connect to the coordinator it found
(``AddCoordinator``); ``CoordinatorFound`` then resumes whatever waited for it. Where
the lookup stands is ``CoordinatorLookup``, beside the member state, not part of it
(docs/architecture.md, "Why two small enums and a pending leave are not states").
``_table.py`` says which state and input each handler serves and where it may move
the member.

Pure: imports the core and the stable phase; never I/O, threads or clocks.
"""

from __future__ import annotations

import logging

from .._errors import CoopConsumerError, KafkaError
from .._protocol import error_codes
from .._protocol.messages import FindCoordinatorRequest
from .._protocol.queries import coordinator_answer
from ._base import CoordinatorLookup, GroupHost, ms
from ._effects import AddCoordinator
from ._error_actions import Api, ErrorAction, action_for
from ._inputs import CoordinatorUnavailable
from ._outcomes import FindCoordinatorOutcome


def on_coordinator_unavailable(m: GroupHost, event: CoordinatorUnavailable, now: float) -> None:
    m.cancel(Api.FIND_COORDINATOR)
    lookup_failed(m, event.error, now)


def lookup_failed(m: GroupHost, error: CoopConsumerError | None, now: float) -> None:
    """The lookup failed: retry after ``retry.backoff.ms``, or fail for good."""
    if (
        isinstance(error, KafkaError)
        and action_for(Api.FIND_COORDINATOR, error.code) is ErrorAction.FATAL
    ):
        # e.g. GROUP_AUTHORIZATION_FAILED: no retry can succeed (Java raises it from
        # poll() instead of looking up again).
        m.fatal(error, now)
        return
    m.coordinator_id = None
    m.live_node = None
    m.lookup = CoordinatorLookup.BACKING_OFF
    m.lookup_retry_at = now + ms(m.config.retry_backoff_ms)
    if error is not None:
        m.log(logging.DEBUG, f"coordinator lookup failed: {error}")


def lookup_outcome(m: GroupHost, event: FindCoordinatorOutcome, now: float) -> None:
    """Read the FindCoordinator answer (of whichever version) for our group."""
    response = event.response
    if event.error is not None or response is None:
        lookup_failed(m, event.error, now)
        return
    version = event.api_version
    if version is None:  # not said: read the layout the answer has
        version = 4 if response.coordinators else 3
    group_id = m.config.group_id
    answer = coordinator_answer(response, group_id, version)
    if answer.error_code != error_codes.NONE:
        error = error_codes.to_exception(
            answer.error_code,
            api_key=FindCoordinatorRequest.API_KEY,
            api_version=version,
            message=answer.error_message,
        )
        level = logging.DEBUG if error.retriable else logging.WARNING
        m.log(level, f"FindCoordinator for {group_id!r}: {error}")
        lookup_failed(m, error, now)
        return
    m.emit(AddCoordinator(node_id=answer.node_id, host=answer.host, port=answer.port))
