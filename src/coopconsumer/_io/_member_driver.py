"""The driver thread: runs a ``GroupMember`` against a ``KafkaClient`` (docs/architecture.md).

One loop: drain the commands the application thread queued, poll the wire client until
the member's next deadline, turn completed requests into ``ResponseReceived`` /
``RequestFailed``, feed ``Tick`` when a deadline passes, call ``member.handle`` and
execute the effects. It never branches on protocol state and reads no group answer:
``Send`` and ``FindCoordinator`` go to a socket (a version-dependent query is built at
the negotiated version by ``_driver_calls.VersionedCalls``) and their answers go back
to the member, which reads them;
``AddCoordinator`` opens the coordinator's connection and ``AddBrokers`` makes the
brokers a Metadata answer named reachable (the member times its metadata refreshes and
reads their answers; docs/architecture.md, "Threads and what crosses between them");
listener and fetcher work (``InvokeListener``, ``Assign``, ``Unassign``,
``CommitBeforeRevoke``, ``AutoCommitDue``, ``TopicsMissing``, ``ReportError``,
``Fatal``) is queued *in order* for the thread that calls ``poll()``, and
``CommitDone`` completes the caller's future.

The driver thread is the only one that touches the client (it closes it on exit). An
exception from ``handle()`` or from executing an effect ends the loop and is queued as a
``Fatal`` so that ``poll()`` raises it; the thread never dies silently.

Imports the coordinator, the wire client and the metrics registry; never
``confluent_kafka`` (the fetcher is driven by the ``poll()`` thread, not from here).
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import Any, ClassVar, Final

from .._errors import CoopConsumerError, ProtocolError, RequestTimeoutError
from .._member import (
    AddBrokers,
    AddCoordinator,
    Assign,
    AutoCommitDue,
    CommitBeforeRevoke,
    CommitDone,
    CommitRequested,
    CommittedOffsetsDone,
    CommittedOffsetsRequested,
    ConnectionLost,
    CoordinatorFound,
    Effect,
    Fatal,
    FindCoordinator,
    GroupMember,
    IllegalTransition,
    InvokeListener,
    Log,
    MemberState,
    MetadataNeeded,
    Observe,
    OffsetAndMetadata,
    PollCalled,
    ReportError,
    RequestFailed,
    ResponseReceived,
    RetriedCommitRequested,
    Send,
    Tick,
    TopicsMissing,
    Unassign,
)
from .._member.kip848 import ConsumerGroupMember, ConsumerMemberState
from .._metrics import CoordinatorMetrics
from .._protocol._schema import Request
from .._protocol.queries import FindCoordinatorQuery, Query
from .._types import ConsumerGroupMetadata, TopicPartition
from ._driver_calls import ClientLike, VersionedCalls, as_error, describe, trace
from ._future import PendingRequest
from ._offset_lookup import OffsetLookup

__all__ = [
    "APP_WORK_TYPES",
    "AppWork",
    "ClientLike",
    "CommittedOffsets",
    "Driver",
    "DriverFailedError",
    "forward_observation",
]

log = logging.getLogger("coopconsumer.driver")

#: Work the driver hands to the ``poll()`` thread, in the order the member emitted it.
AppWork = (
    InvokeListener
    | Assign
    | Unassign
    | CommitBeforeRevoke
    | AutoCommitDue
    | TopicsMissing
    | ReportError
    | Fatal
)

APP_WORK_TYPES: Final = (
    InvokeListener,
    Assign,
    Unassign,
    CommitBeforeRevoke,
    AutoCommitDue,
    TopicsMissing,
    ReportError,
    Fatal,
)
#: Longest sleep of the loop: bounds the delay of anything not announced by wakeup().
_MAX_WAIT_S: Final = 1.0
#: Shortest sleep of the loop (poll returns early anyway when something happens).
_MIN_WAIT_S: Final = 0.001
#: How often ``poll()`` wakes the driver to report itself. The flag it sets is read
#: on every loop anyway (before a Tick, so the max.poll.interval.ms deadline sees a
#: recent poll); the wakeup only matters to a member whose poll interval expired, which
#: rejoins on the next poll at most this much later. 0.1 s made an idle member's driver
#: loop 10 times a second (issue 15: idle CPU).
_POLL_WAKEUP_S: Final = 1.0
#: Sleep while a lookup waits for a connection to finish its ApiVersions handshake.
_CONNECT_POLL_S: Final = 0.02


def forward_observation(metrics: CoordinatorMetrics, effect: Observe) -> None:
    """Hand one ``Observe`` effect to ``metrics`` unchanged, latency included.

    The member's latency is the authority: for ``REBALANCE_COMPLETED`` it is the
    member's own measurement of the rebalance (which knows when a rebalance was
    abandoned and a new one started), not the metrics' guess from the first
    ``REBALANCE_STARTED`` they saw. A mismatch is logged, never raised: metrics must
    not stop the group member.
    """
    try:
        metrics.observe(effect.event, effect.now, effect.latency_s)
    except ValueError as exc:
        log.warning("metrics observation %s dropped: %s", effect.event, exc)


class DriverFailedError(CoopConsumerError):
    """The driver thread stopped on an unexpected error (a library bug or a broken
    client); the consumer cannot continue and must be closed. ``__cause__`` is the
    original exception."""


#: Offsets as ``Driver.fetch_committed`` answers them (None: nothing committed).
CommittedOffsets = dict[TopicPartition, OffsetAndMetadata | None]


class Driver:
    """Runs one ``GroupMember`` on a background thread.

    Thread-safe methods (for the application thread): ``start``, ``submit``,
    ``request``, ``note_poll``, ``commit``, ``commit_retried``, ``fetch_committed``,
    ``take_app_work``, ``wait_for``, ``wait_answer``, ``clock``, ``stop`` and the
    read-only properties. Everything else runs on the
    driver thread.
    """

    #: The protected surface the asyncio host's ``aio._loop_driver.LoopDriver`` (this
    #: class's step run as an event-loop task) overrides and uses. Renaming one, or
    #: changing what it means, changes aio too; tests/aio/test_aio_hooks.py checks the
    #: list against both sides. docs/architecture.md, "The asyncio host's hooks".
    _ASYNCIO_HOST_SURFACE: ClassVar[frozenset[str]] = frozenset(
        {
            # overridden: waiting and the thread's life become the loop's
            "_answered",
            "_execute_all",
            "_feed",
            "alive",
            "start",
            "stop",
            "wait_answer",
            "wait_for",
            # the step and its parts
            "_once",
            "_drain_commands",
            "_die",
            # state
            "_client",
            "_failure",
            "_state",
            "_stopping",
        }
    )

    def __init__(
        self,
        member: GroupMember | ConsumerGroupMember,
        client: ClientLike,
        metrics: CoordinatorMetrics,
        *,
        request_timeout_ms: int,
        clock: Callable[[], float] = time.monotonic,
        name: str = "coopconsumer-driver",
        wake: Callable[[], None] | None = None,
    ) -> None:
        self._member = member
        # Cuts short the poll() thread's wait in librdkafka's consume() when work for
        # it is queued or a commit or lookup it waits for completes (docs/architecture.md,
        # "Threads and what crosses between them").
        self._wake = wake
        self._client = client
        self._metrics = metrics
        self._request_timeout_s = request_timeout_ms / 1000.0
        self._clock = clock
        self._commands: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._app_work: collections.deque[AppWork] = collections.deque()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._stopping = False
        self._failure: CoopConsumerError | None = None
        self._poll_seen = False
        self._last_wakeup = 0.0
        # Driver-thread state (I/O bookkeeping only, no protocol state).
        self._answers: list[tuple[int, PendingRequest[Any]]] = []
        self._calls = VersionedCalls(client, clock)
        self._commit_futures: set[Future[None]] = set()
        self._fetch_futures: set[Future[CommittedOffsets]] = set()
        self._offset_futures: set[Future[dict[TopicPartition, int]]] = set()
        # The coordinator connection (AddCoordinator's node) and how many of its
        # connections had been lost when last looked at (ConnectionLost).
        self._coordinator_node: int | None = None
        self._coordinator_losses = 0
        # Inputs that answer an effect (CoordinatorFound for AddCoordinator), fed once
        # the batch that asked for them has been executed.
        self._later: collections.deque[object] = collections.deque()
        # Published for the application thread (replaced, never mutated).
        self._state = member.state
        self._group_metadata = member.group_metadata
        self._owned = member.owned_partitions
        self._protocol_name = member.protocol_name
        self._is_leader = member.is_leader

    # ------------------------------------------------------------------ app-thread API

    @property
    def state(self) -> MemberState | ConsumerMemberState:
        """The member's state after the last input the driver fed it (a KIP-848
        member's states are ``ConsumerMemberState``)."""
        return self._state

    @property
    def group_metadata(self) -> ConsumerGroupMetadata:
        """The member's ``ConsumerGroupMetadata`` after the last input."""
        return self._group_metadata

    @property
    def owned_partitions(self) -> frozenset[TopicPartition]:
        """The member's owned partitions after the last input."""
        return self._owned

    @property
    def protocol_name(self) -> str | None:
        """The assignor the coordinator chose at the member's last join (None before)."""
        return self._protocol_name

    @property
    def is_leader(self) -> bool:
        """Whether the member led its last join."""
        return self._is_leader

    @property
    def failure(self) -> CoopConsumerError | None:
        """The error that stopped the driver thread, None while it runs normally."""
        return self._failure

    @property
    def alive(self) -> bool:
        """Whether the driver thread is running."""
        return self._thread.is_alive()

    @property
    def has_app_work(self) -> bool:
        """Whether work for the ``poll()`` thread is queued (a cheap, lock-free peek)."""
        return bool(self._app_work)

    def start(self) -> None:
        """Start the driver thread."""
        self._thread.start()

    def submit(self, event: object) -> None:
        """Feed ``event`` (a coordinator input) to the member on the driver thread.
        Fire and forget: an error it causes stops the driver (see ``failure``)."""
        self._command(lambda: self._feed(event))

    def request(self, event: object, timeout_s: float) -> None:
        """Feed ``event`` and wait until the member processed it; re-raises what
        ``handle`` raised for it (``IllegalTransition`` leaves the member unchanged,
        so that error is the caller's, not fatal). ``RequestTimeoutError`` on timeout."""
        future: Future[None] = Future()

        def run() -> None:
            try:
                effects = self._member.handle(event, self._clock())
            except IllegalTransition as exc:
                future.set_exception(exc)
                if exc.target is not None:
                    raise  # a move its row forbids: the member is broken, stop
                return
            except CoopConsumerError as exc:
                future.set_exception(exc)
                return
            # Executed (state published, app work queued) before the caller wakes, so
            # what it reads next already reflects the input (assignment() after
            # assign()). If executing fails, the driver stops and _wait raises that.
            self._execute_all(effects)
            future.set_result(None)

        self._command(run)
        self._wait(future, timeout_s, "the consumer's background thread")

    def note_poll(self) -> None:
        """Record that the application polled (``PollCalled`` on the next loop).

        Called on every ``poll()``: a flag write, plus a wakeup at most every
        ``_POLL_WAKEUP_S``, so that polling stays O(1) and cheap and an idle member's
        driver sleeps until its next deadline (see ``_POLL_WAKEUP_S``)."""
        self._poll_seen = True
        now = self._clock()
        if now - self._last_wakeup >= _POLL_WAKEUP_S:
            self._last_wakeup = now
            self._client.wakeup()

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Future[None]:
        """Commit ``offsets`` with the member's generation; the future completes with
        the coordinator's ``CommitDone`` (None or the typed error)."""
        future: Future[None] = Future()

        def run() -> None:
            self._commit_futures.add(future)
            self._feed(CommitRequested(offsets=offsets, token=future))

        self._command(run, future)
        return future

    def commit_retried(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_s: float, purpose: str
    ) -> Future[None]:
        """Commit ``offsets``, the member retrying what a retry can cure until
        ``timeout_s`` (``RetriedCommitRequested``); the future completes with its one
        ``CommitDone``."""
        future: Future[None] = Future()
        request = RetriedCommitRequested(
            offsets=offsets, token=future, timeout_s=timeout_s, purpose=purpose
        )

        def run() -> None:
            self._commit_futures.add(future)
            self._feed(request)

        self._command(run, future)
        return future

    def clock(self) -> float:
        """The driver's clock (monotonic seconds): the application thread's waits on
        the driver (a ``poll()`` timeout, ``close()``'s bound) count on it too."""
        return self._clock()

    def fetch_committed(
        self, partitions: Iterable[TopicPartition], timeout_s: float
    ) -> Future[CommittedOffsets]:
        """The group's committed offsets of ``partitions``: the member's OffsetFetch
        (retried on the errors it retries until ``timeout_s``), as its
        ``CommittedOffsetsDone`` answers them."""
        request = CommittedOffsetsRequested(
            partitions=frozenset(partitions), token=Future(), timeout_s=timeout_s
        )
        future: Future[CommittedOffsets] = request.token  # type: ignore[assignment]

        def run() -> None:
            self._fetch_futures.add(future)
            self._feed(request)

        self._command(run, future)
        return future

    def list_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timestamp: int,
        *,
        read_committed: bool,
        timeout_s: float,
    ) -> Future[dict[TopicPartition, int]]:
        """The offsets at ``timestamp`` (``queries.EARLIEST_TIMESTAMP`` or
        ``LATEST_TIMESTAMP``) of ``partitions``, asked of their leaders with ListOffsets
        (``_offset_lookup.OffsetLookup``). Partitions no leader answered for in
        ``timeout_s`` are left out; it fails only when the driver does."""
        future: Future[dict[TopicPartition, int]] = Future()
        wanted = frozenset(partitions)

        def finish(offsets: dict[TopicPartition, int]) -> None:
            self._offset_futures.discard(future)
            if not future.done():
                future.set_result(offsets)
                self._answered()

        def run() -> None:
            self._offset_futures.add(future)
            OffsetLookup(
                self._calls,
                self._client,
                self._clock,
                partitions=wanted,
                timestamp=timestamp,
                read_committed=read_committed,
                timeout_s=timeout_s,
                done=finish,
            ).start()

        self._command(run, future)
        return future

    def take_app_work(self) -> list[AppWork]:
        """Remove and return the queued ``poll()``-thread work, oldest first."""
        with self._cond:
            work = list(self._app_work)
            self._app_work.clear()
            return work

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``predicate()`` (checked whenever the driver publishes app work
        or a new state) or ``timeout_s``; returns the predicate's last value."""
        with self._cond:
            return self._cond.wait_for(predicate, timeout=max(0.0, timeout_s))

    def stop(self, timeout_s: float) -> bool:
        """Stop the loop, close the client (on the driver thread) and join the thread.

        Returns whether the thread ended within ``timeout_s``. Idempotent."""
        if not self._thread.is_alive():
            if self._thread.ident is None:
                self._client.close()  # never started: nobody else will close it
            return True

        def run() -> None:
            self._stopping = True

        self._command(run)
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _command(self, fn: Callable[[], None], future: Future[Any] | None = None) -> None:
        if self._failure is not None and future is not None:
            future.set_exception(self._failure)
            return
        self._commands.put(fn)
        self._client.wakeup()

    def _wait(self, future: Future[None], timeout_s: float, what: str) -> None:
        self.wait_answer(future, timeout_s, f"{what} did not answer within {timeout_s:.1f}s")

    def wait_answer(self, future: Future[Any], timeout_s: float, timeout_message: str) -> Any:
        """The outcome of ``future`` (a command of this driver), waited for from another thread.

        Raises the driver's failure if its thread stopped, and RequestTimeoutError with
        ``timeout_message`` when nothing answered within ``timeout_s``. The future's own
        error is raised as it is, also when it is itself a RequestTimeoutError.
        """
        deadline = self._clock() + timeout_s
        while True:
            remaining = deadline - self._clock()
            # Completion first, outcome after: a future whose error is a TimeoutError must
            # not be taken for one that has not answered yet.
            done, _ = wait_futures((future,), timeout=max(0.0, min(remaining, 0.1)))
            if done:
                return future.result()
            if self._failure is not None:
                raise self._failure from None
            if remaining <= 0:
                raise RequestTimeoutError(timeout_message)

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._once()
        except BaseException as exc:  # the thread must never die silently
            self._die(exc)
        finally:
            try:
                self._client.close()
            except Exception:
                log.exception("closing the wire client failed")
            with self._cond:
                self._cond.notify_all()

    def _once(self) -> None:
        self._drain_commands()
        if self._stopping:
            return
        if self._poll_seen:
            self._poll_seen = False
            self._feed(PollCalled())
        now = self._clock()
        deadline = self._member.next_deadline
        if deadline is not None and now >= deadline:
            self._feed(Tick())
            deadline = self._member.next_deadline
        self._calls.step(now)
        wait = _MAX_WAIT_S if deadline is None else min(_MAX_WAIT_S, deadline - now)
        if self._calls.connecting:
            wait = min(wait, _CONNECT_POLL_S)
        # A floor of 1 ms: a deadline that a Tick did not move must not spin the loop.
        self._client.poll(max(_MIN_WAIT_S, wait))
        self._deliver_answers()
        self._check_coordinator_connection()

    def _check_coordinator_connection(self) -> None:
        """Feed ``ConnectionLost`` when the coordinator's connection closed on an error
        since the last look, even with nothing of the member's in flight on it."""
        node = self._coordinator_node
        if node is None:
            return
        losses = self._client.connection_losses(node)
        if losses != self._coordinator_losses:
            self._coordinator_losses = losses
            self._feed(ConnectionLost(node_id=node))

    def _drain_commands(self) -> None:
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            command()

    def _deliver_answers(self) -> None:
        answers, self._answers = self._answers, []
        for request_id, pending in answers:
            error = pending.exception()
            if trace.isEnabledFor(logging.DEBUG):
                what = (
                    f"{type(pending.result()).__name__} "
                    + describe(pending.result(), ("error_code", "generation_id", "leader"))
                    if error is None
                    else f"failed: {error!r}"
                )
                trace.debug("<- #%d %s (member %s)", request_id, what, self._member.member_id)
            if error is None:
                self._feed(ResponseReceived(request_id=request_id, response=pending.result()))
            else:
                self._feed(RequestFailed(request_id=request_id, error=as_error(error)))
        self._calls.deliver()

    def _feed(self, event: object) -> None:
        """Hand ``event`` to the member and execute its effects (hook of the asyncio
        host's ``LoopDriver``, which wakes the loop's poller after it)."""
        effects = self._member.handle(event, self._clock())
        self._execute_all(effects)

    def _execute_all(self, effects: list[Effect]) -> None:
        """Execute the member's effects (hook of the asyncio host's ``LoopDriver``,
        which publishes the app work they queue to the loop)."""
        queued: list[AppWork] = []
        for effect in effects:
            if isinstance(effect, APP_WORK_TYPES):
                queued.append(effect)
            else:
                self._execute(effect)
        member = self._member
        self._metrics.set_assigned_partitions(len(member.owned_partitions))
        with self._cond:
            self._app_work.extend(queued)
            self._state = member.state
            self._group_metadata = member.group_metadata
            self._owned = member.owned_partitions
            self._protocol_name = member.protocol_name
            self._is_leader = member.is_leader
            self._cond.notify_all()
        if queued and self._wake is not None:
            self._wake()
        while self._later:
            self._feed(self._later.popleft())

    def _execute(self, effect: Effect) -> None:
        if isinstance(effect, Send):
            self._send(effect)
        elif isinstance(effect, Observe):
            self._observe(effect)
        elif isinstance(effect, Log):
            log.log(effect.level, "%s", effect.message)
        elif isinstance(effect, CommitDone):
            self._complete_commit(effect)
        elif isinstance(effect, CommittedOffsetsDone):
            self._complete_fetch(effect)
        elif isinstance(effect, FindCoordinator):
            self._start_lookup(effect)
        elif isinstance(effect, AddCoordinator):
            # Group traffic gets a connection of its own: the coordinator parks
            # JoinGroup/SyncGroup for up to the rebalance timeout, and a request queued
            # behind it on a shared connection would time out and take it down (Java
            # does the same).
            node_id = self._client.add_coordinator(effect.node_id, effect.host, effect.port)
            self._coordinator_node = node_id
            self._coordinator_losses = self._client.connection_losses(node_id)
            self._later.append(CoordinatorFound(node_id=node_id))
        elif isinstance(effect, MetadataNeeded):
            self._ask(
                effect.request_id,
                effect.query,
                self._client.least_loaded_node,
                self._request_timeout_s,
            )
        elif isinstance(effect, AddBrokers):
            for broker in effect.brokers:
                self._client.add_broker(broker.node_id, broker.host, broker.port)
        else:  # pragma: no cover - every Effect type is listed above or app work
            raise TypeError(f"unknown effect {effect!r}")

    def _observe(self, effect: Observe) -> None:
        forward_observation(self._metrics, effect)

    def _die(self, exc: BaseException) -> None:
        error = (
            exc
            if isinstance(exc, CoopConsumerError)
            else DriverFailedError(f"the consumer's background thread failed: {exc!r}")
        )
        if error is not exc:
            error.__cause__ = exc
        # A typed error (authentication refused, ...) is raised from poll() with its
        # own message: one line here, not a traceback of the driver's stack, which says
        # nothing to the user (issue 35). Anything else is a bug: keep the traceback.
        expected = isinstance(exc, CoopConsumerError) and not isinstance(exc, ProtocolError)
        log.error("driver thread stopped: %s", error, exc_info=None if expected else exc)
        self._failure = error
        for commit in self._commit_futures:
            if not commit.done():
                commit.set_exception(error)
        for fetch in self._fetch_futures:
            if not fetch.done():
                fetch.set_exception(error)
        for lookup in self._offset_futures:
            if not lookup.done():
                lookup.set_exception(error)
        # Anything still queued is abandoned: fail the futures of queued commands too.
        while True:
            try:
                self._commands.get_nowait()
            except queue.Empty:
                break
        with self._cond:
            self._app_work.append(Fatal(error=error))
            self._cond.notify_all()

    # ------------------------------------------------------------------ effects

    def _send(self, effect: Send) -> None:
        request_id = effect.request_id
        if not isinstance(effect.request, Request):
            query: Query = effect.request  # type: ignore[assignment]
            node_id = effect.node_id
            timeout_s = self._request_timeout_s if effect.timeout_s is None else effect.timeout_s
            self._ask(request_id, query, lambda: node_id, timeout_s)
            return
        timeout_ms = None if effect.timeout_s is None else effect.timeout_s * 1000.0
        request = effect.request
        pending = self._client.send(effect.node_id, request, timeout_ms=timeout_ms)
        if trace.isEnabledFor(logging.DEBUG):
            trace.debug(
                "-> #%d %s %s",
                request_id,
                type(request).__name__,
                describe(request, ("member_id", "generation_id")),
            )
        pending.add_done_callback(lambda p: self._answers.append((request_id, p)))

    def _ask(
        self,
        request_id: int,
        query: Query,
        node: Callable[[], int | None],
        timeout_s: float,
    ) -> None:
        """Send ``query`` as a versioned call whose answer (with its version) or
        failure goes back to the member as the answer to ``request_id``."""

        def on_answer(response: object, version: int) -> None:
            trace.debug("<- #%d %s v%d", request_id, type(response).__name__, version)
            self._feed(
                ResponseReceived(request_id=request_id, response=response, api_version=version)
            )

        def on_error(error: CoopConsumerError) -> None:
            self._feed(RequestFailed(request_id=request_id, error=error))

        self._calls.add(query, node, timeout_s, on_answer, on_error)

    def _complete_fetch(self, effect: CommittedOffsetsDone) -> None:
        future = effect.token
        if not isinstance(future, Future):
            raise TypeError(
                f"CommittedOffsetsDone for a token the driver did not issue: {future!r}"
            )
        self._fetch_futures.discard(future)
        if future.done():
            return
        if effect.error is None:
            future.set_result(dict(effect.offsets))
        else:
            future.set_exception(effect.error)
        if self._wake is not None:
            self._wake()

    def _answered(self) -> None:
        """A future the application may wait on completed outside the member's
        effects (``list_offsets``): wake whoever waits (hook of the asyncio host's
        ``LoopDriver``, which wakes the loop's poller)."""
        with self._cond:
            self._cond.notify_all()
        if self._wake is not None:
            self._wake()

    def _complete_commit(self, effect: CommitDone) -> None:
        future = effect.token
        if not isinstance(future, Future):
            raise TypeError(f"CommitDone for a token the driver did not issue: {future!r}")
        self._commit_futures.discard(future)
        if future.done():
            return
        if effect.error is None:
            future.set_result(None)
        else:
            future.set_exception(effect.error)
        if self._wake is not None:
            self._wake()

    # ------------------------------------------------------------------ FindCoordinator

    def _start_lookup(self, effect: FindCoordinator) -> None:
        query = FindCoordinatorQuery(key=effect.group_id)
        self._ask(effect.request_id, query, self._client.least_loaded_node, self._request_timeout_s)
