"""``dispatch``: one input through a member's transition table, for both protocols.

The classic ``GroupMember`` and KIP-848's ``ConsumerGroupMember`` handle an input the
same way: an answer is routed to its per-API outcome first (``route``, the one place
stale answers are dropped), the ``(state, input type)`` pair is looked up in the
member's table (an unknown pair raises ``IllegalTransition`` and changes nothing),
the bookkeeping every state does is done, and the row's handler runs, allowed to move
the member only to the states its row lists (docs/architecture.md, "The group
member's state machine"). The bookkeeping: a finished listener releases its
partitions, a poll is remembered, a ``Tick`` sends a Metadata refresh that is due and
a ``MetadataUpdate`` fed by a test harness answers the refresh in flight
(``_metadata.py``), and a ``ConnectionLost`` un-proves the coordinator's connection
(``MemberBase.connection_lost``; the table ignores it in every state).

Pure: no sockets, threads or clocks.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from .._transition_table import IllegalTransition, Transition
from ._base import GroupHost
from ._effects import Effect
from ._inputs import (
    ConnectionLost,
    ListenerDone,
    MetadataUpdate,
    PollCalled,
    RequestFailed,
    ResponseReceived,
    Tick,
)
from ._metadata import answered_directly, refresh_metadata

__all__ = ["dispatch"]


def dispatch(
    core: GroupHost,
    event: object,
    now: float,
    transitions: Mapping[tuple[Any, type], Transition[Any]],
    ignored: Collection[tuple[Any, type]],
) -> list[Effect]:
    """Handle ``event`` at ``now``; return the effects to execute, in order."""
    core.fx = []
    routed: object = event
    if isinstance(event, ResponseReceived | RequestFailed):
        outcome = core.route(event, now)
        if outcome is None:
            return core.fx
        routed = outcome
    elif isinstance(event, ListenerDone) and event.invocation_id not in core.listeners:
        raise IllegalTransition(
            core.state, ListenerDone, f"no listener {event.invocation_id} outstanding"
        )
    key = (core.state, type(routed))
    row = transitions.get(key)
    if row is None and key not in ignored:
        raise IllegalTransition(core.state, type(routed))
    # State-independent bookkeeping, done even where the state ignores the input.
    if isinstance(routed, ListenerDone):
        core.complete_listener(routed)
    elif isinstance(routed, PollCalled):
        core.last_poll = now
    elif isinstance(routed, Tick):
        refresh_metadata(core, now)
    elif isinstance(routed, ConnectionLost):
        core.connection_lost(routed.node_id)
    elif routed is event and isinstance(event, MetadataUpdate):
        answered = answered_directly(core, now)
        if answered is not None:
            core.pending.pop(answered, None)
    if row is not None:
        assert row.handler is not None  # a member's rows all name one
        core.begin(type(routed), row.next_states)
        row.handler(core, routed, now)
    return core.fx
