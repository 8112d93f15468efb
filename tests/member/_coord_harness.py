"""``GroupHarness``: several ``GroupMember`` instances, one ``FakeGroupCoordinator`` and a
controllable clock (franz-go's kfake / h11's ConnectionPair in miniature).

It routes ``Send`` effects to the fake and answers back, answers ``FindCoordinator``
(with a FindCoordinator response the member reads, then ``AddCoordinator``) and
``MetadataNeeded`` at once, answers every ``InvokeListener`` with ``ListenerDone``
immediately (recording the callback), turns dropped answers into ``RequestFailed``
after the request's timeout, and keeps an ownership ledger from ``Assign``/``Unassign``
that fails the moment a partition would have two owners. ``answer_lag`` delays chosen
answers (a member that reads its JoinGroup answer later than another), and
``coordinator`` swaps in another coordinator (``MockTimingCoordinator``: librdkafka's
mock cluster's timing).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs
from fake_group_coordinator import Delivery, FakeGroupCoordinator

from coopconsumer import consumer_protocol
from coopconsumer._errors import CoopConsumerError, RequestTimeoutError
from coopconsumer._member import (
    AddCoordinator,
    Assign,
    CommitDone,
    Effect,
    Fatal,
    FindCoordinator,
    GroupMember,
    InvokeListener,
    ListenerDone,
    ListenerKind,
    MemberConfig,
    MemberState,
    MetadataNeeded,
    MetadataUpdate,
    PollCalled,
    ReportError,
    RequestFailed,
    ResponseReceived,
    Send,
    Subscribe,
    Tick,
    Unassign,
)
from coopconsumer._member._inputs import CoordinatorFound
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import FindCoordinatorResponse
from coopconsumer._types import TopicPartition
from coopconsumer.assignors import (
    ClusterMetadata,
    ConsumerPartitionAssignor,
    RebalanceProtocol,
)

#: Bounds that turn a livelock into a test failure instead of a hang.
MAX_EVENTS = 20_000
MAX_STEPS = 5_000
#: How often a polling application calls poll() when nothing else is due.
POLL_PERIOD_S = 1.0


class OwnershipViolation(AssertionError):
    """A partition was assigned to a member while another member still owned it."""


@attrs.frozen
class Callback:
    member: str
    kind: ListenerKind
    partitions: frozenset[TopicPartition]


@attrs.define
class HarnessMember:
    name: str
    member: GroupMember
    alive: bool = True
    polling: bool = True
    owned: set[TopicPartition] = attrs.Factory(set)
    effects: list[Effect] = attrs.Factory(list)


class GroupHarness:
    """A deterministic group of members around a fake coordinator."""

    def __init__(
        self,
        topics: Mapping[str, int],
        *,
        group_id: str = "g",
        require_member_id: bool = True,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 30_000,
        coordinator: FakeGroupCoordinator | None = None,
        answer_lag: Callable[[str, object], float] | None = None,
    ) -> None:
        self.now = 0.0
        self.group_id = group_id
        self.topics = dict(topics)
        self.fake = coordinator or FakeGroupCoordinator(
            group_id, require_member_id=require_member_id
        )
        self.members: dict[str, HarnessMember] = {}
        self.callbacks: list[Callback] = []
        self.commits: dict[object, CoopConsumerError | None] = {}
        self.reported: list[tuple[str, CoopConsumerError]] = []
        self.fatal: dict[str, CoopConsumerError] = {}
        self.owner: dict[TopicPartition, str] = {}
        self._queue: deque[tuple[str, object]] = deque()
        #: How long after the coordinator answers a member reads the answer (a slow
        #: member, a busy thread): ``answer_lag(client, response)`` seconds.
        self.answer_lag = answer_lag
        self._lagging: list[tuple[float, int, Delivery]] = []
        self._timeouts: dict[tuple[str, int], float] = {}
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms

    # ------------------------------------------------------------------ setup

    def add_member(
        self,
        name: str,
        assignors: Sequence[ConsumerPartitionAssignor],
        *,
        topics: Iterable[str] | None = None,
        group_instance_id: str | None = None,
        subscribe: bool = True,
    ) -> GroupMember:
        config = MemberConfig(
            group_id=self.group_id,
            group_instance_id=group_instance_id,
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            max_poll_interval_ms=self.max_poll_interval_ms,
        )
        member = GroupMember(config, assignors)
        self.members[name] = HarnessMember(name=name, member=member)
        if subscribe:
            self.feed(
                name, Subscribe(topics=frozenset(topics if topics is not None else self.topics))
            )
        return member

    def metadata(self) -> ClusterMetadata:
        return ClusterMetadata.from_partition_counts(self.topics)

    def set_topics(self, topics: Mapping[str, int]) -> None:
        """Change the cluster's topics and tell every live member."""
        self.topics = dict(topics)
        for name, hm in self.members.items():
            if hm.alive:
                self.feed(name, MetadataUpdate(metadata=self.metadata()))
        self.run()

    # ------------------------------------------------------------------ driving

    def feed(self, name: str, event: object) -> None:
        self._queue.append((name, event))

    def crash(self, name: str) -> None:
        """The member's process dies: it stops sending; its fetcher is gone."""
        hm = self.members[name]
        hm.alive = False
        for tp in hm.owned:
            if self.owner.get(tp) == name:
                del self.owner[tp]
        hm.owned.clear()

    def run(self) -> None:
        """Process queued inputs and the fake's answers until nothing is left."""
        for _ in range(MAX_EVENTS):
            self._collect_deliveries()
            if not self._queue:
                return
            name, event = self._queue.popleft()
            hm = self.members[name]
            if not hm.alive:
                continue
            effects = hm.member.handle(event, self.now)
            if isinstance(event, Tick):
                deadline = hm.member.next_deadline
                if deadline is not None and deadline <= self.now:
                    raise AssertionError(f"{name}: deadline {deadline} still due after a Tick")
            hm.effects.extend(effects)
            for effect in effects:
                self._execute(hm, effect)
        raise AssertionError(f"t={self.now}: no quiescence after {MAX_EVENTS} inputs (livelock)")

    def _collect_deliveries(self) -> None:
        outbox, self.fake.outbox = self.fake.outbox, []
        for delivery in outbox:
            lag = self.answer_lag(delivery.client, delivery.response) if self.answer_lag else 0.0
            if lag > 0:
                heapq.heappush(self._lagging, (self.now + lag, len(self._lagging), delivery))
            else:
                self._deliver(delivery)

    def _deliver(self, delivery: Delivery) -> None:
        self._timeouts.pop((delivery.client, delivery.request_id), None)
        self._queue.append(
            (
                delivery.client,
                ResponseReceived(request_id=delivery.request_id, response=delivery.response),
            )
        )

    def _execute(self, hm: HarnessMember, effect: Effect) -> None:
        name = hm.name
        if isinstance(effect, Send):
            timeout = effect.timeout_s if effect.timeout_s is not None else 30.0
            self._timeouts[(name, effect.request_id)] = self.now + timeout
            self.fake.submit(name, effect.node_id, effect.request_id, effect.request, self.now)
        elif isinstance(effect, FindCoordinator):
            # Answered on the wire's terms: the member reads the answer itself.
            if self.fake.available:
                answer = FindCoordinatorResponse(node_id=self.fake.node_id, host="fake", port=1)
            else:
                answer = FindCoordinatorResponse(error_code=error_codes.COORDINATOR_NOT_AVAILABLE)
            self.feed(
                name,
                ResponseReceived(request_id=effect.request_id, response=answer, api_version=3),
            )
        elif isinstance(effect, AddCoordinator):
            self.feed(name, CoordinatorFound(node_id=effect.node_id))
        elif isinstance(effect, MetadataNeeded):
            self.feed(name, MetadataUpdate(metadata=self.metadata()))
        elif isinstance(effect, InvokeListener):
            self._check_callback(hm, effect)
            self.callbacks.append(Callback(name, effect.kind, effect.partitions))
            self.feed(name, ListenerDone(invocation_id=effect.invocation_id, kind=effect.kind))
        elif isinstance(effect, Assign):
            for tp in effect.partitions:
                other = self.owner.get(tp)
                if other is not None and other != name:
                    raise OwnershipViolation(
                        f"t={self.now}: {tp} assigned to {name} while {other} owns it"
                    )
                if tp in hm.owned:
                    raise OwnershipViolation(f"{tp} assigned twice to {name}")
                self.owner[tp] = name
                hm.owned.add(tp)
        elif isinstance(effect, Unassign):
            for tp in effect.partitions:
                if tp not in hm.owned:
                    raise OwnershipViolation(f"{name} unassigned {tp}, which it does not own")
                hm.owned.discard(tp)
                if self.owner.get(tp) == name:
                    del self.owner[tp]
        elif isinstance(effect, CommitDone):
            if effect.token in self.commits:
                raise AssertionError(f"commit {effect.token!r} answered twice")
            self.commits[effect.token] = effect.error
        elif isinstance(effect, ReportError):
            self.reported.append((name, effect.error))
        elif isinstance(effect, Fatal):
            self.fatal[name] = effect.error

    def _check_callback(self, hm: HarnessMember, effect: InvokeListener) -> None:
        """REVOKED only for partitions still owned; under COOPERATIVE, never for a
        partition the member keeps: after SyncGroup only partitions missing from the
        coordinator's assignment for it, before JoinGroup only unsubscribed topics."""
        member = hm.member
        if effect.kind is ListenerKind.LOST:
            if effect.partitions & hm.owned:
                raise OwnershipViolation(f"{hm.name}: LOST for partitions still assigned")
            return
        if effect.kind is not ListenerKind.REVOKED:
            return
        if not effect.partitions <= hm.owned:
            raise OwnershipViolation(f"{hm.name}: REVOKED for partitions it does not own")
        if member.protocol is not RebalanceProtocol.COOPERATIVE:
            return
        if member.state is MemberState.ASSIGNING:
            broker = self.fake.members.get(member.member_id)
            assert broker is not None
            new = frozenset(consumer_protocol.decode_assignment(broker.assignment).partitions)
            if effect.partitions & new:
                raise OwnershipViolation(
                    f"{hm.name}: REVOKED kept partitions {sorted(effect.partitions & new)}"
                )
        elif member.state is MemberState.PREPARING_JOIN:
            kept_topics = {tp.topic for tp in effect.partitions} & member.subscribed_topics
            if kept_topics:
                raise OwnershipViolation(
                    f"{hm.name}: REVOKED partitions of subscribed topics {sorted(kept_topics)}"
                )

    def _next_time(self, target: float) -> float:
        candidates = [target]
        for hm in self.members.values():
            if hm.alive:
                deadline = hm.member.next_deadline
                if deadline is not None:
                    candidates.append(deadline)
        fake_deadline = self.fake.next_deadline()
        if fake_deadline is not None:
            candidates.append(fake_deadline)
        candidates.extend(self._timeouts.values())
        if self._lagging:
            candidates.append(self._lagging[0][0])
        if any(hm.polling and hm.member.state is MemberState.POLL_EXPIRED for hm in self.live()):
            # The application polls continuously; a member waiting for a poll gets one
            # within POLL_PERIOD_S rather than at the next unrelated deadline.
            candidates.append(self.now + POLL_PERIOD_S)
        return max(self.now, min(candidates))

    def step_to(self, t: float) -> None:
        """Move the clock to ``t`` and let everything due at ``t`` happen: members
        first (poll, timers), then the coordinator, then request timeouts."""
        self.now = t
        while self._lagging and self._lagging[0][0] <= t:
            self._deliver(heapq.heappop(self._lagging)[2])
        self.run()
        for name in sorted(self.members):
            hm = self.members[name]
            if hm.alive and hm.member.state not in (MemberState.CLOSED, MemberState.FATAL):
                if hm.polling:
                    self.feed(name, PollCalled())
                self.feed(name, Tick())
        self.run()
        self.fake.advance(t)
        self.run()
        for key, due in sorted(self._timeouts.items(), key=lambda kv: kv[1]):
            if due <= t:
                del self._timeouts[key]
                self.feed(
                    key[0],
                    RequestFailed(
                        request_id=key[1], error=RequestTimeoutError("request timed out")
                    ),
                )
        self.run()

    def advance(self, seconds: float) -> None:
        """Advance the clock by ``seconds``, stopping at every deadline on the way."""
        target = self.now + seconds
        self.run()
        for _ in range(MAX_STEPS):
            t = self._next_time(target)
            self.step_to(t)
            if t >= target:
                return
        raise AssertionError(f"t={self.now}: the clock does not progress (a deadline stays due)")

    # ------------------------------------------------------------------ queries

    def live(self) -> list[HarnessMember]:
        return [
            hm
            for hm in self.members.values()
            if hm.alive and hm.member.state not in (MemberState.CLOSED, MemberState.FATAL)
        ]

    def assignment(self) -> dict[str, frozenset[TopicPartition]]:
        return {name: frozenset(hm.owned) for name, hm in self.members.items() if hm.alive}

    def all_partitions(self, topics: Iterable[str] | None = None) -> frozenset[TopicPartition]:
        names = self.topics if topics is None else topics
        return frozenset(
            TopicPartition(t, p) for t in names if t in self.topics for p in range(self.topics[t])
        )

    def callbacks_of(self, name: str, kind: ListenerKind | None = None) -> list[Callback]:
        return [c for c in self.callbacks if c.member == name and (kind is None or c.kind == kind)]
