"""coopconsumer.consumer_protocol: Java-compatible Subscription/Assignment bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coopconsumer import ProtocolError, TopicPartition
from coopconsumer.assignors import Assignment, Subscription
from coopconsumer.assignors._compact import CompactPartitions, PartitionSpace
from coopconsumer.consumer_protocol import (
    CONSUMER_PROTOCOL_VERSION,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


def h(text: str) -> bytes:
    lines = [line.split("#", 1)[0] for line in text.splitlines()]
    return bytes.fromhex("".join("".join(lines).split()))


TP = TopicPartition

# Hand-written from ConsumerProtocolSubscription.json, each with its int16 version.
SUB_V0 = h("""
    0000                        # version 0
    00000002 0001 61 0001 62    # Topics ["a", "b"]
    00000002 abcd               # UserData
""")
SUB_V1 = h("""
    0001
    00000002 0001 61 0001 62
    00000002 abcd
    00000001 0001 61 00000002 00000000 00000002   # OwnedPartitions a: [0, 2]
""")
SUB_V2 = h("""
    0002
    00000002 0001 61 0001 62
    00000002 abcd
    00000001 0001 61 00000002 00000000 00000002
    00000009                    # GenerationId 9
""")
SUB_V3 = h("""
    0003
    00000002 0001 61 0001 62
    00000002 abcd
    00000001 0001 61 00000002 00000000 00000002
    00000009
    0002 7231                   # RackId "r1"
""")

FULL = Subscription(
    topics=("a", "b"),
    user_data=b"\xab\xcd",
    owned_partitions=(TP("a", 0), TP("a", 2)),
    generation_id=9,
    rack_id="r1",
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (SUB_V0, Subscription(topics=("a", "b"), user_data=b"\xab\xcd")),
        (
            SUB_V1,
            Subscription(
                topics=("a", "b"), user_data=b"\xab\xcd", owned_partitions=(TP("a", 0), TP("a", 2))
            ),
        ),
        (
            SUB_V2,
            Subscription(
                topics=("a", "b"),
                user_data=b"\xab\xcd",
                owned_partitions=(TP("a", 0), TP("a", 2)),
                generation_id=9,
            ),
        ),
        (SUB_V3, FULL),
    ],
    ids=["v0", "v1", "v2", "v3"],
)
def test_reads_every_version(data: bytes, expected: Subscription) -> None:
    assert decode_subscription(data) == expected


def test_writes_version_3() -> None:
    assert CONSUMER_PROTOCOL_VERSION == 3
    assert encode_subscription(FULL) == SUB_V3


def test_a_newer_version_is_read_as_v3_ignoring_appended_fields() -> None:
    # A hypothetical v4 appends a field (here a string and an int32) after RackId.
    v4 = struct.pack(">h", 4) + SUB_V3[2:] + h("0003 787979 0000002a")
    assert decode_subscription(v4) == FULL
    assignment_v4 = (
        struct.pack(">h", 7) + encode_assignment(Assignment(partitions=[TP("a", 1)]))[2:]
    )
    assert decode_assignment(assignment_v4 + b"\x01\x02") == Assignment(partitions=[TP("a", 1)])


def test_topics_and_partitions_are_sorted_on_write() -> None:
    sub = Subscription(
        topics=["z", "a", "m"],
        owned_partitions=[TP("z", 3), TP("a", 5), TP("z", 1), TP("a", 0)],
    )
    back = decode_subscription(encode_subscription(sub))
    assert back.topics == ("a", "m", "z")
    assert back.owned_partitions == (TP("a", 0), TP("a", 5), TP("z", 1), TP("z", 3))
    assignment = Assignment(partitions=[TP("b", 2), TP("a", 9), TP("b", 0), TP("a", 1)])
    raw = encode_assignment(assignment)
    assert raw == h("""
        0003
        00000002
          0001 61 00000002 00000001 00000009
          0001 62 00000002 00000000 00000002
        00000000                # empty user data, never null
    """)
    assert decode_assignment(raw).partitions == (TP("a", 1), TP("a", 9), TP("b", 0), TP("b", 2))


def test_empty_user_data_is_written_as_empty_bytes_and_null_reads_as_empty() -> None:
    raw = encode_subscription(Subscription(topics=["t"]))
    # version, topics ["t"], user data length 0 (not -1), no owned, generation -1, null rack
    assert raw == h("0003 00000001 0001 74 00000000 00000000 ffffffff ffff")
    null_user_data = h("0000 00000001 0001 74 ffffffff")
    assert decode_subscription(null_user_data).user_data == b""
    assert decode_assignment(h("0000 00000000 ffffffff")).user_data == b""


def test_group_instance_id_is_not_on_the_wire() -> None:
    with_id = Subscription(topics=["t"], group_instance_id="static-1")
    raw = encode_subscription(with_id)
    assert raw == encode_subscription(Subscription(topics=["t"]))
    assert decode_subscription(raw).group_instance_id is None


def test_malformed_bytes_name_the_member() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_subscription(SUB_V3[:-3], member_id="consumer-1-abc")
    assert info.value.member_id == "consumer-1-abc"
    assert "consumer-1-abc" in str(info.value)
    with pytest.raises(ProtocolError) as info:
        decode_assignment(b"\x00", member_id="m-2")
    assert info.value.member_id == "m-2"
    with pytest.raises(ProtocolError, match="negative version"):
        decode_assignment(h("ffff 00000000 00000000"), member_id="m-3")


def test_decoding_without_a_member_id_still_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        decode_subscription(h("0001 00000001"))


partitions = st.lists(
    st.builds(TP, st.sampled_from(["a", "b", "topic-c", "ü"]), st.integers(0, 2**31 - 1)),
    unique=True,
    max_size=20,
)


@given(
    topics=st.lists(st.text(max_size=6), unique=True, max_size=5),
    owned=partitions,
    user_data=st.binary(max_size=10),
    generation_id=st.integers(-1, 2**31 - 1),
    rack_id=st.none() | st.text(max_size=4),
)
def test_subscription_round_trip_up_to_ordering(
    topics: list[str],
    owned: list[TopicPartition],
    user_data: bytes,
    generation_id: int,
    rack_id: str | None,
) -> None:
    sub = Subscription(
        topics=topics,
        owned_partitions=owned,
        user_data=user_data,
        generation_id=generation_id,
        rack_id=rack_id,
    )
    back = decode_subscription(encode_subscription(sub))
    assert back.topics == tuple(sorted(topics))
    assert back.owned_partitions == tuple(sorted(owned))
    assert (back.user_data, back.generation_id, back.rack_id) == (user_data, generation_id, rack_id)


@given(owned=partitions, user_data=st.binary(max_size=10))
def test_assignment_round_trip_up_to_ordering(
    owned: list[TopicPartition], user_data: bytes
) -> None:
    back = decode_assignment(encode_assignment(Assignment(partitions=owned, user_data=user_data)))
    assert back == Assignment(partitions=sorted(owned), user_data=user_data)


def test_partition_numbers_beyond_int32_are_refused() -> None:
    with pytest.raises(ProtocolError):
        encode_assignment(Assignment(partitions=[TP("a", 2**31)]))


@st.composite
def compact_assignments(draw: st.DrawFn) -> Assignment:
    """A built-in sticky assignor's kind of result: kept partitions, then index runs,
    over topics in sorted order or not."""
    topics = draw(st.lists(st.sampled_from(["a", "b", "c", "ü"]), unique=True, min_size=1))
    counts = {t: draw(st.integers(0, 5)) for t in topics}
    space = PartitionSpace(counts)
    every = [TP(t, p) for t, n in counts.items() for p in range(n)]
    kept: list[TopicPartition] = []
    if every:
        kept = draw(st.lists(st.sampled_from(every), max_size=4))
    odd = draw(st.booleans())
    if kept and odd:
        kept.append(TP(kept[0].topic, True))  # odd but equal to partition 1: generic path
    runs: list[list[int]] = []
    if space.total:
        runs = draw(st.lists(st.lists(st.integers(0, space.total - 1), max_size=5), max_size=3))
    return Assignment(
        partitions=CompactPartitions(kept, space, runs), user_data=draw(st.binary(max_size=6))
    )


@given(compact_assignments())
def test_a_compact_assignment_is_written_as_the_tuple_it_equals(assignment: Assignment) -> None:
    # The built-in sticky assignors' CompactPartitions is written from its numbers,
    # byte for byte as the generic codec writes the same partitions.
    assert isinstance(assignment.partitions, CompactPartitions)
    as_tuple = Assignment(partitions=tuple(assignment.partitions), user_data=assignment.user_data)
    assert encode_assignment(assignment) == encode_assignment(as_tuple)


def test_a_compact_assignment_from_the_assignor_is_written_without_objects() -> None:
    space = PartitionSpace({"a": 4, "b": 4})
    compact = CompactPartitions([TP("b", 3)], space, [range(0, 8, 3)])
    assert compact.sorted_numbers() is not None  # the path that makes no TopicPartition
    expected = h("""
        0003                           # version 3
        00000002                       # 2 topics
        0001 61  00000002 00000000 00000003   # a: 0, 3
        0001 62  00000002 00000002 00000003   # b: 2, 3
        00000000                       # empty user data
    """)
    assert encode_assignment(Assignment(partitions=compact)) == expected
