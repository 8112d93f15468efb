"""``ConsumerGroupMember``: the sans-I/O KIP-848 member (``group.protocol=consumer``).

The same interface as the classic ``GroupMember`` (``handle(input, now) -> effects``,
``next_deadline``, ``state``, ``owned_partitions``, ``group_metadata``...), so one driver
runs either. ``handle`` routes answers to per-API outcomes (``MemberCore.route``, the one
place stale answers are dropped), looks ``(state, input type)`` up in the transition
table (``_table.py``) and runs the row's handler, which may move the member only to
the states its row allows. Java's ``ConsumerMembershipManager`` is the behavioural
reference (docs/architecture.md, "The KIP-848 member").

Pure: no sockets, threads, clocks, ``confluent_kafka`` or ``coopconsumer._io``.
"""

from __future__ import annotations

from ..._types import ConsumerGroupMetadata, TopicPartition
from ...assignors._api import RebalanceProtocol
from .._dispatch import dispatch
from .._effects import Effect
from .._own_commits import OwnCommits, earliest
from ._core import ConsumerMemberConfig, MemberCore
from ._states import ConsumerMemberState
from ._table import IGNORED, TRANSITIONS

__all__ = ["ConsumerGroupMember"]


class ConsumerGroupMember:
    """One consumer's membership in a KIP-848 consumer group, as a pure state machine.

    Feed inputs with ``handle(input, now)`` and execute the returned effects in order;
    call ``handle(Tick(), now)`` at ``next_deadline``. Raises ``IllegalTransition`` for an
    input the current state rejects (the member is then unchanged) or a move its table
    row does not allow (a core bug: discard the member).
    """

    def __init__(self, config: ConsumerMemberConfig) -> None:
        self._core = MemberCore(config)
        self._commits = OwnCommits.for_config(config)

    @property
    def state(self) -> ConsumerMemberState:
        """The current state."""
        return self._core.state

    @property
    def member_id(self) -> str:
        """The member id (client-generated, KIP-1082; or the coordinator's)."""
        return self._core.member_id

    @property
    def member_epoch(self) -> int:
        """The member epoch (0 while joining or out of the group)."""
        return self._core.member_epoch

    @property
    def generation_id(self) -> int:
        """The member epoch, where the classic member has its generation (-1: none)."""
        epoch = self._core.member_epoch
        return epoch if epoch > 0 else -1

    @property
    def is_leader(self) -> bool:
        """Always False: the coordinator assigns (KIP-848 has no group leader)."""
        return False

    @property
    def protocol(self) -> RebalanceProtocol:
        """COOPERATIVE: KIP-848 revokes and assigns incrementally."""
        return RebalanceProtocol.COOPERATIVE

    @property
    def protocol_name(self) -> str | None:
        """The server-side assignor asked for (``group.remote.assignor``), or None."""
        return self._core.config.server_assignor

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
        """Topics whose metadata (and topic ids) the member needs now; it refreshes
        them itself (``_metadata.py``)."""
        return self._core.subscribed

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
        """The ``ConsumerGroupMetadata`` of the current epoch."""
        return self._core.group_metadata

    @property
    def next_deadline(self) -> float | None:
        """When to feed the next ``Tick`` (None: no timer is armed)."""
        return earliest(self._core.next_deadline, self._commits.next_deadline)

    def handle(self, event: object, now: float) -> list[Effect]:
        """Process one input at monotonic time ``now``; return the effects to execute."""
        return self._commits.handle(event, now, self._table)

    def _table(self, event: object, now: float) -> list[Effect]:
        return dispatch(self._core, event, now, TRANSITIONS, IGNORED)
