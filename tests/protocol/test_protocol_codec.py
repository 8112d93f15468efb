"""The generic codec: round trips at every version, version rules, headers, limits."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from _protocol_strategies import (
    ALL_TOP_LEVEL,
    REQUESTS,
    RESPONSES,
    build_with,
    class_versions,
    instances,
    non_default_value,
    reachable_structs,
    wire_fields,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer._errors import ProtocolError
from coopconsumer._protocol import (
    EncodeError,
    Request,
    Response,
    Struct,
    decode,
    decode_request,
    decode_response,
    encode,
    encode_request,
    encode_response,
    peek_correlation_id,
    request_header_version,
    response_header_version,
)
from coopconsumer._protocol._codec import _PLANS, _plan, read_uvarint, uvarint
from coopconsumer._protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
    FindCoordinatorRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    MemberIdentity,
    MetadataRequest,
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)

ALL_CASES = class_versions(ALL_TOP_LEVEL)


def _id(case: Any) -> str:
    if isinstance(case, tuple):
        cls, version = case
        return f"{cls.__name__}-v{version}"
    return str(case)


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("case", ALL_CASES, ids=_id)
@settings(max_examples=15)
@given(data=st.data())
def test_every_message_round_trips_at_every_version(
    case: tuple[type[Struct], int], data: st.DataObject
) -> None:
    cls, version = case
    msg = data.draw(instances(cls, version))
    raw = encode(msg, version)
    assert decode(cls, raw, version, exact=True) == msg
    # Encoding is deterministic and decoding is its inverse on bytes, too.
    assert encode(decode(cls, raw, version), version) == raw


@pytest.mark.parametrize("case", class_versions(REQUESTS), ids=_id)
@settings(max_examples=8)
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_requests_round_trip_with_their_header(
    case: tuple[type[Request], int], data: st.DataObject, correlation_id: int
) -> None:
    cls, version = case
    msg = data.draw(instances(cls, version))
    client_id = data.draw(st.none() | st.text(max_size=8))
    frame = encode_request(
        msg, api_version=version, correlation_id=correlation_id, client_id=client_id
    )
    header, decoded = decode_request(frame, request_types={cls.API_KEY: cls})
    assert decoded == msg
    assert (header.api_key, header.api_version) == (cls.API_KEY, version)
    assert (header.correlation_id, header.client_id) == (correlation_id, client_id)


@pytest.mark.parametrize("case", class_versions(RESPONSES), ids=_id)
@settings(max_examples=8)
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_responses_round_trip_with_their_header(
    case: tuple[type[Response], int], data: st.DataObject, correlation_id: int
) -> None:
    cls, version = case
    msg = data.draw(instances(cls, version))
    frame = encode_response(msg, api_version=version, correlation_id=correlation_id)
    assert peek_correlation_id(frame) == correlation_id
    assert decode_response(cls, frame, api_version=version) == (correlation_id, msg)


def test_every_request_names_its_response_and_matching_versions() -> None:
    for req in REQUESTS:
        resp = req.RESPONSE_TYPE
        assert resp in RESPONSES
        assert resp.API_KEY == req.API_KEY
        assert (resp.MIN_VERSION, resp.MAX_VERSION) == (req.MIN_VERSION, req.MAX_VERSION)
        assert resp.FLEXIBLE_VERSION == req.FLEXIBLE_VERSION


def test_every_field_has_a_default_so_callers_may_omit_it() -> None:
    for cls, _version in ALL_CASES:
        for nested in reachable_structs(cls, cls.MAX_VERSION):
            nested()  # raises TypeError if any field is mandatory


# --------------------------------------------------------------------------- version rules


def _absent_cases() -> list[tuple[type[Struct], int, type[Struct], str]]:
    cases = []
    for cls, version in ALL_CASES:
        for nested in reachable_structs(cls, version):
            for field, meta in wire_fields(nested):
                if version not in meta.versions:
                    cases.append((cls, version, nested, field.name))
    return cases


ABSENT_CASES = _absent_cases()


@pytest.mark.parametrize(
    "case", ABSENT_CASES, ids=lambda c: f"{c[0].__name__}-v{c[1]}-{c[2].__name__}.{c[3]}"
)
def test_a_non_default_field_missing_at_a_version_raises_unless_ignorable(
    case: tuple[type[Struct], int, type[Struct], str],
) -> None:
    cls, version, nested, name = case
    field = attrs_field(nested, name)
    meta = _meta(nested, name)
    value = non_default_value(meta, field.default)
    assert value != field.default
    msg = build_with(cls, version, nested, name, value)
    assert msg is not None
    if meta.ignorable:
        # Dropped silently, as Java does for ignorable fields: it reads back as default.
        back = decode(cls, encode(msg, version), version, exact=True)
        assert back == build_with(cls, version, nested, name, field.default)
    else:
        with pytest.raises(EncodeError, match=name):
            encode(msg, version)


def attrs_field(cls: type[Struct], name: str) -> Any:
    return next(f for f, _m in wire_fields(cls) if f.name == name)


def _meta(cls: type[Struct], name: str) -> Any:
    return next(m for f, m in wire_fields(cls) if f.name == name)


def test_absent_field_cases_cover_the_known_version_gates() -> None:
    names = {(c[0].__name__, c[1], c[3]) for c in ABSENT_CASES}
    assert ("JoinGroupRequest", 4, "group_instance_id") in names
    assert ("OffsetCommitRequest", 5, "retention_time_ms") in names
    assert ("LeaveGroupRequest", 3, "member_id") in names
    assert ("FindCoordinatorRequest", 4, "key") in names


def test_static_membership_needs_join_group_v5() -> None:
    request = JoinGroupRequest(group_id="g", group_instance_id="instance-1")
    with pytest.raises(EncodeError) as info:
        encode(request, 4)
    assert info.value.api_key == 11
    assert info.value.api_version == 4
    assert encode(request, 5)


def test_ignorable_reason_is_dropped_before_v8() -> None:
    request = JoinGroupRequest(group_id="g", reason="rebalance needed")
    assert decode(JoinGroupRequest, encode(request, 7), 7).reason is None
    assert decode(JoinGroupRequest, encode(request, 8), 8).reason == "rebalance needed"


def test_leave_group_batch_members_only_from_v3() -> None:
    request = LeaveGroupRequest(group_id="g", members=(MemberIdentity(member_id="m"),))
    with pytest.raises(EncodeError, match="members"):
        encode(request, 2)
    with pytest.raises(EncodeError, match="member_id"):
        encode(LeaveGroupRequest(group_id="g", member_id="m"), 3)


def test_none_in_a_field_that_is_not_nullable_at_that_version_raises() -> None:
    # ProtocolName became nullable in v7 (KIP-559).
    response = JoinGroupResponse(protocol_name=None)
    with pytest.raises(EncodeError, match="protocol_name"):
        encode(response, 6)
    assert decode(JoinGroupResponse, encode(response, 7), 7).protocol_name is None
    # OffsetFetch's "all topics" (null) exists from v2.
    with pytest.raises(EncodeError, match="topics"):
        encode(OffsetFetchRequest(group_id="g", topics=None), 1)
    assert decode(OffsetFetchRequest, encode(OffsetFetchRequest(topics=None), 2), 2).topics is None


def test_versions_outside_the_supported_range_are_refused() -> None:
    with pytest.raises(EncodeError):
        encode(OffsetCommitRequest(), 1)  # Kafka 4.0 removed v0-1
    with pytest.raises(EncodeError):
        encode(JoinGroupRequest(), 10)
    with pytest.raises(ProtocolError):
        decode(JoinGroupResponse, b"", 10)
    with pytest.raises(EncodeError):
        encode_request(HeartbeatRequest(), api_version=5, correlation_id=1, client_id=None)


def test_values_that_do_not_fit_their_wire_type_raise_encode_error() -> None:
    with pytest.raises(EncodeError):
        encode(HeartbeatRequest(generation_id=2**31), 0)
    too_big = MetadataResponse(
        topics=(
            MetadataResponseTopic(partitions=(MetadataResponsePartition(replica_nodes=(2**40,)),)),
        )
    )
    with pytest.raises(EncodeError):
        encode(too_big, 0)
    with pytest.raises(EncodeError, match="expected JoinGroupResponseMember"):
        encode(JoinGroupResponse(members=(MemberIdentity(),)), 5)  # type: ignore[arg-type]


def test_lists_are_accepted_where_tuples_are_declared() -> None:
    request = OffsetCommitRequest(
        topics=[  # type: ignore[arg-type]
            OffsetCommitRequestTopic(
                name="t",
                partitions=[OffsetCommitRequestPartition(committed_offset=5)],  # type: ignore[arg-type]
            )
        ]
    )
    decoded = decode(OffsetCommitRequest, encode(request, 8), 8)
    assert decoded.topics[0].partitions[0].committed_offset == 5


def test_plans_are_compiled_once_per_class_and_version() -> None:
    encode(HeartbeatRequest(group_id="g"), 4)
    plan = _plan(HeartbeatRequest, 4, True)
    encode(HeartbeatRequest(group_id="h"), 4)
    assert _plan(HeartbeatRequest, 4, True) is plan
    assert _PLANS[(HeartbeatRequest, 4, True)] is plan


# --------------------------------------------------------------------------- headers


def test_header_versions_follow_flexibility() -> None:
    assert request_header_version(JoinGroupRequest, 5) == 1
    assert request_header_version(JoinGroupRequest, 6) == 2
    assert response_header_version(JoinGroupResponse, 5) == 0
    assert response_header_version(JoinGroupResponse, 6) == 1
    # KIP-511: the ApiVersions response header stays v0 even at flexible versions.
    assert request_header_version(ApiVersionsRequest, 3) == 2
    assert response_header_version(ApiVersionsResponse, 3) == 0


def test_api_versions_v3_response_is_read_with_header_v0() -> None:
    body = encode(
        ApiVersionsResponse(
            api_keys=(ApiVersionsResponseApiVersion(api_key=11, min_version=0, max_version=9),)
        ),
        3,
    )
    frame = struct.pack(">i", 99) + body  # no header tagged-field byte
    correlation_id, response = decode_response(ApiVersionsRequest, frame, api_version=3)
    assert correlation_id == 99
    assert isinstance(response, ApiVersionsResponse)
    assert response.api_keys[0].max_version == 9


def test_api_versions_answered_in_v0_format_is_read_as_v0() -> None:
    # An older broker answers an ApiVersions v3 request with UNSUPPORTED_VERSION in the
    # v0 format (KIP-511), listing what it supports; the client then retries lower.
    body = struct.pack(">hi", 35, 1) + struct.pack(">hhh", 18, 0, 2)
    frame = struct.pack(">i", 4) + body
    correlation_id, response = decode_response(ApiVersionsRequest, frame, api_version=3)
    assert correlation_id == 4
    assert isinstance(response, ApiVersionsResponse)
    assert response.error_code == 35
    assert response.api_keys == (
        ApiVersionsResponseApiVersion(api_key=18, min_version=0, max_version=2),
    )
    with pytest.raises(ProtocolError):
        decode_response(ApiVersionsRequest, frame[:-1], api_version=3)
    # Other APIs get no such fallback.
    with pytest.raises(ProtocolError):
        decode_response(HeartbeatResponse, struct.pack(">i", 1) + b"\x05", api_version=4)


def test_flexible_response_header_tagged_fields_are_skipped() -> None:
    body = encode(JoinGroupResponse(generation_id=3, member_id="m"), 6)
    # header v1: correlation id, then one unknown tagged field (tag 7, 2 bytes).
    frame = struct.pack(">i", 5) + bytes([1, 7, 2, 0xAA, 0xBB]) + body
    correlation_id, response = decode_response(JoinGroupResponse, frame, api_version=6)
    assert (correlation_id, response.generation_id, response.member_id) == (5, 3, "m")


def test_trailing_bytes_after_a_response_body_are_ignored() -> None:
    frame = encode_response(JoinGroupResponse(member_id="m"), api_version=5, correlation_id=1)
    assert (
        decode_response(JoinGroupResponse, frame + b"\x00\x01", api_version=5)[1].member_id == "m"
    )
    body = encode(JoinGroupResponse(member_id="m"), 5)
    with pytest.raises(ProtocolError, match="trailing"):
        decode(JoinGroupResponse, body + b"\x00", 5, exact=True)


def test_trailing_bytes_after_a_request_are_an_error() -> None:
    frame = encode_request(HeartbeatRequest(), api_version=0, correlation_id=1, client_id="c")
    with pytest.raises(ProtocolError, match="trailing"):
        decode_request(frame + b"\x00")


def test_peek_correlation_id_needs_four_bytes() -> None:
    assert peek_correlation_id(b"\x00\x00\x01\x00rest") == 256
    with pytest.raises(ProtocolError):
        peek_correlation_id(b"\x00\x00\x01")


def test_unknown_request_key_is_a_protocol_error() -> None:
    frame = struct.pack(">hhih", 999, 0, 1, -1)
    with pytest.raises(ProtocolError, match="unknown API key"):
        decode_request(frame)


# --------------------------------------------------------------------------- tagged fields


def test_tagged_fields_are_written_only_when_not_default_and_read_back() -> None:
    plain = encode(ApiVersionsResponse(), 3)
    tagged = encode(ApiVersionsResponse(finalized_features_epoch=7, zk_migration_ready=True), 3)
    assert plain.endswith(b"\x00")
    # count 2; tag 1 size 8 epoch; tag 3 size 1 true -- ascending tag order.
    assert tagged.endswith(bytes([2, 1, 8]) + struct.pack(">q", 7) + bytes([3, 1, 1]))
    back = decode(ApiVersionsResponse, tagged, 3, exact=True)
    assert (back.finalized_features_epoch, back.zk_migration_ready) == (7, True)


def test_unknown_tagged_fields_are_skipped() -> None:
    body = bytearray(encode(HeartbeatRequest(group_id="g"), 4))
    assert body[-1] == 0
    body[-1:] = bytes([2, 5, 3]) + b"abc" + bytes([9, 0])
    assert decode(HeartbeatRequest, bytes(body), 4, exact=True).group_id == "g"


def test_a_tagged_field_whose_value_disagrees_with_its_size_is_malformed() -> None:
    body = bytearray(encode(ApiVersionsResponse(), 3))
    # tag 1 (int64 epoch) declared with size 4: the value needs 8 bytes.
    body[-1:] = bytes([1, 1, 4]) + b"\x00" * 8
    with pytest.raises(ProtocolError, match="tagged field 1"):
        decode(ApiVersionsResponse, bytes(body), 3)


# --------------------------------------------------------------------------- limits


@pytest.mark.parametrize("version", [3, 4])
def test_strings_longer_than_kafka_allows_are_refused_in_both_encodings(version: int) -> None:
    # Kafka caps every string at 0x7fff bytes; in the compact (v4) encoding nothing in
    # the length's own width stops a longer one, so the codec must.
    longest = HeartbeatRequest(group_id="x" * 0x7FFF)
    assert decode(HeartbeatRequest, encode(longest, version), version) == longest
    with pytest.raises(EncodeError, match="group_id"):
        encode(HeartbeatRequest(group_id="x" * 0x8000), version)


def test_compact_strings_longer_than_kafka_allows_are_malformed() -> None:
    body = uvarint(0x8000 + 1) + b"a" * 0x8000  # group_id
    body += struct.pack(">i", 1) + b"\x01" + b"\x00" + b"\x00"  # generation, member, tags
    with pytest.raises(ProtocolError, match=r"group_id.*32767"):
        decode(HeartbeatRequest, body, 4)
    # Bytes fields have no such cap.
    big = SyncGroupResponse(assignment=b"a" * 0x8000)
    assert decode(SyncGroupResponse, encode(big, 4), 4) == big


def test_huge_declared_lengths_fail_before_allocating() -> None:
    # Metadata v0 response: brokers array claims 2**31-1 elements in 4 bytes.
    with pytest.raises(ProtocolError, match="exceed"):
        decode(MetadataResponse, struct.pack(">i", 2**31 - 1), 0)
    # A replica list claiming 10**9 int32s.
    raw = struct.pack(">i", 0) + struct.pack(">i", 1) + struct.pack(">hh", 0, 1) + b"t"
    raw += struct.pack(">i", 1) + struct.pack(">hii", 0, 0, 0) + struct.pack(">i", 10**9)
    with pytest.raises(ProtocolError, match="exceed"):
        decode(MetadataResponse, raw, 0)
    # Compact string whose varint length is far beyond the input.
    with pytest.raises(ProtocolError):
        decode(HeartbeatRequest, uvarint(2**31), 4)


def test_negative_lengths_other_than_null_are_malformed() -> None:
    with pytest.raises(ProtocolError, match="bad length"):
        decode(HeartbeatRequest, struct.pack(">h", -2), 0)
    with pytest.raises(ProtocolError, match="bad length"):
        decode(SyncGroupResponse, struct.pack(">hi", 0, -3), 0)


def test_null_in_a_non_nullable_field_reads_as_empty() -> None:
    # librdkafka's mock cluster answers a failed SyncGroup with a null assignment
    # (bytes are not nullable there); reading it as empty keeps the error code usable.
    response = decode(SyncGroupResponse, struct.pack(">hi", 27, -1), 0, exact=True)
    assert (response.error_code, response.assignment) == (27, b"")
    assert decode(HeartbeatRequest, struct.pack(">hih", -1, 0, -1), 0).group_id == ""
    # Same for arrays: JoinGroupResponse.members is not nullable.
    raw = encode(JoinGroupResponse(), 5)[:-4] + struct.pack(">i", -1)
    assert decode(JoinGroupResponse, raw, 5, exact=True).members == ()


def test_overlong_varints_are_malformed() -> None:
    with pytest.raises(ProtocolError, match="varint"):
        decode(HeartbeatRequest, b"\xff" * 6, 4)


@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trips(value: int) -> None:
    raw = uvarint(value)
    assert read_uvarint(raw, 0) == (value, len(raw))


def test_uvarint_known_encodings() -> None:
    assert uvarint(0) == b"\x00"
    assert uvarint(127) == b"\x7f"
    assert uvarint(128) == b"\x80\x01"
    assert uvarint(300) == b"\xac\x02"
    assert uvarint(2**32 - 1) == b"\xff\xff\xff\xff\x0f"


@pytest.mark.parametrize("value", [-1, 2**32])
def test_uvarint_refuses_what_java_cannot_read(value: int) -> None:
    # Java's readUnsignedVarint stops after 5 bytes (32 bits); wider would be garbage.
    with pytest.raises(OverflowError):
        uvarint(value)


def test_metadata_request_null_topics_means_all_from_v1() -> None:
    assert encode(MetadataRequest(topics=None), 1) == b"\xff\xff\xff\xff"
    with pytest.raises(EncodeError):
        encode(MetadataRequest(topics=None), 0)


def test_find_coordinator_batches_keys_from_v4() -> None:
    v4 = FindCoordinatorRequest(key_type=0, coordinator_keys=("g1", "g2"))
    back = decode(FindCoordinatorRequest, encode(v4, 4), 4, exact=True)
    assert back.coordinator_keys == ("g1", "g2")
    with pytest.raises(EncodeError, match="coordinator_keys"):
        encode(v4, 3)


def test_join_group_response_members_carry_instance_ids_from_v5() -> None:
    response = JoinGroupResponse(
        members=(JoinGroupResponseMember(member_id="m", group_instance_id="i", metadata=b"x"),)
    )
    assert decode(JoinGroupResponse, encode(response, 5), 5).members[0].group_instance_id == "i"
    # Ignorable: dropped (as Java does) when talking to an older broker version.
    assert decode(JoinGroupResponse, encode(response, 4), 4).members[0].group_instance_id is None


def test_sync_group_assignments_keep_bytes() -> None:
    request = SyncGroupRequest(group_id="g", generation_id=1, member_id="m")
    assert decode(SyncGroupRequest, encode(request, 5), 5, exact=True) == request
