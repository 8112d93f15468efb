"""Interop: coopconsumer and librdkafka (confluent-kafka) members in one cooperative group.

Both sides offer ``cooperative-sticky`` (classic protocol), so either may lead and run
the assignment for the other (KIP-429: the leader's assignor must understand every
member's owned partitions; Java's, librdkafka's and ours all write them in the v1+
Subscription field). The joins are ordered so that each side leads at least once: a
librdkafka member is alone first (it leads while a coopconsumer member joins), then the
librdkafka members leave so that the coopconsumer member is alone and leads while
librdkafka members join. Leader turns are observed, not assumed: librdkafka logs
"I am elected leader" (``debug=cgrp``) and the coopconsumer members' assignors record
each ``assign()`` call with the member ids of the group.

Every member feeds one ``OwnershipLedger``; records flow from a producer throughout, and
every member commits after each batch and in its revoke callback, so the graceful
changes here may lose no record and process none twice.

Runs on Apache Kafka (the ``broker`` fixture's default; ``@pytest.mark.brokers`` adds
the stand-ins). On Kafka, librdkafka commits during a cooperative rebalance on the
connection where its own JoinGroup is parked, so Kafka reads the commit only after the
round completed and refuses its generation (ILLEGAL_GENERATION): the librdkafka members
here keep those offsets and commit them again with the new generation
(``RdkafkaMember``). Two mock quirks shape a mock run. The mock completes
a SyncGroup round as soon as the leader's SyncGroup carries an assignment for every
member (it counts assignments, not SyncGroup requests:
``rd_kafka_mock_cgrp_classic_sync_check``), moves the group to Up, and answers a
follower's SyncGroup that arrives after that with INVALID_REQUEST
(``rd_kafka_mock_cgrp_classic_check_state``), where Kafka answers with the assignment. A
C leader usually beats a Python follower's SyncGroup: the Consumer reports that error
once from poll() and rejoins (as Java), and the coopconsumer members here tolerate
exactly that report on the mock. And the mock refuses commits while a rebalance is
joining, which can make a record be processed twice (accepted only when explained by a
failed commit).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from coopconsumer import TopicPartition
from coopconsumer.testing import EmbeddedBroker
from integration._ledger import (
    MOCK_ASSIGN_DELAY_S,
    CoopMember,
    KeyProducer,
    OwnershipLedger,
    RdkafkaMember,
    RecordAccounting,
    committed_offsets,
    kept_but_given_up,
    late_sync_on_mock,
    wait_for,
)

pytestmark = pytest.mark.slow

PARTITIONS = 6
#: A group counts as settled once balanced and without listener calls for this long
#: (longer than Tansu's JoinGroup hold, so a follow-up cooperative round would show).
QUIET_S = 1.2
#: Bound for one membership change to settle (two cooperative rounds on Tansu take
#: about 2 x session.timeout.ms / 2 = 3 s; the rest is headroom for a loaded machine).
SETTLE_S = 40.0

Member = CoopMember | RdkafkaMember


def _balanced(
    ledger: OwnershipLedger, members: Sequence[Member], all_tps: list[TopicPartition]
) -> bool:
    """Every partition owned, only by ``members``, each owning its fair share."""
    owners = ledger.owners()
    if set(owners) != set(all_tps):
        return False
    names = {m.name for m in members}
    if not set(owners.values()) <= names:
        return False
    counts = [sum(1 for o in owners.values() if o == name) for name in names]
    fair = min(counts) >= len(all_tps) // len(members) and max(counts) <= -(
        -len(all_tps) // len(members)
    )
    return fair and ledger.quiet_for() >= QUIET_S


def _assert_kept_not_revoked(
    ledger: OwnershipLedger, members: Sequence[Member], since: float
) -> None:
    """KIP-429: a rebalance revokes only partitions that move, never one the member keeps."""
    for member in members:
        kept_but_revoked = kept_but_given_up(ledger, member, since)
        assert not kept_but_revoked, (
            f"{member.name} had {sorted(kept_but_revoked)} revoked and then got them back: "
            f"{ledger.events(member.name)}"
            + (
                "\nlibrdkafka's cgrp log since:\n" + "\n".join(member.log_since(since))
                if isinstance(member, RdkafkaMember)
                else ""
            )
        )


def test_mixed_group_both_sides_lead(
    broker: EmbeddedBroker, unique_topic: str, unique_group: str
) -> None:
    on_mock = broker.kind == "mock"
    broker.create_topic(unique_topic, PARTITIONS)
    all_tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
    ledger = OwnershipLedger()
    accounting = RecordAccounting()
    producer = KeyProducer(broker.bootstrap, unique_topic, PARTITIONS, accounting, rate=150)
    producer.produce(300)
    producer.start()
    live: list[Member] = []
    started: list[Member] = []

    def join(member: Member) -> float:
        since = time.monotonic()
        member.start()
        live.append(member)
        started.append(member)
        wait_for(
            lambda: _balanced(ledger, live, all_tps),
            SETTLE_S,
            f"{member.name} to join a balanced group of {[m.name for m in live]}",
            members=live,
        )
        return since

    def leave(member: Member) -> None:
        member.stop()
        live.remove(member)
        wait_for(
            lambda: _balanced(ledger, live, all_tps),
            SETTLE_S,
            f"{[m.name for m in live]} to take over from {member.name}",
            members=live,
        )

    args = (broker.bootstrap, unique_group, [unique_topic], ledger, accounting)
    r1, r2, r3 = (RdkafkaMember(f"rdkafka-{n}", *args) for n in (1, 2, 3))
    c1, c2 = (
        CoopMember(
            f"coop-{n}",
            *args,
            assign_delay_s=MOCK_ASSIGN_DELAY_S if on_mock else 0.0,
            tolerate=late_sync_on_mock if on_mock else None,
        )
        for n in (1, 2)
    )
    try:
        # librdkafka leads while coopconsumer members join ...
        join(r1)
        since = join(c1)
        _assert_kept_not_revoked(ledger, [r1], since)
        since = join(r2)
        _assert_kept_not_revoked(ledger, [r1, c1], since)
        # ... then the coopconsumer member is alone and leads while librdkafka joins.
        leave(r1)
        leave(r2)
        assert ledger.owned_by(c1.name) == frozenset(all_tps)
        since = join(r3)
        _assert_kept_not_revoked(ledger, [c1], since)
        since = join(c2)
        _assert_kept_not_revoked(ledger, [c1, r3], since)

        producer.stop()
        wait_for(
            lambda: not accounting.missing(),
            SETTLE_S,
            "every produced record to be processed",
            members=live,
        )
        for member in list(live):
            member.stop()
            live.remove(member)
    finally:
        producer.stop()
        for member in live:
            member.stop()

    for member in started:
        assert member.error is None, f"{member.name}: {member.error!r}"
    ledger.check()
    failures = {m.name: m.commit_failures[:3] for m in started if m.commit_failures}
    # Every change was graceful and every member commits before giving a partition up,
    # so on Kafka no record is processed twice. Both embedded brokers refuse some of
    # those commits: the mock while a rebalance is joining (REBALANCE_IN_PROGRESS, where
    # Kafka accepts the current generation's); Tansu when a librdkafka member commits
    # with the generation of a JoinGroup whose SyncGroup Tansu still holds and another
    # round has started (ILLEGAL_GENERATION). There a duplicate is accepted only when
    # the member that first processed it reported a failed commit.
    try:
        accounting.check(allow_duplicates=broker.kind in ("mock", "tansu"))
    except AssertionError as exc:
        raise AssertionError(f"{exc}\ncommit failures: {failures}") from None
    for name, count in accounting.duplicated_after().items():
        assert name in failures, (
            f"{count} record(s) first processed by {name} were processed again, but "
            f"{name} had no failed commit: {accounting.duplicate_readers()}"
        )
    assert committed_offsets(broker.bootstrap, unique_group, all_tps) == accounting.end_offsets()
    assert not producer.errors

    # librdkafka led a group with a coopconsumer member in it ...
    assert any(size >= 2 for size in r1.led()), f"rdkafka-1 leader turns: {r1.led()}"
    # ... and coopconsumer led groups with librdkafka members in them.
    rdkafka_ids = r3.member_ids
    assert rdkafka_ids, "rdkafka-3 never got a member id"
    assert any(set(group) & rdkafka_ids for group in c1.led() + c2.led()), (
        f"coop leader turns {c1.led()} / {c2.led()} never included {rdkafka_ids}"
    )
    # The coordinator chose cooperative-sticky at every join (it is the only protocol).
    for member in started:
        assert {name for _, name in member.chosen_protocols()} == {"cooperative-sticky"}
