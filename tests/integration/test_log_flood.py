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
from pathlib import Path
from typing import Literal

import pytest

from coopconsumer.testing import SaslServer, embedded_broker, write_test_certificates

pytestmark = pytest.mark.integration

_SECONDS = 3.0

#: Each program starts its clock once set up (setup may be slow on a busy machine, and
#: librdkafka hands its log lines over only inside poll()).
_PROGRAMS = {
    "raw-consumer": """
        import confluent_kafka
        c = confluent_kafka.Consumer({"bootstrap.servers": ADDRESS, "group.id": "g", **EXTRA})
        c.subscribe(["t"])
        END = time.monotonic() + SECONDS
        while time.monotonic() < END:
            c.poll(0.2)
        """,
    "raw-producer": """
        import confluent_kafka
        p = confluent_kafka.Producer({"bootstrap.servers": ADDRESS, "enable.idempotence": True})
        p.produce("t", b"x")
        END = time.monotonic() + SECONDS
        while time.monotonic() < END:
            p.poll(0.2)
        """,
    "consumer": """
        from coopconsumer import Consumer
        c = Consumer({"bootstrap.servers": ADDRESS, "group.id": "g", **EXTRA})
        c.subscribe(["t"])
        END = time.monotonic() + SECONDS
        try:
            while time.monotonic() < END:
                c.poll(0.2)
        except Exception as exc:  # a fatal error (authentication) ends the run
            print(f"raised {type(exc).__name__}: {exc}", file=sys.stderr)
        """,
    "async-consumer": """
        import asyncio
        from coopconsumer.aio import AsyncConsumer
        async def main():
            c = AsyncConsumer({"bootstrap.servers": ADDRESS, "group.id": "g"})
            c.subscribe(["t"])
            end = time.monotonic() + SECONDS
            while time.monotonic() < end:
                await c.poll(0.2)
        asyncio.run(main())
        """,
    "spark-writer-producer": """
        from coopconsumer._io._producer import IdempotentProducer
        p = IdempotentProducer({"bootstrap.servers": ADDRESS})
        p.produce("t", b"x")
        END = time.monotonic() + SECONDS
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
        END = time.monotonic() + SECONDS
        try:
            while True:  # at least one step
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


def _stderr_lines(name: str, address: str, extra: dict[str, str] | None = None) -> list[str]:
    """stderr of ``name``'s program run for ``_SECONDS`` (the process then exits at
    once: what closing prints is not part of the comparison)."""
    program = "import os, sys, time\n"
    program += f"ADDRESS = {address!r}\nSECONDS = {_SECONDS}\n"
    program += f"EXTRA = {extra or {}!r}\n"
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


@pytest.mark.parametrize("kind", ["kafka", "tansu"])
@pytest.mark.parametrize("fault", ["wrong password", "untrusted CA"])
def test_bad_tls_or_sasl_settings_print_no_more_than_raw_confluent_kafka(
    tmp_path: Path, kind: Literal["kafka", "tansu"], fault: str
) -> None:
    """The same comparison for bad SASL credentials and a CA that does not sign the
    broker's certificate, against Apache Kafka's SASL_SSL listener and the SASL gateway
    in front of Tansu: the consumer raises AuthenticationError (fatal: nothing
    reconnects in a loop) and prints no more lines than raw confluent-kafka, which
    retries and logs every attempt."""
    certs = write_test_certificates(tmp_path / "certs")
    server = SaslServer(users={"alice": "alice-secret"}, mechanisms=("SCRAM-SHA-512",))
    bad = {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": str(certs.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    if fault == "wrong password":
        bad["sasl.password"] = "not-the-password"
    else:
        other = write_test_certificates(tmp_path / "other")
        bad["ssl.ca.location"] = str(other.ca)
    with embedded_broker(kind, tls=certs.tls_files(), sasl=server) as broker:
        theirs = _stderr_lines("raw-consumer", broker.bootstrap, bad)
        ours = _stderr_lines("consumer", broker.bootstrap, bad)
    assert theirs
    assert 1 <= len(ours) <= len(theirs), (len(ours), len(theirs), ours[:6])
    assert any("raised AuthenticationError" in line for line in ours), ours
    assert not any("not-the-password" in line for line in ours)
    # The error is raised to the caller: the driver logs it in one line, without the
    # traceback of its own stack (before: 13 lines, 10 of them a traceback).
    assert not any(line.startswith("Traceback") for line in ours), ours
