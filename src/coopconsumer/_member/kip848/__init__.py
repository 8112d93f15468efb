"""The sans-I/O KIP-848 group member (``group.protocol=consumer``).

``ConsumerGroupMember.handle(input, now) -> list[Effect]`` plus ``next_deadline``: the
classic ``GroupMember``'s interface, its inputs and effects (``coopconsumer._member``),
so that the driver's contract is the one documented there. What differs:

- ``Send`` carries a ``ConsumerGroupHeartbeatRequest`` (API 68,
  ``_protocol.group_messages``) where the classic member sends JoinGroup, SyncGroup,
  Heartbeat and LeaveGroup; OffsetCommit carries the member epoch as its generation.
- ``MetadataUpdate.topic_ids`` must be filled in (Metadata v10+): target assignments
  name topics by id.
- The broker assigns (``group.remote.assignor``); no assignor runs in the client.

Pure: no sockets, threads, clocks, ``confluent_kafka`` or ``coopconsumer._io``.
"""

from ._core import SERVER_ASSIGNORS as SERVER_ASSIGNORS
from ._core import ConsumerMemberConfig as ConsumerMemberConfig
from ._core import HeartbeatOutcome as HeartbeatOutcome
from ._machine import ConsumerGroupMember as ConsumerGroupMember
from ._states import ConsumerMemberState as ConsumerMemberState

__all__ = [
    "SERVER_ASSIGNORS",
    "ConsumerGroupMember",
    "ConsumerMemberConfig",
    "ConsumerMemberState",
    "HeartbeatOutcome",
]
