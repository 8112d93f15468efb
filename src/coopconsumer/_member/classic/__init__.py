"""The sans-I/O classic group member (``group.protocol=classic``, KIP-429 semantics).

``GroupMember`` runs JoinGroup, SyncGroup, Heartbeat and LeaveGroup on the shared base
of ``coopconsumer._member`` (inputs, effects, lookup, fetches, metadata, manual
assignment): its states (``_states``), its transition table (``_table``), its core
(``_core``) and one module per phase (``_join``, ``_sync``, ``_stable``, ``_leave``,
``_commit``, ``_manual``). It never imports ``kip848``.

Pure: no sockets, threads, clocks, ``confluent_kafka`` or ``coopconsumer._io``.
"""

from ._core import MemberConfig as MemberConfig
from ._machine import GroupMember as GroupMember
from ._states import MemberState as MemberState

__all__ = ["GroupMember", "MemberConfig", "MemberState"]
