"""Kafka request and response messages, one class per message covering all versions.

Each class mirrors ``clients/src/main/resources/common/message/<Name>.json`` in
apache/kafka: field order is wire order, field names are the spec's in snake_case,
``versions``/``nullableVersions``/``taggedVersions`` are spelled as in the spec.
``MIN_VERSION``/``MAX_VERSION`` are the versions *we* support, which may be narrower
than the spec's ``validVersions``.

Deviations from the specs (Kafka 4.0/4.1 trunk), all deliberate:

- ApiVersions: spec 0-4; we declare 0-3 (v4 has v3's schema; it only lets a
  broker report a feature MinVersion of 0, KAFKA-17011).
- Metadata: spec 0-13; we declare 0-12 (v13 only adds a top-level ErrorCode for
  KIP-1102 re-bootstrap; 0-12 covers Kafka 2.x..4.x brokers).
- OffsetCommit: spec 2-10 (0-1 removed in Kafka 4.0); we declare 2-9. v10 adds
  TopicId (KIP-848), which is not declared. The request's ``GenerationIdOrMemberEpoch``
  (renamed for KIP-848) is kept under its classic name ``generation_id``: in the
  classic group protocol it is the generation.
- OffsetFetch: spec 1-10 (0 removed in 4.0); we declare 1-9 (v10 adds TopicId).
- ListOffsets: spec 1-10 (0 removed in 4.0); we declare 1-9 (v10 adds TimeoutMs).
- DescribeGroups: spec 0-6; we declare 0-5 (v6 adds a per-group ErrorMessage).
- Fields that exist only at versions below our MIN_VERSION (OffsetCommit's v1
  CommitTimestamp, ListOffsets' v0 MaxNumOffsets/OldStyleOffsets) are still declared
  so that the classes read like the specs; they are never on the wire.

Imports only the standard library, attrs and ``_schema``.
"""

from __future__ import annotations

import uuid

import attrs

from ._codec import EncodeError
from ._schema import ZERO_UUID, Request, Response, Struct, kf

__all__ = [
    "ALL_REQUESTS",
    "ALL_RESPONSES",
    "AlterUserScramCredentialsRequest",
    "AlterUserScramCredentialsResponse",
    "AlterUserScramCredentialsResult",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "ApiVersionsResponseApiVersion",
    "ApiVersionsResponseFinalizedFeatureKey",
    "ApiVersionsResponseSupportedFeatureKey",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribedGroup",
    "DescribedGroupMember",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "FindCoordinatorResponseCoordinator",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupRequest",
    "JoinGroupRequestProtocol",
    "JoinGroupResponse",
    "JoinGroupResponseMember",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
    "ListedGroup",
    "MemberIdentity",
    "MemberResponse",
    "MetadataRequest",
    "MetadataRequestTopic",
    "MetadataResponse",
    "MetadataResponseBroker",
    "MetadataResponsePartition",
    "MetadataResponseTopic",
    "OffsetCommitRequest",
    "OffsetCommitRequestPartition",
    "OffsetCommitRequestTopic",
    "OffsetCommitResponse",
    "OffsetCommitResponsePartition",
    "OffsetCommitResponseTopic",
    "OffsetFetchRequest",
    "OffsetFetchRequestGroup",
    "OffsetFetchRequestTopic",
    "OffsetFetchRequestTopics",
    "OffsetFetchResponse",
    "OffsetFetchResponseGroup",
    "OffsetFetchResponsePartition",
    "OffsetFetchResponsePartitions",
    "OffsetFetchResponseTopic",
    "OffsetFetchResponseTopics",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "ScramCredentialDeletion",
    "ScramCredentialUpsertion",
    "SyncGroupRequest",
    "SyncGroupRequestAssignment",
    "SyncGroupResponse",
]

#: Kafka's "no authorized operations reported" sentinel (INT32_MIN).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


# --------------------------------------------------------------------------- ApiVersions (18)


@attrs.frozen(kw_only=True)
class ApiVersionsRequest(Request):
    """ApiVersionsRequest (key 18). v3+ names the client software (KIP-511)."""

    API_KEY = 18
    MIN_VERSION = 0
    MAX_VERSION = 3
    FLEXIBLE_VERSION = 3

    client_software_name: str = attrs.field(default="", metadata=kf("3+", "string", ignorable=True))
    client_software_version: str = attrs.field(
        default="", metadata=kf("3+", "string", ignorable=True)
    )


@attrs.frozen(kw_only=True)
class ApiVersionsResponseApiVersion(Struct):
    """One API the broker supports, with its version range (spec type ``ApiVersion``)."""

    api_key: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    min_version: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    max_version: int = attrs.field(default=0, metadata=kf("0+", "int16"))


@attrs.frozen(kw_only=True)
class ApiVersionsResponseSupportedFeatureKey(Struct):
    """A feature the broker supports (spec type ``SupportedFeatureKey``, KIP-584)."""

    name: str = attrs.field(default="", metadata=kf("3+", "string"))
    min_version: int = attrs.field(default=0, metadata=kf("3+", "int16"))
    max_version: int = attrs.field(default=0, metadata=kf("3+", "int16"))


@attrs.frozen(kw_only=True)
class ApiVersionsResponseFinalizedFeatureKey(Struct):
    """A cluster-wide finalized feature (spec type ``FinalizedFeatureKey``, KIP-584)."""

    name: str = attrs.field(default="", metadata=kf("3+", "string"))
    max_version_level: int = attrs.field(default=0, metadata=kf("3+", "int16"))
    min_version_level: int = attrs.field(default=0, metadata=kf("3+", "int16"))


@attrs.frozen(kw_only=True)
class ApiVersionsResponse(Response):
    """ApiVersionsResponse (key 18). Its response header is always v0, even at
    flexible versions: a client must parse it before it knows the broker's versions."""

    API_KEY = 18
    MIN_VERSION = 0
    MAX_VERSION = 3
    FLEXIBLE_VERSION = 3

    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    api_keys: tuple[ApiVersionsResponseApiVersion, ...] = attrs.field(
        default=(), metadata=kf("0+", ApiVersionsResponseApiVersion, array=True)
    )
    throttle_time_ms: int = attrs.field(default=0, metadata=kf("1+", "int32", ignorable=True))
    supported_features: tuple[ApiVersionsResponseSupportedFeatureKey, ...] = attrs.field(
        default=(),
        metadata=kf(
            "3+",
            ApiVersionsResponseSupportedFeatureKey,
            array=True,
            ignorable=True,
            tagged="3+",
            tag=0,
        ),
    )
    finalized_features_epoch: int = attrs.field(
        default=-1, metadata=kf("3+", "int64", tagged="3+", tag=1)
    )
    finalized_features: tuple[ApiVersionsResponseFinalizedFeatureKey, ...] = attrs.field(
        default=(),
        metadata=kf("3+", ApiVersionsResponseFinalizedFeatureKey, array=True, tagged="3+", tag=2),
    )
    zk_migration_ready: bool = attrs.field(
        default=False, metadata=kf("3+", "bool", tagged="3+", tag=3)
    )


# --------------------------------------------------------------------------- Metadata (3)


@attrs.frozen(kw_only=True)
class MetadataRequestTopic(Struct):
    """A topic to describe; by id (v10+) or by name."""

    topic_id: uuid.UUID = attrs.field(default=ZERO_UUID, metadata=kf("10+", "uuid", ignorable=True))
    name: str | None = attrs.field(default="", metadata=kf("0+", "string", nullable="10+"))


@attrs.frozen(kw_only=True)
class MetadataRequest(Request):
    """MetadataRequest (key 3). ``topics=None`` (v1+) asks for every topic; an empty
    tuple asks for none (brokers only)."""

    API_KEY = 3
    MIN_VERSION = 0
    MAX_VERSION = 12
    FLEXIBLE_VERSION = 9

    topics: tuple[MetadataRequestTopic, ...] | None = attrs.field(
        default=(), metadata=kf("0+", MetadataRequestTopic, array=True, nullable="1+")
    )
    allow_auto_topic_creation: bool = attrs.field(default=True, metadata=kf("4+", "bool"))
    include_cluster_authorized_operations: bool = attrs.field(
        default=False, metadata=kf("8-10", "bool")
    )
    include_topic_authorized_operations: bool = attrs.field(
        default=False, metadata=kf("8+", "bool")
    )


@attrs.frozen(kw_only=True)
class MetadataResponseBroker(Struct):
    """A broker of the cluster."""

    node_id: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    host: str = attrs.field(default="", metadata=kf("0+", "string"))
    port: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    rack: str | None = attrs.field(
        default=None, metadata=kf("1+", "string", nullable="1+", ignorable=True)
    )


@attrs.frozen(kw_only=True)
class MetadataResponsePartition(Struct):
    """A partition's leader and replicas."""

    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    leader_id: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    leader_epoch: int = attrs.field(default=-1, metadata=kf("7+", "int32", ignorable=True))
    replica_nodes: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))
    isr_nodes: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))
    offline_replicas: tuple[int, ...] = attrs.field(
        default=(), metadata=kf("5+", "[]int32", ignorable=True)
    )


@attrs.frozen(kw_only=True)
class MetadataResponseTopic(Struct):
    """A topic with its partitions."""

    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    name: str | None = attrs.field(default="", metadata=kf("0+", "string", nullable="12+"))
    topic_id: uuid.UUID = attrs.field(default=ZERO_UUID, metadata=kf("10+", "uuid", ignorable=True))
    is_internal: bool = attrs.field(default=False, metadata=kf("1+", "bool", ignorable=True))
    partitions: tuple[MetadataResponsePartition, ...] = attrs.field(
        default=(), metadata=kf("0+", MetadataResponsePartition, array=True)
    )
    topic_authorized_operations: int = attrs.field(
        default=AUTHORIZED_OPERATIONS_OMITTED, metadata=kf("8+", "int32", ignorable=True)
    )


@attrs.frozen(kw_only=True)
class MetadataResponse(Response):
    """MetadataResponse (key 3)."""

    API_KEY = 3
    MIN_VERSION = 0
    MAX_VERSION = 12
    FLEXIBLE_VERSION = 9

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("3+", "int32", ignorable=True))
    brokers: tuple[MetadataResponseBroker, ...] = attrs.field(
        default=(), metadata=kf("0+", MetadataResponseBroker, array=True)
    )
    cluster_id: str | None = attrs.field(
        default=None, metadata=kf("2+", "string", nullable="2+", ignorable=True)
    )
    controller_id: int = attrs.field(default=-1, metadata=kf("1+", "int32", ignorable=True))
    topics: tuple[MetadataResponseTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", MetadataResponseTopic, array=True)
    )
    cluster_authorized_operations: int = attrs.field(
        default=AUTHORIZED_OPERATIONS_OMITTED, metadata=kf("8-10", "int32", ignorable=True)
    )


# --------------------------------------------------------------------------- FindCoordinator (10)


@attrs.frozen(kw_only=True)
class FindCoordinatorRequest(Request):
    """FindCoordinatorRequest (key 10). Up to v3 one ``key``; v4+ a batch of
    ``coordinator_keys`` (KIP-699). ``key_type`` 0 = group, 1 = transaction."""

    API_KEY = 10
    MIN_VERSION = 0
    MAX_VERSION = 6
    FLEXIBLE_VERSION = 3

    key: str = attrs.field(default="", metadata=kf("0-3", "string"))
    key_type: int = attrs.field(default=0, metadata=kf("1+", "int8"))
    coordinator_keys: tuple[str, ...] = attrs.field(default=(), metadata=kf("4+", "[]string"))


@attrs.frozen(kw_only=True)
class FindCoordinatorResponseCoordinator(Struct):
    """The coordinator of one key (spec type ``Coordinator``, v4+)."""

    key: str = attrs.field(default="", metadata=kf("4+", "string"))
    node_id: int = attrs.field(default=0, metadata=kf("4+", "int32"))
    host: str = attrs.field(default="", metadata=kf("4+", "string"))
    port: int = attrs.field(default=0, metadata=kf("4+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("4+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("4+", "string", nullable="4+")
    )


@attrs.frozen(kw_only=True)
class FindCoordinatorResponse(Response):
    """FindCoordinatorResponse (key 10)."""

    API_KEY = 10
    MIN_VERSION = 0
    MAX_VERSION = 6
    FLEXIBLE_VERSION = 3

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("1+", "int32", ignorable=True))
    error_code: int = attrs.field(default=0, metadata=kf("0-3", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("1-3", "string", nullable="1-3", ignorable=True)
    )
    node_id: int = attrs.field(default=0, metadata=kf("0-3", "int32"))
    host: str = attrs.field(default="", metadata=kf("0-3", "string"))
    port: int = attrs.field(default=0, metadata=kf("0-3", "int32"))
    coordinators: tuple[FindCoordinatorResponseCoordinator, ...] = attrs.field(
        default=(), metadata=kf("4+", FindCoordinatorResponseCoordinator, array=True)
    )


# --------------------------------------------------------------------------- JoinGroup (11)


@attrs.frozen(kw_only=True)
class JoinGroupRequestProtocol(Struct):
    """One protocol (assignor) the member supports, with its subscription metadata."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    metadata: bytes = attrs.field(default=b"", metadata=kf("0+", "bytes"))


@attrs.frozen(kw_only=True)
class JoinGroupRequest(Request):
    """JoinGroupRequest (key 11). v4+: a new member first gets MEMBER_ID_REQUIRED and
    rejoins with the id (KIP-394); v5+ static membership (KIP-345); v8+ reason (KIP-800)."""

    API_KEY = 11
    MIN_VERSION = 0
    MAX_VERSION = 9
    FLEXIBLE_VERSION = 6

    group_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    session_timeout_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    rebalance_timeout_ms: int = attrs.field(default=-1, metadata=kf("1+", "int32", ignorable=True))
    member_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    group_instance_id: str | None = attrs.field(
        default=None, metadata=kf("5+", "string", nullable="5+")
    )
    protocol_type: str = attrs.field(default="", metadata=kf("0+", "string"))
    protocols: tuple[JoinGroupRequestProtocol, ...] = attrs.field(
        default=(), metadata=kf("0+", JoinGroupRequestProtocol, array=True)
    )
    reason: str | None = attrs.field(
        default=None, metadata=kf("8+", "string", nullable="8+", ignorable=True)
    )


@attrs.frozen(kw_only=True)
class JoinGroupResponseMember(Struct):
    """A member of the group as the leader sees it in JoinGroup."""

    member_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    group_instance_id: str | None = attrs.field(
        default=None, metadata=kf("5+", "string", nullable="5+", ignorable=True)
    )
    metadata: bytes = attrs.field(default=b"", metadata=kf("0+", "bytes"))


@attrs.frozen(kw_only=True)
class JoinGroupResponse(Response):
    """JoinGroupResponse (key 11). v7+ echoes the protocol type (KIP-559); v9 adds
    ``skip_assignment`` (KIP-814)."""

    API_KEY = 11
    MIN_VERSION = 0
    MAX_VERSION = 9
    FLEXIBLE_VERSION = 6

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("2+", "int32", ignorable=True))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    generation_id: int = attrs.field(default=-1, metadata=kf("0+", "int32"))
    protocol_type: str | None = attrs.field(
        default=None, metadata=kf("7+", "string", nullable="7+", ignorable=True)
    )
    protocol_name: str | None = attrs.field(default="", metadata=kf("0+", "string", nullable="7+"))
    leader: str = attrs.field(default="", metadata=kf("0+", "string"))
    skip_assignment: bool = attrs.field(default=False, metadata=kf("9+", "bool"))
    member_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    members: tuple[JoinGroupResponseMember, ...] = attrs.field(
        default=(), metadata=kf("0+", JoinGroupResponseMember, array=True)
    )


# --------------------------------------------------------------------------- SyncGroup (14)


@attrs.frozen(kw_only=True)
class SyncGroupRequestAssignment(Struct):
    """The leader's assignment for one member."""

    member_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    assignment: bytes = attrs.field(default=b"", metadata=kf("0+", "bytes"))


@attrs.frozen(kw_only=True)
class SyncGroupRequest(Request):
    """SyncGroupRequest (key 14). v5+ carries protocol type and name (KIP-559)."""

    API_KEY = 14
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 4

    group_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    generation_id: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    member_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    group_instance_id: str | None = attrs.field(
        default=None, metadata=kf("3+", "string", nullable="3+")
    )
    protocol_type: str | None = attrs.field(
        default=None, metadata=kf("5+", "string", nullable="5+", ignorable=True)
    )
    protocol_name: str | None = attrs.field(
        default=None, metadata=kf("5+", "string", nullable="5+", ignorable=True)
    )
    assignments: tuple[SyncGroupRequestAssignment, ...] = attrs.field(
        default=(), metadata=kf("0+", SyncGroupRequestAssignment, array=True)
    )


@attrs.frozen(kw_only=True)
class SyncGroupResponse(Response):
    """SyncGroupResponse (key 14)."""

    API_KEY = 14
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 4

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("1+", "int32", ignorable=True))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    protocol_type: str | None = attrs.field(
        default=None, metadata=kf("5+", "string", nullable="5+", ignorable=True)
    )
    protocol_name: str | None = attrs.field(
        default=None, metadata=kf("5+", "string", nullable="5+", ignorable=True)
    )
    assignment: bytes = attrs.field(default=b"", metadata=kf("0+", "bytes"))


# --------------------------------------------------------------------------- Heartbeat (12)


@attrs.frozen(kw_only=True)
class HeartbeatRequest(Request):
    """HeartbeatRequest (key 12)."""

    API_KEY = 12
    MIN_VERSION = 0
    MAX_VERSION = 4
    FLEXIBLE_VERSION = 4

    group_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    generation_id: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    member_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    group_instance_id: str | None = attrs.field(
        default=None, metadata=kf("3+", "string", nullable="3+")
    )


@attrs.frozen(kw_only=True)
class HeartbeatResponse(Response):
    """HeartbeatResponse (key 12)."""

    API_KEY = 12
    MIN_VERSION = 0
    MAX_VERSION = 4
    FLEXIBLE_VERSION = 4

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("1+", "int32", ignorable=True))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))


# --------------------------------------------------------------------------- LeaveGroup (13)


@attrs.frozen(kw_only=True)
class MemberIdentity(Struct):
    """A member leaving the group (v3+, KIP-345 batch leave)."""

    member_id: str = attrs.field(default="", metadata=kf("3+", "string"))
    group_instance_id: str | None = attrs.field(
        default=None, metadata=kf("3+", "string", nullable="3+")
    )
    reason: str | None = attrs.field(
        default=None, metadata=kf("5+", "string", nullable="5+", ignorable=True)
    )


@attrs.frozen(kw_only=True)
class LeaveGroupRequest(Request):
    """LeaveGroupRequest (key 13). Up to v2 one ``member_id``; v3+ ``members``."""

    API_KEY = 13
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 4

    group_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    member_id: str = attrs.field(default="", metadata=kf("0-2", "string"))
    members: tuple[MemberIdentity, ...] = attrs.field(
        default=(), metadata=kf("3+", MemberIdentity, array=True)
    )

    def for_version(self, version: int) -> LeaveGroupRequest:
        """v0-2 carry one ``member_id``; v3+ the ``members`` list (KIP-345). Either
        spelling converts to the other; a static member (``group_instance_id``) or a
        batch of members cannot leave below v3."""
        if version >= 3:
            if not self.member_id:
                return self
            if not self.members:
                return attrs.evolve(
                    self, member_id="", members=(MemberIdentity(member_id=self.member_id),)
                )
            if any(m.member_id == self.member_id for m in self.members):
                return attrs.evolve(self, member_id="")
            raise EncodeError(
                f"LeaveGroup names member {self.member_id!r} outside its members list",
                api_key=self.API_KEY,
                api_version=version,
            )
        if not self.members:
            return self
        if len(self.members) > 1:
            raise EncodeError(
                f"LeaveGroup v{version} removes one member; {len(self.members)} need v3+",
                api_key=self.API_KEY,
                api_version=version,
            )
        (member,) = self.members
        if member.group_instance_id is not None:
            raise EncodeError(
                f"a static member ({member.group_instance_id!r}) can leave only with "
                "LeaveGroup v3+",
                api_key=self.API_KEY,
                api_version=version,
            )
        if self.member_id and self.member_id != member.member_id:
            raise EncodeError(
                f"LeaveGroup names two members ({self.member_id!r}, {member.member_id!r})",
                api_key=self.API_KEY,
                api_version=version,
            )
        return attrs.evolve(self, member_id=member.member_id, members=())


@attrs.frozen(kw_only=True)
class MemberResponse(Struct):
    """The outcome for one leaving member (v3+)."""

    member_id: str = attrs.field(default="", metadata=kf("3+", "string"))
    group_instance_id: str | None = attrs.field(
        default=None, metadata=kf("3+", "string", nullable="3+")
    )
    error_code: int = attrs.field(default=0, metadata=kf("3+", "int16"))


@attrs.frozen(kw_only=True)
class LeaveGroupResponse(Response):
    """LeaveGroupResponse (key 13)."""

    API_KEY = 13
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 4

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("1+", "int32", ignorable=True))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    members: tuple[MemberResponse, ...] = attrs.field(
        default=(), metadata=kf("3+", MemberResponse, array=True)
    )


# --------------------------------------------------------------------------- OffsetCommit (8)


@attrs.frozen(kw_only=True)
class OffsetCommitRequestPartition(Struct):
    """An offset to commit for one partition."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    committed_offset: int = attrs.field(default=0, metadata=kf("0+", "int64"))
    committed_leader_epoch: int = attrs.field(
        default=-1, metadata=kf("6+", "int32", ignorable=True)
    )
    commit_timestamp: int = attrs.field(default=-1, metadata=kf("1", "int64"))
    committed_metadata: str | None = attrs.field(
        default="", metadata=kf("0+", "string", nullable="0+")
    )


@attrs.frozen(kw_only=True)
class OffsetCommitRequestTopic(Struct):
    """The offsets to commit for one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[OffsetCommitRequestPartition, ...] = attrs.field(
        default=(), metadata=kf("0+", OffsetCommitRequestPartition, array=True)
    )


@attrs.frozen(kw_only=True)
class OffsetCommitRequest(Request):
    """OffsetCommitRequest (key 8). Kafka 4.0 removed v0-1; we support 2-9.

    ``generation_id`` is the spec's ``GenerationIdOrMemberEpoch`` (called
    ``GenerationId`` before KIP-848).
    """

    API_KEY = 8
    MIN_VERSION = 2
    MAX_VERSION = 9
    FLEXIBLE_VERSION = 8

    group_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    generation_id: int = attrs.field(default=-1, metadata=kf("1+", "int32", ignorable=True))
    member_id: str = attrs.field(default="", metadata=kf("1+", "string", ignorable=True))
    group_instance_id: str | None = attrs.field(
        default=None, metadata=kf("7+", "string", nullable="7+")
    )
    retention_time_ms: int = attrs.field(default=-1, metadata=kf("2-4", "int64", ignorable=True))
    topics: tuple[OffsetCommitRequestTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", OffsetCommitRequestTopic, array=True)
    )


@attrs.frozen(kw_only=True)
class OffsetCommitResponsePartition(Struct):
    """The commit outcome for one partition."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))


@attrs.frozen(kw_only=True)
class OffsetCommitResponseTopic(Struct):
    """The commit outcomes for one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[OffsetCommitResponsePartition, ...] = attrs.field(
        default=(), metadata=kf("0+", OffsetCommitResponsePartition, array=True)
    )


@attrs.frozen(kw_only=True)
class OffsetCommitResponse(Response):
    """OffsetCommitResponse (key 8)."""

    API_KEY = 8
    MIN_VERSION = 2
    MAX_VERSION = 9
    FLEXIBLE_VERSION = 8

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("3+", "int32", ignorable=True))
    topics: tuple[OffsetCommitResponseTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", OffsetCommitResponseTopic, array=True)
    )


# --------------------------------------------------------------------------- OffsetFetch (9)


@attrs.frozen(kw_only=True)
class OffsetFetchRequestTopic(Struct):
    """Partitions to fetch committed offsets for (v0-7)."""

    name: str = attrs.field(default="", metadata=kf("0-7", "string"))
    partition_indexes: tuple[int, ...] = attrs.field(default=(), metadata=kf("0-7", "[]int32"))


@attrs.frozen(kw_only=True)
class OffsetFetchRequestTopics(Struct):
    """Partitions to fetch committed offsets for, within a group (v8+)."""

    name: str = attrs.field(default="", metadata=kf("8+", "string"))
    partition_indexes: tuple[int, ...] = attrs.field(default=(), metadata=kf("8+", "[]int32"))


@attrs.frozen(kw_only=True)
class OffsetFetchRequestGroup(Struct):
    """One group to fetch offsets for (v8+, KIP-709). ``topics=None`` means all."""

    group_id: str = attrs.field(default="", metadata=kf("8+", "string"))
    member_id: str | None = attrs.field(
        default=None, metadata=kf("9+", "string", nullable="9+", ignorable=True)
    )
    member_epoch: int = attrs.field(default=-1, metadata=kf("9+", "int32", ignorable=True))
    topics: tuple[OffsetFetchRequestTopics, ...] | None = attrs.field(
        default=(), metadata=kf("8+", OffsetFetchRequestTopics, array=True, nullable="8+")
    )


@attrs.frozen(kw_only=True)
class OffsetFetchRequest(Request):
    """OffsetFetchRequest (key 9). v1-7: one ``group_id`` and ``topics`` (None = all,
    v2+); v8+: ``groups``. v7+ ``require_stable`` (KIP-447)."""

    API_KEY = 9
    MIN_VERSION = 1
    MAX_VERSION = 9
    FLEXIBLE_VERSION = 6

    group_id: str = attrs.field(default="", metadata=kf("0-7", "string"))
    topics: tuple[OffsetFetchRequestTopic, ...] | None = attrs.field(
        default=(), metadata=kf("0-7", OffsetFetchRequestTopic, array=True, nullable="2-7")
    )
    groups: tuple[OffsetFetchRequestGroup, ...] = attrs.field(
        default=(), metadata=kf("8+", OffsetFetchRequestGroup, array=True)
    )
    require_stable: bool = attrs.field(default=False, metadata=kf("7+", "bool"))


@attrs.frozen(kw_only=True)
class OffsetFetchResponsePartition(Struct):
    """A committed offset (v0-7)."""

    partition_index: int = attrs.field(default=0, metadata=kf("0-7", "int32"))
    committed_offset: int = attrs.field(default=-1, metadata=kf("0-7", "int64"))
    committed_leader_epoch: int = attrs.field(
        default=-1, metadata=kf("5-7", "int32", ignorable=True)
    )
    metadata: str | None = attrs.field(default="", metadata=kf("0-7", "string", nullable="0-7"))
    error_code: int = attrs.field(default=0, metadata=kf("0-7", "int16"))


@attrs.frozen(kw_only=True)
class OffsetFetchResponseTopic(Struct):
    """Committed offsets of one topic (v0-7)."""

    name: str = attrs.field(default="", metadata=kf("0-7", "string"))
    partitions: tuple[OffsetFetchResponsePartition, ...] = attrs.field(
        default=(), metadata=kf("0-7", OffsetFetchResponsePartition, array=True)
    )


@attrs.frozen(kw_only=True)
class OffsetFetchResponsePartitions(Struct):
    """A committed offset (v8+)."""

    partition_index: int = attrs.field(default=0, metadata=kf("8+", "int32"))
    committed_offset: int = attrs.field(default=-1, metadata=kf("8+", "int64"))
    committed_leader_epoch: int = attrs.field(
        default=-1, metadata=kf("8+", "int32", ignorable=True)
    )
    metadata: str | None = attrs.field(default="", metadata=kf("8+", "string", nullable="8+"))
    error_code: int = attrs.field(default=0, metadata=kf("8+", "int16"))


@attrs.frozen(kw_only=True)
class OffsetFetchResponseTopics(Struct):
    """Committed offsets of one topic (v8+)."""

    name: str = attrs.field(default="", metadata=kf("8+", "string"))
    partitions: tuple[OffsetFetchResponsePartitions, ...] = attrs.field(
        default=(), metadata=kf("8+", OffsetFetchResponsePartitions, array=True)
    )


@attrs.frozen(kw_only=True)
class OffsetFetchResponseGroup(Struct):
    """Committed offsets of one group (v8+)."""

    group_id: str = attrs.field(default="", metadata=kf("8+", "string"))
    topics: tuple[OffsetFetchResponseTopics, ...] = attrs.field(
        default=(), metadata=kf("8+", OffsetFetchResponseTopics, array=True)
    )
    error_code: int = attrs.field(default=0, metadata=kf("8+", "int16"))


@attrs.frozen(kw_only=True)
class OffsetFetchResponse(Response):
    """OffsetFetchResponse (key 9). v1-7: ``topics`` and (v2+) a top-level
    ``error_code``; v8+: ``groups``."""

    API_KEY = 9
    MIN_VERSION = 1
    MAX_VERSION = 9
    FLEXIBLE_VERSION = 6

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("3+", "int32", ignorable=True))
    topics: tuple[OffsetFetchResponseTopic, ...] = attrs.field(
        default=(), metadata=kf("0-7", OffsetFetchResponseTopic, array=True)
    )
    error_code: int = attrs.field(default=0, metadata=kf("2-7", "int16", ignorable=True))
    groups: tuple[OffsetFetchResponseGroup, ...] = attrs.field(
        default=(), metadata=kf("8+", OffsetFetchResponseGroup, array=True)
    )


# --------------------------------------------------------------------------- DescribeGroups (15)


@attrs.frozen(kw_only=True)
class DescribeGroupsRequest(Request):
    """DescribeGroupsRequest (key 15)."""

    API_KEY = 15
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 5

    groups: tuple[str, ...] = attrs.field(default=(), metadata=kf("0+", "[]string"))
    include_authorized_operations: bool = attrs.field(default=False, metadata=kf("3+", "bool"))


@attrs.frozen(kw_only=True)
class DescribedGroupMember(Struct):
    """A member of a described group."""

    member_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    group_instance_id: str | None = attrs.field(
        default=None, metadata=kf("4+", "string", nullable="4+", ignorable=True)
    )
    client_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    client_host: str = attrs.field(default="", metadata=kf("0+", "string"))
    member_metadata: bytes = attrs.field(default=b"", metadata=kf("0+", "bytes"))
    member_assignment: bytes = attrs.field(default=b"", metadata=kf("0+", "bytes"))


@attrs.frozen(kw_only=True)
class DescribedGroup(Struct):
    """One described group."""

    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    group_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    group_state: str = attrs.field(default="", metadata=kf("0+", "string"))
    protocol_type: str = attrs.field(default="", metadata=kf("0+", "string"))
    protocol_data: str = attrs.field(default="", metadata=kf("0+", "string"))
    members: tuple[DescribedGroupMember, ...] = attrs.field(
        default=(), metadata=kf("0+", DescribedGroupMember, array=True)
    )
    authorized_operations: int = attrs.field(
        default=AUTHORIZED_OPERATIONS_OMITTED, metadata=kf("3+", "int32")
    )


@attrs.frozen(kw_only=True)
class DescribeGroupsResponse(Response):
    """DescribeGroupsResponse (key 15)."""

    API_KEY = 15
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 5

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("1+", "int32", ignorable=True))
    groups: tuple[DescribedGroup, ...] = attrs.field(
        default=(), metadata=kf("0+", DescribedGroup, array=True)
    )


# --------------------------------------------------------------------------- ListGroups (16)


@attrs.frozen(kw_only=True)
class ListGroupsRequest(Request):
    """ListGroupsRequest (key 16). v4+ filters by state (KIP-518), v5+ by type (KIP-848)."""

    API_KEY = 16
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 3

    states_filter: tuple[str, ...] = attrs.field(default=(), metadata=kf("4+", "[]string"))
    types_filter: tuple[str, ...] = attrs.field(default=(), metadata=kf("5+", "[]string"))


@attrs.frozen(kw_only=True)
class ListedGroup(Struct):
    """One listed group."""

    group_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    protocol_type: str = attrs.field(default="", metadata=kf("0+", "string"))
    group_state: str = attrs.field(default="", metadata=kf("4+", "string", ignorable=True))
    group_type: str = attrs.field(default="", metadata=kf("5+", "string", ignorable=True))


@attrs.frozen(kw_only=True)
class ListGroupsResponse(Response):
    """ListGroupsResponse (key 16)."""

    API_KEY = 16
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 3

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("1+", "int32", ignorable=True))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    groups: tuple[ListedGroup, ...] = attrs.field(
        default=(), metadata=kf("0+", ListedGroup, array=True)
    )


# --------------------------------------------------------------------------- ListOffsets (2)


@attrs.frozen(kw_only=True)
class ListOffsetsPartition(Struct):
    """A partition to look up an offset for. ``timestamp`` -1 = latest, -2 = earliest."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    current_leader_epoch: int = attrs.field(default=-1, metadata=kf("4+", "int32", ignorable=True))
    timestamp: int = attrs.field(default=0, metadata=kf("0+", "int64"))
    max_num_offsets: int = attrs.field(default=1, metadata=kf("0", "int32"))


@attrs.frozen(kw_only=True)
class ListOffsetsTopic(Struct):
    """A topic to look up offsets in."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[ListOffsetsPartition, ...] = attrs.field(
        default=(), metadata=kf("0+", ListOffsetsPartition, array=True)
    )


@attrs.frozen(kw_only=True)
class ListOffsetsRequest(Request):
    """ListOffsetsRequest (key 2). ``replica_id`` -1 for consumers; ``isolation_level``
    0 = read_uncommitted, 1 = read_committed (v2+)."""

    API_KEY = 2
    MIN_VERSION = 1
    MAX_VERSION = 9
    FLEXIBLE_VERSION = 6

    replica_id: int = attrs.field(default=-1, metadata=kf("0+", "int32"))
    isolation_level: int = attrs.field(default=0, metadata=kf("2+", "int8"))
    topics: tuple[ListOffsetsTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", ListOffsetsTopic, array=True)
    )


@attrs.frozen(kw_only=True)
class ListOffsetsPartitionResponse(Struct):
    """The offset found for one partition."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    old_style_offsets: tuple[int, ...] = attrs.field(default=(), metadata=kf("0", "[]int64"))
    timestamp: int = attrs.field(default=-1, metadata=kf("1+", "int64"))
    offset: int = attrs.field(default=-1, metadata=kf("1+", "int64"))
    leader_epoch: int = attrs.field(default=-1, metadata=kf("4+", "int32"))


@attrs.frozen(kw_only=True)
class ListOffsetsTopicResponse(Struct):
    """The offsets found in one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[ListOffsetsPartitionResponse, ...] = attrs.field(
        default=(), metadata=kf("0+", ListOffsetsPartitionResponse, array=True)
    )


@attrs.frozen(kw_only=True)
class ListOffsetsResponse(Response):
    """ListOffsetsResponse (key 2)."""

    API_KEY = 2
    MIN_VERSION = 1
    MAX_VERSION = 9
    FLEXIBLE_VERSION = 6

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("2+", "int32", ignorable=True))
    topics: tuple[ListOffsetsTopicResponse, ...] = attrs.field(
        default=(), metadata=kf("0+", ListOffsetsTopicResponse, array=True)
    )


# ------------------------------------------------------------------ SASL (17, 36), SCRAM (51)
#
# SaslHandshake picks the mechanism, SaslAuthenticate carries its bytes (KIP-152); a
# connection sends them right after ApiVersions and again to re-authenticate (KIP-368).
# AlterUserScramCredentials (KIP-554) creates SCRAM users; the test brokers use it.
# Fields that carry credentials (``auth_bytes``: a PLAIN message holds the password;
# ``salted_password``) never appear in a repr.


def _redacted_bytes(value: bytes) -> str:
    return f"<{len(value)} bytes redacted>"


@attrs.frozen(kw_only=True)
class SaslHandshakeRequest(Request):
    """SaslHandshakeRequest (key 17). v1 means SaslAuthenticate requests follow (v0's
    raw, unframed SASL tokens are not spoken)."""

    API_KEY = 17
    MIN_VERSION = 0
    MAX_VERSION = 1
    FLEXIBLE_VERSION = None

    mechanism: str = attrs.field(default="", metadata=kf("0+", "string"))


@attrs.frozen(kw_only=True)
class SaslHandshakeResponse(Response):
    """SaslHandshakeResponse (key 17): the mechanisms the broker enables."""

    API_KEY = 17
    MIN_VERSION = 0
    MAX_VERSION = 1
    FLEXIBLE_VERSION = None

    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    mechanisms: tuple[str, ...] = attrs.field(default=(), metadata=kf("0+", "[]string"))


@attrs.frozen(kw_only=True)
class SaslAuthenticateRequest(Request):
    """SaslAuthenticateRequest (key 36): one SASL message from the client."""

    API_KEY = 36
    MIN_VERSION = 0
    MAX_VERSION = 2
    FLEXIBLE_VERSION = 2

    auth_bytes: bytes = attrs.field(default=b"", repr=_redacted_bytes, metadata=kf("0+", "bytes"))


@attrs.frozen(kw_only=True)
class SaslAuthenticateResponse(Response):
    """SaslAuthenticateResponse (key 36). v1+ ``session_lifetime_ms``: re-authenticate
    before it runs out (KIP-368); 0 means no limit."""

    API_KEY = 36
    MIN_VERSION = 0
    MAX_VERSION = 2
    FLEXIBLE_VERSION = 2

    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )
    auth_bytes: bytes = attrs.field(default=b"", repr=_redacted_bytes, metadata=kf("0+", "bytes"))
    session_lifetime_ms: int = attrs.field(default=0, metadata=kf("1+", "int64", ignorable=True))


@attrs.frozen(kw_only=True)
class ScramCredentialDeletion(Struct):
    """A SCRAM credential to remove (``mechanism``: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512)."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    mechanism: int = attrs.field(default=0, metadata=kf("0+", "int8"))


@attrs.frozen(kw_only=True)
class ScramCredentialUpsertion(Struct):
    """A SCRAM credential to create or replace: the client salts the password."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    mechanism: int = attrs.field(default=0, metadata=kf("0+", "int8"))
    iterations: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    salt: bytes = attrs.field(default=b"", metadata=kf("0+", "bytes"))
    salted_password: bytes = attrs.field(
        default=b"", repr=_redacted_bytes, metadata=kf("0+", "bytes")
    )


@attrs.frozen(kw_only=True)
class AlterUserScramCredentialsRequest(Request):
    """AlterUserScramCredentialsRequest (key 51, KIP-554)."""

    API_KEY = 51
    MIN_VERSION = 0
    MAX_VERSION = 0
    FLEXIBLE_VERSION = 0

    deletions: tuple[ScramCredentialDeletion, ...] = attrs.field(
        default=(), metadata=kf("0+", ScramCredentialDeletion, array=True)
    )
    upsertions: tuple[ScramCredentialUpsertion, ...] = attrs.field(
        default=(), metadata=kf("0+", ScramCredentialUpsertion, array=True)
    )


@attrs.frozen(kw_only=True)
class AlterUserScramCredentialsResult(Struct):
    """The outcome for one user."""

    user: str = attrs.field(default="", metadata=kf("0+", "string"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )


@attrs.frozen(kw_only=True)
class AlterUserScramCredentialsResponse(Response):
    """AlterUserScramCredentialsResponse (key 51)."""

    API_KEY = 51
    MIN_VERSION = 0
    MAX_VERSION = 0
    FLEXIBLE_VERSION = 0

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    results: tuple[AlterUserScramCredentialsResult, ...] = attrs.field(
        default=(), metadata=kf("0+", AlterUserScramCredentialsResult, array=True)
    )


# --------------------------------------------------------------------------- registry

ApiVersionsRequest.RESPONSE_TYPE = ApiVersionsResponse
MetadataRequest.RESPONSE_TYPE = MetadataResponse
FindCoordinatorRequest.RESPONSE_TYPE = FindCoordinatorResponse
JoinGroupRequest.RESPONSE_TYPE = JoinGroupResponse
SyncGroupRequest.RESPONSE_TYPE = SyncGroupResponse
HeartbeatRequest.RESPONSE_TYPE = HeartbeatResponse
LeaveGroupRequest.RESPONSE_TYPE = LeaveGroupResponse
OffsetCommitRequest.RESPONSE_TYPE = OffsetCommitResponse
OffsetFetchRequest.RESPONSE_TYPE = OffsetFetchResponse
DescribeGroupsRequest.RESPONSE_TYPE = DescribeGroupsResponse
ListGroupsRequest.RESPONSE_TYPE = ListGroupsResponse
ListOffsetsRequest.RESPONSE_TYPE = ListOffsetsResponse
SaslHandshakeRequest.RESPONSE_TYPE = SaslHandshakeResponse
SaslAuthenticateRequest.RESPONSE_TYPE = SaslAuthenticateResponse
AlterUserScramCredentialsRequest.RESPONSE_TYPE = AlterUserScramCredentialsResponse

#: Every request class declared here, by API key.
ALL_REQUESTS: dict[int, type[Request]] = {
    cls.API_KEY: cls
    for cls in (
        ApiVersionsRequest,
        MetadataRequest,
        FindCoordinatorRequest,
        JoinGroupRequest,
        SyncGroupRequest,
        HeartbeatRequest,
        LeaveGroupRequest,
        OffsetCommitRequest,
        OffsetFetchRequest,
        DescribeGroupsRequest,
        ListGroupsRequest,
        ListOffsetsRequest,
        SaslHandshakeRequest,
        SaslAuthenticateRequest,
        AlterUserScramCredentialsRequest,
    )
}

#: Every response class declared here, by API key.
ALL_RESPONSES: dict[int, type[Response]] = {
    cls.API_KEY: cls.RESPONSE_TYPE for cls in ALL_REQUESTS.values()
}
