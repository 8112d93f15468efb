"""``ConsumerCore``: what a consumer decides, composed by both facades.

``Consumer`` (blocking, a driver thread) and ``aio.AsyncConsumer`` (awaiting, a driver
task) each hold one ``ConsumerCore`` and differ only in how they wait. The core owns
the three moving parts and wires them together: the group member runs in the
``Driver``, records come from the confluent-kafka ``Fetcher`` (``FetcherLike``), and
everything the member asks of the application runs here, on the facade's thread, in
the order the member emitted it: listener callbacks (``ListenerInvoker``), assignment
changes on the fetcher (``FetchPositions``), the commit before revoking, auto-commit,
errors and the fatal error, the close sequence's bookkeeping and the metrics. Core
errors become public exceptions only here.

The asyncio facade runs coroutine callbacks as tasks: it hands the core a
``ListenerGate``, which takes the listener work the core would run and holds what
follows it until the task ends.

Imports the coordinator, the ``_io`` layer, config, listener and metrics; never
``confluent_kafka`` (records are the fetcher's) or a facade.
"""

from __future__ import annotations

import enum
import logging
import weakref
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from functools import partial
from typing import Any, Final, Protocol

from .._config import ConsumerConfig
from .._errors import (
    ConfigurationError,
    CoopConsumerError,
    IllegalStateError,
    RequestTimeoutError,
)
from .._io._failure_log import failure_key
from .._io._member_driver import AppWork, ClientLike, Driver
from .._io._member_factory import member_for
from .._listener import ListenerInvoker, RebalanceListener, RebalanceListenerLike
from .._listener import ListenerKind as CallbackKind
from .._member import (
    Assign,
    AssignmentChange,
    AssignRequested,
    AutoCommitDue,
    CommitBeforeRevoke,
    Fatal,
    IllegalTransition,
    InvokeListener,
    LeaveRequested,
    ListenerDone,
    ListenerKind,
    ReportError,
    Subscribe,
    TopicsMissing,
    Unassign,
)
from .._member._metadata import MISSING_TOPICS_REPORT_S
from .._metrics import CoordinatorMetrics, FetchMetrics
from .._protocol import error_codes
from .._types import MAX_OFFSET, ConsumerGroupMetadata, TopicPartition
from ._arguments import (
    MIXED_MODES,
    FetcherLike,
    assignment,
    commit_offsets,
    start_offset,
    tp_of,
    tps,
)
from ._commits import OwnCommits, RevokeCommit
from ._positions import FetchPositions

__all__ = ["ConsumerCore", "GateState", "ListenerGate", "close_notices"]

log = logging.getLogger("coopconsumer.consumer")

#: Longest single wait inside poll()/consume(): between slices the consumer runs the
#: rebalance work the driver queued, so a rebalance never waits for a long poll. The
#: driver cuts a slice short when it queues work (``Fetcher.wake``); where librdkafka's
#: handle cannot be reached, the slice is how soon the poll() thread sees new work;
#: see docs/architecture.md ("Threads").
SLICE_S: Final = 0.05
#: The slice while the member is STABLE with every position known: rebalance work only
#: starts from a heartbeat answer, and a cooperative member then joins and syncs on the
#: driver thread before it queues any, so a longer slice costs rebalances little and
#: cuts an idle member's wake-ups fivefold (benchmarks/idle_cpu.py).
_STABLE_SLICE_S: Final = 0.25
#: The slice while a commit before revoking runs: how late its answer is seen.
REVOKE_COMMIT_SLICE_S: Final = 0.01
#: close()'s default bound (Java's ``DEFAULT_CLOSE_TIMEOUT_MS``).
CLOSE_TIMEOUT_S: Final = 30.0
#: A close still waiting for the group coordinator this long says so (once), if its
#: bound is more than twice as long: a healthy close takes well under a second, one
#: that waits for a rebalance's SyncGroup answer on Tansu a second or two.
_CLOSE_NOTICE_S: Final = 5.0


def close_notices(timeout_s: float, explicit: bool) -> tuple[str, tuple[float, str] | None]:
    """What ``close()`` logs when it starts waiting for the group steps (INFO), and
    ``(after_s, message)`` for the WARNING it logs once if they still run after
    ``after_s`` (None when the bound is too short for that to help). Shared by both
    facades."""
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


def _woken(driver: Driver, answer: Future[Any] | None) -> bool:
    """What ends a wait on the driver: rebalance work, a failure, or the answer the
    caller waits for (a poll with nothing to fetch: the committed-offset lookup's)."""
    return (
        driver.has_app_work or driver.failure is not None or (answer is not None and answer.done())
    )


def _run_until_woken(driver: Driver, done: Callable[[], bool], commit: RevokeCommit | None) -> bool:
    """What ends a wait of ``ConsumerCore.run_until``: what ends any wait (``_woken``, with
    the answer to the commit before revoking that runs), or ``done()``."""
    return _woken(driver, None if commit is None else commit.future) or done()


def _abandon(driver: Driver, fetcher: FetcherLike) -> None:
    """Finalizer of a consumer collected without ``close()``: no LeaveGroup (nobody
    can run the listeners), the coordinator expires the member after its session."""
    log.warning("a Consumer was garbage-collected without close(); stopping its thread")
    driver.stop(0.0)
    fetcher.close()


class GateState(enum.Enum):
    """What a ``ListenerGate`` says of the app work when asked to release it."""

    #: A coroutine callback still runs: everything queued waits for it.
    RUNNING = "running"
    #: The work held behind a finished callback ran and a new hold started.
    HELD = "held"
    #: Nothing holds the work: the core runs what the driver queued.
    FREE = "free"


class ListenerGate(Protocol):
    """Listener callbacks that complete later (the asyncio facade's coroutines, run as
    tasks by ``aio._listener_tasks.ListenerTasks``): while one runs, the app work
    behind it waits, as the sync consumer's work waits for a callback to return."""

    def take(self, item: AppWork) -> bool:
        """Whether the gate took ``item``: queued it behind a running callback, or
        started it as one."""
        ...

    def release(self) -> GateState:
        """End a finished callback and run the work held behind it."""
        ...

    @property
    def has_error(self) -> bool:
        """Whether a callback raised and its error is still to be raised."""
        ...

    def take_error(self) -> Exception | None:
        """The first error a callback raised, once."""
        ...


class ConsumerCore:
    """One consumer's decisions (see the module); the facades add how they wait.

    Not thread-safe: used from the facade's thread (``metrics``, ``assignment``,
    ``records_lag`` may be read from others)."""

    def __init__(
        self,
        cfg: ConsumerConfig,
        fetcher: FetcherLike,
        client: ClientLike,
        *,
        driver_type: type[Driver] = Driver,
        gate: ListenerGate | None = None,
    ) -> None:
        self.config = cfg
        self.fetcher = fetcher
        self._gate = gate
        self._closed = False
        # close() under way: the listener it runs may still commit (Java's pattern of
        # committing in onPartitionsRevoked), so only _closed refuses calls.
        self._closing = False
        self._fatal: CoopConsumerError | None = None
        self._errors: list[Exception] = []
        #: Topics needed that the cluster does not have (``TopicsMissing``).
        self._missing_topics: frozenset[str] = frozenset()
        self.metrics = CoordinatorMetrics()
        self.fetch_metrics = FetchMetrics(lambda: self.records_lag().values())
        self._invoker = ListenerInvoker(None, self.metrics)
        self.api_timeout_s = cfg.default_api_timeout_ms / 1000.0
        # The app work queued behind the commit before revoking while it runs.
        self._held_work: list[AppWork] = []
        try:
            member = member_for(cfg)
            self.rebalance_protocol = member.protocol
            self.driver: Driver = driver_type(
                member,
                client,
                self.metrics,
                request_timeout_ms=cfg.connection.request_timeout_ms,
                wake=getattr(fetcher, "wake", None),
            )
            self.positions = FetchPositions(cfg, fetcher, self.driver, self._errors)
            self.commits = OwnCommits(cfg, fetcher, self.driver, self.positions)
            self.driver.start()
        except BaseException:
            client.close()
            fetcher.close()
            raise
        # A consumer dropped without close() must not leave a thread heartbeating for
        # a member nobody polls: stop the driver when the object is collected.
        self._finalizer = weakref.finalize(self, _abandon, self.driver, fetcher)

    # ------------------------------------------------------------------ state

    @property
    def closed(self) -> bool:
        """Whether the consumer is closed (calls are refused)."""
        return self._closed

    @property
    def fatal(self) -> CoopConsumerError | None:
        """The fatal error, raised by every later call until close."""
        return self._fatal

    @property
    def revoke_commit(self) -> RevokeCommit | None:
        """The commit before revoking while it runs (the work behind it waits)."""
        return self.commits.revoke_commit

    def check_usable(self) -> None:
        """Raise if the consumer is closed or failed."""
        if self._closed:
            raise CoopConsumerError("the consumer is closed")
        if self._fatal is not None:
            raise self._fatal
        failure = self.driver.failure
        if failure is not None:
            self._fatal = failure
            raise failure

    def timeout_or_default(self, timeout: float | None) -> float:
        """``timeout`` seconds, or ``default.api.timeout.ms`` for None."""
        return self.api_timeout_s if timeout is None else max(0.0, float(timeout))

    # ------------------------------------------------------------------ requests

    def subscribe(
        self, wanted: Subscribe, listener: RebalanceListener | RebalanceListenerLike | None
    ) -> None:
        """``Consumer.subscribe`` of a non-empty subscription (``arguments.subscription``)."""
        invoker = ListenerInvoker(listener, self.metrics)
        try:
            self.driver.request(wanted, self.api_timeout_s)
        except IllegalTransition as exc:
            if exc.target is not None or getattr(exc.state, "manual", False) is not True:
                raise
            raise IllegalStateError(
                f"subscribe(): {MIXED_MODES}; partitions are assigned manually "
                f"(call unassign() or unsubscribe() first)"
            ) from None
        self._invoker = invoker

    def prepare_leave(self) -> None:
        """What ``unsubscribe()`` does before it asks to leave: with a manual
        assignment (no group to leave), commit what was consumed (auto-commit)."""
        self.check_usable()
        if self.driver.state.manual:
            self.commits.commit_removed(frozenset(self.positions.assigned))

    def leave(self) -> None:
        """``Consumer.unsubscribe``: leave, blocking on the driver until the member is
        unjoined, then raise what the work left to raise."""
        self.prepare_leave()
        driver = self.driver
        deadline = driver.clock() + self.api_timeout_s
        # Half the time may go to waiting for a rebalance under way to reach the
        # SyncGroup answer, so that the member commits before leaving (its decision).
        leave = LeaveRequested(commit_wait_s=self.api_timeout_s / 2)
        driver.request(leave, max(0.0, deadline - driver.clock()))
        self.run_until(
            lambda: driver.state.unjoined or driver.state.stopped,
            max(0.0, deadline - driver.clock()),
            "leaving the group",
            None,
        )
        self.raise_pending()

    def assign(self, partitions: object, change: AssignmentChange, what: str) -> None:
        """``assign()``, ``incremental_assign()`` and ``incremental_unassign()``."""
        wanted, starts = assignment(partitions)
        if change is AssignmentChange.REMOVE:
            starts = {}
        self.change_assignment(
            AssignRequested(partitions=wanted, starts=starts, change=change), what
        )

    def change_assignment(self, event: AssignRequested, what: str) -> None:
        """``assign()`` and the like: the member's ``AssignRequested``, then its work."""
        self.check_usable()
        assigned = self.positions.assigned
        if self.driver.state.manual:
            if event.change is AssignmentChange.REMOVE:
                self.commits.commit_removed(event.partitions & assigned)
            elif event.change is AssignmentChange.REPLACE:
                self.commits.commit_removed(frozenset(assigned))
        try:
            self.driver.request(event, self.api_timeout_s)
        except IllegalTransition as exc:
            if exc.target is not None:
                raise
            raise IllegalStateError(
                f"{what}: {MIXED_MODES}; the consumer is subscribed "
                f"({exc.state.value}): call unsubscribe() first"
            ) from None
        self.run_app_work()

    def commit(self, offsets: object) -> Future[None]:
        """``Consumer.commit``'s request: ``offsets``, None for the consumed positions."""
        self.check_usable()
        if offsets is None:
            wanted = self.commits.consumed_offsets(frozenset(self.positions.assigned))
        else:
            wanted = commit_offsets(offsets)
        return self.driver.commit(wanted)

    # ------------------------------------------------------------------ records

    def consume(self, count: int, timeout: float | None) -> list[Any]:
        """``Consumer.consume``: run the queued work, then fetch (timeout 0 for the
        asyncio facade, which awaits between calls)."""
        self.check_usable()
        driver = self.driver
        positions = self.positions
        driver.note_poll()
        if driver.has_app_work or positions.unpositioned or self.commits.revoke_commit is not None:
            self.run_app_work()
        if self.commits.auto_commit_due:
            self.commits.auto_commit_async()
        now = driver.clock()
        if self._fatal is not None or self._errors or self._invoker.has_error:
            self.raise_pending()
        deadline = None if timeout is None or timeout < 0 else now + timeout
        fetcher = self.fetcher
        while True:
            if fetcher.client_errors:
                self._report_client_errors()
            fetcher.failures.settle()
            if self.commits.revoke_commit is not None:
                # The revoked partitions are paused; their REVOKED callback runs as soon
                # as the commit is answered, seen at the end of this slice.
                slice_s = REVOKE_COMMIT_SLICE_S
            elif driver.state.quiet and not positions.unpositioned:
                slice_s = _STABLE_SLICE_S
            else:
                slice_s = SLICE_S
            wait = slice_s if deadline is None else max(0.0, min(slice_s, deadline - now))
            if positions.fetchable:
                messages = fetcher.consume(count, wait)
                if messages:
                    self.fetch_metrics.records_consumed(len(messages), driver.clock())
                    fetcher.failures.recovered("records were fetched")
                    return messages
            else:
                fetcher.serve_events()
                # Nothing to fetch yet: wake for rebalance work, a failure, or the
                # start-offset lookup's answer (which starts the fetching; waiting
                # for the slice to end instead delayed the first record by up to 50 ms).
                driver.wait_for(partial(_woken, driver, positions.waiting), wait)
            if (
                driver.has_app_work
                or driver.failure is not None
                or positions.unpositioned
                or self.commits.revoke_commit is not None
            ):
                self.run_app_work()
                self.raise_pending()
            now = driver.clock()
            if deadline is not None and now >= deadline:
                return []
            driver.note_poll()
            if self.commits.auto_commit_due:
                self.commits.auto_commit_async()

    def _report_client_errors(self) -> None:
        """Hand the client errors librdkafka reported to ``error_cb`` (confluent-kafka's
        contract: called on the poll() thread; what it raises is raised from poll()),
        or log them as warnings when no callback is configured."""
        reported = list(self.fetcher.client_errors)
        self.fetcher.client_errors.clear()
        callback = self.config.error_cb
        first: BaseException | None = None
        for error in reported:
            if callback is None:
                # Once per window for a failure that repeats, and not at all when
                # librdkafka's own log line of the same failure was just reported:
                # raw confluent-kafka prints no client error without an error_cb.
                suffix = self.fetcher.failures.admit(
                    failure_key(error.description or str(error)), logging.WARNING
                )
                if suffix is not None:
                    log.warning("client error: %s%s", error, suffix)
                continue
            self.fetcher.failures.note_client_error(error.description or str(error))
            try:
                callback(error)
            except Exception as exc:  # every error is delivered before the first is raised
                first = first or exc
        if first is not None:
            raise first

    # ------------------------------------------------------------------ app work

    def run_app_work(self) -> None:
        """Run the app work the driver queued, in order (behind a coroutine callback
        that runs, if the gate holds one)."""
        gate = self._gate
        if gate is not None:
            state = gate.release()
            if state is GateState.RUNNING:
                return  # what follows the callback waits for it
            if state is GateState.HELD:
                self.flush_starts()  # what the replayed work positioned
                return
        self._check_lookup()
        positions = self.positions
        if (
            positions.unpositioned
            and not (self._closing or self._closed)
            and self.driver.clock() >= positions.next_retry
        ):
            positions.locate(frozenset(positions.unpositioned))
        while True:
            if self.commits.revoke_commit is not None and not self.commits.step_revoke():
                break  # the commit before revoking still runs: what follows it waits
            work = self._held_work or self.driver.take_app_work()
            self._held_work = []
            if not work:
                break
            for index, item in enumerate(work):
                self.do(item)
                if self.commits.revoke_commit is not None:
                    self._held_work = work[index + 1 :]
                    break
        self.flush_starts()
        if self._fatal is None and self.driver.failure is not None:
            self._fatal = self.driver.failure

    def run_held_work(self) -> None:
        """Run the queued app work now (the asyncio facade, after a coroutine callback
        finished), and raise what it left to raise (``poll()``'s rules)."""
        self.check_usable()
        self.run_app_work()
        gate_error = self._gate is not None and self._gate.has_error
        if self._fatal is not None or self._errors or gate_error:
            self.raise_pending()

    def hold(self, work: list[AppWork]) -> bool:
        """Queue ``work`` behind the commit before revoking if one runs; True if it did
        (the gate's replay stops there)."""
        if self.commits.revoke_commit is None:
            return False
        self._held_work = work + self._held_work
        return True

    def do(self, item: AppWork) -> None:
        """Carry out one item of app work (unless the gate takes it)."""
        if self._gate is not None and self._gate.take(item):
            return
        if isinstance(item, InvokeListener):
            try:
                self._invoker.invoke(item.kind, item.partitions)
                if item.kind is ListenerKind.REVOKED:
                    # Java drops revoked partitions right after onPartitionsRevoked: no
                    # record of them may be returned once the callback ran (the member's
                    # Unassign follows, after the driver saw ListenerDone).
                    self.drop(item.partitions)
            finally:
                # KIP-429: a callback that raised is done all the same.
                self._submit_done(item)
        elif isinstance(item, Assign):
            self.positions.add(item.partitions, item.starts, closing=self._closing or self._closed)
        elif isinstance(item, Unassign):
            self.drop(item.partitions)
        elif isinstance(item, CommitBeforeRevoke):
            self.commits.start_revoke(item.partitions)
        elif isinstance(item, AutoCommitDue):
            self.commits.auto_commit_due = True
        elif isinstance(item, TopicsMissing):
            self._report_missing_topics(item.topics)
        elif isinstance(item, ReportError):
            self._errors.append(item.error)
        elif isinstance(item, Fatal) and self._fatal is None:
            self._fatal = item.error

    def listener_done(self, item: InvokeListener) -> None:
        """A callback the gate ran is over: as after a sync callback, revoked partitions
        are dropped and the member is told (``ListenerDone``)."""
        if CallbackKind.of(item.kind) is CallbackKind.REVOKED:
            self.drop(item.partitions)
        self._submit_done(item)

    def _submit_done(self, item: InvokeListener) -> None:
        if self.driver.failure is None:
            self.driver.submit(ListenerDone(invocation_id=item.invocation_id, kind=item.kind))

    def _report_missing_topics(self, topics: frozenset[str]) -> None:
        """Topics this consumer needs that the cluster does not have (issue 35): to
        ``error_cb`` as ``UNKNOWN_TOPIC_OR_PARTITION`` (what it raises is raised from
        ``poll()``), else a warning; counted in ``metrics()`` as ``missing-topics``.
        The consumer keeps waiting for them."""
        before, self._missing_topics = self._missing_topics, topics
        self.metrics.set_missing_topics(len(topics))
        if not topics:
            if before:
                log.warning("topic(s) %s exist now", ", ".join(sorted(before)))
            return
        names = ", ".join(sorted(topics))
        bootstrap = ",".join(f"{host}:{port}" for host, port in self.config.bootstrap_servers)
        error = error_codes.to_exception(
            error_codes.UNKNOWN_TOPIC_OR_PARTITION,
            message=(
                f"topic(s) {names} not found in the cluster at {bootstrap}: "
                f"a typo, or not created yet; still waiting for them (said again every "
                f"{MISSING_TOPICS_REPORT_S:g} s while they are missing)"
            ),
        )
        callback = self.config.error_cb
        if callback is None:
            log.warning("%s", error)
        else:
            callback(error)

    def flush_starts(self) -> None:
        """Hand the known start offsets to the fetcher; a partition being revoked
        stays paused while its commit before revoking runs."""
        # A lookup answered while the commit before revoking runs: a partition being
        # revoked must not return records its commit did not take.
        self.commits.hold_started(self.positions.flush())

    def drop(self, partitions: frozenset[TopicPartition]) -> None:
        """The partitions are no longer this consumer's."""
        self.commits.forget(partitions)
        self.positions.drop(partitions)

    def _check_lookup(self) -> None:
        if self.positions.check_lookup():
            self.flush_starts()

    # ------------------------------------------------------------------ commits

    # ------------------------------------------------------------------ errors

    @property
    def has_pending_error(self) -> bool:
        """Whether ``raise_pending`` has something to raise from the sync work."""
        return self._fatal is not None or bool(self._errors) or self._invoker.has_error

    def raise_pending(self) -> None:
        """Raise what the last app work left to raise: the fatal error, else the first
        callback error, else the first reported error."""
        if self._fatal is not None:
            raise self._fatal
        error = self._gate.take_error() if self._gate is not None else None
        if error is None:
            error = self._invoker.take_error()
        if error is None and self._errors:
            error = self._errors.pop(0)
        if error is not None:
            raise error

    def take_listener_error(self) -> Exception | None:
        """The first callback error not raised yet (close() raises it at the end)."""
        error = self._invoker.take_error()
        gate_error = self._gate.take_error() if self._gate is not None else None
        return error or gate_error

    # ------------------------------------------------------------------ close

    def begin_close(self) -> bool:
        """Start closing; False if the consumer is closed or closing already."""
        if self._closed or self._closing:
            return False
        self._closing = True
        self._finalizer.detach()
        return True

    def run_until(
        self,
        done: Callable[[], bool],
        timeout_s: float,
        what: str,
        notice: tuple[float, str] | None,
    ) -> None:
        """Run queued app work until ``done()`` (a published driver condition),
        blocking on the driver between; log ``notice`` (``(after_s, message)``) at
        WARNING if it still runs after after_s."""
        driver = self.driver
        started = driver.clock()
        deadline = started + timeout_s
        while True:
            self.run_app_work()
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
                partial(_run_until_woken, driver, done, self.commits.revoke_commit),
                min(remaining, 0.5),
            )

    def finish_close(self, release: Callable[[], None] | None = None) -> None:
        """The consumer is closed: nothing is assigned, ``release`` runs (the asyncio
        facade's records wake-up), the fetcher is closed."""
        self._closed = True
        self.positions.clear()
        if release is not None:
            release()
        self.fetcher.close()

    # ------------------------------------------------------------------ reading

    def position(self, partitions: Iterable[object]) -> dict[TopicPartition, int | None]:
        """``Consumer.position``."""
        self.check_usable()
        return self.positions.position(tps(partitions))

    def seek(self, partition: object, offset: int) -> None:
        """``Consumer.seek``."""
        self.check_usable()
        tp = tp_of(partition)
        self.positions.seek(tp, start_offset(tp, offset, "seek offset"))

    def seek_all(self, partitions: Iterable[object], offset: int) -> None:
        """``Consumer.seek_to_beginning`` and ``seek_to_end``."""
        self.check_usable()
        self.positions.seek_all(tps(partitions), offset)

    def pause(self, partitions: Iterable[object], paused: bool) -> None:
        """``Consumer.pause`` (``paused``) and ``resume``."""
        self.check_usable()
        if paused:
            self.positions.pause(tps(partitions))
        else:
            self.positions.resume(tps(partitions))

    def watermarks(self, partition: object, timeout: float | None, cached: bool) -> tuple[int, int]:
        """``Consumer.get_watermark_offsets``."""
        self.check_usable()
        return self.fetcher.watermarks(
            tp_of(partition), self.timeout_or_default(timeout), cached=bool(cached)
        )

    def lag(self, partition: object, timeout: float | None) -> int | None:
        """``Consumer.lag``: the high watermark minus the position."""
        tp = tp_of(partition)
        position = self.position([tp])[tp]
        if position is None:
            return None
        _, high = self.watermarks(tp, timeout, False)
        return max(0, high - position)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout: float | None
    ) -> dict[TopicPartition, int | None]:
        """``Consumer.offsets_for_times``."""
        self.check_usable()
        asked: dict[TopicPartition, int] = {}
        for key, ts in timestamps.items():
            if not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts <= MAX_OFFSET:
                raise ConfigurationError(
                    f"offsets_for_times: the timestamp of {key} must be an int >= 0 and "
                    f"<= {MAX_OFFSET} (ms since the epoch): {ts!r}"
                )
            asked[tp_of(key)] = ts
        if not asked:
            return {}
        return self.fetcher.offsets_for_times(asked, self.timeout_or_default(timeout))

    def group_metadata(self) -> ConsumerGroupMetadata:
        """``Consumer.group_metadata``: the driver's, once the installed confluent-kafka
        is known to write the same format."""
        from .._io._txn_producer import verify_group_metadata_format  # loads librdkafka

        verify_group_metadata_format()
        return self.driver.group_metadata

    def records_lag(self) -> dict[TopicPartition, int]:
        """``Consumer.records_lag`` (empty once closed)."""
        if self._closed:
            return {}
        return self.positions.records_lag()
