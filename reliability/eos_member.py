"""One exactly-once processor process for the exactly-once chaos run.

    python -m reliability.eos_member --impl coop|raw --slot N --txn-id ID \
        --bootstrap B --group G --input IN --output OUT --ledger PATH [options]

Copies every input record to one output record, in transactions: the output record has
the input's key, and its value names the input record (``partition:offset``) and the
slot that wrote it, so the checker can count copies per input record.

``coop`` runs ``coopconsumer.TransactionalProcessor``. ``raw`` is the same loop written
with confluent-kafka alone, as a careful user would write it from librdkafka's
KIP-447 example (``examples/transactions.c``: cooperative-sticky, commit every N
records or T seconds, commit the open transaction in the revoke callback, abort it when
the assignment is lost, after a failed commit abort and rewind to the committed
offsets, exit on a fatal error). confluent-kafka-python's own ``eos_transactions.py``
``assign()``s one partition "prior to KIP-447", so it has no rebalance handling to
follow. Both loops handle a batch the same way: produce one record per input record,
then sleep ``--process-sleep-s`` (so that a SIGKILL often lands while a transaction
holds records that already reached the broker).

Ledger: JSON lines, one ``os.write`` each (``O_APPEND``): ``start``; ``assigned``/
``revoked``/``lost``; ``batch`` (entering the process step, with its size) and
``batch_done``; ``stats`` every 2 s (``TransactionStats`` fields, the raw loop keeps the
same ones); ``exit`` with the final stats, why (``term``, ``fatal``, ``error``) and the
error. Exit codes: 0 after SIGTERM (clean close), 3 after a fatal transactional error
(the runner restarts the slot with the same ``transactional.id``), 4 on anything else.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from reliability.member import Ledger

__all__ = ["EXIT_FATAL", "EXIT_OTHER", "main"]

EXIT_FATAL = 3
EXIT_OTHER = 4
_STATS_EVERY_S = 2.0


def _tps(partitions: Iterable[Any]) -> list[list[Any]]:
    return sorted([p.topic, p.partition] for p in partitions)


def _output_value(record: Any, slot: int) -> bytes:
    return f"{record.partition()}:{record.offset()}:{slot}".encode()


class _Loop:
    """What both implementations share: signals, the ledger, the process step."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ledger = Ledger(args.ledger, f"slot-{args.slot}")
        self.stopping = False
        self.fresh: set[tuple[str, int]] = set()
        self._last_stats = 0.0
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, _signum: int, _frame: object) -> None:
        self.stopping = True
        self.on_stop()

    def on_stop(self) -> None:
        """Called from the SIGTERM handler."""

    def assigned(self, partitions: Iterable[Any]) -> None:
        tps = _tps(partitions)
        self.fresh.update((t, p) for t, p in tps)
        self.ledger.write("assigned", tps=tps)

    def process_batch(self, records: list[Any], produce: Any) -> None:
        """Produce one output record per input record, then take a moment."""
        self.ledger.write("batch", n=len(records))
        for record in records:
            if self.fresh:
                tp = (record.topic(), record.partition())
                if tp in self.fresh:
                    # Where the member starts reading a partition it was given.
                    self.fresh.discard(tp)
                    self.ledger.write("first", tp=list(tp), off=record.offset())
            produce(self.args.output, _output_value(record, self.args.slot), record.key())
        if self.args.process_sleep_s > 0:
            time.sleep(self.args.process_sleep_s)
        self.ledger.write("batch_done")

    def maybe_stats(self) -> None:
        now = time.monotonic()
        if now - self._last_stats >= _STATS_EVERY_S:
            self._last_stats = now
            self.ledger.write("stats", stats=self.stats())

    def stats(self) -> dict[str, Any]:
        raise NotImplementedError

    def consumer_config(self) -> dict[str, object]:
        args = self.args
        config: dict[str, object] = {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "client.id": f"slot-{args.slot}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
        if args.protocol == "consumer":
            config["group.protocol"] = "consumer"
        else:
            config["partition.assignment.strategy"] = "cooperative-sticky"
            config["session.timeout.ms"] = args.session_timeout_ms
            config["heartbeat.interval.ms"] = max(100, args.session_timeout_ms // 10)
        return config

    def producer_config(self) -> dict[str, object]:
        return {
            "transactional.id": self.args.txn_id,
            "transaction.timeout.ms": self.args.txn_timeout_ms,
            "linger.ms": 5,
            # A lost connection must not start a KIP-1102 re-bootstrap: with
            # confluent-kafka 2.16 that can hang send_offsets_to_transaction()
            # (librdkafka issue 5511; docs/testing.md).
            "metadata.recovery.strategy": "none",
        }

    def exit(self, why: str, code: int, error: BaseException | None = None) -> int:
        self.ledger.write(
            "exit",
            why=why,
            code=code,
            error=None if error is None else f"{type(error).__name__}: {error}"[:500],
            stats=self.stats(),
        )
        self.ledger.close()
        return code


class _CoopLoop(_Loop):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.processor: Any = None

    def on_stop(self) -> None:
        if self.processor is not None:
            self.processor.stop()

    def stats(self) -> dict[str, Any]:
        if self.processor is None:
            return {}
        s = self.processor.stats()
        return {
            "transactions_committed": s.transactions_committed,
            "transactions_aborted": s.transactions_aborted,
            "aborts": dict(s.aborts),
            "records_processed": s.records_processed,
            "records_produced": s.records_produced,
            "records_replayed": s.records_replayed,
            "commits_on_revoke": s.commits_on_revoke,
        }

    def run(self) -> int:
        import coopconsumer
        from coopconsumer import RebalanceListener, TopicPartition, TransactionalProcessor

        loop = self

        class Listener(RebalanceListener):
            def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
                loop.assigned(partitions)

            def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                loop.ledger.write("revoked", tps=_tps(partitions))

            def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
                loop.ledger.write("lost", tps=_tps(partitions))

        def process(records: list[Any], output: coopconsumer.TransactionalOutput) -> None:
            self.process_batch(records, output.produce)

        self.processor = TransactionalProcessor(
            self.consumer_config(),
            self.producer_config(),
            process,
            topics=[self.args.input],
            listener=Listener(),
            batch_size=self.args.batch_size,
            commit_interval_ms=self.args.commit_interval_ms,
            max_records_per_transaction=self.args.max_records,
        )
        self.ledger.write("start", pid=os.getpid(), impl="coop", txn_id=self.args.txn_id)
        processor = self.processor
        try:
            while not self.stopping:
                processor.step(0.2)
                self.maybe_stats()
        except coopconsumer.TransactionError as exc:
            code = EXIT_FATAL if exc.fatal else EXIT_OTHER
            self._close_quietly()  # a fatal error: nothing is committed; leaves the group
            return self.exit("fatal" if exc.fatal else "error", code, exc)
        except Exception as exc:
            self._close_quietly()
            return self.exit("error", EXIT_OTHER, exc)
        processor.close()  # commits the open transaction, leaves the group
        return self.exit("term", 0)

    def _close_quietly(self) -> None:
        try:
            self.processor.close()
        except Exception as exc:
            self.ledger.write("close_failed", error=f"{type(exc).__name__}: {exc}"[:300])


class _FatalError(Exception):
    """The raw loop met a fatal error (the example exits the process)."""


class _RawLoop(_Loop):
    """librdkafka's ``examples/transactions.c`` in Python (see the module docstring)."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.committed_txns = 0
        self.aborted: Counter[str] = Counter()
        self.records_processed = 0
        self.records_replayed = 0
        self.commits_on_revoke = 0
        self.in_txn = 0  # records in the open transaction
        self.consumer: Any = None
        self.producer: Any = None

    def stats(self) -> dict[str, Any]:
        return {
            "transactions_committed": self.committed_txns,
            "transactions_aborted": sum(self.aborted.values()),
            "aborts": dict(sorted(self.aborted.items())),
            "records_processed": self.records_processed,
            "records_produced": self.records_processed,
            "records_replayed": self.records_replayed,
            "commits_on_revoke": self.commits_on_revoke,
        }

    # -------------------------------------------------------------- the example's steps

    def _fatal(self, what: str, exc: Any) -> _FatalError:
        return _FatalError(f"{what}: {exc}")

    def _abort(self, reason: str) -> None:
        try:
            self.producer.abort_transaction()
        except Exception as exc:
            raise self._fatal("Failed to abort transaction", exc) from exc
        self.aborted[reason] += 1
        self.records_replayed += self.in_txn
        self.in_txn = 0

    def rewind(self) -> None:
        """Seek every assigned partition to its committed offset (the beginning when
        there is none)."""
        import confluent_kafka

        assignment = self.consumer.assignment()
        if not assignment:
            return
        try:
            committed = self.consumer.committed(assignment, timeout=10)
        except Exception as exc:
            raise self._fatal("Failed to acquire committed offsets", exc) from exc
        for tp in committed:
            if tp.offset < 0:
                tp.offset = confluent_kafka.OFFSET_BEGINNING
            try:
                self.consumer.seek(tp)
            except Exception as exc:
                raise self._fatal("Failed to seek", exc) from exc

    def commit(self) -> bool:
        """The example's ``commit_transaction()``: True when committed, False when it
        was aborted (the caller decides whether to rewind)."""
        import confluent_kafka

        cgmd = self.consumer.consumer_group_metadata()
        assignment = self.consumer.assignment()
        if not assignment:
            # No partition offsets to commit: the assignment was (most likely) lost.
            self._abort("no assignment at commit")
            return False
        positions = self.consumer.position(assignment)
        calls: tuple[tuple[str, Callable[[], object]], ...] = (
            (
                "send_offsets_to_transaction",
                lambda: self.producer.send_offsets_to_transaction(positions, cgmd),
            ),
            ("commit_transaction", lambda: self.producer.commit_transaction()),
        )
        for what, call in calls:
            try:
                call()
            except confluent_kafka.KafkaException as exc:
                error = exc.args[0]
                if error.txn_requires_abort():
                    self._abort(f"{what}: {error.name()}")
                    return False
                raise self._fatal(f"Failed to {what}", exc) from exc
        self.committed_txns += 1
        self.records_processed += self.in_txn
        self.in_txn = 0
        return True

    def begin(self) -> None:
        try:
            self.producer.begin_transaction()
        except Exception as exc:
            raise self._fatal("Failed to begin transaction", exc) from exc

    def on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        self.assigned(partitions)
        # confluent-kafka calls incremental_assign() after this callback returns.

    def on_revoke(self, _consumer: Any, partitions: list[Any]) -> None:
        self.ledger.write("revoked", tps=_tps(partitions))
        if self.commit():
            self.commits_on_revoke += 1
        self.begin()

    def on_lost(self, _consumer: Any, partitions: list[Any]) -> None:
        self.ledger.write("lost", tps=_tps(partitions))
        self._abort("assignment lost")
        self.begin()

    def _produce(self, topic: str, value: bytes, key: bytes | None) -> None:
        import confluent_kafka

        while True:
            try:
                self.producer.produce(topic, value, key)
                return
            except BufferError:
                self.producer.poll(0.1)
            except confluent_kafka.KafkaException as exc:
                # The example: abort, rewind and begin a new transaction.
                self._abort(f"produce: {exc.args[0].name()}")
                self.rewind()
                self.begin()
                raise _Rewound from exc

    def run(self) -> int:
        import confluent_kafka

        args = self.args
        consumer_config = self.consumer_config()
        consumer_config["metadata.recovery.strategy"] = "none"
        producer_config = self.producer_config()
        producer_config["bootstrap.servers"] = args.bootstrap
        self.producer = confluent_kafka.Producer(producer_config)
        self.ledger.write("start", pid=os.getpid(), impl="raw", txn_id=args.txn_id)
        try:
            try:
                self.producer.init_transactions()
            except confluent_kafka.KafkaException as exc:
                raise self._fatal("init_transactions()", exc) from exc
            self.consumer = confluent_kafka.Consumer(consumer_config)
            self.consumer.subscribe(
                [args.input],
                on_assign=self.on_assign,
                on_revoke=self.on_revoke,
                on_lost=self.on_lost,
            )
            self.begin()
            last_commit = time.monotonic()
            while not self.stopping:
                self.maybe_stats()
                now = time.monotonic()
                if self.in_txn > 0 and (
                    self.in_txn > args.max_records
                    or now - last_commit >= args.commit_interval_ms / 1000.0
                ):
                    if not self.commit():
                        self.rewind()
                    self.begin()
                    last_commit = time.monotonic()
                records = [m for m in self.consumer.consume(args.batch_size, 0.2) if not m.error()]
                if not records:
                    continue
                try:
                    self.process_batch(records, self._produce)
                except _Rewound:
                    continue
                self.in_txn += len(records)
            # The example closes the consumer: the revoke callback commits.
            self.consumer.close()
            self.producer.flush(10)
        except _FatalError as exc:
            # The example calls exit(1): no close, no leave; the group notices at the
            # session timeout, the coordinator ends the transaction at init or timeout.
            os._exit(self.exit("fatal", EXIT_FATAL, exc))
        except Exception as exc:
            os._exit(self.exit("error", EXIT_OTHER, exc))
        return self.exit("term", 0)


class _Rewound(Exception):
    """A produce failed: the transaction was aborted and the consumer rewound."""


def main(argv: list[str] | None = None) -> int:
    """Run one processor until SIGTERM or a fatal error."""
    parser = argparse.ArgumentParser(description="one exactly-once processor process")
    parser.add_argument("--impl", choices=["coop", "raw"], required=True)
    parser.add_argument("--slot", type=int, required=True)
    parser.add_argument("--txn-id", required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--ledger")
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    parser.add_argument("--session-timeout-ms", type=int, default=6_000)
    parser.add_argument("--txn-timeout-ms", type=int, default=10_000)
    parser.add_argument("--commit-interval-ms", type=int, default=1000)
    parser.add_argument("--max-records", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--process-sleep-s", type=float, default=0.05)
    parser.add_argument("--log-level", default="INFO", help="coopconsumer's logging, to stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    # SIGUSR1 prints every thread's stack to the slot's log: the runner sends it to a
    # process that does not close in time, before it SIGKILLs it.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    loop: _CoopLoop | _RawLoop = _CoopLoop(args) if args.impl == "coop" else _RawLoop(args)
    return loop.run()


if __name__ == "__main__":
    sys.exit(main())
