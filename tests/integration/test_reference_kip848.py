"""Issue 32: the reference clients in KIP-848 groups, on Apache Kafka.

KIP-848 (``group.protocol=consumer``) groups mixing coopconsumer (``Consumer`` and
``AsyncConsumer``), Kafka's Java client and librdkafka, with each of the broker's
assignors (``uniform``, ``range``), a broker-side regular expression, and static members
restarting. The upgrades (two bounces, the online migration) are in
test_reference_upgrade.py.

Every member feeds one ``OwnershipLedger`` and one ``RecordAccounting`` (see
test_reference_classic.py); a duplicate is accepted only when its first reader is named
with a reason. Each scenario prints its row of the issue's closing table
(``SCENARIO-ROW``). One module-scoped single-node cluster with a 500 ms KIP-848
heartbeat interval (Kafka's default, 5 s, would make each step take many seconds) and
Kafka's default 45 s session timeout, within which a static member restarts even where
a JVM takes 20 s to start on a loaded shared machine (seen); one xdist worker.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import coopconsumer
from coopconsumer import TopicPartition
from coopconsumer.testing import KafkaCluster, kafka_cluster, unique_name
from integration._ledger import CoopMember, KeyProducer, LedgerGroup, RdkafkaMember
from integration.conftest import EXTERNAL_BOOTSTRAP
from peers._build import JavaPeer, java_peer
from peers._process import PeerProcess
from peers._scenario import (
    Fleet,
    commit_refusals,
    explain_duplicates,
    kept_but_revoked,
    report_row,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("reference-kip848")]

QUIET_S = 2.0
SETTLE_S = 90.0
#: The cluster's KIP-848 timings (group.consumer.*).
HEARTBEAT_MS = 500
SESSION_MS = 45000


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    if EXTERNAL_BOOTSTRAP:
        pytest.skip("needs its own cluster with short KIP-848 timings")
    with kafka_cluster(
        brokers=1,
        broker_config={
            "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
            "group.consumer.session.timeout.ms": str(SESSION_MS),
        },
    ) as c:
        yield c


@pytest.fixture(scope="module")
def java() -> JavaPeer:
    return java_peer()


def _group(cluster: KafkaCluster, partitions: int, topic: str | None = None) -> LedgerGroup[Any]:
    topic = topic or unique_name("ref848")
    cluster.create_topic(topic, partitions)
    return LedgerGroup(
        cluster.bootstrap, topic, unique_name("g"), partitions, quiet_s=QUIET_S, settle_s=SETTLE_S
    )


def _fleet(group: LedgerGroup[Any], java: JavaPeer, topics: list[str] | None = None) -> Fleet:
    return Fleet(
        group.bootstrap,
        group.group,
        topics or [group.topic],
        group.ledger,
        group.accounting,
        java=java,
    )


def _consumer_protocol(member: Any, assignor: str | None, **extra: object) -> Any:
    """An in-process member (ours or librdkafka) switched to ``group.protocol=consumer``:
    the broker assigns, so no client assignor and no classic session settings."""
    for key in ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"):
        member.config.pop(key, None)
    member.config["group.protocol"] = "consumer"
    if assignor is not None:
        member.config["group.remote.assignor"] = assignor
    member.config.update(extra)
    return member


def _java848(fleet: Fleet, name: str, assignor: str | None, *extra: str) -> PeerProcess:
    args = ["--prop", "group.protocol=consumer"]
    if assignor is not None:
        args += ["--prop", f"group.remote.assignor={assignor}"]
    return fleet.java_member(name, *args, *extra, strategy=None)


def _reasons(group: LedgerGroup[Any], extra: dict[str, str]) -> dict[str, str]:
    reasons = dict(extra)
    for member in group.started:
        if member.commit_failures and member.name not in reasons:
            reasons[member.name] = f"commit refused: {member.commit_failures[0][:160]}"
    return reasons


def _check_kept(group: LedgerGroup[Any], names: list[str], since: float) -> None:
    bad = {n: kept_but_revoked(group.ledger, n, since) for n in names}
    bad = {n: tps for n, tps in bad.items() if tps}
    assert not bad, f"kept partitions revoked: {bad}\n{group.ledger.events()[-40:]}"


def _close_out(
    group: LedgerGroup[Any],
    scenario: str,
    members: dict[str, int],
    events: list[str],
    started_at: float,
    reasons: dict[str, str] | None = None,
) -> None:
    group.member_failures()  # member errors and ownership violations fail here
    duplicates = explain_duplicates(group.accounting, _reasons(group, reasons or {}))
    group.accounting.check(allow_duplicates=True)
    report_row(
        scenario,
        members=members,
        events=events,
        ledger=group.ledger,
        accounting=group.accounting,
        duplicates=duplicates,
        kept_but_revoked=0,
        commit_refusals=commit_refusals(group.started),
        started_at=started_at,
    )


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_kip848_mixed_group(cluster: KafkaCluster, java: JavaPeer, assignor: str) -> None:
    """coopconsumer (sync and asyncio), Java and librdkafka members of one KIP-848
    group scale 1 -> 4 -> 2: the broker's assignor moves only what must move, nobody's
    kept partitions are revoked, every record is processed exactly once."""
    started_at = time.monotonic()
    group = _group(cluster, 8)
    fleet = _fleet(group, java)
    members = [
        _consumer_protocol(fleet.member("coop", "coop-k"), assignor),
        _java848(fleet, "java-k", assignor),
        _consumer_protocol(fleet.member("rdkafka", "rdkafka-k"), assignor),
        _consumer_protocol(fleet.member("aio", "aio-k"), assignor),
    ]
    events: list[str] = []
    try:
        group.producer.produce(160)
        group.producer.start()
        for member in members:
            since = time.monotonic()
            before = [m.name for m in group.live]
            group.adopt(member)
            group.settle(f"{member.name} to join {before}")
            _check_kept(group, before, since)
            events.append(f"join {member.name}")
        for member in (members[0], members[2]):
            since = time.monotonic()
            group.live.remove(member)
            member.stop()
            group.settle(f"the group to take over from {member.name}")
            _check_kept(group, [m.name for m in group.live], since)
            events.append(f"{member.name} leaves")
        group.finish()
    finally:
        group.stop_all()
    _close_out(
        group,
        f"KIP-848 group.remote.assignor={assignor}",
        {"coop": 1, "aio": 1, "java": 1, "rdkafka": 1},
        events,
        started_at,
    )


def test_kip848_broker_side_regex(cluster: KafkaCluster, java: JavaPeer) -> None:
    """Java (``SubscriptionPattern``), coopconsumer and librdkafka subscribe with the
    same broker-side regular expression (RE2J, KIP-848); a matching topic created while
    they run is assigned too."""
    started_at = time.monotonic()
    prefix = unique_name("rx")
    first = f"{prefix}-a"
    group = _group(cluster, 4, topic=first)
    regex = f"^{prefix}-.*"
    coop = _consumer_protocol(_RegexCoop("coop-rx", *_args(group, [regex])), "uniform")
    rdk = _consumer_protocol(RdkafkaMember("rdkafka-rx", *_args(group, [regex])), "uniform")
    jv = PeerProcess(
        "java-rx",
        "java",
        java.argv(
            "member",
            "--bootstrap",
            group.bootstrap,
            "--group",
            group.group,
            "--regex",
            regex,
            "--name",
            "java-rx",
            "--prop",
            "group.protocol=consumer",
            "--prop",
            "group.remote.assignor=uniform",
        ),
        group.ledger,
        group.accounting,
    )
    second = f"{prefix}-b"
    second_producer = KeyProducer(group.bootstrap, second, 4, group.accounting, prefix="b")
    events: list[str] = []
    try:
        group.producer.produce(80)
        group.producer.start()
        for member in (jv, coop, rdk):
            group.adopt(member)
            group.settle(f"{member.name} to join")
        events.append("java, coop, rdkafka join on one regex")
        since = time.monotonic()
        cluster.create_topic(second, 4)
        group.all_tps = group.all_tps | _tps(second, 4)
        second_producer.produce(80)
        group.settle("the new matching topic to be assigned")
        _check_kept(group, [m.name for m in group.live], since)
        events.append("a matching topic created: assigned without revoking kept partitions")
        second_producer.stop()
        group.finish()
    finally:
        second_producer.close()
        group.stop_all()
    _close_out(
        group,
        "KIP-848 broker-side regex",
        {"coop": 1, "java": 1, "rdkafka": 1},
        events,
        started_at,
    )


class _RegexCoop(CoopMember):
    """A ``CoopMember`` subscribing with its one topic string as a pattern (a string
    starting with ``^``: the broker matches it, KIP-848)."""

    def _open(self) -> None:
        self.consumer = coopconsumer.Consumer(self.config)
        self.consumer.subscribe(self.topics[0], self.listener)


def _args(group: LedgerGroup[Any], topics: list[str]) -> tuple[Any, ...]:
    return (group.bootstrap, group.group, topics, group.ledger, group.accounting)


def _tps(topic: str, partitions: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in range(partitions))


def test_kip848_static_members_restart(cluster: KafkaCluster, java: JavaPeer) -> None:
    """Static members (``group.instance.id``) of each kind restart one at a time within
    the session timeout: each comes back to the partitions it had, and no other member
    is given them meanwhile."""
    started_at = time.monotonic()
    group = _group(cluster, 6)
    fleet = _fleet(group, java)

    def coop(n: int) -> Any:
        return _consumer_protocol(
            fleet.member("coop", f"coop-s{n}"), "uniform", **{"group.instance.id": "coop-s"}
        )

    def jv(n: int) -> PeerProcess:
        return _java848(fleet, f"java-s{n}", "uniform", "--prop", "group.instance.id=java-s")

    def rdk(n: int) -> Any:
        return _consumer_protocol(
            fleet.member("rdkafka", f"rdkafka-s{n}"), "uniform", **{"group.instance.id": "rdk-s"}
        )

    events: list[str] = []
    try:
        group.producer.produce(120)
        group.producer.start()
        current = [coop(1), jv(1), rdk(1)]
        for member in current:
            group.adopt(member)
        group.settle("three static members")
        for i, make in enumerate((coop, jv, rdk)):
            old = current[i]
            had = group.ledger.owned_by(old.name)
            others = [m.name for m in group.live if m is not old]
            since = time.monotonic()
            group.live.remove(old)
            old.stop()
            new = make(2)
            group.adopt(new)
            group.settle(f"{new.name} to come back")
            assert group.ledger.owned_by(new.name) == had, (
                f"{new.name} got {sorted(group.ledger.owned_by(new.name))}, {old.name} had "
                f"{sorted(had)}: {group.ledger.events()[-30:]}"
            )
            _check_kept(group, others, since)
            for name in others:
                gained = {
                    e.partitions
                    for e in group.ledger.events(name)
                    if e.at >= since and e.kind == "assigned" and e.partitions
                }
                assert not gained, f"{name} was given {gained} while {old.name} restarted"
            current[i] = new
            events.append(f"{old.name} restarted as {new.name}: same {len(had)} partitions")
        group.finish()
    finally:
        group.stop_all()
    _close_out(
        group,
        "KIP-848 static members restarting",
        {"coop": 2, "java": 2, "rdkafka": 2},
        events,
        started_at,
    )
