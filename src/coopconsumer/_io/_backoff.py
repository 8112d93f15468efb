"""Exponential backoff with jitter, as a pure value computation.

Used for reconnect delays (``reconnect.backoff.ms`` .. ``reconnect.backoff.max.ms``) and
for retrying retriable broker answers (``retry.backoff.ms`` .. ``retry.backoff.max.ms``).
Mirrors Java's ``org.apache.kafka.common.utils.ExponentialBackoff``: ``initial * 2**n``,
spread by +/- ``jitter`` so that many clients that lost the same broker do not reconnect
in lockstep (KIP-144), and never above ``max``. Standard library only; reads no clock.
"""

from __future__ import annotations

import random

from .._errors import ConfigurationError

__all__ = ["ExponentialBackoff"]


class ExponentialBackoff:
    """Delay for the ``attempts``-th consecutive failure (0 = first failure).

    ``delay_ms(n)`` is ``min(initial_ms * multiplier**n, max_ms)`` scaled by a random
    factor in ``[1 - jitter, 1 + jitter]``, then capped at ``max_ms``: as in Java, the
    configured maximum (``reconnect.backoff.max.ms``) is a hard ceiling. When
    ``max_ms <= initial_ms`` the delay is ``initial_ms``, without jitter (Java does the
    same).
    """

    __slots__ = ("_initial_ms", "_jitter", "_max_ms", "_multiplier", "_rng")

    def __init__(
        self,
        initial_ms: float,
        max_ms: float,
        *,
        multiplier: float = 2.0,
        jitter: float = 0.2,
        rng: random.Random | None = None,
    ) -> None:
        if initial_ms < 0 or max_ms < 0:
            raise ConfigurationError(f"backoff must be >= 0 ms, got {initial_ms}, {max_ms}")
        if multiplier < 1:
            raise ConfigurationError(f"backoff multiplier must be >= 1, got {multiplier}")
        if not 0 <= jitter < 1:
            raise ConfigurationError(f"backoff jitter must be in [0, 1), got {jitter}")
        self._initial_ms = float(initial_ms)
        self._max_ms = float(max(max_ms, initial_ms))
        self._multiplier = float(multiplier)
        self._jitter = float(jitter)
        self._rng = rng if rng is not None else random.Random()

    @property
    def initial_ms(self) -> float:
        """The delay before jitter after the first failure."""
        return self._initial_ms

    @property
    def max_ms(self) -> float:
        """The cap before jitter."""
        return self._max_ms

    @property
    def jitter(self) -> float:
        """The relative spread applied to every delay."""
        return self._jitter

    def base_delay_ms(self, attempts: int) -> float:
        """The delay for ``attempts`` before jitter (deterministic)."""
        if attempts < 0:
            raise ValueError(f"attempts must be >= 0, got {attempts}")
        if self._initial_ms == 0:
            return 0.0
        # Cap the exponent: beyond ~64 doublings the result is the cap anyway, and
        # float overflow must not turn into inf.
        exponent = min(attempts, 64)
        return min(self._initial_ms * self._multiplier**exponent, self._max_ms)

    def delay_ms(self, attempts: int) -> float:
        """The jittered delay for ``attempts`` consecutive failures so far."""
        base = self.base_delay_ms(attempts)
        if self._jitter == 0 or base == 0 or self._max_ms <= self._initial_ms:
            return base
        factor = self._rng.uniform(1 - self._jitter, 1 + self._jitter)
        return min(base * factor, self._max_ms)
