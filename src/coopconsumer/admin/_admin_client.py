"""``AdminClient``: a small blocking admin client on the library's own wire client.

Configured with the consumer's connection and security keys (``bootstrap.servers``,
``client.id``, ``request.timeout.ms``, the backoffs, ``security.protocol``, ``ssl.*``,
``sasl.*``...) plus ``replica.assignor``. Topic and partition creation place replicas
on the client with the configured :class:`ReplicaAssignor` and send explicit
assignments (docs/admin.md says what runs where).

Requests that change the cluster go to the controller Metadata names (any broker
forwards them on KRaft clusters); DescribeLogDirs and broker configurations go to the
broker concerned. Per-item errors are collected into one
:class:`AdminOperationError`; request-level failures raise the wire client's typed
errors (``BrokerConnectionError``, ``RequestTimeoutError``, ``KafkaError``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

import attrs

from .._config import _BY_KEY, _SYNONYMS, ConnectionConfig, ConsumerConfig
from .._errors import (
    BrokerConnectionError,
    ConfigurationError,
    CoopConsumerError,
    KafkaError,
    RequestTimeoutError,
)
from .._io._client import ClientConfig, KafkaClient
from .._protocol import EncodeError, Request, error_codes
from .._protocol.admin_messages import (
    AlterableConfig,
    AlterConfigsResource,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopic,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribableLogDirTopic,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ElectionTopicPartitions,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListPartitionReassignmentsTopics,
    ReassignablePartition,
    ReassignableTopic,
)
from .._protocol.cluster import ClusterSnapshot
from .._protocol.messages import MetadataRequest
from .._security import SecurityConfig, is_security_key
from .._types import TopicPartition
from ._admin_loading import ReplicaAssignorSpec, load_replica_assignor
from ._admin_types import (
    AdminOperationError,
    AlterConfigOp,
    BrokerDescription,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ElectionResult,
    ElectionType,
    LogDirDescription,
    NewTopic,
    PartitionDescription,
    PartitionReassignment,
    ReplicaLogInfo,
    TopicDescription,
    TopicPartitionReplica,
)
from ._replica_assignor import (
    BrokerLoad,
    ClusterView,
    NewPartitions,
    ReplicaAssignor,
    check_assignment,
    with_log_dirs,
)

__all__ = ["AdminClient", "AdminConfig", "parse_admin_config", "principal_of"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_ASSIGNOR_KEY: Final = "replica.assignor"
_CONNECTION_ATTRS: Final = frozenset(f.name for f in attrs.fields(ConnectionConfig))
_NOT_CONTROLLER: Final = 41
_UNSUPPORTED_VERSION: Final = 35


@attrs.frozen(kw_only=True)
class AdminConfig:
    """A parsed admin configuration: the wire client's settings and the assignor."""

    client: ClientConfig
    replica_assignor: ReplicaAssignorSpec = "kraft"


def parse_admin_config(settings: Mapping[str, object]) -> AdminConfig:
    """Parse Kafka-style ``settings``: the consumer's connection and security keys
    (validated exactly as for a consumer) and ``replica.assignor``.

    Raises ``ConfigurationError`` for a consumer-only or unknown key, a bad value, or
    missing ``bootstrap.servers``.
    """
    if not isinstance(settings, Mapping):
        raise ConfigurationError(
            f"configuration must be a mapping of keys to values, not {type(settings).__name__}"
        )
    connection: dict[str, object] = {}
    assignor: ReplicaAssignorSpec = "kraft"
    for raw_key, value in settings.items():
        if not isinstance(raw_key, str):
            raise ConfigurationError(f"configuration keys must be strings, not {raw_key!r}")
        key = raw_key.strip()
        if key == _ASSIGNOR_KEY:
            if value is not None:
                assignor = value  # type: ignore[assignment]  # checked by the loader
            continue
        option = _BY_KEY.get(_SYNONYMS.get(key, key))
        if is_security_key(key) or (option is not None and option.attr in _CONNECTION_ATTRS):
            connection[key] = value
            continue
        if option is not None:
            raise ConfigurationError(f"{key!r} is a consumer setting, not an admin client one")
        raise ConfigurationError(
            f"unknown admin client key {key!r}: use the consumer's connection and security "
            f"keys (bootstrap.servers, client.id, request.timeout.ms, security.protocol, "
            f"ssl.*, sasl.*, ...) or {_ASSIGNOR_KEY!r}"
        )
    parsed = ConsumerConfig.from_mapping(connection).connection
    client = ClientConfig(
        **{
            field.name: getattr(parsed, field.name)
            for field in attrs.fields(ClientConfig)
            if hasattr(parsed, field.name)
        }
    )
    return AdminConfig(client=client, replica_assignor=assignor)


def principal_of(security: SecurityConfig) -> str | None:
    """The principal Kafka's default principal builder gives these credentials:
    ``User:<sasl.username>`` for PLAIN and SCRAM, ``User:ANONYMOUS`` without
    authentication; None when only the broker can tell (a TLS client certificate's
    subject, an OAUTHBEARER token's subject, a custom principal builder)."""
    protocol = security.security_protocol.lower()
    if protocol.startswith("sasl"):
        mechanism = (security.sasl_mechanism or "").upper()
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and security.sasl_username:
            return f"User:{security.sasl_username}"
        return None
    if protocol == "ssl" and (
        security.ssl_certificate_location is not None or security.ssl_certificate_pem is not None
    ):
        return None
    return "User:ANONYMOUS"


class AdminClient:
    """A blocking Kafka admin client (see the module docstring and docs/admin.md).

    ``config`` uses the consumer's connection and security keys; ``replica.assignor``
    (or the ``replica_assignor`` argument, which wins) picks the assignor used when a
    :class:`NewTopic` or :meth:`create_partitions` call gives no assignment:
    ``"kraft"`` (the default: Kafka's KRaft placement), ``"zookeeper"``,
    ``"balanced"``, ``"module:Class"``, a class or an instance. Assignors see
    ``principal`` (``"User:alice"``) as ``NewPartitions.principal``; by default it is
    derived from the credentials (:func:`principal_of`). Not thread-safe. After
    :meth:`close` every call raises ``BrokerConnectionError``.

    Raises ``ConfigurationError`` at construction for a bad configuration or assignor.
    """

    def __init__(
        self,
        config: Mapping[str, object],
        *,
        replica_assignor: ReplicaAssignorSpec | None = None,
        principal: str | None = None,
    ) -> None:
        parsed = parse_admin_config(config)
        self._assignor = load_replica_assignor(
            parsed.replica_assignor if replica_assignor is None else replica_assignor
        )
        self._principal = principal or principal_of(parsed.client.security)
        self._timeout_ms = parsed.client.request_timeout_ms
        self._client = KafkaClient(parsed.client)

    # ------------------------------------------------------------------ lifecycle

    @property
    def replica_assignor(self) -> ReplicaAssignor:
        """The assignor ``create_topics``/``create_partitions`` use by default."""
        return self._assignor

    @property
    def principal(self) -> str | None:
        """Who this client is to the brokers, as assignors see it (None: unknown)."""
        return self._principal

    def close(self) -> None:
        """Close every connection (idempotent)."""
        self._client.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ cluster

    def describe_cluster(
        self, *, include_fenced_brokers: bool = False, timeout_ms: float | None = None
    ) -> ClusterDescription:
        """The cluster id, controller and live brokers with their racks; with
        ``include_fenced_brokers`` also the registered but fenced ones
        (``is_fenced``; DescribeCluster v2, Kafka 4.0+: older brokers list live ones
        only).

        Uses DescribeCluster (Kafka 2.8+), Metadata on older brokers.
        """
        try:
            try:
                response: DescribeClusterResponse = self._any(
                    DescribeClusterRequest(include_fenced_brokers=include_fenced_brokers),
                    timeout_ms,
                )
            except EncodeError:
                # Asking for fenced brokers needs v2; this broker has only older ones.
                response = self._any(DescribeClusterRequest(), timeout_ms)
        except KafkaError as exc:
            if exc.code != _UNSUPPORTED_VERSION:
                raise
            metadata = self._metadata((), timeout_ms)
            return ClusterDescription(
                cluster_id=metadata.cluster_id,
                controller_id=metadata.controller_id,
                brokers=tuple(
                    BrokerDescription(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                    for _, b in sorted(metadata.brokers.items())
                ),
            )
        _raise_top_level(response.error_code, response.error_message, response.API_KEY)
        return ClusterDescription(
            cluster_id=response.cluster_id,
            controller_id=response.controller_id,
            brokers=tuple(
                BrokerDescription(
                    node_id=b.broker_id,
                    host=b.host,
                    port=b.port,
                    rack=b.rack,
                    is_fenced=b.is_fenced,
                )
                for b in sorted(response.brokers, key=lambda b: b.broker_id)
            ),
        )

    def describe_topics(
        self, topics: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, TopicDescription]:
        """Describe ``topics`` (None: every topic), by name.

        Raises ``AdminOperationError`` when some topics are unknown (the others are in
        its ``completed``).
        """
        names = None if topics is None else tuple(dict.fromkeys(topics))
        metadata = self._metadata(names, timeout_ms)
        described: dict[str, TopicDescription] = {}
        failed: dict[Any, KafkaError] = {}
        for topic in metadata.topics.values():
            if topic.error_code:
                failed[topic.name] = error_codes.to_exception(
                    topic.error_code, api_key=MetadataRequest.API_KEY
                )
                continue
            described[topic.name] = TopicDescription(
                name=topic.name,
                topic_id=topic.topic_id,
                is_internal=topic.is_internal,
                partitions=tuple(
                    PartitionDescription(
                        partition=p.partition,
                        leader=p.leader_id,
                        leader_epoch=p.leader_epoch,
                        replicas=tuple(p.replica_nodes),
                        isr=tuple(p.isr_nodes),
                        offline_replicas=tuple(p.offline_replicas),
                        error=error_codes.to_exception(
                            p.error_code, api_key=MetadataRequest.API_KEY
                        )
                        if p.error_code
                        else None,
                    )
                    for _, p in sorted(topic.partitions.items())
                ),
            )
        if failed:
            raise AdminOperationError("describe_topics", failed, described)
        return described

    def cluster_view(self, *, storage: bool = True, timeout_ms: float | None = None) -> ClusterView:
        """What replica assignors read: live brokers with replica and leader counts
        (Metadata), used/total bytes per broker and per log directory (DescribeLogDirs,
        when the brokers answer it; skipped with ``storage=False``), fenced brokers
        (DescribeCluster v2, when the cluster has it), and every partition's replicas."""
        metadata = self._metadata(None, timeout_ms)
        replicas: dict[int, int] = dict.fromkeys(metadata.brokers, 0)
        leaders: dict[int, int] = dict.fromkeys(replicas, 0)
        assignments: dict[TopicPartition, tuple[int, ...]] = {}
        for topic in metadata.topics.values():
            if topic.error_code:
                continue
            for p in topic.partitions.values():
                assignments[TopicPartition(topic.name, p.partition)] = p.replica_nodes
                for r in p.replica_nodes:
                    if r in replicas:
                        replicas[r] += 1
                if p.leader_id in leaders:
                    leaders[p.leader_id] += 1
        loads = {
            b.node_id: BrokerLoad(
                node_id=b.node_id,
                rack=b.rack,
                replicas=replicas[b.node_id],
                leaders=leaders[b.node_id],
            )
            for b in metadata.brokers.values()
        }
        if storage:
            for node in loads:
                try:
                    dirs = self._log_dirs_of(node, None, timeout_ms)
                except (KafkaError, BrokerConnectionError, RequestTimeoutError, EncodeError) as exc:
                    log.info("no log dir sizes from broker %d: %s", node, exc)
                    continue
                loads[node] = with_log_dirs(loads[node], dirs)
        fenced: list[BrokerLoad] = []
        try:
            described = self.describe_cluster(include_fenced_brokers=True, timeout_ms=timeout_ms)
        except (KafkaError, EncodeError) as exc:
            log.info("no fenced brokers from DescribeCluster: %s", exc)
        else:
            fenced = [
                BrokerLoad(node_id=b.node_id, rack=b.rack)
                for b in described.brokers
                if b.is_fenced and b.node_id not in loads
            ]
        return ClusterView(brokers=loads, assignments=assignments, fenced_brokers=fenced)

    # ------------------------------------------------------------------ topics

    def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        replica_assignor: ReplicaAssignorSpec | None = None,
        timeout_ms: float | None = None,
    ) -> dict[str, dict[int, tuple[int, ...]]]:
        """Create topics; returns each one's assignment ``{partition: replicas}``.

        Topics without an explicit assignment are placed by ``replica_assignor`` (this
        call only) or the configured one, which sees the partitions placed earlier in
        the same call. Raises ``ReplicaAssignorError`` before anything is sent when a
        placement fails, ``AdminOperationError`` when the broker refuses some topics
        (the created ones are in its ``completed``).
        """
        assignor = self._pick_assignor(replica_assignor)
        needs_view = any(t.assignment is None for t in new_topics)
        view = self.cluster_view(timeout_ms=timeout_ms) if needs_view else None
        placed: dict[str, dict[int, tuple[int, ...]]] = {}
        for topic in new_topics:
            if topic.assignment is not None:
                placed[topic.name] = dict(topic.assignment)
                continue
            assert view is not None
            request = NewPartitions(
                topic=topic.name,
                partition_ids=range(topic.num_partitions),
                replication_factor=topic.replication_factor,
                configs=topic.configs,
                principal=self._principal,
            )
            assignment = check_assignment(assignor, request, view, assignor.assign(request, view))
            placed[topic.name] = assignment
            view = _with_placement(view, topic.name, assignment)
        request_message = CreateTopicsRequest(
            topics=tuple(
                CreatableTopic(
                    name=topic.name,
                    assignments=tuple(
                        CreatableReplicaAssignment(partition_index=p, broker_ids=r)
                        for p, r in sorted(placed[topic.name].items())
                    ),
                    configs=tuple(
                        CreatableTopicConfig(name=k, value=v) for k, v in topic.configs.items()
                    ),
                )
                for topic in new_topics
            ),
            timeout_ms=int(self._timeout(timeout_ms)),
            validate_only=validate_only,
        )
        response: CreateTopicsResponse = self._controller(request_message, timeout_ms)
        failed: dict[Any, KafkaError] = {}
        for result in response.topics:
            if result.error_code:
                failed[result.name] = error_codes.to_exception(
                    result.error_code,
                    api_key=CreateTopicsRequest.API_KEY,
                    message=result.error_message,
                )
        done = {name: a for name, a in placed.items() if name not in failed}
        if failed:
            raise AdminOperationError("create_topics", failed, done)
        return done

    def create_partitions(
        self,
        new_counts: Mapping[str, int],
        *,
        validate_only: bool = False,
        replica_assignor: ReplicaAssignorSpec | None = None,
        timeout_ms: float | None = None,
    ) -> dict[str, dict[int, tuple[int, ...]]]:
        """Grow each topic to its new partition count; returns the new partitions'
        assignments. Errors as for :meth:`create_topics` (an unknown topic, or a count
        that is not an increase, is an ``AdminOperationError`` item).

        The new partitions get the replication factor of partition 0 without the
        replicas a reassignment in flight adds or removes. Kafka's controller checks
        the new partitions against partition 0's whole replica list, those replicas
        included, so while such a move changes partition 0's replica count the topic is
        refused (REASSIGNMENT_IN_PROGRESS, naming the move) rather than given too many
        replicas."""
        assignor = self._pick_assignor(replica_assignor)
        view = self.cluster_view(timeout_ms=timeout_ms)
        firsts = [TopicPartition(name, 0) for name in new_counts if view.topic_assignment(name)]
        moving = self.list_partition_reassignments(firsts, timeout_ms=timeout_ms) if firsts else {}
        placed: dict[str, dict[int, tuple[int, ...]]] = {}
        failed: dict[Any, KafkaError] = {}
        for name, count in new_counts.items():
            current = view.topic_assignment(name)
            if not current:
                failed[name] = error_codes.to_exception(
                    error_codes.UNKNOWN_TOPIC_OR_PARTITION,
                    api_key=CreatePartitionsRequest.API_KEY,
                    message=f"topic {name!r} does not exist",
                )
                continue
            if count <= len(current):
                failed[name] = error_codes.to_exception(
                    error_codes.INVALID_PARTITIONS,
                    api_key=CreatePartitionsRequest.API_KEY,
                    message=f"topic {name!r} has {len(current)} partitions; {count} is not more",
                )
                continue
            move = moving.get(TopicPartition(name, 0))
            rf = len(move.target) if move is not None else len(current[0])
            if move is not None and len(move.replicas) != rf:
                failed[name] = error_codes.to_exception(
                    error_codes.REASSIGNMENT_IN_PROGRESS,
                    api_key=CreatePartitionsRequest.API_KEY,
                    message=f"{name}-0 is being reassigned (replicas {list(move.replicas)}, "
                    f"adding {list(move.adding)}, removing {list(move.removing)}): its "
                    f"replication factor is {rf}, but Kafka would count "
                    f"{len(move.replicas)}; add partitions once the move ends",
                )
                continue
            request = NewPartitions(
                topic=name,
                partition_ids=range(len(current), count),
                replication_factor=rf,
                principal=self._principal,
            )
            assignment = check_assignment(assignor, request, view, assignor.assign(request, view))
            placed[name] = assignment
            view = _with_placement(view, name, assignment)
        if placed:
            message = CreatePartitionsRequest(
                topics=tuple(
                    CreatePartitionsTopic(
                        name=name,
                        count=new_counts[name],
                        assignments=tuple(
                            CreatePartitionsAssignment(broker_ids=r)
                            for _, r in sorted(assignment.items())
                        ),
                    )
                    for name, assignment in placed.items()
                ),
                timeout_ms=int(self._timeout(timeout_ms)),
                validate_only=validate_only,
            )
            response: CreatePartitionsResponse = self._controller(message, timeout_ms)
            for result in response.results:
                if result.error_code:
                    failed[result.name] = error_codes.to_exception(
                        result.error_code,
                        api_key=CreatePartitionsRequest.API_KEY,
                        message=result.error_message,
                    )
        done = {name: a for name, a in placed.items() if name not in failed}
        if failed:
            raise AdminOperationError("create_partitions", failed, done)
        return done

    def delete_topics(self, topics: Iterable[str], *, timeout_ms: float | None = None) -> None:
        """Delete topics by name; ``AdminOperationError`` lists those that failed."""
        names = tuple(dict.fromkeys(topics))
        request = DeleteTopicsRequest(topic_names=names, timeout_ms=int(self._timeout(timeout_ms)))
        response: DeleteTopicsResponse = self._controller(request, timeout_ms)
        failed: dict[Any, KafkaError] = {
            r.name: error_codes.to_exception(
                r.error_code, api_key=DeleteTopicsRequest.API_KEY, message=r.error_message
            )
            for r in response.responses
            if r.error_code and r.name is not None
        }
        if failed:
            raise AdminOperationError(
                "delete_topics", failed, tuple(n for n in names if n not in failed)
            )

    # ------------------------------------------------------------------ reassignment

    def alter_partition_reassignments(
        self,
        targets: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: float | None = None,
    ) -> None:
        """Start (or replace) a reassignment to the given replicas; None cancels the
        partition's reassignment (KIP-455). ``AdminOperationError`` lists refused
        partitions; the others were accepted."""
        by_topic: dict[str, list[ReassignablePartition]] = {}
        for tp, replicas in targets.items():
            by_topic.setdefault(tp.topic, []).append(
                ReassignablePartition(
                    partition_index=tp.partition,
                    replicas=None if replicas is None else tuple(replicas),
                )
            )
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=int(self._timeout(timeout_ms)),
            topics=tuple(
                ReassignableTopic(name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
        )
        response: AlterPartitionReassignmentsResponse = self._controller(request, timeout_ms)
        _raise_top_level(response.error_code, response.error_message, request.API_KEY)
        failed: dict[Any, KafkaError] = {}
        for topic in response.responses:
            for p in topic.partitions:
                if p.error_code:
                    failed[TopicPartition(topic.name, p.partition_index)] = (
                        error_codes.to_exception(
                            p.error_code, api_key=request.API_KEY, message=p.error_message
                        )
                    )
        if failed:
            raise AdminOperationError(
                "alter_partition_reassignments",
                failed,
                tuple(tp for tp in targets if tp not in failed),
            )

    def list_partition_reassignments(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The ongoing reassignments among ``partitions`` (None: all of them)."""
        topics: tuple[ListPartitionReassignmentsTopics, ...] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = tuple(
                ListPartitionReassignmentsTopics(name=name, partition_indexes=tuple(ids))
                for name, ids in by_topic.items()
            )
        request = ListPartitionReassignmentsRequest(
            timeout_ms=int(self._timeout(timeout_ms)), topics=topics
        )
        response: ListPartitionReassignmentsResponse = self._controller(request, timeout_ms)
        _raise_top_level(response.error_code, response.error_message, request.API_KEY)
        # An entry that adds and removes nothing is no reassignment (Kafka never sends
        # one; Tansu lists every partition that way).
        return {
            TopicPartition(t.name, p.partition_index): PartitionReassignment(
                replicas=p.replicas, adding=p.adding_replicas, removing=p.removing_replicas
            )
            for t in response.topics
            for p in t.partitions
            if p.adding_replicas or p.removing_replicas
        }

    def elect_leaders(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        election_type: ElectionType = ElectionType.PREFERRED,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, ElectionResult]:
        """Elect preferred (or, with ``UNCLEAN``, any live) leaders for ``partitions``
        (None: every partition). ``AdminOperationError`` lists partitions whose
        election failed (e.g. PREFERRED_LEADER_NOT_AVAILABLE)."""
        topic_partitions: tuple[ElectionTopicPartitions, ...] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topic_partitions = tuple(
                ElectionTopicPartitions(topic=t, partitions=tuple(ids))
                for t, ids in by_topic.items()
            )
        request = ElectLeadersRequest(
            election_type=int(election_type),
            topic_partitions=topic_partitions,
            timeout_ms=int(self._timeout(timeout_ms)),
        )
        response: ElectLeadersResponse = self._controller(request, timeout_ms)
        _raise_top_level(response.error_code, None, request.API_KEY)
        results: dict[TopicPartition, ElectionResult] = {}
        failed: dict[Any, KafkaError] = {}
        for topic in response.replica_election_results:
            for p in topic.partition_result:
                tp = TopicPartition(topic.topic, p.partition_id)
                if p.error_code == error_codes.ELECTION_NOT_NEEDED:
                    results[tp] = ElectionResult.NOT_NEEDED
                elif p.error_code:
                    failed[tp] = error_codes.to_exception(
                        p.error_code, api_key=request.API_KEY, message=p.error_message
                    )
                else:
                    results[tp] = ElectionResult.ELECTED
        if failed:
            raise AdminOperationError("elect_leaders", failed, results)
        return results

    # ------------------------------------------------------------------ configs

    def describe_configs(
        self, resources: Iterable[ConfigResource], *, timeout_ms: float | None = None
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """The configuration of each topic or broker (broker resources are asked of
        that broker). ``AdminOperationError`` lists unknown resources."""
        out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        failed: dict[Any, KafkaError] = {}
        for node, group in self._by_config_node(resources).items():
            request = DescribeConfigsRequest(
                resources=tuple(
                    DescribeConfigsResource(resource_type=int(r.type), resource_name=r.name)
                    for r in group
                )
            )
            response: DescribeConfigsResponse = self._to(node, request, timeout_ms)
            for result in response.results:
                resource = ConfigResource(
                    ConfigResourceType(result.resource_type), result.resource_name
                )
                if result.error_code:
                    failed[resource] = error_codes.to_exception(
                        result.error_code, api_key=request.API_KEY, message=result.error_message
                    )
                    continue
                out[resource] = {
                    c.name: ConfigEntry(
                        name=c.name,
                        value=c.value,
                        source=ConfigSource.DEFAULT_CONFIG
                        if c.is_default
                        else ConfigSource.of(c.config_source),
                        read_only=c.read_only,
                        is_sensitive=c.is_sensitive,
                    )
                    for c in result.configs
                }
        if failed:
            raise AdminOperationError("describe_configs", failed, out)
        return out

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:
        """Apply SET/DELETE/APPEND/SUBTRACT changes per resource (KIP-339).
        ``AdminOperationError`` lists refused resources; the others were changed."""
        failed: dict[Any, KafkaError] = {}
        for node, group in self._by_config_node(changes).items():
            request = IncrementalAlterConfigsRequest(
                resources=tuple(
                    AlterConfigsResource(
                        resource_type=int(r.type),
                        resource_name=r.name,
                        configs=tuple(
                            AlterableConfig(
                                name=op.name, config_operation=int(op.op), value=op.value
                            )
                            for op in changes[r]
                        ),
                    )
                    for r in group
                ),
                validate_only=validate_only,
            )
            response: IncrementalAlterConfigsResponse = self._to(node, request, timeout_ms)
            for result in response.responses:
                if result.error_code:
                    resource = ConfigResource(
                        ConfigResourceType(result.resource_type), result.resource_name
                    )
                    failed[resource] = error_codes.to_exception(
                        result.error_code, api_key=request.API_KEY, message=result.error_message
                    )
        if failed:
            raise AdminOperationError(
                "incremental_alter_configs", failed, tuple(r for r in changes if r not in failed)
            )

    def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        *,
        partitions: Iterable[TopicPartition] | None = None,
        timeout_ms: float | None = None,
    ) -> dict[int, tuple[LogDirDescription, ...]]:
        """Each broker's log directories (disks) with the replicas in them (None: every
        live broker), future replicas of a move between disks included
        (``is_future``). ``partitions`` limits the replicas listed (every directory is
        still listed, with its capacity). A broker that cannot be reached is an
        ``AdminOperationError`` item."""
        if brokers is None:
            brokers = list(self._metadata((), timeout_ms).brokers)
        wanted = None if partitions is None else tuple(partitions)
        out: dict[int, tuple[LogDirDescription, ...]] = {}
        failed: dict[Any, CoopConsumerError] = {}
        for node in brokers:
            try:
                out[node] = self._log_dirs_of(node, wanted, timeout_ms)
            except (KafkaError, BrokerConnectionError, RequestTimeoutError) as exc:
                failed[node] = exc
        if failed:
            raise AdminOperationError("describe_log_dirs", failed, out)
        return out

    def alter_replica_log_dirs(
        self,
        moves: Mapping[TopicPartitionReplica, str],
        *,
        timeout_ms: float | None = None,
    ) -> None:
        """Move replicas to other log directories (disks) of their brokers
        (AlterReplicaLogDirs, KIP-113; each broker is asked for its own replicas).

        The broker copies the replica into a future replica in the new directory and
        swaps it in once it caught up (``describe_log_dirs`` shows the progress). A
        broker that does not host the replica yet remembers the directory for when it
        gets one (a reassignment adding it) and answers REPLICA_NOT_AVAILABLE.
        ``AdminOperationError`` maps each refused replica to its error
        (LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE...) and holds
        the accepted ones in ``completed``; a broker that cannot be reached is an item
        too (``BrokerConnectionError``/``RequestTimeoutError``).
        """
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for replica, path in moves.items():
            if not isinstance(replica, TopicPartitionReplica):
                raise TypeError(f"expected a TopicPartitionReplica, got {replica!r}")
            by_broker.setdefault(replica.broker_id, {}).setdefault(path, {}).setdefault(
                replica.topic, []
            ).append(replica.partition)
        failed: dict[Any, CoopConsumerError] = {}
        for node, dirs in by_broker.items():
            request = AlterReplicaLogDirsRequest(
                dirs=tuple(
                    AlterReplicaLogDir(
                        path=path,
                        topics=tuple(
                            AlterReplicaLogDirTopic(name=topic, partitions=tuple(parts))
                            for topic, parts in topics.items()
                        ),
                    )
                    for path, topics in dirs.items()
                )
            )
            if node not in self._client.brokers():
                self._metadata((), timeout_ms)
            try:
                response: AlterReplicaLogDirsResponse = self._to(node, request, timeout_ms)
            except (BrokerConnectionError, RequestTimeoutError, KafkaError) as exc:
                for replica in moves:
                    if replica.broker_id == node:
                        failed[replica] = exc
                continue
            for topic in response.results:
                for p in topic.partitions:
                    if p.error_code:
                        failed[TopicPartitionReplica(topic.topic_name, p.partition_index, node)] = (
                            error_codes.to_exception(p.error_code, api_key=request.API_KEY)
                        )
        if failed:
            raise AdminOperationError(
                "alter_replica_log_dirs", failed, tuple(r for r in moves if r not in failed)
            )

    # ------------------------------------------------------------------ internals

    def _timeout(self, timeout_ms: float | None) -> float:
        return self._timeout_ms if timeout_ms is None else timeout_ms

    def _pick_assignor(self, spec: ReplicaAssignorSpec | None) -> ReplicaAssignor:
        return self._assignor if spec is None else load_replica_assignor(spec)

    def _metadata(self, topics: Iterable[str] | None, timeout_ms: float | None) -> ClusterSnapshot:
        """Metadata of ``topics`` (None: all; empty: brokers only), read by the one
        Metadata reader; the wire client learns the brokers it names."""
        return self._client.metadata(
            topics, allow_auto_topic_creation=False, timeout_ms=self._timeout(timeout_ms)
        )

    def _any(self, request: Request, timeout_ms: float | None) -> Any:
        return self._client.request_any(request, timeout_ms=self._timeout(timeout_ms))

    def _to(self, node_id: int | None, request: Request, timeout_ms: float | None) -> Any:
        if node_id is None:
            return self._any(request, timeout_ms)
        return self._client.request(node_id, request, timeout_ms=self._timeout(timeout_ms))

    def _controller(self, request: Request, timeout_ms: float | None) -> Any:
        """Send to the controller the last Metadata named (asking Metadata first when
        there is none yet); on NOT_CONTROLLER or a lost connection, learn the
        controller again and retry once."""
        for attempt in (1, 2):
            cached = self._client.cluster
            metadata = cached if attempt == 1 and cached is not None else None
            if metadata is None:
                metadata = self._metadata((), timeout_ms)
            node = metadata.controller_id
            if node not in metadata.brokers:
                return self._any(request, timeout_ms)
            try:
                response = self._to(node, request, timeout_ms)
            except BrokerConnectionError:
                if attempt == 2:
                    raise
                continue
            if getattr(response, "error_code", 0) == _NOT_CONTROLLER and attempt == 1:
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _by_config_node(
        self, resources: Iterable[ConfigResource]
    ) -> dict[int | None, list[ConfigResource]]:
        groups: dict[int | None, list[ConfigResource]] = {}
        for r in resources:
            if not isinstance(r, ConfigResource):
                raise TypeError(f"expected a ConfigResource, got {r!r}")
            node: int | None = None
            if r.type is ConfigResourceType.BROKER and r.name:
                if not r.name.isdigit():
                    raise ConfigurationError(
                        f"broker resource name must be a broker id: {r.name!r}"
                    )
                node = int(r.name)
                if node not in self._client.brokers():
                    self._metadata((), None)
            groups.setdefault(node, []).append(r)
        return groups

    def _log_dirs_of(
        self,
        node: int,
        partitions: Sequence[TopicPartition] | None,
        timeout_ms: float | None,
    ) -> tuple[LogDirDescription, ...]:
        if node not in self._client.brokers():
            self._metadata((), timeout_ms)
        topics: tuple[DescribableLogDirTopic, ...] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = tuple(
                DescribableLogDirTopic(topic=t, partitions=tuple(ids))
                for t, ids in by_topic.items()
            )
        request = DescribeLogDirsRequest(topics=topics)
        response: DescribeLogDirsResponse = self._to(node, request, timeout_ms)
        _raise_top_level(response.error_code, None, request.API_KEY)
        return tuple(
            LogDirDescription(
                path=d.log_dir,
                error=error_codes.to_exception(d.error_code, api_key=request.API_KEY)
                if d.error_code
                else None,
                replicas=tuple(
                    ReplicaLogInfo(
                        topic=t.name,
                        partition=p.partition_index,
                        size_bytes=p.partition_size,
                        offset_lag=p.offset_lag,
                        is_future=p.is_future_key,
                    )
                    for t in d.topics
                    for p in t.partitions
                ),
                total_bytes=None if d.total_bytes < 0 else d.total_bytes,
                usable_bytes=None if d.usable_bytes < 0 else d.usable_bytes,
            )
            for d in response.results
        )


def _raise_top_level(code: int, message: str | None, api_key: int) -> None:
    if code:
        raise error_codes.to_exception(code, api_key=api_key, message=message)


def _with_placement(
    view: ClusterView, topic: str, assignment: Mapping[int, tuple[int, ...]]
) -> ClusterView:
    """``view`` after placing ``assignment``: later placements in one call see it."""
    brokers = dict(view.brokers)
    for replicas in assignment.values():
        for i, r in enumerate(replicas):
            b = brokers[r]
            brokers[r] = attrs.evolve(
                b, replicas=b.replicas + 1, leaders=b.leaders + (1 if i == 0 else 0)
            )
    assignments = dict(view.assignments)
    for p, replicas in assignment.items():
        assignments[TopicPartition(topic, p)] = replicas
    return ClusterView(brokers=brokers, assignments=assignments, fenced_brokers=view.fenced_brokers)
