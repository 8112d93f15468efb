"""``GroupMember``: the sans-I/O classic-group-protocol member (KIP-429 semantics).

``handle(input, now)`` routes answers to per-API outcomes (``MemberCore.route``, the
one place stale answers are dropped), looks ``(state, input type)`` up in the
transition table (``_table.py``) and runs the row's handler, which may move the
member only to the states its row allows. The handlers live in one module per phase
of the protocol: ``_join``, ``_sync``, ``_stable``, ``_commit``, ``_leave``
(docs/architecture.md, "The group member's state machine"). Java's
``ConsumerCoordinator`` and ``AbstractCoordinator`` are the behavioural reference.

Pure: no sockets, threads, clocks, ``confluent_kafka`` or ``coopconsumer._io``. Time is
the ``now`` argument (monotonic float seconds).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..._types import ConsumerGroupMetadata, TopicPartition
from ...assignors._api import ConsumerPartitionAssignor, RebalanceProtocol
from .._dispatch import dispatch
from .._effects import Effect
from .._own_commits import OwnCommits, earliest
from ._core import MemberConfig, MemberCore
from ._states import MemberState
from ._table import IGNORED, TRANSITIONS

__all__ = ["GroupMember"]


class GroupMember:
    """One consumer's membership in a classic consumer group, as a pure state machine.

    Feed inputs with ``handle(input, now)`` and execute the returned effects in order;
    call ``handle(Tick(), now)`` at ``next_deadline``. Raises ``ConfigurationError`` at
    construction if the assignors share no rebalance protocol (or there are none), and
    ``IllegalTransition`` for an input the current state rejects (the member is then
    unchanged) or a move its table row does not allow (a core bug: discard the member).
    """

    def __init__(
        self, config: MemberConfig, assignors: Sequence[ConsumerPartitionAssignor]
    ) -> None:
        self._core = MemberCore(config, assignors)
        self._commits = OwnCommits.for_config(config)

    # ------------------------------------------------------------------ properties

    @property
    def state(self) -> MemberState:
        """The current state."""
        return self._core.state

    @property
    def protocol(self) -> RebalanceProtocol:
        """EAGER or COOPERATIVE: the highest protocol all assignors support."""
        return self._core.protocol

    @property
    def member_id(self) -> str:
        """The member id ("" before the first JoinGroup answer or after a reset)."""
        return self._core.member_id

    @property
    def generation_id(self) -> int:
        """The generation (-1 when none)."""
        return self._core.generation_id

    @property
    def is_leader(self) -> bool:
        """Whether this member led the last join."""
        return self._core.is_leader

    @property
    def protocol_name(self) -> str | None:
        """The assignor name the coordinator chose at the last join."""
        return self._core.protocol_name

    @property
    def owned_partitions(self) -> frozenset[TopicPartition]:
        """Partitions currently assigned (per the Assign/Unassign effects emitted)."""
        return frozenset(self._core.owned)

    @property
    def subscribed_topics(self) -> frozenset[str]:
        """The topics subscribed to now (a pattern's matches included)."""
        return self._core.subscribed

    @property
    def metadata_topics(self) -> frozenset[str]:
        """Topics whose metadata the member needs now: the subscription, plus the
        whole group subscription while this member is the leader (Java's leader
        watches every topic it assigned, to notice partition changes). The member
        refreshes them itself (``_metadata.py``)."""
        core = self._core
        if core.is_leader:
            return core.subscribed | core.group_topics
        return core.subscribed

    @property
    def coordinator_id(self) -> int | None:
        """The coordinator's node id, None while unknown."""
        return self._core.coordinator_id

    @property
    def rejoin_reason(self) -> str:
        """Why the member last (re)joined (KIP-800 reason)."""
        return self._core.reason

    @property
    def group_metadata(self) -> ConsumerGroupMetadata:
        """The ``ConsumerGroupMetadata`` of the current generation."""
        return self._core.group_metadata

    @property
    def next_deadline(self) -> float | None:
        """When to feed the next ``Tick`` (None: no timer is armed). After a ``Tick`` at
        ``now`` it is always later than ``now`` or None, so a driver never spins."""
        return earliest(self._core.next_deadline, self._commits.next_deadline)

    def handle(self, event: object, now: float) -> list[Effect]:
        """Process one input at monotonic time ``now``; return the effects to execute."""
        return self._commits.handle(event, now, self._table)

    def _table(self, event: object, now: float) -> list[Effect]:
        return dispatch(self._core, event, now, TRANSITIONS, IGNORED)
