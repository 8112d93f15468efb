"""Shared pieces of the reference-client scenarios (tests/integration/test_reference_*.py).

``Fleet`` makes members of every kind for one group and one ledger: coopconsumer's
``Consumer`` and ``AsyncConsumer``, librdkafka (confluent-kafka), kafka-python, and the
Java and franz-go peers of tests/peers/. ``kept_but_revoked`` is KIP-429's rule on a
member's kept partitions, for any kind; ``explain_duplicates`` accepts a record
processed twice only when the member that processed it first is named with a reason
(killed, stalled, lost its partitions, a commit refused); ``report_row`` prints the
scenario's row of issue 32's closing table (and appends it, as JSON, to the file named
by ``COOPCONSUMER_SCENARIO_ROWS`` when set).

Test helper only.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from coopconsumer import TopicPartition
from integration._ledger import (
    AsyncCoopMember,
    CoopMember,
    KafkaPythonMember,
    OwnershipLedger,
    RdkafkaMember,
    RecordAccounting,
)
from peers._build import GoPeer, JavaPeer
from peers._process import PeerProcess

__all__ = [
    "KINDS",
    "Fleet",
    "Member",
    "explain_duplicates",
    "group_type",
    "kept_but_revoked",
    "report_row",
]

#: Every kind of member, in the order the scenarios let them join.
KINDS = ("coop", "java", "go", "rdkafka", "kafka-python", "aio")

#: Classic-protocol timings of every member these scenarios make. A session long enough
#: to ride out a loaded shared machine (a JVM starting beside three brokers): a member
#: that loses its session there is a loss nobody meant to test. The scenarios that kill
#: or stall a member wait this long for the coordinator to expire it.
SESSION_MS = 10000
HEARTBEAT_MS = 500
PEER_SESSION_MS = SESSION_MS
PEER_HEARTBEAT_MS = HEARTBEAT_MS


class Member(Protocol):
    name: str
    error: BaseException | None
    commit_failures: list[str]

    def start(self) -> None: ...

    def stop(self, timeout_s: float = ...) -> None: ...


class Fleet:
    """Makes members of one group; ``java``/``go`` are the built peers (or None)."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topics: Sequence[str],
        ledger: OwnershipLedger,
        accounting: RecordAccounting,
        *,
        java: JavaPeer | None = None,
        go: GoPeer | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topics = list(topics)
        self.ledger = ledger
        self.accounting = accounting
        self.java = java
        self.go = go

    def java_member(
        self, name: str, *extra: str, strategy: str | None = "cooperative-sticky"
    ) -> PeerProcess:
        assert self.java is not None
        args = [
            "member",
            "--bootstrap",
            self.bootstrap,
            "--group",
            self.group,
            "--topics",
            ",".join(self.topics),
            "--name",
            name,
        ]
        if strategy is not None:
            args += [
                "--strategy",
                strategy,
                "--prop",
                f"session.timeout.ms={PEER_SESSION_MS}",
                "--prop",
                f"heartbeat.interval.ms={PEER_HEARTBEAT_MS}",
            ]
        return PeerProcess(
            name, "java", self.java.argv(*args, *extra), self.ledger, self.accounting
        )

    def go_member(self, name: str, balancer: str = "cooperative-sticky") -> PeerProcess:
        assert self.go is not None
        argv = self.go.argv(
            "--bootstrap",
            self.bootstrap,
            "--group",
            self.group,
            "--topics",
            ",".join(self.topics),
            "--name",
            name,
            "--balancer",
            balancer,
            "--session-ms",
            str(PEER_SESSION_MS),
            "--heartbeat-ms",
            str(PEER_HEARTBEAT_MS),
        )
        return PeerProcess(name, "go", argv, self.ledger, self.accounting)

    def member(self, kind: str, name: str, **kwargs: Any) -> Any:
        """A member of ``kind`` (one of ``KINDS``) called ``name``, not started."""
        args = (self.bootstrap, self.group, self.topics, self.ledger, self.accounting)
        if kind in ("coop", "aio", "rdkafka"):
            kwargs["extra_config"] = {
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                **kwargs.get("extra_config", {}),
            }
        elif kind == "kafka-python":
            kwargs["extra_config"] = {
                "session_timeout_ms": SESSION_MS,
                "heartbeat_interval_ms": HEARTBEAT_MS,
                **kwargs.get("extra_config", {}),
            }
        if kind == "coop":
            return CoopMember(name, *args, **kwargs)
        if kind == "aio":
            return AsyncCoopMember(name, *args, **kwargs)
        if kind == "rdkafka":
            return RdkafkaMember(name, *args, **kwargs)
        if kind == "kafka-python":
            return KafkaPythonMember(name, *args, **kwargs)
        if kind == "java":
            return self.java_member(name, **kwargs)
        if kind == "go":
            return self.go_member(name, **kwargs)
        raise ValueError(kind)


def group_type(bootstrap: str, group_id: str) -> str:
    """The group's type as the broker describes it (``CONSUMER``, ``CLASSIC``), read by
    confluent-kafka's AdminClient (DescribeGroups / ConsumerGroupDescribe)."""
    import confluent_kafka.admin

    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group_id])[group_id].result(timeout=30)
    return str(description.type.name)


def kept_but_revoked(
    ledger: OwnershipLedger, name: str, since: float, *, count_lost: bool = True
) -> frozenset[TopicPartition]:
    """Partitions ``name`` gave up at or after ``since`` and owns again (KIP-429 says a
    rebalance never takes a kept partition away, even for a moment)."""
    kinds: tuple[Any, ...] = ("revoked", "lost") if count_lost else ("revoked",)
    return ledger.removed_since(name, since, kinds) & ledger.owned_by(name)


def explain_duplicates(
    accounting: RecordAccounting, reasons: Mapping[str, str]
) -> dict[str, tuple[int, str]]:
    """Member -> (records it processed that were processed again, why). Fails when a
    member whose records were processed again has no reason in ``reasons`` (a member
    with a refused commit is explained by its commit failures, passed in by the
    caller).

    A key read at as many different offsets as it was read is not a consumer
    duplicate: the log holds it that many times (a producer retry after a lost
    acknowledgement, e.g. while a partition leader was killed). Those are counted
    under ``"(log)"`` and need no reason.
    """
    explained: dict[str, tuple[int, str]] = {}
    unexplained: dict[str, int] = {}
    in_log = 0
    first_readers: dict[str, int] = {}
    for readers in accounting.duplicate_readers(limit=1 << 30).values():
        places = {reader.split("@", 1)[1] for reader in readers}
        if len(places) == len(readers):
            in_log += len(readers) - 1
            continue
        first = readers[0].split("@", 1)[0]
        first_readers[first] = first_readers.get(first, 0) + 1
    for name, count in first_readers.items():
        if name in reasons:
            explained[name] = (count, reasons[name])
        else:
            unexplained[name] = count
    if in_log:
        explained["(log)"] = (in_log, "written twice by the producer (a retried batch)")
    if unexplained:
        raise AssertionError(
            f"records processed again with no reason: {unexplained}; "
            f"e.g. {accounting.duplicate_readers()}"
        )
    return explained


_REFUSAL = re.compile(
    r"RebalanceInProgress|REBALANCE_IN_PROGRESS|ILLEGAL_GENERATION|IllegalGeneration"
    r"|UNKNOWN_MEMBER_ID|UnknownMember|STALE_MEMBER_EPOCH|FENCED|CommitFailed"
    r"|Connection reset|Connection refused|connection refused|NOT_COORDINATOR"
    r"|COORDINATOR_NOT_AVAILABLE|timed out|Timeout"
)


def commit_refusals(members: Sequence[Any]) -> dict[str, dict[str, int]]:
    """Member -> kind of refused commit -> how many (``commit_failures`` summarised)."""
    summary: dict[str, dict[str, int]] = {}
    for member in members:
        for failure in member.commit_failures:
            found = _REFUSAL.search(failure)
            label = found.group(0) if found else failure[:60]
            counts = summary.setdefault(member.name, {})
            counts[label] = counts.get(label, 0) + 1
    return summary


def report_row(
    scenario: str,
    *,
    members: Mapping[str, int],
    events: Sequence[str],
    ledger: OwnershipLedger,
    accounting: RecordAccounting,
    duplicates: Mapping[str, tuple[int, str]],
    kept_but_revoked: int,
    commit_refusals: Mapping[str, Mapping[str, int]],
    started_at: float,
) -> None:
    """Print (and maybe append to ``$COOPCONSUMER_SCENARIO_ROWS``) the scenario's row."""
    row = {
        "scenario": scenario,
        "members": dict(members),
        "events": list(events),
        "double_owners": len(ledger.violations),
        "records": accounting.produced_count,
        "lost": len(accounting.missing()),
        "duplicates": accounting.duplicates(),
        "duplicates_explained": {k: list(v) for k, v in duplicates.items()},
        "kept_but_revoked": kept_but_revoked,
        "commit_refusals": {k: dict(v) for k, v in commit_refusals.items()},
        "runtime_s": round(time.monotonic() - started_at, 1),
    }
    print("SCENARIO-ROW " + json.dumps(row))
    path = os.environ.get("COOPCONSUMER_SCENARIO_ROWS")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps(row) + "\n")
