"""Where each assigned partition fetches from: ``FetchPositions``.

Holds the consumer's view of its partitions (assigned, not yet positioned, paused by
the application) and hands the fetcher their start offsets: the committed offset,
looked up without blocking ``poll()``, else where ``auto.offset.reset`` puts it (asked
of the partition's leader, as Java does, so that the first fetch need not wait for
librdkafka to find the leader first: docs/architecture.md, "Start offsets"); a start
given with ``assign()``; a ``seek()``. A refused restart puts a partition back where it was
(issue 35: a refused seek never stalls a partition).

Runs on the thread that calls ``poll()``. Imports the driver's API, the arguments'
meaning and the value types; never ``confluent_kafka`` or a facade.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from .._config import ConsumerConfig
from .._errors import ConfigurationError, CoopConsumerError, KafkaError
from .._io._member_driver import CommittedOffsets, Driver
from .._member import OffsetAndMetadata
from .._protocol import error_codes
from .._protocol.queries import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from .._types import TopicPartition
from ._arguments import OFFSET_BEGINNING, OFFSET_END, FetcherLike

__all__ = ["FetchPositions"]

log = logging.getLogger("coopconsumer.consumer")

#: Longest wait for the leaders' answers to where ``auto.offset.reset`` puts partitions;
#: partitions not answered by then start from the logical offset, which the fetcher
#: resolves itself (the answer only makes the first fetch sooner).
RESET_LOOKUP_TIMEOUT_S = 2.0


class FetchPositions:
    """The assigned partitions and where the fetcher starts each of them."""

    def __init__(
        self,
        cfg: ConsumerConfig,
        fetcher: FetcherLike,
        driver: Driver,
        errors_out: list[Exception],
    ) -> None:
        self._fetcher = fetcher
        self._driver = driver
        #: Where an error for ``poll()`` goes (the consumer's reported errors).
        self._errors = errors_out
        self._reset = cfg.auto_offset_reset
        self._read_committed = cfg.isolation_level == "read_committed"
        self._api_timeout_s = cfg.default_api_timeout_ms / 1000.0
        self._retry_backoff_s = cfg.connection.retry_backoff_ms / 1000.0
        self.assigned: set[TopicPartition] = set()
        #: Partitions assigned by the group whose start offset is not known yet.
        self.unpositioned: set[TopicPartition] = set()
        #: When a failed committed-offset lookup may be retried.
        self.next_retry = 0.0
        #: The committed-offset lookup in flight, if any: poll() never waits for it
        #: (records keep flowing for positioned partitions); see ``check_lookup``. Its
        #: partition set loses what is dropped meanwhile, so an answer older than a
        #: revocation is never applied to the partition assigned again later.
        self.lookup: tuple[set[TopicPartition], Future[CommittedOffsets]] | None = None
        #: Reset lookups in flight (``resolve``): the partitions, the logical offset
        #: each starts from when its leader does not answer, and the answer.
        self.resets: list[tuple[set[TopicPartition], int, Future[dict[TopicPartition, int]]]] = []
        #: Start offsets known but not yet given to the fetcher (see ``flush``).
        self.pending_starts: dict[TopicPartition, int] = {}
        #: Paused by the application; re-applied when a partition is restarted.
        self.paused: set[TopicPartition] = set()
        # The offset each partition was last handed to the fetcher at (its start, or
        # an accepted seek): where a refused restart puts it back before it returned
        # a record (issue 35: a refused seek never stalls a partition).
        self._fetch_starts: dict[TopicPartition, int] = {}

    @property
    def fetchable(self) -> bool:
        """Whether the fetcher has a partition to fetch: unpositioned partitions are a
        subset of the assigned ones, so comparing the sizes says it in O(1)."""
        return len(self.assigned) > len(self.unpositioned)

    def retry_due(self, now: float) -> bool:
        """Whether unpositioned partitions wait for a lookup that may be retried now."""
        return bool(self.unpositioned) and now >= self.next_retry

    @property
    def waiting(self) -> Future[Any] | None:
        """The answer unpositioned partitions wait for (a committed-offset lookup's,
        else a reset lookup's), if any: a poll with nothing to fetch wakes on it."""
        if self.lookup is not None:
            return self.lookup[1]
        answers = [future for _, _, future in self.resets]
        return next((f for f in answers if f.done()), answers[0] if answers else None)

    def add(
        self,
        partitions: frozenset[TopicPartition],
        starts: Mapping[TopicPartition, int],
        *,
        closing: bool,
    ) -> None:
        """``Assign``: the partitions are the consumer's; those without a given start
        are looked up (nothing is, while closing: nothing will be fetched)."""
        self.assigned |= partitions
        if closing:
            self.unpositioned |= partitions
        else:
            # Given start offsets (manual assignment) go to the fetcher with the other
            # known starts once the queued work has run (``flush``).
            self.pending_starts.update(starts)
            self.locate(partitions - starts.keys())

    def drop(self, partitions: frozenset[TopicPartition]) -> None:
        """The partitions are no longer the consumer's: forget them, stop fetching."""
        for tp in partitions:
            self.pending_starts.pop(tp, None)
            self._fetch_starts.pop(tp, None)
        self.assigned -= partitions
        self.paused -= partitions
        self.unpositioned -= partitions
        if self.lookup is not None:
            self.lookup[0].difference_update(partitions)
        for waiting, _, _ in self.resets:
            waiting.difference_update(partitions)
        self._fetcher.unassign(partitions)

    def clear(self) -> None:
        """Closed: nothing is assigned any more."""
        self.assigned.clear()
        self.unpositioned.clear()
        self.resets.clear()

    def locate(self, partitions: frozenset[TopicPartition]) -> None:
        """Look up where ``partitions`` start (their committed offsets, else
        ``auto.offset.reset``) without waiting: the answer is applied by a later poll
        (:meth:`check_lookup`). One lookup is in flight at a time; partitions assigned
        meanwhile are looked up when it ends, failed ones after ``retry.backoff.ms``."""
        wanted = partitions & self.assigned
        self.unpositioned |= wanted
        for resetting, _, _ in self.resets:
            wanted -= resetting  # their committed offsets were looked up already
        if not wanted or self.lookup is not None:
            return
        self.lookup = (set(wanted), self._driver.fetch_committed(wanted, self._api_timeout_s))

    def check_lookup(self) -> bool:
        """Apply the committed-offset lookup and the reset lookups that have
        completed; True if one was applied (its starts are pending, for ``flush``)."""
        applied = self._apply_resets()
        lookup = self.lookup
        if lookup is None or not lookup[1].done():
            return applied
        self.lookup = None
        wanted, future = lookup
        try:
            committed: CommittedOffsets = future.result()
        except CoopConsumerError as exc:
            if self._driver.failure is not None:
                raise self._driver.failure from exc
            log.warning(
                "fetching committed offsets of %d partition(s) failed: %s", len(wanted), exc
            )
            self.next_retry = self._driver.clock() + self._retry_backoff_s
            return applied
        self.start_fetching({tp: committed.get(tp) for tp in wanted})
        return True

    def _apply_resets(self) -> bool:
        """Apply the reset lookups that have completed; True if one was."""
        done = [entry for entry in self.resets if entry[2].done()]
        for entry in done:
            self.resets.remove(entry)
            wanted, logical, future = entry
            try:
                found = future.result()
            except CoopConsumerError as exc:
                if self._driver.failure is not None:
                    raise self._driver.failure from exc
                found = {}
            starts = {tp: found.get(tp, logical) for tp in wanted if tp in self.unpositioned}
            self.pending_starts.update(starts)
            self.unpositioned -= starts.keys()
        return bool(done)

    def resolve(self, partitions: set[TopicPartition], logical: int) -> None:
        """Ask the leaders of ``partitions`` (unpositioned, without a committed offset)
        where ``logical`` (``OFFSET_BEGINNING``/``OFFSET_END``) is; they stay
        unpositioned until the answer (``check_lookup``), which a seek() overrides."""
        timestamp = EARLIEST_TIMESTAMP if logical == OFFSET_BEGINNING else LATEST_TIMESTAMP
        future = self._driver.list_offsets(
            partitions,
            timestamp,
            read_committed=self._read_committed,
            timeout_s=min(self._api_timeout_s, RESET_LOOKUP_TIMEOUT_S),
        )
        self.resets.append((set(partitions), logical, future))

    def start_fetching(self, committed: Mapping[TopicPartition, OffsetAndMetadata | None]) -> None:
        """The starts of the unpositioned ``committed`` partitions: their committed
        offsets, else ``auto.offset.reset``; with ``none``, an error for ``poll()``."""
        starts: dict[TopicPartition, int] = {}
        resets: set[TopicPartition] = set()
        missing: list[TopicPartition] = []
        for tp, om in committed.items():
            if tp not in self.unpositioned:
                continue  # revoked meanwhile, or positioned by a seek()
            if om is not None:
                starts[tp] = om.offset
            elif self._reset in ("earliest", "latest"):
                resets.add(tp)
            else:
                missing.append(tp)
        if resets:
            self.resolve(resets, OFFSET_BEGINNING if self._reset == "earliest" else OFFSET_END)
        if starts:
            # Handed to the fetcher once the queued work (on_partitions_assigned
            # included) has run, so a seek() in the callback wins, as in Java where
            # positions are resolved after the callback.
            self.pending_starts.update(starts)
            self.unpositioned -= starts.keys()
        if missing:
            self.unpositioned -= set(missing)
            self._errors.append(
                error_codes.to_exception(
                    error_codes.OFFSET_OUT_OF_RANGE,
                    message=(
                        f"no committed offset for {', '.join(map(str, sorted(missing)))} and "
                        f"auto.offset.reset is 'none': seek() these partitions to consume them"
                    ),
                )
            )

    def flush(self) -> dict[TopicPartition, int]:
        """Hand the pending starts to the fetcher (paused ones stay paused); returns them."""
        if not self.pending_starts:
            return {}
        starts, self.pending_starts = self.pending_starts, {}
        self._fetcher.assign(starts)
        self._fetch_starts.update(starts)
        for tp in starts.keys() & self.paused:
            self._fetcher.pause([tp])
        return starts

    def position(self, wanted: frozenset[TopicPartition]) -> dict[TopicPartition, int | None]:
        """``Consumer.position``: the next offset of each assigned partition, or None."""
        foreign = wanted - self.assigned
        if foreign:
            raise ConfigurationError(
                f"position() of partitions not assigned to this consumer: "
                f"{', '.join(map(str, sorted(foreign)))}"
            )
        positions = self._fetcher.positions(wanted & self._fetcher.assigned)
        return {tp: (p if (p := positions.get(tp, -1)) >= 0 else None) for tp in wanted}

    # ------------------------------------------------------------------ seeking

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """``Consumer.seek``: fetch ``tp`` from ``offset`` next (a valid start offset);
        nothing changes when it raises."""
        if tp not in self.assigned:
            raise ConfigurationError(f"seek() of {tp}, which is not assigned to this consumer")
        if tp in self.pending_starts:
            self.pending_starts[tp] = offset  # not fetching yet: just change the start
            return
        if tp in self.unpositioned or tp not in self._fetcher.assigned:
            self._fetcher.assign({tp: offset})  # refused: still unpositioned
            self.unpositioned.discard(tp)
            self._fetch_starts[tp] = offset
            self._repause(tp)
            return
        if self._fetcher.positions([tp]).get(tp, -1) < 0:
            # Nothing returned yet (typically a seek inside on_partitions_assigned):
            # librdkafka may still be resolving the start offset and let that win over
            # a seek, so restart the partition from ``offset`` instead.
            self._restart(tp, offset)
            return
        try:
            self._fetcher.seek(tp, offset)
        except KafkaError:
            # librdkafka refuses a seek before the partition's first fetch started.
            self._restart(tp, offset)
        else:
            self._fetch_starts[tp] = offset

    def seek_all(self, wanted: frozenset[TopicPartition], offset: int) -> None:
        """Seek each of ``wanted`` to ``offset``; all must be assigned."""
        ordered = sorted(wanted)
        foreign = [tp for tp in ordered if tp not in self.assigned]
        if foreign:
            raise ConfigurationError(
                f"seek of partitions not assigned to this consumer: {', '.join(map(str, foreign))}"
            )
        for tp in ordered:
            self.seek(tp, offset)

    def _restart(self, tp: TopicPartition, offset: int) -> None:
        """Fetch ``tp`` from ``offset`` by assigning it again. If librdkafka refuses the
        new assignment, ``tp`` is assigned again where it was (its position, else the
        offset it was started or sought at) and the refusal is raised: a refused seek
        changes nothing and never leaves the partition unfetched (issue 35)."""
        position = self._fetcher.positions([tp]).get(tp, -1)
        where = position if position >= 0 else self._fetch_starts.get(tp)
        self._fetcher.unassign([tp])
        try:
            self._fetcher.assign({tp: offset})
        except KafkaError:
            self._resume_at(tp, where)
            raise
        self._fetch_starts[tp] = offset
        self._repause(tp)

    def _resume_at(self, tp: TopicPartition, where: int | None) -> None:
        """Assign ``tp`` again at ``where`` after a refused restart; with no offset to
        go back to, or a second refusal, look its start up as for a new partition (the
        committed offset, else ``auto.offset.reset``), which retries until it is
        fetched."""
        if where is not None:
            try:
                self._fetcher.assign({tp: where})
            except KafkaError as exc:
                log.warning("%s: assigning it again at offset %d failed: %s", tp, where, exc)
            else:
                self._repause(tp)
                return
        self._fetch_starts.pop(tp, None)
        self.locate(frozenset({tp}))

    def _repause(self, tp: TopicPartition) -> None:
        if tp in self.paused:
            self._fetcher.pause([tp])

    # ------------------------------------------------------------------ pausing

    def pause(self, wanted: frozenset[TopicPartition]) -> None:
        """Stop returning records of ``wanted`` until :meth:`resume`."""
        self.paused |= wanted
        self._fetcher.pause(wanted)

    def resume(self, wanted: frozenset[TopicPartition]) -> None:
        """Undo :meth:`pause`."""
        self.paused -= wanted
        self._fetcher.resume(wanted)

    # ------------------------------------------------------------------ lag

    def records_lag(self) -> dict[TopicPartition, int]:
        """Per positioned partition, its high watermark minus its position as of the
        last fetch (asks no broker; safe from any thread)."""
        # Copies first: the poll() thread may change these sets meanwhile.
        assigned = frozenset(self.assigned)
        unpositioned = frozenset(self.unpositioned)
        fetcher = self._fetcher
        lags: dict[TopicPartition, int] = {}
        try:
            for tp, position in fetcher.positions(assigned - unpositioned).items():
                if position < 0:
                    continue
                _, high = fetcher.watermarks(tp, None, cached=True)
                if high >= 0:
                    lags[tp] = max(0, high - position)
        except (KafkaError, RuntimeError):  # revoked or closed since the copy
            return lags
        return lags
