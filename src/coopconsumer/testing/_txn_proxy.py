"""A Kafka-semantics proxy in front of Tansu that supplies the transactional behaviour
Tansu lacks, and fault injection for it (docs/testing.md, "Transactions and
exactly-once").

Tansu listens on a private port and advertises the proxy's, so every client connection
(bootstrap, partition leader, group and transaction coordinator) goes through it. Each
client connection gets its own connection to Tansu and three threads: one reads
requests and forwards them (or has them answered), one reads Tansu's answers, one writes
answers back in request order, after any injected delay. ``ProxyCore`` (``_txn_core``)
makes every decision; this module only moves bytes and runs the two jobs that need their
own round trips to Tansu:

* read_committed Fetch answers: the proxy reads the partition's log itself
  (read_uncommitted, from where it last stopped) into a ``PartitionTxnIndex``
  (``_txn_log``) and fills ``AbortedTransactions`` as Kafka does, so librdkafka drops the
  records of aborted transactions;
* transaction timeouts: a timer aborts transactions open longer than their
  ``transaction.timeout.ms`` with an EndTxn of its own.

The Fetch version clients may use is capped at 12 (in the ApiVersions answers) so that
topics are named, not numbered. Imports the standard library, attrs,
``coopconsumer._protocol``, ``coopconsumer._errors`` and the sibling testing modules.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, ClassVar, Final

import attrs

from .._errors import ConfigurationError, ProtocolError
from .._protocol import Request, Response, decode_response, encode_request, encode_response
from ._broker import BrokerKind, BrokerStartupError, EmbeddedBroker
from ._ports import split_address
from ._readiness_probe import wait_until_answering
from ._tansu_broker import _TansuBroker, start_tansu
from ._txn_core import (
    DROP_CONNECTION,
    Answer,
    Drop,
    Forward,
    ProxyCore,
    RequestContext,
    TimedOutTransaction,
    TxnOffsetCommitRecord,
)
from ._txn_log import AbortedTxn, PartitionTxnIndex, UnreadableBatchError, iter_batches
from ._txn_messages import (
    AbortedTransaction,
    EndTxnRequest,
    EndTxnResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
)

__all__ = ["ProxyStats", "TransactionProxy", "TransactionalBroker", "start_transactional_tansu"]

log = logging.getLogger(__name__)

_SIZE: Final = struct.Struct(">i")
_MAX_FRAME: Final = 100 * 1024 * 1024
_SCAN_VERSION: Final = 12
_SCAN_BYTES: Final = 4 * 1024 * 1024
_END_TXN_VERSION: Final = 1
_TIMER_PERIOD_S: Final = 0.05
_PRODUCE_DRAIN_S: Final = 5.0
#: How long answers Tansu still owes a closed client connection are waited for.
_DRAIN_S: Final = 10.0
_FETCH: Final = 1


class _Closed(Exception):
    pass


def _read_frame(reader: IO[bytes]) -> bytes:
    head = reader.read(4)
    if len(head) < 4:
        raise _Closed
    (size,) = _SIZE.unpack(head)
    if not 0 < size <= _MAX_FRAME:
        raise _Closed
    body = reader.read(size)
    if len(body) < size:
        raise _Closed
    return body


def _hang_up(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


@attrs.frozen(kw_only=True)
class ProxyStats:
    """Counters of a :class:`TransactionProxy` (a snapshot)."""

    connections: int
    open_connections: int
    requests: Mapping[int, int]
    faults_applied: Mapping[int, int]
    fetches_rewritten: int
    log_reads: int
    #: The longest a request now waits for Tansu's answer, and its API key: a Fetch
    #: waits up to its ``max_wait_ms``; anything much longer is a wedged broker.
    oldest_unanswered_s: float = 0.0
    oldest_unanswered_api: int | None = None


class _UpstreamClient:
    """One connection of the proxy's own to Tansu, for request/response round trips
    (log reads, timeout aborts). Serialised by a lock; reconnects after a failure."""

    def __init__(self, address: Callable[[], tuple[str, int]], label: str) -> None:
        self._address = address
        self._label = label
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._reader: IO[bytes] | None = None
        self._correlation = 0

    def request(self, request: Request, version: int, timeout_s: float = 10.0) -> Response:
        """Send ``request`` and return Tansu's answer. Raises OSError or ProtocolError."""
        with self._lock:
            if self._sock is None:
                sock = socket.create_connection(self._address(), timeout=timeout_s)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._sock, self._reader = sock, sock.makefile("rb")
            assert self._reader is not None
            self._correlation += 1
            frame = encode_request(
                request,
                api_version=version,
                correlation_id=self._correlation,
                client_id=self._label,
            )
            try:
                self._sock.settimeout(timeout_s)
                self._sock.sendall(_SIZE.pack(len(frame)) + frame)
                answer = _read_frame(self._reader)
                cid, response = decode_response(type(request), answer, api_version=version)
            except (OSError, _Closed, ProtocolError) as exc:
                self._close_locked()
                if isinstance(exc, _Closed):
                    raise ConnectionError(f"Tansu closed the {self._label} connection") from None
                raise
            if cid != self._correlation:
                self._close_locked()
                raise ProtocolError(f"correlation id {cid}, expected {self._correlation}")
            return response

    def _close_locked(self) -> None:
        if self._reader is not None:
            with contextlib.suppress(OSError):
                self._reader.close()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock, self._reader = None, None

    def close(self) -> None:
        with self._lock:
            self._close_locked()


@attrs.define(eq=False)
class _Slot:
    """One answer owed to the client, in request order."""

    context: RequestContext
    frame: bytes | None = None
    ready: bool = False
    ready_at: float = 0.0
    since: float = attrs.field(factory=time.monotonic)


class _Connection:
    """A client connection and its connection to Tansu (see the module docstring)."""

    def __init__(self, proxy: TransactionProxy, client: socket.socket) -> None:
        self._proxy = proxy
        self._client = client
        self._upstream: socket.socket | None = None
        self._cond = threading.Condition()
        self._slots: deque[_Slot] = deque()
        self._waiting: deque[_Slot] = deque()  # forwarded, Tansu's answer not read yet
        self._closed = False
        self._finished = False
        self._drain_timer: threading.Timer | None = None
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        try:
            self._client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            upstream = socket.create_connection(self._proxy.upstream, timeout=10)
            upstream.settimeout(None)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            log.info("txn proxy: cannot reach Tansu for a new client: %s", exc)
            self.close()
            return
        self._upstream = upstream
        for target, name in (
            (self._read_requests, "requests"),
            (self._read_answers, "answers"),
            (self._write_answers, "writer"),
        ):
            thread = threading.Thread(
                target=target, name=f"{self._proxy.thread_prefix}{name}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def join(self, timeout_s: float) -> None:
        for thread in self._threads:
            thread.join(timeout_s)

    def unanswered_for(self, now: float) -> tuple[float, int | None]:
        """How long the oldest request Tansu has not answered yet has waited, and its
        API key (0 and None when none waits)."""
        with self._cond:
            if not self._waiting:
                return 0.0, None
            head = self._waiting[0]
            return now - head.since, head.context.api_key

    def close(self) -> None:
        """Hang up on the client; idempotent. Requests already sent to Tansu are
        acted on there whatever became of the client (a broker does the same), so
        their answers are still read, for up to ``_DRAIN_S``, and the core learns from
        them (a committed EndTxn stays committed); then the connection to Tansu
        closes and requests it never answered are reported to the core as
        abandoned."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._slots.clear()
            drain = (
                bool(self._waiting)
                and self._upstream is not None
                and len(self._threads) > 1
                and not self._proxy._stopping.is_set()
            )
            self._cond.notify_all()
        _hang_up(self._client)
        if drain:
            # The answers thread drains and then finishes; this bounds how long.
            self._drain_timer = threading.Timer(_DRAIN_S, self._finish)
            self._drain_timer.daemon = True
            self._drain_timer.start()
            return
        self._finish()

    def _finish(self) -> None:
        """Close the connection to Tansu; report what it never answered."""
        with self._cond:
            if self._finished:
                return
            self._finished = True
            abandoned = [slot.context for slot in self._waiting]
            self._waiting.clear()
            if self._drain_timer is not None:
                self._drain_timer.cancel()
        if self._upstream is not None:
            _hang_up(self._upstream)
        self._proxy._abandoned(abandoned)
        self._proxy._forget(self)

    # ------------------------------------------------------------------ threads

    def _read_requests(self) -> None:
        assert self._upstream is not None
        try:
            reader = self._client.makefile("rb")
            while True:
                frame = _read_frame(reader)
                action = self._proxy._on_request(frame)
                if isinstance(action, Drop):
                    log.info("txn proxy: %s", action.why)
                    return
                if isinstance(action, Answer):
                    slot = _Slot(action.context, action.frame, True, self._ready_at(action.context))
                    with self._cond:
                        if self._closed:
                            return
                        self._slots.append(slot)
                        self._cond.notify_all()
                    continue
                assert isinstance(action, Forward)
                if action.context.expects_response:
                    slot = _Slot(action.context)
                    with self._cond:
                        if self._closed:
                            return
                        self._slots.append(slot)
                        self._waiting.append(slot)
                self._upstream.sendall(_SIZE.pack(len(frame)) + frame)
        except (_Closed, OSError, ValueError, struct.error):
            return
        except Exception:
            log.exception("txn proxy: request handling failed")
            self._proxy._fail("the proxy failed on a request (see its log); connection closed")
        finally:
            self.close()

    def _read_answers(self) -> None:
        assert self._upstream is not None
        try:
            reader = self._upstream.makefile("rb")
            while True:
                with self._cond:
                    if self._closed and not self._waiting:
                        return  # drained
                frame = _read_frame(reader)
                with self._cond:
                    if not self._waiting:
                        return
                    slot = self._waiting.popleft()
                    closed = self._closed
                context = slot.context
                (correlation_id,) = _SIZE.unpack_from(frame, 0)
                if correlation_id != context.correlation_id:
                    self._proxy._fail(
                        f"Tansu answered correlation id {correlation_id} where "
                        f"{context.correlation_id} (API {context.api_key}) was due"
                    )
                    return
                if closed:
                    # The client is gone: learn from the answer, send nothing.
                    self._proxy._observe_answer(context, frame)
                    continue
                out = self._proxy._on_response(context, frame)
                with self._cond:
                    slot.frame = out
                    slot.ready = True
                    slot.ready_at = self._ready_at(context)
                    self._cond.notify_all()
        except (_Closed, OSError, ValueError, struct.error):
            return
        except Exception:
            log.exception("txn proxy: answer handling failed")
            self._proxy._fail("the proxy failed on an answer (see its log); connection closed")
        finally:
            self.close()
            self._finish()

    @staticmethod
    def _ready_at(context: RequestContext) -> float:
        return time.monotonic() + context.delay_s if context.delay_s else 0.0

    def _write_answers(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._closed and not (self._slots and self._slots[0].ready):
                        self._cond.wait()
                    if self._closed:
                        return
                    slot = self._slots[0]
                    # An injected delay: wait, but wake up to close.
                    while not self._closed and slot.ready_at > time.monotonic():
                        self._cond.wait(slot.ready_at - time.monotonic())
                    if self._closed:
                        return
                    self._slots.popleft()
                if slot.frame is None:
                    return  # the core wants the connection dropped
                self._client.sendall(_SIZE.pack(len(slot.frame)) + slot.frame)
        except OSError:
            return
        finally:
            self.close()


class TransactionProxy:
    """The proxy between clients and Tansu (see the module docstring and
    docs/testing.md). Made and started by ``embedded_broker("tansu", transactions=True)``;
    reach it as ``broker.proxy``.

    Fault injection (each takes effect for requests that arrive afterwards):

    * :meth:`push_request_errors`: the next requests of an API are answered with these
      error codes by the proxy, without reaching Tansu (``0`` lets one through,
      :attr:`DROP_CONNECTION` hangs up instead of answering);
    * :meth:`push_response_errors`: the next requests reach Tansu, which acts on them,
      and the client gets the error instead of Tansu's answer (or loses the connection):
      a lost or misreported answer;
    * :meth:`set_response_delay`, :meth:`move_coordinators`, :meth:`drop_connections`.

    Observations: :attr:`txn_offset_commits`, :attr:`timed_out_transactions`,
    :meth:`aborted_transactions`, :meth:`pending_offsets`, :meth:`group_view`,
    :attr:`stats` and :attr:`failures` (what the proxy could not do; a test should
    assert it is empty).
    """

    #: The "error code" that drops the connection (librdkafka's ``_TRANSPORT``).
    DROP_CONNECTION: ClassVar[int] = DROP_CONNECTION

    def __init__(
        self,
        *,
        upstream: tuple[str, int] | None = None,
        port: int = 0,
        transaction_timeouts: bool = True,
    ) -> None:
        self.upstream: tuple[str, int] = upstream or ("127.0.0.1", 0)
        self._core = ProxyCore(fetch_max_version=_SCAN_VERSION)
        self._core_lock = threading.Lock()
        self._transaction_timeouts = transaction_timeouts
        self._stopping = threading.Event()
        self._connections: set[_Connection] = set()
        self._connections_lock = threading.Lock()
        self._accepted = 0
        self._indexes: dict[tuple[str, int], tuple[threading.Lock, PartitionTxnIndex]] = {}
        self._indexes_lock = threading.Lock()
        self._counters_lock = threading.Lock()
        self._fetches_rewritten = 0
        self._log_reads = 0
        self._scanner = _UpstreamClient(lambda: self.upstream, "coopconsumer-txn-proxy-log")
        self._aborter = _UpstreamClient(lambda: self.upstream, "coopconsumer-txn-proxy-timeout")
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(128)
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        #: What the names of this proxy's threads start with (its port tells two proxies
        #: of one process apart).
        self.thread_prefix = f"txn-proxy-{self.port}-"
        self._threads: list[threading.Thread] = []

    @property
    def address(self) -> str:
        """``127.0.0.1:port``: what Tansu advertises and clients connect to."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Serve in the background (threads)."""
        targets: list[tuple[Callable[[], None], str]] = [(self._accept_loop, "accept")]
        if self._transaction_timeouts:
            targets.append((self._timeout_loop, "timeouts"))
        for target, name in targets:
            thread = threading.Thread(
                target=target, name=f"{self.thread_prefix}{name}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        """Stop accepting, hang up every connection, join the threads; idempotent."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(5)
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            connection.close()
            connection._finish()
        for connection in connections:
            connection.join(5)
        self._scanner.close()
        self._aborter.close()

    # ------------------------------------------------------------------ fault injection

    def push_request_errors(self, api_key: int, codes: Sequence[int]) -> None:
        """The next ``len(codes)`` requests with ``api_key`` get these error codes from
        the proxy, in order, without reaching Tansu. ``0`` lets that request through;
        :attr:`DROP_CONNECTION` closes the client's connection instead of answering.

        Error answers exist for Produce, Fetch, the group APIs and the transactional
        APIs; other APIs take only 0 and :attr:`DROP_CONNECTION`
        (:class:`~coopconsumer.ConfigurationError` otherwise, nothing queued).
        """
        with self._core_lock:
            self._core.push_errors(api_key, codes, after=False)

    def push_response_errors(self, api_key: int, codes: Sequence[int]) -> None:
        """The next ``len(codes)`` requests with ``api_key`` reach Tansu (which acts on
        them), and the client gets these error codes instead of Tansu's answers.
        ``0`` passes the answer; :attr:`DROP_CONNECTION` closes the connection before
        the answer: a lost response. Same API keys as :meth:`push_request_errors`."""
        with self._core_lock:
            self._core.push_errors(api_key, codes, after=True)

    def clear_request_errors(self, api_key: int | None = None) -> None:
        """Forget the queued errors (both kinds) of ``api_key``, or of every API."""
        with self._core_lock:
            self._core.clear_errors(api_key)

    def set_response_delay(self, delay_s: float, *, api_keys: Iterable[int] | None = None) -> None:
        """Hold every answer (of ``api_keys``, or of all APIs) ``delay_s`` seconds
        before sending it; ``0`` removes the delay. Answers on one connection stay in
        order, so a delayed answer holds back the ones after it, as on a slow broker."""
        with self._core_lock:
            self._core.set_delay(delay_s, api_keys)

    def move_coordinators(
        self, duration_s: float, *, group: bool = True, transaction: bool = True
    ) -> None:
        """For ``duration_s`` seconds answer NOT_COORDINATOR to every group coordinator
        request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
        TxnOffsetCommit) and/or transaction coordinator request (transactional
        InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn), as a broker does
        while a coordinator moves; clients look it up again and retry. ``0`` ends it."""
        if duration_s < 0:
            raise ConfigurationError(f"duration_s must be >= 0, not {duration_s}")
        with self._core_lock:
            self._core.move_coordinators(
                time.monotonic() + duration_s, group=group, transaction=transaction
            )

    def drop_connections(self) -> None:
        """Hang up every client connection now (the listener stays)."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            connection.close()

    # ------------------------------------------------------------------ observations

    @property
    def txn_offset_commits(self) -> tuple[TxnOffsetCommitRecord, ...]:
        """Every TxnOffsetCommit clients sent, with the answer they got, in order."""
        with self._core_lock:
            return tuple(self._core.txn_offset_commits)

    @property
    def timed_out_transactions(self) -> tuple[TimedOutTransaction, ...]:
        """Transactions the proxy aborted because they outlived their timeout."""
        with self._core_lock:
            return tuple(self._core.timed_out)

    @property
    def failures(self) -> tuple[str, ...]:
        """What the proxy could not do faithfully (an unreadable batch, an answer it
        could not parse...). Empty in a healthy run."""
        with self._core_lock:
            return tuple(self._core.failures)

    @property
    def stats(self) -> ProxyStats:
        """Request and fault counters."""
        with self._connections_lock:
            open_connections = len(self._connections)
            accepted = self._accepted
            connections = list(self._connections)
        now = time.monotonic()
        oldest, oldest_api = max(
            (c.unanswered_for(now) for c in connections), default=(0.0, None), key=lambda w: w[0]
        )
        with self._counters_lock:
            rewritten, reads = self._fetches_rewritten, self._log_reads
        with self._core_lock:
            return ProxyStats(
                connections=accepted,
                open_connections=open_connections,
                requests=dict(self._core.requests_seen),
                faults_applied=dict(self._core.faults_applied),
                fetches_rewritten=rewritten,
                log_reads=reads,
                oldest_unanswered_s=oldest,
                oldest_unanswered_api=oldest_api,
            )

    def aborted_transactions(self, topic: str, partition: int) -> tuple[AbortedTxn, ...]:
        """The aborted transactions the proxy has read in the partition's log so far."""
        with self._indexes_lock:
            entry = self._indexes.get((topic, partition))
        if entry is None:
            return ()
        with entry[0]:
            return entry[1].aborted

    def pending_offsets(self) -> Mapping[tuple[str, str, int], frozenset[str]]:
        """``(group, topic, partition)`` -> transactional ids whose unfinished
        transaction sent offsets for it (what makes OffsetFetch answer
        UNSTABLE_OFFSET_COMMIT)."""
        with self._core_lock:
            return self._core.pending_offsets()

    def group_view(self, group_id: str) -> tuple[int, Mapping[str, str | None]] | None:
        """``(generation, {member id: group instance id})`` as the proxy has learned
        them for ``group_id``; ``None`` for a group it has not seen."""
        with self._core_lock:
            return self._core.group_view(group_id)

    # ------------------------------------------------------------------ internals

    def _fail(self, why: str) -> None:
        log.warning("txn proxy: %s", why)
        with self._core_lock:
            self._core.failures.append(why)

    def _on_request(self, frame: bytes) -> Forward | Answer | Drop:
        with self._core_lock:
            return self._core.on_request(frame, time.monotonic())

    def _on_response(self, context: RequestContext, frame: bytes) -> bytes | None:
        if context.read_committed and context.replace_with is None:
            return self._hide_aborted(context, frame)
        with self._core_lock:
            return self._core.on_response(context, frame, time.monotonic())

    def _observe_answer(self, context: RequestContext, frame: bytes) -> None:
        """Learn from Tansu's answer to a client that is gone (nothing is sent)."""
        if context.api_key == _FETCH:
            return  # nothing to learn: the log is read when a fetch needs it
        with self._core_lock:
            self._core.on_response(context, frame, time.monotonic())

    def _abandoned(self, contexts: list[RequestContext]) -> None:
        if contexts:
            with self._core_lock:
                for context in contexts:
                    self._core.on_abandoned(context)

    def _forget(self, connection: _Connection) -> None:
        with self._connections_lock:
            self._connections.discard(connection)

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection = _Connection(self, sock)
            with self._connections_lock:
                self._connections.add(connection)
                self._accepted += 1
            connection.start()

    # ------------------------------------------------------------------ aborted records

    def _index(self, topic: str, partition: int) -> tuple[threading.Lock, PartitionTxnIndex]:
        with self._indexes_lock:
            entry = self._indexes.get((topic, partition))
            if entry is None:
                entry = self._indexes[(topic, partition)] = (threading.Lock(), PartitionTxnIndex())
            return entry

    def _hide_aborted(self, context: RequestContext, frame: bytes) -> bytes | None:
        """A read_committed Fetch answer with ``AbortedTransactions`` filled in, as
        Kafka's; None (hang up) when the proxy cannot do it, which it records."""
        request = context.request
        assert isinstance(request, FetchRequest)
        try:
            _cid, response = decode_response(FetchRequest, frame, api_version=context.api_version)
        except ProtocolError as exc:
            self._fail(f"cannot read a Fetch answer v{context.api_version}: {exc}")
            return None
        assert isinstance(response, FetchResponse)
        offsets = {
            (topic.topic, p.partition): p.fetch_offset
            for topic in request.topics
            for p in topic.partitions
        }
        changed = False
        topics = []
        try:
            for topic in response.responses:
                partitions = []
                for data in topic.partitions:
                    aborted = self._aborted_in(topic.topic, data, offsets)
                    if aborted:
                        data = attrs.evolve(data, aborted_transactions=aborted)
                        changed = True
                    partitions.append(data)
                topics.append(attrs.evolve(topic, partitions=tuple(partitions)))
        except (UnreadableBatchError, OSError, ProtocolError, _Closed) as exc:
            self._fail(f"read_committed Fetch not served, connection closed: {exc}")
            return None
        if not changed:
            return frame
        with self._counters_lock:
            self._fetches_rewritten += 1
        return encode_response(
            attrs.evolve(response, responses=tuple(topics)),
            api_version=context.api_version,
            correlation_id=context.correlation_id,
        )

    def _aborted_in(
        self,
        topic: str,
        data: PartitionData,
        offsets: Mapping[tuple[str, int], int],
    ) -> tuple[AbortedTransaction, ...]:
        records = data.records
        partition = data.partition_index
        if not records:
            return ()
        batches = list(iter_batches(records))
        if not any(b.transactional and b.control_type is None for b in batches):
            return ()  # no transactional data: nothing librdkafka could need to drop
        start = offsets.get((topic, partition), batches[0].base_offset)
        upper = batches[-1].next_offset
        lock, index = self._index(topic, partition)
        with lock:
            self._read_log(topic, partition, index, upper, max(data.high_watermark, upper))
            found = index.aborted_overlapping(start, upper)
        return tuple(
            AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
            for t in found
        )

    def _read_log(
        self, topic: str, partition: int, index: PartitionTxnIndex, upper: int, end: int
    ) -> None:
        """Read the partition (read_uncommitted) until every transaction that began
        below ``upper`` has its marker, or the log ends at ``end``."""
        while index.undecided_before(upper) and index.scanned_to < end:
            request = FetchRequest(
                max_wait_ms=100,  # Tansu answers nothing at all to max_wait_ms=0
                min_bytes=1,
                max_bytes=_SCAN_BYTES,
                isolation_level=0,
                topics=(
                    FetchTopic(
                        topic=topic,
                        partitions=(
                            FetchPartition(
                                partition=partition,
                                fetch_offset=index.scanned_to,
                                partition_max_bytes=_SCAN_BYTES,
                            ),
                        ),
                    ),
                ),
            )
            response = self._scanner.request(request, _SCAN_VERSION)
            with self._counters_lock:
                self._log_reads += 1
            assert isinstance(response, FetchResponse)
            data = next(
                (p for t in response.responses if t.topic == topic for p in t.partitions), None
            )
            if data is None or data.error_code != 0:
                code = None if data is None else data.error_code
                raise ConnectionError(f"reading {topic}[{partition}] failed: error {code}")
            end = max(end, data.high_watermark)
            if index.feed(data.records or b"") == 0:
                break
        if index.undecided_before(upper):
            self._fail(
                f"{topic}[{partition}]: transactions {index.open_transactions()} began below "
                f"offset {upper} but have no marker below {index.scanned_to}; their records "
                "were delivered as committed"
            )

    # ------------------------------------------------------------------ timeouts

    def _timeout_loop(self) -> None:
        while not self._stopping.wait(_TIMER_PERIOD_S):
            with self._core_lock:
                due = self._core.due_timeouts(time.monotonic())
            for timed_out in due:
                self._abort_timed_out(timed_out)

    def _abort_timed_out(self, timed_out: TimedOutTransaction) -> None:
        # Batches of the fenced epoch already on their way to Tansu land before the
        # abort marker, as they would before Kafka's; later ones are refused.
        deadline = time.monotonic() + _PRODUCE_DRAIN_S
        while time.monotonic() < deadline and not self._stopping.is_set():
            with self._core_lock:
                if self._core.produce_in_flight(timed_out.transactional_id) == 0:
                    break
            time.sleep(0.01)
        code = -1
        try:
            response = self._aborter.request(
                EndTxnRequest(
                    transactional_id=timed_out.transactional_id,
                    producer_id=timed_out.producer_id,
                    producer_epoch=timed_out.producer_epoch,
                    committed=False,
                ),
                _END_TXN_VERSION,
            )
            assert isinstance(response, EndTxnResponse)
            code = response.error_code
        except (OSError, ProtocolError) as exc:
            log.warning("txn proxy: timeout abort of %r failed: %s", timed_out, exc)
        with self._core_lock:
            self._core.timeout_abort_done(timed_out, code)


class TransactionalBroker(EmbeddedBroker):
    """Tansu behind a :class:`TransactionProxy`: what
    ``embedded_broker("tansu", transactions=True)`` returns. ``bootstrap`` is the
    proxy's address; :attr:`proxy` injects faults and reports what it saw."""

    kind: BrokerKind = "tansu"

    def __init__(
        self,
        inner: _TansuBroker,
        proxy: TransactionProxy,
        *,
        api_versions: Mapping[int, tuple[int, int]],
    ) -> None:
        super().__init__(bootstrap=proxy.address, api_versions=api_versions)
        self._inner = inner
        #: The proxy in front of Tansu.
        self.proxy = proxy

    @property
    def pid(self) -> int | None:
        return self._inner.pid

    @property
    def running(self) -> bool:
        return self._inner.running

    def output_tail(self, chars: int = 4000) -> str:
        return self._inner.output_tail(chars)

    def stop(self) -> None:
        try:
            self.proxy.stop()
        finally:
            self._inner.stop()


def start_transactional_tansu(
    *, startup_timeout_s: float, transaction_timeouts: bool = True
) -> TransactionalBroker:
    """Start Tansu advertising a :class:`TransactionProxy`'s port, then the proxy;
    return once ApiVersions answers through the proxy."""
    # The proxy binds first, so the port Tansu advertises is already ours.
    proxy = TransactionProxy(transaction_timeouts=transaction_timeouts)
    try:
        inner = start_tansu(startup_timeout_s=startup_timeout_s, advertised_port=proxy.port)
    except BaseException:
        proxy.stop()
        raise
    try:
        proxy.upstream = split_address(inner.bootstrap)
        proxy.start()
        try:
            answers = wait_until_answering(
                [proxy.address],
                timeout_s=startup_timeout_s,
                still_starting=lambda: None if inner.running else "tansu exited",
            )
        except (TimeoutError, ChildProcessError) as exc:
            raise BrokerStartupError(
                f"Tansu behind the transaction proxy did not answer: {exc}",
                stderr_tail=inner.output_tail(),
            ) from exc
        versions = answers[proxy.address]
        return TransactionalBroker(inner, proxy, api_versions=versions)
    except BaseException:
        proxy.stop()
        inner.stop()
        raise
