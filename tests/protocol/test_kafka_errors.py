"""The Kafka error table."""

from __future__ import annotations

import pytest

from coopconsumer._errors import KafkaError
from coopconsumer._protocol import error_codes


def test_names_are_constants_equal_to_their_codes() -> None:
    assert error_codes.NONE == 0
    assert error_codes.UNKNOWN_SERVER_ERROR == -1
    assert error_codes.UNKNOWN_MEMBER_ID == 25
    assert error_codes.ILLEGAL_GENERATION == 22
    assert error_codes.REBALANCE_IN_PROGRESS == 27
    assert error_codes.MEMBER_ID_REQUIRED == 79
    assert error_codes.GROUP_MAX_SIZE_REACHED == 81
    assert error_codes.FENCED_INSTANCE_ID == 82
    assert error_codes.UNSTABLE_OFFSET_COMMIT == 88
    assert error_codes.UNKNOWN_TOPIC_ID == 100
    assert error_codes.STALE_MEMBER_EPOCH == 113
    for row in error_codes.BY_CODE.values():
        assert getattr(error_codes, row.name) == row.code


def test_table_is_consistent_and_covers_a_contiguous_range() -> None:
    codes = sorted(error_codes.BY_CODE)
    assert codes == list(range(-1, codes[-1] + 1))
    assert codes[-1] >= 113
    assert len(error_codes.BY_NAME) == len(error_codes.BY_CODE)
    assert all(row.description for row in error_codes.BY_CODE.values())


@pytest.mark.parametrize(
    ("name", "retriable"),
    [
        ("COORDINATOR_LOAD_IN_PROGRESS", True),
        ("COORDINATOR_NOT_AVAILABLE", True),
        ("NOT_COORDINATOR", True),
        ("UNSTABLE_OFFSET_COMMIT", True),
        ("UNKNOWN_TOPIC_OR_PARTITION", True),
        ("REQUEST_TIMED_OUT", True),
        ("ILLEGAL_GENERATION", False),
        ("UNKNOWN_MEMBER_ID", False),
        ("REBALANCE_IN_PROGRESS", False),
        ("FENCED_INSTANCE_ID", False),
        ("GROUP_AUTHORIZATION_FAILED", False),
        ("UNKNOWN_SERVER_ERROR", False),
    ],
)
def test_retriable_flags_match_java(name: str, retriable: bool) -> None:
    assert error_codes.BY_NAME[name].retriable is retriable
    assert error_codes.is_retriable(error_codes.BY_NAME[name].code) is retriable


def test_unknown_codes_do_not_crash() -> None:
    row = error_codes.info(9999)
    assert (row.code, row.name, row.retriable) == (9999, "UNKNOWN_9999", False)
    exc = error_codes.to_exception(-42)
    assert exc.name == "UNKNOWN_-42"


def test_to_exception_builds_a_kafka_error_with_context() -> None:
    exc = error_codes.to_exception(
        error_codes.NOT_COORDINATOR, api_key=12, api_version=4, broker="b:9092", message="moved"
    )
    assert isinstance(exc, KafkaError)
    assert (exc.code, exc.name, exc.retriable) == (16, "NOT_COORDINATOR", True)
    assert (exc.api_key, exc.api_version, exc.broker) == (12, 4, "b:9092")
    assert "moved" in str(exc)
    assert "NOT_COORDINATOR (16)" in str(exc)


def test_no_error_is_not_an_exception() -> None:
    with pytest.raises(ValueError, match="NONE"):
        error_codes.to_exception(error_codes.NONE)
