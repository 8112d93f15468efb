"""The sans-I/O group member: a pure, deterministic state machine (KIP-429 semantics).

``GroupMember.handle(input, now) -> list[Effect]`` plus ``next_deadline``; the driver in
``coopconsumer._io`` executes effects and feeds inputs. Nothing here opens a socket,
starts a thread, reads a clock or imports ``confluent_kafka``/``coopconsumer._io``.

Two wings, one per group protocol, on one shared base: ``classic/`` (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup) and ``kip848/`` (ConsumerGroupHeartbeat). The files
at this level are what both use: ``_base`` (the member core's books), inputs, effects,
outcomes, error actions, dispatching, coordinator lookup, committed-offset fetches,
metadata, manual assignment, the member's own commits. A wing imports the shared base,
never the other wing.

The driver's contract, effect by effect (execute each batch in order):

- ``Send(request_id, request, node_id, timeout_s)``: send to broker ``node_id`` at the
  negotiated version (a ``_protocol.queries`` query is built at that version, and the
  answer carries it as ``api_version``); feed ``ResponseReceived`` or ``RequestFailed`` (timeout:
  ``RequestTimeoutError`` after ``timeout_s``, or ``request.timeout.ms`` when None).
- ``FindCoordinator(group_id, request_id)``: send ``FindCoordinatorQuery(key=group_id)``
  (``_protocol.queries``) built at the negotiated version to any ready broker; feed
  ``ResponseReceived(request_id, response, api_version)`` or ``RequestFailed``.
- ``AddCoordinator(node_id, host, port)``: open a connection of its own to the
  coordinator; feed ``CoordinatorFound(node_id)`` with that connection's id.
- ``MetadataNeeded(request_id, topics)``: send its ``query`` (Metadata, None = all
  topics) built at the negotiated version to any ready broker; feed
  ``ResponseReceived(request_id, response, api_version)`` or ``RequestFailed``. The
  member times the refreshes (``metadata.max.age.ms``) and the retries itself.
- ``AddBrokers(brokers)``: make each broker reachable by its node id.
- ``InvokeListener(invocation_id, kind, partitions)``: run the callback on the thread
  calling ``poll()``; feed ``ListenerDone(invocation_id, kind)`` whether it raised or not.
  While a REVOKED call is pending, return no records of its partitions (Java's
  ``markPendingRevocation``); the Unassign follows its ``ListenerDone``.
- ``Assign(partitions, starts)`` / ``Unassign(partitions)``: incremental fetcher
  changes; ``starts`` are start offsets the application gave (manual assignment).
  ``set_assigned_partitions`` is the running size of their union.
- ``CommitBeforeRevoke(partitions)``: with ``enable.auto.commit``, commit the consumed
  offsets of ``partitions`` (``RetriedCommitRequested``: the member retries and times
  it) before running the REVOKED callback that follows; the member accepts commits in
  the state that emitted it.
- ``AutoCommitDue()``: with ``enable.auto.commit``, at the next ``poll()`` commit the
  consumed offsets not committed yet (``CommitRequested``).
- ``CommitDone(token, error)``: complete the commit identified by ``token``.
- ``CommittedOffsetsDone(token, offsets, error)``: complete the committed-offsets
  request identified by ``token``.
- ``Observe(event, now, latency_s)``: forward to ``CoordinatorMetrics`` (see
  ``Observation``).
- ``Log(level, message)``: log it.
- ``ReportError(error)``: raise from the next ``poll()``; the member continues.
- ``TopicsMissing(topics)``: topics the member needs are not in the cluster (yet).
- ``Fatal(error)``: raise from ``poll()`` and every later call until ``close()``.

Inputs the driver feeds besides answers: ``Subscribe``, ``AssignRequested`` (manual
assignment: no group membership, see ``MemberState.MANUAL``), ``PollCalled`` (at every
``poll()``), ``CommitRequested``, ``RetriedCommitRequested``,
``CommittedOffsetsRequested``, ``LeaveRequested`` (unsubscribe), ``CloseRequested``,
and ``Tick`` at ``next_deadline``.
"""

from .._transition_table import IllegalTransition as IllegalTransition
from ._diff import AssignmentDiff as AssignmentDiff
from ._diff import diff_assignment as diff_assignment
from ._diff import revoke_before_join as revoke_before_join
from ._effects import AddBrokers as AddBrokers
from ._effects import AddCoordinator as AddCoordinator
from ._effects import Assign as Assign
from ._effects import AutoCommitDue as AutoCommitDue
from ._effects import CommitBeforeRevoke as CommitBeforeRevoke
from ._effects import CommitDone as CommitDone
from ._effects import CommittedOffsetsDone as CommittedOffsetsDone
from ._effects import Effect as Effect
from ._effects import Fatal as Fatal
from ._effects import FindCoordinator as FindCoordinator
from ._effects import InvokeListener as InvokeListener
from ._effects import ListenerKind as ListenerKind
from ._effects import Log as Log
from ._effects import MetadataNeeded as MetadataNeeded
from ._effects import Observation as Observation
from ._effects import Observe as Observe
from ._effects import ReportError as ReportError
from ._effects import Send as Send
from ._effects import TopicsMissing as TopicsMissing
from ._effects import Unassign as Unassign
from ._error_actions import Api as Api
from ._error_actions import ErrorAction as ErrorAction
from ._error_actions import action_for as action_for
from ._inputs import AssignmentChange as AssignmentChange
from ._inputs import AssignRequested as AssignRequested
from ._inputs import CloseRequested as CloseRequested
from ._inputs import CommitRequested as CommitRequested
from ._inputs import CommittedOffsetsRequested as CommittedOffsetsRequested
from ._inputs import ConnectionLost as ConnectionLost
from ._inputs import CoordinatorFound as CoordinatorFound
from ._inputs import CoordinatorUnavailable as CoordinatorUnavailable
from ._inputs import Input as Input
from ._inputs import LeaveRequested as LeaveRequested
from ._inputs import ListenerDone as ListenerDone
from ._inputs import MetadataUpdate as MetadataUpdate
from ._inputs import OffsetAndMetadata as OffsetAndMetadata
from ._inputs import PollCalled as PollCalled
from ._inputs import RequestFailed as RequestFailed
from ._inputs import ResponseReceived as ResponseReceived
from ._inputs import RetriedCommitRequested as RetriedCommitRequested
from ._inputs import Subscribe as Subscribe
from ._inputs import Tick as Tick
from .classic import GroupMember as GroupMember
from .classic import MemberConfig as MemberConfig
from .classic import MemberState as MemberState

__all__ = [
    "AddBrokers",
    "AddCoordinator",
    "Api",
    "Assign",
    "AssignRequested",
    "AssignmentChange",
    "AssignmentDiff",
    "AutoCommitDue",
    "CloseRequested",
    "CommitBeforeRevoke",
    "CommitDone",
    "CommitRequested",
    "CommittedOffsetsDone",
    "CommittedOffsetsRequested",
    "ConnectionLost",
    "CoordinatorFound",
    "CoordinatorUnavailable",
    "Effect",
    "ErrorAction",
    "Fatal",
    "FindCoordinator",
    "GroupMember",
    "IllegalTransition",
    "Input",
    "InvokeListener",
    "LeaveRequested",
    "ListenerDone",
    "ListenerKind",
    "Log",
    "MemberConfig",
    "MemberState",
    "MetadataNeeded",
    "MetadataUpdate",
    "Observation",
    "Observe",
    "OffsetAndMetadata",
    "PollCalled",
    "ReportError",
    "RequestFailed",
    "ResponseReceived",
    "RetriedCommitRequested",
    "Send",
    "Subscribe",
    "Tick",
    "TopicsMissing",
    "Unassign",
    "action_for",
    "diff_assignment",
    "revoke_before_join",
]
