"""Requests whose data moved between fields across versions: ``_shapes.for_version``."""

from __future__ import annotations

import pytest

from coopconsumer._protocol import EncodeError, decode, encode_request
from coopconsumer._protocol._shapes import _DELETE_TOPICS, for_version
from coopconsumer._protocol.admin_messages import DeleteTopicsRequest
from coopconsumer._protocol.messages import JoinGroupRequest, LeaveGroupRequest, MemberIdentity


def _roundtrip(request: LeaveGroupRequest, version: int) -> LeaveGroupRequest:
    frame = encode_request(request, api_version=version, correlation_id=7, client_id="c")
    # request header: api_key, api_version, correlation_id (8 bytes), client_id "c" (3),
    # plus one empty tagged-field byte from v4 (flexible, header v2)
    body = frame[11 + (1 if version >= 4 else 0) :]
    return decode(LeaveGroupRequest, body, version)


@pytest.mark.parametrize("version", range(0, 6))
def test_both_spellings_encode_at_every_version(version: int) -> None:
    both = LeaveGroupRequest(
        group_id="g", member_id="m1", members=(MemberIdentity(member_id="m1", reason="bye"),)
    )
    single = LeaveGroupRequest(group_id="g", member_id="m1")
    listed = LeaveGroupRequest(group_id="g", members=(MemberIdentity(member_id="m1"),))
    for request in (both, single, listed):
        got = _roundtrip(request, version)
        if version <= 2:
            assert (got.member_id, got.members) == ("m1", ())
        else:
            assert got.member_id == ""
            assert [m.member_id for m in got.members] == ["m1"]


def test_reason_is_sent_from_v5_and_dropped_before() -> None:
    request = LeaveGroupRequest(
        group_id="g", members=(MemberIdentity(member_id="m1", reason="shutting down"),)
    )
    assert _roundtrip(request, 5).members[0].reason == "shutting down"
    assert _roundtrip(request, 4).members[0].reason is None


def test_static_member_cannot_leave_below_v3() -> None:
    request = LeaveGroupRequest(
        group_id="g", members=(MemberIdentity(member_id="m1", group_instance_id="i1"),)
    )
    with pytest.raises(EncodeError, match="static member"):
        encode_request(request, api_version=2, correlation_id=1, client_id=None)
    assert _roundtrip(request, 3).members[0].group_instance_id == "i1"


def test_batch_leave_needs_v3() -> None:
    request = LeaveGroupRequest(
        group_id="g",
        members=(MemberIdentity(member_id="m1"), MemberIdentity(member_id="m2")),
    )
    with pytest.raises(EncodeError, match="v3"):
        encode_request(request, api_version=1, correlation_id=1, client_id=None)
    assert [m.member_id for m in _roundtrip(request, 3).members] == ["m1", "m2"]


def test_contradictory_member_ids_are_refused_at_every_version() -> None:
    request = LeaveGroupRequest(
        group_id="g", member_id="m1", members=(MemberIdentity(member_id="m2"),)
    )
    for version in range(0, 6):
        with pytest.raises(EncodeError, match="m1"):
            encode_request(request, api_version=version, correlation_id=1, client_id=None)


def test_the_request_object_itself_is_left_unchanged() -> None:
    request = LeaveGroupRequest(group_id="g", member_id="m1")
    assert for_version(request, 3).members == (MemberIdentity(member_id="m1"),)
    assert request.members == ()


def test_the_conversion_table_names_delete_topics_by_its_api_key() -> None:
    assert DeleteTopicsRequest.API_KEY == _DELETE_TOPICS


def test_a_request_with_one_shape_is_returned_as_it_is() -> None:
    request = JoinGroupRequest(group_id="g")
    assert for_version(request, 5) is request
