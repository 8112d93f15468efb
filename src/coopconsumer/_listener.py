"""Rebalance listeners and the invoker that calls them.

``RebalanceListener`` is public (re-exported by the package). ``ListenerInvoker`` runs
on the thread that calls ``poll()``: it logs, times, calls and catches each callback and
keeps the first exception for ``poll()`` to raise (KIP-429 "Rebalance Callback Error
Handling").

Imports only ``_types`` and ``_errors`` from the package, and nothing that does I/O; the
default clock is ``time.monotonic`` but every caller may inject its own.
"""

from __future__ import annotations

import enum
import heapq
import inspect
import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

from ._errors import ConfigurationError
from ._types import TopicPartition

__all__ = [
    "KindLike",
    "ListenerInvoker",
    "ListenerKind",
    "ListenerMetricsSink",
    "RebalanceListener",
    "RebalanceListenerLike",
]

_log = logging.getLogger("coopconsumer.listener")


class RebalanceListener:
    """Callbacks told which partitions this consumer gains and gives up.

    Subclass it and override what you need; every method defaults to doing nothing,
    except :meth:`on_partitions_lost`, which calls :meth:`on_partitions_revoked` (as
    Java's ``ConsumerRebalanceListener``, KIP-429). All callbacks run on the thread that
    calls ``Consumer.poll()``, never on a background thread.

    **Errors.** If a callback raises, the exception is logged, the remaining callbacks of
    the rebalance still run, and the *first* exception is raised from ``poll()`` once the
    assignment change is complete. The change itself stands: a retry of ``poll()`` does
    not revoke or assign again (KIP-429). ``KeyboardInterrupt`` and ``SystemExit``
    propagate at once, as Java rethrows ``WakeupException`` and ``InterruptException``.

    **EAGER timeline** (``range``, ``roundrobin``, ``sticky``, or any mix that is not
    cooperative everywhere), in every rebalance:

    1. ``on_partitions_lost(all owned)`` if the member fell out of the group (unless it
       owns nothing); it then rejoins.
    2. ``on_partitions_revoked(all owned)`` -- every partition, before JoinGroup.
    3. The assignor's ``subscription_user_data`` (JoinGroup), ``assign`` (leader only),
       ``on_assignment`` (after SyncGroup).
    4. ``on_partitions_assigned(full new assignment)``, which may overlap what was
       revoked in step 2.

    **COOPERATIVE timeline** (all configured assignors support COOPERATIVE, e.g.
    ``cooperative-sticky``); steps marked *may* can be skipped:

    1. *may*: ``on_partitions_lost(all owned)`` if the member fell out of the group
       (unless it owns nothing); it then rejoins.
    2. *may*: ``on_partitions_revoked(subset)`` before JoinGroup, only for owned
       partitions no longer subscribed or whose topic no longer exists. In a rebalance
       caused by members joining or leaving this is usually not called.
    3. The assignor's ``subscription_user_data`` (JoinGroup) and ``assign`` (leader only),
       which sees every member's owned partitions.
    4. *may*: ``on_partitions_revoked(owned - assigned)`` after SyncGroup, for the
       partitions moving to another member. If it is called, a follow-up rebalance is
       started so those partitions reach their new owner.
    5. The assignor's ``on_assignment`` -- after any step-4 revocation, before step 6.
    6. ``on_partitions_assigned(assigned - owned)``: only the newly added partitions,
       never overlapping step 4. **Always called**, even with an empty set, so it is the
       reliable "rebalance finished" signal; ``on_partitions_revoked`` is not a reliable
       "rebalance started" signal.

    Records of partitions that stay owned keep flowing from ``poll()`` during a
    cooperative rebalance.
    """

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        """Called with partitions this consumer gives up while still in the group.

        Commit offsets for them here if you commit manually: the consumer still owns
        them, so the commit can succeed. Never called with an empty set.
        """

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        """Called with partitions newly given to this consumer.

        Under COOPERATIVE only the added partitions are passed, and the call happens at
        the end of every rebalance even when the set is empty.
        """

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        """Called with partitions already owned by another member, or gone.

        The member fell out of the group (session timeout, fencing, unknown member id,
        illegal generation) or the topics were deleted: committing offsets for these
        partitions will fail. Never called with an empty set. The default calls
        :meth:`on_partitions_revoked` (KIP-429).
        """
        self.on_partitions_revoked(partitions)


@runtime_checkable
class RebalanceListenerLike(Protocol):
    """Any object with the two required callbacks can serve as a listener.

    ``on_partitions_lost`` is optional: when missing, ``on_partitions_revoked`` is
    called instead, as Java's default method does.
    """

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition], /) -> None: ...

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition], /) -> None: ...


class ListenerKind(enum.Enum):
    """Which rebalance callback to run."""

    #: ``on_partitions_revoked``: partitions given up while still in the group.
    REVOKED = "revoked"
    #: ``on_partitions_assigned``: partitions newly added (always called, even empty).
    ASSIGNED = "assigned"
    #: ``on_partitions_lost``: partitions already owned elsewhere (member left the group).
    LOST = "lost"

    @property
    def method_name(self) -> str:
        """The listener method for this kind, e.g. ``"on_partitions_revoked"``."""
        return f"on_partitions_{self.value}"

    @classmethod
    def of(cls, kind: ListenerKind | KindLike) -> ListenerKind:
        """This enum's member for ``kind``, or for any enum member with the same value.

        The sans-I/O group member declares its own kind enum (it must not import this
        module's clock); its members map here by value. ``ValueError`` otherwise.
        """
        if isinstance(kind, ListenerKind):
            return kind
        return cls(kind.value)


class KindLike(Protocol):
    """An enum member whose value is ``"revoked"``, ``"assigned"`` or ``"lost"``."""

    @property
    def value(self) -> str: ...


class ListenerMetricsSink(Protocol):
    """Where the invoker reports callback latency (``CoordinatorMetrics`` is one)."""

    def listener_latency(self, kind: ListenerKind, seconds: float, now: float) -> None: ...


_Callback = Callable[[frozenset[TopicPartition]], object]
_METHOD_NAMES = tuple(kind.method_name for kind in ListenerKind)


class ListenerInvoker:
    """Calls a listener's callbacks by the KIP-429 rules and keeps the first error.

    * REVOKED and LOST are skipped for an empty set; ASSIGNED is always called.
    * LOST falls back to ``on_partitions_revoked`` when the listener has no
      ``on_partitions_lost`` (or inherits :class:`RebalanceListener`'s default).
    * Each call is timed with ``now_fn`` (default ``time.monotonic``) and the latency is
      reported to ``metrics`` when the callback returns, as Java records its callback
      sensors: a call that raises is not counted in the latency metrics.
    * An ``Exception`` raised by a callback is logged and remembered if it is the first
      since the last :meth:`take_error`; later callbacks still run. ``BaseException``\\ s
      that are not ``Exception`` (``KeyboardInterrupt``, ``SystemExit``) propagate.

    ``listener=None`` behaves as a listener whose callbacks do nothing (Java installs a
    no-op listener the same way), so latency metrics are still recorded.

    Not thread-safe: use it from the ``poll()`` thread only.
    """

    def __init__(
        self,
        listener: RebalanceListenerLike | RebalanceListener | None,
        metrics: ListenerMetricsSink | None = None,
        *,
        now_fn: Callable[[], float] = time.monotonic,
    ) -> None:
        """Resolve the listener's callbacks once.

        Raises :class:`~coopconsumer.ConfigurationError` if ``listener`` is not ``None``
        and has none of ``on_partitions_revoked``/``on_partitions_assigned``/
        ``on_partitions_lost`` as a callable attribute (a plain function, say), or if
        one of them is not callable or is an ``async def``.
        """
        self._listener = listener
        self._metrics = metrics
        self._now_fn = now_fn
        self._error: Exception | None = None
        self._callbacks = self._resolve(listener)

    @staticmethod
    def _resolve(
        listener: object | None,
    ) -> dict[ListenerKind, tuple[str, _Callback | None]]:
        if listener is None:
            listener = RebalanceListener()
        found = {name: getattr(listener, name, None) for name in _METHOD_NAMES}
        if not any(callable(method) for method in found.values()):
            raise ConfigurationError(
                f"rebalance listener {listener!r} has none of the methods "
                f"{', '.join(_METHOD_NAMES)}; subclass coopconsumer.RebalanceListener"
            )
        for name, method in found.items():
            if method is not None and not callable(method):
                raise ConfigurationError(
                    f"rebalance listener {listener!r}: attribute {name!r} is not callable"
                )
            if inspect.iscoroutinefunction(method):
                # Called from poll(), it would only build a coroutine that never runs.
                raise ConfigurationError(
                    f"rebalance listener {listener!r}: {name} is a coroutine function; "
                    f"callbacks run synchronously on the poll() thread and must be plain "
                    f"methods"
                )
        callbacks: dict[ListenerKind, tuple[str, _Callback | None]] = {}
        for kind in ListenerKind:
            name = kind.method_name
            method = found[name]
            if kind is ListenerKind.LOST and method is None:
                # KIP-429: onPartitionsLost defaults to onPartitionsRevoked.
                name = ListenerKind.REVOKED.method_name
                method = found[name]
            callbacks[kind] = (name, method)
        return callbacks

    @property
    def listener(self) -> RebalanceListenerLike | RebalanceListener | None:
        """The listener given at construction (``None`` if none)."""
        return self._listener

    @property
    def has_error(self) -> bool:
        """Whether a callback raised since the last :meth:`take_error`."""
        return self._error is not None

    def invoke(
        self,
        kind: ListenerKind | KindLike,
        partitions: Iterable[TopicPartition],
        now_fn: Callable[[], float] | None = None,
    ) -> None:
        """Run the ``kind`` callback for ``partitions``; never raises an ``Exception``.

        ``kind`` may be a member of another enum with the same values (the
        coordinator's). ``now_fn`` overrides the constructor's clock for this call.
        """
        kind = ListenerKind.of(kind)
        parts = frozenset(partitions)
        if not parts and kind is not ListenerKind.ASSIGNED:
            # KIP-429: revoked/lost are only called for a non-empty set.
            return
        name, method = self._callbacks[kind]
        clock = self._now_fn if now_fn is None else now_fn
        if _log.isEnabledFor(logging.INFO):  # describing a million partitions is not free
            _log.info("Calling %s with %d partition(s): %s", name, len(parts), _describe(parts))
        start = clock()
        try:
            if method is not None:
                method(parts)
        except Exception as exc:
            _log.error("Rebalance listener %s raised; continuing the rebalance", name, exc_info=exc)
            if self._error is None:
                self._error = exc
            return
        # Java's ConsumerRebalanceListenerInvoker records the sensor right after the
        # callback returns, inside its try: a raising call leaves the latency untouched.
        end = clock()
        if self._metrics is not None:
            self._metrics.listener_latency(kind, max(0.0, end - start), end)

    def take_error(self) -> Exception | None:
        """Return the first exception raised since the last call, and forget it."""
        error, self._error = self._error, None
        return error


def _describe(partitions: frozenset[TopicPartition]) -> str:
    # The first 20 in order without sorting the whole set (O(n), not O(n log n)).
    shown = heapq.nsmallest(20, partitions)
    text = ", ".join(str(tp) for tp in shown)
    if len(partitions) > len(shown):
        text += f", ... ({len(partitions) - len(shown)} more)"
    return text or "(none)"
