"""Decoder fuzzing: garbage, truncations and bit flips may only raise ProtocolError."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from typing import Any

import pytest
from _protocol_strategies import (
    CONSUMER_SCHEMAS,
    RESPONSES,
    class_versions,
    instances,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer._errors import ProtocolError
from coopconsumer._protocol import (
    Response,
    Struct,
    decode,
    decode_request,
    decode_response,
    encode,
    encode_response,
)
from coopconsumer._protocol.messages import ApiVersionsResponse
from coopconsumer.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

DECODABLE = class_versions([*RESPONSES, *CONSUMER_SCHEMAS])


def _id(case: tuple[type[Struct], int]) -> str:
    return f"{case[0].__name__}-v{case[1]}"


def _only_protocol_errors(fn: Callable[[], Any]) -> None:
    # Success is fine too: garbage may happen to parse. Anything but ProtocolError
    # propagates and fails the test.
    with contextlib.suppress(ProtocolError):
        fn()


@pytest.mark.parametrize("case", DECODABLE, ids=_id)
@settings(max_examples=20)
@given(garbage=st.binary(max_size=64))
def test_random_bytes_raise_only_protocol_error(
    case: tuple[type[Struct], int], garbage: bytes
) -> None:
    cls, version = case
    _only_protocol_errors(lambda: decode(cls, garbage, version))


@pytest.mark.parametrize("case", DECODABLE, ids=_id)
@settings(max_examples=10)
@given(data=st.data())
def test_truncations_and_bit_flips_raise_only_protocol_error(
    case: tuple[type[Struct], int], data: st.DataObject
) -> None:
    cls, version = case
    raw = encode(data.draw(instances(cls, version)), version)
    cut = data.draw(st.integers(0, max(len(raw) - 1, 0)))
    if raw:
        # Dropping at least one byte of a valid body never yields the same message
        # with exact=True; it is either malformed or a different, shorter message.
        _only_protocol_errors(lambda: decode(cls, raw[:cut], version, exact=True))
        flipped = bytearray(raw)
        bit = data.draw(st.integers(0, len(raw) * 8 - 1))
        flipped[bit // 8] ^= 1 << (bit % 8)
        _only_protocol_errors(lambda: decode(cls, bytes(flipped), version))


@pytest.mark.parametrize("case", class_versions(RESPONSES), ids=_id)
@settings(max_examples=5)
@given(data=st.data())
def test_response_frames_truncated_anywhere_raise_protocol_error(
    case: tuple[type[Response], int], data: st.DataObject
) -> None:
    cls, version = case
    msg = data.draw(instances(cls, version))
    frame = encode_response(msg, api_version=version, correlation_id=1)
    for end in range(len(frame)):
        try:
            _correlation_id, got = decode_response(cls, frame[:end], api_version=version)
        except ProtocolError:
            continue
        # Only ApiVersions may parse a prefix: as the v0-format answer a broker gives to
        # a version it does not support (KIP-511).
        assert cls is ApiVersionsResponse, end
        assert got == decode(cls, frame[4:end], 0)


@settings(max_examples=200)
@given(garbage=st.binary(max_size=64))
def test_request_decoder_raises_only_protocol_error(garbage: bytes) -> None:
    _only_protocol_errors(lambda: decode_request(garbage))
    # Same garbage behind a plausible header for each request type we know.
    for api_key, version in ((11, 9), (14, 5), (8, 8), (3, 12), (18, 3), (11, 0)):
        frame = struct.pack(">hhih", api_key, version, 1, 1) + b"c" + b"\x00" + garbage
        _only_protocol_errors(lambda f=frame: decode_request(f))  # type: ignore[misc]


@settings(max_examples=200)
@given(garbage=st.binary(max_size=64), member_id=st.text(max_size=5))
def test_consumer_protocol_garbage_raises_protocol_error_naming_the_member(
    garbage: bytes, member_id: str
) -> None:
    errors: list[ProtocolError] = []
    for decoder in (decode_subscription, decode_assignment):
        try:
            decoder(garbage, member_id=member_id)
        except ProtocolError as exc:
            errors.append(exc)
    assert all(exc.member_id == member_id for exc in errors)


@settings(max_examples=50)
@given(data=st.data())
def test_consumer_protocol_truncations_raise_protocol_error(data: st.DataObject) -> None:
    from coopconsumer import TopicPartition
    from coopconsumer.assignors import Assignment, Subscription

    topics = data.draw(st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=3))
    owned = tuple(
        TopicPartition(t, p) for t in topics for p in data.draw(st.sets(st.integers(0, 9)))
    )
    sub_raw = encode_subscription(
        Subscription(topics=topics, owned_partitions=owned, user_data=b"ud", rack_id="r")
    )
    asg_raw = encode_assignment(Assignment(partitions=owned, user_data=b"x"))
    # Every strict prefix of a v3 encoding is short of a v3 field: always malformed.
    for end in range(len(sub_raw)):
        with pytest.raises(ProtocolError):
            decode_subscription(sub_raw[:end], member_id="m")
    for end in range(len(asg_raw)):
        with pytest.raises(ProtocolError):
            decode_assignment(asg_raw[:end], member_id="m")
