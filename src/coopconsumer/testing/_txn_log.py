"""Transaction boundaries read from a partition's log: record batch headers and control
records, and the per-partition index of aborted transactions a Kafka broker keeps.

Pure: bytes in, facts out; no sockets, threads or clocks. The transaction proxy
(``_txn_proxy``) feeds each ``PartitionTxnIndex`` the raw record batches it reads from
Tansu (read_uncommitted) and asks it which aborted transactions overlap the range a
read_committed Fetch answer covers, which is what Kafka's ``AbortedTxn`` index answers
(``LocalLog.collectAbortedTransactions``).

Record batch v2 (KIP-98) header, big-endian, as written by every modern producer::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8
    | crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64
    | maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32
    | recordCount int32 | records...

Attributes: bits 0-2 compression, bit 4 transactional, bit 5 control. Only the header is
read for data batches, so their compression does not matter. A control batch holds one
record whose key is ``version int16, type int16`` (0 = ABORT, 1 = COMMIT); Kafka never
compresses control batches, and one that claims compression is refused
(``UnreadableBatchError``) rather than guessed at.

Imports only the standard library and attrs.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator
from typing import Final

import attrs

__all__ = [
    "ABORT",
    "COMMIT",
    "AbortedTxn",
    "BatchHeader",
    "PartitionTxnIndex",
    "UnreadableBatchError",
    "iter_batches",
]

#: Control record types (ControlRecordType.json).
ABORT: Final = 0
COMMIT: Final = 1

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_LOG_OVERHEAD: Final = 12  # baseOffset + batchLength, common to every message format
_COMPRESSION_MASK: Final = 0x07
_TRANSACTIONAL: Final = 0x10
_CONTROL: Final = 0x20


class UnreadableBatchError(ValueError):
    """A record batch the proxy cannot read: a compressed control batch or a malformed
    control record. Carries the batch's base offset."""

    def __init__(self, message: str, *, base_offset: int) -> None:
        super().__init__(message)
        self.base_offset = base_offset


@attrs.frozen(kw_only=True)
class BatchHeader:
    """What the proxy needs from one record batch.

    ``control_type`` is ``ABORT`` or ``COMMIT`` for a control batch, ``None`` for data
    (and for batches of the pre-v2 formats, which cannot be transactional).
    """

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    control_type: int | None

    @property
    def next_offset(self) -> int:
        """The offset after this batch."""
        return self.last_offset + 1


def _varint(data: bytes, pos: int, base_offset: int) -> tuple[int, int]:
    """A zigzag varint (record fields), as Kafka's ``ByteUtils.readVarint``."""
    raw = shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise UnreadableBatchError(
                "control record: truncated or overlong varint", base_offset=base_offset
            )
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _control_type(batch: bytes, base_offset: int) -> int:
    """The type in the key of a control batch's (first) record."""
    pos = _HEADER.size
    _length, pos = _varint(batch, pos, base_offset)
    pos += 1  # record attributes
    _timestamp_delta, pos = _varint(batch, pos, base_offset)
    _offset_delta, pos = _varint(batch, pos, base_offset)
    key_length, pos = _varint(batch, pos, base_offset)
    if key_length < 4 or pos + 4 > len(batch):
        raise UnreadableBatchError(
            f"control record key of {key_length} bytes (need version and type)",
            base_offset=base_offset,
        )
    version, kind = struct.unpack_from(">hh", batch, pos)
    if version != 0 or kind not in (ABORT, COMMIT):
        raise UnreadableBatchError(
            f"control record version {version} type {kind} is not ABORT/COMMIT v0",
            base_offset=base_offset,
        )
    return int(kind)


def iter_batches(records: bytes) -> Iterator[BatchHeader]:
    """The complete record batches in ``records`` (a Fetch answer's ``records``), in
    order. A truncated last batch (brokers may cut one at the size limit) is skipped.

    Raises :class:`UnreadableBatchError` for a compressed or malformed control batch.
    """
    pos = 0
    end = len(records)
    while pos + _LOG_OVERHEAD <= end:
        base_offset, length = struct.unpack_from(">qi", records, pos)
        size = _LOG_OVERHEAD + length
        if length < 0 or pos + size > end:
            return
        magic = records[pos + 16] if pos + 16 < end else -1
        if magic != 2 or size < _HEADER.size:
            # Message format v0/v1 (one offset per message set entry, never
            # transactional): only its offset matters.
            yield BatchHeader(
                base_offset=base_offset,
                last_offset=base_offset,
                producer_id=-1,
                producer_epoch=-1,
                transactional=False,
                control_type=None,
            )
            pos += size
            continue
        (
            _base,
            _length,
            _leader_epoch,
            _magic,
            _crc,
            attributes,
            last_offset_delta,
            _base_timestamp,
            _max_timestamp,
            producer_id,
            producer_epoch,
            _base_sequence,
            _count,
        ) = _HEADER.unpack_from(records, pos)
        control_type: int | None = None
        if attributes & _CONTROL:
            if attributes & _COMPRESSION_MASK:
                raise UnreadableBatchError(
                    f"control batch at offset {base_offset} claims compression codec "
                    f"{attributes & _COMPRESSION_MASK}; Kafka never compresses control batches",
                    base_offset=base_offset,
                )
            control_type = _control_type(records[pos : pos + size], base_offset)
        yield BatchHeader(
            base_offset=base_offset,
            last_offset=base_offset + last_offset_delta,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=bool(attributes & _TRANSACTIONAL),
            control_type=control_type,
        )
        pos += size


@attrs.frozen(kw_only=True)
class AbortedTxn:
    """An aborted transaction on one partition: its producer, its first offset and the
    offset of its ABORT marker (Kafka's ``AbortedTxn`` entry)."""

    producer_id: int
    first_offset: int
    last_offset: int


class PartitionTxnIndex:
    """Transactions of one partition, learned by reading its log in order.

    ``scanned_to`` is the next offset to read. ``feed`` takes batches from there on
    (earlier ones are ignored, so overlapping reads are harmless); it notes where each
    producer's open transaction began and turns an ABORT marker into an
    :class:`AbortedTxn`. Not thread-safe: the proxy holds a lock per index.
    """

    def __init__(self) -> None:
        self.scanned_to = 0
        self._open: dict[int, int] = {}  # producer id -> first offset of its open txn
        self._aborted: list[AbortedTxn] = []  # sorted by first offset
        self._firsts: list[int] = []

    def feed(self, records: bytes) -> int:
        """Read the batches in ``records``; return how many were new."""
        new = 0
        for batch in iter_batches(records):
            if batch.last_offset < self.scanned_to:
                continue
            new += 1
            self.scanned_to = batch.next_offset
            if batch.control_type is not None:
                first = self._open.pop(batch.producer_id, None)
                if batch.control_type == ABORT and first is not None:
                    entry = AbortedTxn(
                        producer_id=batch.producer_id,
                        first_offset=first,
                        last_offset=batch.base_offset,
                    )
                    at = bisect.bisect_right(self._firsts, first)
                    self._firsts.insert(at, first)
                    self._aborted.insert(at, entry)
            elif batch.transactional:
                self._open.setdefault(batch.producer_id, batch.base_offset)
        return new

    def undecided_before(self, upper: int) -> bool:
        """Whether a transaction that began below ``upper`` has no marker read yet, or
        the log below ``upper`` is not read yet: the index cannot answer for that range."""
        if self.scanned_to < upper:
            return True
        return any(first < upper for first in self._open.values())

    def aborted_overlapping(self, start: int, upper: int) -> tuple[AbortedTxn, ...]:
        """Aborted transactions with a record in ``[start, upper)``: first offset below
        ``upper`` and ABORT marker at or after ``start``, by first offset."""
        stop = bisect.bisect_left(self._firsts, upper)
        return tuple(t for t in self._aborted[:stop] if t.last_offset >= start)

    @property
    def aborted(self) -> tuple[AbortedTxn, ...]:
        """Every aborted transaction read so far, by first offset."""
        return tuple(self._aborted)

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each transaction with no marker read yet."""
        return dict(self._open)
