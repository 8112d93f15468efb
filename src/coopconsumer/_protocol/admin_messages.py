"""Kafka admin API messages, one class per message covering all its versions.

The same declarative style as ``messages``: each class mirrors
``clients/src/main/resources/common/message/<Name>.json`` in apache/kafka (trunk of
late 2024, Kafka 3.9/4.0); field order is wire order, names are the spec's in
snake_case, version ranges are spelled as in the spec. Nested struct classes carry the
spec's struct names (``CreatableTopic``, ``ReassignableTopic``...), which are unique
across these messages.

Deviations from the specs, all deliberate:

- DeleteTopics: v0-5 carry ``topic_names``, v6 ``topics`` (name or id). Build the
  request with either; ``for_version`` converts names to the negotiated shape, as
  Java's ``DeleteTopicsRequest.Builder`` does. A topic given only by id cannot be
  sent below v6.
- DescribeConfigs: the v0-only ``IsDefault`` is declared so the class reads like the
  spec; from v1 ``config_source`` says the same thing.

``ADMIN_REQUESTS``/``ADMIN_RESPONSES`` list them by API key; ``REQUESTS_BY_KEY`` is
the union with the consumer messages, for code that decodes any request (test
brokers).

Imports only the standard library, attrs and the ``_protocol`` siblings.
"""

from __future__ import annotations

import uuid

import attrs

from ._codec import EncodeError
from ._schema import ZERO_UUID, Request, Response, Struct, kf
from .messages import ALL_REQUESTS

__all__ = [
    "ADMIN_REQUESTS",
    "ADMIN_RESPONSES",
    "CLUSTER_AUTHORIZED_OPERATIONS_OMITTED",
    "REQUESTS_BY_KEY",
    "AlterConfigsResource",
    "AlterConfigsResourceResponse",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "AlterReplicaLogDir",
    "AlterReplicaLogDirPartitionResult",
    "AlterReplicaLogDirTopic",
    "AlterReplicaLogDirTopicResult",
    "AlterReplicaLogDirsRequest",
    "AlterReplicaLogDirsResponse",
    "AlterableConfig",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicConfig",
    "CreatableTopicConfigs",
    "CreatableTopicResult",
    "CreatePartitionsAssignment",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreatePartitionsTopic",
    "CreatePartitionsTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicState",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribableLogDirTopic",
    "DescribeClusterBroker",
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResourceResult",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "DescribeConfigsSynonym",
    "DescribeLogDirsPartition",
    "DescribeLogDirsRequest",
    "DescribeLogDirsResponse",
    "DescribeLogDirsResult",
    "DescribeLogDirsTopic",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "ElectionPartitionResult",
    "ElectionTopicPartitions",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "ListPartitionReassignmentsTopics",
    "OngoingPartitionReassignment",
    "OngoingTopicReassignment",
    "ReassignablePartition",
    "ReassignablePartitionResponse",
    "ReassignableTopic",
    "ReassignableTopicResponse",
    "ReplicaElectionResult",
]

#: Kafka's "no authorized operations reported" sentinel (INT32_MIN).
CLUSTER_AUTHORIZED_OPERATIONS_OMITTED = -2147483648


# --------------------------------------------------------------------------- CreateTopics (19)


@attrs.frozen(kw_only=True)
class CreatableReplicaAssignment(Struct):
    """The brokers of one partition in an explicit assignment."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    broker_ids: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class CreatableTopicConfig(Struct):
    """One topic configuration to set at creation."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    value: str | None = attrs.field(default=None, metadata=kf("0+", "string", nullable="0+"))


@attrs.frozen(kw_only=True)
class CreatableTopic(Struct):
    """A topic to create: a partition count and replication factor, or -1 for both and
    an explicit ``assignments`` list."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    num_partitions: int = attrs.field(default=-1, metadata=kf("0+", "int32"))
    replication_factor: int = attrs.field(default=-1, metadata=kf("0+", "int16"))
    assignments: tuple[CreatableReplicaAssignment, ...] = attrs.field(
        default=(), metadata=kf("0+", CreatableReplicaAssignment, array=True)
    )
    configs: tuple[CreatableTopicConfig, ...] = attrs.field(
        default=(), metadata=kf("0+", CreatableTopicConfig, array=True)
    )


@attrs.frozen(kw_only=True)
class CreateTopicsRequest(Request):
    """CreateTopicsRequest (key 19). v1+ ``validate_only``; v4+ -1 means the broker
    default for partitions/replication factor (KIP-464); v5 flexible."""

    API_KEY = 19
    MIN_VERSION = 0
    MAX_VERSION = 7
    FLEXIBLE_VERSION = 5

    topics: tuple[CreatableTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", CreatableTopic, array=True)
    )
    timeout_ms: int = attrs.field(default=60000, metadata=kf("0+", "int32"))
    validate_only: bool = attrs.field(default=False, metadata=kf("1+", "bool"))


@attrs.frozen(kw_only=True)
class CreatableTopicConfigs(Struct):
    """A configuration of a created topic, as the broker reports it (v5+, KIP-525)."""

    name: str = attrs.field(default="", metadata=kf("5+", "string"))
    value: str | None = attrs.field(default=None, metadata=kf("5+", "string", nullable="5+"))
    read_only: bool = attrs.field(default=False, metadata=kf("5+", "bool"))
    config_source: int = attrs.field(default=-1, metadata=kf("5+", "int8", ignorable=True))
    is_sensitive: bool = attrs.field(default=False, metadata=kf("5+", "bool"))


@attrs.frozen(kw_only=True)
class CreatableTopicResult(Struct):
    """The outcome for one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    topic_id: uuid.UUID = attrs.field(default=ZERO_UUID, metadata=kf("7+", "uuid", ignorable=True))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("1+", "string", nullable="0+", ignorable=True)
    )
    topic_config_error_code: int = attrs.field(
        default=0, metadata=kf("5+", "int16", tagged="5+", tag=0, ignorable=True)
    )
    num_partitions: int = attrs.field(default=-1, metadata=kf("5+", "int32", ignorable=True))
    replication_factor: int = attrs.field(default=-1, metadata=kf("5+", "int16", ignorable=True))
    configs: tuple[CreatableTopicConfigs, ...] | None = attrs.field(
        default=(),
        metadata=kf("5+", CreatableTopicConfigs, array=True, nullable="5+", ignorable=True),
    )


@attrs.frozen(kw_only=True)
class CreateTopicsResponse(Response):
    """CreateTopicsResponse (key 19)."""

    API_KEY = 19
    MIN_VERSION = 0
    MAX_VERSION = 7
    FLEXIBLE_VERSION = 5

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("2+", "int32", ignorable=True))
    topics: tuple[CreatableTopicResult, ...] = attrs.field(
        default=(), metadata=kf("0+", CreatableTopicResult, array=True)
    )


CreateTopicsRequest.RESPONSE_TYPE = CreateTopicsResponse


# --------------------------------------------------------------------------- DeleteTopics (20)


@attrs.frozen(kw_only=True)
class DeleteTopicState(Struct):
    """A topic to delete by name or by id (v6+)."""

    name: str | None = attrs.field(default=None, metadata=kf("6+", "string", nullable="6+"))
    topic_id: uuid.UUID = attrs.field(default=ZERO_UUID, metadata=kf("6+", "uuid"))


@attrs.frozen(kw_only=True)
class DeleteTopicsRequest(Request):
    """DeleteTopicsRequest (key 20). Give ``topic_names`` or ``topics``; the request is
    converted to the negotiated version's shape (see the module docstring)."""

    API_KEY = 20
    MIN_VERSION = 0
    MAX_VERSION = 6
    FLEXIBLE_VERSION = 4

    topics: tuple[DeleteTopicState, ...] = attrs.field(
        default=(), metadata=kf("6+", DeleteTopicState, array=True)
    )
    topic_names: tuple[str, ...] = attrs.field(
        default=(), metadata=kf("0-5", "[]string", ignorable=True)
    )
    timeout_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))

    def for_version(self, version: int) -> DeleteTopicsRequest:
        """Names move between ``topic_names`` (v0-5) and ``topics`` (v6+)."""
        if version >= 6:
            if not self.topic_names:
                return self
            extra = tuple(
                DeleteTopicState(name=name)
                for name in self.topic_names
                if all(t.name != name for t in self.topics)
            )
            return attrs.evolve(self, topics=self.topics + extra, topic_names=())
        if not self.topics:
            return self
        names = list(self.topic_names)
        for topic in self.topics:
            if topic.name is None:
                raise EncodeError(
                    f"DeleteTopics v{version} deletes by name; topic id {topic.topic_id} needs v6+",
                    api_key=self.API_KEY,
                    api_version=version,
                )
            if topic.name not in names:
                names.append(topic.name)
        return attrs.evolve(self, topics=(), topic_names=tuple(names))


@attrs.frozen(kw_only=True)
class DeletableTopicResult(Struct):
    """The outcome for one topic."""

    name: str | None = attrs.field(default="", metadata=kf("0+", "string", nullable="6+"))
    topic_id: uuid.UUID = attrs.field(default=ZERO_UUID, metadata=kf("6+", "uuid", ignorable=True))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("5+", "string", nullable="5+", ignorable=True)
    )


@attrs.frozen(kw_only=True)
class DeleteTopicsResponse(Response):
    """DeleteTopicsResponse (key 20)."""

    API_KEY = 20
    MIN_VERSION = 0
    MAX_VERSION = 6
    FLEXIBLE_VERSION = 4

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("1+", "int32", ignorable=True))
    responses: tuple[DeletableTopicResult, ...] = attrs.field(
        default=(), metadata=kf("0+", DeletableTopicResult, array=True)
    )


DeleteTopicsRequest.RESPONSE_TYPE = DeleteTopicsResponse


# --------------------------------------------------------------------------- DescribeConfigs (32)


@attrs.frozen(kw_only=True)
class DescribeConfigsResource(Struct):
    """A resource (``resource_type`` 2 = topic, 4 = broker) and the keys wanted
    (None: all)."""

    resource_type: int = attrs.field(default=0, metadata=kf("0+", "int8"))
    resource_name: str = attrs.field(default="", metadata=kf("0+", "string"))
    configuration_keys: tuple[str, ...] | None = attrs.field(
        default=None, metadata=kf("0+", "[]string", nullable="0+")
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsRequest(Request):
    """DescribeConfigsRequest (key 32)."""

    API_KEY = 32
    MIN_VERSION = 0
    MAX_VERSION = 4
    FLEXIBLE_VERSION = 4

    resources: tuple[DescribeConfigsResource, ...] = attrs.field(
        default=(), metadata=kf("0+", DescribeConfigsResource, array=True)
    )
    include_synonyms: bool = attrs.field(default=False, metadata=kf("1+", "bool"))
    include_documentation: bool = attrs.field(default=False, metadata=kf("3+", "bool"))


@attrs.frozen(kw_only=True)
class DescribeConfigsSynonym(Struct):
    """Where else a configuration's value is set (v1+)."""

    name: str = attrs.field(default="", metadata=kf("1+", "string"))
    value: str | None = attrs.field(default=None, metadata=kf("1+", "string", nullable="0+"))
    source: int = attrs.field(default=0, metadata=kf("1+", "int8"))


@attrs.frozen(kw_only=True)
class DescribeConfigsResourceResult(Struct):
    """One configuration entry."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    value: str | None = attrs.field(default=None, metadata=kf("0+", "string", nullable="0+"))
    read_only: bool = attrs.field(default=False, metadata=kf("0+", "bool"))
    is_default: bool = attrs.field(default=False, metadata=kf("0", "bool"))
    config_source: int = attrs.field(default=-1, metadata=kf("1+", "int8", ignorable=True))
    is_sensitive: bool = attrs.field(default=False, metadata=kf("0+", "bool"))
    synonyms: tuple[DescribeConfigsSynonym, ...] = attrs.field(
        default=(), metadata=kf("1+", DescribeConfigsSynonym, array=True, ignorable=True)
    )
    config_type: int = attrs.field(default=0, metadata=kf("3+", "int8", ignorable=True))
    documentation: str | None = attrs.field(
        default=None, metadata=kf("3+", "string", nullable="0+", ignorable=True)
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsResult(Struct):
    """The configurations of one resource."""

    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )
    resource_type: int = attrs.field(default=0, metadata=kf("0+", "int8"))
    resource_name: str = attrs.field(default="", metadata=kf("0+", "string"))
    configs: tuple[DescribeConfigsResourceResult, ...] = attrs.field(
        default=(), metadata=kf("0+", DescribeConfigsResourceResult, array=True)
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsResponse(Response):
    """DescribeConfigsResponse (key 32)."""

    API_KEY = 32
    MIN_VERSION = 0
    MAX_VERSION = 4
    FLEXIBLE_VERSION = 4

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    results: tuple[DescribeConfigsResult, ...] = attrs.field(
        default=(), metadata=kf("0+", DescribeConfigsResult, array=True)
    )


DescribeConfigsRequest.RESPONSE_TYPE = DescribeConfigsResponse


# ------------------------------------------------------------------------- AlterReplicaLogDirs (34)


@attrs.frozen(kw_only=True)
class AlterReplicaLogDirTopic(Struct):
    """The partitions of one topic to move into a directory."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class AlterReplicaLogDir(Struct):
    """A destination log directory and the replicas to move into it."""

    path: str = attrs.field(default="", metadata=kf("0+", "string"))
    topics: tuple[AlterReplicaLogDirTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", AlterReplicaLogDirTopic, array=True)
    )


@attrs.frozen(kw_only=True)
class AlterReplicaLogDirsRequest(Request):
    """AlterReplicaLogDirsRequest (key 34, KIP-113): sent to the broker that hosts the
    replicas. v1 is v0; v2 is flexible."""

    API_KEY = 34
    MIN_VERSION = 0
    MAX_VERSION = 2
    FLEXIBLE_VERSION = 2

    dirs: tuple[AlterReplicaLogDir, ...] = attrs.field(
        default=(), metadata=kf("0+", AlterReplicaLogDir, array=True)
    )


@attrs.frozen(kw_only=True)
class AlterReplicaLogDirPartitionResult(Struct):
    """One partition's result."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))


@attrs.frozen(kw_only=True)
class AlterReplicaLogDirTopicResult(Struct):
    """One topic's results."""

    topic_name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[AlterReplicaLogDirPartitionResult, ...] = attrs.field(
        default=(), metadata=kf("0+", AlterReplicaLogDirPartitionResult, array=True)
    )


@attrs.frozen(kw_only=True)
class AlterReplicaLogDirsResponse(Response):
    """AlterReplicaLogDirsResponse (key 34)."""

    API_KEY = 34
    MIN_VERSION = 0
    MAX_VERSION = 2
    FLEXIBLE_VERSION = 2

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    results: tuple[AlterReplicaLogDirTopicResult, ...] = attrs.field(
        default=(), metadata=kf("0+", AlterReplicaLogDirTopicResult, array=True)
    )


AlterReplicaLogDirsRequest.RESPONSE_TYPE = AlterReplicaLogDirsResponse


# --------------------------------------------------------------------------- DescribeLogDirs (35)


@attrs.frozen(kw_only=True)
class DescribableLogDirTopic(Struct):
    """A topic whose partitions' log directories are wanted."""

    topic: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class DescribeLogDirsRequest(Request):
    """DescribeLogDirsRequest (key 35). ``topics=None`` asks for every partition the
    broker hosts."""

    API_KEY = 35
    MIN_VERSION = 0
    MAX_VERSION = 4
    FLEXIBLE_VERSION = 2

    topics: tuple[DescribableLogDirTopic, ...] | None = attrs.field(
        default=None, metadata=kf("0+", DescribableLogDirTopic, array=True, nullable="0+")
    )


@attrs.frozen(kw_only=True)
class DescribeLogDirsPartition(Struct):
    """One replica in a log directory: its size in bytes and its lag."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    partition_size: int = attrs.field(default=0, metadata=kf("0+", "int64"))
    offset_lag: int = attrs.field(default=0, metadata=kf("0+", "int64"))
    is_future_key: bool = attrs.field(default=False, metadata=kf("0+", "bool"))


@attrs.frozen(kw_only=True)
class DescribeLogDirsTopic(Struct):
    """The replicas of one topic in a log directory."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[DescribeLogDirsPartition, ...] = attrs.field(
        default=(), metadata=kf("0+", DescribeLogDirsPartition, array=True)
    )


@attrs.frozen(kw_only=True)
class DescribeLogDirsResult(Struct):
    """One log directory; v4+ also its capacity (KIP-827)."""

    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    log_dir: str = attrs.field(default="", metadata=kf("0+", "string"))
    topics: tuple[DescribeLogDirsTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", DescribeLogDirsTopic, array=True)
    )
    total_bytes: int = attrs.field(default=-1, metadata=kf("4+", "int64", ignorable=True))
    usable_bytes: int = attrs.field(default=-1, metadata=kf("4+", "int64", ignorable=True))


@attrs.frozen(kw_only=True)
class DescribeLogDirsResponse(Response):
    """DescribeLogDirsResponse (key 35). v3+ has a top-level error code."""

    API_KEY = 35
    MIN_VERSION = 0
    MAX_VERSION = 4
    FLEXIBLE_VERSION = 2

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("3+", "int16"))
    results: tuple[DescribeLogDirsResult, ...] = attrs.field(
        default=(), metadata=kf("0+", DescribeLogDirsResult, array=True)
    )


DescribeLogDirsRequest.RESPONSE_TYPE = DescribeLogDirsResponse


# --------------------------------------------------------------------------- CreatePartitions (37)


@attrs.frozen(kw_only=True)
class CreatePartitionsAssignment(Struct):
    """The brokers of one new partition."""

    broker_ids: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class CreatePartitionsTopic(Struct):
    """Grow a topic to ``count`` partitions; ``assignments`` (None: the broker places
    them) lists the new partitions only, in order."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    count: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    assignments: tuple[CreatePartitionsAssignment, ...] | None = attrs.field(
        default=None, metadata=kf("0+", CreatePartitionsAssignment, array=True, nullable="0+")
    )


@attrs.frozen(kw_only=True)
class CreatePartitionsRequest(Request):
    """CreatePartitionsRequest (key 37)."""

    API_KEY = 37
    MIN_VERSION = 0
    MAX_VERSION = 3
    FLEXIBLE_VERSION = 2

    topics: tuple[CreatePartitionsTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", CreatePartitionsTopic, array=True)
    )
    timeout_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    validate_only: bool = attrs.field(default=False, metadata=kf("0+", "bool"))


@attrs.frozen(kw_only=True)
class CreatePartitionsTopicResult(Struct):
    """The outcome for one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )


@attrs.frozen(kw_only=True)
class CreatePartitionsResponse(Response):
    """CreatePartitionsResponse (key 37)."""

    API_KEY = 37
    MIN_VERSION = 0
    MAX_VERSION = 3
    FLEXIBLE_VERSION = 2

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    results: tuple[CreatePartitionsTopicResult, ...] = attrs.field(
        default=(), metadata=kf("0+", CreatePartitionsTopicResult, array=True)
    )


CreatePartitionsRequest.RESPONSE_TYPE = CreatePartitionsResponse


# --------------------------------------------------------------------------- ElectLeaders (43)


@attrs.frozen(kw_only=True)
class ElectionTopicPartitions(Struct):
    """Partitions of one topic to elect leaders for (spec type ``TopicPartitions``)."""

    topic: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class ElectLeadersRequest(Request):
    """ElectLeadersRequest (key 43). ``election_type`` 0 = preferred, 1 = unclean
    (v1+, KIP-460); ``topic_partitions=None`` means every partition."""

    API_KEY = 43
    MIN_VERSION = 0
    MAX_VERSION = 2
    FLEXIBLE_VERSION = 2

    election_type: int = attrs.field(default=0, metadata=kf("1+", "int8"))
    topic_partitions: tuple[ElectionTopicPartitions, ...] | None = attrs.field(
        default=None, metadata=kf("0+", ElectionTopicPartitions, array=True, nullable="0+")
    )
    timeout_ms: int = attrs.field(default=60000, metadata=kf("0+", "int32"))


@attrs.frozen(kw_only=True)
class ElectionPartitionResult(Struct):
    """The outcome for one partition (spec type ``PartitionResult``)."""

    partition_id: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )


@attrs.frozen(kw_only=True)
class ReplicaElectionResult(Struct):
    """The outcomes for one topic."""

    topic: str = attrs.field(default="", metadata=kf("0+", "string"))
    partition_result: tuple[ElectionPartitionResult, ...] = attrs.field(
        default=(), metadata=kf("0+", ElectionPartitionResult, array=True)
    )


@attrs.frozen(kw_only=True)
class ElectLeadersResponse(Response):
    """ElectLeadersResponse (key 43). v1+ has a top-level error code."""

    API_KEY = 43
    MIN_VERSION = 0
    MAX_VERSION = 2
    FLEXIBLE_VERSION = 2

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("1+", "int16"))
    replica_election_results: tuple[ReplicaElectionResult, ...] = attrs.field(
        default=(), metadata=kf("0+", ReplicaElectionResult, array=True)
    )


ElectLeadersRequest.RESPONSE_TYPE = ElectLeadersResponse


# ------------------------------------------------------------- IncrementalAlterConfigs (44)


@attrs.frozen(kw_only=True)
class AlterableConfig(Struct):
    """One change: ``config_operation`` 0 = SET, 1 = DELETE, 2 = APPEND, 3 = SUBTRACT."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    config_operation: int = attrs.field(default=0, metadata=kf("0+", "int8"))
    value: str | None = attrs.field(default=None, metadata=kf("0+", "string", nullable="0+"))


@attrs.frozen(kw_only=True)
class AlterConfigsResource(Struct):
    """The changes to one resource."""

    resource_type: int = attrs.field(default=0, metadata=kf("0+", "int8"))
    resource_name: str = attrs.field(default="", metadata=kf("0+", "string"))
    configs: tuple[AlterableConfig, ...] = attrs.field(
        default=(), metadata=kf("0+", AlterableConfig, array=True)
    )


@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsRequest(Request):
    """IncrementalAlterConfigsRequest (key 44, KIP-339)."""

    API_KEY = 44
    MIN_VERSION = 0
    MAX_VERSION = 1
    FLEXIBLE_VERSION = 1

    resources: tuple[AlterConfigsResource, ...] = attrs.field(
        default=(), metadata=kf("0+", AlterConfigsResource, array=True)
    )
    validate_only: bool = attrs.field(default=False, metadata=kf("0+", "bool"))


@attrs.frozen(kw_only=True)
class AlterConfigsResourceResponse(Struct):
    """The outcome for one resource."""

    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )
    resource_type: int = attrs.field(default=0, metadata=kf("0+", "int8"))
    resource_name: str = attrs.field(default="", metadata=kf("0+", "string"))


@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsResponse(Response):
    """IncrementalAlterConfigsResponse (key 44)."""

    API_KEY = 44
    MIN_VERSION = 0
    MAX_VERSION = 1
    FLEXIBLE_VERSION = 1

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    responses: tuple[AlterConfigsResourceResponse, ...] = attrs.field(
        default=(), metadata=kf("0+", AlterConfigsResourceResponse, array=True)
    )


IncrementalAlterConfigsRequest.RESPONSE_TYPE = IncrementalAlterConfigsResponse


# --------------------------------------------------------- AlterPartitionReassignments (45)


@attrs.frozen(kw_only=True)
class ReassignablePartition(Struct):
    """A partition's target replicas; None cancels its reassignment (KIP-455)."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    replicas: tuple[int, ...] | None = attrs.field(
        default=None, metadata=kf("0+", "[]int32", nullable="0+")
    )


@attrs.frozen(kw_only=True)
class ReassignableTopic(Struct):
    """The partitions of one topic to reassign."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[ReassignablePartition, ...] = attrs.field(
        default=(), metadata=kf("0+", ReassignablePartition, array=True)
    )


@attrs.frozen(kw_only=True)
class AlterPartitionReassignmentsRequest(Request):
    """AlterPartitionReassignmentsRequest (key 45, KIP-455)."""

    API_KEY = 45
    MIN_VERSION = 0
    MAX_VERSION = 0
    FLEXIBLE_VERSION = 0

    timeout_ms: int = attrs.field(default=60000, metadata=kf("0+", "int32"))
    topics: tuple[ReassignableTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", ReassignableTopic, array=True)
    )


@attrs.frozen(kw_only=True)
class ReassignablePartitionResponse(Struct):
    """The outcome for one partition."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )


@attrs.frozen(kw_only=True)
class ReassignableTopicResponse(Struct):
    """The outcomes for one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[ReassignablePartitionResponse, ...] = attrs.field(
        default=(), metadata=kf("0+", ReassignablePartitionResponse, array=True)
    )


@attrs.frozen(kw_only=True)
class AlterPartitionReassignmentsResponse(Response):
    """AlterPartitionReassignmentsResponse (key 45)."""

    API_KEY = 45
    MIN_VERSION = 0
    MAX_VERSION = 0
    FLEXIBLE_VERSION = 0

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )
    responses: tuple[ReassignableTopicResponse, ...] = attrs.field(
        default=(), metadata=kf("0+", ReassignableTopicResponse, array=True)
    )


AlterPartitionReassignmentsRequest.RESPONSE_TYPE = AlterPartitionReassignmentsResponse


# ---------------------------------------------------------- ListPartitionReassignments (46)


@attrs.frozen(kw_only=True)
class ListPartitionReassignmentsTopics(Struct):
    """Partitions of one topic whose reassignment is wanted."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partition_indexes: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class ListPartitionReassignmentsRequest(Request):
    """ListPartitionReassignmentsRequest (key 46); ``topics=None`` lists every
    ongoing reassignment."""

    API_KEY = 46
    MIN_VERSION = 0
    MAX_VERSION = 0
    FLEXIBLE_VERSION = 0

    timeout_ms: int = attrs.field(default=60000, metadata=kf("0+", "int32"))
    topics: tuple[ListPartitionReassignmentsTopics, ...] | None = attrs.field(
        default=None,
        metadata=kf("0+", ListPartitionReassignmentsTopics, array=True, nullable="0+"),
    )


@attrs.frozen(kw_only=True)
class OngoingPartitionReassignment(Struct):
    """An in-flight reassignment: the current replica set (original + adding) and the
    replicas being added and removed."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    replicas: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))
    adding_replicas: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))
    removing_replicas: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class OngoingTopicReassignment(Struct):
    """The in-flight reassignments of one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[OngoingPartitionReassignment, ...] = attrs.field(
        default=(), metadata=kf("0+", OngoingPartitionReassignment, array=True)
    )


@attrs.frozen(kw_only=True)
class ListPartitionReassignmentsResponse(Response):
    """ListPartitionReassignmentsResponse (key 46)."""

    API_KEY = 46
    MIN_VERSION = 0
    MAX_VERSION = 0
    FLEXIBLE_VERSION = 0

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )
    topics: tuple[OngoingTopicReassignment, ...] = attrs.field(
        default=(), metadata=kf("0+", OngoingTopicReassignment, array=True)
    )


ListPartitionReassignmentsRequest.RESPONSE_TYPE = ListPartitionReassignmentsResponse


# --------------------------------------------------------------------------- DescribeCluster (60)


@attrs.frozen(kw_only=True)
class DescribeClusterRequest(Request):
    """DescribeClusterRequest (key 60, KIP-700). v1 adds ``endpoint_type`` (KIP-919):
    1 = brokers, 2 = controllers; v2 ``include_fenced_brokers`` (KIP-1073, Kafka 4.0)."""

    API_KEY = 60
    MIN_VERSION = 0
    MAX_VERSION = 2
    FLEXIBLE_VERSION = 0

    include_cluster_authorized_operations: bool = attrs.field(
        default=False, metadata=kf("0+", "bool")
    )
    endpoint_type: int = attrs.field(default=1, metadata=kf("1+", "int8"))
    include_fenced_brokers: bool = attrs.field(default=False, metadata=kf("2+", "bool"))


@attrs.frozen(kw_only=True)
class DescribeClusterBroker(Struct):
    """A broker of the cluster."""

    broker_id: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    host: str = attrs.field(default="", metadata=kf("0+", "string"))
    port: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    rack: str | None = attrs.field(default=None, metadata=kf("0+", "string", nullable="0+"))
    #: v2+: registered but fenced (only listed when the request asked for them).
    is_fenced: bool = attrs.field(default=False, metadata=kf("2+", "bool"))


@attrs.frozen(kw_only=True)
class DescribeClusterResponse(Response):
    """DescribeClusterResponse (key 60)."""

    API_KEY = 60
    MIN_VERSION = 0
    MAX_VERSION = 2
    FLEXIBLE_VERSION = 0

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )
    endpoint_type: int = attrs.field(default=1, metadata=kf("1+", "int8"))
    cluster_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    controller_id: int = attrs.field(default=-1, metadata=kf("0+", "int32"))
    brokers: tuple[DescribeClusterBroker, ...] = attrs.field(
        default=(), metadata=kf("0+", DescribeClusterBroker, array=True)
    )
    cluster_authorized_operations: int = attrs.field(
        default=CLUSTER_AUTHORIZED_OPERATIONS_OMITTED, metadata=kf("0+", "int32")
    )


DescribeClusterRequest.RESPONSE_TYPE = DescribeClusterResponse


# --------------------------------------------------------------------------- registries

#: Every admin request class declared here, by API key.
ADMIN_REQUESTS: dict[int, type[Request]] = {
    cls.API_KEY: cls
    for cls in (
        CreateTopicsRequest,
        DeleteTopicsRequest,
        DescribeConfigsRequest,
        AlterReplicaLogDirsRequest,
        DescribeLogDirsRequest,
        CreatePartitionsRequest,
        ElectLeadersRequest,
        IncrementalAlterConfigsRequest,
        AlterPartitionReassignmentsRequest,
        ListPartitionReassignmentsRequest,
        DescribeClusterRequest,
    )
}

#: Every admin response class declared here, by API key.
ADMIN_RESPONSES: dict[int, type[Response]] = {
    key: cls.RESPONSE_TYPE for key, cls in ADMIN_REQUESTS.items()
}

#: The consumer and admin requests together, for decoders of any request.
REQUESTS_BY_KEY: dict[int, type[Request]] = {**ALL_REQUESTS, **ADMIN_REQUESTS}
