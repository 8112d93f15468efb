"""``FailureLog``: a failure that repeats is reported once per window (issue 35)."""

from __future__ import annotations

import logging

import pytest

from coopconsumer._io._failure_log import (
    FailureLog,
    LibrdkafkaLog,
    backoff_window_s,
    failure_key,
)

_REFUSED = "[thrd:h:1/bootstrap]: h:1/bootstrap: Connect to ipv4#h:1 failed: Connection refused"


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_key_drops_what_changes_between_attempts() -> None:
    plain = "h:1/bootstrap: Connect to ipv4#h:1 failed: Connection refused"
    assert failure_key(f"{_REFUSED} (after 0ms in state CONNECT)") == plain
    assert failure_key(f"{_REFUSED} (after 12ms in state CONNECT)") == plain
    suppressed = f"{_REFUSED} (after 0ms in state CONNECT, 3 identical error(s) suppressed)"
    assert failure_key(suppressed) == plain
    # The client error librdkafka reports for the same failure has the same key.
    assert failure_key(f"{plain} (after 0ms in state CONNECT)") == plain


def test_once_per_window_with_the_count_then_once_when_it_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    logger = logging.getLogger("test.failure_log")
    failures = FailureLog(logger, 10.0, clock=clock)
    librdkafka = LibrdkafkaLog(logger, failures)
    with caplog.at_level(logging.DEBUG, logger="test.failure_log"):
        for _ in range(200):  # 10 s of attempts every 50 ms
            librdkafka.log(
                logging.ERROR,
                "%s [%s] %s",
                "FAIL",
                "c#1",
                f"{_REFUSED} (after 0ms in state CONNECT)",
            )
            clock.now += 0.05
        clock.now = 110.0  # a whole window after the first report
        librdkafka.log(logging.ERROR, "%s [%s] %s", "FAIL", "c#1", _REFUSED)
        clock.now += 5
        failures.settle()
        assert len(caplog.records) == 2
        clock.now += 5
        failures.settle()
        # One window of silence is not enough: librdkafka's next attempt may come up
        # to 1.5 windows later (its backoff jitter).
        assert len(caplog.records) == 2
        clock.now += 10
        failures.settle()
        failures.settle()
        librdkafka.log(
            logging.DEBUG, "%s [%s] %s", "CONNECT", "c#1", "debug lines pass as they are"
        )
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4, messages
    assert messages[0].startswith("FAIL [c#1] [thrd:h:1/bootstrap]")
    assert messages[1].endswith("(reported 199 more time(s) in the last 10 s)")
    assert messages[2].startswith("no longer failing (not seen for 20 s, 201 time(s) in all)")
    assert caplog.records[2].levelno == logging.WARNING
    assert failures.suppressed == 199


def test_distinct_failures_are_each_reported() -> None:
    clock = _Clock()
    failures = FailureLog(logging.getLogger("test.failure_log"), 10.0, clock=clock)
    assert failures.admit("a", logging.WARNING) == ""
    assert failures.admit("b", logging.WARNING) == ""
    assert failures.admit("a", logging.WARNING) is None


@pytest.mark.parametrize(
    ("conf", "window"),
    [
        ({}, 10.0),
        ({"reconnect.backoff.max.ms": 2500}, 2.5),
        ({"reconnect.backoff.max.ms": "x"}, 10.0),
    ],
)
def test_the_window_is_the_longest_reconnect_backoff(
    conf: dict[str, object], window: float
) -> None:
    assert backoff_window_s(conf) == window
    assert FailureLog(logging.getLogger("x"), 0.1).window_s == 1.0  # never below a second


_ALL_DOWN = "1/1 brokers are down"


def _fail_for(librdkafka: LibrdkafkaLog, clock: _Clock, texts: list[str], seconds: float) -> None:
    end = clock.now + seconds
    while clock.now < end:
        for text in texts:
            librdkafka.log(logging.ERROR, "%s [%s] %s", "FAIL", "c#1", text)
        clock.now += 0.5


def test_a_positive_sign_says_at_once_that_the_failure_stopped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 35: a record delivered (or fetched, or a transaction committed) proves a
    one-broker cluster reachable again: "no longer failing" is said then, once, and not
    again when the silence later passes two windows."""
    clock = _Clock()
    logger = logging.getLogger("test.failure_log")
    failures = FailureLog(logger, 10.0, clock=clock)
    librdkafka = LibrdkafkaLog(logger, failures)
    with caplog.at_level(logging.DEBUG, logger="test.failure_log"):
        _fail_for(librdkafka, clock, [_REFUSED, f"[thrd:app]: {_ALL_DOWN}"], 15.0)
        before = len(caplog.records)
        failures.recovered("a record was delivered")
        over = [r.getMessage() for r in caplog.records[before:]]
        failures.recovered("a record was delivered")
        clock.now += 60.0
        failures.settle()
    assert len(over) == 2, over
    assert all(m.startswith("no longer failing (a record was delivered, 30 time(s)") for m in over)
    assert {m.rsplit(": ", 1)[-1] for m in over} == {_ALL_DOWN, "Connection refused"}
    assert len(caplog.records) == before + 2


def test_a_positive_sign_from_a_larger_cluster_proves_only_that_one_broker_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    logger = logging.getLogger("test.failure_log")
    failures = FailureLog(logger, 10.0, clock=clock)
    librdkafka = LibrdkafkaLog(logger, failures)
    with caplog.at_level(logging.DEBUG, logger="test.failure_log"):
        _fail_for(librdkafka, clock, [_REFUSED, "1/3 brokers are down"], 5.0)
        before = len(caplog.records)
        failures.recovered("records were fetched")
        assert [r.getMessage() for r in caplog.records[before:]] == [
            "no longer failing (records were fetched, 10 time(s) in all): 1/3 brokers are down"
        ]
        # The refused broker may still be down: only silence says it is over.
        clock.now += 19.0
        failures.settle()
        assert len(caplog.records) == before + 1
        clock.now += 1.0
        failures.settle()
    assert caplog.records[-1].getMessage().startswith("no longer failing (not seen for 20 s")


@pytest.mark.parametrize(
    ("bootstrap", "broker", "over"),
    [
        ("127.0.0.1:9092", "127.0.0.1:9092/bootstrap", True),
        ("kafka-1:9093", "sasl_ssl://kafka-1:9093/bootstrap", True),
        # Two addresses: the answer proves only that one of them was reached.
        ("127.0.0.1:9092,127.0.0.1:9093", "127.0.0.1:9092/bootstrap", False),
        # A broker learned from metadata is not the bootstrap address.
        ("127.0.0.1:9092", "127.0.0.1:9092/1", False),
    ],
)
def test_an_answer_proves_the_sole_bootstrap_address_reached(
    caplog: pytest.LogCaptureFixture, bootstrap: str, broker: str, over: bool
) -> None:
    """A CI run of the transactional producer's recovery: librdkafka reported the
    cluster as "0/2 brokers are down" (the bootstrap address and the broker behind it),
    never "1/1", so the one-broker rule did not apply, yet the coordinator's answer
    proves the sole bootstrap address was reached: its refusals are over then."""
    clock = _Clock()
    logger = logging.getLogger("test.failure_log")
    failures = FailureLog.for_config(
        logger, {"bootstrap.servers": bootstrap, "reconnect.backoff.max.ms": 10_000}
    )
    librdkafka = LibrdkafkaLog(logger, failures)
    refused = f"{broker}: Connect to ipv4#127.0.0.1:9092 failed: Connection refused"
    with caplog.at_level(logging.DEBUG, logger="test.failure_log"):
        _fail_for(librdkafka, clock, [refused], 4.0)
        failures.note_client_error("0/2 brokers are down")
        before = len(caplog.records)
        failures.recovered("the transaction coordinator answered")
    said = [r.getMessage() for r in caplog.records[before:]]
    if over:
        assert said == [
            "no longer failing (the transaction coordinator answered, 8 time(s) in all): " + refused
        ]
    else:
        assert said == []
