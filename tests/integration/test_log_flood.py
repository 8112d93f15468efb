"""An unreachable broker, as a new user meets it with Python's default logging: every
surface prints the failure (naming the address), and never more lines than raw
confluent-kafka prints for the same failure in the same time (issue 35, case 3).

Before, every refused connection (about every 50 ms) was printed twice, once as
librdkafka's FAIL line and once as the consumer's "client error" warning: 65-117 lines
in 3 s where raw confluent-kafka printed 58. Each surface runs in a subprocess of its
own with no logging configured (what reaches stderr is what a user sees), for the same
time as raw confluent-kafka, against the same closed port.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

_SECONDS = 3.0

_PROGRAMS = {
    "raw-consumer": """
        import confluent_kafka
        c = confluent_kafka.Consumer({"bootstrap.servers": ADDRESS, "group.id": "g"})
        c.subscribe(["t"])
        while time.monotonic() < END:
            c.poll(0.2)
        """,
    "raw-producer": """
        import confluent_kafka
        p = confluent_kafka.Producer({"bootstrap.servers": ADDRESS, "enable.idempotence": True})
        p.produce("t", b"x")
        while time.monotonic() < END:
            p.poll(0.2)
        """,
    "consumer": """
        from coopconsumer import Consumer
        c = Consumer({"bootstrap.servers": ADDRESS, "group.id": "g"})
        c.subscribe(["t"])
        while time.monotonic() < END:
            c.poll(0.2)
        """,
    "async-consumer": """
        import asyncio
        from coopconsumer.aio import AsyncConsumer
        async def main():
            c = AsyncConsumer({"bootstrap.servers": ADDRESS, "group.id": "g"})
            c.subscribe(["t"])
            while time.monotonic() < END:
                await c.poll(0.2)
        asyncio.run(main())
        """,
    "spark-writer-producer": """
        from coopconsumer._io._producer import IdempotentProducer
        p = IdempotentProducer({"bootstrap.servers": ADDRESS})
        p.produce("t", b"x")
        while time.monotonic() < END:
            p.flush(0.2)
        """,
    "transactional-processor": """
        from coopconsumer import TransactionalProcessor
        p = TransactionalProcessor(
            {"bootstrap.servers": ADDRESS, "group.id": "g"},
            {"transactional.id": "tx"},
            lambda records, out: None,
            topics=["t"],
        )
        try:
            while True:  # at least one step, however slow the start was
                p.step(0.2)
                if time.monotonic() >= END:
                    break
        except Exception as exc:
            print(f"raised {type(exc).__name__}: {exc}", file=sys.stderr)
        """,
}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stderr_lines(name: str, address: str) -> list[str]:
    """stderr of ``name``'s program run for ``_SECONDS`` (the process then exits at
    once: what closing prints is not part of the comparison)."""
    program = "import os, sys, time\n"
    program += f"ADDRESS = {address!r}\nEND = time.monotonic() + {_SECONDS}\n"
    program += textwrap.dedent(_PROGRAMS[name])
    program += "\nsys.stderr.flush()\nos._exit(0)\n"
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr.splitlines()


@pytest.mark.parametrize(
    ("surface", "raw"),
    [
        ("consumer", "raw-consumer"),
        ("async-consumer", "raw-consumer"),
        ("spark-writer-producer", "raw-producer"),
        ("transactional-processor", "raw-consumer"),
    ],
)
def test_an_unreachable_broker_prints_no_more_than_raw_confluent_kafka(
    surface: str, raw: str
) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    theirs = _stderr_lines(raw, address)
    ours = _stderr_lines(surface, address)
    assert theirs, "raw confluent-kafka printed nothing: the comparison means nothing"
    assert 1 <= len(ours) <= len(theirs), (len(ours), len(theirs), ours[:6])
    assert any(address in line for line in ours), ours
