"""Wire requests to model commands, model state to wire responses. Pure, no I/O.

:func:`handle` answers one decoded request as broker ``node_id`` would, through one
table from API key to handler. Requests that change the cluster become
``_model`` commands (so every rule lives in the model); requests that read it turn
``PartitionView``/``BrokerView`` snapshots into response messages.

Imports the standard library, attrs, ``coopconsumer._protocol`` and ``_model``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs

from ..._protocol import Request, Response
from ..._protocol.admin_messages import (
    ADMIN_REQUESTS,
    AlterConfigsResourceResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
    ElectionPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
    ReplicaElectionResult,
)
from ..._protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from ._model import (
    DEFAULT_BROKER_CONFIGS,
    DEFAULT_TOPIC_CONFIGS,
    INVALID_REQUEST,
    LEADER_NOT_AVAILABLE,
    NO_LEADER,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    UNKNOWN_TOPIC_OR_PARTITION,
    AlterConfigs,
    AlterReassignment,
    AlterReplicaLogDir,
    BrokerState,
    ClusterModel,
    ConfigOp,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    ElectLeader,
    Outcome,
)

__all__ = ["SUPPORTED_APIS", "Endpoint", "handle"]

UNSUPPORTED_VERSION: Final = 35
UNKNOWN_TOPIC_ID: Final = 100
UNSUPPORTED_ENDPOINT_TYPE: Final = 150
INVALID_CONFIG: Final = 40

# DescribeConfigs ConfigSource values (DescribeConfigsResponse.ConfigSource in Kafka).
_SOURCE_TOPIC: Final = 1
_SOURCE_DYNAMIC_BROKER: Final = 2
_SOURCE_DYNAMIC_DEFAULT_BROKER: Final = 3
_SOURCE_STATIC_BROKER: Final = 4
_SOURCE_DEFAULT: Final = 5
# ConfigType values (v3+).
_TYPE_BOOLEAN: Final = 1
_TYPE_STRING: Final = 2
_TYPE_INT: Final = 3
_TYPE_LONG: Final = 5
_TYPE_LIST: Final = 7
_CONFIG_TYPES: Final[Mapping[str, int]] = MappingProxyType(
    {
        "cleanup.policy": _TYPE_LIST,
        "retention.ms": _TYPE_LONG,
        "retention.bytes": _TYPE_LONG,
        "min.insync.replicas": _TYPE_INT,
        "unclean.leader.election.enable": _TYPE_BOOLEAN,
        "leader.replication.throttled.replicas": _TYPE_LIST,
        "follower.replication.throttled.replicas": _TYPE_LIST,
        "leader.replication.throttled.rate": _TYPE_LONG,
        "follower.replication.throttled.rate": _TYPE_LONG,
        "broker.rack": _TYPE_STRING,
        "replica.alter.log.dirs.io.max.bytes.per.second": _TYPE_LONG,
        "auto.leader.rebalance.enable": _TYPE_BOOLEAN,
        "leader.imbalance.check.interval.seconds": _TYPE_LONG,
    }
)


@attrs.frozen(kw_only=True)
class Endpoint:
    """Where a broker listens."""

    host: str
    port: int


Handler = Callable[[ClusterModel, int, Any, int, float, Mapping[int, Endpoint]], Response]


def handle(
    model: ClusterModel,
    node_id: int,
    request: Request,
    api_version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> Response:
    """The response of broker ``node_id`` to ``request`` at ``api_version``.

    Raises ``KeyError`` for an API this cluster does not serve (the server closes the
    connection then, as Kafka does).
    """
    handler = _HANDLERS[type(request).API_KEY]
    model.advance(now)
    return handler(model, node_id, request, api_version, now, endpoints)


# --------------------------------------------------------------------------- reading


def _api_versions(
    model: ClusterModel,
    node_id: int,
    request: ApiVersionsRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> ApiVersionsResponse:
    return ApiVersionsResponse(api_keys=supported_api_versions())


def supported_api_versions() -> tuple[ApiVersionsResponseApiVersion, ...]:
    """What the cluster advertises in ApiVersions."""
    return tuple(
        ApiVersionsResponseApiVersion(
            api_key=cls.API_KEY, min_version=cls.MIN_VERSION, max_version=cls.MAX_VERSION
        )
        for cls in sorted(SUPPORTED_APIS.values(), key=lambda c: c.API_KEY)
    )


def _metadata(
    model: ClusterModel,
    node_id: int,
    request: MetadataRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> MetadataResponse:
    brokers = tuple(
        MetadataResponseBroker(
            node_id=node, host=endpoints[node].host, port=endpoints[node].port, rack=rack
        )
        for node, rack, state in model.broker_list()
        if state is not BrokerState.DEAD
    )
    if request.topics is None or (version == 0 and not request.topics):
        names: list[tuple[str | None, Any]] = [(name, None) for name in model.topics()]
    else:
        names = [(t.name, t.topic_id) for t in request.topics]
    by_id = {model.topic_id(name): name for name in model.topics()}
    topics = []
    for name, topic_id in names:
        if not name and topic_id is not None and topic_id.int:
            name = by_id.get(topic_id)
            if name is None:
                topics.append(
                    MetadataResponseTopic(error_code=UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id)
                )
                continue
        if name is None or model.topic_id(name) is None:
            topics.append(MetadataResponseTopic(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name))
            continue
        tid = model.topic_id(name)
        assert tid is not None
        topics.append(
            MetadataResponseTopic(
                name=name,
                topic_id=tid,
                partitions=tuple(_metadata_partition(*row) for row in model.metadata_rows(name)),
            )
        )
    return MetadataResponse(
        brokers=brokers,
        cluster_id=model.cluster_id,
        controller_id=model.controller_id,
        topics=tuple(topics),
    )


def _metadata_partition(
    index: int,
    leader: int,
    epoch: int,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    offline: tuple[int, ...],
) -> MetadataResponsePartition:
    return MetadataResponsePartition(
        error_code=LEADER_NOT_AVAILABLE if leader == NO_LEADER else 0,
        partition_index=index,
        leader_id=leader,
        leader_epoch=epoch,
        replica_nodes=replicas,
        isr_nodes=isr,
        offline_replicas=offline,
    )


def _describe_cluster(
    model: ClusterModel,
    node_id: int,
    request: DescribeClusterRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> DescribeClusterResponse:
    if request.endpoint_type != 1:
        return DescribeClusterResponse(
            error_code=UNSUPPORTED_ENDPOINT_TYPE,
            error_message="The test cluster has no controller endpoints",
            endpoint_type=request.endpoint_type,
        )
    # A dead broker stays registered but fenced, as on KRaft; v2 lists it when asked.
    fenced = version >= 2 and request.include_fenced_brokers
    return DescribeClusterResponse(
        cluster_id=model.cluster_id,
        controller_id=model.controller_id,
        brokers=tuple(
            DescribeClusterBroker(
                broker_id=node,
                host=endpoints[node].host,
                port=endpoints[node].port,
                rack=rack,
                is_fenced=state is BrokerState.DEAD,
            )
            for node, rack, state in model.broker_list()
            if fenced or state is not BrokerState.DEAD
        ),
    )


def _list_reassignments(
    model: ClusterModel,
    node_id: int,
    request: ListPartitionReassignmentsRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> ListPartitionReassignmentsResponse:
    wanted: dict[str, set[int] | None]
    if request.topics is None:
        wanted = dict.fromkeys(model.topics())
    else:
        wanted = {t.name: set(t.partition_indexes) for t in request.topics}
    topics = []
    for name, indexes in wanted.items():
        if model.topic_id(name) is None:
            continue
        ongoing = tuple(
            OngoingPartitionReassignment(
                partition_index=index,
                replicas=replicas,
                adding_replicas=adding,
                removing_replicas=removing,
            )
            for index, replicas, adding, removing in model.reassignments(name)
            if indexes is None or index in indexes
        )
        if ongoing:
            topics.append(OngoingTopicReassignment(name=name, partitions=ongoing))
    return ListPartitionReassignmentsResponse(topics=tuple(topics))


def _describe_log_dirs(
    model: ClusterModel,
    node_id: int,
    request: DescribeLogDirsRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> DescribeLogDirsResponse:
    broker = next(b for b in model.brokers() if b.node_id == node_id)
    wanted: dict[str, set[int] | None]
    if request.topics is None:
        wanted = dict.fromkeys(model.topics())
    else:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    # Per directory: topic -> partitions (a future replica is listed in its own
    # directory with IsFutureKey, its lag behind the current one as OffsetLag).
    by_dir: dict[str, dict[str, list[DescribeLogDirsPartition]]] = {
        d.path: {} for d in broker.log_dirs
    }
    for name, indexes in wanted.items():
        if model.topic_id(name) is None:
            continue
        for p in model.partitions(name):
            if node_id not in p.replicas or (indexes is not None and p.partition not in indexes):
                continue
            held = p.replica_bytes[node_id]
            by_dir[p.replica_dirs[node_id]].setdefault(name, []).append(
                DescribeLogDirsPartition(
                    partition_index=p.partition,
                    partition_size=held,
                    offset_lag=0 if p.leader == node_id else max(0, p.size_bytes - held),
                )
            )
            future = p.future_dirs.get(node_id)
            if future is not None:
                copied = p.future_bytes[node_id]
                by_dir[future].setdefault(name, []).append(
                    DescribeLogDirsPartition(
                        partition_index=p.partition,
                        partition_size=copied,
                        offset_lag=max(0, held - copied),
                        is_future_key=True,
                    )
                )
    return DescribeLogDirsResponse(
        results=tuple(
            DescribeLogDirsResult(
                log_dir=d.path,
                topics=tuple(
                    DescribeLogDirsTopic(name=name, partitions=tuple(parts))
                    for name, parts in by_dir[d.path].items()
                ),
                total_bytes=d.total_bytes,
                usable_bytes=max(0, d.total_bytes - d.used_bytes),
            )
            for d in broker.log_dirs
        )
    )


def _describe_configs(
    model: ClusterModel,
    node_id: int,
    request: DescribeConfigsRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        entries: list[tuple[str, str, int, bool]]  # name, value, source, read_only
        if resource.resource_type == RESOURCE_TOPIC:
            if model.topic_id(resource.resource_name) is None:
                results.append(
                    DescribeConfigsResult(
                        error_code=UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=f"Topic {resource.resource_name} does not exist",
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                    )
                )
                continue
            topic_set = model.topic_configs(resource.resource_name)
            cluster_set = model.broker_configs("")
            entries = []
            for key in DEFAULT_TOPIC_CONFIGS:
                if key in topic_set:
                    source = _SOURCE_TOPIC
                elif key in cluster_set:
                    source = _SOURCE_DYNAMIC_DEFAULT_BROKER
                else:
                    source = _SOURCE_DEFAULT
                entries.append(
                    (key, model.topic_config(resource.resource_name, key), source, False)
                )
        elif resource.resource_type == RESOURCE_BROKER:
            name = resource.resource_name
            if name and not (
                name.isdigit() and any(node == int(name) for node, _, _ in model.broker_list())
            ):
                results.append(
                    DescribeConfigsResult(
                        error_code=INVALID_REQUEST,
                        error_message=f"Unknown broker {name!r}",
                        resource_type=resource.resource_type,
                        resource_name=name,
                    )
                )
                continue
            own = model.broker_configs(name)
            cluster_set = model.broker_configs("")
            entries = []
            for key, default in DEFAULT_BROKER_CONFIGS.items():
                if key in own:
                    source = _SOURCE_DYNAMIC_BROKER if name else _SOURCE_DYNAMIC_DEFAULT_BROKER
                    value = own[key]
                elif key in cluster_set:
                    source, value = _SOURCE_DYNAMIC_DEFAULT_BROKER, cluster_set[key]
                else:
                    source, value = _SOURCE_DEFAULT, default
                entries.append((key, value, source, False))
            if name:
                rack = next(r for node, r, _ in model.broker_list() if node == int(name))
                entries.append(("broker.rack", rack or "", _SOURCE_STATIC_BROKER, True))
        else:
            results.append(
                DescribeConfigsResult(
                    error_code=INVALID_REQUEST,
                    error_message=f"Unsupported resource type {resource.resource_type}",
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
            continue
        keys = resource.configuration_keys
        configs = tuple(
            DescribeConfigsResourceResult(
                name=key,
                value=value,
                read_only=read_only,
                is_default=version == 0 and source == _SOURCE_DEFAULT,
                config_source=source,
                synonyms=(
                    (DescribeConfigsSynonym(name=key, value=value, source=source),)
                    if request.include_synonyms and version >= 1
                    else ()
                ),
                config_type=_CONFIG_TYPES.get(key, _TYPE_STRING),
            )
            for key, value, source, read_only in entries
            if keys is None or key in keys
        )
        results.append(
            DescribeConfigsResult(
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return DescribeConfigsResponse(results=tuple(results))


# --------------------------------------------------------------------------- changing


def _create_topics(
    model: ClusterModel,
    node_id: int,
    request: CreateTopicsRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> CreateTopicsResponse:
    names = [t.name for t in request.topics]
    results = []
    for topic in request.topics:
        if names.count(topic.name) > 1:
            outcome = Outcome(
                error_code=INVALID_REQUEST,
                message=f"Create topics request from client contains a duplicate topic "
                f"{topic.name}",
            )
        else:
            ordered = sorted(topic.assignments, key=lambda a: a.partition_index)
            if [a.partition_index for a in ordered] != list(range(len(ordered))):
                outcome = Outcome(
                    error_code=INVALID_REQUEST,
                    message="Partitions should be consecutive and start at 0",
                )
            else:
                outcome = model.apply(
                    CreateTopic(
                        name=topic.name,
                        assignment=[a.broker_ids for a in ordered],
                        num_partitions=topic.num_partitions,
                        replication_factor=topic.replication_factor,
                        configs={c.name: c.value for c in topic.configs if c.value is not None},
                        validate_only=request.validate_only,
                    ),
                    now,
                )
        result = CreatableTopicResult(
            name=topic.name, error_code=outcome.error_code, error_message=outcome.message
        )
        if outcome.ok and not request.validate_only:
            views = model.partitions(topic.name)
            topic_id = model.topic_id(topic.name)
            assert topic_id is not None
            result = attrs.evolve(
                result,
                topic_id=topic_id,
                num_partitions=len(views),
                replication_factor=len(views[0].replicas),
                configs=tuple(
                    CreatableTopicConfigs(
                        name=key,
                        value=model.topic_config(topic.name, key),
                        config_source=_SOURCE_TOPIC
                        if key in model.topic_configs(topic.name)
                        else _SOURCE_DEFAULT,
                    )
                    for key in DEFAULT_TOPIC_CONFIGS
                ),
            )
        results.append(result)
    return CreateTopicsResponse(topics=tuple(results))


def _create_partitions(
    model: ClusterModel,
    node_id: int,
    request: CreatePartitionsRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> CreatePartitionsResponse:
    results = []
    for topic in request.topics:
        outcome = model.apply(
            CreatePartitions(
                topic=topic.name,
                count=topic.count,
                assignment=[a.broker_ids for a in topic.assignments or ()],
                validate_only=request.validate_only,
            ),
            now,
        )
        results.append(
            CreatePartitionsTopicResult(
                name=topic.name, error_code=outcome.error_code, error_message=outcome.message
            )
        )
    return CreatePartitionsResponse(results=tuple(results))


def _delete_topics(
    model: ClusterModel,
    node_id: int,
    request: DeleteTopicsRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> DeleteTopicsResponse:
    by_id = {model.topic_id(name): name for name in model.topics()}
    targets: list[tuple[str | None, Any]] = [(name, None) for name in request.topic_names]
    targets += [(t.name, t.topic_id) for t in request.topics]
    results = []
    for name, topic_id in targets:
        if name is None:
            name = by_id.get(topic_id)
            if name is None:
                results.append(
                    DeletableTopicResult(
                        name=None,
                        topic_id=topic_id,
                        error_code=UNKNOWN_TOPIC_ID,
                        error_message="This server does not host this topic ID.",
                    )
                )
                continue
        tid = model.topic_id(name)
        outcome = model.apply(DeleteTopic(name=name), now)
        results.append(
            DeletableTopicResult(
                name=name,
                topic_id=tid if tid is not None else (topic_id or DeletableTopicResult().topic_id),
                error_code=outcome.error_code,
                error_message=outcome.message,
            )
        )
    return DeleteTopicsResponse(responses=tuple(results))


def _alter_reassignments(
    model: ClusterModel,
    node_id: int,
    request: AlterPartitionReassignmentsRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> AlterPartitionReassignmentsResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            outcome = model.apply(
                AlterReassignment(
                    topic=topic.name, partition=part.partition_index, target=part.replicas
                ),
                now,
            )
            partitions.append(
                ReassignablePartitionResponse(
                    partition_index=part.partition_index,
                    error_code=outcome.error_code,
                    error_message=outcome.message,
                )
            )
        topics.append(ReassignableTopicResponse(name=topic.name, partitions=tuple(partitions)))
    return AlterPartitionReassignmentsResponse(responses=tuple(topics))


def _elect_leaders(
    model: ClusterModel,
    node_id: int,
    request: ElectLeadersRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> ElectLeadersResponse:
    if request.election_type not in (0, 1):
        return ElectLeadersResponse(error_code=INVALID_REQUEST)
    wanted: list[tuple[str, list[int]]]
    if request.topic_partitions is None:
        wanted = [(name, [p.partition for p in model.partitions(name)]) for name in model.topics()]
    else:
        wanted = [(t.topic, list(t.partitions)) for t in request.topic_partitions]
    results = []
    for topic, partitions in wanted:
        outcomes = []
        for index in partitions:
            outcome = model.apply(
                ElectLeader(topic=topic, partition=index, unclean=request.election_type == 1),
                now,
            )
            outcomes.append(
                ElectionPartitionResult(
                    partition_id=index, error_code=outcome.error_code, error_message=outcome.message
                )
            )
        results.append(ReplicaElectionResult(topic=topic, partition_result=tuple(outcomes)))
    return ElectLeadersResponse(replica_election_results=tuple(results))


def _alter_replica_log_dirs(
    model: ClusterModel,
    node_id: int,
    request: AlterReplicaLogDirsRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> AlterReplicaLogDirsResponse:
    """Moves replicas of *this* broker between its log directories (KIP-113)."""
    results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for log_dir in request.dirs:
        for topic in log_dir.topics:
            for index in topic.partitions:
                outcome = model.apply(
                    AlterReplicaLogDir(
                        node_id=node_id, topic=topic.name, partition=index, path=log_dir.path
                    ),
                    now,
                )
                results.setdefault(topic.name, []).append(
                    AlterReplicaLogDirPartitionResult(
                        partition_index=index, error_code=outcome.error_code
                    )
                )
    return AlterReplicaLogDirsResponse(
        results=tuple(
            AlterReplicaLogDirTopicResult(topic_name=name, partitions=tuple(parts))
            for name, parts in results.items()
        )
    )


def _incremental_alter_configs(
    model: ClusterModel,
    node_id: int,
    request: IncrementalAlterConfigsRequest,
    version: int,
    now: float,
    endpoints: Mapping[int, Endpoint],
) -> IncrementalAlterConfigsResponse:
    responses = []
    for resource in request.resources:
        try:
            ops = [(c.name, ConfigOp(c.config_operation), c.value) for c in resource.configs]
        except ValueError:
            outcome = Outcome(error_code=INVALID_REQUEST, message="Unknown config operation")
        else:
            outcome = model.apply(
                AlterConfigs(
                    resource_type=resource.resource_type,
                    name=resource.resource_name,
                    ops=ops,
                    validate_only=request.validate_only,
                ),
                now,
            )
        responses.append(
            AlterConfigsResourceResponse(
                error_code=outcome.error_code,
                error_message=outcome.message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return IncrementalAlterConfigsResponse(responses=tuple(responses))


_HANDLERS: Final[Mapping[int, Handler]] = MappingProxyType(
    {
        ApiVersionsRequest.API_KEY: _api_versions,
        MetadataRequest.API_KEY: _metadata,
        DescribeClusterRequest.API_KEY: _describe_cluster,
        CreateTopicsRequest.API_KEY: _create_topics,
        CreatePartitionsRequest.API_KEY: _create_partitions,
        DeleteTopicsRequest.API_KEY: _delete_topics,
        AlterPartitionReassignmentsRequest.API_KEY: _alter_reassignments,
        ListPartitionReassignmentsRequest.API_KEY: _list_reassignments,
        DescribeConfigsRequest.API_KEY: _describe_configs,
        IncrementalAlterConfigsRequest.API_KEY: _incremental_alter_configs,
        DescribeLogDirsRequest.API_KEY: _describe_log_dirs,
        AlterReplicaLogDirsRequest.API_KEY: _alter_replica_log_dirs,
        ElectLeadersRequest.API_KEY: _elect_leaders,
    }
)

#: The request classes the cluster serves, by API key.
SUPPORTED_APIS: Final[Mapping[int, type[Request]]] = MappingProxyType(
    {
        key: cls
        for key, cls in {
            ApiVersionsRequest.API_KEY: ApiVersionsRequest,
            MetadataRequest.API_KEY: MetadataRequest,
            **ADMIN_REQUESTS,
        }.items()
        if key in _HANDLERS
    }
)
