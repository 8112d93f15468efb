"""Kafka messages the transaction proxy reads or writes that the library itself never
sends: Produce, Fetch and the transactional APIs.

The same declarative style as ``coopconsumer._protocol.messages``: one class per message
covering the versions the proxy handles, each mirroring
``clients/src/main/resources/common/message/<Name>.json`` in apache/kafka (trunk of late
2024): field order is wire order, names are the spec's in snake_case, version ranges are
spelled as in the spec. They live here, not in ``_protocol``, because only the test proxy
uses them.

Deviations from the specs, all deliberate:

- Fetch: spec 0-17; declared 4-12. Below 4 there is no isolation level (nothing to do
  for the proxy); from 13 topics are named by id, and the proxy caps the Fetch version it
  advertises at 12 (``_txn_proxy``), so clients never send those.
- Produce: spec 0-11; declared 3-11 (every record-batch-v2 producer).
- EndTxn: spec 0-5; declared 0-5, v5 (KIP-890) included for completeness although Tansu
  0.6 advertises 0-4.

``error_response`` builds the answer Kafka gives a request it refuses with one error
code (Java's ``AbstractRequest.getErrorResponse``), for these messages and the group
messages of ``_protocol.messages``.

Imports attrs, ``coopconsumer._protocol`` and ``coopconsumer._errors``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs

from .._protocol import Request, Response, Struct
from .._protocol._schema import kf
from .._protocol.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    SyncGroupRequest,
    SyncGroupResponse,
)

__all__ = [
    "PROXY_REQUESTS",
    "AbortedTransaction",
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "AddPartitionsToTxnPartitionResult",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "AddPartitionsToTxnResult",
    "AddPartitionsToTxnTopic",
    "AddPartitionsToTxnTopicResult",
    "AddPartitionsToTxnTransaction",
    "EndTxnRequest",
    "EndTxnResponse",
    "EpochEndOffset",
    "FetchPartition",
    "FetchRequest",
    "FetchResponse",
    "FetchTopic",
    "FetchableTopicResponse",
    "ForgottenTopic",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "LeaderIdAndEpoch",
    "PartitionData",
    "PartitionProduceData",
    "PartitionProduceResponse",
    "ProduceRequest",
    "ProduceResponse",
    "SnapshotId",
    "TopicProduceData",
    "TopicProduceResponse",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitRequestPartition",
    "TxnOffsetCommitRequestTopic",
    "TxnOffsetCommitResponse",
    "TxnOffsetCommitResponsePartition",
    "TxnOffsetCommitResponseTopic",
    "error_response",
]


# --------------------------------------------------------------------------- Produce (0)


@attrs.frozen(kw_only=True)
class PartitionProduceData(Struct):
    """The record batches for one partition."""

    index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    records: bytes | None = attrs.field(default=None, metadata=kf("0+", "records", nullable="0+"))


@attrs.frozen(kw_only=True)
class TopicProduceData(Struct):
    """The record batches for one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partition_data: tuple[PartitionProduceData, ...] = attrs.field(
        default=(), metadata=kf("0+", PartitionProduceData, array=True)
    )


@attrs.frozen(kw_only=True)
class ProduceRequest(Request):
    """ProduceRequest (key 0). v3+ carries the transactional id (KIP-98)."""

    API_KEY = 0
    MIN_VERSION = 3
    MAX_VERSION = 11
    FLEXIBLE_VERSION = 9

    transactional_id: str | None = attrs.field(
        default=None, metadata=kf("3+", "string", nullable="3+")
    )
    acks: int = attrs.field(default=-1, metadata=kf("0+", "int16"))
    timeout_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    topic_data: tuple[TopicProduceData, ...] = attrs.field(
        default=(), metadata=kf("0+", TopicProduceData, array=True)
    )


@attrs.frozen(kw_only=True)
class BatchIndexAndErrorMessage(Struct):
    """A record that made the batch fail (v8+)."""

    batch_index: int = attrs.field(default=0, metadata=kf("8+", "int32"))
    batch_index_error_message: str | None = attrs.field(
        default=None, metadata=kf("8+", "string", nullable="8+")
    )


@attrs.frozen(kw_only=True)
class LeaderIdAndEpoch(Struct):
    """The current leader of a partition (Produce v10+, Fetch v12+, tagged)."""

    leader_id: int = attrs.field(default=-1, metadata=kf("0+", "int32"))
    leader_epoch: int = attrs.field(default=-1, metadata=kf("0+", "int32"))


@attrs.frozen(kw_only=True)
class PartitionProduceResponse(Struct):
    """The outcome for one partition."""

    index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    base_offset: int = attrs.field(default=-1, metadata=kf("0+", "int64"))
    log_append_time_ms: int = attrs.field(default=-1, metadata=kf("2+", "int64", ignorable=True))
    log_start_offset: int = attrs.field(default=-1, metadata=kf("5+", "int64", ignorable=True))
    record_errors: tuple[BatchIndexAndErrorMessage, ...] = attrs.field(
        default=(), metadata=kf("8+", BatchIndexAndErrorMessage, array=True, ignorable=True)
    )
    error_message: str | None = attrs.field(
        default=None, metadata=kf("8+", "string", nullable="8+", ignorable=True)
    )
    current_leader: LeaderIdAndEpoch | None = attrs.field(
        default=None, metadata=kf("10+", LeaderIdAndEpoch, tagged="10+", tag=0)
    )


@attrs.frozen(kw_only=True)
class TopicProduceResponse(Struct):
    """The outcomes for one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partition_responses: tuple[PartitionProduceResponse, ...] = attrs.field(
        default=(), metadata=kf("0+", PartitionProduceResponse, array=True)
    )


@attrs.frozen(kw_only=True)
class NodeEndpoint(Struct):
    """A broker named in a response (Produce v10+, Fetch v16+, tagged)."""

    node_id: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    host: str = attrs.field(default="", metadata=kf("0+", "string"))
    port: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    rack: str | None = attrs.field(default=None, metadata=kf("0+", "string", nullable="0+"))


@attrs.frozen(kw_only=True)
class ProduceResponse(Response):
    """ProduceResponse (key 0)."""

    API_KEY = 0
    MIN_VERSION = 3
    MAX_VERSION = 11
    FLEXIBLE_VERSION = 9

    responses: tuple[TopicProduceResponse, ...] = attrs.field(
        default=(), metadata=kf("0+", TopicProduceResponse, array=True)
    )
    throttle_time_ms: int = attrs.field(default=0, metadata=kf("1+", "int32", ignorable=True))
    node_endpoints: tuple[NodeEndpoint, ...] = attrs.field(
        default=(), metadata=kf("10+", NodeEndpoint, array=True, tagged="10+", tag=0)
    )


ProduceRequest.RESPONSE_TYPE = ProduceResponse


# --------------------------------------------------------------------------- Fetch (1)


@attrs.frozen(kw_only=True)
class FetchPartition(Struct):
    """One partition to fetch."""

    partition: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    current_leader_epoch: int = attrs.field(default=-1, metadata=kf("9+", "int32", ignorable=True))
    fetch_offset: int = attrs.field(default=0, metadata=kf("0+", "int64"))
    last_fetched_epoch: int = attrs.field(default=-1, metadata=kf("12+", "int32"))
    log_start_offset: int = attrs.field(default=-1, metadata=kf("5+", "int64", ignorable=True))
    partition_max_bytes: int = attrs.field(default=0, metadata=kf("0+", "int32"))


@attrs.frozen(kw_only=True)
class FetchTopic(Struct):
    """The partitions to fetch of one topic."""

    topic: str = attrs.field(default="", metadata=kf("0-12", "string", ignorable=True))
    partitions: tuple[FetchPartition, ...] = attrs.field(
        default=(), metadata=kf("0+", FetchPartition, array=True)
    )


@attrs.frozen(kw_only=True)
class ForgottenTopic(Struct):
    """Partitions to remove from an incremental fetch session (v7+)."""

    topic: str = attrs.field(default="", metadata=kf("7-12", "string", ignorable=True))
    partitions: tuple[int, ...] = attrs.field(default=(), metadata=kf("7+", "[]int32"))


@attrs.frozen(kw_only=True)
class FetchRequest(Request):
    """FetchRequest (key 1). v4+ ``isolation_level``: 1 is READ_COMMITTED (KIP-98)."""

    API_KEY = 1
    MIN_VERSION = 4
    MAX_VERSION = 12
    FLEXIBLE_VERSION = 12

    cluster_id: str | None = attrs.field(
        default=None,
        metadata=kf("12+", "string", nullable="12+", tagged="12+", tag=0, ignorable=True),
    )
    replica_id: int = attrs.field(default=-1, metadata=kf("0-14", "int32"))
    max_wait_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    min_bytes: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    max_bytes: int = attrs.field(default=0x7FFFFFFF, metadata=kf("3+", "int32", ignorable=True))
    isolation_level: int = attrs.field(default=0, metadata=kf("4+", "int8", ignorable=True))
    session_id: int = attrs.field(default=0, metadata=kf("7+", "int32", ignorable=True))
    session_epoch: int = attrs.field(default=-1, metadata=kf("7+", "int32", ignorable=True))
    topics: tuple[FetchTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", FetchTopic, array=True)
    )
    forgotten_topics_data: tuple[ForgottenTopic, ...] = attrs.field(
        default=(), metadata=kf("7+", ForgottenTopic, array=True)
    )
    rack_id: str = attrs.field(default="", metadata=kf("11+", "string", ignorable=True))


@attrs.frozen(kw_only=True)
class EpochEndOffset(Struct):
    """Where the log diverges from the fetcher's (v12+, tagged)."""

    epoch: int = attrs.field(default=-1, metadata=kf("12+", "int32"))
    end_offset: int = attrs.field(default=-1, metadata=kf("12+", "int64"))


@attrs.frozen(kw_only=True)
class SnapshotId(Struct):
    """The snapshot to fetch instead (v12+, tagged)."""

    end_offset: int = attrs.field(default=-1, metadata=kf("0+", "int64"))
    epoch: int = attrs.field(default=-1, metadata=kf("0+", "int32"))


@attrs.frozen(kw_only=True)
class AbortedTransaction(Struct):
    """A transaction aborted in the fetched range: its producer and first offset."""

    producer_id: int = attrs.field(default=0, metadata=kf("4+", "int64"))
    first_offset: int = attrs.field(default=0, metadata=kf("4+", "int64"))


@attrs.frozen(kw_only=True)
class PartitionData(Struct):
    """The fetched data of one partition."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    high_watermark: int = attrs.field(default=-1, metadata=kf("0+", "int64"))
    last_stable_offset: int = attrs.field(default=-1, metadata=kf("4+", "int64", ignorable=True))
    log_start_offset: int = attrs.field(default=-1, metadata=kf("5+", "int64", ignorable=True))
    diverging_epoch: EpochEndOffset | None = attrs.field(
        default=None, metadata=kf("12+", EpochEndOffset, tagged="12+", tag=0)
    )
    current_leader: LeaderIdAndEpoch | None = attrs.field(
        default=None, metadata=kf("12+", LeaderIdAndEpoch, tagged="12+", tag=1)
    )
    snapshot_id: SnapshotId | None = attrs.field(
        default=None, metadata=kf("12+", SnapshotId, tagged="12+", tag=2)
    )
    aborted_transactions: tuple[AbortedTransaction, ...] | None = attrs.field(
        default=None,
        metadata=kf("4+", AbortedTransaction, array=True, nullable="4+", ignorable=True),
    )
    preferred_read_replica: int = attrs.field(default=-1, metadata=kf("11+", "int32"))
    records: bytes | None = attrs.field(default=None, metadata=kf("0+", "records", nullable="0+"))


@attrs.frozen(kw_only=True)
class FetchableTopicResponse(Struct):
    """The fetched data of one topic."""

    topic: str = attrs.field(default="", metadata=kf("0-12", "string", ignorable=True))
    partitions: tuple[PartitionData, ...] = attrs.field(
        default=(), metadata=kf("0+", PartitionData, array=True)
    )


@attrs.frozen(kw_only=True)
class FetchResponse(Response):
    """FetchResponse (key 1)."""

    API_KEY = 1
    MIN_VERSION = 4
    MAX_VERSION = 12
    FLEXIBLE_VERSION = 12

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("1+", "int32", ignorable=True))
    error_code: int = attrs.field(default=0, metadata=kf("7+", "int16", ignorable=True))
    session_id: int = attrs.field(default=0, metadata=kf("7+", "int32"))
    responses: tuple[FetchableTopicResponse, ...] = attrs.field(
        default=(), metadata=kf("0+", FetchableTopicResponse, array=True)
    )


FetchRequest.RESPONSE_TYPE = FetchResponse


# --------------------------------------------------------------------------- InitProducerId (22)


@attrs.frozen(kw_only=True)
class InitProducerIdRequest(Request):
    """InitProducerIdRequest (key 22). v3+ may carry the current producer id and epoch
    (KIP-360: bump the epoch instead of fencing)."""

    API_KEY = 22
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 2

    transactional_id: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )
    transaction_timeout_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    producer_id: int = attrs.field(default=-1, metadata=kf("3+", "int64"))
    producer_epoch: int = attrs.field(default=-1, metadata=kf("3+", "int16"))


@attrs.frozen(kw_only=True)
class InitProducerIdResponse(Response):
    """InitProducerIdResponse (key 22)."""

    API_KEY = 22
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 2

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32", ignorable=True))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    producer_id: int = attrs.field(default=-1, metadata=kf("0+", "int64"))
    producer_epoch: int = attrs.field(default=-1, metadata=kf("0+", "int16"))


InitProducerIdRequest.RESPONSE_TYPE = InitProducerIdResponse


# -------------------------------------------------------------------------- AddPartitionsToTxn (24)


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnTopic(Struct):
    """Partitions of one topic to add to a transaction."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnTransaction(Struct):
    """One transaction of a batched request (v4+, broker to coordinator)."""

    transactional_id: str = attrs.field(default="", metadata=kf("4+", "string"))
    producer_id: int = attrs.field(default=0, metadata=kf("4+", "int64"))
    producer_epoch: int = attrs.field(default=0, metadata=kf("4+", "int16"))
    verify_only: bool = attrs.field(default=False, metadata=kf("4+", "bool"))
    topics: tuple[AddPartitionsToTxnTopic, ...] = attrs.field(
        default=(), metadata=kf("4+", AddPartitionsToTxnTopic, array=True)
    )


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnRequest(Request):
    """AddPartitionsToTxnRequest (key 24). Clients send v0-3 (one transaction);
    v4+ batches transactions (KIP-890, brokers only)."""

    API_KEY = 24
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 3

    transactions: tuple[AddPartitionsToTxnTransaction, ...] = attrs.field(
        default=(), metadata=kf("4+", AddPartitionsToTxnTransaction, array=True)
    )
    v3_and_below_transactional_id: str = attrs.field(default="", metadata=kf("0-3", "string"))
    v3_and_below_producer_id: int = attrs.field(default=0, metadata=kf("0-3", "int64"))
    v3_and_below_producer_epoch: int = attrs.field(default=0, metadata=kf("0-3", "int16"))
    v3_and_below_topics: tuple[AddPartitionsToTxnTopic, ...] = attrs.field(
        default=(), metadata=kf("0-3", AddPartitionsToTxnTopic, array=True)
    )


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnPartitionResult(Struct):
    """The outcome for one partition."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    partition_error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnTopicResult(Struct):
    """The outcomes for one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    results_by_partition: tuple[AddPartitionsToTxnPartitionResult, ...] = attrs.field(
        default=(), metadata=kf("0+", AddPartitionsToTxnPartitionResult, array=True)
    )


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnResult(Struct):
    """The outcomes for one transaction (v4+)."""

    transactional_id: str = attrs.field(default="", metadata=kf("4+", "string"))
    topic_results: tuple[AddPartitionsToTxnTopicResult, ...] = attrs.field(
        default=(), metadata=kf("4+", AddPartitionsToTxnTopicResult, array=True)
    )


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnResponse(Response):
    """AddPartitionsToTxnResponse (key 24)."""

    API_KEY = 24
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 3

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("4+", "int16", ignorable=True))
    results_by_transaction: tuple[AddPartitionsToTxnResult, ...] = attrs.field(
        default=(), metadata=kf("4+", AddPartitionsToTxnResult, array=True)
    )
    results_by_topic_v3_and_below: tuple[AddPartitionsToTxnTopicResult, ...] = attrs.field(
        default=(), metadata=kf("0-3", AddPartitionsToTxnTopicResult, array=True)
    )


AddPartitionsToTxnRequest.RESPONSE_TYPE = AddPartitionsToTxnResponse


# --------------------------------------------------------------------------- AddOffsetsToTxn (25)


@attrs.frozen(kw_only=True)
class AddOffsetsToTxnRequest(Request):
    """AddOffsetsToTxnRequest (key 25): the group's offsets join the transaction."""

    API_KEY = 25
    MIN_VERSION = 0
    MAX_VERSION = 4
    FLEXIBLE_VERSION = 3

    transactional_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    producer_id: int = attrs.field(default=0, metadata=kf("0+", "int64"))
    producer_epoch: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    group_id: str = attrs.field(default="", metadata=kf("0+", "string"))


@attrs.frozen(kw_only=True)
class AddOffsetsToTxnResponse(Response):
    """AddOffsetsToTxnResponse (key 25)."""

    API_KEY = 25
    MIN_VERSION = 0
    MAX_VERSION = 4
    FLEXIBLE_VERSION = 3

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))


AddOffsetsToTxnRequest.RESPONSE_TYPE = AddOffsetsToTxnResponse


# --------------------------------------------------------------------------- EndTxn (26)


@attrs.frozen(kw_only=True)
class EndTxnRequest(Request):
    """EndTxnRequest (key 26): commit (``committed``) or abort the transaction."""

    API_KEY = 26
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 3

    transactional_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    producer_id: int = attrs.field(default=0, metadata=kf("0+", "int64"))
    producer_epoch: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    committed: bool = attrs.field(default=False, metadata=kf("0+", "bool"))


@attrs.frozen(kw_only=True)
class EndTxnResponse(Response):
    """EndTxnResponse (key 26). v5+ returns the bumped producer id/epoch (KIP-890)."""

    API_KEY = 26
    MIN_VERSION = 0
    MAX_VERSION = 5
    FLEXIBLE_VERSION = 3

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    producer_id: int = attrs.field(default=-1, metadata=kf("5+", "int64", ignorable=True))
    producer_epoch: int = attrs.field(default=-1, metadata=kf("5+", "int16", ignorable=True))


EndTxnRequest.RESPONSE_TYPE = EndTxnResponse


# --------------------------------------------------------------------------- TxnOffsetCommit (28)


@attrs.frozen(kw_only=True)
class TxnOffsetCommitRequestPartition(Struct):
    """An offset the transaction commits for one partition."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    committed_offset: int = attrs.field(default=0, metadata=kf("0+", "int64"))
    committed_leader_epoch: int = attrs.field(
        default=-1, metadata=kf("2+", "int32", ignorable=True)
    )
    committed_metadata: str | None = attrs.field(
        default="", metadata=kf("0+", "string", nullable="0+")
    )


@attrs.frozen(kw_only=True)
class TxnOffsetCommitRequestTopic(Struct):
    """The offsets the transaction commits for one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[TxnOffsetCommitRequestPartition, ...] = attrs.field(
        default=(), metadata=kf("0+", TxnOffsetCommitRequestPartition, array=True)
    )


@attrs.frozen(kw_only=True)
class TxnOffsetCommitRequest(Request):
    """TxnOffsetCommitRequest (key 28). v3+ carries the consumer's generation, member
    id and instance id, which the group coordinator checks (KIP-447)."""

    API_KEY = 28
    MIN_VERSION = 0
    MAX_VERSION = 4
    FLEXIBLE_VERSION = 3

    transactional_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    group_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    producer_id: int = attrs.field(default=0, metadata=kf("0+", "int64"))
    producer_epoch: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    generation_id: int = attrs.field(default=-1, metadata=kf("3+", "int32"))
    member_id: str = attrs.field(default="", metadata=kf("3+", "string"))
    group_instance_id: str | None = attrs.field(
        default=None, metadata=kf("3+", "string", nullable="3+")
    )
    topics: tuple[TxnOffsetCommitRequestTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", TxnOffsetCommitRequestTopic, array=True)
    )


@attrs.frozen(kw_only=True)
class TxnOffsetCommitResponsePartition(Struct):
    """The outcome for one partition."""

    partition_index: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))


@attrs.frozen(kw_only=True)
class TxnOffsetCommitResponseTopic(Struct):
    """The outcomes for one topic."""

    name: str = attrs.field(default="", metadata=kf("0+", "string"))
    partitions: tuple[TxnOffsetCommitResponsePartition, ...] = attrs.field(
        default=(), metadata=kf("0+", TxnOffsetCommitResponsePartition, array=True)
    )


@attrs.frozen(kw_only=True)
class TxnOffsetCommitResponse(Response):
    """TxnOffsetCommitResponse (key 28)."""

    API_KEY = 28
    MIN_VERSION = 0
    MAX_VERSION = 4
    FLEXIBLE_VERSION = 3

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    topics: tuple[TxnOffsetCommitResponseTopic, ...] = attrs.field(
        default=(), metadata=kf("0+", TxnOffsetCommitResponseTopic, array=True)
    )


TxnOffsetCommitRequest.RESPONSE_TYPE = TxnOffsetCommitResponse


# --------------------------------------------------------------------------- error answers


def _produce_error(request: Any, code: int, _version: int) -> Response:
    return ProduceResponse(
        responses=tuple(
            TopicProduceResponse(
                name=topic.name,
                partition_responses=tuple(
                    PartitionProduceResponse(index=p.index, error_code=code)
                    for p in topic.partition_data
                ),
            )
            for topic in request.topic_data
        )
    )


def _fetch_error(request: Any, code: int, _version: int) -> Response:
    return FetchResponse(
        error_code=code,
        responses=tuple(
            FetchableTopicResponse(
                topic=topic.topic,
                partitions=tuple(
                    PartitionData(partition_index=p.partition, error_code=code, records=b"")
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )


def _find_coordinator_error(request: Any, code: int, version: int) -> Response:
    if version >= 4:  # KIP-699: one answer per key
        return FindCoordinatorResponse(
            coordinators=tuple(
                FindCoordinatorResponseCoordinator(key=key, node_id=-1, port=-1, error_code=code)
                for key in request.coordinator_keys
            )
        )
    return FindCoordinatorResponse(error_code=code, node_id=-1, port=-1)


def _offset_commit_error(request: Any, code: int, _version: int) -> Response:
    return OffsetCommitResponse(
        topics=tuple(
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=tuple(
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        )
    )


def _offset_fetch_error(request: Any, code: int, _version: int) -> Response:
    topics = tuple(
        OffsetFetchResponseTopic(
            name=topic.name,
            partitions=tuple(
                OffsetFetchResponsePartition(partition_index=index, error_code=code)
                for index in topic.partition_indexes
            ),
        )
        for topic in request.topics or ()
    )
    groups = tuple(
        OffsetFetchResponseGroup(group_id=group.group_id, error_code=code)
        for group in request.groups
    )
    return OffsetFetchResponse(topics=topics, error_code=code, groups=groups)


def _add_partitions_error(request: Any, code: int, _version: int) -> Response:
    return AddPartitionsToTxnResponse(
        error_code=code,
        results_by_topic_v3_and_below=tuple(
            AddPartitionsToTxnTopicResult(
                name=topic.name,
                results_by_partition=tuple(
                    AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
                    for p in topic.partitions
                ),
            )
            for topic in request.v3_and_below_topics
        ),
    )


def _txn_offset_commit_error(request: Any, code: int, _version: int) -> Response:
    return TxnOffsetCommitResponse(
        topics=tuple(
            TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=tuple(
                    TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        )
    )


_ERROR_RESPONSES: Final[dict[type[Request], Callable[[Any, int, int], Response]]] = {
    ProduceRequest: _produce_error,
    FetchRequest: _fetch_error,
    FindCoordinatorRequest: _find_coordinator_error,
    OffsetCommitRequest: _offset_commit_error,
    OffsetFetchRequest: _offset_fetch_error,
    JoinGroupRequest: lambda _r, code, _v: JoinGroupResponse(
        error_code=code, generation_id=-1, protocol_name=""
    ),
    HeartbeatRequest: lambda _r, code, _v: HeartbeatResponse(error_code=code),
    LeaveGroupRequest: lambda _r, code, _v: LeaveGroupResponse(error_code=code),
    SyncGroupRequest: lambda _r, code, _v: SyncGroupResponse(error_code=code),
    InitProducerIdRequest: lambda _r, code, _v: InitProducerIdResponse(error_code=code),
    AddPartitionsToTxnRequest: _add_partitions_error,
    AddOffsetsToTxnRequest: lambda _r, code, _v: AddOffsetsToTxnResponse(error_code=code),
    EndTxnRequest: lambda _r, code, _v: EndTxnResponse(error_code=code),
    TxnOffsetCommitRequest: _txn_offset_commit_error,
}

#: Every request class the proxy decodes, by API key.
PROXY_REQUESTS: Final[dict[int, type[Request]]] = {cls.API_KEY: cls for cls in _ERROR_RESPONSES}


def error_response(request: Request, code: int, version: int) -> Response:
    """The answer Kafka gives ``request`` (sent at ``version``) when it refuses it with
    error ``code``: the code on every partition (or coordinator key) the request names,
    and at the top level where the response has one."""
    return _ERROR_RESPONSES[type(request)](request, code, version)
