"""Record batch headers, control records and the aborted-transaction index of the
transaction proxy (coopconsumer.testing._txn_log), on hand-built batches.

The property test replays what librdkafka does with a Fetch answer's
``AbortedTransactions`` (rdkafka_msgset_reader.c: per producer, skip transactional
batches at or after the first listed offset until that producer's ABORT marker) and
checks that exactly the records of committed transactions and non-transactional
producers stay visible, for random logs and random fetch windows.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coopconsumer.testing import AbortedTxn
from coopconsumer.testing._txn_log import (
    ABORT,
    COMMIT,
    PartitionTxnIndex,
    UnreadableBatchError,
    iter_batches,
)


def _varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def batch(
    base: int,
    *,
    count: int = 1,
    producer_id: int = -1,
    epoch: int = 0,
    transactional: bool = False,
    control: int | None = None,
    compression: int = 0,
    key: bytes | None = None,
) -> bytes:
    """A record batch v2 (CRC left 0: nobody here checks it)."""
    attributes = compression | (0x10 if transactional else 0) | (0x20 if control is not None else 0)
    if control is not None:
        control_key = key if key is not None else struct.pack(">hh", 0, control)
        body = b"\x00" + _varint(0) + _varint(0) + _varint(len(control_key)) + control_key
        body += _varint(6) + b"\x00\x00\x00\x00\x00\x00" + _varint(0)
        records = _varint(len(body)) + body
        count = 1
    else:
        records = b"".join(
            (lambda r: _varint(len(r)) + r)(
                b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(1) + b"v" + _varint(0)
            )
            for i in range(count)
        )
    tail = struct.pack(
        ">bIhiqqqhii",
        2,
        0,
        attributes,
        count - 1,
        0,
        0,
        producer_id,
        epoch,
        -1 if producer_id < 0 else 0,
        count,
    )
    after_length = struct.pack(">i", 0) + tail + records  # partitionLeaderEpoch first
    return struct.pack(">qi", base, len(after_length)) + after_length


def test_batches_are_read_with_their_transaction_attributes() -> None:
    log = (
        batch(0, count=3, producer_id=7, transactional=True)
        + batch(3, producer_id=7, transactional=True, control=COMMIT)
        + batch(4, count=2)
        + batch(6, producer_id=8, transactional=True, control=ABORT)
    )
    got = [
        (b.base_offset, b.last_offset, b.producer_id, b.transactional, b.control_type)
        for b in iter_batches(log)
    ]
    assert got == [
        (0, 2, 7, True, None),
        (3, 3, 7, True, COMMIT),
        (4, 5, -1, False, None),
        (6, 6, 8, True, ABORT),
    ]


def test_a_truncated_last_batch_is_left_for_the_next_read() -> None:
    full = batch(0, count=2) + batch(2, count=2)
    assert [b.base_offset for b in iter_batches(full[:-5])] == [0]
    assert [b.base_offset for b in iter_batches(full[:10])] == []


def test_a_compressed_control_batch_is_refused() -> None:
    log = batch(0, producer_id=1, transactional=True, control=ABORT, compression=1)
    with pytest.raises(UnreadableBatchError, match="compression codec 1") as info:
        list(iter_batches(log))
    assert info.value.base_offset == 0


def test_a_control_record_of_another_type_is_refused() -> None:
    log = batch(5, producer_id=1, transactional=True, control=ABORT, key=struct.pack(">hh", 0, 4))
    with pytest.raises(UnreadableBatchError, match="type 4"):
        list(iter_batches(log))


def test_compressed_data_batches_need_no_decompression() -> None:
    # Only a data batch's header is read: its (here fake) gzip records are never opened.
    log = batch(0, count=4, producer_id=3, transactional=True, compression=1)
    (only,) = iter_batches(log)
    assert (only.last_offset, only.producer_id, only.control_type) == (3, 3, None)


def test_the_index_turns_abort_markers_into_aborted_transactions() -> None:
    index = PartitionTxnIndex()
    log = (
        batch(0, count=2, producer_id=1, transactional=True)
        + batch(2, producer_id=2, transactional=True)
        + batch(3, producer_id=1, transactional=True, control=ABORT)
        + batch(4, producer_id=2, transactional=True)
        + batch(5, producer_id=2, transactional=True, control=COMMIT)
        + batch(6, producer_id=1, transactional=True)
    )
    assert index.feed(log) == 6
    assert index.aborted == (AbortedTxn(producer_id=1, first_offset=0, last_offset=3),)
    assert index.open_transactions() == {1: 6}
    assert index.scanned_to == 7
    assert index.undecided_before(6) is False
    assert index.undecided_before(7) is True  # producer 1's transaction at 6 has no marker
    assert index.undecided_before(8) is True  # not read that far
    # Reading the same bytes again changes nothing.
    assert index.feed(log) == 0
    assert len(index.aborted) == 1


def test_overlap_follows_kafka_first_below_upper_and_marker_at_or_after_start() -> None:
    index = PartitionTxnIndex()
    index.feed(
        batch(0, producer_id=1, transactional=True)
        + batch(1, producer_id=1, transactional=True, control=ABORT)
        + batch(2, producer_id=1, transactional=True)
        + batch(3, count=3, producer_id=1, transactional=True)
        + batch(6, producer_id=1, transactional=True, control=ABORT)
    )
    first = AbortedTxn(producer_id=1, first_offset=0, last_offset=1)
    second = AbortedTxn(producer_id=1, first_offset=2, last_offset=6)
    assert index.aborted_overlapping(0, 7) == (first, second)
    assert index.aborted_overlapping(2, 7) == (second,)  # the first ended before 2
    assert index.aborted_overlapping(4, 5) == (second,)  # starting inside the second
    assert index.aborted_overlapping(0, 2) == (first,)  # the second begins at 2
    assert index.aborted_overlapping(7, 9) == ()


def test_an_empty_abort_and_a_commit_without_transaction_are_harmless() -> None:
    index = PartitionTxnIndex()
    index.feed(
        batch(0, producer_id=4, transactional=True, control=ABORT)
        + batch(1, producer_id=5, transactional=True, control=COMMIT)
        + batch(2, count=2)
    )
    assert index.aborted == ()
    assert index.open_transactions() == {}


# --------------------------------------------------------------------------- property


@st.composite
def logs(draw: st.DrawFn) -> tuple[bytes, set[int]]:
    """A random partition log of 1-3 transactional producers and a plain one; returns
    the bytes and the offsets a read_committed reader must see."""
    steps = draw(
        st.lists(
            st.tuples(st.sampled_from([0, 1, 2, 3]), st.sampled_from(["data", "end"])),
            max_size=40,
        )
    )
    outcomes = iter(draw(st.lists(st.booleans(), min_size=len(steps), max_size=len(steps))))
    out = bytearray()
    offset = 0
    open_records: dict[int, list[int]] = {}
    visible: set[int] = set()
    for who, what in steps:
        commit = next(outcomes)
        if who == 0:  # the non-transactional producer
            out += batch(offset, count=2)
            visible.update((offset, offset + 1))
            offset += 2
        elif what == "data":
            out += batch(offset, count=2, producer_id=who, transactional=True)
            open_records.setdefault(who, []).extend((offset, offset + 1))
            offset += 2
        else:
            out += batch(
                offset, producer_id=who, transactional=True, control=COMMIT if commit else ABORT
            )
            records = open_records.pop(who, [])
            if commit:
                visible.update(records)
            offset += 1
    for who in list(open_records):  # end every transaction (a read_committed read is below the LSO)
        out += batch(offset, producer_id=who, transactional=True, control=ABORT)
        offset += 1
    return bytes(out), visible


def _librdkafka_filter(records: bytes, aborted: Iterable[AbortedTxn]) -> set[int]:
    """Offsets librdkafka delivers from ``records`` given the aborted list."""
    pending: dict[int, list[int]] = {}
    for entry in sorted(aborted, key=lambda t: t.first_offset):
        pending.setdefault(entry.producer_id, []).append(entry.first_offset)
    seen: set[int] = set()
    for b in iter_batches(records):
        if b.control_type is not None:
            starts = pending.get(b.producer_id)
            # rd_kafka_aborted_txns_pop_offset: only a transaction begun by now ends.
            if b.control_type == ABORT and starts and starts[0] <= b.base_offset:
                starts.pop(0)
            continue
        starts = pending.get(b.producer_id)
        if b.transactional and starts and b.base_offset >= starts[0]:
            continue
        seen.update(range(b.base_offset, b.last_offset + 1))
    return seen


@given(logs(), st.data())
def test_librdkafka_sees_exactly_the_committed_records_of_any_window(
    log_and_visible: tuple[bytes, set[int]], data: st.DataObject
) -> None:
    log, visible = log_and_visible
    headers = list(iter_batches(log))
    if not headers:
        return
    starts = [0]  # byte position of each batch, and the end
    for _header in headers:
        (length,) = struct.unpack_from(">i", log, starts[-1] + 8)
        starts.append(starts[-1] + 12 + length)
    index = PartitionTxnIndex()
    # The proxy reads the log in pieces: a prefix first, then everything.
    index.feed(log[: starts[data.draw(st.integers(0, len(headers)))]])
    index.feed(log)
    # A fetch window: from inside one batch to the end of a later one.
    first = data.draw(st.integers(0, len(headers) - 1))
    last = data.draw(st.integers(first, len(headers) - 1))
    start = data.draw(st.integers(headers[first].base_offset, headers[first].last_offset))
    window = log[starts[first] : starts[last + 1]]
    upper = headers[last].next_offset
    assert not index.undecided_before(upper)
    delivered = _librdkafka_filter(window, index.aborted_overlapping(start, upper))
    expected = {o for o in visible if headers[first].base_offset <= o < upper}
    assert delivered == expected
