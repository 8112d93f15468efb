"""Issue 32: upgrades as operators run them, Java members among ours, on Apache Kafka.

* The two-bounce eager-to-cooperative upgrade of docs/upgrade.md: a ``range`` group of
  coopconsumer and Java members is restarted one member at a time with
  ``cooperative-sticky,range`` (first bounce), then with ``cooperative-sticky`` (second
  bounce); afterwards a membership change revokes nobody's kept partitions.
* The online migration of a classic cooperative-sticky group to the consumer protocol
  (KIP-848), one member at a time, Java's and ours mixed, and the way back; what it cost
  (the longest pause of a partition, duplicates, how long the group was mixed) is
  printed in the scenario's row and written up in docs/upgrade.md.

A steady producer writes throughout; every member feeds one ownership ledger and one
record accounting (test_reference_classic.py). One module-scoped single-node cluster
with a 500 ms KIP-848 heartbeat interval and a 45 s KIP-848 session timeout (Kafka's
default); one xdist worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coopconsumer.testing import KafkaCluster, kafka_cluster, unique_name
from integration._ledger import CoopMember, LedgerGroup
from integration.conftest import EXTERNAL_BOOTSTRAP
from peers._build import JavaPeer, java_peer
from peers._scenario import (
    Fleet,
    commit_refusals,
    explain_duplicates,
    group_type,
    kept_but_revoked,
    report_row,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("reference-upgrade")]

QUIET_S = 2.0
SETTLE_S = 90.0
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    if EXTERNAL_BOOTSTRAP:
        pytest.skip("needs its own cluster with short KIP-848 timings")
    with kafka_cluster(
        brokers=1,
        broker_config={
            "group.consumer.heartbeat.interval.ms": "500",
            "group.consumer.session.timeout.ms": "45000",
        },
    ) as c:
        yield c


@pytest.fixture(scope="module")
def java() -> JavaPeer:
    return java_peer()


def _group(cluster: KafkaCluster) -> LedgerGroup[Any]:
    topic = unique_name("upg")
    cluster.create_topic(topic, PARTITIONS)
    return LedgerGroup(
        cluster.bootstrap, topic, unique_name("g"), PARTITIONS, quiet_s=QUIET_S, settle_s=SETTLE_S
    )


def _reasons(group: LedgerGroup[Any]) -> dict[str, str]:
    return {
        m.name: f"commit refused: {m.commit_failures[0][:160]}"
        for m in group.started
        if m.commit_failures
    }


def _bounce(group: LedgerGroup[Any], old: Any, new: Any, events: list[str]) -> float:
    """Restart ``old`` as ``new`` (a rolling bounce's one step) and wait for the group to
    settle; returns the time the step took."""
    began = time.monotonic()
    group.live.remove(old)
    old.stop()
    group.adopt(new)
    group.settle(f"{new.name} to replace {old.name}")
    took = time.monotonic() - began
    events.append(f"{old.name} -> {new.name} ({took:.1f} s)")
    return took


def test_two_bounce_eager_to_cooperative_with_java(cluster: KafkaCluster, java: JavaPeer) -> None:
    started_at = time.monotonic()
    group = _group(cluster)
    fleet = Fleet(
        group.bootstrap, group.group, [group.topic], group.ledger, group.accounting, java=java
    )

    def coop(name: str, strategy: str) -> CoopMember:
        member: CoopMember = fleet.member("coop", name, strategy=strategy)
        return member

    steps: list[tuple[str, Callable[[str, str], Any]]] = [
        ("coop-a", coop),
        ("java-a", lambda n, s: fleet.java_member(n, strategy=s)),
        ("coop-b", coop),
    ]
    events: list[str] = []
    try:
        group.producer.produce(120)
        group.producer.start()
        current = [make(f"{name}0", "range") for name, make in steps]
        for member in current:
            group.adopt(member)
            group.settle(f"{member.name} to join")
        events.append("range group: coop-a, java-a, coop-b")
        for bounce, strategy in enumerate(("cooperative-sticky,range", "cooperative-sticky"), 1):
            for i, (name, make) in enumerate(steps):
                new = make(f"{name}{bounce}", strategy)
                _bounce(group, current[i], new, events)
                current[i] = new
        # Every member is COOPERATIVE now: a join revokes only what moves.
        since = time.monotonic()
        extra = coop("coop-c", "cooperative-sticky")
        group.adopt(extra)
        group.settle("coop-c to join the cooperative group")
        bad = {
            m.name: kept_but_revoked(group.ledger, m.name, since)
            for m in current
            if kept_but_revoked(group.ledger, m.name, since)
        }
        assert not bad, bad
        chosen = {name for _, name in current[0].chosen_protocols()}
        assert chosen == {"cooperative-sticky"}, chosen
        events.append("coop-c joins: nobody's kept partitions revoked (COOPERATIVE)")
        group.finish()
    finally:
        group.stop_all()
    group.member_failures()  # member errors and ownership violations fail here
    duplicates = explain_duplicates(group.accounting, _reasons(group))
    group.accounting.check(allow_duplicates=True)
    report_row(
        "two-bounce eager -> cooperative upgrade (range -> cs,range -> cs)",
        members={"coop": 5, "java": 3},
        events=events,
        ledger=group.ledger,
        accounting=group.accounting,
        duplicates=duplicates,
        kept_but_revoked=0,
        commit_refusals=commit_refusals(group.started),
        started_at=started_at,
    )


def _consumer_protocol(member: Any) -> Any:
    for key in ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"):
        member.config.pop(key, None)
    member.config["group.protocol"] = "consumer"
    return member


def test_online_migration_to_consumer_protocol_and_back(
    cluster: KafkaCluster, java: JavaPeer
) -> None:
    """classic cooperative-sticky (coop, Java, coop) -> members restarted one at a time
    with group.protocol=consumer -> and back to classic, a steady producer throughout."""
    started_at = time.monotonic()
    group = _group(cluster)
    fleet = Fleet(
        group.bootstrap, group.group, [group.topic], group.ledger, group.accounting, java=java
    )

    def classic(kind: str, name: str) -> Any:
        if kind == "java":
            return fleet.java_member(name)
        return fleet.member(kind, name)

    def consumer(kind: str, name: str) -> Any:
        if kind == "java":
            return fleet.java_member(name, "--prop", "group.protocol=consumer", strategy=None)
        return _consumer_protocol(fleet.member(kind, name))

    kinds = ["coop", "java", "coop"]
    events: list[str] = []
    windows: dict[str, tuple[float, float]] = {}
    try:
        group.producer.produce(120)
        group.producer.start()
        current = [classic(kind, f"{kind}-{i}k") for i, kind in enumerate(kinds)]
        last_classic: CoopMember = current[2]
        types: list[str] = []
        for member in current:
            group.adopt(member)
            group.settle(f"{member.name} to join")
        events.append("classic cooperative-sticky group: coop, java, coop")
        for direction, make, suffix in (
            ("to consumer", consumer, "c"),
            ("back to classic", classic, "k2"),
        ):
            began = time.monotonic()
            for i, kind in enumerate(kinds):
                new = make(kind, f"{kind}-{i}{suffix}")
                _bounce(group, current[i], new, events)
                current[i] = new
                if i == 0:
                    converted_at = time.monotonic()
                    types.append(group_type(group.bootstrap, group.group))
            windows[direction] = (began, time.monotonic())
            types.append(group_type(group.bootstrap, group.group))
            if direction == "to consumer":
                # The broker ran the classic members' rebalances once the group was a
                # consumer group: the last classic member never led after that.
                assert not [at for at, _ in last_classic.recorder.led if at > converted_at]
        # After the first member switched, the broker had converted the group; after
        # the last one switched back, it was classic again.
        assert types == ["CONSUMER", "CONSUMER", "CONSUMER", "CLASSIC"], types
        events.append(f"group type after the first and the last switch: {types}")
        group.finish()
    finally:
        group.stop_all()
    group.member_failures()  # member errors and ownership violations fail here
    duplicates = explain_duplicates(group.accounting, _reasons(group))
    group.accounting.check(allow_duplicates=True)
    for direction, (since, until) in windows.items():
        pauses = group.accounting.longest_pause(since, until)
        events.append(
            f"{direction}: mixed for {until - since:.1f} s, longest partition pause "
            f"{max(pauses.values()):.2f} s"
        )
    report_row(
        "online migration classic -> consumer -> classic",
        members={"coop": 6, "java": 3},
        events=events,
        ledger=group.ledger,
        accounting=group.accounting,
        duplicates=duplicates,
        kept_but_revoked=0,
        commit_refusals=commit_refusals(group.started),
        started_at=started_at,
    )
