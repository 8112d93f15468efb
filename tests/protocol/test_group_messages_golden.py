"""ConsumerGroupHeartbeat (API 68, KIP-848): golden bytes written by hand from the spec.

Both versions are flexible (KIP-482): unsigned-varint length+1 for strings and arrays,
0 for null, and a tagged-field count after every struct. A nullable struct is an int8
marker (-1 null, 1 present) before the struct, as Kafka's generated code writes it.
"""

from __future__ import annotations

import uuid

import pytest

from coopconsumer._errors import ProtocolError
from coopconsumer._protocol import EncodeError, decode, encode
from coopconsumer._protocol.group_messages import (
    GROUP_REQUESTS,
    GROUP_RESPONSES,
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatQuery,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatTopicPartitions,
)
from coopconsumer._protocol.messages import ALL_REQUESTS


def h(text: str) -> bytes:
    """Hex with whitespace and ``#`` comments allowed."""
    lines = [line.split("#", 1)[0] for line in text.splitlines()]
    return bytes.fromhex("".join("".join(lines).split()))


TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")

JOIN = ConsumerGroupHeartbeatRequest(
    group_id="grp",
    member_id="m1",
    member_epoch=0,
    rack_id="r",
    rebalance_timeout_ms=300000,
    subscribed_topic_names=("t",),
    server_assignor="uniform",
    topic_partitions=(),
)

JOIN_V0 = h("""
    04 677270                   # GroupId "grp"
    03 6d31                     # MemberId "m1"
    00000000                    # MemberEpoch 0
    00                          # InstanceId null
    02 72                       # RackId "r"
    000493e0                    # RebalanceTimeoutMs 300000
    02 02 74                    # SubscribedTopicNames ["t"]
                                # (SubscribedTopicRegex is 1+)
    08 756e69666f726d           # ServerAssignor "uniform"
    01                          # TopicPartitions: empty, not null
    00                          # tagged fields
""")

JOIN_V1 = h("""
    04 677270                   # GroupId "grp"
    03 6d31                     # MemberId "m1"
    00000000                    # MemberEpoch 0
    00                          # InstanceId null
    02 72                       # RackId "r"
    000493e0                    # RebalanceTimeoutMs 300000
    02 02 74                    # SubscribedTopicNames ["t"]
    00                          # SubscribedTopicRegex null (1+)
    08 756e69666f726d           # ServerAssignor "uniform"
    01                          # TopicPartitions: empty
    00                          # tagged fields
""")

ACK = ConsumerGroupHeartbeatRequest(
    group_id="grp",
    member_id="m1",
    member_epoch=4,
    instance_id="i",
    topic_partitions=(
        ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=TOPIC_ID, partitions=(0, 2)),
    ),
)

ACK_V1 = h("""
    04 677270                   # GroupId "grp"
    03 6d31                     # MemberId "m1"
    00000004                    # MemberEpoch 4
    02 69                       # InstanceId "i"
    00                          # RackId null (unchanged)
    ffffffff                    # RebalanceTimeoutMs -1 (unchanged)
    00                          # SubscribedTopicNames null (unchanged)
    00                          # SubscribedTopicRegex null
    00                          # ServerAssignor null
    02                          # TopicPartitions: 1 entry
      00112233445566778899aabbccddeeff  # TopicId
      03 00000000 00000002      #   Partitions [0, 2]
      00                        #   tagged fields
    00                          # tagged fields
""")


@pytest.mark.parametrize(("version", "golden"), [(0, JOIN_V0), (1, JOIN_V1)])
def test_join_request(version: int, golden: bytes) -> None:
    assert encode(JOIN, version) == golden
    assert decode(ConsumerGroupHeartbeatRequest, golden, version, exact=True) == JOIN


def test_acknowledging_request_leaves_unchanged_fields_null() -> None:
    assert encode(ACK, 1) == ACK_V1
    assert decode(ConsumerGroupHeartbeatRequest, ACK_V1, 1, exact=True) == ACK


def test_regex_cannot_be_sent_at_v0() -> None:
    with pytest.raises(EncodeError, match="subscribed_topic_regex"):
        encode(ConsumerGroupHeartbeatRequest(group_id="g", subscribed_topic_regex="t.*"), 0)
    assert encode(ConsumerGroupHeartbeatRequest(group_id="g", subscribed_topic_regex="t.*"), 1)


ASSIGNED = ConsumerGroupHeartbeatResponse(
    member_id="m1",
    member_epoch=3,
    heartbeat_interval_ms=5000,
    assignment=ConsumerGroupHeartbeatAssignment(
        topic_partitions=(
            ConsumerGroupHeartbeatTopicPartitions(topic_id=TOPIC_ID, partitions=(0, 2)),
        )
    ),
)

ASSIGNED_V0 = h("""
    00000000                    # ThrottleTimeMs 0
    0000                        # ErrorCode 0
    00                          # ErrorMessage null
    03 6d31                     # MemberId "m1"
    00000003                    # MemberEpoch 3
    00001388                    # HeartbeatIntervalMs 5000
    01                          # Assignment present
      02                        #   TopicPartitions: 1 entry
        00112233445566778899aabbccddeeff  # TopicId
        03 00000000 00000002    #     Partitions [0, 2]
        00                      #     tagged fields
      00                        #   tagged fields
    00                          # tagged fields
""")

FENCED_V1 = h("""
    00000000                    # ThrottleTimeMs 0
    006e                        # ErrorCode 110 FENCED_MEMBER_EPOCH
    06 666e636564               # ErrorMessage "fnced"
    00                          # MemberId null
    00000000                    # MemberEpoch 0
    00000000                    # HeartbeatIntervalMs 0
    ff                          # Assignment null
    00                          # tagged fields
""")


@pytest.mark.parametrize("version", [0, 1])
def test_response_with_assignment(version: int) -> None:
    assert encode(ASSIGNED, version) == ASSIGNED_V0
    assert decode(ConsumerGroupHeartbeatResponse, ASSIGNED_V0, version, exact=True) == ASSIGNED


def test_response_with_null_assignment() -> None:
    fenced = ConsumerGroupHeartbeatResponse(error_code=110, error_message="fnced")
    assert encode(fenced, 1) == FENCED_V1
    assert decode(ConsumerGroupHeartbeatResponse, FENCED_V1, 1, exact=True) == fenced


def test_truncated_null_marker_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        decode(ConsumerGroupHeartbeatResponse, FENCED_V1[:-2], 1)


def test_registry() -> None:
    assert {68: ConsumerGroupHeartbeatRequest} == GROUP_REQUESTS
    assert {68: ConsumerGroupHeartbeatResponse} == GROUP_RESPONSES
    assert not set(GROUP_REQUESTS) & set(ALL_REQUESTS)


def test_query_sends_an_empty_regex_with_topic_names_from_v1() -> None:
    query = ConsumerGroupHeartbeatQuery(request=JOIN)
    assert query.api is ConsumerGroupHeartbeatRequest
    assert query.build(0) == JOIN
    assert query.build(1).subscribed_topic_regex == ""
    unchanged = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=3)
    assert ConsumerGroupHeartbeatQuery(request=unchanged).build(1) == unchanged
