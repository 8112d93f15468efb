"""ExponentialBackoff: growth, cap, jitter bounds (pure, no clock)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer._errors import ConfigurationError
from coopconsumer._io import ExponentialBackoff


def test_doubles_from_initial_up_to_the_cap_without_jitter() -> None:
    backoff = ExponentialBackoff(50, 1000, jitter=0)
    assert [backoff.delay_ms(n) for n in range(7)] == [50, 100, 200, 400, 800, 1000, 1000]
    assert backoff.delay_ms(10_000) == 1000  # no overflow for huge attempt counts


@pytest.mark.parametrize("max_ms", [50, 100])
def test_constant_without_jitter_when_max_is_not_above_initial(max_ms: int) -> None:
    # Java's ExponentialBackoff returns the initial interval as is when expMax is 0.
    backoff = ExponentialBackoff(100, max_ms, rng=random.Random(1))
    assert {backoff.delay_ms(n) for n in range(5)} == {100}


def test_zero_initial_means_no_delay() -> None:
    assert ExponentialBackoff(0, 0).delay_ms(3) == 0


@settings(max_examples=100, deadline=None)
@given(
    initial=st.integers(min_value=1, max_value=10_000),
    extra=st.integers(min_value=0, max_value=100_000),
    attempts=st.integers(min_value=0, max_value=200),
    seed=st.integers(min_value=0, max_value=2**32),
    jitter=st.floats(min_value=0, max_value=0.9),
)
def test_jittered_delay_stays_within_bounds(
    initial: int, extra: int, attempts: int, seed: int, jitter: float
) -> None:
    backoff = ExponentialBackoff(initial, initial + extra, jitter=jitter, rng=random.Random(seed))
    base = backoff.base_delay_ms(attempts)
    assert initial <= base <= initial + extra
    assert base <= backoff.base_delay_ms(attempts + 1)  # never shrinks
    delay = backoff.delay_ms(attempts)
    assert base * (1 - jitter) - 1e-9 <= delay <= base * (1 + jitter) + 1e-9
    # The configured maximum is a hard ceiling, jitter included (as in Java).
    assert delay <= initial + extra


def test_jitter_spreads_delays() -> None:
    backoff = ExponentialBackoff(100, 10_000, rng=random.Random(1))
    assert len({round(backoff.delay_ms(0), 6) for _ in range(20)}) > 1


def test_jitter_never_pushes_the_delay_above_the_maximum() -> None:
    backoff = ExponentialBackoff(100, 1000, jitter=0.5, rng=random.Random(2))
    delays = [backoff.delay_ms(10) for _ in range(200)]
    assert max(delays) == 1000  # half of the draws would exceed it without the cap
    assert min(delays) >= 500


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_ms": -1, "max_ms": 10},
        {"initial_ms": 1, "max_ms": 10, "multiplier": 0.5},
        {"initial_ms": 1, "max_ms": 10, "jitter": 1.0},
    ],
)
def test_rejects_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        ExponentialBackoff(**kwargs)


def test_negative_attempts_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="attempts"):
        ExponentialBackoff(1, 2).delay_ms(-1)
