"""``coopconsumer heal``: the healer as a long-running service, and ``coopconsumer
heal status``: what the healer's state topic says (docs/admin.md, "Healing after a
broker failure").

Thin: parses options, builds the admin client, the state topic and election, and
runs :class:`Healer` until interrupted. Errors print one line and exit 1.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from ..._errors import CoopConsumerError
from .._admin_cli import _properties, format_table
from .._admin_client import AdminClient
from ..reassign._executor import ExecutorCore
from ._heal_core import parse_heal_config
from ._heal_driver import AlwaysActive, Healer, HealerElection, HealStateStore, MemoryStateStore
from ._kafka import (
    DEFAULT_GROUP_ID,
    DEFAULT_STATE_TOPIC,
    KafkaStateTopic,
    create_state_topic,
    read_state,
)

__all__ = ["run_heal"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coopconsumer heal", description=__doc__)
    parser.add_argument("--bootstrap-server", required=True, help="the cluster to heal")
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="properties: client keys (security...) and heal.* keys",
    )
    parser.add_argument("--replica-assignor", help="default, balanced, or module:Class")
    parser.add_argument("--failure-interval-ms", type=int, help="heal.failure.interval.ms")
    parser.add_argument("--chunk-size", type=int, help="heal.chunk.size")
    parser.add_argument("--throttle", type=int, metavar="BYTES_PER_S", help="per chunk")
    parser.add_argument("--retry-backoff-ms", type=int, help="heal.retry.backoff.ms")
    parser.add_argument(
        "--elect-preferred-leaders",
        action="store_true",
        help="heal.elect.preferred.leaders: elect preferred leaders after moves",
    )
    parser.add_argument(
        "--state-bootstrap-server",
        help="where the state topic and group live (default: --bootstrap-server)",
    )
    parser.add_argument(
        "--state-config",
        metavar="FILE",
        help="properties for the state topic's consumer (session.timeout.ms, security...)",
    )
    parser.add_argument("--state-topic", default=DEFAULT_STATE_TOPIC)
    parser.add_argument(
        "--state-replication-factor",
        type=int,
        help="when creating the state topic (default: min(3, brokers))",
    )
    parser.add_argument("--group-id", default=DEFAULT_GROUP_ID)
    parser.add_argument(
        "--no-state-topic",
        action="store_true",
        help="run alone and keep the state in memory (no election, nothing survives a restart)",
    )
    parser.add_argument("--poll-interval", type=float, default=5.0, metavar="SECONDS")
    parser.add_argument("--prometheus-port", type=int, help="serve /metrics on this port")
    parser.add_argument("--max-steps", type=int, help=argparse.SUPPRESS)
    return parser


def _status_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="coopconsumer heal status",
        description="What the healer's state topic says: absent and failed brokers, "
        "chunks, and the partitions waiting for a retry.",
    )
    parser.add_argument("--bootstrap-server", required=True, help="the cluster healed")
    parser.add_argument(
        "--state-bootstrap-server", help="where the state topic lives (default: the cluster)"
    )
    parser.add_argument("--state-config", metavar="FILE", help="properties (security...)")
    parser.add_argument("--state-topic", default=DEFAULT_STATE_TOPIC)
    return parser


def run_heal(argv: Sequence[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``coopconsumer heal ...`` and ``coopconsumer heal status ...``; returns the
    exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if list(argv[:1]) == ["status"]:
        status_args = _status_parser().parse_args(list(argv[1:]))
        try:
            return _status(status_args, out)
        except CoopConsumerError as exc:
            print(f"error: {exc}", file=err)
            return 1
    args = _parser().parse_args(list(argv))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        return _run(args, out)
    except CoopConsumerError as exc:
        print(f"error: {exc}", file=err)
        return 1


def _waiter(stop: threading.Event) -> Callable[[float], None]:
    """A sleep that SIGTERM (``stop``) ends at once."""

    def wait(seconds: float) -> None:
        stop.wait(seconds)

    return wait


def _run(args: argparse.Namespace, out: TextIO) -> int:
    settings: dict[str, object] = {}
    if args.command_config:
        settings.update(_properties(args.command_config))
    for key, value in (
        ("heal.failure.interval.ms", args.failure_interval_ms),
        ("heal.chunk.size", args.chunk_size),
        ("heal.throttle.bytes.per.s", args.throttle),
        ("heal.retry.backoff.ms", args.retry_backoff_ms),
        ("heal.elect.preferred.leaders", "true" if args.elect_preferred_leaders else None),
    ):
        if value is not None:
            settings[key] = value
    config = parse_heal_config(settings)
    client = {k: v for k, v in settings.items() if not k.startswith("heal.")}
    client["bootstrap.servers"] = args.bootstrap_server
    if args.replica_assignor:
        client["replica.assignor"] = args.replica_assignor
    state_client = {k: v for k, v in client.items() if k != "replica.assignor"}
    state_client["bootstrap.servers"] = args.state_bootstrap_server or args.bootstrap_server
    group_settings = dict(state_client)
    if args.state_config:
        group_settings.update(_properties(args.state_config))
    group_settings["group.id"] = args.group_id
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with AdminClient(client) as admin:
        store: HealStateStore
        election: HealerElection
        if args.no_state_topic:
            store, election = MemoryStateStore(), AlwaysActive()
        else:
            with AdminClient(state_client) as state_admin:
                rf = create_state_topic(
                    state_admin, args.state_topic, replication_factor=args.state_replication_factor
                )
                if rf is not None:
                    print(
                        f"created the state topic {args.state_topic} (replication factor {rf})",
                        file=out,
                    )
            topic = KafkaStateTopic(group_settings, topic=args.state_topic)
            store, election = topic, topic
        healer = Healer(
            admin,
            admin.replica_assignor,
            config=config,
            store=store,
            election=election,
            poll_interval_s=args.poll_interval,
            sleep=_waiter(stop),
        )
        if args.prometheus_port is not None:
            from prometheus_client import start_http_server

            from ...metrics_export import register_prometheus

            register_prometheus(healer.metrics, namespace="coopconsumer_heal")
            start_http_server(args.prometheus_port)
        print(
            f"healing {args.bootstrap_server}: failure interval {config.failure_interval_ms} ms, "
            f"chunks of {config.chunk_size}",
            file=out,
            flush=True,
        )
        try:
            healer.run(stop, max_steps=args.max_steps)
        except KeyboardInterrupt:
            pass
        finally:
            metrics = healer.metrics()
            healer.close()
        print(", ".join(f"{name} {value:g}" for name, value in sorted(metrics.items())), file=out)
    return 0


def _status(args: argparse.Namespace, out: TextIO) -> int:
    config: dict[str, object] = {}
    if args.state_config:
        config.update(_properties(args.state_config))
    config["bootstrap.servers"] = args.state_bootstrap_server or args.bootstrap_server
    records = read_state(config, args.state_topic)
    now = time.time()
    print(f"healer state in {args.state_topic}: {len(records)} record(s)", file=out)
    print(format_status(records, now), file=out)
    return 0


def format_status(records: Mapping[str, Mapping[str, Any]], now: float) -> str:
    """The ``heal status`` report: brokers, chunks, then one line per retry."""
    failures = []
    chunks = []
    retries = []
    for key, value in sorted(records.items()):
        kind, _, name = key.partition("/")
        if kind == "failure":
            since = float(value["first_seen"])
            failures.append((name, f"{now - since:.0f} s ago", "yes" if value["failed"] else "no"))
        elif kind == "chunk":
            executor = value.get("executor")
            progress = "-"
            if executor is not None:
                core = ExecutorCore.from_dict(executor)
                done = core.progress()
                progress = f"{done.done}/{done.total}"
            not_before = value.get("not_before")
            chunks.append(
                (
                    name,
                    value["broker"],
                    value["state"],
                    value.get("attempt", 1),
                    len(value["partitions"]),
                    progress,
                    f"in {max(0.0, not_before - now):.0f} s"
                    if not_before is not None and value["state"] == "queued"
                    else "-",
                    value.get("error"),
                )
            )
            reasons = value.get("left_alone") or {}
            if value["state"] == "queued" and int(value.get("attempt", 1)) > 1:
                first = next(iter(reasons.items()), ("-", "-"))
                wait = max(0.0, float(not_before or now) - now)
                retries.append(
                    f"retry: chunk {name} (attempt {value['attempt']}): "
                    f"{len(value['partitions'])} partition(s) of broker {value['broker']} not "
                    f"healed yet ({first[0]}: {first[1]}), next try in {wait:.0f} s"
                )
    lines = [
        format_table(("BROKER", "ABSENT SINCE", "FAILED"), failures),
        "",
        format_table(
            ("CHUNK", "BROKER", "STATE", "ATTEMPT", "PARTITIONS", "MOVED", "STARTS", "ERROR"),
            chunks,
        ),
    ]
    if retries:
        lines += ["", *retries]
    return "\n".join(lines)
