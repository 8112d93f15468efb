"""One group member in its own process, for the chaos and soak runs.

    python -m reliability.member --kind coop|rdkafka --bootstrap B --group G --topic T \
        --name m3 [--ledger PATH] [--session-timeout-ms 10000] [--raising-assignor] \
        [--mock-paced]

``coop`` is a ``coopconsumer.Consumer``, ``rdkafka`` a confluent-kafka ``Consumer``;
both use cooperative-sticky, commit synchronously what they processed after each batch
and, inside the revoke callback, what they processed of the partitions being revoked.

The ledger is an append-only file of JSON lines, one write per line (``O_APPEND``, so a
SIGKILL loses at most the line being written): ``start``, ``assigned``/``revoked``/
``lost`` with their partitions, ``record`` (partition, offset, key) for every record
processed, ``commit_ok``/``commit_fail`` (offsets, error), ``error`` (what poll
reported), ``exit``. Times are ``time.monotonic()``, one clock for every process of
the machine (Linux CLOCK_MONOTONIC), so ledgers of different members can be merged.

Signals: SIGTERM closes cleanly (leave the group, final commit); SIGUSR1 makes the next
rebalance callbacks slow (``--slow-s`` each, bounded); SIGUSR2 makes a coopconsumer
member's assignor raise the next time it assigns (as leader). See reliability/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["Ledger", "main"]


class Ledger:
    """Append-only JSON-lines ledger; a no-op without a path."""

    def __init__(self, path: str | None, member: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else None
        self._member = member

    def write(self, event: str, **fields: Any) -> None:
        if self._fd is None:
            return
        fields["ev"] = event
        fields["t"] = time.monotonic()
        os.write(self._fd, (json.dumps(fields, separators=(",", ":")) + "\n").encode())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _tps(partitions: Iterable[Any]) -> list[list[Any]]:
    return sorted([p.topic, p.partition] for p in partitions)


class _Member:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ledger = Ledger(args.ledger, args.name)
        self.stop = False
        self.slow_callbacks = 0
        #: Next offset to commit per (topic, partition), of records processed.
        self.pending: dict[tuple[str, int], int] = {}
        self.owned: set[tuple[str, int]] = set()
        self.processed = 0
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGUSR1, self._on_slow)
        signal.signal(signal.SIGUSR2, self._on_raise)
        self.raise_next = False

    def _on_term(self, _signum: int, _frame: object) -> None:
        self.stop = True

    def _on_slow(self, _signum: int, _frame: object) -> None:
        self.slow_callbacks = 2

    def _on_raise(self, _signum: int, _frame: object) -> None:
        self.raise_next = True

    def _maybe_slow(self) -> None:
        if self.slow_callbacks > 0:
            self.slow_callbacks -= 1
            self.ledger.write("slow", s=self.args.slow_s)
            time.sleep(self.args.slow_s)

    # ---------------------------------------------------------------- callbacks

    def assigned(self, partitions: Iterable[Any]) -> None:
        tps = _tps(partitions)
        self._maybe_slow()
        self.owned.update((t, p) for t, p in tps)
        self.ledger.write("assigned", tps=tps)

    def revoked(self, partitions: Iterable[Any]) -> None:
        tps = _tps(partitions)
        self._maybe_slow()
        self.commit({(t, p) for t, p in tps}, why="revoke")
        for t, p in tps:
            self.owned.discard((t, p))
            self.pending.pop((t, p), None)
        self.ledger.write("revoked", tps=tps)

    def lost(self, partitions: Iterable[Any]) -> None:
        tps = _tps(partitions)
        for t, p in tps:
            self.owned.discard((t, p))
            self.pending.pop((t, p), None)
        self.ledger.write("lost", tps=tps)

    # ---------------------------------------------------------------- records

    def account(self, records: Iterable[Any]) -> None:
        for record in records:
            if record.error() is not None:
                self.ledger.write("error", where="record", err=str(record.error()))
                continue
            topic, partition, offset = record.topic(), record.partition(), record.offset()
            key = record.key()
            self.pending[(topic, partition)] = offset + 1
            self.processed += 1
            if not self.args.record_lines:
                continue
            self.ledger.write(
                "record",
                tp=[topic, partition],
                off=offset,
                key=key.decode() if key else None,
                owned=(topic, partition) in self.owned,
            )

    def commit(self, only: set[tuple[str, int]] | None, why: str) -> None:
        offsets = {tp: off for tp, off in self.pending.items() if only is None or tp in only}
        if not offsets:
            return
        try:
            self._commit(offsets)
        except Exception as exc:
            self.ledger.write(
                "commit_fail",
                why=why,
                offsets=[[t, p, o] for (t, p), o in sorted(offsets.items())],
                err=f"{type(exc).__name__}: {exc}"[:300],
            )
            # Dropped, as Java's CommitFailedException advises; a retriable failure
            # is retried with the next batch (offsets only grow).
            drop = why == "revoke" or not getattr(exc, "retriable", False)
            for tp in offsets:
                if drop and self.pending.get(tp) == offsets[tp]:
                    self.pending.pop(tp, None)
            return
        self.ledger.write(
            "commit_ok", why=why, offsets=[[t, p, o] for (t, p), o in sorted(offsets.items())]
        )
        for tp, off in offsets.items():
            if self.pending.get(tp) == off:
                del self.pending[tp]

    def _commit(self, offsets: dict[tuple[str, int], int]) -> None:
        raise NotImplementedError

    def run(self) -> int:
        raise NotImplementedError


class _CoopMember(_Member):
    def run(self) -> int:
        import coopconsumer
        from coopconsumer import RebalanceListener, TopicPartition
        from coopconsumer.assignors import (
            ClusterMetadata,
            CooperativeStickyAssignor,
            GroupAssignment,
            GroupSubscription,
        )

        args = self.args
        member = self

        class Listener(RebalanceListener):
            def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
                member.assigned(partitions)

            def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                member.revoked(partitions)

            def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
                member.lost(partitions)

        class ChaosAssignor(CooperativeStickyAssignor):
            """cooperative-sticky that can wait before assigning (librdkafka's mock
            completes a round when the leader's SyncGroup arrives; docs/testing.md) and
            can raise, as a buggy custom assignor would."""

            def assign(
                self, metadata: ClusterMetadata, group_subscription: GroupSubscription
            ) -> GroupAssignment:
                if args.mock_paced:
                    time.sleep(0.3)
                if args.raising_assignor or member.raise_next:
                    member.raise_next = False
                    member.ledger.write("assignor_raised")
                    raise RuntimeError("chaos: this member's assignor raises")
                return super().assign(metadata, group_subscription)

        config: dict[str, object] = {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "client.id": args.name,
            "partition.assignment.strategy": [ChaosAssignor],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": max(100, args.session_timeout_ms // 10),
        }
        consumer = coopconsumer.Consumer(config)
        self._consumer = consumer
        self._tp = TopicPartition
        consumer.subscribe([args.topic], Listener())
        self.ledger.write("start", pid=os.getpid(), kind="coop")
        try:
            while not self.stop:
                try:
                    records = consumer.consume(200, 0.2)
                except coopconsumer.CoopConsumerError as exc:
                    # An error poll() reports once leaves the consumer usable (Java).
                    self.ledger.write(
                        "error", where="poll", err=f"{type(exc).__name__}: {exc}"[:300]
                    )
                    continue
                self.account(records)
                self.commit(None, why="batch")
        finally:
            consumer.close()
            self.ledger.write("exit", processed=self.processed)
            self.ledger.close()
        return 0

    def _commit(self, offsets: dict[tuple[str, int], int]) -> None:
        self._consumer.commit({self._tp(t, p): o for (t, p), o in offsets.items()})


class _RdkafkaMember(_Member):
    def run(self) -> int:
        import confluent_kafka

        args = self.args
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": args.bootstrap,
                "group.id": args.group,
                "client.id": args.name,
                "partition.assignment.strategy": "cooperative-sticky",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": args.session_timeout_ms,
                "heartbeat.interval.ms": max(100, args.session_timeout_ms // 10),
            }
        )
        self._consumer = consumer
        self._tp = confluent_kafka.TopicPartition

        def on_assign(_c: Any, partitions: list[Any]) -> None:
            self.assigned(partitions)

        def on_revoke(_c: Any, partitions: list[Any]) -> None:
            self.revoked(partitions)

        def on_lost(_c: Any, partitions: list[Any]) -> None:
            self.lost(partitions)

        consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        self.ledger.write("start", pid=os.getpid(), kind="rdkafka")
        try:
            while not self.stop:
                records = consumer.consume(200, 0.2)
                self.account(records)
                self.commit(None, why="batch")
        finally:
            consumer.close()
            self.ledger.write("exit", processed=self.processed)
            self.ledger.close()
        return 0

    def _commit(self, offsets: dict[tuple[str, int], int]) -> None:
        results = self._consumer.commit(
            offsets=[self._tp(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
        # A request-level failure raises; a partition's own failure is only reported in
        # its entry of the result.
        failed = [f"{r.topic}[{r.partition}]: {r.error}" for r in results or () if r.error]
        if failed:
            raise RuntimeError("partition commits failed: " + "; ".join(failed))


def main(argv: list[str] | None = None) -> int:
    """Run one member until SIGTERM."""
    parser = argparse.ArgumentParser(description="one coopconsumer or confluent-kafka member")
    parser.add_argument("--kind", choices=["coop", "rdkafka"], required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--ledger")
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--slow-s", type=float, default=2.0)
    parser.add_argument("--raising-assignor", action="store_true")
    parser.add_argument("--mock-paced", action="store_true")
    parser.add_argument(
        "--no-record-lines",
        dest="record_lines",
        action="store_false",
        help="leave record lines out of the ledger (long runs)",
    )
    args = parser.parse_args(argv)
    member: _Member = _CoopMember(args) if args.kind == "coop" else _RdkafkaMember(args)
    return member.run()


if __name__ == "__main__":
    sys.exit(main())
