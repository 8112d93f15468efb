"""Golden bytes written by hand from the apache/kafka JSON specs (not by our encoder).

Each hex literal is laid out field by field with the spec field it encodes. Classic
versions: int16-length strings, int32-length bytes/arrays. Flexible versions (KIP-482):
unsigned-varint length+1 for strings/bytes/arrays, and a tagged-field count (00 when
empty) after every struct.
"""

from __future__ import annotations

import attrs
import pytest

from coopconsumer._errors import ProtocolError
from coopconsumer._protocol import decode, decode_response, encode, encode_request
from coopconsumer._protocol.consumer_protocol_schemas import (
    ConsumerProtocolAssignment,
    ConsumerProtocolAssignmentTopicPartition,
    ConsumerProtocolSubscription,
    ConsumerProtocolSubscriptionTopicPartition,
    CooperativeStickyAssignorUserData,
    StickyAssignorTopicPartitions,
    StickyAssignorUserData,
    decode_sticky_assignor_user_data,
)
from coopconsumer._protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    MemberIdentity,
    MetadataRequest,
    MetadataRequestTopic,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)


def h(text: str) -> bytes:
    """Hex with whitespace and ``#`` comments allowed."""
    lines = [line.split("#", 1)[0] for line in text.splitlines()]
    return bytes.fromhex("".join("".join(lines).split()))


JOIN = JoinGroupRequest(
    group_id="grp",
    session_timeout_ms=10000,
    rebalance_timeout_ms=300000,
    member_id="",
    group_instance_id="i1",
    protocol_type="consumer",
    protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\x01\x02"),),
    reason="r",
)

JOIN_V5 = h("""
    0003 677270                 # GroupId "grp" (int16 length)
    00002710                    # SessionTimeoutMs 10000
    000493e0                    # RebalanceTimeoutMs 300000
    0000                        # MemberId ""
    0002 6931                   # GroupInstanceId "i1" (5+)
    0008 636f6e73756d6572       # ProtocolType "consumer"
    00000001                    # Protocols: 1 entry
      0005 72616e6765           #   Name "range"
      00000002 0102             #   Metadata (int32 length)
""")

JOIN_V6 = h("""
    04 677270                   # GroupId: compact string, length+1 = 4
    00002710                    # SessionTimeoutMs
    000493e0                    # RebalanceTimeoutMs
    01                          # MemberId "" (length+1 = 1)
    03 6931                     # GroupInstanceId "i1"
    09 636f6e73756d6572         # ProtocolType "consumer"
    02                          # Protocols: compact array, 1 entry
      06 72616e6765             #   Name "range"
      03 0102                   #   Metadata: compact bytes
      00                        #   no tagged fields (JoinGroupRequestProtocol)
    00                          # no tagged fields (JoinGroupRequest)
""")

JOIN_V9 = h("""
    04 677270 00002710 000493e0 01 03 6931 09 636f6e73756d6572
    02 06 72616e6765 03 0102 00
    02 72                       # Reason "r" (8+)
    00                          # no tagged fields
""")


@pytest.mark.parametrize(("version", "golden"), [(5, JOIN_V5), (6, JOIN_V6), (9, JOIN_V9)])
def test_join_group_request(version: int, golden: bytes) -> None:
    # Reason is an ignorable 8+ field: dropped before v8.
    expected = JOIN if version >= 8 else attrs.evolve(JOIN, reason=None)
    assert encode(JOIN, version) == golden
    assert decode(JoinGroupRequest, golden, version, exact=True) == expected


SYNC = SyncGroupRequest(
    group_id="grp",
    generation_id=5,
    member_id="m1",
    group_instance_id=None,
    protocol_type="consumer",
    protocol_name="range",
    assignments=(SyncGroupRequestAssignment(member_id="m1", assignment=b"\xab"),),
)

SYNC_V3 = h("""
    0003 677270                 # GroupId "grp"
    00000005                    # GenerationId 5
    0002 6d31                   # MemberId "m1"
    ffff                        # GroupInstanceId null (3+)
    00000001                    # Assignments: 1 entry
      0002 6d31                 #   MemberId "m1"
      00000001 ab               #   Assignment (bytes)
""")

SYNC_V5 = h("""
    04 677270                   # GroupId
    00000005                    # GenerationId
    03 6d31                     # MemberId "m1"
    00                          # GroupInstanceId null (compact)
    09 636f6e73756d6572         # ProtocolType "consumer" (5+)
    06 72616e6765               # ProtocolName "range" (5+)
    02                          # Assignments: 1 entry
      03 6d31                   #   MemberId
      02 ab                     #   Assignment
      00                        #   tagged fields
    00                          # tagged fields
""")


def test_sync_group_request_v3() -> None:
    # ProtocolType/ProtocolName are ignorable 5+ fields: dropped at v3.
    assert encode(SYNC, 3) == SYNC_V3
    expected = SyncGroupRequest(
        group_id="grp",
        generation_id=5,
        member_id="m1",
        assignments=SYNC.assignments,
    )
    assert decode(SyncGroupRequest, SYNC_V3, 3, exact=True) == expected


def test_sync_group_request_v5() -> None:
    assert encode(SYNC, 5) == SYNC_V5
    assert decode(SyncGroupRequest, SYNC_V5, 5, exact=True) == SYNC


COMMIT = OffsetCommitRequest(
    group_id="grp",
    generation_id=5,
    member_id="m1",
    topics=(
        OffsetCommitRequestTopic(
            name="t",
            partitions=(
                OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=42, committed_metadata=""
                ),
            ),
        ),
    ),
)

COMMIT_V8 = h("""
    04 677270                   # GroupId
    00000005                    # GenerationIdOrMemberEpoch 5
    03 6d31                     # MemberId "m1"
    00                          # GroupInstanceId null (7+)
                                # (RetentionTimeMs is 2-4 only)
    02                          # Topics: 1 entry
      02 74                     #   Name "t"
      02                        #   Partitions: 1 entry
        00000000                #     PartitionIndex 0
        000000000000002a        #     CommittedOffset 42
        ffffffff                #     CommittedLeaderEpoch -1 (6+)
        01                      #     CommittedMetadata ""
        00                      #     tagged fields
      00                        #   tagged fields
    00                          # tagged fields
""")


def test_offset_commit_request_v8() -> None:
    assert encode(COMMIT, 8) == COMMIT_V8
    assert decode(OffsetCommitRequest, COMMIT_V8, 8, exact=True) == COMMIT


API_VERSIONS = ApiVersionsRequest(
    client_software_name="coopconsumer", client_software_version="0.1"
)

API_VERSIONS_V3_FRAME = h("""
    0012                        # request header v2: ApiKey 18
    0003                        #   ApiVersion 3
    00000007                    #   CorrelationId 7
    0001 63                     #   ClientId "c" (always an int16-length string)
    00                          #   header tagged fields
    0d 636f6f70636f6e73756d6572 # ClientSoftwareName "coopconsumer"
    04 302e31                   # ClientSoftwareVersion "0.1"
    00                          # tagged fields
""")


def test_api_versions_request_v3_with_header() -> None:
    frame = encode_request(API_VERSIONS, api_version=3, correlation_id=7, client_id="c")
    assert frame == API_VERSIONS_V3_FRAME


def test_api_versions_request_v0_is_empty() -> None:
    assert encode(API_VERSIONS, 0) == b""  # ignorable 3+ fields dropped


API_VERSIONS_V3_RESPONSE_FRAME = h("""
    0000002a                    # response header v0 (KIP-511): CorrelationId 42
    0000                        # ErrorCode 0
    02                          # ApiKeys: 1 entry
      000b 0000 0009            #   ApiKey 11, MinVersion 0, MaxVersion 9
      00                        #   tagged fields
    00000000                    # ThrottleTimeMs 0
    01                          # 1 tagged field
      01 08 0000000000000007    #   tag 1 FinalizedFeaturesEpoch, size 8, value 7
""")


def test_api_versions_response_v3() -> None:
    correlation_id, response = decode_response(
        ApiVersionsResponse, API_VERSIONS_V3_RESPONSE_FRAME, api_version=3
    )
    assert correlation_id == 42
    assert response == ApiVersionsResponse(
        api_keys=(ApiVersionsResponseApiVersion(api_key=11, min_version=0, max_version=9),),
        finalized_features_epoch=7,
    )
    assert isinstance(response.api_keys[0], ApiVersionsResponseApiVersion)


# --------------------------------------------------------------------------- consumer protocol
# (The int16 version prefix is written by consumer_protocol; these are the bodies.)

SUB_V0 = h("""
    00000002 0001 61 0001 62    # Topics ["a", "b"]
    00000003 010203             # UserData
""")
SUB_V1 = SUB_V0 + h("""
    00000001                    # OwnedPartitions: 1 topic
      0001 61                   #   Topic "a"
      00000002 00000000 00000001  # Partitions [0, 1]
""")
SUB_V2 = SUB_V1 + h("00000007  # GenerationId 7")
SUB_V3 = SUB_V2 + h("0004 72616b31  # RackId 'rak1'")

SUB = ConsumerProtocolSubscription(
    topics=("a", "b"),
    user_data=b"\x01\x02\x03",
    owned_partitions=(ConsumerProtocolSubscriptionTopicPartition(topic="a", partitions=(0, 1)),),
    generation_id=7,
    rack_id="rak1",
)


@pytest.mark.parametrize(
    ("version", "golden"), [(0, SUB_V0), (1, SUB_V1), (2, SUB_V2), (3, SUB_V3)]
)
def test_consumer_protocol_subscription(version: int, golden: bytes) -> None:
    assert encode(SUB, version) == golden
    decoded = decode(ConsumerProtocolSubscription, golden, version, exact=True)
    assert decoded.topics == ("a", "b")
    assert decoded.owned_partitions == (SUB.owned_partitions if version >= 1 else ())
    assert decoded.generation_id == (7 if version >= 2 else -1)
    assert decoded.rack_id == ("rak1" if version >= 3 else None)


def test_consumer_protocol_subscription_null_user_data_and_rack() -> None:
    golden = h("00000000  ffffffff  00000000  ffffffff  ffff")
    sub = ConsumerProtocolSubscription()
    assert encode(sub, 3) == golden
    assert decode(ConsumerProtocolSubscription, golden, 3, exact=True) == sub


ASSIGNMENT_BODY = h("""
    00000001                    # AssignedPartitions: 1 topic
      0001 61                   #   Topic "a"
      00000002 00000000 00000003  # Partitions [0, 3]
    00000000                    # UserData: empty bytes
""")


# ConsumerProtocolAssignment's fields are the same at v0..v3 (v1-v3 were bumped for the
# Subscription's owned partitions, generation and rack), so one body is every version's.
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_consumer_protocol_assignment(version: int) -> None:
    assignment = ConsumerProtocolAssignment(
        assigned_partitions=(
            ConsumerProtocolAssignmentTopicPartition(topic="a", partitions=(0, 3)),
        ),
        user_data=b"",
    )
    assert encode(assignment, version) == ASSIGNMENT_BODY
    assert decode(ConsumerProtocolAssignment, ASSIGNMENT_BODY, version, exact=True) == assignment


STICKY_V0 = h("""
    00000002                    # previous_assignment: 2 topics
      0001 61 00000002 00000000 00000001   # "a": [0, 1]
      0001 62 00000001 00000004            # "b": [4]
""")
STICKY_V1 = STICKY_V0 + h("00000003  # generation 3 (V1 only; no version prefix)")


def test_sticky_assignor_user_data_v0_and_v1() -> None:
    data = StickyAssignorUserData(
        previous_assignment=(
            StickyAssignorTopicPartitions(topic="a", partitions=(0, 1)),
            StickyAssignorTopicPartitions(topic="b", partitions=(4,)),
        ),
        generation=3,
    )
    assert encode(data, 1) == STICKY_V1
    assert encode(data, 0) == STICKY_V0
    assert decode(StickyAssignorUserData, STICKY_V1, 1, exact=True) == data
    v0 = decode(StickyAssignorUserData, STICKY_V0, 0, exact=True)
    assert v0.previous_assignment == data.previous_assignment
    assert v0.generation == -1
    # Java's fallback: V1 first, then V0 when the generation is missing.
    assert decode_sticky_assignor_user_data(STICKY_V1) == data
    assert decode_sticky_assignor_user_data(STICKY_V0) == v0
    with pytest.raises(ProtocolError):
        decode_sticky_assignor_user_data(STICKY_V0[:-1])


def test_cooperative_sticky_user_data_is_a_bare_int32() -> None:
    assert encode(CooperativeStickyAssignorUserData(generation=3), 0) == h("00000003")
    assert decode(CooperativeStickyAssignorUserData, h("0000000c"), 0).generation == 12


# ------------------------------------------------------------------ OffsetFetch, v0-7 vs v8+

FETCH_V7 = OffsetFetchRequest(
    group_id="g",
    topics=(OffsetFetchRequestTopic(name="t", partition_indexes=(0, 2)),),
    require_stable=True,
)

FETCH_V7_BYTES = h("""
    02 67                       # GroupId "g" (0-7)
    02                          # Topics (0-7): 1 entry
      02 74                     #   Name "t"
      03 00000000 00000002      #   PartitionIndexes [0, 2]
      00                        #   tagged fields
    01                          # RequireStable true (7+)
    00                          # tagged fields
""")

FETCH_V8 = OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id="g", topics=None),))

FETCH_V8_BYTES = h("""
    02                          # Groups (8+): 1 entry
      02 67                     #   GroupId "g"
      00                        #   Topics null: all topics (nullable 8+)
      00                        #   tagged fields
    00                          # RequireStable false
    00                          # tagged fields
""")

FETCH_V9 = OffsetFetchRequest(
    groups=(OffsetFetchRequestGroup(group_id="g", member_id="m", member_epoch=3, topics=()),)
)

FETCH_V9_BYTES = h("""
    02                          # Groups: 1 entry
      02 67                     #   GroupId "g"
      02 6d                     #   MemberId "m" (9+)
      00000003                  #   MemberEpoch 3 (9+)
      01                        #   Topics: empty array
      00                        #   tagged fields
    00                          # RequireStable false
    00                          # tagged fields
""")


@pytest.mark.parametrize(
    ("message", "version", "golden"),
    [(FETCH_V7, 7, FETCH_V7_BYTES), (FETCH_V8, 8, FETCH_V8_BYTES), (FETCH_V9, 9, FETCH_V9_BYTES)],
)
def test_offset_fetch_request(message: OffsetFetchRequest, version: int, golden: bytes) -> None:
    assert encode(message, version) == golden
    assert decode(OffsetFetchRequest, golden, version, exact=True) == message


FETCHED_V7 = OffsetFetchResponse(
    topics=(
        OffsetFetchResponseTopic(
            name="t",
            partitions=(
                OffsetFetchResponsePartition(
                    partition_index=1, committed_offset=42, committed_leader_epoch=5, metadata=""
                ),
            ),
        ),
    ),
)

FETCHED_V7_BYTES = h("""
    00000000                    # ThrottleTimeMs
    02                          # Topics (0-7): 1 entry
      02 74                     #   Name "t"
      02                        #   Partitions: 1 entry
        00000001                #     PartitionIndex 1
        000000000000002a        #     CommittedOffset 42
        00000005                #     CommittedLeaderEpoch 5 (5-7)
        01                      #     Metadata ""
        0000                    #     ErrorCode
        00                      #     tagged fields
      00                        #   tagged fields
    0000                        # ErrorCode (2-7)
    00                          # tagged fields
""")

FETCHED_V8 = OffsetFetchResponse(
    groups=(
        OffsetFetchResponseGroup(
            group_id="g",
            topics=(
                OffsetFetchResponseTopics(
                    name="t",
                    partitions=(
                        OffsetFetchResponsePartitions(
                            partition_index=1, committed_offset=42, metadata=None
                        ),
                    ),
                ),
            ),
            error_code=16,
        ),
    ),
)

FETCHED_V8_BYTES = h("""
    00000000                    # ThrottleTimeMs
    02                          # Groups (8+): 1 entry
      02 67                     #   GroupId "g"
      02                        #   Topics: 1 entry
        02 74                   #     Name "t"
        02                      #     Partitions: 1 entry
          00000001              #       PartitionIndex 1
          000000000000002a      #       CommittedOffset 42
          ffffffff              #       CommittedLeaderEpoch -1
          00                    #       Metadata null
          0000                  #       ErrorCode
          00                    #       tagged fields
        00                      #     tagged fields
      0010                      #   ErrorCode 16 NOT_COORDINATOR (group level)
      00                        #   tagged fields
    00                          # tagged fields
""")


@pytest.mark.parametrize(
    ("message", "version", "golden"),
    [(FETCHED_V7, 7, FETCHED_V7_BYTES), (FETCHED_V8, 8, FETCHED_V8_BYTES)],
)
def test_offset_fetch_response(message: OffsetFetchResponse, version: int, golden: bytes) -> None:
    assert encode(message, version) == golden
    assert decode(OffsetFetchResponse, golden, version, exact=True) == message


# ------------------------------------------------------------------ LeaveGroup, FindCoordinator

LEAVE = LeaveGroupRequest(group_id="g", members=(MemberIdentity(member_id="m", reason="r"),))

LEAVE_V3 = h("""
    0001 67                     # GroupId "g"
    00000001                    # Members (3+): 1 entry
      0001 6d                   #   MemberId "m"
      ffff                      #   GroupInstanceId null
""")

LEAVE_V5 = h("""
    02 67                       # GroupId "g"
    02                          # Members: 1 entry
      02 6d                     #   MemberId "m"
      00                        #   GroupInstanceId null
      02 72                     #   Reason "r" (5+)
      00                        #   tagged fields
    00                          # tagged fields
""")


def test_leave_group_request_v3_and_v5() -> None:
    # Reason is ignorable: dropped before v5.
    without_reason = LeaveGroupRequest(group_id="g", members=(MemberIdentity(member_id="m"),))
    assert encode(LEAVE, 3) == LEAVE_V3
    assert decode(LeaveGroupRequest, LEAVE_V3, 3, exact=True) == without_reason
    assert encode(LEAVE, 5) == LEAVE_V5
    assert decode(LeaveGroupRequest, LEAVE_V5, 5, exact=True) == LEAVE


FOUND_V3 = h("""
    00000000                    # ThrottleTimeMs
    0000                        # ErrorCode (0-3)
    00                          # ErrorMessage null (1-3)
    00000007                    # NodeId 7 (0-3)
    02 68                       # Host "h"
    00002384                    # Port 9092
    00                          # tagged fields
""")

FOUND_V4 = h("""
    00000000                    # ThrottleTimeMs
    02                          # Coordinators (4+): 1 entry
      02 67                     #   Key "g"
      00000007                  #   NodeId 7
      02 68                     #   Host "h"
      00002384                  #   Port 9092
      0000                      #   ErrorCode
      00                        #   ErrorMessage null
      00                        #   tagged fields
    00                          # tagged fields
""")


def test_find_coordinator_response_v3_and_v4() -> None:
    single = FindCoordinatorResponse(node_id=7, host="h", port=9092)
    batched = FindCoordinatorResponse(
        coordinators=(FindCoordinatorResponseCoordinator(key="g", node_id=7, host="h", port=9092),)
    )
    assert encode(single, 3) == FOUND_V3
    assert decode(FindCoordinatorResponse, FOUND_V3, 3, exact=True) == single
    assert encode(batched, 4) == FOUND_V4
    assert decode(FindCoordinatorResponse, FOUND_V4, 4, exact=True) == batched


METADATA_V12 = h("""
    02                          # Topics (nullable 1+): 1 entry
      00000000000000000000000000000000  # TopicId (10+): zero uuid
      02 74                     #   Name "t" (nullable 10+)
      00                        #   tagged fields
    00                          # AllowAutoTopicCreation false (4+)
                                # (IncludeClusterAuthorizedOperations is 8-10 only)
    00                          # IncludeTopicAuthorizedOperations false (8+)
    00                          # tagged fields
""")


def test_metadata_request_v12() -> None:
    request = MetadataRequest(
        topics=(MetadataRequestTopic(name="t"),), allow_auto_topic_creation=False
    )
    assert encode(request, 12) == METADATA_V12
    assert decode(MetadataRequest, METADATA_V12, 12, exact=True) == request
