"""Kafka's error codes: one table of (code, name, retriable, description).

Codes, names and retriable flags follow Java's ``org.apache.kafka.common.protocol.Errors``
(through Kafka 4.1); the descriptions are our own short wording. Every name is also a
module constant (``errors.UNKNOWN_MEMBER_ID == 25``). A code missing from the table
(from a newer broker) is reported as ``UNKNOWN_<code>``, not a crash.

Imports only the standard library, attrs and ``coopconsumer._errors``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import attrs

from .._errors import KafkaError

__all__ = ["BY_CODE", "BY_NAME", "ErrorInfo", "info", "is_retriable", "to_exception"]


@attrs.frozen
class ErrorInfo:
    """One row of the error table."""

    code: int
    name: str
    retriable: bool
    description: str


UNKNOWN_SERVER_ERROR: Final = -1
NONE: Final = 0
OFFSET_OUT_OF_RANGE: Final = 1
CORRUPT_MESSAGE: Final = 2
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
INVALID_FETCH_SIZE: Final = 4
LEADER_NOT_AVAILABLE: Final = 5
NOT_LEADER_OR_FOLLOWER: Final = 6
REQUEST_TIMED_OUT: Final = 7
BROKER_NOT_AVAILABLE: Final = 8
REPLICA_NOT_AVAILABLE: Final = 9
MESSAGE_TOO_LARGE: Final = 10
STALE_CONTROLLER_EPOCH: Final = 11
OFFSET_METADATA_TOO_LARGE: Final = 12
NETWORK_EXCEPTION: Final = 13
COORDINATOR_LOAD_IN_PROGRESS: Final = 14
COORDINATOR_NOT_AVAILABLE: Final = 15
NOT_COORDINATOR: Final = 16
INVALID_TOPIC_EXCEPTION: Final = 17
RECORD_LIST_TOO_LARGE: Final = 18
NOT_ENOUGH_REPLICAS: Final = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND: Final = 20
INVALID_REQUIRED_ACKS: Final = 21
ILLEGAL_GENERATION: Final = 22
INCONSISTENT_GROUP_PROTOCOL: Final = 23
INVALID_GROUP_ID: Final = 24
UNKNOWN_MEMBER_ID: Final = 25
INVALID_SESSION_TIMEOUT: Final = 26
REBALANCE_IN_PROGRESS: Final = 27
INVALID_COMMIT_OFFSET_SIZE: Final = 28
TOPIC_AUTHORIZATION_FAILED: Final = 29
GROUP_AUTHORIZATION_FAILED: Final = 30
CLUSTER_AUTHORIZATION_FAILED: Final = 31
INVALID_TIMESTAMP: Final = 32
UNSUPPORTED_SASL_MECHANISM: Final = 33
ILLEGAL_SASL_STATE: Final = 34
UNSUPPORTED_VERSION: Final = 35
TOPIC_ALREADY_EXISTS: Final = 36
INVALID_PARTITIONS: Final = 37
INVALID_REPLICATION_FACTOR: Final = 38
INVALID_REPLICA_ASSIGNMENT: Final = 39
INVALID_CONFIG: Final = 40
NOT_CONTROLLER: Final = 41
INVALID_REQUEST: Final = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT: Final = 43
POLICY_VIOLATION: Final = 44
OUT_OF_ORDER_SEQUENCE_NUMBER: Final = 45
DUPLICATE_SEQUENCE_NUMBER: Final = 46
INVALID_PRODUCER_EPOCH: Final = 47
INVALID_TXN_STATE: Final = 48
INVALID_PRODUCER_ID_MAPPING: Final = 49
INVALID_TRANSACTION_TIMEOUT: Final = 50
CONCURRENT_TRANSACTIONS: Final = 51
TRANSACTION_COORDINATOR_FENCED: Final = 52
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Final = 53
SECURITY_DISABLED: Final = 54
OPERATION_NOT_ATTEMPTED: Final = 55
KAFKA_STORAGE_ERROR: Final = 56
LOG_DIR_NOT_FOUND: Final = 57
SASL_AUTHENTICATION_FAILED: Final = 58
UNKNOWN_PRODUCER_ID: Final = 59
REASSIGNMENT_IN_PROGRESS: Final = 60
DELEGATION_TOKEN_AUTH_DISABLED: Final = 61
DELEGATION_TOKEN_NOT_FOUND: Final = 62
DELEGATION_TOKEN_OWNER_MISMATCH: Final = 63
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: Final = 64
DELEGATION_TOKEN_AUTHORIZATION_FAILED: Final = 65
DELEGATION_TOKEN_EXPIRED: Final = 66
INVALID_PRINCIPAL_TYPE: Final = 67
NON_EMPTY_GROUP: Final = 68
GROUP_ID_NOT_FOUND: Final = 69
FETCH_SESSION_ID_NOT_FOUND: Final = 70
INVALID_FETCH_SESSION_EPOCH: Final = 71
LISTENER_NOT_FOUND: Final = 72
TOPIC_DELETION_DISABLED: Final = 73
FENCED_LEADER_EPOCH: Final = 74
UNKNOWN_LEADER_EPOCH: Final = 75
UNSUPPORTED_COMPRESSION_TYPE: Final = 76
STALE_BROKER_EPOCH: Final = 77
OFFSET_NOT_AVAILABLE: Final = 78
MEMBER_ID_REQUIRED: Final = 79
PREFERRED_LEADER_NOT_AVAILABLE: Final = 80
GROUP_MAX_SIZE_REACHED: Final = 81
FENCED_INSTANCE_ID: Final = 82
ELIGIBLE_LEADERS_NOT_AVAILABLE: Final = 83
ELECTION_NOT_NEEDED: Final = 84
NO_REASSIGNMENT_IN_PROGRESS: Final = 85
GROUP_SUBSCRIBED_TO_TOPIC: Final = 86
INVALID_RECORD: Final = 87
UNSTABLE_OFFSET_COMMIT: Final = 88
THROTTLING_QUOTA_EXCEEDED: Final = 89
PRODUCER_FENCED: Final = 90
RESOURCE_NOT_FOUND: Final = 91
DUPLICATE_RESOURCE: Final = 92
UNACCEPTABLE_CREDENTIAL: Final = 93
INCONSISTENT_VOTER_SET: Final = 94
INVALID_UPDATE_VERSION: Final = 95
FEATURE_UPDATE_FAILED: Final = 96
PRINCIPAL_DESERIALIZATION_FAILURE: Final = 97
SNAPSHOT_NOT_FOUND: Final = 98
POSITION_OUT_OF_RANGE: Final = 99
UNKNOWN_TOPIC_ID: Final = 100
DUPLICATE_BROKER_REGISTRATION: Final = 101
BROKER_ID_NOT_REGISTERED: Final = 102
INCONSISTENT_TOPIC_ID: Final = 103
INCONSISTENT_CLUSTER_ID: Final = 104
TRANSACTIONAL_ID_NOT_FOUND: Final = 105
FETCH_SESSION_TOPIC_ID_ERROR: Final = 106
INELIGIBLE_REPLICA: Final = 107
NEW_LEADER_ELECTED: Final = 108
OFFSET_MOVED_TO_TIERED_STORAGE: Final = 109
FENCED_MEMBER_EPOCH: Final = 110
UNRELEASED_INSTANCE_ID: Final = 111
UNSUPPORTED_ASSIGNOR: Final = 112
STALE_MEMBER_EPOCH: Final = 113
MISMATCHED_ENDPOINT_TYPE: Final = 114
UNSUPPORTED_ENDPOINT_TYPE: Final = 115
UNKNOWN_CONTROLLER_ID: Final = 116
UNKNOWN_SUBSCRIPTION_ID: Final = 117
TELEMETRY_TOO_LARGE: Final = 118
INVALID_REGISTRATION: Final = 119
TRANSACTION_ABORTABLE: Final = 120
INVALID_RECORD_STATE: Final = 121
SHARE_SESSION_NOT_FOUND: Final = 122
INVALID_SHARE_SESSION_EPOCH: Final = 123
FENCED_STATE_EPOCH: Final = 124
INVALID_VOTER_KEY: Final = 125
DUPLICATE_VOTER: Final = 126
VOTER_NOT_FOUND: Final = 127
INVALID_REGULAR_EXPRESSION: Final = 128
REBOOTSTRAP_REQUIRED: Final = 129
STREAMS_INVALID_TOPOLOGY: Final = 130
STREAMS_INVALID_TOPOLOGY_EPOCH: Final = 131
STREAMS_TOPOLOGY_FENCED: Final = 132
SHARE_SESSION_LIMIT_REACHED: Final = 133

_TABLE: Final[tuple[ErrorInfo, ...]] = (
    ErrorInfo(
        UNKNOWN_SERVER_ERROR,
        "UNKNOWN_SERVER_ERROR",
        False,
        "The broker hit an unexpected error while handling the request.",
    ),
    ErrorInfo(NONE, "NONE", False, "No error."),
    ErrorInfo(
        OFFSET_OUT_OF_RANGE,
        "OFFSET_OUT_OF_RANGE",
        False,
        "The offset is outside the range the broker holds for the partition.",
    ),
    ErrorInfo(
        CORRUPT_MESSAGE,
        "CORRUPT_MESSAGE",
        True,
        "A record failed its CRC check, is too large, or is otherwise corrupt.",
    ),
    ErrorInfo(
        UNKNOWN_TOPIC_OR_PARTITION,
        "UNKNOWN_TOPIC_OR_PARTITION",
        True,
        "The broker does not host this topic-partition.",
    ),
    ErrorInfo(INVALID_FETCH_SIZE, "INVALID_FETCH_SIZE", False, "The fetch size is invalid."),
    ErrorInfo(
        LEADER_NOT_AVAILABLE,
        "LEADER_NOT_AVAILABLE",
        True,
        "The partition has no leader right now (an election is under way).",
    ),
    ErrorInfo(
        NOT_LEADER_OR_FOLLOWER,
        "NOT_LEADER_OR_FOLLOWER",
        True,
        "The broker is not the leader (or not a replica) of the partition.",
    ),
    ErrorInfo(REQUEST_TIMED_OUT, "REQUEST_TIMED_OUT", True, "The request timed out on the broker."),
    ErrorInfo(BROKER_NOT_AVAILABLE, "BROKER_NOT_AVAILABLE", False, "The broker is not available."),
    ErrorInfo(
        REPLICA_NOT_AVAILABLE,
        "REPLICA_NOT_AVAILABLE",
        True,
        "The replica is not available for the partition.",
    ),
    ErrorInfo(
        MESSAGE_TOO_LARGE,
        "MESSAGE_TOO_LARGE",
        False,
        "A message is larger than the broker accepts.",
    ),
    ErrorInfo(
        STALE_CONTROLLER_EPOCH,
        "STALE_CONTROLLER_EPOCH",
        False,
        "The controller moved to another broker.",
    ),
    ErrorInfo(
        OFFSET_METADATA_TOO_LARGE,
        "OFFSET_METADATA_TOO_LARGE",
        False,
        "The commit's metadata string is too large.",
    ),
    ErrorInfo(
        NETWORK_EXCEPTION, "NETWORK_EXCEPTION", True, "The broker disconnected before answering."
    ),
    ErrorInfo(
        COORDINATOR_LOAD_IN_PROGRESS,
        "COORDINATOR_LOAD_IN_PROGRESS",
        True,
        "The coordinator is still loading its state.",
    ),
    ErrorInfo(
        COORDINATOR_NOT_AVAILABLE,
        "COORDINATOR_NOT_AVAILABLE",
        True,
        "The coordinator is not available.",
    ),
    ErrorInfo(
        NOT_COORDINATOR, "NOT_COORDINATOR", True, "This broker is not the coordinator for the key."
    ),
    ErrorInfo(
        INVALID_TOPIC_EXCEPTION,
        "INVALID_TOPIC_EXCEPTION",
        False,
        "The topic name is invalid or the operation is not allowed on it.",
    ),
    ErrorInfo(
        RECORD_LIST_TOO_LARGE,
        "RECORD_LIST_TOO_LARGE",
        False,
        "A record batch is larger than the segment size.",
    ),
    ErrorInfo(
        NOT_ENOUGH_REPLICAS,
        "NOT_ENOUGH_REPLICAS",
        True,
        "Fewer in-sync replicas than required; the write was rejected.",
    ),
    ErrorInfo(
        NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        True,
        "The write was appended to fewer in-sync replicas than required.",
    ),
    ErrorInfo(
        INVALID_REQUIRED_ACKS, "INVALID_REQUIRED_ACKS", False, "The produce acks value is invalid."
    ),
    ErrorInfo(
        ILLEGAL_GENERATION,
        "ILLEGAL_GENERATION",
        False,
        "The group generation id is not the current one.",
    ),
    ErrorInfo(
        INCONSISTENT_GROUP_PROTOCOL,
        "INCONSISTENT_GROUP_PROTOCOL",
        False,
        "The member's protocol type or protocols do not match the group's.",
    ),
    ErrorInfo(INVALID_GROUP_ID, "INVALID_GROUP_ID", False, "The group id is invalid."),
    ErrorInfo(
        UNKNOWN_MEMBER_ID,
        "UNKNOWN_MEMBER_ID",
        False,
        "The coordinator does not know this member id.",
    ),
    ErrorInfo(
        INVALID_SESSION_TIMEOUT,
        "INVALID_SESSION_TIMEOUT",
        False,
        "The session timeout is outside the broker's allowed range.",
    ),
    ErrorInfo(
        REBALANCE_IN_PROGRESS,
        "REBALANCE_IN_PROGRESS",
        False,
        "The group is rebalancing; the member must rejoin.",
    ),
    ErrorInfo(
        INVALID_COMMIT_OFFSET_SIZE,
        "INVALID_COMMIT_OFFSET_SIZE",
        False,
        "The committed offset data size is invalid.",
    ),
    ErrorInfo(
        TOPIC_AUTHORIZATION_FAILED,
        "TOPIC_AUTHORIZATION_FAILED",
        False,
        "Not authorized for the topic.",
    ),
    ErrorInfo(
        GROUP_AUTHORIZATION_FAILED,
        "GROUP_AUTHORIZATION_FAILED",
        False,
        "Not authorized for the group.",
    ),
    ErrorInfo(
        CLUSTER_AUTHORIZATION_FAILED,
        "CLUSTER_AUTHORIZATION_FAILED",
        False,
        "Not authorized for the cluster.",
    ),
    ErrorInfo(
        INVALID_TIMESTAMP,
        "INVALID_TIMESTAMP",
        False,
        "A record timestamp is out of the accepted range.",
    ),
    ErrorInfo(
        UNSUPPORTED_SASL_MECHANISM,
        "UNSUPPORTED_SASL_MECHANISM",
        False,
        "The broker does not support the SASL mechanism.",
    ),
    ErrorInfo(
        ILLEGAL_SASL_STATE,
        "ILLEGAL_SASL_STATE",
        False,
        "The request is not valid in the current SASL state.",
    ),
    ErrorInfo(
        UNSUPPORTED_VERSION,
        "UNSUPPORTED_VERSION",
        False,
        "The broker does not support this API version.",
    ),
    ErrorInfo(
        TOPIC_ALREADY_EXISTS,
        "TOPIC_ALREADY_EXISTS",
        False,
        "A topic with this name already exists.",
    ),
    ErrorInfo(INVALID_PARTITIONS, "INVALID_PARTITIONS", False, "The partition count is invalid."),
    ErrorInfo(
        INVALID_REPLICATION_FACTOR,
        "INVALID_REPLICATION_FACTOR",
        False,
        "The replication factor is invalid.",
    ),
    ErrorInfo(
        INVALID_REPLICA_ASSIGNMENT,
        "INVALID_REPLICA_ASSIGNMENT",
        False,
        "The replica assignment is invalid.",
    ),
    ErrorInfo(INVALID_CONFIG, "INVALID_CONFIG", False, "The configuration is invalid."),
    ErrorInfo(NOT_CONTROLLER, "NOT_CONTROLLER", True, "This broker is not the active controller."),
    ErrorInfo(
        INVALID_REQUEST,
        "INVALID_REQUEST",
        False,
        "The broker found the request malformed or not allowed.",
    ),
    ErrorInfo(
        UNSUPPORTED_FOR_MESSAGE_FORMAT,
        "UNSUPPORTED_FOR_MESSAGE_FORMAT",
        False,
        "The partition's message format does not support the request.",
    ),
    ErrorInfo(
        POLICY_VIOLATION, "POLICY_VIOLATION", False, "The request violates a configured policy."
    ),
    ErrorInfo(
        OUT_OF_ORDER_SEQUENCE_NUMBER,
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        False,
        "The producer sequence number is out of order.",
    ),
    ErrorInfo(
        DUPLICATE_SEQUENCE_NUMBER,
        "DUPLICATE_SEQUENCE_NUMBER",
        False,
        "The producer sequence number is a duplicate.",
    ),
    ErrorInfo(
        INVALID_PRODUCER_EPOCH, "INVALID_PRODUCER_EPOCH", False, "The producer epoch is stale."
    ),
    ErrorInfo(
        INVALID_TXN_STATE,
        "INVALID_TXN_STATE",
        False,
        "The transactional operation is invalid in the transaction's state.",
    ),
    ErrorInfo(
        INVALID_PRODUCER_ID_MAPPING,
        "INVALID_PRODUCER_ID_MAPPING",
        False,
        "The producer id is not assigned to this transactional id.",
    ),
    ErrorInfo(
        INVALID_TRANSACTION_TIMEOUT,
        "INVALID_TRANSACTION_TIMEOUT",
        False,
        "The transaction timeout exceeds the broker's maximum.",
    ),
    ErrorInfo(
        CONCURRENT_TRANSACTIONS,
        "CONCURRENT_TRANSACTIONS",
        True,
        "Another operation on the same transaction is in progress.",
    ),
    ErrorInfo(
        TRANSACTION_COORDINATOR_FENCED,
        "TRANSACTION_COORDINATOR_FENCED",
        False,
        "The transaction coordinator is no longer current.",
    ),
    ErrorInfo(
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        False,
        "Not authorized for the transactional id.",
    ),
    ErrorInfo(SECURITY_DISABLED, "SECURITY_DISABLED", False, "Security features are disabled."),
    ErrorInfo(
        OPERATION_NOT_ATTEMPTED,
        "OPERATION_NOT_ATTEMPTED",
        False,
        "The broker skipped this operation of a batch after another one failed.",
    ),
    ErrorInfo(KAFKA_STORAGE_ERROR, "KAFKA_STORAGE_ERROR", True, "The broker hit a disk error."),
    ErrorInfo(
        LOG_DIR_NOT_FOUND,
        "LOG_DIR_NOT_FOUND",
        False,
        "The log directory is not in the broker's configuration.",
    ),
    ErrorInfo(
        SASL_AUTHENTICATION_FAILED,
        "SASL_AUTHENTICATION_FAILED",
        False,
        "SASL authentication failed.",
    ),
    ErrorInfo(
        UNKNOWN_PRODUCER_ID,
        "UNKNOWN_PRODUCER_ID",
        False,
        "The broker has no state for this producer id.",
    ),
    ErrorInfo(
        REASSIGNMENT_IN_PROGRESS,
        "REASSIGNMENT_IN_PROGRESS",
        False,
        "A partition reassignment is in progress.",
    ),
    ErrorInfo(
        DELEGATION_TOKEN_AUTH_DISABLED,
        "DELEGATION_TOKEN_AUTH_DISABLED",
        False,
        "Delegation tokens are disabled.",
    ),
    ErrorInfo(
        DELEGATION_TOKEN_NOT_FOUND,
        "DELEGATION_TOKEN_NOT_FOUND",
        False,
        "The delegation token does not exist.",
    ),
    ErrorInfo(
        DELEGATION_TOKEN_OWNER_MISMATCH,
        "DELEGATION_TOKEN_OWNER_MISMATCH",
        False,
        "The principal is not the token's owner or renewer.",
    ),
    ErrorInfo(
        DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
        "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
        False,
        "Delegation token requests are not allowed on this channel.",
    ),
    ErrorInfo(
        DELEGATION_TOKEN_AUTHORIZATION_FAILED,
        "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
        False,
        "Not authorized for the delegation token.",
    ),
    ErrorInfo(
        DELEGATION_TOKEN_EXPIRED,
        "DELEGATION_TOKEN_EXPIRED",
        False,
        "The delegation token has expired.",
    ),
    ErrorInfo(
        INVALID_PRINCIPAL_TYPE,
        "INVALID_PRINCIPAL_TYPE",
        False,
        "The principal type is not supported.",
    ),
    ErrorInfo(NON_EMPTY_GROUP, "NON_EMPTY_GROUP", False, "The group is not empty."),
    ErrorInfo(GROUP_ID_NOT_FOUND, "GROUP_ID_NOT_FOUND", False, "The group does not exist."),
    ErrorInfo(
        FETCH_SESSION_ID_NOT_FOUND,
        "FETCH_SESSION_ID_NOT_FOUND",
        True,
        "The fetch session does not exist.",
    ),
    ErrorInfo(
        INVALID_FETCH_SESSION_EPOCH,
        "INVALID_FETCH_SESSION_EPOCH",
        True,
        "The fetch session epoch is invalid.",
    ),
    ErrorInfo(
        LISTENER_NOT_FOUND,
        "LISTENER_NOT_FOUND",
        True,
        "The leader has no listener matching the one the request came in on.",
    ),
    ErrorInfo(
        TOPIC_DELETION_DISABLED, "TOPIC_DELETION_DISABLED", False, "Topic deletion is disabled."
    ),
    ErrorInfo(
        FENCED_LEADER_EPOCH,
        "FENCED_LEADER_EPOCH",
        True,
        "The leader epoch in the request is older than the broker's.",
    ),
    ErrorInfo(
        UNKNOWN_LEADER_EPOCH,
        "UNKNOWN_LEADER_EPOCH",
        True,
        "The leader epoch in the request is newer than the broker's.",
    ),
    ErrorInfo(
        UNSUPPORTED_COMPRESSION_TYPE,
        "UNSUPPORTED_COMPRESSION_TYPE",
        False,
        "The client does not support the partition's compression type.",
    ),
    ErrorInfo(STALE_BROKER_EPOCH, "STALE_BROKER_EPOCH", False, "The broker epoch is stale."),
    ErrorInfo(
        OFFSET_NOT_AVAILABLE,
        "OFFSET_NOT_AVAILABLE",
        True,
        "The new leader's high watermark has not caught up yet.",
    ),
    ErrorInfo(
        MEMBER_ID_REQUIRED,
        "MEMBER_ID_REQUIRED",
        False,
        "The member must rejoin with the member id the coordinator gave it (KIP-394).",
    ),
    ErrorInfo(
        PREFERRED_LEADER_NOT_AVAILABLE,
        "PREFERRED_LEADER_NOT_AVAILABLE",
        True,
        "The preferred leader is not available.",
    ),
    ErrorInfo(
        GROUP_MAX_SIZE_REACHED, "GROUP_MAX_SIZE_REACHED", False, "The group is at its maximum size."
    ),
    ErrorInfo(
        FENCED_INSTANCE_ID,
        "FENCED_INSTANCE_ID",
        False,
        "Another member registered this group.instance.id with a different member id (KIP-345).",
    ),
    ErrorInfo(
        ELIGIBLE_LEADERS_NOT_AVAILABLE,
        "ELIGIBLE_LEADERS_NOT_AVAILABLE",
        True,
        "No eligible leader is available.",
    ),
    ErrorInfo(
        ELECTION_NOT_NEEDED,
        "ELECTION_NOT_NEEDED",
        True,
        "The partition does not need a leader election.",
    ),
    ErrorInfo(
        NO_REASSIGNMENT_IN_PROGRESS,
        "NO_REASSIGNMENT_IN_PROGRESS",
        False,
        "No partition reassignment is in progress.",
    ),
    ErrorInfo(
        GROUP_SUBSCRIBED_TO_TOPIC,
        "GROUP_SUBSCRIBED_TO_TOPIC",
        False,
        "The group is subscribed to the topic, so its offsets cannot be deleted.",
    ),
    ErrorInfo(
        INVALID_RECORD,
        "INVALID_RECORD",
        False,
        "The broker rejected a record that failed validation.",
    ),
    ErrorInfo(
        UNSTABLE_OFFSET_COMMIT,
        "UNSTABLE_OFFSET_COMMIT",
        True,
        "Pending transactional offsets must be resolved first (KIP-447).",
    ),
    ErrorInfo(
        THROTTLING_QUOTA_EXCEEDED,
        "THROTTLING_QUOTA_EXCEEDED",
        True,
        "The throttling quota was exceeded.",
    ),
    ErrorInfo(
        PRODUCER_FENCED,
        "PRODUCER_FENCED",
        False,
        "A newer producer with the same transactional id fenced this one.",
    ),
    ErrorInfo(
        RESOURCE_NOT_FOUND, "RESOURCE_NOT_FOUND", False, "The referenced resource does not exist."
    ),
    ErrorInfo(
        DUPLICATE_RESOURCE,
        "DUPLICATE_RESOURCE",
        False,
        "The request refers to the same resource twice.",
    ),
    ErrorInfo(
        UNACCEPTABLE_CREDENTIAL,
        "UNACCEPTABLE_CREDENTIAL",
        False,
        "The credential does not meet the acceptance criteria.",
    ),
    ErrorInfo(
        INCONSISTENT_VOTER_SET,
        "INCONSISTENT_VOTER_SET",
        False,
        "The sender or receiver is not one of the expected voters.",
    ),
    ErrorInfo(
        INVALID_UPDATE_VERSION, "INVALID_UPDATE_VERSION", False, "The update version is invalid."
    ),
    ErrorInfo(
        FEATURE_UPDATE_FAILED,
        "FEATURE_UPDATE_FAILED",
        False,
        "The finalized features could not be updated.",
    ),
    ErrorInfo(
        PRINCIPAL_DESERIALIZATION_FAILURE,
        "PRINCIPAL_DESERIALIZATION_FAILURE",
        False,
        "The forwarded request's principal could not be deserialized.",
    ),
    ErrorInfo(SNAPSHOT_NOT_FOUND, "SNAPSHOT_NOT_FOUND", False, "The snapshot does not exist."),
    ErrorInfo(
        POSITION_OUT_OF_RANGE,
        "POSITION_OUT_OF_RANGE",
        False,
        "The snapshot position is out of range.",
    ),
    ErrorInfo(
        UNKNOWN_TOPIC_ID, "UNKNOWN_TOPIC_ID", True, "The broker does not host this topic id."
    ),
    ErrorInfo(
        DUPLICATE_BROKER_REGISTRATION,
        "DUPLICATE_BROKER_REGISTRATION",
        False,
        "The broker id is already registered.",
    ),
    ErrorInfo(
        BROKER_ID_NOT_REGISTERED,
        "BROKER_ID_NOT_REGISTERED",
        False,
        "The broker id is not registered.",
    ),
    ErrorInfo(
        INCONSISTENT_TOPIC_ID,
        "INCONSISTENT_TOPIC_ID",
        True,
        "The log's topic id does not match the request's.",
    ),
    ErrorInfo(
        INCONSISTENT_CLUSTER_ID,
        "INCONSISTENT_CLUSTER_ID",
        False,
        "The cluster id does not match the broker's.",
    ),
    ErrorInfo(
        TRANSACTIONAL_ID_NOT_FOUND,
        "TRANSACTIONAL_ID_NOT_FOUND",
        False,
        "The transactional id does not exist.",
    ),
    ErrorInfo(
        FETCH_SESSION_TOPIC_ID_ERROR,
        "FETCH_SESSION_TOPIC_ID_ERROR",
        True,
        "The fetch session used topic ids inconsistently.",
    ),
    ErrorInfo(
        INELIGIBLE_REPLICA,
        "INELIGIBLE_REPLICA",
        False,
        "The new ISR contains an ineligible replica.",
    ),
    ErrorInfo(
        NEW_LEADER_ELECTED,
        "NEW_LEADER_ELECTED",
        False,
        "The partition state was updated but the leader changed.",
    ),
    ErrorInfo(
        OFFSET_MOVED_TO_TIERED_STORAGE,
        "OFFSET_MOVED_TO_TIERED_STORAGE",
        False,
        "The offset has moved to tiered storage.",
    ),
    ErrorInfo(
        FENCED_MEMBER_EPOCH,
        "FENCED_MEMBER_EPOCH",
        False,
        "The member epoch is fenced; the member must give up its partitions and rejoin (KIP-848).",
    ),
    ErrorInfo(
        UNRELEASED_INSTANCE_ID,
        "UNRELEASED_INSTANCE_ID",
        False,
        "Another member still uses this instance id (KIP-848).",
    ),
    ErrorInfo(
        UNSUPPORTED_ASSIGNOR,
        "UNSUPPORTED_ASSIGNOR",
        False,
        "The group does not support the assignor or its versions (KIP-848).",
    ),
    ErrorInfo(
        STALE_MEMBER_EPOCH,
        "STALE_MEMBER_EPOCH",
        False,
        "The member epoch is stale; retry with the epoch from the next heartbeat (KIP-848).",
    ),
    ErrorInfo(
        MISMATCHED_ENDPOINT_TYPE,
        "MISMATCHED_ENDPOINT_TYPE",
        False,
        "The request was sent to the wrong type of endpoint.",
    ),
    ErrorInfo(
        UNSUPPORTED_ENDPOINT_TYPE,
        "UNSUPPORTED_ENDPOINT_TYPE",
        False,
        "The endpoint type is not supported.",
    ),
    ErrorInfo(
        UNKNOWN_CONTROLLER_ID, "UNKNOWN_CONTROLLER_ID", False, "The controller id is unknown."
    ),
    ErrorInfo(
        UNKNOWN_SUBSCRIPTION_ID,
        "UNKNOWN_SUBSCRIPTION_ID",
        False,
        "The client telemetry subscription id is unknown.",
    ),
    ErrorInfo(
        TELEMETRY_TOO_LARGE,
        "TELEMETRY_TOO_LARGE",
        False,
        "The client telemetry payload is too large.",
    ),
    ErrorInfo(
        INVALID_REGISTRATION,
        "INVALID_REGISTRATION",
        False,
        "The controller registration is invalid.",
    ),
    ErrorInfo(
        TRANSACTION_ABORTABLE, "TRANSACTION_ABORTABLE", False, "The transaction must be aborted."
    ),
    ErrorInfo(
        INVALID_RECORD_STATE,
        "INVALID_RECORD_STATE",
        False,
        "The share-group record is in an invalid state.",
    ),
    ErrorInfo(
        SHARE_SESSION_NOT_FOUND,
        "SHARE_SESSION_NOT_FOUND",
        True,
        "The share session does not exist.",
    ),
    ErrorInfo(
        INVALID_SHARE_SESSION_EPOCH,
        "INVALID_SHARE_SESSION_EPOCH",
        True,
        "The share session epoch is invalid.",
    ),
    ErrorInfo(
        FENCED_STATE_EPOCH, "FENCED_STATE_EPOCH", False, "The share-group state epoch is fenced."
    ),
    ErrorInfo(
        INVALID_VOTER_KEY,
        "INVALID_VOTER_KEY",
        False,
        "The voter key does not match the receiver's replica key.",
    ),
    ErrorInfo(DUPLICATE_VOTER, "DUPLICATE_VOTER", False, "The voter is already in the voter set."),
    ErrorInfo(VOTER_NOT_FOUND, "VOTER_NOT_FOUND", False, "The voter is not in the voter set."),
    ErrorInfo(
        INVALID_REGULAR_EXPRESSION,
        "INVALID_REGULAR_EXPRESSION",
        False,
        "The subscription regular expression is invalid.",
    ),
    ErrorInfo(
        REBOOTSTRAP_REQUIRED,
        "REBOOTSTRAP_REQUIRED",
        False,
        "The client must re-bootstrap (KIP-1102).",
    ),
    ErrorInfo(
        STREAMS_INVALID_TOPOLOGY,
        "STREAMS_INVALID_TOPOLOGY",
        False,
        "The streams topology is invalid.",
    ),
    ErrorInfo(
        STREAMS_INVALID_TOPOLOGY_EPOCH,
        "STREAMS_INVALID_TOPOLOGY_EPOCH",
        False,
        "The streams topology epoch is invalid.",
    ),
    ErrorInfo(
        STREAMS_TOPOLOGY_FENCED, "STREAMS_TOPOLOGY_FENCED", False, "The streams topology is fenced."
    ),
    ErrorInfo(
        SHARE_SESSION_LIMIT_REACHED,
        "SHARE_SESSION_LIMIT_REACHED",
        True,
        "The broker's share session limit was reached.",
    ),
)

#: Every known error by code.
BY_CODE: Final[Mapping[int, ErrorInfo]] = MappingProxyType({e.code: e for e in _TABLE})
#: Every known error by name.
BY_NAME: Final[Mapping[str, ErrorInfo]] = MappingProxyType({e.name: e for e in _TABLE})


def info(code: int) -> ErrorInfo:
    """The table row for ``code``; an unknown code gives ``UNKNOWN_<code>``, not retriable."""
    found = BY_CODE.get(code)
    if found is not None:
        return found
    return ErrorInfo(code, f"UNKNOWN_{code}", False, "An error code this client does not know.")


def is_retriable(code: int) -> bool:
    """Whether Kafka marks ``code`` retriable (unknown codes are not)."""
    return info(code).retriable


def to_exception(
    code: int,
    *,
    api_key: int | None = None,
    api_version: int | None = None,
    broker: str | None = None,
    message: str | None = None,
) -> KafkaError:
    """A :class:`~coopconsumer.KafkaError` for a non-zero ``code``, with its table row.

    ``message`` is the broker's error message when the response carries one.
    Raises ValueError for ``NONE`` (0): there is no error to report.
    """
    if code == NONE:
        raise ValueError("error code 0 (NONE) is not an error")
    row = info(code)
    return KafkaError(
        row.code,
        row.name,
        retriable=row.retriable,
        description=row.description,
        api_key=api_key,
        api_version=api_version,
        broker=broker,
        message=message,
    )
