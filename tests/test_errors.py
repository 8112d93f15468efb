"""The public errors survive pickling with every attribute (multiprocessing, Spark)."""

from __future__ import annotations

import pickle

import pytest

from coopconsumer import (
    AssignorError,
    AuthenticationError,
    BrokerConnectionError,
    CommitFailedError,
    ConfigurationError,
    CoopConsumerError,
    DeliveryError,
    IncompatibleVersionError,
    InvalidAssignmentError,
    KafkaError,
    ProducerFencedError,
    ProtocolError,
    RebalanceInProgressError,
    RequestTimeoutError,
    TransactionAbortedError,
    TransactionError,
)

ERRORS: list[CoopConsumerError] = [
    CoopConsumerError("base"),
    ConfigurationError("bad key 'x'"),
    ProtocolError("truncated", member_id="m-1", api_key=14, api_version=5, broker="b:1"),
    KafkaError(
        27,
        "REBALANCE_IN_PROGRESS",
        retriable=True,
        description="rebalancing",
        api_key=8,
        api_version=9,
        broker="b:1",
        message="commit refused",
    ),
    BrokerConnectionError("refused", broker="b:2"),
    RequestTimeoutError("no answer", api_key=12, api_version=4, broker="b:3"),
    AssignorError("raised"),
    AuthenticationError(
        "the server refused the proof",
        broker="b:4 (node 1)",
        mechanism="SCRAM-SHA-256",
        broker_message="invalid-proof",
        error_code=58,
        enabled_mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512"),
    ),
    InvalidAssignmentError("p0 moved"),
    RebalanceInProgressError("later"),
    CommitFailedError("gone"),
    DeliveryError(
        "1 of 3 failed",
        topic="t",
        partition=2,
        code=-192,
        name="_MSG_TIMED_OUT",
        retriable=True,
        failed=1,
    ),
    TransactionError("abort did not complete", fatal=True, code=-185, name="_TIMED_OUT"),
    TransactionAbortedError(
        "refused", reason="group generation fenced", permanent=False, code=22, name="IG"
    ),
    ProducerFencedError("fenced", code=47, name="INVALID_PRODUCER_EPOCH"),
    IncompatibleVersionError("TxnOffsetCommit up to v2"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_pickle_round_trip_keeps_type_message_and_attributes(error: CoopConsumerError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.args == error.args
    assert vars(copy) == vars(error)
    assert copy.retriable == error.retriable
