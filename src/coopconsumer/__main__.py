"""The ``coopconsumer`` command line (``python -m coopconsumer``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="coopconsumer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="eager vs cooperative rebalancing on an embedded broker")
    args = parser.parse_args(argv)
    if args.command == "demo":
        print(
            "coopconsumer demo: not built yet. The demo needs the group member "
            "(issue 4) and lands with issue 5.",
        )
        return 0
    return 1  # pragma: no cover - argparse enforces a command


if __name__ == "__main__":
    sys.exit(main())
