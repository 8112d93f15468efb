"""Issue 32: the reference clients in our groups, classic protocol, on Apache Kafka.

Members of every kind share cooperative-sticky groups on a 3-node KRaft cluster:
coopconsumer's ``Consumer`` and ``AsyncConsumer``, Kafka's Java client and franz-go
(the peers of tests/peers/, built and cached by the tests), librdkafka
(confluent-kafka) and kafka-python. Every member feeds one ``OwnershipLedger`` (never
two owners at any instant, a record only from an owned partition) and one
``RecordAccounting`` (every record processed, committed offsets never going back, the
final commits at the end of every partition); every member commits after each batch
and in its revoke callback, so a graceful change processes nothing twice. A duplicate
is accepted only when the member that processed the record first is named with a reason
(SIGKILLed, or a commit of its was refused). Each scenario prints its row of the
issue's closing table (``SCENARIO-ROW``).

The scenario that kills the group coordinator's node has a module-scoped 3-node cluster
of its own; the others run on the session's one-node ``kafka_broker``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka.admin
import pytest

from coopconsumer import TopicPartition
from coopconsumer.assignors import (
    Assignment,
    ClusterMetadata,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupSubscription,
    RebalanceProtocol,
)
from coopconsumer.testing import EmbeddedBroker, KafkaCluster, kafka_cluster, unique_name
from integration._ledger import CoopMember, LedgerGroup, RdkafkaMember, wait_for
from integration.conftest import EXTERNAL_BOOTSTRAP
from peers._build import GoPeer, JavaPeer, go_peer, java_peer
from peers._process import PeerProcess
from peers._scenario import (
    KINDS,
    PEER_HEARTBEAT_MS,
    PEER_SESSION_MS,
    Fleet,
    commit_refusals,
    explain_duplicates,
    kept_but_revoked,
    report_row,
)

pytestmark = pytest.mark.slow
#: The scenario that kills the coordinator's node has a module-scoped 3-node cluster of
#: its own; the others use the session's one-node broker.
on_own_cluster = pytest.mark.xdist_group("reference-classic")

#: Listener silence after which a group counts as settled: longer than a follow-up
#: cooperative round takes to start (a heartbeat interval, 500 ms at most here).
QUIET_S = 2.0
#: Bound for one membership change to settle on a busy 2-core machine.
SETTLE_S = 90.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    if EXTERNAL_BOOTSTRAP:
        pytest.skip("needs its own 3-node cluster (kills and restarts nodes)")
    with kafka_cluster(brokers=3) as c:
        yield c


@pytest.fixture(scope="module")
def java() -> JavaPeer:
    return java_peer()


@pytest.fixture(scope="module")
def go() -> GoPeer:
    return go_peer()


def _group(cluster: EmbeddedBroker, partitions: int, *, rf: int = 1) -> LedgerGroup[Any]:
    topic = unique_name("ref")
    cluster.create_topic(topic, partitions, replication_factor=rf)
    group: LedgerGroup[Any] = LedgerGroup(
        cluster.bootstrap, topic, unique_name("g"), partitions, quiet_s=QUIET_S, settle_s=SETTLE_S
    )
    return group


def _fleet(group: LedgerGroup[Any], java: JavaPeer, go: GoPeer) -> Fleet:
    return Fleet(
        group.bootstrap,
        group.group,
        [group.topic],
        group.ledger,
        group.accounting,
        java=java,
        go=go,
    )


def _reasons(group: LedgerGroup[Any], extra: dict[str, str]) -> dict[str, str]:
    reasons = dict(extra)
    for member in group.started:
        if member.commit_failures and member.name not in reasons:
            reasons[member.name] = f"commit refused: {member.commit_failures[0][:160]}"
    return reasons


def _check_kept(group: LedgerGroup[Any], names: list[str], since: float) -> int:
    bad = {n: kept_but_revoked(group.ledger, n, since) for n in names}
    bad = {n: tps for n, tps in bad.items() if tps}
    assert not bad, f"kept partitions revoked: {bad}\n{group.ledger.events()[-40:]}"
    return 0


def test_every_kind_in_one_cooperative_group(
    kafka_broker: EmbeddedBroker, java: JavaPeer, go: GoPeer
) -> None:
    """Six kinds join one by one (KIP-429: nobody's kept partitions are revoked), then
    librdkafka leaves, Java is SIGKILLed, franz-go stalls (SIGSTOP) past its session
    timeout and comes back; every record processed, no two owners ever."""
    started_at = time.monotonic()
    group = _group(kafka_broker, 12)
    fleet = _fleet(group, java, go)
    members = {kind: fleet.member(kind, f"{kind}-1") for kind in KINDS}
    events: list[str] = []
    try:
        group.producer.produce(240)
        group.producer.start()
        for kind in KINDS:
            since = time.monotonic()
            before = [m.name for m in group.live]
            group.adopt(members[kind])
            group.settle(f"{kind} to join {before}")
            _check_kept(group, before, since)
            events.append(f"join {kind}")

        since = time.monotonic()
        group.live.remove(members["rdkafka"])
        members["rdkafka"].stop()
        group.settle("the group to take over from rdkafka (left)")
        _check_kept(group, [m.name for m in group.live], since)
        events.append("rdkafka leaves")

        jm: PeerProcess = members["java"]
        since = time.monotonic()
        group.live.remove(jm)
        killed = jm.kill()
        group.settle(f"the group to take over {sorted(killed)} from SIGKILLed java")
        # The survivors lost nothing: only the crashed member's partitions moved.
        _check_kept(group, [m.name for m in group.live], since)
        events.append(f"SIGKILL java ({len(killed)} partitions)")

        gm: PeerProcess = members["go"]
        since = time.monotonic()
        gm.pause_polling()
        gm.freeze()
        time.sleep(0.5)  # the reader has taken every line the peer wrote before
        group.live.remove(gm)
        gm.forget_stalled()
        group.settle("the group to take over from the stalled go member")
        mark = len(gm.events)
        gm.thaw()
        lost = gm.wait_event("lost", mark)  # before it polls again: it knows it is out
        gm.resume_polling()
        group.live.append(gm)
        group.settle("the stalled go member to rejoin")
        # Only the stalled member lost partitions (the coordinator expired it).
        _check_kept(group, [m.name for m in group.live if m is not gm], since)
        events.append(
            f"go stalled past its session timeout (SIGSTOP), told lost {lost['partitions']}"
        )

        group.finish()
    finally:
        group.stop_all()
        for m in members.values():
            if isinstance(m, PeerProcess) and m.alive:
                m.kill()
    group.member_failures()  # member errors and ownership violations fail here
    duplicates = explain_duplicates(
        group.accounting,
        _reasons(group, {"java-1": "SIGKILLed: processed, not yet committed"}),
    )
    group.accounting.check(allow_duplicates=True)
    report_row(
        "classic cooperative-sticky, every kind",
        members=dict.fromkeys(KINDS, 1),
        events=events,
        ledger=group.ledger,
        accounting=group.accounting,
        duplicates=duplicates,
        kept_but_revoked=0,
        commit_refusals=commit_refusals(group.started),
        started_at=started_at,
    )


def _coordinator(bootstrap: str, group_id: str) -> int:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group_id])[group_id].result(timeout=30)
    return int(description.coordinator.id)


@on_own_cluster
def test_group_coordinator_broker_killed(cluster: KafkaCluster, java: JavaPeer, go: GoPeer) -> None:
    """The broker that coordinates the group is SIGKILLed: the members find the new
    coordinator, keep what they own or lose it only where the coordinator ended their
    generation, and process every record; nobody is ever a second owner."""
    started_at = time.monotonic()
    group = _group(cluster, 8, rf=3)
    fleet = _fleet(group, java, go)
    kinds = ("coop", "java", "go", "rdkafka")
    members = {kind: fleet.member(kind, f"{kind}-c") for kind in kinds}
    events: list[str] = []
    victim = None
    try:
        group.producer.produce(160)
        group.producer.start()
        for kind in kinds:
            group.adopt(members[kind])
        group.settle("every kind to join")
        victim = _coordinator(cluster.bootstrap, group.group)
        killed_at = time.monotonic()
        cluster.kill(victim)
        events.append(f"SIGKILL coordinator node {victim}")

        def all_flowing() -> bool:
            # Every partition had a record processed since the kill.
            latest: dict[TopicPartition, float] = {}
            for m in group.live:
                for tp, at in m.last_record_at.items():
                    latest[tp] = max(at, latest.get(tp, 0.0))
            return all(latest.get(tp, 0.0) > killed_at + 1 for tp in group.all_tps)

        wait_for(all_flowing, SETTLE_S, "every partition to flow again", members=group.live)
        group.settle("the group to settle under its new coordinator")
        new = _coordinator(cluster.bootstrap, group.group)
        events.append(f"new coordinator {new}")
        cluster.start_node(victim)
        victim = None
        events.append("node restarted")
        # Losses the kill caused; a member closing while another one's leave rebalances
        # reports its partitions lost too (Java's onLeavePrepare), which is not counted.
        lost = {
            m.name: sum(
                len(e.partitions)
                for e in group.ledger.events(m.name)
                if e.kind == "lost" and e.at >= killed_at
            )
            for m in group.started
        }
        group.finish()
    finally:
        group.stop_all()
        if victim is not None:
            cluster.start_node(victim)
    group.member_failures()  # member errors and ownership violations fail here
    # Why a peer lost partitions, in its own words (printed with the row).
    for m in group.started:
        if lost[m.name] and isinstance(m, PeerProcess):
            print(f"{m.name} stderr (tail):\n" + "\n".join(list(m.stderr_tail)[-60:]))
    duplicates = explain_duplicates(group.accounting, _reasons(group, {}))
    group.accounting.check(allow_duplicates=True)
    report_row(
        "classic, group coordinator's broker SIGKILLed (3 nodes)",
        members=dict.fromkeys(kinds, 1),
        events=[*events, f"partitions lost: {lost}"],
        ledger=group.ledger,
        accounting=group.accounting,
        duplicates=duplicates,
        kept_but_revoked=0,
        commit_refusals=commit_refusals(group.started),
        started_at=started_at,
    )


def _led_for(leader: Any, joiner: Any) -> bool:
    """Whether ``leader`` ran the assignment for a group with ``joiner`` in it (for
    librdkafka, whose log gives only the group's size: a group of two or more)."""
    if isinstance(leader, RdkafkaMember):
        return any(size >= 2 for size in leader.led())
    return any(set(turn) & joiner.member_ids for turn in leader.led())


#: Who joins whom: each reference client leads one of ours (decoding our Subscriptions,
#: assigning for us) and ours lead each reference client.
LEAD_CHAIN = ("coop", "java", "aio", "go", "coop", "rdkafka", "aio", "kafka-python", "coop")


def test_each_kind_leads(kafka_broker: EmbeddedBroker, java: JavaPeer, go: GoPeer) -> None:
    """Each kind leads in turn: it is alone (so the coordinator makes it the leader),
    the next one joins (the leader assigns for both), then the leader leaves. Along
    the chain every reference client leads a coopconsumer member and is led by one."""
    started_at = time.monotonic()
    group = _group(kafka_broker, 6)
    fleet = _fleet(group, java, go)
    members = [fleet.member(kind, f"{kind}-l{i}") for i, kind in enumerate(LEAD_CHAIN)]
    events: list[str] = []
    try:
        group.producer.produce(120)
        group.producer.start()
        group.adopt(members[0])
        group.settle(f"{members[0].name} alone")
        for leader, joiner in itertools.pairwise(members):
            since = time.monotonic()
            group.adopt(joiner)
            group.settle(f"{joiner.name} to join {leader.name}")
            _check_kept(group, [leader.name], since)
            assert _led_for(leader, joiner), (
                f"{leader.name} never led {joiner.name} {joiner.member_ids}: {leader.led()}"
            )
            events.append(f"{leader.name} leads {joiner.name}")
            group.live.remove(leader)
            leader.stop()
            group.settle(f"{joiner.name} to take over from {leader.name}")
        group.finish()
    finally:
        group.stop_all()
    group.member_failures()  # member errors and ownership violations fail here
    duplicates = explain_duplicates(group.accounting, _reasons(group, {}))
    group.accounting.check(allow_duplicates=True)
    report_row(
        "classic cooperative-sticky, each kind leads in turn",
        members={k: LEAD_CHAIN.count(k) for k in KINDS},
        events=events,
        ledger=group.ledger,
        accounting=group.accounting,
        duplicates=duplicates,
        kept_but_revoked=0,
        commit_refusals=commit_refusals(group.started),
        started_at=started_at,
    )


class UserDataRoundRobin(ConsumerPartitionAssignor):
    """A custom COOPERATIVE assignor (``python-rr``): partitions dealt round-robin over
    the sorted member ids, minus any partition another member still owns (KIP-429's
    rule, as examples/my_assignors.py), each Assignment carrying user data
    ``b"py:<member id>:<n partitions>"``. Keeps what it sent and the Subscription user
    data it received, per member id."""

    name = "python-rr"

    def __init__(self) -> None:
        super().__init__()
        self.sent: dict[str, Assignment] = {}
        self.received: dict[str, bytes] = {}

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]

    def assign(
        self, metadata: ClusterMetadata, group_subscription: GroupSubscription
    ) -> GroupAssignment:
        subscriptions = group_subscription.subscriptions
        members = sorted(subscriptions)
        owners = {
            tp: member for member, sub in subscriptions.items() for tp in sub.owned_partitions
        }
        topics = sorted({t for sub in subscriptions.values() for t in sub.topics})
        every = [tp for topic in topics for tp in metadata.partitions_for_topic(topic)]
        wanted: dict[str, list[TopicPartition]] = {m: [] for m in members}
        for i, tp in enumerate(every):
            member = members[i % len(members)]
            if owners.get(tp, member) == member:
                wanted[member].append(tp)
        result = {}
        for member, partitions in wanted.items():
            self.received[member] = subscriptions[member].user_data
            result[member] = Assignment(
                partitions=partitions, user_data=f"py:{member}:{len(partitions)}".encode()
            )
        self.sent.update(result)
        return GroupAssignment(assignments=result)


def test_python_assignor_leads_java_members(kafka_broker: EmbeddedBroker, java: JavaPeer) -> None:
    """A custom Python assignor leads; Java members (with an assignor of the same name
    that never leads) decode our Assignment bytes, user data included, and our leader
    reads the user data of their Subscriptions."""
    started_at = time.monotonic()
    group = _group(kafka_broker, 6)
    fleet = Fleet(
        group.bootstrap, group.group, [group.topic], group.ledger, group.accounting, java=java
    )
    assignor = UserDataRoundRobin()
    leader = CoopMember(
        "coop-hash",
        group.bootstrap,
        group.group,
        [group.topic],
        group.ledger,
        group.accounting,
        extra_config={
            "partition.assignment.strategy": [assignor],
            "session.timeout.ms": PEER_SESSION_MS,
            "heartbeat.interval.ms": PEER_HEARTBEAT_MS,
        },
    )
    javas = [
        fleet.java_member(
            f"java-h{i}",
            "--assignor-name",
            "python-rr",
            "--prop",
            f"session.timeout.ms={PEER_SESSION_MS}",
            "--prop",
            f"heartbeat.interval.ms={PEER_HEARTBEAT_MS}",
            strategy=None,
        )
        for i in (1, 2)
    ]
    events: list[str] = []
    try:
        group.producer.produce(120)
        group.producer.start()
        group.adopt(leader)
        group.settle("the Python leader alone")
        for j in javas:
            since = time.monotonic()
            group.adopt(j)
            group.settle(f"{j.name} to join")
            _check_kept(group, [m.name for m in group.live if m is not j], since)
            events.append(f"{j.name} joins")
        for j in javas:
            (member_id,) = j.member_ids
            _generation, partitions, user_data = j.decoded[-1]
            sent = assignor.sent[member_id]
            assert partitions == frozenset(sent.partitions)
            assert user_data == sent.user_data, (user_data, sent.user_data)
            assert user_data == f"py:{member_id}:{len(partitions)}".encode()
            assert assignor.received[member_id] == f"java-peer:{j.name}".encode()
            assert partitions == group.ledger.owned_by(j.name)
        events.append("Java decoded our Assignment bytes and user data; we read theirs")
        since = time.monotonic()
        group.live.remove(javas[0])
        javas[0].stop()
        group.settle("the leader and java-h2 to take over")
        _check_kept(group, [m.name for m in group.live], since)
        assert javas[1].decoded[-1][2] == assignor.sent[next(iter(javas[1].member_ids))].user_data
        events.append("java-h1 leaves; java-h2 decodes the new assignment")
        # The Python leader stops last: alone, java-h2 would lead, which its assignor
        # refuses (the coordinator makes the remaining member the leader).
        group.live.remove(leader)
        group.live.append(leader)
        group.finish()
    finally:
        group.stop_all()
    group.member_failures()  # member errors and ownership violations fail here
    duplicates = explain_duplicates(group.accounting, _reasons(group, {}))
    group.accounting.check(allow_duplicates=True)
    report_row(
        "custom Python assignor (python-rr + user data) leading Java members",
        members={"coop": 1, "java": 2},
        events=events,
        ledger=group.ledger,
        accounting=group.accounting,
        duplicates=duplicates,
        kept_but_revoked=0,
        commit_refusals=commit_refusals(group.started),
        started_at=started_at,
    )
