"""Group-protocol faults on librdkafka's mock cluster: the group recovers, loses nothing.

Each test runs a fresh 3-broker mock (``mock_broker``) with a group of coopconsumer
``cooperative-sticky`` members consuming a topic while a producer writes to it, and
injects one kind of fault: the coordinator moves to another broker, the coordinator's
broker goes down (shorter and longer than the session timeout) and comes back, or
Heartbeat / JoinGroup / SyncGroup / OffsetCommit requests get error answers
(REBALANCE_IN_PROGRESS 27, NOT_COORDINATOR 16, COORDINATOR_NOT_AVAILABLE 15,
UNKNOWN_MEMBER_ID 25, ILLEGAL_GENERATION 22), one code at a time.

After each fault the group must recover: every partition owned again by a live member
(bounded wait, no timing assertion). Throughout: the ownership ledger never sees a
partition owned twice; committed offsets never go back (checked on every successful
member commit and by an outside observer sampling OffsetFetch); no produced record is
lost and the final committed offsets are the log ends. Records may be processed twice
here: a member that loses its generation cannot commit its last progress (at least
once, as Kafka's).

The members' leader waits ``MOCK_ASSIGN_DELAY_S`` before assigning, and the members
carry on after the one error the mock's SyncGroup quirk makes poll() report
(``late_sync_on_mock``); ``CoopMember``'s ``assign_delay_s`` explains both. Injected
errors are known to be consumed once the mock has received that many requests of the
API (request tracking), so a test never waits blindly.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from coopconsumer import TopicPartition
from coopconsumer.testing import EmbeddedBroker
from integration._ledger import (
    MOCK_ASSIGN_DELAY_S,
    CommittedWatcher,
    CoopMember,
    KeyProducer,
    OwnershipLedger,
    RecordAccounting,
    committed_offsets,
    late_sync_on_mock,
    wait_for,
)

pytestmark = pytest.mark.slow

PARTITIONS = 6
QUIET_S = 1.0
#: Bound for the group to recover from one fault (a lost session costs one
#: session.timeout.ms plus two rebalances on the mock).
RECOVER_S = 40.0

HEARTBEAT, JOIN_GROUP, SYNC_GROUP, OFFSET_COMMIT = 12, 11, 14, 8
REBALANCE_IN_PROGRESS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE = 27, 16, 15
UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION = 25, 22


class _Group:
    """A coopconsumer group on the mock, with ledger, accounting and fault helpers."""

    def __init__(self, broker: EmbeddedBroker, topic: str, group: str) -> None:
        self.broker = broker
        self.topic = topic
        self.group = group
        self.all_tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.ledger = OwnershipLedger()
        self.accounting = RecordAccounting()
        broker.create_topic(topic, PARTITIONS)
        self.producer = KeyProducer(broker.bootstrap, topic, PARTITIONS, self.accounting, rate=100)
        self.watcher = CommittedWatcher(broker.bootstrap, group, self.all_tps, self.accounting)
        self.live: list[CoopMember] = []
        self.started: list[CoopMember] = []
        self._count = 0

    def add(self) -> CoopMember:
        self._count += 1
        member = CoopMember(
            f"m{self._count}",
            self.broker.bootstrap,
            self.group,
            [self.topic],
            self.ledger,
            self.accounting,
            assign_delay_s=MOCK_ASSIGN_DELAY_S,
            tolerate=late_sync_on_mock,
        )
        member.start()
        self.live.append(member)
        self.started.append(member)
        return member

    def remove(self) -> None:
        self.live.pop(0).stop()

    def settle(self, what: str) -> None:
        """Wait until every partition is owned, the live members share them evenly (what
        cooperative-sticky converges to) and no listener ran for ``QUIET_S``."""

        def settled() -> bool:
            owners = self.ledger.owners()
            names = [m.name for m in self.live]
            counts = [sum(1 for owner in owners.values() if owner == n) for n in names]
            return (
                set(owners) == set(self.all_tps)
                and set(owners.values()) <= set(names)
                and min(counts) >= PARTITIONS // len(names)
                and max(counts) <= -(-PARTITIONS // len(names))
                and self.ledger.quiet_for() >= QUIET_S
            )

        wait_for(settled, RECOVER_S, what, members=self.live)

    def count(self, api_key: int) -> int:
        return sum(1 for request in self.broker.requests() if request.api_key == api_key)

    def inject(self, api_key: int, codes: list[int]) -> int:
        """Queue error answers for the next ``len(codes)`` requests of ``api_key``;
        returns the request count they are consumed at."""
        target = self.count(api_key) + len(codes)
        self.broker.push_request_errors(api_key, codes)
        return target

    def consumed(self, api_key: int, target: int, what: str) -> None:
        wait_for(lambda: self.count(api_key) >= target, RECOVER_S, what, members=self.live)

    def progress(self, what: str) -> None:
        """Records produced from now on reach the members."""
        mark = self.accounting.produced_count
        wait_for(
            lambda: (
                self.accounting.produced_count > mark + 20 and len(self.accounting.missing()) < 50
            ),
            RECOVER_S,
            what,
            members=self.live,
        )

    def finish(self) -> None:
        self.producer.stop()
        wait_for(
            lambda: not self.accounting.missing(),
            RECOVER_S,
            "every produced record to be processed",
            members=self.live,
        )
        while self.live:
            self.remove()

    def check(self) -> None:
        for member in self.started:
            assert member.error is None, f"{member.name}: {member.error!r}"
        self.ledger.check()
        self.accounting.check(allow_duplicates=True)
        committed = committed_offsets(self.broker.bootstrap, self.group, self.all_tps)
        assert committed == self.accounting.end_offsets()
        assert self.watcher.samples > 0
        assert not self.producer.errors


@pytest.fixture
def group(mock_broker: EmbeddedBroker, unique_topic: str, unique_group: str) -> Iterator[_Group]:
    mock_broker.start_request_tracking()
    group = _Group(mock_broker, unique_topic, unique_group)
    group.producer.produce(200)
    group.producer.start()
    group.watcher.start()
    try:
        yield group
    finally:
        group.producer.stop()
        group.watcher.stop()
        while group.live:
            group.remove()


def _start(group: _Group, members: int = 2) -> None:
    for _ in range(members):
        group.add()
    group.settle("the group to form")


def test_coordinator_moves(group: _Group) -> None:
    group.broker.set_coordinator(group.group, 1)
    _start(group)
    for broker_id in (2, 3):
        group.broker.set_coordinator(group.group, broker_id)
        group.broker.clear_requests()
        # The members find the new coordinator: it starts receiving their heartbeats.
        wait_for(
            lambda b=broker_id: any(  # type: ignore[misc]
                r.broker_id == b and r.api_key == HEARTBEAT for r in group.broker.requests()
            ),
            RECOVER_S,
            f"heartbeats to the new coordinator {broker_id}",
            members=group.live,
        )
        group.settle(f"the group to settle on coordinator {broker_id}")
        group.progress(f"records to flow with coordinator {broker_id}")
    group.finish()
    group.check()


@pytest.mark.parametrize("down_s", [1.0, 5.0], ids=["within-session", "beyond-session"])
def test_coordinator_down_then_up(group: _Group, down_s: float) -> None:
    group.broker.set_coordinator(group.group, 2)
    _start(group)
    group.broker.set_broker_down(2)
    time.sleep(down_s)
    group.broker.set_broker_up(2)
    group.settle(f"the group to recover from {down_s} s without coordinator")
    group.progress("records to flow again")
    # A membership change after the outage: the group works, not just its members.
    group.add()
    group.settle("a member to join after the outage")
    group.finish()
    group.check()


_CODES = [
    REBALANCE_IN_PROGRESS,
    NOT_COORDINATOR,
    COORDINATOR_NOT_AVAILABLE,
    UNKNOWN_MEMBER_ID,
    ILLEGAL_GENERATION,
]


@pytest.mark.parametrize("api_key", [HEARTBEAT, OFFSET_COMMIT], ids=["Heartbeat", "OffsetCommit"])
def test_errors_on_steady_requests(group: _Group, api_key: int) -> None:
    """Heartbeat and OffsetCommit run all the time: each error is met at once."""
    _start(group)
    for code in _CODES:
        target = group.inject(api_key, [code])
        group.consumed(api_key, target, f"the injected {code} to be answered")
        group.settle(f"the group to recover from error {code} on API {api_key}")
        group.progress(f"records to flow after error {code}")
    group.finish()
    group.check()


@pytest.mark.parametrize("api_key", [JOIN_GROUP, SYNC_GROUP], ids=["JoinGroup", "SyncGroup"])
def test_errors_during_rebalance(group: _Group, api_key: int) -> None:
    """JoinGroup/SyncGroup only run in a rebalance: each error is queued, then a member
    joins or leaves to start one."""
    _start(group)
    for n, code in enumerate(_CODES):
        if code == ILLEGAL_GENERATION and api_key == JOIN_GROUP:
            continue  # JoinGroup carries no generation: Kafka never answers it with 22
        target = group.inject(api_key, [code])
        if n % 2 == 0:
            group.add()
        else:
            group.remove()
        group.consumed(api_key, target, f"the injected {code} to be answered")
        group.settle(f"the group to recover from error {code} on API {api_key}")
    group.progress("records to flow after the faults")
    group.finish()
    group.check()
