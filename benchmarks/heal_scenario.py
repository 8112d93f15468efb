"""The operator scenario of issue #21, and the healer's discovery cost.

    python benchmarks/heal_scenario.py scenario [--partitions N] [--chunk-size N]
    python benchmarks/heal_scenario.py discovery [--partitions N] [--polls N]

``scenario`` runs, from the command line and in real time, what an operator would
live through: a 6-broker cluster on 3 racks (the replication test cluster) with 2,000
partitions at RF 3; another tool (kafka-python's admin client) moving 20 partitions
off a broker, throttled by its own settings, plus 10 more between other brokers; that
broker killed; ``coopconsumer heal`` running as two processes (their state topic and
their election on a Tansu broker: the test cluster has no group coordinator), the
active one SIGKILLed while a chunk moves. It prints the commands it runs, their
output, and the evidence: the other tool's moves untouched, every partition back to
full replication across racks, the throttles as they were before, the state topic
never offline. Nothing is timed.

``discovery`` measures what the healer asks per poll on a cluster of ``--partitions``
partitions (topics of 100; 6 brokers, RF 3, manual clock, polls of 5 s): the requests
and response bytes of the observation the healer made before issue #21 (run with
today's admin client, which no longer asks Metadata before each controller request, so
it slightly understates the old cost) (DescribeCluster, Metadata and
ListPartitionReassignments for everything, DescribeLogDirs from every broker, every
poll), and of today's healer, while nothing happens and while a chunk runs. Counted
by the test cluster itself (``request_counts``/``response_bytes``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient

from coopconsumer.__main__ import main as coopconsumer
from coopconsumer._types import TopicPartition
from coopconsumer.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    KRaftReplicaAssignor,
    NewTopic,
)
from coopconsumer.admin.heal import HealConfig, Healer, MemoryStateStore
from coopconsumer.admin.heal._kafka import create_state_topic, read_state
from coopconsumer.admin.reassign._reassign_driver import observed_partitions, partition_sizes
from coopconsumer.testing import (
    BrokerSpec,
    ReplicationCluster,
    embedded_broker,
    replication_cluster,
    unique_name,
)

MB = 1_000_000
RACKS = ("a", "b", "c")
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LIST_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def say(text: str = "") -> None:
    print(text, flush=True)


#: Addresses shown by name in the commands printed.
LABELS: dict[str, str] = {}


def run_command(argv: Sequence[str]) -> tuple[int, str]:
    """``coopconsumer <argv>`` in this process; its exit status and output, shown."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = coopconsumer(list(argv))
    shown = [LABELS.get(a, a) for a in argv]
    say(f"$ coopconsumer {' '.join(shown)}")
    say(out.getvalue().rstrip())
    say(f"(exit {status})")
    return status, out.getvalue()


def throttles(admin: AdminClient, brokers: Sequence[int], topics: Sequence[str]) -> dict[str, str]:
    """Every throttle setting that is set (not a default), as text."""
    resources = [ConfigResource(ConfigResourceType.BROKER, str(b)) for b in brokers]
    resources += [ConfigResource(ConfigResourceType.TOPIC, t) for t in topics]
    out = {}
    for resource, entries in admin.describe_configs(resources).items():
        for key in (*THROTTLE_KEYS, *LIST_KEYS):
            entry = entries.get(key)
            if entry is not None and not entry.is_default and entry.value:
                out[f"{resource.type.name.lower()} {resource.name}: {key}"] = entry.value
    return out


def wait_until(
    what: str, condition: Callable[[], bool], timeout_s: float, tick: Callable[[], None]
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting: {what}")
        tick()
        time.sleep(0.2)


# --------------------------------------------------------------------------- scenario


def scenario(args: argparse.Namespace) -> int:
    rng = random.Random(21)
    brokers = [
        BrokerSpec(node_id=b, rack=RACKS[(b - 1) % 3], replication_bytes_per_s=400 * MB)
        for b in range(1, 7)
    ]
    with (
        replication_cluster(brokers=brokers) as cluster,
        embedded_broker("tansu") as tansu,
        tempfile.TemporaryDirectory() as tmp,
        AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin,
    ):
        LABELS.update({cluster.bootstrap: "<cluster>", tansu.bootstrap: "<tansu>"})
        say(
            f"6 brokers on racks {', '.join(RACKS)}; Tansu at {tansu.bootstrap} for the "
            "healers' state topic and group"
        )
        half = args.partitions // 2
        placed = admin.create_topics(
            [
                NewTopic("orders", num_partitions=half, replication_factor=3),
                NewTopic("clicks", num_partitions=args.partitions - half, replication_factor=3),
            ]
        )
        for topic, assignment in placed.items():
            for index in assignment:
                cluster.set_partition_size(topic, index, rng.randint(1, 5) * MB)
        say(
            f"created orders and clicks: {args.partitions} partitions, RF 3, placed by "
            f"{admin.replica_assignor.name}"
        )

        # The state topic as `coopconsumer heal` creates it on the cluster it heals.
        rf = create_state_topic(admin, "__coopconsumer_heal")
        (state_partition,) = cluster.partitions("__coopconsumer_heal")
        racks = {b.node_id: b.rack for b in cluster.brokers()}
        say(
            f"state topic __coopconsumer_heal on the healed cluster: replication factor {rf}, "
            f"replicas {list(state_partition.replicas)} on racks "
            f"{sorted(str(racks[r]) for r in set(state_partition.replicas))}"
        )
        victim = state_partition.leader  # the broker that dies leads the state topic
        say(f"the broker that will die: {victim} (it leads the state topic)")

        # An operator's throttles, set before anything starts.
        admin.incremental_alter_configs(
            {
                ConfigResource(ConfigResourceType.BROKER, "2"): [
                    AlterConfigOp("follower.replication.throttled.rate", value="30000000")
                ],
                ConfigResource(ConfigResourceType.TOPIC, "orders"): [
                    AlterConfigOp("leader.replication.throttled.replicas", value="0:1,1:2")
                ],
            }
        )

        # Another tool moves 20 partitions off the victim (to brokers of the same racks)
        # and 10 between other brokers, throttled by its own settings.
        on_victim = [p for p in cluster.partitions("clicks") if victim in p.replicas]
        others = {}
        for p in on_victim[:20]:
            live = [b for b in range(1, 7) if b not in p.replicas and racks[b] == racks[victim]]
            target = [live[0] if r == victim else r for r in p.replicas]
            others[TopicPartition("clicks", p.partition)] = target
            cluster.set_partition_size("clicks", p.partition, 300 * MB)
        spare = [p for p in cluster.partitions("orders") if victim not in p.replicas][:10]
        for p in spare:
            free = [
                b
                for b in range(1, 7)
                if b not in p.replicas and b != victim and racks[b] == racks[p.replicas[-1]]
            ]
            if free:
                others[TopicPartition("orders", p.partition)] = [*p.replicas[:-1], free[0]]
        their_brokers = sorted({b for t in others.values() for b in t})
        admin.incremental_alter_configs(
            {
                **{
                    ConfigResource(ConfigResourceType.BROKER, str(b)): [
                        AlterConfigOp("follower.replication.throttled.rate", value="20000000")
                    ]
                    for b in their_brokers
                    if b != 2
                },
                ConfigResource(ConfigResourceType.TOPIC, "clicks"): [
                    AlterConfigOp(
                        "follower.replication.throttled.replicas",
                        value=",".join(
                            f"{tp.partition}:{b}"
                            for tp, t in others.items()
                            if tp.topic == "clicks"
                            for b in t
                        ),
                    )
                ],
            }
        )
        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
        try:
            kp.alter_partition_reassignments(
                {KpTopicPartition(tp.topic, tp.partition): t for tp, t in others.items()}
            )
        finally:
            kp.close()
        say(
            f"another tool (kafka-python) is moving {len(others)} partitions, "
            f"{sum(tp.topic == 'clicks' for tp in others)} of them off broker {victim}"
        )
        all_brokers = list(range(1, 7))
        before = throttles(admin, all_brokers, ["orders", "clicks"])
        say("throttles before: " + "; ".join(f"{k} = {v}" for k, v in sorted(before.items())))
        run_command(["reassign", "list", "--bootstrap-server", cluster.bootstrap])

        # Two healers. Their state and election live on Tansu.
        settings = Path(tmp) / "state.properties"
        settings.write_text("session.timeout.ms=6000\nheartbeat.interval.ms=500\n")
        state_topic, group = unique_name("heal-state"), unique_name("heal")
        command = [
            sys.executable,
            "-m",
            "coopconsumer",
            "heal",
            "--bootstrap-server",
            cluster.bootstrap,
            "--state-bootstrap-server",
            tansu.bootstrap,
            "--state-config",
            str(settings),
            "--state-topic",
            state_topic,
            "--group-id",
            group,
            "--failure-interval-ms",
            "5000",
            "--chunk-size",
            str(args.chunk_size),
            "--throttle",
            "200000000",
            "--retry-backoff-ms",
            "5000",
            "--poll-interval",
            "0.5",
        ]
        logs = [Path(tmp) / "healer-a.log", Path(tmp) / "healer-b.log"]

        def heal_status() -> None:
            server = ["--bootstrap-server", cluster.bootstrap]
            state = ["--state-bootstrap-server", tansu.bootstrap, "--state-topic", state_topic]
            run_command(["heal", "status", *server, *state])

        say(
            "$ coopconsumer heal --bootstrap-server <cluster> --state-bootstrap-server "
            f"<tansu> --failure-interval-ms 5000 --chunk-size {args.chunk_size} "
            "--throttle 200000000 --retry-backoff-ms 5000 --poll-interval 0.5  (x2)"
        )
        healers = []
        offline_checks = [0, 0]  # checks, times the state topic had no leader
        moved_by_others: dict[TopicPartition, set[tuple[int, ...]]] = {tp: set() for tp in others}

        def watch() -> None:
            offline_checks[0] += 1
            if cluster.partition("__coopconsumer_heal", 0).leader == -1:
                offline_checks[1] += 1
            for tp, move in admin.list_partition_reassignments(list(others)).items():
                moved_by_others[tp].add(move.target)

        try:
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            for log in logs[:1]:
                healers.append(
                    subprocess.Popen(
                        command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env
                    )
                )
            wait_until("healer a active", lambda: "active healer" in logs[0].read_text(), 60, watch)
            healers.append(
                subprocess.Popen(
                    command, stdout=logs[1].open("w"), stderr=subprocess.STDOUT, env=env
                )
            )
            time.sleep(2.0)  # b joins the group as a standby
            say("healer a is active, healer b is a standby")
            cluster.kill_broker(victim)
            say(f"broker {victim} killed at t={cluster.now:.1f} s")
            run_command(
                [
                    "topics",
                    "describe",
                    "--bootstrap-server",
                    cluster.bootstrap,
                    "--unavailable-partitions",
                ]
            )

            def mid_chunk() -> bool:
                moving = admin.list_partition_reassignments()
                return any(tp not in others for tp in moving)

            wait_until("a chunk moving", mid_chunk, 120, watch)
            healers[0].send_signal(signal.SIGKILL)
            healers[0].wait()
            say(
                f"healer a SIGKILLed mid-chunk at t={cluster.now:.1f} s "
                f"({len(admin.list_partition_reassignments())} reassignments in flight)"
            )

            def healed() -> bool:
                for topic in ("orders", "clicks"):
                    for p in cluster.partitions(topic):
                        tp = TopicPartition(topic, p.partition)
                        if tp in others:
                            continue
                        if victim in p.replicas or p.reassigning or len(p.isr) < 3:
                            return False
                return True

            wait_until("every partition healed", healed, 300, watch)
            say(
                f"every partition the healers moved is back at RF 3 at t={cluster.now:.1f} s; "
                f"healer b took over: {'active healer' in logs[1].read_text()}"
            )
            heal_status()
            live = [b for b in all_brokers if b != victim]  # the dead one cannot be asked
            after = throttles(admin, live, ["orders", "clicks"])
            say(
                "throttles after the healing: "
                + "; ".join(f"{k} = {v}" for k, v in sorted(after.items()))
            )
            still = admin.list_partition_reassignments(list(others))
            say(f"the other tool's moves still in flight: {len(still)} of {len(others)}")

            # The other tool lifts its own throttles; its moves finish.
            admin.incremental_alter_configs(
                {
                    ConfigResource(ConfigResourceType.BROKER, str(b)): [
                        AlterConfigOp("follower.replication.throttled.rate", value="1000000000")
                    ]
                    for b in their_brokers
                }
            )
            wait_until(
                "the other tool's moves",
                lambda: not admin.list_partition_reassignments(),
                300,
                watch,
            )
            say("the other tool lifted its throttle; its moves finished")

            def settled() -> bool:
                records = read_state({"bootstrap.servers": tansu.bootstrap}, state_topic)
                return not any(
                    key.startswith("chunk/") and value["state"] in ("queued", "running")
                    for key, value in records.items()
                )

            # The healer's retries (backing off 5 s, 10 s...) find nothing left to do.
            wait_until("the healer's retries", settled, 120, watch)
            heal_status()
            run_command(
                [
                    "topics",
                    "describe",
                    "--bootstrap-server",
                    cluster.bootstrap,
                    "--under-replicated-partitions",
                ]
            )
            healers[1].send_signal(signal.SIGTERM)
            healers[1].wait(30)
        except SystemExit:
            for log in logs:
                if log.exists():
                    say(f"--- {log.name} (last lines)")
                    say("\n".join(log.read_text().splitlines()[-30:]))
            raise
        finally:
            for h in healers:
                if h.poll() is None:
                    h.kill()
                    h.wait()
        alerts = [line for line in logs[1].read_text().splitlines() if "ALERT" in line]
        say(
            "healer b's log: "
            + "; ".join(
                line
                for line in logs[1].read_text().splitlines()
                if "active healer" in line or "failed-brokers" in line
            )
        )
        say(f"healer b's ALERT lines: {len(alerts)}" + (f", first: {alerts[0]}" if alerts else ""))

        # ---- the evidence
        say()
        say("EVIDENCE")
        untouched = all(
            cluster.partition(tp.topic, tp.partition).replicas == tuple(target)
            and moved_by_others[tp] <= {tuple(target)}
            for tp, target in others.items()
        )
        say(
            f"- the other tool's {len(others)} moves untouched (always their own target, "
            f"ending on it): {untouched}"
        )
        full = [p for topic in ("orders", "clicks") for p in cluster.partitions(topic)]
        spread_ok = all(
            len(p.replicas) == 3
            and len(set(p.isr)) == 3
            and victim not in p.replicas
            and len({racks[r] for r in p.replicas}) == 3
            for p in full
        )
        say(
            f"- all {len(full)} partitions at RF 3, in sync, on 3 racks, none on broker "
            f"{victim}: {spread_ok}"
        )
        same = after == {k: v for k, v in before.items() if not k.startswith(f"broker {victim}:")}
        say(
            f"- throttles as before on every live broker and topic (after the healing, before "
            f"the other tool lifted its own): {same}"
        )
        say(
            f"- the state topic on the healed cluster never offline: "
            f"{offline_checks[1] == 0} ({offline_checks[0]} checks; its leader now "
            f"{cluster.partition('__coopconsumer_heal', 0).leader})"
        )
        return 0 if untouched and spread_ok and same and not offline_checks[1] else 1


# --------------------------------------------------------------------------- discovery


def old_observation(admin: AdminClient) -> None:
    """What the healer asked every poll before issue #21."""
    admin.describe_cluster()
    described = admin.describe_topics()
    moving = admin.list_partition_reassignments()
    observed_partitions(described, moving)
    partition_sizes(admin)


@contextlib.contextmanager
def counted(cluster: ReplicationCluster, polls: int) -> Iterator[dict[str, float]]:
    figures: dict[str, float] = {}
    cluster.reset_request_counts()
    yield figures
    counts, sizes = cluster.request_counts(), cluster.response_bytes()
    figures["requests"] = sum(counts.values()) / polls
    figures["kib"] = sum(sizes.values()) / polls / 1024
    figures["detail"] = 0.0
    figures.update({f"n:{k}": v / polls for k, v in counts.items()})


def discovery(args: argparse.Namespace) -> int:
    polls = args.polls
    with replication_cluster(6, racks=list(RACKS), manual_clock=True) as cluster:
        per_topic = 100
        for first in range(0, args.partitions, per_topic):
            name = f"topic-{first // per_topic:03d}"
            count = min(per_topic, args.partitions - first)
            cluster.create_topic(
                name, [[1 + (first + i + k) % 6 for k in (0, 2, 4)] for i in range(count)]
            )
            for i in range(count):
                cluster.set_partition_size(name, i, MB)
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
            rows: list[tuple[str, Mapping[str, float]]] = []
            old_observation(admin)  # connections and the controller learnt
            with counted(cluster, polls) as before:
                for _ in range(polls):
                    old_observation(admin)
                    cluster.advance_time(5.0)
            rows.append(("before #21, every poll", before))
            healer = Healer(
                admin,
                KRaftReplicaAssignor(),
                config=HealConfig(failure_interval_ms=30_000, chunk_size=10),
                store=MemoryStateStore(),
                clock=lambda: cluster.now,
                sleep=cluster.advance_time,
                poll_interval_s=5.0,
            )
            healer.run(max_steps=1)
            with counted(cluster, polls) as idle:
                healer.run(max_steps=polls)  # 24 polls of 5 s: a full view a minute
            rows.append(("now, nothing happening", idle))
            cluster.kill_broker(6)
            healer.run(max_steps=7)  # failed after 30 s: chunks start
            with counted(cluster, polls) as healing:
                healer.run(max_steps=polls)
            rows.append(("now, while chunks run", healing))
    say(
        f"healer discovery on {args.partitions:,} partitions (RF 3, 6 brokers), per poll "
        f"of 5 s, averaged over {polls} polls:"
    )
    for label, figures in rows:
        names = ", ".join(
            f"{k[2:].removesuffix('Request')} {v:g}"
            for k, v in sorted(figures.items())
            if k.startswith("n:")
        )
        say(
            f"  {label:26s} {figures['requests']:6.2f} requests, "
            f"{figures['kib']:9.1f} KiB of responses  ({names})"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("scenario", help="the operator scenario, in real time")
    run.add_argument("--partitions", type=int, default=2000)
    run.add_argument("--chunk-size", type=int, default=100)
    measure = sub.add_parser("discovery", help="requests per poll of the healer")
    measure.add_argument("--partitions", type=int, default=5000)
    measure.add_argument("--polls", type=int, default=24)
    args = parser.parse_args()
    return scenario(args) if args.command == "scenario" else discovery(args)


if __name__ == "__main__":
    sys.exit(main())
