"""The transition table: complete, and every row exercised by a transcript.

Every ``(state, input type)`` pair is handled, ignored or rejected, exactly one of them.
For each pair a member is built in that state (``in_state``), fed a canonical input of
that type, and the resulting state (handled), silence (ignored) or ``IllegalTransition``
(rejected) is checked.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path

import attrs
import pytest
from _coord_script import Script, in_state, tps

from coopconsumer import consumer_protocol
from coopconsumer._member import (
    AssignmentChange,
    AssignRequested,
    CloseRequested,
    CommitRequested,
    CommittedOffsetsRequested,
    ConnectionLost,
    CoordinatorFound,
    CoordinatorUnavailable,
    IllegalTransition,
    LeaveRequested,
    ListenerDone,
    ListenerKind,
    Log,
    MemberState,
    MetadataUpdate,
    OffsetAndMetadata,
    PollCalled,
    Subscribe,
    Tick,
    Unassign,
)
from coopconsumer._member._error_actions import Api
from coopconsumer._member._outcomes import (
    FindCoordinatorOutcome,
    HeartbeatOutcome,
    JoinGroupOutcome,
    LeaveGroupOutcome,
    OffsetCommitOutcome,
    OffsetFetchOutcome,
    Pending,
    SyncGroupOutcome,
)
from coopconsumer._member.classic._table import IGNORED, REJECTED, TRANSITIONS
from coopconsumer._protocol.messages import (
    FindCoordinatorResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)
from coopconsumer.assignors import Assignment, ClusterMetadata

S = MemberState

INPUT_TYPES: tuple[type, ...] = (
    Subscribe,
    MetadataUpdate,
    CoordinatorFound,
    CoordinatorUnavailable,
    ConnectionLost,
    Tick,
    PollCalled,
    ListenerDone,
    CommitRequested,
    LeaveRequested,
    CloseRequested,
    JoinGroupOutcome,
    SyncGroupOutcome,
    HeartbeatOutcome,
    LeaveGroupOutcome,
    OffsetCommitOutcome,
    CommittedOffsetsRequested,
    FindCoordinatorOutcome,
    OffsetFetchOutcome,
    AssignRequested,
)

ALL_PAIRS = [(s, t) for s in MemberState for t in INPUT_TYPES]

_SAME = {
    MetadataUpdate,
    CoordinatorFound,
    CoordinatorUnavailable,
    Tick,
    PollCalled,
    CommitRequested,
    LeaveGroupOutcome,
    OffsetCommitOutcome,
    CommittedOffsetsRequested,
    FindCoordinatorOutcome,
    OffsetFetchOutcome,
}

#: The state each handled row leads to, for the canonical inputs below.
EXPECTED: dict[tuple[MemberState, type], MemberState] = {
    **{(s, t): s for s in MemberState for t in _SAME if (s, t) in TRANSITIONS},
    (S.UNJOINED, Subscribe): S.JOINING,
    (S.UNJOINED, CloseRequested): S.CLOSED,
    (S.UNJOINED, AssignRequested): S.MANUAL,
    (S.MANUAL, AssignRequested): S.MANUAL,
    (S.MANUAL, LeaveRequested): S.UNJOINED,
    (S.MANUAL, CloseRequested): S.CLOSED,
    (S.PREPARING_JOIN, Subscribe): S.PREPARING_JOIN,
    (S.PREPARING_JOIN, ListenerDone): S.JOINING,
    (S.PREPARING_JOIN, LeaveRequested): S.LEAVING,
    (S.PREPARING_JOIN, CloseRequested): S.LEAVING,
    (S.PREPARING_JOIN, HeartbeatOutcome): S.PREPARING_JOIN,
    (S.JOINING, Subscribe): S.JOINING,
    (S.JOINING, LeaveRequested): S.UNJOINED,
    (S.JOINING, CloseRequested): S.CLOSED,
    (S.JOINING, JoinGroupOutcome): S.AWAITING_SYNC,
    (S.LEADER_AWAITING_METADATA, Subscribe): S.LEADER_AWAITING_METADATA,
    # The assignment is made; the SyncGroup waits for LEADER_SYNC_DELAY_S (a Tick).
    (S.LEADER_AWAITING_METADATA, MetadataUpdate): S.LEADER_AWAITING_METADATA,
    (S.LEADER_AWAITING_METADATA, LeaveRequested): S.LEAVING,
    (S.LEADER_AWAITING_METADATA, CloseRequested): S.LEAVING,
    (S.LEADER_AWAITING_METADATA, HeartbeatOutcome): S.LEADER_AWAITING_METADATA,
    (S.AWAITING_SYNC, Subscribe): S.AWAITING_SYNC,
    (S.AWAITING_SYNC, LeaveRequested): S.LEAVING,
    (S.AWAITING_SYNC, CloseRequested): S.LEAVING,
    (S.AWAITING_SYNC, SyncGroupOutcome): S.ASSIGNING,
    (S.ASSIGNING, Subscribe): S.ASSIGNING,
    (S.ASSIGNING, ListenerDone): S.STABLE,
    (S.ASSIGNING, LeaveRequested): S.LEAVING,
    (S.ASSIGNING, CloseRequested): S.LEAVING,
    (S.ASSIGNING, HeartbeatOutcome): S.ASSIGNING,
    (S.STABLE, Subscribe): S.PREPARING_JOIN,
    (S.STABLE, LeaveRequested): S.LEAVING,
    (S.STABLE, CloseRequested): S.LEAVING,
    (S.STABLE, HeartbeatOutcome): S.STABLE,
    (S.POLL_EXPIRED, Subscribe): S.POLL_EXPIRED,
    (S.POLL_EXPIRED, PollCalled): S.PREPARING_JOIN,
    (S.POLL_EXPIRED, LeaveRequested): S.LEAVING,
    (S.POLL_EXPIRED, CloseRequested): S.LEAVING,
    (S.LEAVING, ListenerDone): S.LEAVING,
    (S.LEAVING, CloseRequested): S.LEAVING,
    (S.LEAVING, LeaveGroupOutcome): S.CLOSED,
    (S.FATAL, CloseRequested): S.CLOSED,
}


def _canonical(script: Script, input_type: type) -> object:
    m = script.member
    pending = Pending(
        api=Api.OFFSET_COMMIT,
        sent_at=script.now,
        generation_id=m.generation_id,
        member_id=m.member_id,
    )
    if input_type is Subscribe:
        return Subscribe(topics=frozenset({"t", "u"}))
    if input_type is MetadataUpdate:
        return MetadataUpdate(metadata=ClusterMetadata.from_partition_counts({"t": 4, "other": 2}))
    if input_type is CoordinatorFound:
        return CoordinatorFound(node_id=1)
    if input_type is CoordinatorUnavailable:
        return CoordinatorUnavailable()
    if input_type is ConnectionLost:
        return ConnectionLost(node_id=1)
    if input_type is Tick:
        return Tick()
    if input_type is PollCalled:
        return PollCalled()
    if input_type is ListenerDone:
        call = script.listeners[0]
        return ListenerDone(invocation_id=call.invocation_id, kind=call.kind)
    if input_type is CommitRequested:
        return CommitRequested(
            offsets={next(iter(tps("t-0"))): OffsetAndMetadata(offset=5)}, token="c"
        )
    if input_type is LeaveRequested:
        return LeaveRequested()
    if input_type is CloseRequested:
        return CloseRequested()
    if input_type is JoinGroupOutcome:
        return JoinGroupOutcome(
            pending=pending, response=script.join_response(generation_id=m.generation_id + 2)
        )
    if input_type is SyncGroupOutcome:
        return SyncGroupOutcome(
            pending=pending,
            response=SyncGroupResponse(
                assignment=consumer_protocol.encode_assignment(
                    Assignment(partitions=tuple(tps("t-0")))
                )
            ),
        )
    if input_type is HeartbeatOutcome:
        return HeartbeatOutcome(pending=pending, response=HeartbeatResponse())
    if input_type is LeaveGroupOutcome:
        return LeaveGroupOutcome(pending=pending, response=LeaveGroupResponse())
    if input_type is AssignRequested:
        return AssignRequested(partitions=tps("t-2"), change=AssignmentChange.ADD)
    if input_type is CommittedOffsetsRequested:
        return CommittedOffsetsRequested(partitions=tps("t-0"), token="f", timeout_s=5.0)
    if input_type is FindCoordinatorOutcome:
        return FindCoordinatorOutcome(
            pending=attrs.evolve(pending, api=Api.FIND_COORDINATOR),
            response=FindCoordinatorResponse(node_id=1, host="broker", port=9092),
            api_version=3,
        )
    if input_type is OffsetFetchOutcome:
        return OffsetFetchOutcome(
            pending=attrs.evolve(pending, api=Api.OFFSET_FETCH, token=0),
            response=OffsetFetchResponse(),
            api_version=7,
        )
    assert input_type is OffsetCommitOutcome
    return OffsetCommitOutcome(pending=pending, response=OffsetCommitResponse())


def test_every_pair_is_classified_exactly_once() -> None:
    handled = set(TRANSITIONS)
    for pair in ALL_PAIRS:
        kinds = [pair in handled, pair in IGNORED, pair in REJECTED]
        assert sum(kinds) == 1, (pair, kinds)
    assert handled | IGNORED | REJECTED == set(ALL_PAIRS)


def test_every_handled_row_has_an_expected_state() -> None:
    assert set(EXPECTED) == set(TRANSITIONS)


def _rows(pairs: Iterable[tuple[MemberState, type]]) -> list[tuple[MemberState, type]]:
    return sorted(pairs, key=lambda p: (p[0].value, p[1].__name__))


def _unreachable_listener(script: Script, input_type: type) -> bool:
    return input_type is ListenerDone and not script.listeners


@pytest.mark.parametrize(
    ("state", "input_type"),
    _rows(TRANSITIONS),
    ids=lambda v: v.name if isinstance(v, MemberState) else v.__name__,
)
def test_handled_row(state: MemberState, input_type: type) -> None:
    script = in_state(state)
    assert not _unreachable_listener(script, input_type)
    script.feed(_canonical(script, input_type))
    assert script.state() is EXPECTED[(state, input_type)]


@pytest.mark.parametrize(
    ("state", "input_type"),
    _rows(IGNORED),
    ids=lambda v: v.name if isinstance(v, MemberState) else v.__name__,
)
def test_ignored_row(state: MemberState, input_type: type) -> None:
    script = in_state(state)
    if _unreachable_listener(script, input_type):
        # No listener can be outstanding here: an unknown invocation is a driver bug.
        with pytest.raises(IllegalTransition):
            script.feed(ListenerDone(invocation_id=999, kind=ListenerKind.ASSIGNED))
        assert script.state() is state
        return
    effects = script.feed(_canonical(script, input_type))
    assert script.state() is state
    assert all(isinstance(e, Log | Unassign) for e in effects), effects


@pytest.mark.parametrize(
    ("state", "input_type"),
    _rows(REJECTED),
    ids=lambda v: v.name if isinstance(v, MemberState) else v.__name__,
)
def test_rejected_row(state: MemberState, input_type: type) -> None:
    script = in_state(state)
    owned = script.member.owned_partitions
    with pytest.raises(IllegalTransition) as info:
        script.feed(_canonical(script, input_type))
    assert info.value.state is state
    assert info.value.input_type is input_type
    assert script.state() is state
    assert script.member.owned_partitions == owned


# ---------------------------------------------------------------------- import purity

_FORBIDDEN = {
    "socket",
    "threading",
    "time",
    "selectors",
    "asyncio",
    "subprocess",
    "confluent_kafka",
}
_FORBIDDEN_PKG = ("coopconsumer._io", "coopconsumer._consumer")


def _module_imports(name: str) -> set[str]:
    spec = importlib.util.find_spec(name)
    assert spec is not None
    assert spec.origin is not None
    path = Path(spec.origin)
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: -(node.level - 1)]
                prefix = ".".join(base)
                module = f"{prefix}.{node.module}" if node.module else prefix
                found.add(module)
                for alias in node.names:  # "from . import x" may import a submodule
                    candidate = f"{module}.{alias.name}"
                    if importlib.util.find_spec(module) and _is_module(candidate):
                        found.add(candidate)
            elif node.module:
                found.add(node.module)
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


# The assignors' shared GC pause counts concurrent passes under a lock (two consumers
# leading at once); it starts no thread and blocks on nothing (tests/test_layering.py).
_LOCK_ONLY = {("coopconsumer.assignors._gc", "threading")}


def test_coordinator_imports_are_pure_transitively() -> None:
    """Walk ``_member``'s imports through the whole package: nothing it reaches
    may block, read a clock or touch I/O layers."""
    seen: set[str] = set()
    todo = ["coopconsumer._member"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for imported in _module_imports(name):
            top = imported.split(".")[0]
            if (name, top) in _LOCK_ONLY:
                continue
            assert top not in _FORBIDDEN, f"{name} imports {imported}"
            assert not imported.startswith(_FORBIDDEN_PKG), f"{name} imports {imported}"
            # The package root is the public facade; Python runs it for any submodule
            # import, but it is not something _member depends on.
            if imported.startswith("coopconsumer.") and _is_module(imported):
                todo.append(imported)
    assert "coopconsumer._member.classic._machine" in seen
    assert "coopconsumer._protocol.messages" in seen
    assert "coopconsumer.consumer_protocol" in seen
    assert sys.modules.get("coopconsumer._member") is not None
