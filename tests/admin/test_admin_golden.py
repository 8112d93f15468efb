"""Golden bytes for the admin messages, written by hand from apache/kafka's JSON specs.

Each literal is laid out field by field with the spec field it encodes (not produced by
our encoder). Classic versions: int16-length strings, int32-length arrays (-1 = null).
Flexible versions (KIP-482): unsigned-varint length+1 (0 = null) and a tagged-field
count after every struct.
"""

from __future__ import annotations

import uuid

import pytest

from coopconsumer._protocol import EncodeError, decode, encode, encode_request
from coopconsumer._protocol._schema import Request
from coopconsumer._protocol._shapes import for_version
from coopconsumer._protocol.admin_messages import (
    AlterableConfig,
    AlterConfigsResource,
    AlterPartitionReassignmentsRequest,
    AlterReplicaLogDir,
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopic,
    AlterReplicaLogDirTopicResult,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatableTopicResult,
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicState,
    DescribableLogDirTopic,
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
    ElectionTopicPartitions,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListPartitionReassignmentsTopics,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignablePartition,
    ReassignableTopic,
)


def h(text: str) -> bytes:
    """Hex with whitespace and ``#`` comments allowed."""
    lines = [line.split("#", 1)[0] for line in text.splitlines()]
    return bytes.fromhex("".join("".join(lines).split()))


def body(request: Request, version: int) -> bytes:
    return encode(for_version(request, version), version)


CREATE = CreateTopicsRequest(
    topics=(
        CreatableTopic(
            name="t1",
            assignments=(
                CreatableReplicaAssignment(partition_index=0, broker_ids=(1, 2)),
                CreatableReplicaAssignment(partition_index=1, broker_ids=(2, 3)),
            ),
            configs=(CreatableTopicConfig(name="cleanup.policy", value="compact"),),
        ),
    ),
    timeout_ms=30000,
)

CREATE_V4 = h("""
    00000001                          # Topics: 1
      0002 7431                       #   Name "t1"
      ffffffff                        #   NumPartitions -1
      ffff                            #   ReplicationFactor -1
      00000002                        #   Assignments: 2
        00000000 00000002 00000001 00000002   # partition 0 -> [1, 2]
        00000001 00000002 00000002 00000003   # partition 1 -> [2, 3]
      00000001                        #   Configs: 1
        000e 636c65616e75702e706f6c696379     # Name "cleanup.policy"
        0007 636f6d70616374           #     Value "compact"
    00007530                          # timeoutMs 30000
    00                                # validateOnly false (1+)
""")

CREATE_V5 = h("""
    02                                # Topics: 1 (compact)
      03 7431                         #   Name "t1"
      ffffffff ffff                   #   NumPartitions -1, ReplicationFactor -1
      03                              #   Assignments: 2
        00000000 03 00000001 00000002 00
        00000001 03 00000002 00000003 00
      02                              #   Configs: 1
        0f 636c65616e75702e706f6c696379 08 636f6d70616374 00
      00                              #   CreatableTopic tags
    00007530 00                       # timeoutMs, validateOnly
    00                                # tags
""")


@pytest.mark.parametrize(("version", "golden"), [(4, CREATE_V4), (5, CREATE_V5), (7, CREATE_V5)])
def test_create_topics_request(version: int, golden: bytes) -> None:
    assert body(CREATE, version) == golden
    assert decode(CreateTopicsRequest, golden, version) == CREATE


def test_create_topics_validate_only_needs_v1() -> None:
    with pytest.raises(EncodeError):
        encode(CreateTopicsRequest(validate_only=True), 0)


def test_create_topics_response_v5_with_tagged_config_error() -> None:
    golden = h("""
        00000000                      # ThrottleTimeMs
        02                            # Topics: 1
          02 74                       #   Name "t"
          0000                        #   ErrorCode
          00                          #   ErrorMessage null
          00000003 0002               #   NumPartitions 3, ReplicationFactor 2
          00                          #   Configs null
          01 00 02 0028               #   tags: 1; tag 0 TopicConfigErrorCode = 40
        00                            # tags
    """)
    expected = CreateTopicsResponse(
        topics=(
            CreatableTopicResult(
                name="t",
                num_partitions=3,
                replication_factor=2,
                configs=None,
                topic_config_error_code=40,
            ),
        )
    )
    assert decode(CreateTopicsResponse, golden, 5) == expected
    assert encode(expected, 5) == golden


DELETE = DeleteTopicsRequest(topic_names=("a", "b"), timeout_ms=1000)


def test_delete_topics_by_name_v1() -> None:
    assert body(DELETE, 1) == h("00000002 0001 61 0001 62 000003e8")


def test_delete_topics_v6_moves_names_into_topics_with_header() -> None:
    golden = h("""
        0014 0006 00000007 0001 63 00 # header v2: key 20, v6, correlation 7, client "c", tags
        03                            # Topics: 2
          02 61 00000000000000000000000000000000 00   # Name "a", TopicId zero, tags
          02 62 00000000000000000000000000000000 00
        000003e8                      # TimeoutMs 1000
        00                            # tags
    """)
    assert encode_request(DELETE, api_version=6, correlation_id=7, client_id="c") == golden


def test_delete_topics_by_id_needs_v6() -> None:
    by_id = DeleteTopicsRequest(topics=(DeleteTopicState(topic_id=uuid.UUID(int=5)),))
    with pytest.raises(EncodeError, match="needs v6"):
        body(by_id, 5)
    by_name = DeleteTopicsRequest(topics=(DeleteTopicState(name="a"),), timeout_ms=1000)
    assert body(by_name, 3) == h("00000001 0001 61 000003e8")


PARTITIONS = CreatePartitionsRequest(
    topics=(
        CreatePartitionsTopic(
            name="t",
            count=4,
            assignments=(
                CreatePartitionsAssignment(broker_ids=(1, 2)),
                CreatePartitionsAssignment(broker_ids=(2, 3)),
            ),
        ),
        CreatePartitionsTopic(name="u", count=6, assignments=None),
    ),
    timeout_ms=5000,
    validate_only=True,
)


@pytest.mark.parametrize(
    ("version", "golden"),
    [
        (
            1,
            h("""
            00000002                          # Topics: 2
              0001 74 00000004                #   "t", Count 4
              00000002                        #   Assignments: 2
                00000002 00000001 00000002
                00000002 00000002 00000003
              0001 75 00000006 ffffffff       #   "u", Count 6, Assignments null
            00001388 01                       # TimeoutMs 5000, ValidateOnly
            """),
        ),
        (
            3,
            h("""
            03
              02 74 00000004 03 03 00000001 00000002 00 03 00000002 00000003 00 00
              02 75 00000006 00 00
            00001388 01 00
            """),
        ),
    ],
)
def test_create_partitions_request(version: int, golden: bytes) -> None:
    assert body(PARTITIONS, version) == golden
    assert decode(CreatePartitionsRequest, golden, version) == PARTITIONS


def test_alter_partition_reassignments_request_v0_with_cancel() -> None:
    request = AlterPartitionReassignmentsRequest(
        topics=(
            ReassignableTopic(
                name="t",
                partitions=(
                    ReassignablePartition(partition_index=0, replicas=(1, 2, 3)),
                    ReassignablePartition(partition_index=1, replicas=None),
                ),
            ),
        ),
    )
    golden = h("""
        0000ea60                      # TimeoutMs 60000 (the spec default)
        02                            # Topics: 1
          02 74                       #   Name "t"
          03                          #   Partitions: 2
            00000000 04 00000001 00000002 00000003 00   # -> [1, 2, 3]
            00000001 00 00            #     Replicas null: cancel
          00
        00
    """)
    assert body(request, 0) == golden
    assert decode(AlterPartitionReassignmentsRequest, golden, 0) == request


def test_list_partition_reassignments_request_v0() -> None:
    assert body(ListPartitionReassignmentsRequest(), 0) == h("0000ea60 00 00")
    some = ListPartitionReassignmentsRequest(
        timeout_ms=1000,
        topics=(ListPartitionReassignmentsTopics(name="t", partition_indexes=(0, 1)),),
    )
    assert body(some, 0) == h("000003e8 02 02 74 03 00000000 00000001 00 00")


def test_list_partition_reassignments_response_v0() -> None:
    golden = h("""
        00000000 0000 00              # ThrottleTimeMs, ErrorCode, ErrorMessage null
        02                            # Topics: 1
          02 74                       #   Name "t"
          02                          #   Partitions: 1
            00000000                  #     PartitionIndex 0
            04 00000001 00000002 00000004   # Replicas [1, 2, 4]
            02 00000004               #     AddingReplicas [4]
            02 00000001               #     RemovingReplicas [1]
            00
          00
        00
    """)
    expected = ListPartitionReassignmentsResponse(
        topics=(
            OngoingTopicReassignment(
                name="t",
                partitions=(
                    OngoingPartitionReassignment(
                        partition_index=0,
                        replicas=(1, 2, 4),
                        adding_replicas=(4,),
                        removing_replicas=(1,),
                    ),
                ),
            ),
        )
    )
    assert decode(ListPartitionReassignmentsResponse, golden, 0) == expected


DESCRIBE_CONFIGS = DescribeConfigsRequest(
    resources=(
        DescribeConfigsResource(resource_type=2, resource_name="t"),
        DescribeConfigsResource(
            resource_type=4, resource_name="1", configuration_keys=("log.dirs",)
        ),
    ),
    include_synonyms=True,
)


@pytest.mark.parametrize(
    ("version", "golden"),
    [
        (
            1,
            h("""
            00000002
              02 0001 74 ffffffff             # topic "t", all keys (null)
              04 0001 31 00000001 0008 6c6f672e64697273   # broker "1", ["log.dirs"]
            01                                # IncludeSynonyms (1+)
            """),
        ),
        (
            4,
            h("""
            03
              02 02 74 00 00
              04 02 31 02 09 6c6f672e64697273 00
            01 00                             # IncludeSynonyms, IncludeDocumentation (3+)
            00
            """),
        ),
    ],
)
def test_describe_configs_request(version: int, golden: bytes) -> None:
    assert body(DESCRIBE_CONFIGS, version) == golden


INCREMENTAL = IncrementalAlterConfigsRequest(
    resources=(
        AlterConfigsResource(
            resource_type=2,
            resource_name="t",
            configs=(
                AlterableConfig(name="retention.ms", config_operation=0, value="1000"),
                AlterableConfig(name="x", config_operation=1, value=None),
            ),
        ),
    ),
)


@pytest.mark.parametrize(
    ("version", "golden"),
    [
        (
            0,
            h("""
            00000001
              02 0001 74 00000002
                000c 726574656e74696f6e2e6d73 00 0004 31303030   # SET retention.ms=1000
                0001 78 01 ffff                                  # DELETE x (value null)
            00                                                   # ValidateOnly
            """),
        ),
        (
            1,
            h("""
            02
              02 02 74 03
                0d 726574656e74696f6e2e6d73 00 05 31303030 00
                02 78 01 00 00
              00
            00 00
            """),
        ),
    ],
)
def test_incremental_alter_configs_request(version: int, golden: bytes) -> None:
    assert body(INCREMENTAL, version) == golden
    assert decode(IncrementalAlterConfigsRequest, golden, version) == INCREMENTAL


def test_describe_cluster_request_and_response() -> None:
    assert body(DescribeClusterRequest(), 0) == h("00 00")
    assert body(DescribeClusterRequest(include_cluster_authorized_operations=True), 1) == h(
        "01 01 00"  # IncludeClusterAuthorizedOperations, EndpointType 1 (brokers), tags
    )
    golden = h("""
        00000000 0000 00              # ThrottleTimeMs, ErrorCode, ErrorMessage null
        01                            # EndpointType 1 (1+)
        04 616263                     # ClusterId "abc"
        00000001                      # ControllerId 1
        02                            # Brokers: 1
          00000001 0a 3132372e302e302e31 00002328 03 7231 00   # 1 127.0.0.1:9000 rack "r1"
        80000000                      # ClusterAuthorizedOperations INT32_MIN
        00
    """)
    expected = DescribeClusterResponse(
        cluster_id="abc",
        controller_id=1,
        brokers=(DescribeClusterBroker(broker_id=1, host="127.0.0.1", port=9000, rack="r1"),),
    )
    assert decode(DescribeClusterResponse, golden, 1) == expected
    assert encode(expected, 1) == golden


def test_describe_cluster_v2_lists_fenced_brokers_when_asked() -> None:
    request = DescribeClusterRequest(include_fenced_brokers=True)
    assert body(request, 2) == h("00 01 01 00")  # ...AuthorizedOperations, EndpointType, Fenced
    with pytest.raises(EncodeError):
        body(request, 1)  # only v2 (KIP-1073) can ask for fenced brokers
    golden = h("""
        00000000 0000 00 01 02 61 00000001   # throttle, error, message null, endpoint 1, "a", 1
        02                                   # Brokers: 1
          00000002 02 68 00000009 00 01 00   # 2 h:9 rack null IsFenced (2+) true, tags
        80000000 00
    """)
    expected = DescribeClusterResponse(
        cluster_id="a",
        controller_id=1,
        brokers=(DescribeClusterBroker(broker_id=2, host="h", port=9, is_fenced=True),),
    )
    assert decode(DescribeClusterResponse, golden, 2) == expected
    assert encode(expected, 2) == golden


ALTER_DIRS = AlterReplicaLogDirsRequest(
    dirs=(
        AlterReplicaLogDir(
            path="/d1", topics=(AlterReplicaLogDirTopic(name="t", partitions=(0, 2)),)
        ),
    )
)


@pytest.mark.parametrize(
    ("version", "golden"),
    [
        (
            1,
            h("""
                00000001                      # Dirs: 1
                  0003 2f6431                 #   Path "/d1"
                  00000001                    #   Topics: 1
                    0001 74                   #     Name "t"
                    00000002 00000000 00000002  # Partitions [0, 2]
            """),
        ),
        (2, h("02 04 2f6431 02 02 74 03 00000000 00000002 00 00 00")),
    ],
)
def test_alter_replica_log_dirs_request(version: int, golden: bytes) -> None:
    assert body(ALTER_DIRS, version) == golden
    assert decode(AlterReplicaLogDirsRequest, golden, version) == ALTER_DIRS


def test_alter_replica_log_dirs_response() -> None:
    golden = h("""
        00000000                          # ThrottleTimeMs
        00000001 0001 74                  # Results: 1, TopicName "t"
        00000002                          # Partitions: 2
          00000000 0000                   #   0: NONE
          00000002 0039                   #   2: LOG_DIR_NOT_FOUND (57)
    """)
    expected = AlterReplicaLogDirsResponse(
        results=(
            AlterReplicaLogDirTopicResult(
                topic_name="t",
                partitions=(
                    AlterReplicaLogDirPartitionResult(partition_index=0),
                    AlterReplicaLogDirPartitionResult(partition_index=2, error_code=57),
                ),
            ),
        )
    )
    assert decode(AlterReplicaLogDirsResponse, golden, 1) == expected
    assert encode(expected, 1) == golden


def test_describe_log_dirs_request_and_response() -> None:
    assert body(DescribeLogDirsRequest(), 1) == h("ffffffff")  # Topics null: everything
    some = DescribeLogDirsRequest(topics=(DescribableLogDirTopic(topic="t", partitions=(0, 1)),))
    assert body(some, 2) == h("02 02 74 03 00000000 00000001 00 00")
    golden = h("""
        00000000 0000                 # ThrottleTimeMs, ErrorCode (3+)
        02                            # Results: 1
          0000 03 2f64                #   ErrorCode, LogDir "/d"
          02                          #   Topics: 1
            02 74                     #     Name "t"
            02                        #     Partitions: 1
              00000000                #       PartitionIndex 0
              0000000000000400        #       PartitionSize 1024
              0000000000000000 00 00  #       OffsetLag 0, IsFutureKey false, tags
            00
          0000000000100000            #   TotalBytes (4+)
          0000000000080000            #   UsableBytes (4+)
          00
        00
    """)
    expected = DescribeLogDirsResponse(
        results=(
            DescribeLogDirsResult(
                log_dir="/d",
                topics=(
                    DescribeLogDirsTopic(
                        name="t",
                        partitions=(
                            DescribeLogDirsPartition(partition_index=0, partition_size=1024),
                        ),
                    ),
                ),
                total_bytes=0x100000,
                usable_bytes=0x80000,
            ),
        )
    )
    assert decode(DescribeLogDirsResponse, golden, 4) == expected


def test_elect_leaders_request() -> None:
    request = ElectLeadersRequest(
        topic_partitions=(ElectionTopicPartitions(topic="t", partitions=(0,)),), timeout_ms=1000
    )
    v0 = h("00000001 0001 74 00000001 00000000 000003e8")
    assert body(request, 0) == v0
    assert body(request, 1) == h("00") + v0  # ElectionType 0 (preferred) first from v1
    assert body(ElectLeadersRequest(timeout_ms=1000), 2) == h("00 00 000003e8 00")
    with pytest.raises(EncodeError):
        body(ElectLeadersRequest(election_type=1), 0)  # unclean election needs v1
