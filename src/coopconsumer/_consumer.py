"""``Consumer``: the public facade (subscribe / poll / commit / close).

A thin, blocking face on ``ConsumerCore`` (``_consumer_core``), which holds what the
consumer decides: the ``GroupMember`` runs on the driver thread (``_io._member_driver``),
records come from the confluent-kafka ``Fetcher``, and everything the member asks of
the application (listener callbacks, fetcher assignment changes, commit-before-revoke,
errors) runs on the thread calling ``poll()``, ``consume()``, ``unsubscribe()`` or
``close()`` -- as in Java. ``aio.AsyncConsumer`` composes the same core and awaits
where this one blocks.

Imports the consumer core, the ``_io`` layer, config and the group member's inputs;
never ``confluent_kafka`` directly (records are the fetcher's ``Record`` objects).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Literal, overload

from ._config import ConsumerConfig
from ._consumer_core._arguments import OFFSET_BEGINNING, OFFSET_END, FetcherLike, subscription, tps
from ._consumer_core._core import CLOSE_TIMEOUT_S, SLICE_S, ConsumerCore, close_notices
from ._errors import ConfigurationError, CoopConsumerError
from ._io._member_driver import ClientLike, CommittedOffsets
from ._io._member_factory import client_for
from ._listener import RebalanceListener, RebalanceListenerLike
from ._member import AssignmentChange, CloseRequested
from ._types import ConsumerGroupMetadata, TopicPartition
from .assignors import RebalanceProtocol

if TYPE_CHECKING:
    # A record returned by poll()/consume(): confluent-kafka's Message (topic(),
    # partition(), offset(), key(), value(), headers(), timestamp()). Imported for
    # typing only: librdkafka is loaded when the first Consumer is built, so that
    # importing the package (and the wire client) does not load it.
    from ._io._fetcher import Record as Message

__all__ = ["Consumer", "FetcherLike"]

log = logging.getLogger("coopconsumer.consumer")


class Consumer:
    """A Kafka consumer in a consumer group, with KIP-429 incremental cooperative
    rebalancing and assignors written in Python.

    ``config`` uses Kafka's keys (``bootstrap.servers``, ``group.id``,
    ``partition.assignment.strategy``, ``session.timeout.ms``, ...; see the
    configuration reference). ``group.id`` is required. Use ``"cooperative-sticky"``
    alone as the strategy for cooperative rebalancing. Instead of subscribing, the
    consumer may be given partitions with :meth:`assign` (no group membership; the
    two modes exclude each other).

    A background thread heartbeats and runs the group protocol; everything the
    application sees -- rebalance listener callbacks, records, errors -- happens on the
    thread calling :meth:`poll`, :meth:`consume`, :meth:`unsubscribe` or :meth:`close`.
    The consumer is not thread-safe: use it from one thread (only :meth:`metrics`,
    :meth:`assignment` and :meth:`group_metadata` may be read from others).

    Raises :class:`ConfigurationError` for an unknown key or invalid value; nothing is
    started then.
    """

    def __init__(self, config: Mapping[str, object]) -> None:
        from ._io._fetcher import Fetcher  # loads librdkafka (see Message above)

        cfg = ConsumerConfig.from_mapping(config)
        cfg.require_group_id()
        fetcher = Fetcher(cfg.fetcher_config(), logger=cfg.logger)
        try:
            client = client_for(cfg)
        except BaseException:
            fetcher.close()
            raise
        self._setup(cfg, fetcher, client)

    @classmethod
    def _with_io(
        cls, config: Mapping[str, object], fetcher: FetcherLike, client: ClientLike
    ) -> Consumer:
        """A consumer on the given fetcher and client (tests run it without sockets)."""
        cfg = ConsumerConfig.from_mapping(config)
        cfg.require_group_id()
        self = cls.__new__(cls)
        self._setup(cfg, fetcher, client)
        return self

    def _setup(self, cfg: ConsumerConfig, fetcher: FetcherLike, client: ClientLike) -> None:
        self._core = ConsumerCore(cfg, fetcher, client)
        # The parts the core wires together, for reading (tests read the driver's state).
        self._config = cfg
        self._driver = self._core.driver
        self._fetcher = fetcher

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str],
        listener: RebalanceListener | RebalanceListenerLike | None = None,
    ) -> None:
        """Join the group for ``topics``: a list of names, or a pattern matched against
        the name of every non-internal topic and re-evaluated when metadata refreshes.
        A compiled ``re.Pattern`` must match the whole name (Java's
        ``subscribe(Pattern)``); a string starting with ``^`` is librdkafka's form and
        must match from the start (``"^orders"`` matches ``orders-eu``; add ``$`` for an
        exact end). With ``group.protocol=consumer`` a ``^`` string is matched by the
        group coordinator instead (KIP-848's ``SubscribedTopicRegex``, Kafka 4.0+, as
        librdkafka does): the broker's RE2J syntax against whole names, so write
        ``"^orders.*"`` for the prefix; a broker that cannot match one makes ``poll()``
        raise ``ConfigurationError``, and an invalid expression is the fatal
        INVALID_REGULAR_EXPRESSION. Replaces any previous subscription and listener. An
        empty list unsubscribes.

        Returns at once; the group is joined by the following :meth:`poll` calls, which
        also run ``listener``'s callbacks.

        Raises ``ConfigurationError`` for an invalid argument (the subscription is
        unchanged), ``IllegalStateError`` while partitions are assigned manually (see
        :meth:`assign`; nothing changes) and the fatal error if the consumer failed.
        """
        core = self._core
        core.check_usable()
        wanted = subscription(topics, broker_regex=core.config.kip848)
        if wanted is None:
            self.unsubscribe()
            return
        core.subscribe(wanted, listener)

    def unsubscribe(self) -> None:
        """Leave the group: run ``on_partitions_revoked`` (or ``lost``) for the owned
        partitions on this thread, send LeaveGroup, stop fetching.

        With ``enable.auto.commit``, the consumed positions are committed first. Called
        while a JoinGroup or SyncGroup is under way, it first lets that rebalance reach
        the SyncGroup answer (running its callbacks here, for at most half of
        ``default.api.timeout.ms``) and commits there, since leaving at that point
        reports the partitions lost and a commit could not be made; if the rebalance
        does not get there in time, the partitions are left uncommitted (their next
        owner may read some records again; none is lost).

        With a manual assignment (:meth:`assign`) it drops the assignment instead, as
        :meth:`unassign`; there is no group to leave.

        Raises the first listener exception after the consumer has left (it is then
        unsubscribed); ``RequestTimeoutError`` if leaving did not finish within
        ``default.api.timeout.ms`` (the leave then completes in the background).
        """
        self._core.leave()

    def assign(self, partitions: Iterable[object]) -> None:
        """Consume exactly ``partitions``, without joining the group (confluent-kafka's
        ``assign``; Java's ``KafkaConsumer.assign``).

        ``partitions`` are ``TopicPartition``s, or confluent-kafka style objects with
        ``topic``, ``partition`` and ``offset``. A partition carrying an offset starts
        there (``OFFSET_BEGINNING`` -2 and ``OFFSET_END`` -1 too); the others start at
        the group's committed offset (looked up without blocking ``poll()``), else at
        ``auto.offset.reset``. Replaces the whole previous manual assignment: as in
        librdkafka, every old partition is dropped and a partition assigned again
        restarts from its given or committed offset. An empty list is
        :meth:`unassign`.

        No JoinGroup, heartbeat, LeaveGroup or rebalance listener: the consumer is not
        a group member. ``group.id`` still names the group whose offsets it commits and
        reads; Kafka accepts those commits (generation -1, no member id) only while no
        member is subscribed to that group. With ``enable.auto.commit`` the consumed
        positions of dropped partitions are committed first, without waiting.

        :meth:`assignment` reflects the change when this returns; records follow from
        :meth:`poll`/:meth:`consume`. Raises ``ConfigurationError`` for an invalid
        argument and ``IllegalStateError`` while subscribed (Java: "Subscription to
        topics, partitions and pattern are mutually exclusive"; call
        :meth:`unsubscribe` first); either way nothing changes.
        """
        self._core.assign(partitions, AssignmentChange.REPLACE, "assign()")

    def unassign(self) -> None:
        """Drop the manual assignment (confluent-kafka's ``unassign``): nothing is
        fetched any more and the consumer is in neither mode, free to :meth:`subscribe`.
        With ``enable.auto.commit`` the consumed positions are committed first, without
        waiting. Does nothing when nothing is assigned. Raises ``IllegalStateError``
        while subscribed (use :meth:`unsubscribe`); nothing changes then."""
        self._core.assign((), AssignmentChange.REPLACE, "unassign()")

    def incremental_assign(self, partitions: Iterable[object]) -> None:
        """Add ``partitions`` to the manual assignment (confluent-kafka's
        ``incremental_assign``), each starting as in :meth:`assign`; the others keep
        their positions. Raises ``ConfigurationError`` if one is already assigned and
        ``IllegalStateError`` while subscribed; nothing changes then."""
        self._core.assign(partitions, AssignmentChange.ADD, "incremental_assign()")

    def incremental_unassign(self, partitions: Iterable[object]) -> None:
        """Remove ``partitions`` from the manual assignment (confluent-kafka's
        ``incremental_unassign``); removing the last one leaves the consumer in neither
        mode, as :meth:`unassign`. With ``enable.auto.commit`` their consumed positions
        are committed first, without waiting. Raises ``ConfigurationError`` if one is
        not assigned and ``IllegalStateError`` while subscribed; nothing changes then."""
        self._core.assign(partitions, AssignmentChange.REMOVE, "incremental_unassign()")

    def poll(self, timeout: float | None = None) -> Message | None:
        """Return the next record, or None if none arrived within ``timeout`` seconds
        (None or negative: wait indefinitely).

        Runs the pending rebalance work first (listener callbacks, assignment changes),
        then waits for a record. Records of partitions this consumer keeps keep flowing
        during a cooperative rebalance.

        Raises, once the queued rebalance work is done (state is consistent, the
        assignment change stands and is not repeated by the next call): the first
        exception a listener callback raised; an error the group reported (e.g. an
        assignor failure; the consumer carries on); a fatal error (e.g.
        ``FENCED_INSTANCE_ID``), raised again by every later call until :meth:`close`.
        """
        messages = self._core.consume(1, timeout)
        return messages[0] if messages else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Return up to ``num_messages`` records, waiting at most ``timeout`` seconds
        (negative: indefinitely) for the first. Errors as :meth:`poll`."""
        if not isinstance(num_messages, int) or num_messages < 1:
            raise ConfigurationError(f"num_messages must be a positive int: {num_messages!r}")
        return self._core.consume(num_messages, timeout)

    @overload
    def commit(self, offsets: object = None, asynchronous: Literal[False] = False) -> None: ...

    @overload
    def commit(self, offsets: object = None, *, asynchronous: Literal[True]) -> Future[None]: ...

    def commit(self, offsets: object = None, asynchronous: bool = False) -> Future[None] | None:
        """Commit offsets with the member's generation.

        ``offsets``: None commits the current position of every assigned partition;
        or a mapping ``{TopicPartition: next offset (int) | OffsetAndMetadata}``; or a
        confluent-kafka style list of objects with ``topic``, ``partition`` and
        ``offset``. The offset is the *next* record to read (last processed + 1).

        Synchronous (default): returns None once committed, or raises
        ``RebalanceInProgressError`` (a rebalance is running: call :meth:`poll` to
        complete it, then retry), ``CommitFailedError`` (the generation is gone; the
        partitions may belong to another member now; do not retry these offsets),
        ``KafkaError``/``BrokerConnectionError`` (see ``.retriable``), or
        ``RequestTimeoutError`` after ``default.api.timeout.ms``. A failed commit
        changes nothing in the consumer. ``asynchronous=True`` returns a
        ``concurrent.futures.Future`` completed with None or one of those errors.

        With a manual assignment (:meth:`assign`) the commit carries no generation
        (Kafka's "simple consumer" commit): ``CommitFailedError`` if the group has
        members; one asked for before the group coordinator is found waits for it (up
        to ``request.timeout.ms``, then a retriable ``KafkaError``).
        """
        future = self._core.commit(offsets)
        if asynchronous:
            return future
        self._wait(future, self._core.api_timeout_s)
        return None

    def _wait(self, future: Future[Any], timeout_s: float) -> Any:
        return self._driver.wait_answer(
            future, timeout_s, f"no answer within {timeout_s:.1f}s (default.api.timeout.ms)"
        )

    def committed(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of ``partitions`` (None: nothing committed).

        Raises ``KafkaError`` for an error answer and ``RequestTimeoutError`` after
        ``timeout`` seconds (default ``default.api.timeout.ms``); nothing changes.
        """
        core = self._core
        core.check_usable()
        wanted = tps(partitions)
        timeout_s = core.timeout_or_default(timeout)
        result: CommittedOffsets = self._wait(
            self._driver.fetch_committed(wanted, timeout_s), timeout_s
        )
        return {tp: (None if om is None else om.offset) for tp, om in result.items()}

    def position(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The offset of the next record :meth:`poll` returns per assigned partition
        (None: not known yet, e.g. before the first fetch from a logical offset).
        Raises ``ConfigurationError`` for a partition not assigned to this consumer."""
        return self._core.position(partitions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Fetch ``partition`` from ``offset`` next (allowed inside
        ``on_partitions_assigned``, as Java).

        ``offset`` is an offset from 0 to 2**63-1, ``OFFSET_BEGINNING`` (-2) or
        ``OFFSET_END`` (-1). Raises ``ConfigurationError`` for any other offset (Java's
        ``seek`` rejects a negative one) or a partition not assigned, and ``KafkaError``
        if librdkafka refuses; in every case nothing changes: the partition keeps
        fetching from where it was. An offset past the partition's end is not an error
        here: ``auto.offset.reset`` decides where fetching resumes, as in Java.
        """
        self._core.seek(partition, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch each of ``partitions`` from its first available record next (Java's
        ``seekToBeginning``; confluent-kafka's ``seek`` to ``OFFSET_BEGINNING``).
        Raises ``ConfigurationError`` for a partition not assigned (nothing changes)."""
        self._core.seek_all(partitions, OFFSET_BEGINNING)

    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch each of ``partitions`` from its end next: only records produced from now
        on (Java's ``seekToEnd``). Raises ``ConfigurationError`` for a partition not
        assigned (nothing changes)."""
        self._core.seek_all(partitions, OFFSET_END)

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """``(low, high)``: the first offset still in ``partition`` and the offset the next
        record will get (confluent-kafka's ``get_watermark_offsets``). Asks the leader and
        waits at most ``timeout`` seconds (None: ``default.api.timeout.ms``); with
        ``cached=True`` answers at once from the last fetch of an assigned partition
        (-1001, librdkafka's "invalid offset", for what is not known yet). Any partition
        may be asked, assigned or not. Raises ``KafkaError`` (e.g. an unknown partition)
        or ``RequestTimeoutError``; nothing changes."""
        return self._core.watermarks(partition, timeout, cached)

    def lag(self, partition: TopicPartition, timeout: float | None = None) -> int | None:
        """Records in ``partition`` after this consumer's position: the high watermark
        minus :meth:`position` (None while the position is not known yet). Raises
        ``ConfigurationError`` for a partition not assigned; errors as
        :meth:`get_watermark_offsets`."""
        return self._core.lag(partition, timeout)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """Per partition, the earliest offset whose record timestamp is at least the given
        timestamp (milliseconds since the epoch), or None if there is no such record
        (Java's ``offsetsForTimes``, which answers null there). Any partition may be
        asked; waits at most ``timeout`` seconds (None: ``default.api.timeout.ms``).
        Raises ``ConfigurationError`` for a negative timestamp, ``KafkaError`` or
        ``RequestTimeoutError``; nothing changes."""
        return self._core.offsets_for_times(timestamps, timeout)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop returning records of ``partitions`` (they stay assigned and keep
        heartbeating in the group) until :meth:`resume`."""
        self._core.pause(partitions, paused=True)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Undo :meth:`pause`."""
        self._core.pause(partitions, paused=False)

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions currently assigned to this consumer: by the group (as applied
        by ``poll``) or by :meth:`assign` (current when that returns)."""
        return frozenset(self._core.positions.assigned)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group id, generation (with ``group.protocol=consumer``: the member
        epoch), member id and instance id of the current generation (generation -1 and
        member id "" while not in a generation), read when called: inside
        ``on_partitions_revoked`` it is already the generation the revocation belongs
        to (Java, KAFKA-9741).

        The value is also the bytes confluent-kafka's ``consumer_group_metadata()``
        returns, so a confluent-kafka transactional producer accepts it in
        ``send_offsets_to_transaction`` (docs/exactly-once.md: check the generation is
        not -1 first, or the offsets are committed without fencing). The first call in
        a process checks that the installed confluent-kafka writes that format itself
        and raises ``IncompatibleVersionError`` naming its version if not.
        """
        return self._core.group_metadata()

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """confluent-kafka's name for :meth:`group_metadata`."""
        return self.group_metadata()

    def _rejoining(self) -> bool:
        """Whether this classic member has a JoinGroup or SyncGroup under way, so that
        :meth:`group_metadata` is about to name a new generation: offsets committed in a
        transaction now would be fenced (``TransactionLoop`` waits; docs/exactly-once.md,
        "Commits during a rebalance")."""
        return self._driver.state.rejoining

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        """``EAGER`` or ``COOPERATIVE``: how this member rebalances, fixed at
        construction as the highest protocol every configured assignor supports
        (``cooperative-sticky`` alone is COOPERATIVE; adding ``range`` makes it EAGER,
        the first step of the two-bounce upgrade). Kafka does not negotiate it: each
        member follows its own, and the broker only votes on the assignor name."""
        return self._core.rebalance_protocol

    @property
    def assignor(self) -> str | None:
        """The assignor name the group coordinator chose at this member's last join
        (the vote over every member's ``partition.assignment.strategy``), or None
        before the first join. During the two-bounce upgrade it reads ``range`` until
        every member lists ``cooperative-sticky`` first."""
        return self._driver.protocol_name

    @property
    def is_leader(self) -> bool:
        """Whether this member led its last join, i.e. ran the assignor for the group."""
        return self._driver.is_leader

    def metrics(self) -> dict[str, float]:
        """The ``consumer-coordinator-metrics`` group, by Java's metric names.

        A ``dict`` measured at one instant. Lookups also accept the names KIP-429
        documents (``partitions-revoked-latency-avg`` for the code's
        ``partition-revoked-latency-avg``); iteration lists the code names only.
        """
        return self._core.metrics.snapshot(self._driver.clock()).to_dict()

    def fetch_metrics(self) -> dict[str, float]:
        """The ``consumer-fetch-manager-metrics`` group, by Java's metric names:
        ``records-consumed-rate``, ``records-consumed-total`` and ``records-lag-max``
        (see docs/metrics.md). A ``dict`` measured at one instant; also a source for
        ``coopconsumer.metrics_export``. Safe to call from any thread; asks no broker."""
        return self._core.fetch_metrics.snapshot(self._driver.clock()).to_dict()

    def records_lag(self) -> dict[TopicPartition, int]:
        """Per assigned partition, the records after this consumer's position as of
        librdkafka's last fetch (Java's per-partition ``records-lag`` metric): its high
        watermark minus the position. Partitions whose position or high watermark is not
        known yet are left out. Asks no broker (:meth:`lag` does); safe to call from any
        thread; empty after :meth:`close`."""
        return self._core.records_lag()

    def close(self, timeout: float | None = None) -> None:
        """Leave the group and release everything: commit the consumed positions (with
        ``enable.auto.commit``), run ``on_partitions_revoked`` (or ``lost``) on this
        thread, send LeaveGroup (dynamic members; a consumer with a manual assignment
        only commits, with at most half of ``timeout``), stop the background thread, close
        the fetcher and the sockets. Idempotent.

        **How long it waits.** At most ``timeout`` seconds (default 30, Java's default)
        for the group steps: the commit of the consumed positions (retried every
        ``retry.backoff.ms`` while the group coordinator is unavailable), the
        revocation callback, and LeaveGroup's answer. A healthy close takes well under
        a second. With the brokers gone, the commit is retried until the bound, so
        ``close()`` takes the whole ``timeout``: it logs at INFO when it starts
        waiting, a WARNING if it still waits after 5 s (with a bound over 10 s), and a
        WARNING "leaving the group did not complete" at the end; the positions
        consumed since the last commit are not committed then (their records are read
        again by the next owner). Pass a smaller ``timeout`` (``close(timeout=5)``) to
        bound it; ``default.api.timeout.ms`` does not apply to ``close()``.

        Closing while a JoinGroup or SyncGroup is under way first lets that rebalance
        reach the SyncGroup answer (at most half of ``timeout``) so that the consumed
        positions can be committed, as :meth:`unsubscribe` does.

        The consumer is closed when this returns or raises; a listener exception
        raised during close is re-raised at the end. If the background thread does not
        stop within the timeout (a stuck socket or callback), ``CoopConsumerError`` says
        so (after a listener exception, which wins, it is only logged).
        """
        core = self._core
        if not core.begin_close():
            return
        timeout_s = CLOSE_TIMEOUT_S if timeout is None else max(0.0, timeout)
        driver = self._driver
        deadline = driver.clock() + timeout_s
        stopped = False
        try:
            if driver.failure is None and driver.alive:
                try:
                    start, later = close_notices(timeout_s, timeout is not None)
                    log.info("%s", start)
                    if core.commits.auto_commit and driver.state.manual:
                        # No group to leave, so no revocation commits for us: commit
                        # here, as Java's close() does (maybeAutoCommitOffsetsSync).
                        self._commit_manual_before_close(timeout_s / 2)
                    driver.submit(CloseRequested(commit_wait_s=timeout_s / 2))
                    core.run_until(
                        lambda: driver.state.stopped,
                        max(0.0, deadline - driver.clock()),
                        "close",
                        later,
                    )
                except CoopConsumerError as exc:
                    log.warning("close: leaving the group did not complete: %s", exc)
        finally:
            try:
                stopped = driver.stop(max(0.1, deadline - driver.clock()))
            finally:
                core.finish_close()
        stuck: CoopConsumerError | None = None
        if not stopped:
            stuck = CoopConsumerError(
                f"close(): the consumer's background thread did not stop within "
                f"{timeout_s:g} s; it is still running and closes its connections when it "
                f"stops"
            )
            log.error("%s", stuck)
        error = core.take_listener_error()
        if error is not None:
            raise error
        if stuck is not None:
            raise stuck

    def _commit_manual_before_close(self, timeout_s: float) -> None:
        """``close()`` of a manually assigned consumer with auto-commit: commit the
        consumed positions and wait, the member retrying until ``timeout_s`` (Java's
        ``maybeAutoCommitOffsetsSync``). Raises only when the driver failed."""
        started = self._core.commits.start_close_commit(timeout_s)
        if started is None:
            return
        offsets, future = started
        try:
            # The member answers at its deadline at the latest; the margin covers one
            # turn of the driver's loop.
            self._driver.wait_answer(future, timeout_s + SLICE_S, "auto-commit at close: no answer")
        except CoopConsumerError as exc:
            self._core.commits.end_close_commit(offsets, exc)
            return
        self._core.commits.end_close_commit(offsets, None)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
