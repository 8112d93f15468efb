"""``coopconsumer topics create|describe|alter|delete`` and ``coopconsumer cluster
describe``.

Thin: parses options, builds an :class:`AdminClient` (the connection and security keys
come from ``--bootstrap-server`` and ``--command-config``, a Java-style properties
file as Kafka's own tools take), calls it and prints a table. Errors print one line
to stderr and exit 1; bad options exit 2 (argparse).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from .._errors import CoopConsumerError
from .._types import TopicPartition
from ._admin_client import AdminClient
from ._admin_types import AdminOperationError, NewTopic, PartitionDescription, PartitionReassignment

__all__ = ["format_table", "run_cluster", "run_topics"]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces, a dashed rule under the header."""
    cells = [[str(h) for h in headers], *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def _properties(path: str) -> dict[str, str]:
    """``key=value`` lines (``#``/``!`` comments, blank lines skipped)."""
    out: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CoopConsumerError(f"cannot read --command-config {path}: {exc}") from None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise CoopConsumerError(f"{path}:{number}: expected key=value, got {raw!r}")
        out[key.strip()] = value.strip()
    return out


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server", required=True, help="host:port[,host:port...] of the cluster"
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="properties file with more client keys (security.protocol, sasl.*, ssl.*, ...)",
    )


def _client(args: argparse.Namespace) -> AdminClient:
    config: dict[str, object] = {}
    if args.command_config:
        config.update(_properties(args.command_config))
    config["bootstrap.servers"] = args.bootstrap_server
    assignor = getattr(args, "replica_assignor", None)
    if assignor:
        config["replica.assignor"] = assignor
    return AdminClient(config)


def _config_pairs(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CoopConsumerError(f"--config expects key=value, got {item!r}")
        out[key] = value
    return out


def run_topics(argv: Sequence[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``coopconsumer topics ...``; returns the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    parser = argparse.ArgumentParser(
        prog="coopconsumer topics",
        description="Create, grow and delete topics (replicas placed by a replica assignor) "
        "and describe their partitions. Connection and security settings come from "
        "--bootstrap-server and --command-config (a properties file of client keys).",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    assignors = "kraft (Kafka's KRaft placement, the default), zookeeper, balanced, or module:Class"
    create = sub.add_parser("create", help="create a topic, replicas placed by an assignor")
    _common(create)
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument("--replication-factor", type=int, default=1)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    create.add_argument("--replica-assignor", help=assignors)
    create.add_argument("--validate-only", action="store_true")
    describe = sub.add_parser("describe", help="partitions, leaders, replicas and ISR")
    _common(describe)
    describe.add_argument("--topic", action="append", help="a topic (repeatable; default: all)")
    describe.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="only partitions with fewer in-sync replicas than their replication factor",
    )
    describe.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="only partitions without a leader, or whose leader is not live",
    )
    alter = sub.add_parser("alter", help="add partitions to a topic")
    _common(alter)
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, required=True, help="the new partition count")
    alter.add_argument("--replica-assignor", help=assignors)
    alter.add_argument("--validate-only", action="store_true")
    delete = sub.add_parser("delete", help="delete topics")
    _common(delete)
    delete.add_argument("--topic", action="append", required=True, help="a topic (repeatable)")
    args = parser.parse_args(list(argv))
    try:
        with _client(args) as admin:
            if args.action == "alter":
                added = admin.create_partitions(
                    {args.topic: args.partitions}, validate_only=args.validate_only
                )
                verb = "Would add" if args.validate_only else "Added"
                new = added.get(args.topic, {})
                print(
                    f"{verb} {len(new)} partition(s) to {args.topic}, placed by "
                    f"{admin.replica_assignor.name or type(admin.replica_assignor).__name__}:",
                    file=out,
                )
                added_rows = [(p, r[0], r) for p, r in sorted(new.items())]
                print(format_table(("PARTITION", "LEADER", "REPLICAS"), added_rows), file=out)
                return 0
            if args.action == "delete":
                names = list(dict.fromkeys(args.topic))
                try:
                    admin.delete_topics(names)
                    failed: dict[object, object] = {}
                except AdminOperationError as exc:
                    failed = dict(exc.errors)
                results = [
                    (n, "deleted" if n not in failed else f"error: {failed[n]}") for n in names
                ]
                print(format_table(("TOPIC", "RESULT"), results), file=out)
                return 1 if failed else 0
            if args.action == "create":
                placed = admin.create_topics(
                    [
                        NewTopic(
                            args.topic,
                            num_partitions=args.partitions,
                            replication_factor=args.replication_factor,
                            configs=_config_pairs(args.config),
                        )
                    ],
                    validate_only=args.validate_only,
                )
                verb = "Would create" if args.validate_only else "Created"
                print(
                    f"{verb} topic {args.topic} with {args.partitions} partition(s) placed by "
                    f"{admin.replica_assignor.name or type(admin.replica_assignor).__name__}:",
                    file=out,
                )
                placement = [(p, r[0], r) for p, r in sorted(placed[args.topic].items())]
                print(format_table(("PARTITION", "LEADER", "REPLICAS"), placement), file=out)
                return 0
            filtered = args.under_replicated_partitions or args.unavailable_partitions
            moving = admin.list_partition_reassignments() if filtered else {}
            topics = admin.describe_topics(args.topic)
            live = {b.node_id for b in admin.describe_cluster().brokers} if filtered else set()
            rows = [
                (
                    t.name,
                    p.partition,
                    p.leader if p.leader >= 0 else "none",
                    p.leader_epoch,
                    p.replicas,
                    p.isr,
                    p.offline_replicas,
                )
                for name, t in sorted(topics.items())
                for p in t.partitions
                if not filtered
                or (
                    args.under_replicated_partitions
                    and under_replicated(p, moving.get(TopicPartition(name, p.partition)))
                )
                or (args.unavailable_partitions and unavailable(p, live))
            ]
            headers = ("TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE")
            print(format_table(headers, rows), file=out)
            return 0
    except AdminOperationError as exc:
        for item, error in exc.errors.items():
            print(f"error: {item}: {error}", file=err)
        return 1
    except CoopConsumerError as exc:
        print(f"error: {exc}", file=err)
        return 1


def under_replicated(p: PartitionDescription, move: PartitionReassignment | None) -> bool:
    """Fewer in-sync replicas than the replication factor (as Kafka's kafka-topics
    counts it: during a reassignment, the replicas without the ones being added)."""
    rf = len(p.replicas) - len(move.adding) if move is not None else len(p.replicas)
    return len(p.isr) < rf


def unavailable(p: PartitionDescription, live: set[int]) -> bool:
    """No leader, or a leader that is not a live broker."""
    return p.leader < 0 or p.leader not in live


def run_cluster(argv: Sequence[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``coopconsumer cluster describe``; returns the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    parser = argparse.ArgumentParser(
        prog="coopconsumer cluster",
        description="Describe the cluster: brokers, racks, replicas, leaders and disk use. "
        "Connection and security settings come from --bootstrap-server and "
        "--command-config (a properties file of client keys).",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    describe = sub.add_parser("describe", help="cluster id, controller, brokers and racks")
    _common(describe)
    args = parser.parse_args(list(argv))
    try:
        with _client(args) as admin:
            cluster = admin.describe_cluster()
            view = admin.cluster_view()
    except CoopConsumerError as exc:
        print(f"error: {exc}", file=err)
        return 1
    print(
        f"Cluster id: {cluster.cluster_id or '-'}   controller: {cluster.controller_id}", file=out
    )
    rows = []
    for b in cluster.brokers:
        load = view.brokers.get(b.node_id)
        rows.append(
            (
                b.node_id,
                f"{b.host}:{b.port}",
                b.rack,
                load.replicas if load else "-",
                load.leaders if load else "-",
                _bytes(load.used_bytes if load else None),
                _bytes(load.total_bytes if load else None),
            )
        )
    headers = ("BROKER", "ADDRESS", "RACK", "REPLICAS", "LEADERS", "USED", "CAPACITY")
    print(format_table(headers, rows), file=out)
    return 0


def _bytes(value: int | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)  # pragma: no cover - the loop always returns
