"""The decisions of the transaction proxy, without sockets, threads or clocks.

``ProxyCore`` sees every request a client sends and every answer Tansu gives, as bytes,
and decides what the client gets: the answer as is, an answer rewritten the way Kafka
would have given it, or an answer of its own without asking Tansu. What it adds to
Tansu (docs/testing.md, "Transactions and exactly-once"):

* KIP-447 fencing of TxnOffsetCommit v3+ by generation, member id and instance id, as
  Kafka's ``ClassicGroup.validateOffsetCommit`` does, with the group's generation and
  members learned from the JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit
  traffic it relays (``_GroupView``);
* ``require_stable``: OffsetFetch v7+ answers UNSTABLE_OFFSET_COMMIT for a partition
  whose offsets an unfinished transaction has sent (``_Transactions``);
* transaction timeouts: ``due_timeouts`` names the transactions open longer than their
  ``transaction.timeout.ms``; the driver aborts them and the core then refuses the old
  producer epoch with INVALID_PRODUCER_EPOCH, as Kafka does after fencing on timeout;
* fault injection: queued error codes per API (answered before or after Tansu saw the
  request), dropped connections, response delays, "coordinator moved" windows.

Hiding aborted records from read_committed fetches needs reads of the log, so the driver
does that part with ``_txn_log``; the core only marks which fetches need it.

Time is an argument (``now``, monotonic seconds). Not thread-safe: the driver holds one
lock around every call. Imports the standard library, attrs, ``coopconsumer._protocol``,
``coopconsumer._errors`` and the sibling ``_txn_messages``.
"""

from __future__ import annotations

import enum
import struct
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from .._errors import ConfigurationError, ProtocolError
from .._protocol import Request, Response, decode_request, decode_response, encode_response
from .._protocol import error_codes as kerr
from .._protocol._codec import _Malformed, read_uvarint, skip_header_tags
from .._protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from ._txn_messages import (
    PROXY_REQUESTS,
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    FetchRequest,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    error_response,
)

__all__ = [
    "DROP_CONNECTION",
    "Answer",
    "Drop",
    "Forward",
    "ProxyCore",
    "RequestContext",
    "TimedOutTransaction",
    "TxnOffsetCommitRecord",
    "cap_api_version",
]

#: Injected "error code" that drops the client's connection instead of answering
#: (librdkafka's ``RD_KAFKA_RESP_ERR__TRANSPORT``, as the mock cluster takes it).
DROP_CONNECTION: Final = -195

_API_VERSIONS: Final = 18
_FETCH: Final = 1
_PRODUCE: Final = 0

#: API keys the group coordinator serves (a "coordinator moved" window refuses them).
GROUP_COORDINATOR_APIS: Final = frozenset({8, 9, 11, 12, 13, 14, 28})
#: API keys the transaction coordinator serves (InitProducerId only with a transactional id).
TXN_COORDINATOR_APIS: Final = frozenset({22, 24, 25, 26})

_HEADER: Final = struct.Struct(">hhi")
_I16: Final = struct.Struct(">h")


# --------------------------------------------------------------------------- what happened


@attrs.frozen(kw_only=True)
class TxnOffsetCommitRecord:
    """One TxnOffsetCommit a client sent, and the answer it got.

    ``offsets`` holds ``(topic, partition, offset)`` triples in request order.
    ``error_code`` is the first partition's error in the answer (0: accepted);
    ``fenced_by_proxy`` says the proxy refused it itself, for a KIP-447 check Tansu
    skips or a producer epoch it fenced on a transaction timeout, rather than Tansu or
    an injected fault. ``generation_id``, ``member_id`` and
    ``group_instance_id`` are -1, "" and None below version 3, which lacks them.
    """

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: tuple[tuple[str, int, int], ...]
    api_version: int
    error_code: int
    fenced_by_proxy: bool


@attrs.frozen(kw_only=True)
class TimedOutTransaction:
    """A transaction the proxy aborted because it stayed open past its timeout."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    open_for_s: float


# --------------------------------------------------------------------------- decisions


@attrs.define(kw_only=True, eq=False)
class RequestContext:
    """A request the proxy let through or answered, kept until its answer is sent."""

    api_key: int
    api_version: int
    correlation_id: int
    request: Request | None = None
    #: Answer Tansu's response with this error code instead (or drop the connection).
    replace_with: int | None = None
    delay_s: float = 0.0
    #: A read_committed Fetch: the driver fills its aborted transactions.
    read_committed: bool = False
    #: Produce: the transactional id, counted while in flight.
    produce_txn_id: str | None = None
    expects_response: bool = True


@attrs.frozen
class Forward:
    """Send the request to Tansu; its answer goes through ``ProxyCore.on_response``."""

    context: RequestContext


@attrs.frozen
class Answer:
    """Answer the client with ``frame`` (header and body, no size prefix) without
    asking Tansu."""

    frame: bytes
    context: RequestContext


@attrs.frozen
class Drop:
    """Close the client's connection without answering."""

    why: str


Action = Forward | Answer | Drop


class _TxnState(enum.Enum):
    """Where a transactional id's current transaction is, as the proxy saw it."""

    EMPTY = "empty"
    """No transaction open: after InitProducerId or an answered EndTxn."""
    ONGOING = "ongoing"
    """A partition or the group offsets were added; the timeout runs."""
    ENDING = "ending"
    """The client's EndTxn is with Tansu: no timeout may abort it now."""
    TIMING_OUT = "timing-out"
    """The proxy is aborting it for its timeout; the old epoch is fenced."""


@attrs.define(kw_only=True)
class _Txn:
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 60_000
    state: _TxnState = _TxnState.EMPTY
    started_at: float = 0.0
    pending: set[tuple[str, str, int]] = attrs.field(factory=set)
    #: The offsets the open transaction sent, as Tansu accepted them.
    offsets: dict[tuple[str, str, int], _Offset] = attrs.field(factory=dict)
    fenced_epochs: set[tuple[int, int]] = attrs.field(factory=set)
    produce_in_flight: int = 0


@attrs.frozen
class _Offset:
    """A committed offset as OffsetFetch answers it."""

    offset: int
    leader_epoch: int
    metadata: str | None


@attrs.define(kw_only=True)
class _Group:
    exists: bool = False
    generation: int = -1
    #: member id -> group instance id (static members) or None.
    members: dict[str, str | None] = attrs.field(factory=dict)


# --------------------------------------------------------------------------- helpers


def _client_body_start(frame: bytes) -> int:
    length: int = _I16.unpack_from(frame, 8)[0]
    return 10 + max(0, length)


def cap_api_version(frame: bytes, request_version: int, api_key: int, max_version: int) -> bytes:
    """An ApiVersions response frame with ``api_key``'s max version lowered to
    ``max_version``; anything it cannot read comes back unchanged.

    Parsed by hand (a walk over fixed-size entries) so the answer keeps every byte it
    had, unknown tagged fields included. The header is always v0 (KIP-511).
    """
    try:
        pos = 4
        (error_code,) = _I16.unpack_from(frame, pos)
        pos += 2
        flexible = request_version >= 3 and error_code == 0
        if flexible:
            count, pos = read_uvarint(frame, pos)
            count -= 1
        else:
            (count,) = struct.unpack_from(">i", frame, pos)
            pos += 4
        out = bytearray(frame)
        for _ in range(max(0, count)):
            key, _low, high = struct.unpack_from(">hhh", frame, pos)
            if key == api_key and high > max_version:
                struct.pack_into(">h", out, pos + 4, max_version)
            pos += 6
            if flexible:
                pos = _skip_tags(frame, pos)
        return bytes(out)
    except (struct.error, IndexError, _Malformed):
        return frame


def _skip_tags(data: bytes, pos: int) -> int:
    return skip_header_tags(data, pos)[1]


def _produce_head(frame: bytes, version: int) -> tuple[str | None, int]:
    """The transactional id and acks of a Produce request, read by hand (cheap: the
    records are never touched)."""
    pos = _client_body_start(frame)
    flexible = version >= 9
    if flexible:
        pos = _skip_tags(frame, pos)
        length, pos = read_uvarint(frame, pos)
        length -= 1
    else:
        (length,) = _I16.unpack_from(frame, pos)
        pos += 2
    txn_id = None
    if length >= 0:
        txn_id = frame[pos : pos + length].decode("utf-8", "replace")
        pos += length
    (acks,) = _I16.unpack_from(frame, pos)
    return txn_id, acks


def _first_batch_producer(request: ProduceRequest) -> tuple[int, int]:
    """Producer id and epoch of the first v2 record batch of a Produce request."""
    for topic in request.topic_data:
        for partition in topic.partition_data:
            records = partition.records or b""
            if len(records) >= 53 and records[16] == 2:
                producer_id, epoch = struct.unpack_from(">qh", records, 43)
                return int(producer_id), int(epoch)
    return -1, -1


# --------------------------------------------------------------------------- the core


class ProxyCore:
    """Everything the proxy decides; see the module docstring."""

    def __init__(self, *, fetch_max_version: int = 12) -> None:
        self.fetch_max_version = fetch_max_version
        self._groups: dict[str, _Group] = {}
        self._txns: dict[str, _Txn] = {}
        #: (group, topic, partition) -> transactional ids with offsets pending there.
        self._pending: dict[tuple[str, str, int], set[str]] = {}
        #: (group, topic, partition) -> the offset the last committed transaction (or a
        #: later OffsetCommit) left there, answered in place of Tansu's (see
        #: ``_fetched_offsets``).
        self._committed: dict[tuple[str, str, int], _Offset] = {}
        self._request_errors: dict[int, deque[int]] = {}
        self._response_errors: dict[int, deque[int]] = {}
        self._delays: dict[int | None, float] = {}
        self._group_moved_until = 0.0
        self._txn_moved_until = 0.0
        self.txn_offset_commits: list[TxnOffsetCommitRecord] = []
        self.timed_out: list[TimedOutTransaction] = []
        self.failures: list[str] = []
        self.requests_seen: Counter[int] = Counter()
        self.faults_applied: Counter[int] = Counter()

    # ------------------------------------------------------------------ fault setup

    def push_errors(self, api_key: int, codes: Iterable[int], *, after: bool) -> None:
        codes = [int(code) for code in codes]
        for code in codes:
            if code not in (0, DROP_CONNECTION) and api_key not in PROXY_REQUESTS:
                raise ConfigurationError(
                    f"the proxy can answer API {api_key} only with 0 or DROP_CONNECTION "
                    f"({DROP_CONNECTION}); error answers exist for API keys "
                    f"{sorted(PROXY_REQUESTS)}"
                )
            if not -32768 <= code <= 32767:
                raise ConfigurationError(f"error code {code} is not an int16")
        target = self._response_errors if after else self._request_errors
        target.setdefault(api_key, deque()).extend(codes)

    def clear_errors(self, api_key: int | None) -> None:
        for table in (self._request_errors, self._response_errors):
            if api_key is None:
                table.clear()
            else:
                table.pop(api_key, None)

    def set_delay(self, delay_s: float, api_keys: Iterable[int] | None) -> None:
        if delay_s < 0:
            raise ConfigurationError(f"delay must be >= 0 s, not {delay_s}")
        keys: list[int | None] = [None] if api_keys is None else list(api_keys)
        for key in keys:
            if delay_s == 0:
                self._delays.pop(key, None)
            else:
                self._delays[key] = delay_s

    def move_coordinators(self, until: float, *, group: bool, transaction: bool) -> None:
        if group:
            self._group_moved_until = until
        if transaction:
            self._txn_moved_until = until

    # ------------------------------------------------------------------ requests

    def on_request(self, frame: bytes, now: float) -> Action:
        """Decide what happens to one request frame (header and body)."""
        api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
        self.requests_seen[api_key] += 1
        context = RequestContext(
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            delay_s=self._delays.get(api_key, self._delays.get(None, 0.0)),
        )
        if api_key == _PRODUCE:
            try:
                context.produce_txn_id, acks = _produce_head(frame, api_version)
            except (struct.error, IndexError, _Malformed):
                acks = -1
            context.expects_response = acks != 0
        request = self._decode(frame, api_key, api_version, context.produce_txn_id)
        context.request = request
        queued = self._pop(self._request_errors, api_key)
        if queued is not None:
            self.faults_applied[api_key] += 1
            if queued == DROP_CONNECTION:
                return Drop(f"injected: drop on API {api_key}")
            return self._answer(context, queued, txn_commit_fenced=False)
        if request is not None:
            refusal = self._refusal(request, api_version, now)
            if refusal is not None:
                code, fenced = refusal
                return self._answer(context, code, txn_commit_fenced=fenced)
        queued = self._pop(self._response_errors, api_key)
        if queued is not None:
            self.faults_applied[api_key] += 1
            context.replace_with = queued
        if isinstance(request, FetchRequest) and request.isolation_level == 1:
            context.read_committed = True
        self._before_forward(context, now)
        return Forward(context)

    def _decode(
        self, frame: bytes, api_key: int, api_version: int, produce_txn_id: str | None
    ) -> Request | None:
        cls = PROXY_REQUESTS.get(api_key)
        if cls is None or not cls.MIN_VERSION <= api_version <= cls.MAX_VERSION:
            return None
        if api_key == _PRODUCE and not (
            api_key in self._request_errors
            or api_key in self._response_errors
            or self._has_fences(produce_txn_id)
        ):
            # A full decode copies the records: only done to answer it or check an epoch.
            return None
        if api_key == _FETCH and api_version < 4:
            return None
        try:
            return decode_request(frame, request_types=PROXY_REQUESTS)[1]
        except ProtocolError as exc:
            self.failures.append(f"cannot read request API {api_key} v{api_version}: {exc}")
            return None

    @staticmethod
    def _pop(table: dict[int, deque[int]], api_key: int) -> int | None:
        queue = table.get(api_key)
        while queue:
            code = queue.popleft()
            if not queue:
                del table[api_key]
            if code != 0:
                return code
            return None
        return None

    def _answer(self, context: RequestContext, code: int, *, txn_commit_fenced: bool) -> Action:
        request = context.request
        if request is None:
            # Only DROP_CONNECTION is accepted for APIs without an error answer, but a
            # request that did not parse lands here too.
            return Drop(f"cannot answer API {context.api_key} v{context.api_version} with {code}")
        response = error_response(request, code, context.api_version)
        if isinstance(request, TxnOffsetCommitRequest):
            self._record_txn_commit(request, context.api_version, code, fenced=txn_commit_fenced)
        return Answer(self._encode(response, context), context)

    def _encode(self, response: Response, context: RequestContext) -> bytes:
        return encode_response(
            response, api_version=context.api_version, correlation_id=context.correlation_id
        )

    def _refusal(self, request: Request, version: int, now: float) -> tuple[int, bool] | None:
        """An error Kafka would answer without Tansu's help, and whether it is a
        KIP-447 fence of a TxnOffsetCommit."""
        api_key = type(request).API_KEY
        if (api_key in GROUP_COORDINATOR_APIS and now < self._group_moved_until) or (
            now < self._txn_moved_until
            and (
                api_key in (24, 25, 26)
                or (isinstance(request, InitProducerIdRequest) and request.transactional_id)
            )
        ):
            self.faults_applied[api_key] += 1
            return kerr.NOT_COORDINATOR, False
        fenced = self._fenced_epoch_error(request, version)
        if fenced is not None:
            return fenced, True
        if isinstance(request, TxnOffsetCommitRequest):
            code = self._validate_txn_commit(request)
            if code:
                return code, True
        return None

    def _fenced_epoch_error(self, request: Request, version: int) -> int | None:
        """INVALID_PRODUCER_EPOCH (or PRODUCER_FENCED where the version knows it) for a
        producer epoch the proxy fenced when it aborted that transaction on timeout."""
        if isinstance(request, AddPartitionsToTxnRequest):
            txn_id = request.v3_and_below_transactional_id
            key = (request.v3_and_below_producer_id, request.v3_and_below_producer_epoch)
            new_code_from = 2
        elif isinstance(request, AddOffsetsToTxnRequest | EndTxnRequest):
            txn_id, key = request.transactional_id, (request.producer_id, request.producer_epoch)
            new_code_from = 2
        elif isinstance(request, TxnOffsetCommitRequest):
            txn_id, key = request.transactional_id, (request.producer_id, request.producer_epoch)
            new_code_from = 99  # the group coordinator's verification answers 47
        elif isinstance(request, ProduceRequest) and request.transactional_id:
            txn_id, key = request.transactional_id, _first_batch_producer(request)
            new_code_from = 99  # ProducerAppendInfo: INVALID_PRODUCER_EPOCH
        else:
            return None
        txn = self._txns.get(txn_id)
        if txn is None or key not in txn.fenced_epochs:
            return None
        # KafkaApis: clients below these versions do not know PRODUCER_FENCED.
        return kerr.PRODUCER_FENCED if version >= new_code_from else kerr.INVALID_PRODUCER_EPOCH

    def _has_fences(self, txn_id: str | None) -> bool:
        txn = self._txns.get(txn_id or "")
        return txn is not None and bool(txn.fenced_epochs)

    def _before_forward(self, context: RequestContext, now: float) -> None:
        request = context.request
        if isinstance(request, EndTxnRequest):
            txn = self._txns.get(request.transactional_id)
            if txn is not None and txn.state is _TxnState.ONGOING:
                txn.state = _TxnState.ENDING
        if context.produce_txn_id is not None and context.expects_response:
            self._txn(context.produce_txn_id).produce_in_flight += 1

    # ------------------------------------------------------------------ group view

    def _group(self, group_id: str) -> _Group:
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = _Group()
        return group

    def _validate_txn_commit(self, request: TxnOffsetCommitRequest) -> int:
        """Kafka's ``validateTransactionalOffsetCommit`` + ``ClassicGroup.validateOffsetCommit``
        (isTransactional=true) on the proxy's view of the group: 0 or the error."""
        group = self._groups.get(request.group_id)
        generation = request.generation_id
        if group is None or not group.exists:
            # An unknown group: a "simple" group is made for generation -1.
            return 0 if generation < 0 else kerr.ILLEGAL_GENERATION
        if generation < 0 and not group.members:
            return 0
        if generation >= 0 or request.member_id or request.group_instance_id is not None:
            instance = request.group_instance_id
            if instance is not None:
                owner = next((m for m, i in group.members.items() if i == instance), None)
                if owner is None:
                    return kerr.UNKNOWN_MEMBER_ID
                if owner != request.member_id:
                    return kerr.FENCED_INSTANCE_ID
            if request.member_id not in group.members:
                return kerr.UNKNOWN_MEMBER_ID
            if generation != group.generation:
                return kerr.ILLEGAL_GENERATION
        # Generation -1, no member id, no instance id: accepted without any fencing, as
        # Kafka does for transactional commits (the pre-KIP-447 path).
        return 0

    def _on_join(self, request: JoinGroupRequest, response: JoinGroupResponse) -> None:
        if response.error_code != 0:
            if response.error_code in (kerr.UNKNOWN_MEMBER_ID, kerr.FENCED_INSTANCE_ID):
                self._group(request.group_id).members.pop(request.member_id, None)
            return
        group = self._group(request.group_id)
        group.exists = True
        if response.generation_id < group.generation:
            return  # an answer from a generation that is already over
        if response.generation_id > group.generation:
            # A new generation: its members are those the JoinGroup answers name.
            group.generation = response.generation_id
            group.members = {}
        self._add_member(group, response.member_id, request.group_instance_id)
        for member in response.members:  # the leader's answer lists everyone
            self._add_member(group, member.member_id, member.group_instance_id)

    @staticmethod
    def _add_member(group: _Group, member_id: str, instance: str | None) -> None:
        if instance is not None:
            # A static member that joins again replaces its old member id (KIP-345).
            for old in [m for m, i in group.members.items() if i == instance and m != member_id]:
                del group.members[old]
        group.members[member_id] = instance

    def _forget_member(self, group_id: str, member_id: str, code: int) -> None:
        if code in (kerr.UNKNOWN_MEMBER_ID, kerr.FENCED_INSTANCE_ID):
            group = self._groups.get(group_id)
            if group is not None:
                group.members.pop(member_id, None)

    def _on_leave(self, request: LeaveGroupRequest, response: LeaveGroupResponse) -> None:
        group = self._groups.get(request.group_id)
        if group is None or response.error_code != 0:
            return
        if request.members:
            outcome = {(m.member_id, m.group_instance_id): m.error_code for m in response.members}
            for member in request.members:
                if outcome.get((member.member_id, member.group_instance_id), 0) != 0:
                    continue
                gone = {member.member_id} | {
                    m  # a static member may leave by its instance id alone (KIP-345)
                    for m, i in group.members.items()
                    if member.group_instance_id is not None and i == member.group_instance_id
                }
                for member_id in gone:
                    group.members.pop(member_id, None)
        else:
            group.members.pop(request.member_id, None)

    # ------------------------------------------------------------------ transactions

    def _txn(self, txn_id: str) -> _Txn:
        txn = self._txns.get(txn_id)
        if txn is None:
            txn = self._txns[txn_id] = _Txn()
        return txn

    def _clear_pending(self, txn_id: str, txn: _Txn, *, committed: bool = False) -> None:
        """The transaction ended: its offsets are no longer pending, and take effect
        when it committed."""
        if committed:
            self._committed.update(txn.offsets)
        txn.offsets.clear()
        for key in txn.pending:
            holders = self._pending.get(key)
            if holders is not None:
                holders.discard(txn_id)
                if not holders:
                    del self._pending[key]
        txn.pending.clear()

    def _started(self, txn_id: str, now: float) -> None:
        txn = self._txn(txn_id)
        if txn.state is _TxnState.EMPTY:
            txn.state = _TxnState.ONGOING
            txn.started_at = now

    def _record_txn_commit(
        self, request: TxnOffsetCommitRequest, version: int, code: int, *, fenced: bool
    ) -> None:
        self.txn_offset_commits.append(
            TxnOffsetCommitRecord(
                transactional_id=request.transactional_id,
                group_id=request.group_id,
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id,
                offsets=tuple(
                    (topic.name, p.partition_index, p.committed_offset)
                    for topic in request.topics
                    for p in topic.partitions
                ),
                api_version=version,
                error_code=code,
                fenced_by_proxy=fenced,
            )
        )

    def pending_offsets(self) -> Mapping[tuple[str, str, int], frozenset[str]]:
        """(group, topic, partition) -> transactional ids whose unfinished transaction
        sent offsets for it."""
        return {key: frozenset(ids) for key, ids in self._pending.items()}

    def due_timeouts(self, now: float) -> list[TimedOutTransaction]:
        """Transactions open longer than their timeout. Each is marked as being
        aborted and its producer epoch fenced; the driver sends the abort and reports
        with ``timeout_abort_done``."""
        due: list[TimedOutTransaction] = []
        for txn_id, txn in self._txns.items():
            if txn.state is not _TxnState.ONGOING or txn.producer_id < 0:
                continue
            open_for = now - txn.started_at
            if open_for * 1000.0 < txn.timeout_ms:
                continue
            txn.state = _TxnState.TIMING_OUT
            txn.fenced_epochs.add((txn.producer_id, txn.producer_epoch))
            due.append(
                TimedOutTransaction(
                    transactional_id=txn_id,
                    producer_id=txn.producer_id,
                    producer_epoch=txn.producer_epoch,
                    timeout_ms=txn.timeout_ms,
                    open_for_s=open_for,
                )
            )
        return due

    def produce_in_flight(self, txn_id: str) -> int:
        txn = self._txns.get(txn_id)
        return 0 if txn is None else txn.produce_in_flight

    def timeout_abort_done(self, timed_out: TimedOutTransaction, error_code: int) -> None:
        """The proxy's own EndTxn(abort) for ``timed_out`` was answered."""
        txn = self._txn(timed_out.transactional_id)
        if error_code == 0:
            self.timed_out.append(timed_out)
            self._clear_pending(timed_out.transactional_id, txn)
        else:
            self.failures.append(
                f"aborting timed-out transaction {timed_out.transactional_id!r} failed "
                f"with error {error_code} ({kerr.info(error_code).name}); left open"
            )
            txn.fenced_epochs.discard((timed_out.producer_id, timed_out.producer_epoch))
        if txn.state is _TxnState.TIMING_OUT:
            txn.state = _TxnState.EMPTY if error_code == 0 else _TxnState.ONGOING

    # ------------------------------------------------------------------ responses

    def on_response(self, context: RequestContext, frame: bytes, now: float) -> bytes | None:
        """The frame the client gets for Tansu's answer ``frame`` to ``context``'s
        request (None: drop the connection instead)."""
        if context.produce_txn_id is not None and context.expects_response:
            txn = self._txns.get(context.produce_txn_id)
            if txn is not None and txn.produce_in_flight > 0:
                txn.produce_in_flight -= 1
        request = context.request
        if context.replace_with is not None:
            if request is None:
                return None
            # Tansu did what the request asked (state is tracked from its answer), but
            # the client hears the injected error, or loses the connection (a lost
            # answer: a committed EndTxn stays committed however the client learns it).
            self._observe(context, frame, now)
            if context.replace_with == DROP_CONNECTION:
                return None
            response = error_response(request, context.replace_with, context.api_version)
            return self._encode(response, context)
        if context.api_key == _API_VERSIONS:
            return cap_api_version(frame, context.api_version, _FETCH, self.fetch_max_version)
        if request is None:
            return frame
        rewritten = self._observe(context, frame, now)
        return frame if rewritten is None else self._encode(rewritten, context)

    def on_abandoned(self, context: RequestContext) -> None:
        """The connection closed before Tansu answered ``context``'s request."""
        if context.produce_txn_id is not None and context.expects_response:
            txn = self._txns.get(context.produce_txn_id)
            if txn is not None and txn.produce_in_flight > 0:
                txn.produce_in_flight -= 1
        self._observe_lost(context)

    def _observe_lost(self, context: RequestContext) -> None:
        request = context.request
        if isinstance(request, EndTxnRequest):
            txn = self._txns.get(request.transactional_id)
            if txn is not None and txn.state is _TxnState.ENDING:
                txn.state = _TxnState.ONGOING  # outcome unknown: still open as far as we know

    def _observe(self, context: RequestContext, frame: bytes, now: float) -> Response | None:
        """Learn from Tansu's answer; return a rewritten response or None."""
        request = context.request
        assert request is not None
        try:
            _cid, response = decode_response(type(request), frame, api_version=context.api_version)
        except ProtocolError as exc:
            self.failures.append(
                f"cannot read Tansu's answer to API {context.api_key} v{context.api_version}: {exc}"
            )
            self._observe_lost(context)
            return None
        if isinstance(request, JoinGroupRequest):
            assert isinstance(response, JoinGroupResponse)
            self._on_join(request, response)
        elif isinstance(request, SyncGroupRequest):
            assert isinstance(response, SyncGroupResponse)
            self._forget_member(request.group_id, request.member_id, response.error_code)
        elif isinstance(request, HeartbeatRequest):
            assert isinstance(response, HeartbeatResponse)
            self._forget_member(request.group_id, request.member_id, response.error_code)
        elif isinstance(request, LeaveGroupRequest):
            assert isinstance(response, LeaveGroupResponse)
            self._on_leave(request, response)
        elif isinstance(request, OffsetCommitRequest):
            assert isinstance(response, OffsetCommitResponse)
            self._on_offset_commit(request, response)
        elif isinstance(request, OffsetFetchRequest):
            assert isinstance(response, OffsetFetchResponse)
            return self._fetched_offsets(request, response, context.api_version)
        elif isinstance(request, InitProducerIdRequest):
            assert isinstance(response, InitProducerIdResponse)
            self._on_init_producer_id(request, response)
        elif isinstance(request, AddPartitionsToTxnRequest):
            assert isinstance(response, AddPartitionsToTxnResponse)
            ok = any(
                p.partition_error_code == 0
                for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition
            )
            if ok and request.v3_and_below_transactional_id:
                self._started(request.v3_and_below_transactional_id, now)
        elif isinstance(request, AddOffsetsToTxnRequest):
            assert isinstance(response, AddOffsetsToTxnResponse)
            if response.error_code == 0:
                self._started(request.transactional_id, now)
        elif isinstance(request, EndTxnRequest):
            assert isinstance(response, EndTxnResponse)
            self._on_end_txn(request, response)
        elif isinstance(request, TxnOffsetCommitRequest):
            assert isinstance(response, TxnOffsetCommitResponse)
            self._on_txn_offset_commit(request, response, context)
        return None

    def _on_offset_commit(
        self, request: OffsetCommitRequest, response: OffsetCommitResponse
    ) -> None:
        if self._committed:
            # A plain commit after a transactional one replaces it (Tansu stored it).
            accepted = {
                (t.name, p.partition_index)
                for t in response.topics
                for p in t.partitions
                if p.error_code == 0
            }
            for topic in request.topics:
                for p in topic.partitions:
                    key = (request.group_id, topic.name, p.partition_index)
                    if key in self._committed and (topic.name, p.partition_index) in accepted:
                        self._committed[key] = _Offset(
                            p.committed_offset, p.committed_leader_epoch, p.committed_metadata
                        )
        codes = {p.error_code for t in response.topics for p in t.partitions}
        if 0 in codes:
            self._group(request.group_id).exists = True
        for code in codes:
            self._forget_member(request.group_id, request.member_id, code)

    def _on_init_producer_id(
        self, request: InitProducerIdRequest, response: InitProducerIdResponse
    ) -> None:
        if not request.transactional_id or response.error_code != 0:
            return
        txn = self._txn(request.transactional_id)
        # Tansu aborts the transaction the previous epoch left open (so does Kafka).
        self._clear_pending(request.transactional_id, txn)
        txn.producer_id = response.producer_id
        txn.producer_epoch = response.producer_epoch
        txn.timeout_ms = request.transaction_timeout_ms
        txn.state = _TxnState.EMPTY

    def _on_end_txn(self, request: EndTxnRequest, response: EndTxnResponse) -> None:
        txn = self._txn(request.transactional_id)
        if response.error_code == 0:
            self._clear_pending(request.transactional_id, txn, committed=request.committed)
            txn.state = _TxnState.EMPTY
        elif txn.state is _TxnState.ENDING:
            txn.state = _TxnState.ONGOING

    def _on_txn_offset_commit(
        self,
        request: TxnOffsetCommitRequest,
        response: TxnOffsetCommitResponse,
        context: RequestContext,
    ) -> None:
        accepted = [
            (t.name, p.partition_index)
            for t in response.topics
            for p in t.partitions
            if p.error_code == 0
        ]
        if accepted:
            self._group(request.group_id).exists = True
            txn = self._txn(request.transactional_id)
            sent = {
                (t.name, p.partition_index): _Offset(
                    p.committed_offset, p.committed_leader_epoch, p.committed_metadata
                )
                for t in request.topics
                for p in t.partitions
            }
            for topic, partition in accepted:
                key = (request.group_id, topic, partition)
                txn.pending.add(key)
                self._pending.setdefault(key, set()).add(request.transactional_id)
                if (topic, partition) in sent:
                    txn.offsets[key] = sent[(topic, partition)]
        codes = [p.error_code for t in response.topics for p in t.partitions]
        code = context.replace_with if context.replace_with is not None else (codes or [0])[0]
        self._record_txn_commit(request, context.api_version, code, fenced=False)

    def _fetched_offsets(
        self, request: OffsetFetchRequest, response: OffsetFetchResponse, version: int
    ) -> OffsetFetchResponse | None:
        """Tansu's OffsetFetch answer as Kafka's ``fetchOffsets`` would give it:

        * with requireStable (v7+), UNSTABLE_OFFSET_COMMIT (offset -1) for partitions
          with transactional offsets not yet committed or aborted;
        * the offsets of committed transactions as soon as they committed. Tansu
          applies a committed transaction's offsets only once every transaction that
          began earlier on one of the partitions it wrote has ended, and then in the
          order of their transactional ids, so its answer can be older than the last
          commit, or go back to an older one (docs/testing.md). The proxy answers, for
          each partition a transaction committed offsets for, the last offset committed
          there (by a transaction, or an OffsetCommit after it).
        """
        stable = version >= 7 and request.require_stable
        if not self._committed and not (stable and self._pending):
            return None
        if version <= 7:
            topics, changed = self._fix_offsets(request.group_id, response.topics, stable)
            return attrs.evolve(response, topics=topics) if changed else None
        groups = []
        changed = False
        for group in response.groups:
            group_topics, group_changed = self._fix_offsets(group.group_id, group.topics, stable)
            groups.append(attrs.evolve(group, topics=group_topics))
            changed = changed or group_changed
        return attrs.evolve(response, groups=tuple(groups)) if changed else None

    def _fix_offsets(
        self, group_id: str, topics: tuple[Any, ...], stable: bool
    ) -> tuple[tuple[Any, ...], bool]:
        """``topics`` (OffsetFetch topics of either layout) as ``_fetched_offsets``
        answers them."""
        out = []
        changed = False
        for topic in topics:
            partitions = []
            for p in topic.partitions:
                key = (group_id, topic.name, p.partition_index)
                committed = self._committed.get(key)
                if stable and key in self._pending:
                    p = attrs.evolve(
                        p,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=kerr.UNSTABLE_OFFSET_COMMIT,
                    )
                elif committed is not None and p.error_code == 0:
                    p = attrs.evolve(
                        p,
                        committed_offset=committed.offset,
                        committed_leader_epoch=committed.leader_epoch,
                        metadata=committed.metadata,
                    )
                partitions.append(p)
            changed = changed or tuple(partitions) != topic.partitions
            out.append(attrs.evolve(topic, partitions=tuple(partitions)))
        return tuple(out), changed

    # ------------------------------------------------------------------ for tests

    def group_view(self, group_id: str) -> tuple[int, Mapping[str, str | None]] | None:
        """(generation, member id -> instance id) as the proxy sees ``group_id``."""
        group = self._groups.get(group_id)
        if group is None or not group.exists:
            return None
        return group.generation, dict(group.members)
