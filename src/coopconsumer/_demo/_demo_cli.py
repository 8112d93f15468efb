"""``coopconsumer demo``: eager vs cooperative rebalancing, side by side.

Starts an embedded Tansu broker (Apache Kafka with ``--broker kafka``, or uses
``--bootstrap``), runs the same scenario with ``range`` (EAGER) and with
``cooperative-sticky`` (COOPERATIVE), then prints the table,
an ASCII timeline, and writes a PNG when matplotlib is installed. Ctrl-C stops every
member, the producer and the broker before returning 130.

Imports the public API, ``coopconsumer.testing`` and the demo's own modules.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from ..testing import BrokerStartupError, EmbeddedBroker, embedded_broker, external_broker
from ._report import ascii_timeline, format_table, summarize, write_png
from ._run import DemoAborted, DemoError, Options, ScenarioResult, run_scenario

__all__ = ["QUICK", "STANDARD", "TANSU_NOTE", "run_demo"]

#: The two runs: (label, partition.assignment.strategy).
RUNS = (("eager", "range"), ("cooperative", "cooperative-sticky"))

#: Options of a normal run (about 45 s per scenario on Tansu).
STANDARD = Options(
    rate=300.0, hold_s=5.0, settle_s=1.0, session_timeout_ms=6000, heartbeat_interval_ms=1000
)
#: ``--quick``: both scenarios in well under a minute.
QUICK = Options(
    rate=200.0,
    hold_s=1.0,
    settle_s=0.6,
    session_timeout_ms=3000,
    heartbeat_interval_ms=500,
    patience_s=40.0,
)


#: Why rebalances take seconds here. Seen in traces of the group requests: Tansu holds
#: every JoinGroup for about a second, answers a follower's SyncGroup that reaches it
#: before the leader's about a second later, and, when another round starts meanwhile,
#: only after about session.timeout.ms with REBALANCE_IN_PROGRESS, so the follower misses
#: that generation. Cooperative rebalancing needs two rounds, so it pays this more often.
TANSU_NOTE = (
    "note: the embedded Tansu broker holds every JoinGroup for about a second and answers "
    "a follower's SyncGroup that arrives before the leader's a second or more later, which "
    "lengthens rebalances, cooperative ones (two rounds) most; Kafka answers it as soon as "
    "the leader's assignment arrives. Use --broker kafka to run on Apache Kafka."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="coopconsumer demo",
        description="Run one consumer group scenario (2 members, scale to 4, stop 1, records "
        "flowing) with an eager assignor (range) and with cooperative-sticky (KIP-429), "
        "and compare.",
    )
    parser.add_argument("--quick", action="store_true", help="short phases (under a minute)")
    parser.add_argument(
        "--bootstrap", metavar="HOST:PORT", help="use this cluster instead of an embedded broker"
    )
    parser.add_argument(
        "--broker",
        choices=("tansu", "kafka"),
        default="tansu",
        help="the embedded broker: tansu (the default; comes with pip) or kafka (Apache Kafka "
        "from Maven Central; needs Java 17 and Maven)",
    )
    parser.add_argument(
        "--config",
        metavar="KEY=VALUE",
        action="append",
        type=_config_item,
        default=[],
        help="a client setting for every consumer, producer and admin call of --bootstrap "
        "mode, e.g. security.protocol=sasl_ssl (repeatable; see docs/security.md)",
    )
    parser.add_argument("--partitions", type=int, default=12, help="topic partitions (12)")
    parser.add_argument("--rate", type=float, help="records produced per second")
    parser.add_argument(
        "--png",
        type=Path,
        help="where to write the timeline picture (default: a new temporary file, printed)",
    )
    parser.add_argument("--no-png", action="store_true", help="do not write the picture")
    return parser


def _config_item(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        # The value is not echoed: it may be a password.
        raise argparse.ArgumentTypeError("expected KEY=VALUE")
    return key.strip(), value


def _progress(line: str) -> None:
    print(line, flush=True)


def run_demo(argv: Sequence[str] | None = None) -> int:
    """Run the demo with command-line arguments ``argv``; returns the exit status
    (0 done, 1 the scenario failed, 2 bad arguments or no broker, 130 interrupted)."""
    args = _parser().parse_args(argv)
    options = QUICK if args.quick else STANDARD
    if args.config and not args.bootstrap:
        print("coopconsumer demo: --config needs --bootstrap", file=sys.stderr)
        return 2
    if args.partitions < 4:
        print("coopconsumer demo: --partitions must be at least 4", file=sys.stderr)
        return 2
    options = Options(
        partitions=args.partitions,
        rate=options.rate if args.rate is None else args.rate,
        hold_s=options.hold_s,
        settle_s=options.settle_s,
        patience_s=options.patience_s,
        session_timeout_ms=options.session_timeout_ms,
        heartbeat_interval_ms=options.heartbeat_interval_ms,
    )
    stop = threading.Event()
    results: list[ScenarioResult] = []
    began = time.monotonic()
    try:
        with ExitStack() as stack:
            broker: EmbeddedBroker
            if args.bootstrap:
                broker = external_broker(args.bootstrap, client_config=dict(args.config))
                _progress(f"using the cluster at {broker.bootstrap}")
            else:
                if args.broker == "kafka":
                    _progress(
                        "starting Apache Kafka (one KRaft node; jars from Maven on first use)"
                    )
                broker = stack.enter_context(embedded_broker(args.broker))
                name = "Apache Kafka" if args.broker == "kafka" else "Tansu"
                _progress(
                    f"started an embedded {name} broker at {broker.bootstrap} (pid {broker.pid})"
                )
            for label, strategy in RUNS:
                _progress(f"== {label}: partition.assignment.strategy={strategy}")
                results.append(
                    run_scenario(
                        broker,
                        label=label,
                        strategy=strategy,
                        options=options,
                        progress=_progress,
                        stop=stop,
                    )
                )
    except (KeyboardInterrupt, DemoAborted):
        stop.set()
        print("\ninterrupted: members, producer and broker stopped", file=sys.stderr, flush=True)
        return 130
    except BrokerStartupError as exc:
        print(f"coopconsumer demo: no broker: {exc}", file=sys.stderr)
        return 2
    except DemoError as exc:
        print(f"coopconsumer demo: the scenario failed: {exc}", file=sys.stderr)
        return 1

    summaries = [summarize(result) for result in results]
    print()
    print(format_table(summaries))
    print()
    for result in results:
        print(ascii_timeline(result))
        print()
    eager, cooperative = summaries
    print(
        f"cooperative-sticky revoked {cooperative.partitions_revoked} partitions where range "
        f"revoked {eager.partitions_revoked}; partitions a member kept paused at most "
        f"{cooperative.longest_kept_pause_s:.2f} s instead of {eager.longest_kept_pause_s:.2f} s."
    )
    if not args.bootstrap and args.broker == "tansu":
        print(TANSU_NOTE)
    if not args.no_png:
        picture = args.png if args.png is not None else _temporary_png()
        if write_png(results, picture):
            print(f"timeline picture written to {picture}")
        else:
            if args.png is None:
                picture.unlink(missing_ok=True)
            print("(install matplotlib for a PNG timeline: pip install 'coopconsumer[demo]')")
    print(f"done in {time.monotonic() - began:.0f} s")
    lost = sum(s.lost for s in summaries)
    if lost:
        print(f"coopconsumer demo: {lost} records were lost", file=sys.stderr)
        return 1
    return 0


def _temporary_png() -> Path:
    """A new file in the system's temporary directory: never litter the user's checkout."""
    handle, name = tempfile.mkstemp(prefix="coopconsumer-demo-", suffix=".png")
    os.close(handle)
    return Path(name)
