"""Helpers for KIP-848 member transcripts: a member with a clock, canned answers.

Shared by test_kip848_transcripts.py and test_kip848_table.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from coopconsumer._member import (
    CoordinatorFound,
    Effect,
    FindCoordinator,
    InvokeListener,
    ListenerDone,
    Log,
    MetadataNeeded,
    MetadataUpdate,
    Observe,
    ResponseReceived,
    Send,
    Subscribe,
)
from coopconsumer._member.kip848 import (
    ConsumerGroupMember,
    ConsumerMemberConfig,
    ConsumerMemberState,
)
from coopconsumer._protocol.group_messages import (
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatQuery,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatTopicPartitions,
)
from coopconsumer._types import TopicPartition
from coopconsumer.assignors import ClusterMetadata

S = ConsumerMemberState
T_ID = uuid.UUID(int=0x7)
U_ID = uuid.UUID(int=0x8)
COORDINATOR = 3
MAX_POLL_S = 300.0


def tps(*names: str) -> frozenset[TopicPartition]:
    """``tps("t-0", "t-1")``."""
    out = set()
    for name in names:
        topic, partition = name.rsplit("-", 1)
        out.add(TopicPartition(topic, int(partition)))
    return frozenset(out)


def assignment(**topics: Sequence[int]) -> ConsumerGroupHeartbeatAssignment:
    ids = {"t": T_ID, "u": U_ID}
    return ConsumerGroupHeartbeatAssignment(
        topic_partitions=tuple(
            ConsumerGroupHeartbeatTopicPartitions(topic_id=ids[name], partitions=tuple(parts))
            for name, parts in topics.items()
        )
    )


def metadata(*names: str) -> MetadataUpdate:
    ids = {"t": T_ID, "u": U_ID}
    return MetadataUpdate(
        metadata=ClusterMetadata.from_partition_counts(dict.fromkeys(names, 4)),
        topic_ids={name: ids[name] for name in names},
    )


def sends(effects: Sequence[Effect]) -> list[Send]:
    return [e for e in effects if isinstance(e, Send)]


def heartbeat(effects: Sequence[Effect]) -> tuple[int, ConsumerGroupHeartbeatRequest]:
    (send,) = [s for s in sends(effects) if isinstance(s.request, ConsumerGroupHeartbeatQuery)]
    assert send.node_id == COORDINATOR
    assert isinstance(send.request, ConsumerGroupHeartbeatQuery)
    return send.request_id, send.request.request


def listeners(effects: Sequence[Effect]) -> list[InvokeListener]:
    return [e for e in effects if isinstance(e, InvokeListener)]


def quiet(effects: Sequence[Effect]) -> list[Effect]:
    """The effects without logs and metric observations."""
    return [e for e in effects if not isinstance(e, Log | Observe)]


class Member:
    """A member and a clock, with helpers that walk it through the usual steps."""

    def __init__(self, **config: object) -> None:
        settings: dict[str, object] = {"group_id": "g", "member_id": "m-1"}
        settings.update(config)
        self.member = ConsumerGroupMember(ConsumerMemberConfig(**settings))  # type: ignore[arg-type]
        self.now = 100.0

    def state(self) -> ConsumerMemberState:
        """A call, not a property: mypy must not narrow it between steps."""
        return self.member.state

    def feed(self, event: object, *, after: float = 0.0) -> list[Effect]:
        self.now += after
        return self.member.handle(event, self.now)

    def answer(
        self, request_id: int, response: ConsumerGroupHeartbeatResponse, *, after: float = 0.0
    ) -> list[Effect]:
        return self.feed(ResponseReceived(request_id=request_id, response=response), after=after)

    def join(self) -> tuple[int, ConsumerGroupHeartbeatRequest]:
        """Subscribe to ``t``, find the coordinator: returns the join heartbeat."""
        fx = self.feed(Subscribe(topics={"t"}))
        assert [e.topics for e in fx if isinstance(e, MetadataNeeded)] == [frozenset({"t"})]
        assert any(isinstance(e, FindCoordinator) for e in fx)
        assert self.state() is S.JOINING
        self.feed(metadata("t"))
        return heartbeat(self.feed(CoordinatorFound(node_id=COORDINATOR)))

    def stable(self, *partitions: int, epoch: int = 1) -> None:
        """Join and reconcile ``t``'s ``partitions``; ends STABLE."""
        request_id, _ = self.join()
        fx = self.answer(request_id, joined(epoch, assignment(t=partitions)))
        (assigned,) = listeners(fx)
        fx = self.feed(ListenerDone(invocation_id=assigned.invocation_id, kind=assigned.kind))
        ack_id, _ = heartbeat(fx)
        self.answer(ack_id, ok(epoch))
        assert self.state() is S.STABLE


def joined(
    epoch: int, target: ConsumerGroupHeartbeatAssignment | None, interval_ms: int = 2000
) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        member_id="m-1", member_epoch=epoch, heartbeat_interval_ms=interval_ms, assignment=target
    )


def ok(
    epoch: int, target: ConsumerGroupHeartbeatAssignment | None = None
) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        member_id="m-1", member_epoch=epoch, heartbeat_interval_ms=2000, assignment=target
    )


def failed(code: int) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error_code=code, error_message="no")
