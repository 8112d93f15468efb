"""Soak: four coopconsumer members and a producer for a long run with churn.

    python -m reliability.soak                 # 30 minutes on Tansu
    python -m reliability.soak --minutes 3     # a short look

Four members (each its own process, ``reliability/member.py``) share a group on an
8-partition topic that a producer writes ``--rate`` records/s to. Every
``--churn-minutes`` a fifth member joins for a minute and leaves, so the four rebalance
(cooperatively) twice each time. Beside them, an idle coopconsumer member and an idle
confluent-kafka consumer (cooperative-sticky) sit on a topic nobody writes to.

Printed: RSS and CPU of each member over time, a least-squares RSS slope per member
after warm-up (MB/hour), idle CPU of the two idle consumers, and each member's file
descriptors and threads at the start (first steady sample) and at the end (after the
last churn member left). See reliability/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reliability.procstats import ProcSample, sample

__all__ = ["main"]

_PARTITIONS = 8


@contextmanager
def _member(
    kind: str, name: str, bootstrap: str, group: str, topic: str, out: Path, session_ms: int
) -> Iterator[subprocess.Popen[bytes]]:
    cmd = [sys.executable, "-m", "reliability.member", "--kind", kind, "--name", name]
    cmd += ["--bootstrap", bootstrap, "--group", group, "--topic", topic]
    cmd += ["--ledger", str(out / f"{name}.ledger"), "--session-timeout-ms", str(session_ms)]
    cmd += ["--no-record-lines"]
    log = (out / f"{name}.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        _stop(proc)
        log.close()


def _stop(proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _Producer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__(daemon=True, name="soak-producer")
        import confluent_kafka

        self._producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        self._topic, self._rate = topic, rate
        self.stopped = threading.Event()
        self.sent = 0
        self.failed = 0

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.failed += 1

    def run(self) -> None:
        started = time.monotonic()
        while not self.stopped.is_set():
            due = int((time.monotonic() - started) * self._rate)
            while self.sent < due:
                self._producer.produce(
                    self._topic,
                    value=b"x" * 100,
                    key=b"%d" % self.sent,
                    on_delivery=self._delivered,
                )
                self.sent += 1
            self._producer.poll(0.05)
        self._producer.flush(30)


def _slope_mb_per_hour(points: list[tuple[float, float]]) -> float:
    if len(points) < 3:
        return float("nan")
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return float("nan")
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return cov / var * 3600


def main(argv: list[str] | None = None) -> int:
    """Run the soak and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--broker", choices=["tansu", "mock"], default="tansu")
    parser.add_argument("--rate", type=float, default=200.0, help="records per second")
    parser.add_argument("--churn-minutes", type=float, default=3.0)
    parser.add_argument("--sample-s", type=float, default=15.0)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--out", default="/tmp/coopconsumer-soak")
    args = parser.parse_args(argv)

    from coopconsumer.testing import embedded_broker, unique_name

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.ledger"):
        old.unlink()
    duration_s = args.minutes * 60
    warmup_s = min(120.0, duration_s / 5)
    churn_s = args.churn_minutes * 60
    churn_stay_s = min(60.0, churn_s / 2)
    # The last churn member must be gone well before the end sample.
    churn_until = duration_s - churn_stay_s - 45

    with embedded_broker(args.broker) as broker:
        if broker.supports_faults:
            broker.set_group_initial_rebalance_delay_ms(0)
        topic, idle_topic = unique_name("soak"), unique_name("idle")
        broker.create_topic(topic, partitions=_PARTITIONS)
        broker.create_topic(idle_topic, partitions=2)
        group = unique_name("soak-group")
        bootstrap, session = broker.bootstrap, args.session_timeout_ms
        names = [f"member-{i}" for i in range(1, 5)]
        producer = _Producer(bootstrap, topic, args.rate)
        with (
            _member("coop", names[0], bootstrap, group, topic, out, session) as m1,
            _member("coop", names[1], bootstrap, group, topic, out, session) as m2,
            _member("coop", names[2], bootstrap, group, topic, out, session) as m3,
            _member("coop", names[3], bootstrap, group, topic, out, session) as m4,
            _member(
                "coop", "idle-coop", bootstrap, unique_name("idle-a"), idle_topic, out, session
            ) as idle_coop,
            _member(
                "rdkafka",
                "idle-rdkafka",
                bootstrap,
                unique_name("idle-b"),
                idle_topic,
                out,
                session,
            ) as idle_rdk,
        ):
            members = dict(zip(names, (m1, m2, m3, m4), strict=True))
            idle = {"idle-coop": idle_coop, "idle-rdkafka": idle_rdk}
            producer.start()
            started = time.monotonic()
            history: dict[str, list[tuple[float, ProcSample]]] = {n: [] for n in [*members, *idle]}
            churn: subprocess.Popen[bytes] | None = None
            churn_log = None
            churn_left_at = 0.0
            next_churn = churn_s
            churns = 0
            next_sample = 0.0
            header = "  min  " + "  ".join(f"{n:>16}" for n in names) + "   idle coop  idle rdk"
            print(
                f"soak: {args.minutes:g} min on {args.broker}, {args.rate:g} rec/s, churn "
                f"every {args.churn_minutes:g} min; RSS MB / CPU % per member",
                flush=True,
            )
            print(header, flush=True)
            last: dict[str, ProcSample] = {}
            try:
                while (now := time.monotonic() - started) < duration_s:
                    if churn is None and now >= next_churn and now < churn_until:
                        churns += 1
                        churn_log = (out / f"churn-{churns}.log").open("wb")
                        cmd = [sys.executable, "-m", "reliability.member", "--kind", "coop"]
                        cmd += ["--name", f"churn-{churns}", "--bootstrap", bootstrap]
                        cmd += ["--group", group, "--topic", topic, "--no-record-lines"]
                        cmd += ["--ledger", str(out / f"churn-{churns}.ledger")]
                        cmd += ["--session-timeout-ms", str(session)]
                        churn = subprocess.Popen(cmd, stdout=churn_log, stderr=subprocess.STDOUT)
                        next_churn += churn_s
                    elif churn is not None and now >= next_churn - churn_s + churn_stay_s:
                        _stop(churn)
                        churn = None
                        churn_left_at = now
                        if churn_log is not None:
                            churn_log.close()
                    if now >= next_sample:
                        cells = []
                        for name, proc in [*members.items(), *idle.items()]:
                            s = sample(proc.pid)
                            if s is None:
                                raise RuntimeError(f"{name} died: see {out}/{name}.log")
                            prev = last.get(name)
                            cpu = 100 * (s.cpu_s - prev.cpu_s) / args.sample_s if prev else 0.0
                            last[name] = s
                            history[name].append((now, s))
                            cells.append((s.rss_mb, cpu))
                        row = f"{now / 60:5.1f}  " + "  ".join(
                            f"{rss:8.1f} /{cpu:5.1f}%" for rss, cpu in cells[:4]
                        )
                        row += f"   {cells[4][1]:7.2f}%  {cells[5][1]:7.2f}%"
                        print(row + ("   (churn member in)" if churn else ""), flush=True)
                        next_sample += args.sample_s
                    time.sleep(0.5)
            finally:
                if churn is not None:
                    _stop(churn)
                producer.stopped.set()
                producer.join(60)
            end_s = time.monotonic() - started
            for proc in [*members.values(), *idle.values()]:
                _stop(proc)

    print()
    print(
        f"summary after {end_s / 60:.1f} min; warm-up {warmup_s:.0f} s excluded from slopes;"
        f" {churns} churn rounds (last left at {churn_left_at / 60:.1f} min);"
        f" {producer.sent} records produced, {producer.failed} failed deliveries"
    )
    print(
        f"{'member':<13} {'RSS start':>9} {'RSS end':>8} {'RSS max':>8} {'slope MB/h':>10} "
        f"{'CPU avg %':>9} {'fds start/end':>13} {'threads start/end':>17} {'processed':>9}"
    )
    steady_ok = True
    for name in [*members, *idle]:
        points = history[name]
        after = [(t, s) for t, s in points if t >= warmup_s]
        if not after:
            continue
        first, final = after[0][1], points[-1][1]
        slope = _slope_mb_per_hour([(t, s.rss_mb) for t, s in after])
        span = points[-1][0] - points[0][0]
        cpu_avg = 100 * (final.cpu_s - points[0][1].cpu_s) / span if span else 0.0
        same = first.fds == final.fds and first.threads == final.threads
        steady_ok &= same
        processed = "-"
        ledger = out / f"{name}.ledger"
        if ledger.exists():
            for line in ledger.read_text().splitlines():
                event = json.loads(line)
                if event["ev"] == "exit":
                    processed = str(event["processed"])
        print(
            f"{name:<13} {first.rss_mb:9.1f} {final.rss_mb:8.1f} "
            f"{max(s.rss_mb for _, s in points):8.1f} {slope:10.2f} {cpu_avg:9.2f} "
            f"{f'{first.fds}/{final.fds}':>13} {f'{first.threads}/{final.threads}':>17} "
            f"{processed:>9}"
        )
    committed: dict[int, int] = {}
    for ledger in out.glob("*.ledger"):
        if ledger.name.startswith("idle-"):
            continue
        for line in ledger.read_text().splitlines():
            event = json.loads(line)
            if event["ev"] == "commit_ok":
                for _topic, partition, offset in event["offsets"]:
                    committed[partition] = max(committed.get(partition, 0), offset)
    churn_processed = 0
    for ledger in out.glob("churn-*.ledger"):
        for line in ledger.read_text().splitlines():
            event = json.loads(line)
            if event["ev"] == "exit":
                churn_processed += event["processed"]
    print(
        f"committed at the end: {sum(committed.values())} of {producer.sent} produced"
        f" (churn members processed {churn_processed})"
    )
    print(f"fds and threads equal at start and end for every process: {steady_ok}")
    print(f"output and ledgers in {out}")
    return 0 if steady_ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
