"""The built-in sticky assignors: ``sticky`` (eager) and ``cooperative-sticky`` (KIP-429).

Both run the algorithm in ``_sticky_core`` (Java's ``AbstractStickyAssignor``); they
differ in where a member's previous assignment comes from and in what the leader does
with partitions that change owner.

Imports the assignor contract, the core and the user-data codec; no I/O, no clock.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from .._errors import ProtocolError
from .._types import ConsumerGroupMetadata, TopicPartition
from ._api import (
    DEFAULT_GENERATION_ID,
    Assignment,
    ClusterMetadata,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupSubscription,
    RebalanceProtocol,
    Subscription,
)
from ._compact import CompactPartitions
from ._gc import paused_gc
from ._sticky_core import MemberData, StickyResult, sticky_assign
from ._sticky_userdata import (
    decode_cooperative_generation,
    decode_sticky_user_data,
    encode_cooperative_generation,
    encode_sticky_user_data,
)

__all__ = ["CooperativeStickyAssignor", "StickyAssignor"]

_log = logging.getLogger("coopconsumer.assignors.sticky")


def _partition_total(metadata: ClusterMetadata, subs: Mapping[str, Subscription]) -> int:
    """An upper bound of the work: every partition the metadata knows (cheap to get)."""
    return sum(metadata.partition_counts.values()) if subs else 0


def _group_assignment(result: StickyResult, members: Mapping[str, object]) -> GroupAssignment:
    return GroupAssignment(
        assignments={m: Assignment(partitions=result.assignment(m)) for m in members}
    )


class StickyAssignor(ConsumerPartitionAssignor):
    """Java's ``StickyAssignor`` (protocol name ``sticky``, KIP-54): EAGER only.

    The assignment is as balanced as the subscriptions allow (partition counts differ
    by at most one when every member subscribes to the same topics) and keeps as many
    partitions with their previous owners as balance permits.

    Under EAGER every member revokes everything before joining, so the previous
    assignment travels in the user data: ``StickyAssignorUserData`` V1 (the member's
    partitions and generation), written from what ``on_assignment`` stored. The leader
    also reads V0 (no generation). A member whose user data cannot be decoded is
    treated as owning nothing, with a warning, as in Java.

    ``pause_gc=True`` pauses Python's cyclic garbage collector while an assignment over
    20,000 partitions or more runs (process-wide, restored afterwards; an application's
    own ``gc.disable()`` stands; see ``docs/assignors.md``). Off by default.
    """

    name = "sticky"

    def __init__(self, *, pause_gc: bool = False) -> None:
        #: Whether ``assign`` pauses the cyclic garbage collector on large passes.
        self.pause_gc = pause_gc
        self._member_assignment: Sequence[TopicPartition] | None = None
        self._generation = DEFAULT_GENERATION_ID

    def supported_protocols(self) -> list[RebalanceProtocol]:
        """EAGER only: a previous owner gives its partitions up before the join."""
        return [RebalanceProtocol.EAGER]

    def subscription_user_data(self, topics: frozenset[str]) -> bytes:
        """StickyAssignorUserData V1 of the last assignment, or empty before the first."""
        if self._member_assignment is None:
            return b""
        return encode_sticky_user_data(self._member_assignment, self._generation)

    def on_assignment(self, assignment: Assignment, group_metadata: ConsumerGroupMetadata) -> None:
        """Remember the assignment and generation for the next ``subscription_user_data``."""
        self._member_assignment = assignment.partitions
        self._generation = group_metadata.generation_id

    @staticmethod
    def member_data(
        member_id: str, subscription: Subscription, topic_names: dict[bytes, str] | None = None
    ) -> MemberData:
        """What the leader knows of one member's past: from its user data only.

        ``topic_names`` is a decoding cache shared across the members of one ``assign``.
        """
        owned: list[TopicPartition] = []
        generation = DEFAULT_GENERATION_ID
        if subscription.user_data:
            try:
                owned, generation = decode_sticky_user_data(subscription.user_data, topic_names)
            except ProtocolError as exc:
                # Java's deserializeTopicPartitionAssignment: no previous assignment.
                _log.warning(
                    "ignoring malformed sticky user data from member %s (%d bytes): %s",
                    member_id,
                    len(subscription.user_data),
                    exc,
                )
        return MemberData(subscription.topics, owned, generation, subscription.rack_id)

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        """Balanced, sticky assignment of every subscribed partition."""
        subs = group_subscription.subscriptions
        names: dict[bytes, str] = {}
        with paused_gc(_partition_total(metadata, subs), enabled=self.pause_gc):
            members = {m: self.member_data(m, s, names) for m, s in subs.items()}
            return _group_assignment(sticky_assign(metadata, members), subs)


class CooperativeStickyAssignor(ConsumerPartitionAssignor):
    """Java's ``CooperativeStickyAssignor`` (protocol name ``cooperative-sticky``, KIP-429).

    Same placement as ``StickyAssignor``, but the previous assignment is the
    ``owned_partitions`` of the subscription and the generation its ``generation_id``
    (v1/v2 fields); when the generation is -1 (an older peer), the generation in the
    user data is used: Java's int32, or the trailing generation of librdkafka's
    StickyAssignorUserData V1. ``subscription_user_data`` writes Java's int32.

    Under COOPERATIVE a partition that changes owner is left out of this round: its
    previous owner sees it revoked and rejoins, and the follow-up rebalance gives it to
    its new owner (Java's ``adjustAssignment``). Under EAGER (a two-bounce upgrade that
    still lists an eager assignor) members report no owned partitions, so nothing is
    held back.

    ``pause_gc=True`` works as for ``StickyAssignor``. Off by default.
    """

    name = "cooperative-sticky"

    def __init__(self, *, pause_gc: bool = False) -> None:
        #: Whether ``assign`` pauses the cyclic garbage collector on large passes.
        self.pause_gc = pause_gc
        self._generation = DEFAULT_GENERATION_ID

    def supported_protocols(self) -> list[RebalanceProtocol]:
        """COOPERATIVE first, EAGER for the first bounce of an upgrade."""
        return [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]

    def subscription_user_data(self, topics: frozenset[str]) -> bytes:
        """The last generation as an int32 (read only by peers without the v2 field)."""
        return encode_cooperative_generation(self._generation)

    def on_assignment(self, assignment: Assignment, group_metadata: ConsumerGroupMetadata) -> None:
        """Remember the generation for the next ``subscription_user_data``."""
        self._generation = group_metadata.generation_id

    @staticmethod
    def member_data(member_id: str, subscription: Subscription) -> MemberData:
        """Owned partitions from the subscription; generation from the v2 field, else the
        user data."""
        generation = subscription.generation_id
        if generation == DEFAULT_GENERATION_ID and subscription.user_data:
            generation = _user_data_generation(member_id, subscription.user_data)
        return MemberData(
            subscription.topics, subscription.owned_partitions, generation, subscription.rack_id
        )

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        """Sticky assignment minus the partitions another member still owns."""
        subs = group_subscription.subscriptions
        with paused_gc(_partition_total(metadata, subs), enabled=self.pause_gc):
            members = {m: self.member_data(m, s) for m, s in subs.items()}
            result = sticky_assign(metadata, members)
            _hold_back_transfers(result, subs)
            return _group_assignment(result, subs)


def _user_data_generation(member_id: str, data: bytes) -> int:
    """The generation in a cooperative-sticky member's user data (pre-v2 subscriptions).

    Java writes exactly four bytes (an int32) and reads the first four. librdkafka's
    cooperative-sticky writes StickyAssignorUserData V1 instead (previous assignment,
    then generation), and older librdkafka releases sent v1 subscriptions (no
    generation field); reading its first four bytes would take the topic count for the
    generation and settle duplicate claims wrongly. So longer user data that parses as
    V1 gives its trailing generation; anything else is read as Java reads it.
    """
    if len(data) > 4:
        try:
            _, generation = decode_sticky_user_data(data)
        except ProtocolError:
            pass
        else:
            if generation != DEFAULT_GENERATION_ID:
                return generation
    try:
        return decode_cooperative_generation(data)
    except ProtocolError:
        # Java's memberData: a generation it cannot read is no generation.
        _log.warning(
            "ignoring cooperative-sticky user data of %d bytes from member %s: "
            "too short for a generation",
            len(data),
            member_id,
        )
        return DEFAULT_GENERATION_ID


def _hold_back_transfers(result: StickyResult, subs: Mapping[str, Subscription]) -> None:
    """Remove from each member the new partitions some other member still owns.

    Java's ``computePartitionsTransferringOwnership`` + ``adjustAssignment``: a
    partition added to member B (B did not own it) that member A owns (so A is losing
    it) is left unassigned this round (KIP-429). Only ``fresh`` partitions can be
    additions; a member that itself owns a fresh partition keeps it.
    """
    claimed = result.claimed
    if not claimed:
        return
    claimed_numbers: set[int] | None = None
    for m, fresh in result.fresh.items():
        if isinstance(fresh, CompactPartitions):
            # Fresh partitions as index runs: compare numbers, make no objects.
            space = fresh.space
            if claimed_numbers is None:
                claimed_numbers = set(space.indices_of(claimed))
            if all(map(claimed_numbers.isdisjoint, fresh.runs)):
                continue
            mine_numbers = set(space.indices_of(subs[m].owned_partitions))
            drop_numbers = {
                i for run in fresh.runs for i in run if i in claimed_numbers
            } - mine_numbers
            if drop_numbers:
                runs = [[i for i in run if i not in drop_numbers] for run in fresh.runs]
                result.fresh[m] = CompactPartitions((), space, runs)
                _held_back(m, len(drop_numbers))
            continue
        if not fresh or claimed.isdisjoint(fresh):
            continue
        mine = set(subs[m].owned_partitions)
        moving = [tp for tp in fresh if tp in claimed and tp not in mine]
        if moving:
            drop = set(moving)
            result.fresh[m] = [tp for tp in fresh if tp not in drop]
            _held_back(m, len(moving))


def _held_back(member_id: str, count: int) -> None:
    _log.debug(
        "member %s: %d partitions held back until their owners revoke them", member_id, count
    )
