"""The ``coopconsumer`` command line (``python -m coopconsumer``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["demo"]:
        # The demo parses its own options (coopconsumer demo --help).
        from ._demo import run_demo

        return run_demo(args[1:])
    if args[:1] in (["topics"], ["cluster"]):
        from .admin._admin_cli import run_cluster, run_topics

        return (run_topics if args[0] == "topics" else run_cluster)(args[1:])
    if args[:1] == ["reassign"]:
        from .admin.reassign._reassign_cli import run_reassign

        return run_reassign(args[1:])
    if args[:1] == ["heal"]:
        from .admin.heal._heal_cli import run_heal

        return run_heal(args[1:])
    parser = argparse.ArgumentParser(prog="coopconsumer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "demo",
        help="eager vs cooperative rebalancing on an embedded broker (coopconsumer demo --help)",
    )
    sub.add_parser("topics", help="create or describe topics (coopconsumer topics --help)")
    sub.add_parser("cluster", help="describe the cluster (coopconsumer cluster --help)")
    sub.add_parser(
        "reassign",
        help="plan, run, watch, cancel and roll back reassignments (coopconsumer reassign --help)",
    )
    sub.add_parser(
        "heal", help="re-replicate a failed broker's partitions (coopconsumer heal --help)"
    )
    parser.parse_args(args)
    return 1  # pragma: no cover - argparse exits for anything but the commands above


if __name__ == "__main__":
    sys.exit(main())
