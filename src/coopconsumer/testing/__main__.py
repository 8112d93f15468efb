"""``python -m coopconsumer.testing kafka [--version V]``: resolve Apache Kafka's jars now.

The test harness resolves them on first use anyway; this does it ahead of time (a CI
step, an image build) and prints where they are, or says what is missing and exits 1.
"""

from __future__ import annotations

import argparse
import sys
import time

from ._kafka_dist import KafkaSetupError, kafka_distribution


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coopconsumer.testing")
    sub = parser.add_subparsers(dest="command", required=True)
    kafka = sub.add_parser("kafka", help="resolve Apache Kafka's jars into the cache")
    kafka.add_argument("--version", help="Kafka release (default: the harness's)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        dist = kafka_distribution(args.version)
    except KafkaSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    jars = len(list(dist.libs.glob("*.jar")))
    print(
        f"Apache Kafka {dist.version}: {jars} jars in {dist.libs} "
        f"({time.monotonic() - started:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
