"""``Consumer``: the public facade (subscribe / poll / commit / close).

Owns the three moving parts and wires them together: the ``GroupMember`` runs on the
driver thread (``_io._member_driver``), records come from the confluent-kafka ``Fetcher``, and
everything the member asks of the application (listener callbacks, fetcher assignment
changes, commit-before-revoke, errors) runs here, on the thread calling ``poll()``,
``consume()``, ``unsubscribe()`` or ``close()`` -- as in Java. Core errors become public
exceptions only at this boundary.

Imports the coordinator, the ``_io`` layer, config, listener and metrics; never
``confluent_kafka`` directly (records are the fetcher's ``Record`` objects).
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, Protocol, overload

import attrs

from ._config import ConsumerConfig
from ._coordinator import (
    Assign,
    AssignmentChange,
    AssignRequested,
    AutoCommitDue,
    CloseRequested,
    CommitBeforeRevoke,
    Fatal,
    IllegalTransition,
    InvokeListener,
    LeaveRequested,
    ListenerDone,
    ListenerKind,
    OffsetAndMetadata,
    ReportError,
    Subscribe,
    TopicsMissing,
    Unassign,
)
from ._coordinator._metadata import MISSING_TOPICS_REPORT_S
from ._errors import (
    ConfigurationError,
    CoopConsumerError,
    IllegalStateError,
    KafkaError,
    RequestTimeoutError,
)
from ._io._failure_log import FailureLog, failure_key
from ._io._member_driver import AppWork, ClientLike, CommittedOffsets, Driver
from ._io._member_factory import client_for, member_for
from ._listener import ListenerInvoker, RebalanceListener, RebalanceListenerLike
from ._metrics import CoordinatorMetrics, FetchMetrics
from ._protocol import errors
from ._types import MAX_OFFSET, ConsumerGroupMetadata, TopicPartition
from .assignors import RebalanceProtocol

if TYPE_CHECKING:
    # A record returned by poll()/consume(): confluent-kafka's Message (topic(),
    # partition(), offset(), key(), value(), headers(), timestamp()). Imported for
    # typing only: librdkafka is loaded when the first Consumer is built, so that
    # importing the package (and the wire client) does not load it.
    from ._io._fetcher import Record as Message

__all__ = ["Consumer", "FetcherLike", "client_for"]

log = logging.getLogger("coopconsumer.consumer")

#: Longest single wait inside poll()/consume(): between slices the consumer runs the
#: rebalance work the driver queued, so a rebalance never waits for a long poll. The
#: driver cuts a slice short when it queues work (``Fetcher.wake``); where librdkafka's
#: handle cannot be reached, the slice is how soon the poll() thread sees new work;
#: see docs/architecture.md ("Threads").
_SLICE_S: Final = 0.05
#: The slice while the member is STABLE with every position known: rebalance work only
#: starts from a heartbeat answer, and a cooperative member then joins and syncs on the
#: driver thread before it queues any, so a longer slice costs rebalances little and
#: cuts an idle member's wake-ups fivefold (benchmarks/idle_cpu.py).
_STABLE_SLICE_S: Final = 0.25
#: The slice while a commit before revoking runs: how late its answer is seen.
_REVOKE_COMMIT_SLICE_S: Final = 0.01
#: close()'s default bound (Java's ``DEFAULT_CLOSE_TIMEOUT_MS``).
_CLOSE_TIMEOUT_S: Final = 30.0
#: A close still waiting for the group coordinator this long says so (once), if its
#: bound is more than twice as long: a healthy close takes well under a second, one
#: that waits for a rebalance's SyncGroup answer on Tansu a second or two.
_CLOSE_NOTICE_S: Final = 5.0


def close_notices(timeout_s: float, explicit: bool) -> tuple[str, tuple[float, str] | None]:
    """What ``close()`` logs when it starts waiting for the group steps (INFO), and
    ``(after_s, message)`` for the WARNING it logs once if they still run after
    ``after_s`` (None when the bound is too short for that to help). Shared with
    ``aio.AsyncConsumer.close``."""
    bound = f"close(timeout={timeout_s:g})" if explicit else f"the default {timeout_s:g} s"
    start = (
        f"close: committing the consumed positions, revoking and leaving the group; "
        f"waiting at most {timeout_s:g} s ({bound}) for the group coordinator"
    )
    if timeout_s <= 2 * _CLOSE_NOTICE_S:
        return start, None
    later = (
        f"close: still waiting for the group coordinator after {_CLOSE_NOTICE_S:g} s (the "
        f"commit before leaving, then LeaveGroup); giving up after {timeout_s:g} s in all: "
        f"pass close(timeout=...) to wait less"
    )
    return start, (_CLOSE_NOTICE_S, later)


#: librdkafka's logical offsets (``confluent_kafka.OFFSET_BEGINNING``/``OFFSET_END``),
#: understood by ``Fetcher.assign``; a test checks they match.
_OFFSET_BEGINNING: Final = -2
_OFFSET_END: Final = -1
#: Delay before poll() retries a failed committed-offset lookup of new partitions.
_POSITION_RETRY_S: Final = 1.0
# Which states are stopped, unjoined, manual, quiet or rejoining each member's state
# says itself (``MemberState.stopped`` and the like, in both group protocols).
#: librdkafka's OFFSET_STORED and OFFSET_INVALID (confluent-kafka's TopicPartition
#: default): no start offset given, start at the committed offset.
_NO_START_OFFSETS: Final = frozenset({-1000, -1001})
_MIXED_MODES: Final = "subscription to topics, partitions and pattern are mutually exclusive"


class FetcherLike(Protocol):
    """What the consumer needs of ``Fetcher`` (tests substitute an in-memory fake)."""

    #: Errors the client reported while reaching brokers, for ``error_cb``.
    client_errors: list[KafkaError]
    #: Reports each distinct failure once per window (its log lines and its errors).
    failures: FailureLog

    @property
    def assigned(self) -> frozenset[TopicPartition]: ...

    def serve_events(self) -> None: ...

    def assign(self, starts: Mapping[TopicPartition, int]) -> None: ...

    def unassign(self, partitions: Iterable[TopicPartition]) -> None: ...

    def consume(self, max_records: int, timeout_s: float) -> list[Any]: ...

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def seek(self, tp: TopicPartition, offset: int) -> None: ...

    def pause(self, partitions: Iterable[TopicPartition]) -> None: ...

    def watermarks(
        self, tp: TopicPartition, timeout_s: float | None, *, cached: bool
    ) -> tuple[int, int]: ...

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_s: float | None
    ) -> dict[TopicPartition, int | None]: ...

    def resume(self, partitions: Iterable[TopicPartition]) -> None: ...

    def close(self) -> None: ...


def _tp(value: object) -> TopicPartition:
    if isinstance(value, TopicPartition):
        return value
    topic = getattr(value, "topic", None)
    partition = getattr(value, "partition", None)
    if isinstance(topic, str) and isinstance(partition, int):
        return TopicPartition(topic, partition)
    raise ConfigurationError(f"expected a TopicPartition, got {value!r}")


def _tps(values: Iterable[object]) -> frozenset[TopicPartition]:
    if isinstance(values, str | bytes):
        raise ConfigurationError(f"expected a collection of TopicPartition, got {values!r}")
    return frozenset(_tp(v) for v in values)


def _offset_of(value: object) -> OffsetAndMetadata:
    if isinstance(value, OffsetAndMetadata):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return OffsetAndMetadata(offset=value)  # its validator rejects what Kafka cannot store
    raise ConfigurationError(f"an offset to commit must be an int or OffsetAndMetadata: {value!r}")


def _commit_offsets(offsets: object) -> dict[TopicPartition, OffsetAndMetadata]:
    if isinstance(offsets, Mapping):
        return {_tp(tp): _offset_of(om) for tp, om in offsets.items()}
    if isinstance(offsets, Iterable) and not isinstance(offsets, str | bytes):
        # confluent-kafka style: TopicPartition objects carrying .offset (and .metadata)
        result: dict[TopicPartition, OffsetAndMetadata] = {}
        for item in offsets:
            offset = getattr(item, "offset", None)
            if (
                not isinstance(offset, int)
                or isinstance(offset, bool)
                or not 0 <= offset <= MAX_OFFSET
            ):
                raise ConfigurationError(f"{item!r} carries no valid offset to commit")
            metadata = getattr(item, "metadata", None)
            leader_epoch = getattr(item, "leader_epoch", None)
            result[_tp(item)] = OffsetAndMetadata(
                offset=offset,
                metadata=metadata if isinstance(metadata, str) else "",
                leader_epoch=leader_epoch if isinstance(leader_epoch, int) else -1,
            )
        return result
    raise ConfigurationError(
        f"offsets must be a mapping of TopicPartition to offsets or a list, not {offsets!r}"
    )


def _subscription(topics: object, *, broker_regex: bool = False) -> Subscribe | None:
    """The member input for ``subscribe(topics)``; None for an empty list (Java's
    ``subscribe([])`` is ``unsubscribe()``). With ``broker_regex`` (KIP-848) a ``^``
    string goes to the coordinator as it is, as librdkafka sends it."""
    if isinstance(topics, re.Pattern):
        return Subscribe(pattern=topics)
    if isinstance(topics, str):
        if topics.startswith("^") and broker_regex:
            return Subscribe(regex=topics)
        if topics.startswith("^"):  # librdkafka's convention for a regex subscription
            try:
                # librdkafka searches (the leading ^ anchors the start only); the
                # member matches whole names (Java), so allow any rest of the name.
                return Subscribe(pattern=re.compile(f"(?:{topics}).*", re.DOTALL))
            except re.error as exc:
                raise ConfigurationError(f"invalid topic pattern {topics!r}: {exc}") from exc
        return Subscribe(topics=frozenset({topics}))
    if isinstance(topics, Iterable):
        names = list(topics)
        for name in names:
            if not isinstance(name, str) or not name:
                raise ConfigurationError(f"topic names must be non-empty strings: {name!r}")
            if name.startswith("^"):
                raise ConfigurationError(
                    f"{name!r} is a pattern: pass it alone (or compiled), not in a list"
                )
        return Subscribe(topics=frozenset(names)) if names else None
    raise ConfigurationError(f"subscribe() takes a list of topics or a pattern, not {topics!r}")


def _assignment(partitions: object) -> tuple[frozenset[TopicPartition], dict[TopicPartition, int]]:
    """The partitions of an ``assign()``-style argument and the start offsets some of
    them carry (confluent-kafka's ``TopicPartition(topic, partition, offset)``)."""
    if isinstance(partitions, str | bytes) or not isinstance(partitions, Iterable):
        raise ConfigurationError(f"expected a list of TopicPartition, got {partitions!r}")
    found: set[TopicPartition] = set()
    starts: dict[TopicPartition, int] = {}
    for item in partitions:
        tp = _tp(item)
        if tp in found:
            raise ConfigurationError(f"{tp} is listed twice")
        found.add(tp)
        offset = getattr(item, "offset", None)
        if offset is None or offset in _NO_START_OFFSETS:
            continue
        starts[tp] = _start_offset(tp, offset, "start offset")
    return frozenset(found), starts


def _start_offset(tp: TopicPartition, offset: object, what: str) -> int:
    """``offset`` if fetching may start there: an offset from 0 to ``MAX_OFFSET``,
    ``OFFSET_BEGINNING`` or ``OFFSET_END``. Anything else raises ``ConfigurationError``
    before librdkafka sees it: it refuses a negative offset only once the partition was
    restarted (``_INVALID_ARG``) and takes one it cannot fetch from silently, after
    which the partition never delivers again (Java's ``seek`` rejects a negative offset
    too: "seek offset must not be a negative number")."""
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise ConfigurationError(f"the {what} of {tp} must be an int: {offset!r}")
    if offset in (_OFFSET_BEGINNING, _OFFSET_END) or 0 <= offset <= MAX_OFFSET:
        return offset
    raise ConfigurationError(
        f"invalid {what} {offset} for {tp}: give an offset from 0 to {MAX_OFFSET}, "
        f"OFFSET_BEGINNING (-2) or OFFSET_END (-1); nothing changed"
    )


def _woken(driver: Driver, answer: Future[Any] | None) -> bool:
    """What ends a wait on the driver: rebalance work, a failure, or the answer the
    caller waits for (a poll with nothing to fetch: the committed-offset lookup's)."""
    return (
        driver.has_app_work or driver.failure is not None or (answer is not None and answer.done())
    )


def _run_until_woken(
    driver: Driver, done: Callable[[], bool], commit: _RevokeCommit | None
) -> bool:
    """What ends a wait of ``Consumer._run_until``: what ends any wait (``_woken``, with
    the answer to the commit before revoking that runs), or ``done()``."""
    return _woken(driver, None if commit is None else commit.future) or done()


def _abandon(driver: Driver, fetcher: FetcherLike) -> None:
    """Finalizer of a consumer collected without ``close()``: no LeaveGroup (nobody
    can run the listeners), the coordinator expires the member after its session."""
    log.warning("a Consumer was garbage-collected without close(); stopping its thread")
    driver.stop(0.0)
    fetcher.close()


@attrs.define(kw_only=True)
class _RevokeCommit:
    """The commit before revoking while it runs (``Consumer._step_revoke_commit``); the
    member retries and times it (``RetriedCommitRequested``)."""

    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    #: Every partition being revoked: held paused until the commit is over.
    revoking: frozenset[TopicPartition]
    #: Partitions this commit paused in the fetcher (not those the application paused).
    paused: set[TopicPartition]
    future: Future[None]


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

    #: The driver ``_setup`` builds: the thread one here; ``coopconsumer.aio`` runs this
    #: class's logic with a driver task on the event loop instead.
    _driver_type: ClassVar[type[Driver]] = Driver

    #: The protected surface the asyncio host builds on (``aio._hosted.HostedConsumer``
    #: subclasses this class, ``aio._consumer.AsyncConsumer`` drives it): the methods it
    #: overrides (``_do``, ``_run_app_work``, ``_raise_pending``, ``_driver_type``) and
    #: the state and steps it uses. Renaming one, or changing what it means, changes
    #: aio too; tests/aio/test_aio_hooks.py fails when aio uses a name not listed here or
    #: one listed here is gone. docs/architecture.md, "The asyncio host's hooks".
    _ASYNCIO_HOST_SURFACE: ClassVar[frozenset[str]] = frozenset(
        {
            # overridden
            "_do",
            "_driver_type",
            "_held_work",
            "_raise_pending",
            "_run_app_work",
            # construction and checks
            "_setup",
            "_check_usable",
            "_timeout_or_default",
            # state read or changed
            "_assigned",
            "_auto_commit",
            "_closed",
            "_closing",
            "_driver",
            "_errors",
            "_fatal",
            "_fetcher",
            "_finalizer",
            "_invoker",
            "_last_auto_commit",
            "_lookup",
            "_metrics",
            "_next_position_retry",
            "_paused",
            "_revoke_commit",
            "_unpositioned",
            # steps reused
            "_commit_removed",
            "_drop",
            "_flush_starts",
            "_rejoining",
            "_uncommitted",
        }
    )

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
        self._config = cfg
        self._fetcher = fetcher
        self._closed = False
        # close() under way: the listener it runs may still commit (Java's pattern of
        # committing in onPartitionsRevoked), so only _closed refuses calls.
        self._closing = False
        self._fatal: CoopConsumerError | None = None
        self._errors: list[Exception] = []
        #: Topics needed that the cluster does not have (``TopicsMissing``).
        self._missing_topics: frozenset[str] = frozenset()
        self._metrics = CoordinatorMetrics()
        self._fetch_metrics = FetchMetrics(lambda: self._records_lag().values())
        self._invoker = ListenerInvoker(None, self._metrics)
        self._assigned: set[TopicPartition] = set()
        # Partitions assigned by the group whose start offset is not known yet.
        self._unpositioned: set[TopicPartition] = set()
        self._next_position_retry = 0.0
        # The committed-offset lookup in flight, if any: poll() never waits for it
        # (records keep flowing for positioned partitions); see _check_lookup. Its
        # partition set loses what is dropped meanwhile, so an answer older than a
        # revocation is never applied to the partition assigned again later.
        self._lookup: tuple[set[TopicPartition], Future[CommittedOffsets]] | None = None
        # Start offsets known but not yet given to the fetcher (see _flush_starts).
        self._pending_starts: dict[TopicPartition, int] = {}
        # Paused by the application; re-applied when a partition is restarted.
        self._paused: set[TopicPartition] = set()
        # The offset each partition was last handed to the fetcher at (its start, or
        # an accepted seek): where a refused restart puts it back before it returned
        # a record (issue 35: a refused seek never stalls a partition).
        self._fetch_starts: dict[TopicPartition, int] = {}
        self._api_timeout_s = cfg.default_api_timeout_ms / 1000.0
        self._retry_backoff_s = cfg.connection.retry_backoff_ms / 1000.0
        self._auto_commit = cfg.enable_auto_commit
        # Set by the member's AutoCommitDue; the commit is made by the next poll().
        self._auto_commit_due = False
        self._last_auto_commit: dict[TopicPartition, int] = {}
        # The commit before revoking, while it runs (see _start_revoke_commit), and the
        # app work queued behind it.
        self._revoke_commit: _RevokeCommit | None = None
        self._held_work: list[AppWork] = []
        self._owner = threading.get_ident()
        try:
            member = member_for(cfg)
            self._rebalance_protocol = member.protocol
            self._driver = self._driver_type(
                member,
                client,
                self._metrics,
                request_timeout_ms=cfg.connection.request_timeout_ms,
                wake=getattr(fetcher, "wake", None),
            )
            self._driver.start()
        except BaseException:
            client.close()
            fetcher.close()
            raise
        # A consumer dropped without close() must not leave a thread heartbeating for
        # a member nobody polls: stop the driver when the object is collected.
        self._finalizer = weakref.finalize(self, _abandon, self._driver, fetcher)

    # ------------------------------------------------------------------ subscription

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
        self._check_usable()
        subscription = _subscription(topics, broker_regex=self._config.kip848)
        if subscription is None:
            self.unsubscribe()
            return
        invoker = ListenerInvoker(listener, self._metrics)
        try:
            self._driver.request(subscription, self._api_timeout_s)
        except IllegalTransition as exc:
            if exc.target is not None or getattr(exc.state, "manual", False) is not True:
                raise
            raise IllegalStateError(
                f"subscribe(): {_MIXED_MODES}; partitions are assigned manually "
                f"(call unassign() or unsubscribe() first)"
            ) from None
        self._invoker = invoker

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
        self._check_usable()
        if self._driver.state.manual:
            self._commit_removed(frozenset(self._assigned))
        driver = self._driver
        deadline = driver.clock() + self._api_timeout_s
        # Half the time may go to waiting for a rebalance under way to reach the
        # SyncGroup answer, so that the member commits before leaving (its decision).
        leave = LeaveRequested(commit_wait_s=self._api_timeout_s / 2)
        driver.request(leave, max(0.0, deadline - driver.clock()))
        self._run_until(
            lambda: driver.state.unjoined or driver.state.stopped,
            max(0.0, deadline - driver.clock()),
            "leaving the group",
        )
        self._raise_pending()

    # ------------------------------------------------------------------ manual assignment

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
        wanted, starts = _assignment(partitions)
        self._change_assignment(
            AssignRequested(partitions=wanted, starts=starts, change=AssignmentChange.REPLACE),
            "assign()",
        )

    def unassign(self) -> None:
        """Drop the manual assignment (confluent-kafka's ``unassign``): nothing is
        fetched any more and the consumer is in neither mode, free to :meth:`subscribe`.
        With ``enable.auto.commit`` the consumed positions are committed first, without
        waiting. Does nothing when nothing is assigned. Raises ``IllegalStateError``
        while subscribed (use :meth:`unsubscribe`); nothing changes then."""
        self._change_assignment(
            AssignRequested(partitions=frozenset(), change=AssignmentChange.REPLACE),
            "unassign()",
        )

    def incremental_assign(self, partitions: Iterable[object]) -> None:
        """Add ``partitions`` to the manual assignment (confluent-kafka's
        ``incremental_assign``), each starting as in :meth:`assign`; the others keep
        their positions. Raises ``ConfigurationError`` if one is already assigned and
        ``IllegalStateError`` while subscribed; nothing changes then."""
        wanted, starts = _assignment(partitions)
        self._change_assignment(
            AssignRequested(partitions=wanted, starts=starts, change=AssignmentChange.ADD),
            "incremental_assign()",
        )

    def incremental_unassign(self, partitions: Iterable[object]) -> None:
        """Remove ``partitions`` from the manual assignment (confluent-kafka's
        ``incremental_unassign``); removing the last one leaves the consumer in neither
        mode, as :meth:`unassign`. With ``enable.auto.commit`` their consumed positions
        are committed first, without waiting. Raises ``ConfigurationError`` if one is
        not assigned and ``IllegalStateError`` while subscribed; nothing changes then."""
        wanted, _ = _assignment(partitions)
        self._change_assignment(
            AssignRequested(partitions=wanted, change=AssignmentChange.REMOVE),
            "incremental_unassign()",
        )

    def _change_assignment(self, event: AssignRequested, what: str) -> None:
        self._check_usable()
        if self._driver.state.manual:
            if event.change is AssignmentChange.REMOVE:
                self._commit_removed(event.partitions & self._assigned)
            elif event.change is AssignmentChange.REPLACE:
                self._commit_removed(frozenset(self._assigned))
        try:
            self._driver.request(event, self._api_timeout_s)
        except IllegalTransition as exc:
            if exc.target is not None:
                raise
            raise IllegalStateError(
                f"{what}: {_MIXED_MODES}; the consumer is subscribed "
                f"({exc.state.value}): call unsubscribe() first"
            ) from None
        self._run_app_work()

    # ------------------------------------------------------------------ records

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
        messages = self._consume(1, timeout)
        return messages[0] if messages else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Return up to ``num_messages`` records, waiting at most ``timeout`` seconds
        (negative: indefinitely) for the first. Errors as :meth:`poll`."""
        if not isinstance(num_messages, int) or num_messages < 1:
            raise ConfigurationError(f"num_messages must be a positive int: {num_messages!r}")
        return self._consume(num_messages, timeout)

    def _consume(self, count: int, timeout: float | None) -> list[Message]:
        self._check_usable()
        driver = self._driver
        driver.note_poll()
        if driver.has_app_work or self._unpositioned or self._revoke_commit is not None:
            self._run_app_work()
        if self._auto_commit_due:
            self._auto_commit_async()
        now = driver.clock()
        if self._fatal is not None or self._errors or self._invoker.has_error:
            self._raise_pending()
        deadline = None if timeout is None or timeout < 0 else now + timeout
        fetcher = self._fetcher
        while True:
            if fetcher.client_errors:
                self._report_client_errors()
            fetcher.failures.settle()
            if self._revoke_commit is not None:
                # The revoked partitions are paused; their REVOKED callback runs as soon
                # as the commit is answered, seen at the end of this slice.
                slice_s = _REVOKE_COMMIT_SLICE_S
            elif driver.state.quiet and not self._unpositioned:
                slice_s = _STABLE_SLICE_S
            else:
                slice_s = _SLICE_S
            wait = slice_s if deadline is None else max(0.0, min(slice_s, deadline - now))
            # Unpositioned partitions are a subset of the assigned ones: comparing the
            # sizes says in O(1) whether the fetcher has anything to fetch.
            if len(self._assigned) > len(self._unpositioned):
                messages = fetcher.consume(count, wait)
                if messages:
                    self._fetch_metrics.records_consumed(len(messages), driver.clock())
                    fetcher.failures.recovered("records were fetched")
                    return messages
            else:
                fetcher.serve_events()
                # Nothing to fetch yet: wake for rebalance work, a failure, or the
                # committed-offset lookup's answer (which starts the fetching; waiting
                # for the slice to end instead delayed the first record by up to 50 ms).
                lookup = None if self._lookup is None else self._lookup[1]
                driver.wait_for(partial(_woken, driver, lookup), wait)
            if (
                driver.has_app_work
                or driver.failure is not None
                or self._unpositioned
                or self._revoke_commit is not None
            ):
                self._run_app_work()
                self._raise_pending()
            now = driver.clock()
            if deadline is not None and now >= deadline:
                return []
            driver.note_poll()
            if self._auto_commit_due:
                self._auto_commit_async()

    def _report_client_errors(self) -> None:
        """Hand the client errors librdkafka reported to ``error_cb`` (confluent-kafka's
        contract: called on the poll() thread; what it raises is raised from poll()),
        or log them as warnings when no callback is configured."""
        reported = list(self._fetcher.client_errors)
        self._fetcher.client_errors.clear()
        callback = self._config.error_cb
        first: BaseException | None = None
        for error in reported:
            if callback is None:
                # Once per window for a failure that repeats, and not at all when
                # librdkafka's own log line of the same failure was just reported:
                # raw confluent-kafka prints no client error without an error_cb.
                suffix = self._fetcher.failures.admit(
                    failure_key(error.description or str(error)), logging.WARNING
                )
                if suffix is not None:
                    log.warning("client error: %s%s", error, suffix)
                continue
            self._fetcher.failures.note_client_error(error.description or str(error))
            try:
                callback(error)
            except Exception as exc:  # every error is delivered before the first is raised
                first = first or exc
        if first is not None:
            raise first

    # ------------------------------------------------------------------ app work

    def _run_app_work(self) -> None:
        """Run the app work the driver queued (hook of the asyncio host, which
        overrides it to hold the work behind a coroutine callback)."""
        self._check_lookup()
        if (
            self._unpositioned
            and not (self._closing or self._closed)
            and self._driver.clock() >= self._next_position_retry
        ):
            self._position(frozenset(self._unpositioned))
        while True:
            if self._revoke_commit is not None and not self._step_revoke_commit():
                break  # the commit before revoking still runs: what follows it waits
            work = self._held_work or self._driver.take_app_work()
            self._held_work = []
            if not work:
                break
            for index, item in enumerate(work):
                self._do(item)
                if self._revoke_commit is not None:
                    self._held_work = work[index + 1 :]
                    break
        self._flush_starts()
        if self._fatal is None and self._driver.failure is not None:
            self._fatal = self._driver.failure

    def _do(self, item: AppWork) -> None:
        """Carry out one item of app work (hook of the asyncio host, which overrides
        it to run coroutine callbacks as tasks)."""
        if isinstance(item, InvokeListener):
            try:
                self._invoker.invoke(item.kind, item.partitions)
                if item.kind is ListenerKind.REVOKED:
                    # Java drops revoked partitions right after onPartitionsRevoked: no
                    # record of them may be returned once the callback ran (the member's
                    # Unassign follows, after the driver saw ListenerDone).
                    self._drop(item.partitions)
            finally:
                # KIP-429: a callback that raised is done all the same.
                if self._driver.failure is None:
                    self._driver.submit(
                        ListenerDone(invocation_id=item.invocation_id, kind=item.kind)
                    )
        elif isinstance(item, Assign):
            self._assigned |= item.partitions
            if self._closing or self._closed:
                self._unpositioned |= item.partitions  # closing: nothing will be fetched
            else:
                # Given start offsets (manual assignment) go to the fetcher with the
                # other known starts once the queued work has run (_flush_starts).
                self._pending_starts.update(item.starts)
                self._position(item.partitions - item.starts.keys())
        elif isinstance(item, Unassign):
            self._drop(item.partitions)
        elif isinstance(item, CommitBeforeRevoke):
            self._start_revoke_commit(item.partitions)
        elif isinstance(item, AutoCommitDue):
            self._auto_commit_due = True
        elif isinstance(item, TopicsMissing):
            self._report_missing_topics(item.topics)
        elif isinstance(item, ReportError):
            self._errors.append(item.error)
        elif isinstance(item, Fatal) and self._fatal is None:
            self._fatal = item.error

    def _report_missing_topics(self, topics: frozenset[str]) -> None:
        """Topics this consumer needs that the cluster does not have (issue 35): to
        ``error_cb`` as ``UNKNOWN_TOPIC_OR_PARTITION`` (what it raises is raised from
        ``poll()``), else a warning; counted in :meth:`metrics` as
        ``missing-topics``. The consumer keeps waiting for them."""
        before, self._missing_topics = self._missing_topics, topics
        self._metrics.set_missing_topics(len(topics))
        if not topics:
            if before:
                log.warning("topic(s) %s exist now", ", ".join(sorted(before)))
            return
        names = ", ".join(sorted(topics))
        error = errors.to_exception(
            errors.UNKNOWN_TOPIC_OR_PARTITION,
            message=(
                f"topic(s) {names} not found in the cluster at {self._bootstrap_text()}: "
                f"a typo, or not created yet; still waiting for them (said again every "
                f"{MISSING_TOPICS_REPORT_S:g} s while they are missing)"
            ),
        )
        callback = self._config.error_cb
        if callback is None:
            log.warning("%s", error)
        else:
            callback(error)

    def _bootstrap_text(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self._config.bootstrap_servers)

    def _flush_starts(self) -> None:
        if self._pending_starts:
            starts, self._pending_starts = self._pending_starts, {}
            self._fetcher.assign(starts)
            self._fetch_starts.update(starts)
            for tp in starts.keys() & self._paused:
                self._fetcher.pause([tp])
            commit = self._revoke_commit
            if commit is not None:
                # A lookup answered while the commit before revoking runs: a partition
                # being revoked must not return records its commit did not take.
                held = (starts.keys() & commit.revoking) - self._paused - commit.paused
                if held:
                    self._fetcher.pause(held)
                    commit.paused |= held

    def _drop(self, partitions: frozenset[TopicPartition]) -> None:
        for tp in partitions:
            self._pending_starts.pop(tp, None)
        self._assigned -= partitions
        self._paused -= partitions
        self._unpositioned -= partitions
        if self._lookup is not None:
            self._lookup[0].difference_update(partitions)
        for tp in partitions:
            self._last_auto_commit.pop(tp, None)
            self._fetch_starts.pop(tp, None)
        self._fetcher.unassign(partitions)

    def _position(self, partitions: frozenset[TopicPartition]) -> None:
        """Look up where ``partitions`` start (their committed offsets, else
        ``auto.offset.reset``) without waiting: the answer is applied by a later poll
        (:meth:`_check_lookup`). One lookup is in flight at a time; partitions assigned
        meanwhile are looked up when it ends, failed ones after ``retry.backoff.ms``."""
        wanted = partitions & self._assigned
        self._unpositioned |= wanted
        if not wanted or self._lookup is not None:
            return
        self._lookup = (set(wanted), self._driver.fetch_committed(wanted, self._api_timeout_s))

    def _check_lookup(self) -> None:
        """Apply the committed-offset lookup if it has completed."""
        lookup = self._lookup
        if lookup is None or not lookup[1].done():
            return
        self._lookup = None
        wanted, future = lookup
        try:
            committed: CommittedOffsets = future.result()
        except CoopConsumerError as exc:
            if self._driver.failure is not None:
                raise self._driver.failure from exc
            log.warning(
                "fetching committed offsets of %d partition(s) failed: %s", len(wanted), exc
            )
            self._next_position_retry = self._driver.clock() + self._retry_backoff_s
            return
        self._start_fetching({tp: committed.get(tp) for tp in wanted})
        self._flush_starts()

    def _start_fetching(self, committed: Mapping[TopicPartition, OffsetAndMetadata | None]) -> None:
        reset = self._config.auto_offset_reset
        starts: dict[TopicPartition, int] = {}
        missing: list[TopicPartition] = []
        for tp, om in committed.items():
            if tp not in self._unpositioned:
                continue  # revoked meanwhile, or positioned by a seek()
            if om is not None:
                starts[tp] = om.offset
            elif reset == "earliest":
                starts[tp] = _OFFSET_BEGINNING
            elif reset == "latest":
                starts[tp] = _OFFSET_END
            else:
                missing.append(tp)
        if starts:
            # Handed to the fetcher once the queued work (on_partitions_assigned
            # included) has run, so a seek() in the callback wins, as in Java where
            # positions are resolved after the callback.
            self._pending_starts.update(starts)
            self._unpositioned -= starts.keys()
        if missing:
            self._unpositioned -= set(missing)
            self._errors.append(
                errors.to_exception(
                    errors.OFFSET_OUT_OF_RANGE,
                    message=(
                        f"no committed offset for {', '.join(map(str, sorted(missing)))} and "
                        f"auto.offset.reset is 'none': seek() these partitions to consume them"
                    ),
                )
            )

    def _commit_manual_before_close(self, timeout_s: float) -> None:
        """``close()`` of a manually assigned consumer with auto-commit: commit the
        consumed positions and wait, the member retrying until ``timeout_s`` (Java's
        ``maybeAutoCommitOffsetsSync``). Raises only when the driver failed."""
        offsets = self._uncommitted(frozenset(self._assigned))
        if not offsets:
            return
        driver = self._driver
        future = driver.commit_retried(offsets, timeout_s, "auto-commit at close")
        try:
            # The member answers at its deadline at the latest; the margin covers one
            # turn of the driver's loop.
            driver.wait_answer(future, timeout_s + _SLICE_S, "auto-commit at close: no answer")
        except CoopConsumerError as exc:
            if driver.failure is not None:
                raise
            log.warning(
                "auto-commit of %d manually assigned partition(s) at close failed: %s",
                len(offsets),
                exc,
            )
            return
        self._last_auto_commit.update({tp: om.offset for tp, om in offsets.items()})

    def _start_revoke_commit(self, partitions: frozenset[TopicPartition]) -> None:
        """Java's auto-commit in ``onJoinPrepare``: the consumed positions of the
        partitions about to be revoked are committed before ``on_partitions_revoked``
        runs, so the next owner starts after every record this member returned.

        Without blocking ``poll()``: the member runs the commit (retries and deadline:
        ``RetriedCommitRequested``) and the app work queued behind it (the REVOKED
        callback first) waits for it, while ``poll()`` keeps its timeout and records of
        the other partitions keep flowing. Every partition being revoked is paused
        meanwhile, so no record of theirs is returned after their positions were
        taken: also those the commit leaves out because they have no position yet
        (librdkafka's position() stays OFFSET_INVALID until a partition returns its
        first record), whose records would otherwise flow uncommitted until the
        REVOKED callback and be read again by their next owner, and those a
        committed-offset lookup starts meanwhile (``_flush_starts``)."""
        offsets = self._consumed_offsets(partitions)
        if not offsets:
            return  # nothing returned by any of them: nothing to commit or hold
        paused = (partitions & self._fetcher.assigned) - self._paused
        if paused:
            self._fetcher.pause(paused)
        self._revoke_commit = _RevokeCommit(
            offsets=offsets,
            revoking=partitions,
            paused=set(paused),
            future=self._driver.commit_retried(
                offsets, self._api_timeout_s, "auto-commit before revoking"
            ),
        )

    def _step_revoke_commit(self) -> bool:
        """True once the commit before revoking is over (its future is answered).

        A commit that could not be made is logged and the partitions are given up
        anyway: their next owner starts from the last committed offset, so records may
        be processed twice, none lost. Raises only when the driver failed."""
        commit = self._revoke_commit
        assert commit is not None
        if not commit.future.done():
            return False
        error = commit.future.exception()
        if error is not None and self._driver.failure is not None:
            self._end_revoke_commit()
            raise self._driver.failure
        if error is None:
            self._last_auto_commit.update({tp: om.offset for tp, om in commit.offsets.items()})
        else:
            log.warning(
                "auto-commit before revoking %d partition(s) failed; their next owner "
                "may process records again: %s",
                len(commit.offsets),
                error,
            )
        self._end_revoke_commit()
        return True

    def _end_revoke_commit(self) -> None:
        commit = self._revoke_commit
        assert commit is not None
        self._revoke_commit = None
        # The REVOKED callback that follows drops them; resumed first so that nothing
        # stays paused behind the application's back should it not follow.
        still = commit.paused & self._assigned
        if still:
            self._fetcher.resume(still)

    def _auto_commit_async(self) -> None:
        self._auto_commit_due = False
        self._commit_uncommitted_async(frozenset(self._assigned))

    def _commit_removed(self, partitions: frozenset[TopicPartition]) -> None:
        """With auto-commit, commit the consumed positions of manually assigned
        ``partitions`` about to be unassigned, without waiting (Java's ``assign()``
        commits asynchronously before changing the assignment; librdkafka commits
        removed partitions too). Queued before the change, so it is sent first."""
        if self._auto_commit and partitions:
            self._commit_uncommitted_async(partitions)

    def _commit_uncommitted_async(self, partitions: frozenset[TopicPartition]) -> None:
        changed = self._uncommitted(partitions)
        if not changed:
            return
        future = self._driver.commit(changed)
        committed = {tp: om.offset for tp, om in changed.items()}

        def done(f: Future[None]) -> None:
            error = f.exception()
            if error is None:
                self._last_auto_commit.update(committed)
            else:
                log.info("auto-commit failed (retried at the next interval): %s", error)

        future.add_done_callback(done)

    def _uncommitted(
        self, partitions: frozenset[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Consumed positions of ``partitions`` not committed by auto-commit yet."""
        offsets = self._consumed_offsets(partitions)
        return {tp: om for tp, om in offsets.items() if self._last_auto_commit.get(tp) != om.offset}

    def _consumed_offsets(
        self, partitions: frozenset[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        positions = self._fetcher.positions(partitions & self._fetcher.assigned)
        return {tp: OffsetAndMetadata(offset=p) for tp, p in positions.items() if p >= 0}

    def _raise_pending(self) -> None:
        """Raise what the last app work left to raise (hook of the asyncio host, which
        adds its coroutine callbacks' first error)."""
        if self._fatal is not None:
            raise self._fatal
        error = self._invoker.take_error()
        if error is None and self._errors:
            error = self._errors.pop(0)
        if error is not None:
            raise error

    def _run_until(
        self, done: Any, timeout_s: float, what: str, notice: tuple[float, str] | None = None
    ) -> None:
        """Run queued app work until ``done()`` (a published driver condition); log
        ``notice`` (``(after_s, message)``) at WARNING if it still runs after after_s."""
        driver = self._driver
        started = driver.clock()
        deadline = started + timeout_s
        while True:
            self._run_app_work()
            if self._fatal is not None or done():
                return
            if notice is not None and driver.clock() - started >= notice[0]:
                log.warning("%s", notice[1])
                notice = None
            remaining = deadline - driver.clock()
            if remaining <= 0:
                raise RequestTimeoutError(f"{what} did not complete within {timeout_s:.1f}s")
            # The driver answers a commit's future before it publishes (and notifies),
            # so a commit before revoking ends the wait as soon as it is answered: the
            # REVOKED callback and the LeaveGroup behind it go out at once, not at the
            # end of a slice (which delayed every close by up to 50 ms).
            driver.wait_for(
                partial(_run_until_woken, driver, done, self._revoke_commit), min(remaining, 0.5)
            )

    def _wait(self, future: Future[Any], timeout_s: float) -> Any:
        return self._driver.wait_answer(
            future, timeout_s, f"no answer within {timeout_s:.1f}s (default.api.timeout.ms)"
        )

    # ------------------------------------------------------------------ offsets

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
        self._check_usable()
        if offsets is None:
            wanted = self._consumed_offsets(frozenset(self._assigned))
        else:
            wanted = _commit_offsets(offsets)
        future = self._driver.commit(wanted)
        if asynchronous:
            return future
        self._wait(future, self._api_timeout_s)
        return None

    def committed(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of ``partitions`` (None: nothing committed).

        Raises ``KafkaError`` for an error answer and ``RequestTimeoutError`` after
        ``timeout`` seconds (default ``default.api.timeout.ms``); nothing changes.
        """
        self._check_usable()
        wanted = _tps(partitions)
        timeout_s = self._timeout_or_default(timeout)
        result: CommittedOffsets = self._wait(
            self._driver.fetch_committed(wanted, timeout_s), timeout_s
        )
        return {tp: (None if om is None else om.offset) for tp, om in result.items()}

    def position(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The offset of the next record :meth:`poll` returns per assigned partition
        (None: not known yet, e.g. before the first fetch from a logical offset).
        Raises ``ConfigurationError`` for a partition not assigned to this consumer."""
        self._check_usable()
        wanted = _tps(partitions)
        foreign = wanted - self._assigned
        if foreign:
            raise ConfigurationError(
                f"position() of partitions not assigned to this consumer: "
                f"{', '.join(map(str, sorted(foreign)))}"
            )
        positions = self._fetcher.positions(wanted & self._fetcher.assigned)
        return {tp: (p if (p := positions.get(tp, -1)) >= 0 else None) for tp in wanted}

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
        self._check_usable()
        tp = _tp(partition)
        offset = _start_offset(tp, offset, "seek offset")
        if tp not in self._assigned:
            raise ConfigurationError(f"seek() of {tp}, which is not assigned to this consumer")
        if tp in self._pending_starts:
            self._pending_starts[tp] = offset  # not fetching yet: just change the start
            return
        if tp in self._unpositioned or tp not in self._fetcher.assigned:
            self._fetcher.assign({tp: offset})  # refused: still unpositioned
            self._unpositioned.discard(tp)
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

    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch each of ``partitions`` from its first available record next (Java's
        ``seekToBeginning``; confluent-kafka's ``seek`` to ``OFFSET_BEGINNING``).
        Raises ``ConfigurationError`` for a partition not assigned (nothing changes)."""
        self._seek_all(partitions, _OFFSET_BEGINNING)

    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch each of ``partitions`` from its end next: only records produced from now
        on (Java's ``seekToEnd``). Raises ``ConfigurationError`` for a partition not
        assigned (nothing changes)."""
        self._seek_all(partitions, _OFFSET_END)

    def _seek_all(self, partitions: Iterable[TopicPartition], offset: int) -> None:
        self._check_usable()
        wanted = sorted(_tps(partitions))
        foreign = [tp for tp in wanted if tp not in self._assigned]
        if foreign:
            raise ConfigurationError(
                f"seek of partitions not assigned to this consumer: {', '.join(map(str, foreign))}"
            )
        for tp in wanted:
            self.seek(tp, offset)

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
        self._check_usable()
        return self._fetcher.watermarks(
            _tp(partition), self._timeout_or_default(timeout), cached=bool(cached)
        )

    def lag(self, partition: TopicPartition, timeout: float | None = None) -> int | None:
        """Records in ``partition`` after this consumer's position: the high watermark
        minus :meth:`position` (None while the position is not known yet). Raises
        ``ConfigurationError`` for a partition not assigned; errors as
        :meth:`get_watermark_offsets`."""
        tp = _tp(partition)
        position = self.position([tp])[tp]
        if position is None:
            return None
        _, high = self.get_watermark_offsets(tp, timeout)
        return max(0, high - position)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """Per partition, the earliest offset whose record timestamp is at least the given
        timestamp (milliseconds since the epoch), or None if there is no such record
        (Java's ``offsetsForTimes``, which answers null there). Any partition may be
        asked; waits at most ``timeout`` seconds (None: ``default.api.timeout.ms``).
        Raises ``ConfigurationError`` for a negative timestamp, ``KafkaError`` or
        ``RequestTimeoutError``; nothing changes."""
        self._check_usable()
        asked: dict[TopicPartition, int] = {}
        for key, ts in timestamps.items():
            if not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts <= MAX_OFFSET:
                raise ConfigurationError(
                    f"offsets_for_times: the timestamp of {key} must be an int >= 0 and "
                    f"<= {MAX_OFFSET} (ms since the epoch): {ts!r}"
                )
            asked[_tp(key)] = ts
        if not asked:
            return {}
        return self._fetcher.offsets_for_times(asked, self._timeout_or_default(timeout))

    def _timeout_or_default(self, timeout: float | None) -> float:
        return self._api_timeout_s if timeout is None else max(0.0, float(timeout))

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
        self._position(frozenset({tp}))

    def _repause(self, tp: TopicPartition) -> None:
        if tp in self._paused:
            self._fetcher.pause([tp])

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop returning records of ``partitions`` (they stay assigned and keep
        heartbeating in the group) until :meth:`resume`."""
        self._check_usable()
        wanted = _tps(partitions)
        self._paused |= wanted
        self._fetcher.pause(wanted)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Undo :meth:`pause`."""
        self._check_usable()
        wanted = _tps(partitions)
        self._paused -= wanted
        self._fetcher.resume(wanted)

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions currently assigned to this consumer: by the group (as applied
        by ``poll``) or by :meth:`assign` (current when that returns)."""
        return frozenset(self._assigned)

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
        from ._io._txn_producer import verify_group_metadata_format  # loads librdkafka

        verify_group_metadata_format()
        return self._driver.group_metadata

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
        return self._rebalance_protocol

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
        return self._metrics.snapshot(self._driver.clock()).to_dict()

    def fetch_metrics(self) -> dict[str, float]:
        """The ``consumer-fetch-manager-metrics`` group, by Java's metric names:
        ``records-consumed-rate``, ``records-consumed-total`` and ``records-lag-max``
        (see docs/metrics.md). A ``dict`` measured at one instant; also a source for
        ``coopconsumer.metrics_export``. Safe to call from any thread; asks no broker."""
        return self._fetch_metrics.snapshot(self._driver.clock()).to_dict()

    def records_lag(self) -> dict[TopicPartition, int]:
        """Per assigned partition, the records after this consumer's position as of
        librdkafka's last fetch (Java's per-partition ``records-lag`` metric): its high
        watermark minus the position. Partitions whose position or high watermark is not
        known yet are left out. Asks no broker (:meth:`lag` does); safe to call from any
        thread; empty after :meth:`close`."""
        return self._records_lag()

    def _records_lag(self) -> dict[TopicPartition, int]:
        if self._closed:
            return {}
        # Copies first: the poll() thread may change these sets meanwhile.
        assigned = frozenset(self._assigned)
        unpositioned = frozenset(self._unpositioned)
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

    # ------------------------------------------------------------------ close

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
        if self._closed or self._closing:
            return
        self._closing = True
        self._finalizer.detach()
        timeout_s = _CLOSE_TIMEOUT_S if timeout is None else max(0.0, timeout)
        driver = self._driver
        deadline = driver.clock() + timeout_s
        stopped = False
        try:
            if driver.failure is None and driver.alive:
                try:
                    start, later = close_notices(timeout_s, timeout is not None)
                    log.info("%s", start)
                    if self._auto_commit and driver.state.manual:
                        # No group to leave, so no revocation commits for us: commit
                        # here, as Java's close() does (maybeAutoCommitOffsetsSync).
                        self._commit_manual_before_close(timeout_s / 2)
                    driver.submit(CloseRequested(commit_wait_s=timeout_s / 2))
                    self._run_until(
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
                self._closed = True
                self._assigned.clear()
                self._unpositioned.clear()
                self._fetcher.close()
        stuck: CoopConsumerError | None = None
        if not stopped:
            stuck = CoopConsumerError(
                f"close(): the consumer's background thread did not stop within "
                f"{timeout_s:g} s; it is still running and closes its connections when it "
                f"stops"
            )
            log.error("%s", stuck)
        error = self._invoker.take_error()
        if error is not None:
            raise error
        if stuck is not None:
            raise stuck

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_usable(self) -> None:
        if self._closed:
            raise CoopConsumerError("the consumer is closed")
        if self._fatal is not None:
            raise self._fatal
        failure = self._driver.failure
        if failure is not None:
            self._fatal = failure
            raise failure
