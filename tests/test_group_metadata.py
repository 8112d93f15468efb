"""``ConsumerGroupMetadata``: Java's four fields, and librdkafka's serialized form.

The golden bytes were captured from confluent-kafka 2.16's
``Consumer.consumer_group_metadata()`` on a Tansu broker (docs/exactly-once.md, "The
group metadata bytes"); the live comparison runs against the installed confluent-kafka
with no broker.
"""

from __future__ import annotations

import pickle
import struct

import pytest

from coopconsumer import ConsumerGroupMetadata, IncompatibleVersionError
from coopconsumer._io import _txn_producer
from coopconsumer._io._txn_producer import (
    group_metadata_format_mismatch,
    librdkafka_group_metadata,
    verify_group_metadata_format,
)

LITTLE = struct.pack("=i", 1) == b"\x01\x00\x00\x00"


def test_fields_and_bytes_of_a_member_in_a_generation() -> None:
    gm = ConsumerGroupMetadata(
        group_id="g-848a44f27d59",
        generation_id=0,
        member_id="rdkafka-ec03c789",
        group_instance_id=None,
    )
    assert (gm.group_id, gm.generation_id, gm.member_id, gm.group_instance_id) == (
        "g-848a44f27d59",
        0,
        "rdkafka-ec03c789",
        None,
    )
    assert bytes(gm) == b"CGMDv2:\x00\x00\x00\x00g-848a44f27d59\x00rdkafka-ec03c789\x00\x01"


@pytest.mark.skipif(not LITTLE, reason="the golden generation bytes are little-endian")
def test_golden_bytes_with_an_instance_id() -> None:
    gm = ConsumerGroupMetadata(
        group_id="grp", generation_id=123456789, member_id="m2", group_instance_id="static-1"
    )
    assert bytes(gm) == b"CGMDv2:\x15\xcd\x5b\x07grp\x00m2\x00\x00static-1\x00"


def test_not_in_a_generation_matches_an_unjoined_librdkafka_consumer() -> None:
    for instance in (None, "inst-1"):
        ours = ConsumerGroupMetadata(group_id="g", group_instance_id=instance)
        assert bytes(ours) == librdkafka_group_metadata("g", instance)
        assert ours.generation_id == -1
        assert ours.member_id == ""


@pytest.mark.parametrize(
    "gm",
    [
        ConsumerGroupMetadata(group_id="g", generation_id=7, member_id="m"),
        ConsumerGroupMetadata(
            group_id="g with space", generation_id=-1, member_id="", group_instance_id="i"
        ),
        ConsumerGroupMetadata(group_id="g", generation_id=2**31 - 1, member_id="x" * 300),
    ],
    ids=["member", "unjoined-static", "large"],
)
def test_round_trip_pickle_equality_and_immutability(gm: ConsumerGroupMetadata) -> None:
    assert ConsumerGroupMetadata.from_bytes(bytes(gm)) == gm
    again = pickle.loads(pickle.dumps(gm))
    assert again == gm
    assert again.member_id == gm.member_id
    assert type(again) is type(gm)
    assert hash(again) == hash(gm)
    with pytest.raises(AttributeError):
        gm.generation_id = 9
    assert "generation_id=" in repr(gm)


@pytest.mark.parametrize(
    "blob",
    [
        b"CGMDv1:g\x00",
        b"garbage",
        b"CGMDv2:\x00\x00",
        b"CGMDv2:\x01\x00\x00\x00g\x00m\x00",
        b"CGMDv2:\x01\x00\x00\x00g\x00m\x00\x02",
        b"CGMDv2:\x01\x00\x00\x00g\x00m\x00\x00inst",
    ],
)
def test_from_bytes_refuses_what_is_not_the_format(blob: bytes) -> None:
    with pytest.raises(ValueError, match="consumer group metadata"):
        ConsumerGroupMetadata.from_bytes(blob)


def test_the_installed_confluent_kafka_writes_the_same_bytes() -> None:
    assert group_metadata_format_mismatch(librdkafka_group_metadata) is None
    verify_group_metadata_format()


def test_a_different_format_is_detected() -> None:
    def without_flag(group_id: str, instance: str | None) -> bytes:
        return librdkafka_group_metadata(group_id, None)[:-1]

    def version_one(group_id: str, instance: str | None) -> bytes:
        return b"CGMDv1:" + group_id.encode() + b"\x00"

    assert group_metadata_format_mismatch(without_flag) is not None
    mismatch = group_metadata_format_mismatch(version_one)
    assert mismatch is not None
    assert mismatch[0].startswith(b"CGMDv1:")
    # At generation -1 the generation's byte order cannot show; the integration tests
    # check it, since the broker fences commits by the generation these bytes carry.


def test_verify_names_the_versions_when_the_format_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        _txn_producer, "librdkafka_group_metadata", lambda g, i: b"CGMDv3:" + g.encode()
    )
    verify_group_metadata_format.cache_clear()
    try:
        with pytest.raises(IncompatibleVersionError, match=r"confluent-kafka \d+\.\d+"):
            verify_group_metadata_format()
    finally:
        verify_group_metadata_format.cache_clear()
