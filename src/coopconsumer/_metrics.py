"""The consumer's metrics: a small registry with the semantics of Kafka's Java metrics.

``MetricsRegistry`` holds sensors (Java's ``Sensor``: one ``record`` feeds several
stats) and gauges; ``CoordinatorMetrics`` registers the ``consumer-coordinator-metrics``
group and turns the group member's observations (rebalance started, JoinGroup answered,
...) into recordings. The state machine emits observations; it never owns counters
(docs/architecture.md).

Time is always an argument (``now``, monotonic float seconds); nothing here reads a
clock. The driver thread and the ``poll()`` thread both record, so every recording and
snapshot holds one lock. Imports nothing that does I/O; ``threading`` only for the lock.
"""

from __future__ import annotations

import abc
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import TypeVar, overload

import attrs

from ._listener import KindLike, ListenerKind

__all__ = [
    "COORDINATOR_METRIC_GROUP",
    "FETCH_MANAGER_METRIC_GROUP",
    "Avg",
    "CoordinatorMetrics",
    "CumulativeCount",
    "CumulativeSum",
    "FetchMetrics",
    "Max",
    "MetricConfig",
    "MetricsDict",
    "MetricsRegistry",
    "MetricsSnapshot",
    "Min",
    "Rate",
    "Sensor",
    "WindowedCount",
    "WindowedSum",
    "max_reading",
]

#: Java's group name for the classic consumer's group-membership metrics.
COORDINATOR_METRIC_GROUP = "consumer-coordinator-metrics"
#: Java's group name for the consumer's fetch metrics.
FETCH_MANAGER_METRIC_GROUP = "consumer-fetch-manager-metrics"

_HOUR_S = 3600.0
_MIN_WINDOW_S = 0.001


@attrs.frozen(kw_only=True)
class MetricConfig:
    """How windowed stats sample, as Java's ``MetricConfig``.

    Java consumers use ``metrics.num.samples=2`` and ``metrics.sample.window.ms=30000``:
    windowed stats (rates, avg, max, min) cover the current 30 s sample and the previous
    one.
    """

    samples: int = attrs.field(default=2, validator=attrs.validators.gt(0))
    time_window_s: float = attrs.field(default=30.0, validator=attrs.validators.gt(0.0))


class Stat(abc.ABC):
    """Something a sensor records values into and a metric reads one number from."""

    @abc.abstractmethod
    def record(self, config: MetricConfig, value: float, now: float) -> None:
        """Take one observation ``value`` made at ``now``."""

    @abc.abstractmethod
    def measure(self, config: MetricConfig, now: float) -> float:
        """The stat's current value as seen at ``now``."""


class _Sample:
    __slots__ = ("event_count", "initial_value", "last_event", "start", "value")

    def __init__(self, initial_value: float, now: float) -> None:
        self.initial_value = initial_value
        self.value = initial_value
        self.event_count = 0
        self.start = now
        self.last_event = now

    def reset(self, now: float) -> None:
        self.value = self.initial_value
        self.event_count = 0
        self.start = now
        self.last_event = now

    def is_complete(self, now: float, config: MetricConfig) -> bool:
        # Java also closes a sample after ``eventWindow`` events; consumers leave that
        # at Long.MAX_VALUE, so only time closes a sample here.
        return now - self.start >= config.time_window_s


class SampledStat(Stat):
    """A stat kept over ``config.samples`` time windows, as Java's ``SampledStat``.

    One extra sample is kept so the window being filled never erases the oldest
    complete one. A sample whose last event is ``samples * time_window_s`` old or more is
    reset before measuring, so old observations age out.
    """

    def __init__(self, initial_value: float) -> None:
        self._initial_value = initial_value
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, config: MetricConfig, value: float, now: float) -> None:
        sample = self._current_sample(now)
        if sample.is_complete(now, config):
            sample = self._advance(config, now)
        self._update(sample, value)
        sample.event_count += 1
        sample.last_event = now

    def measure(self, config: MetricConfig, now: float) -> float:
        self.purge_obsolete_samples(config, now)
        return self._combine(self._samples)

    def _current_sample(self, now: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(self._initial_value, now))
        return self._samples[self._current]

    def _advance(self, config: MetricConfig, now: float) -> _Sample:
        self._current = (self._current + 1) % (config.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(self._initial_value, now)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now)
        return sample

    def oldest_start(self, now: float) -> float:
        """Start time of the oldest sample kept (creating the first one if needed)."""
        self._current_sample(now)
        return min(sample.start for sample in self._samples)

    def purge_obsolete_samples(self, config: MetricConfig, now: float) -> None:
        """Reset samples with no event inside the monitored window."""
        expire_age = config.samples * config.time_window_s
        for sample in self._samples:
            if now - sample.last_event >= expire_age:
                sample.reset(now)

    @abc.abstractmethod
    def _update(self, sample: _Sample, value: float) -> None: ...

    @abc.abstractmethod
    def _combine(self, samples: list[_Sample]) -> float: ...


class Avg(SampledStat):
    """Mean of the values in the window; NaN when the window has none (Java)."""

    def __init__(self) -> None:
        super().__init__(0.0)

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def _combine(self, samples: list[_Sample]) -> float:
        count = sum(s.event_count for s in samples)
        return math.nan if count == 0 else sum(s.value for s in samples) / count


class Max(SampledStat):
    """Largest value in the window; NaN when the window has none (Java)."""

    def __init__(self) -> None:
        super().__init__(-math.inf)

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value = max(sample.value, value)

    def _combine(self, samples: list[_Sample]) -> float:
        seen = [s.value for s in samples if s.event_count]
        return max(seen) if seen else math.nan


class Min(SampledStat):
    """Smallest value in the window; NaN when the window has none (Java)."""

    def __init__(self) -> None:
        super().__init__(math.inf)

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value = min(sample.value, value)

    def _combine(self, samples: list[_Sample]) -> float:
        seen = [s.value for s in samples if s.event_count]
        return min(seen) if seen else math.nan


class WindowedSum(SampledStat):
    """Sum of the values in the window."""

    def __init__(self) -> None:
        super().__init__(0.0)

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def _combine(self, samples: list[_Sample]) -> float:
        return float(sum(s.value for s in samples))


class WindowedCount(WindowedSum):
    """Number of observations in the window, whatever their values."""

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += 1.0


class Rate(Stat):
    """Windowed total per time unit, as Java's ``Rate``.

    The elapsed time is measured from the start of the oldest kept sample; while fewer
    than ``samples - 1`` full windows have elapsed (a fresh stat, or one idle long enough
    for every sample to be purged) the missing windows count as empty ones. With two
    30 s samples, three events recorded and read at the same instant give 3 / 30 s =
    0.1 per second, as in Java's ``ConsumerCoordinatorTest.testMetrics``.
    """

    def __init__(self, stat: SampledStat | None = None, *, unit_s: float = 1.0) -> None:
        self._stat = WindowedSum() if stat is None else stat
        self._unit_s = unit_s

    def record(self, config: MetricConfig, value: float, now: float) -> None:
        self._stat.record(config, value, now)

    def measure(self, config: MetricConfig, now: float) -> float:
        value = self._stat.measure(config, now)
        return value / (self.window_size(config, now) / self._unit_s)

    def window_size(self, config: MetricConfig, now: float) -> float:
        """Seconds the rate is averaged over at ``now``."""
        self._stat.purge_obsolete_samples(config, now)
        elapsed = now - self._stat.oldest_start(now)
        full_windows = int(elapsed // config.time_window_s)
        min_full_windows = config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * config.time_window_s
        # Java's floor of 1 ms: with one sample, a rate read at the instant its window
        # starts would otherwise divide by zero.
        return max(elapsed, _MIN_WINDOW_S)


class CumulativeSum(Stat):
    """Sum of every value ever recorded."""

    def __init__(self) -> None:
        self._total = 0.0

    def record(self, config: MetricConfig, value: float, now: float) -> None:
        self._total += value

    def measure(self, config: MetricConfig, now: float) -> float:
        return self._total


class CumulativeCount(Stat):
    """Number of recordings ever made."""

    def __init__(self) -> None:
        self._count = 0

    def record(self, config: MetricConfig, value: float, now: float) -> None:
        self._count += 1

    def measure(self, config: MetricConfig, now: float) -> float:
        return float(self._count)


class _Gauge(Stat):
    def __init__(self, read: Callable[[float], float]) -> None:
        self._read = read

    def record(self, config: MetricConfig, value: float, now: float) -> None:
        raise TypeError("a gauge is read, not recorded")

    def measure(self, config: MetricConfig, now: float) -> float:
        return float(self._read(now))


@attrs.frozen
class _Metric:
    name: str
    description: str
    stat: Stat


class Sensor:
    """A named input feeding several stats, as Java's ``Sensor``."""

    def __init__(self, name: str, registry: MetricsRegistry) -> None:
        self.name = name
        self._registry = registry
        self._stats: list[Stat] = []

    def add(self, metric_name: str, description: str, stat: Stat) -> Sensor:
        """Expose ``stat`` as metric ``metric_name`` and feed it from this sensor."""
        self._registry._register(metric_name, description, stat)
        self._stats.append(stat)
        return self

    def add_meter(self, base_name: str, what: str) -> Sensor:
        """Add Java's meter pair: ``<base>-rate`` (per second) and ``<base>-total``."""
        self.add(f"{base_name}-rate", f"Number of {what} per second", Rate(WindowedCount()))
        return self.add(f"{base_name}-total", f"Total number of {what}", CumulativeCount())

    def record(self, value: float, now: float) -> None:
        """Feed ``value``, observed at ``now``, to every stat of the sensor."""
        with self._registry.lock:
            config = self._registry.config
            for stat in self._stats:
                stat.record(config, value, now)


_T = TypeVar("_T")


class MetricsDict(dict[str, float]):
    """A ``dict`` of metric name -> value keyed by Java's code names, what
    ``Consumer.metrics()`` returns.

    Lookups (``d[name]``, ``name in d``, ``d.get(name)``) also accept the documented
    aliases (KIP-429's ``partitions-revoked-latency-avg`` for the code's
    ``partition-revoked-latency-avg``); iteration, ``len`` and equality see the code
    names only, so exporters never report a value twice.
    """

    __slots__ = ("_aliases",)

    def __init__(self, values: Mapping[str, float], aliases: Mapping[str, str]) -> None:
        super().__init__(values)
        self._aliases = MappingProxyType(dict(aliases))

    def __missing__(self, key: str) -> float:
        name = self._aliases.get(key)
        if name is None or not dict.__contains__(self, name):
            raise KeyError(key)
        return dict.__getitem__(self, name)

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        return isinstance(key, str) and dict.__contains__(self, self._aliases.get(key, key))

    @overload
    def get(self, key: str, default: None = None, /) -> float | None: ...
    @overload
    def get(self, key: str, default: float, /) -> float: ...
    @overload
    def get(self, key: str, default: _T, /) -> float | _T: ...
    def get(self, key: str, default: object = None, /) -> object:
        """``d[key]`` (aliases resolved), or ``default`` when there is no such metric."""
        return self[key] if key in self else default  # noqa: SIM401 - this is get()


class MetricsSnapshot(Mapping[str, float]):
    """A frozen view of every metric at one instant: ``{name: value}``.

    Keys are the plain metric names Java's code uses (``"rebalance-latency-avg"``), all
    in the group :attr:`group`; Java's JMX/``metrics()`` spelling of a name is
    ``f"{snapshot.group}:{name}"``. Lookups also accept the documented aliases (KIP-429
    spells the callback latencies ``partitions-revoked-latency-avg``, the code
    ``partition-revoked-latency-avg``), but iteration lists the code names only.
    Windowed stats with nothing recorded in the window read NaN, as in Java.
    """

    __slots__ = ("_aliases", "_descriptions", "_values", "group", "taken_at")

    def __init__(
        self,
        *,
        group: str,
        taken_at: float,
        values: Mapping[str, float],
        aliases: Mapping[str, str],
        descriptions: Mapping[str, str],
    ) -> None:
        #: The metric group every name belongs to.
        self.group = group
        #: The ``now`` the snapshot was taken at (monotonic seconds).
        self.taken_at = taken_at
        self._values = MappingProxyType(dict(values))
        self._aliases = MappingProxyType(dict(aliases))
        self._descriptions = MappingProxyType(dict(descriptions))

    def __getitem__(self, name: str) -> float:
        return self._values[self._aliases.get(name, name)]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._aliases.get(name, name) in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"MetricsSnapshot(group={self.group!r}, taken_at={self.taken_at!r}, {dict(self)})"

    def to_dict(self) -> MetricsDict:
        """The values as a plain ``dict`` (code names) that still resolves aliases."""
        return MetricsDict(self._values, self._aliases)

    def description(self, name: str) -> str:
        """What metric ``name`` (or alias) measures."""
        return self._descriptions[self._aliases.get(name, name)]

    @property
    def aliases(self) -> Mapping[str, str]:
        """Alias -> code name."""
        return self._aliases


class MetricsRegistry:
    """Sensors, gauges and aliases of one metric group; thread-safe."""

    def __init__(
        self, config: MetricConfig | None = None, *, group: str = COORDINATOR_METRIC_GROUP
    ) -> None:
        self.config = MetricConfig() if config is None else config
        self.group = group
        #: Held by every recording and snapshot; re-entrant so gauges may read state
        #: that is written under it.
        self.lock = threading.RLock()
        self._metrics: dict[str, _Metric] = {}
        self._sensors: dict[str, Sensor] = {}
        self._aliases: dict[str, str] = {}

    def sensor(self, name: str) -> Sensor:
        """The sensor called ``name``, created on first use."""
        with self.lock:
            sensor = self._sensors.get(name)
            if sensor is None:
                sensor = self._sensors[name] = Sensor(name, self)
            return sensor

    def _register(self, name: str, description: str, stat: Stat) -> None:
        with self.lock:
            if name in self._metrics or name in self._aliases:
                raise ValueError(f"metric {name!r} is already registered")
            self._metrics[name] = _Metric(name, description, stat)

    def add_gauge(self, name: str, description: str, read: Callable[[float], float]) -> None:
        """Expose ``read(now)`` as metric ``name`` (called under the registry lock)."""
        self._register(name, description, _Gauge(read))

    def add_alias(self, alias: str, name: str) -> None:
        """Let ``alias`` look up metric ``name``; snapshots list ``name`` only."""
        with self.lock:
            if name not in self._metrics:
                raise KeyError(f"no metric {name!r} to alias")
            if alias in self._metrics or alias in self._aliases:
                raise ValueError(f"{alias!r} is already a metric name or alias")
            self._aliases[alias] = name

    def resolve(self, name: str) -> str:
        """The code name for ``name`` or one of its aliases; ``KeyError`` if unknown."""
        with self.lock:
            resolved = self._aliases.get(name, name)
            if resolved not in self._metrics:
                raise KeyError(f"unknown metric {name!r} in group {self.group!r}")
            return resolved

    def names(self) -> tuple[str, ...]:
        """Code names of every metric, in registration order."""
        with self.lock:
            return tuple(self._metrics)

    def measure(self, name: str, now: float) -> float:
        """The value of metric ``name`` (or alias) at ``now``."""
        with self.lock:
            return self._metrics[self.resolve(name)].stat.measure(self.config, now)

    def snapshot(self, now: float) -> MetricsSnapshot:
        """Every metric's value at ``now``, measured under one lock."""
        with self.lock:
            values = {m.name: m.stat.measure(self.config, now) for m in self._metrics.values()}
            return MetricsSnapshot(
                group=self.group,
                taken_at=now,
                values=values,
                aliases=self._aliases,
                descriptions={m.name: m.description for m in self._metrics.values()},
            )


_INSTANT_OBSERVATIONS = frozenset({"rebalance_started", "rebalance_failed", "heartbeat_sent"})
#: Observations that take a latency or measure it themselves.
_OPTIONALLY_TIMED_OBSERVATIONS = frozenset({"rebalance_completed"})
_TIMED_OBSERVATIONS = frozenset(
    {"join_completed", "sync_completed", "heartbeat_completed", "commit_completed"}
)

_LISTENER_SENSOR = {
    ListenerKind.REVOKED: "partition-revoked-latency",
    ListenerKind.ASSIGNED: "partition-assigned-latency",
    ListenerKind.LOST: "partition-lost-latency",
}


def max_reading(a: float, b: float) -> float:
    """The larger of two readings of a metric, NaN meaning "no sample" (what a windowed
    ``*-max`` reads when its window is empty): NaN only if both are. Callers that want
    a run's largest rebalance latency sample the windowed ``rebalance-latency-max``."""
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return max(a, b)


def _ms(seconds: float) -> float:
    if not seconds >= 0:  # also rejects NaN
        raise ValueError(f"latency must be a non-negative number of seconds, got {seconds!r}")
    return seconds * 1000.0


class CoordinatorMetrics:
    """The ``consumer-coordinator-metrics`` group, fed by the group member's observations.

    Names, stats and units follow Java's classic ``AbstractCoordinator`` and
    ``ConsumerCoordinator``: latencies in milliseconds; ``*-rate`` per second and
    ``*-rate-per-hour`` per hour over the sampled window; ``*-total`` since creation;
    ``*-avg``/``*-max`` over the sampled window (NaN when empty);
    ``last-*-seconds-ago`` in whole seconds, -1 before the first event.

    What Java counts as a rebalance, and what the member should report:

    * :meth:`rebalance_started` when a JoinGroup is sent. A rebalance that failed and is
      retried keeps its first start time (Java does not move it), so the latency of a
      successful rebalance spans its failed attempts.
    * :meth:`rebalance_failed` for each JoinGroup or SyncGroup attempt that fails
      (error code, disconnect, or the generation reset while waiting).
    * :meth:`rebalance_completed` when SyncGroup succeeds. ``rebalance-total`` and
      ``rebalance-rate-per-hour`` count successful rebalances only. Java records at the
      SyncGroup response, before ``on_partitions_assigned`` runs; KIP-429's text says
      the latency includes the callbacks. Calling this after the assignment callbacks
      gives the KIP's definition; the metric only measures from start to this call,
      unless the caller passes its own measurement (the group member does: it starts
      a fresh rebalance after an abandoned one, which these methods cannot see).

    Thread-safe: every method takes the registry lock.
    """

    def __init__(self, registry: MetricsRegistry | None = None) -> None:
        self.registry = MetricsRegistry() if registry is None else registry
        reg = self.registry
        self._rebalance_start: float | None = None
        self._last_rebalance_end: float | None = None
        self._last_heartbeat_sent: float | None = None
        self._assigned_partitions = 0
        self._missing_topics = 0

        self._heartbeat = (
            reg.sensor("heartbeat-latency")
            .add(
                "heartbeat-response-time-max",
                "Longest wait for a heartbeat response in the window (ms)",
                Max(),
            )
            .add_meter("heartbeat", "heartbeats")
        )
        self._join = (
            reg.sensor("join-latency")
            .add("join-time-avg", "Mean JoinGroup round trip in the window (ms)", Avg())
            .add("join-time-max", "Longest JoinGroup round trip in the window (ms)", Max())
            .add_meter("join", "group joins")
        )
        self._sync = (
            reg.sensor("sync-latency")
            .add("sync-time-avg", "Mean SyncGroup round trip in the window (ms)", Avg())
            .add("sync-time-max", "Longest SyncGroup round trip in the window (ms)", Max())
            .add_meter("sync", "group syncs")
        )
        self._rebalance = (
            reg.sensor("rebalance-latency")
            .add(
                "rebalance-latency-avg",
                "Mean duration of successful rebalances in the window, failed retries "
                "included (ms)",
                Avg(),
            )
            .add(
                "rebalance-latency-max",
                "Longest successful rebalance in the window, failed retries included (ms)",
                Max(),
            )
            .add(
                "rebalance-latency-total",
                "Milliseconds spent in successful rebalances since the consumer started",
                CumulativeSum(),
            )
            .add("rebalance-total", "Successful rebalances since start", CumulativeCount())
            .add(
                "rebalance-rate-per-hour",
                "Successful rebalances per hour over the window",
                Rate(WindowedCount(), unit_s=_HOUR_S),
            )
        )
        self._failed_rebalance = (
            reg.sensor("failed-rebalance")
            .add(
                "failed-rebalance-total",
                "Failed JoinGroup/SyncGroup attempts since start",
                CumulativeCount(),
            )
            .add(
                "failed-rebalance-rate-per-hour",
                "Failed JoinGroup/SyncGroup attempts per hour over the window",
                Rate(WindowedCount(), unit_s=_HOUR_S),
            )
        )
        reg.add_gauge(
            "last-rebalance-seconds-ago",
            "Whole seconds since the last successful rebalance ended; -1 before the first",
            self._seconds_since_rebalance,
        )
        reg.add_gauge(
            "last-heartbeat-seconds-ago",
            "Whole seconds since the last heartbeat was sent; -1 before the first",
            self._seconds_since_heartbeat,
        )
        self._commit = (
            reg.sensor("commit-latency")
            .add("commit-latency-avg", "Mean OffsetCommit round trip in the window (ms)", Avg())
            .add("commit-latency-max", "Longest OffsetCommit round trip in the window (ms)", Max())
            .add_meter("commit", "commit calls")
        )
        self._listener: dict[ListenerKind, Sensor] = {}
        for kind, sensor_name in _LISTENER_SENSOR.items():
            method = kind.method_name
            sensor = (
                reg.sensor(sensor_name)
                .add(f"{sensor_name}-avg", f"Mean time in {method} in the window (ms)", Avg())
                .add(f"{sensor_name}-max", f"Longest {method} call in the window (ms)", Max())
            )
            self._listener[kind] = sensor
            # KIP-429 and Kafka's docs say "partitions-...", Java's code "partition-...".
            plural = sensor_name.replace("partition-", "partitions-", 1)
            reg.add_alias(f"{plural}-avg", f"{sensor_name}-avg")
            reg.add_alias(f"{plural}-max", f"{sensor_name}-max")
        reg.add_gauge(
            "assigned-partitions",
            "Partitions currently assigned to this consumer",
            lambda now: float(self._assigned_partitions),
        )
        # Not a Java metric: issue 35's count of the topics a consumer waits for.
        reg.add_gauge(
            "missing-topics",
            "Topics subscribed to by name or assigned that are not found in the cluster",
            lambda now: float(self._missing_topics),
        )

    # -- gauges ---------------------------------------------------------------------

    def _seconds_since_rebalance(self, now: float) -> float:
        if self._last_rebalance_end is None:
            return -1.0
        # Java converts with TimeUnit.SECONDS.convert, which truncates.
        return float(int(now - self._last_rebalance_end))

    def _seconds_since_heartbeat(self, now: float) -> float:
        if self._last_heartbeat_sent is None:
            return -1.0
        return float(int(now - self._last_heartbeat_sent))

    # -- observations ---------------------------------------------------------------

    @property
    def rebalance_in_progress(self) -> bool:
        """Whether a rebalance was started and has not completed yet."""
        with self.registry.lock:
            return self._rebalance_start is not None

    def rebalance_started(self, now: float) -> None:
        """A JoinGroup is being sent. Keeps the first start while a rebalance is open."""
        with self.registry.lock:
            if self._rebalance_start is None:
                self._rebalance_start = now

    def rebalance_completed(self, now: float, latency_s: float | None = None) -> None:
        """The rebalance succeeded: record its latency.

        ``latency_s`` is the caller's own measurement of this rebalance (the group
        member times each rebalance itself, and knows when one was abandoned, for
        example by an unsubscribe, so that the next starts afresh); without it the
        latency is measured from the first ``rebalance_started`` still open.

        Raises ``ValueError`` (like every other mismatched observation, which the
        driver logs and drops) if no latency is given and no rebalance was started,
        or if the latency is negative or NaN; nothing is recorded then.
        """
        with self.registry.lock:
            if latency_s is None:
                if self._rebalance_start is None:
                    raise ValueError("rebalance_completed() without rebalance_started()")
                latency_s = max(0.0, now - self._rebalance_start)
            latency_ms = _ms(latency_s)
            self._rebalance.record(latency_ms, now)
            self._last_rebalance_end = now
            self._rebalance_start = None

    def rebalance_failed(self, now: float) -> None:
        """A JoinGroup/SyncGroup attempt failed; the rebalance stays open for a retry.

        Ignored when no rebalance is open, as Java's ``maybeRecordRebalanceFailed``.
        """
        with self.registry.lock:
            if self._rebalance_start is not None:
                self._failed_rebalance.record(1.0, now)

    def join_completed(self, latency_s: float, now: float) -> None:
        """A successful JoinGroup response arrived ``latency_s`` after sending.

        Java records ``join-latency`` only for error code NONE (JoinGroupResponseHandler).
        """
        self._join.record(_ms(latency_s), now)

    def sync_completed(self, latency_s: float, now: float) -> None:
        """A successful SyncGroup response arrived ``latency_s`` after sending.

        Java records ``sync-latency`` only for error code NONE (SyncGroupResponseHandler).
        """
        self._sync.record(_ms(latency_s), now)

    def heartbeat_sent(self, now: float) -> None:
        """A Heartbeat request was sent (drives ``last-heartbeat-seconds-ago``)."""
        with self.registry.lock:
            self._last_heartbeat_sent = now

    def heartbeat_completed(self, latency_s: float, now: float) -> None:
        """A Heartbeat response arrived ``latency_s`` after sending.

        Java records ``heartbeat-latency`` for every response, whatever its error code.
        """
        self._heartbeat.record(_ms(latency_s), now)

    def commit_completed(self, latency_s: float, now: float) -> None:
        """An OffsetCommit response arrived ``latency_s`` after sending.

        Java records ``commit-latency`` for every response, whatever its error codes.
        """
        self._commit.record(_ms(latency_s), now)

    def listener_latency(self, kind: ListenerKind | KindLike, seconds: float, now: float) -> None:
        """A rebalance listener callback of ``kind`` took ``seconds``."""
        self._listener[ListenerKind.of(kind)].record(_ms(seconds), now)

    def observe(self, event: str | KindLike, now: float, latency_s: float | None = None) -> None:
        """Dispatch an observation by name, so a driver can forward them without branching.

        ``event`` is one of ``"rebalance_started"``, ``"rebalance_failed"``,
        ``"heartbeat_sent"`` (no latency), ``"rebalance_completed"`` (latency
        optional, see :meth:`rebalance_completed`) or ``"join_completed"``,
        ``"sync_completed"``, ``"heartbeat_completed"``, ``"commit_completed"``
        (``latency_s`` required) -- the method names, which are
        also the values of the coordinator's ``Observation`` enum, whose members are
        accepted as is. ``ValueError`` for an unknown name or a missing latency.
        """
        name = event if isinstance(event, str) else event.value
        if name in _INSTANT_OBSERVATIONS:
            if latency_s is not None:
                raise ValueError(f"observation {name!r} takes no latency")
            getattr(self, name)(now)
        elif name in _OPTIONALLY_TIMED_OBSERVATIONS:
            getattr(self, name)(now, latency_s)
        elif name in _TIMED_OBSERVATIONS:
            if latency_s is None:
                raise ValueError(f"observation {name!r} needs latency_s")
            getattr(self, name)(latency_s, now)
        else:
            known = sorted(
                _INSTANT_OBSERVATIONS | _OPTIONALLY_TIMED_OBSERVATIONS | _TIMED_OBSERVATIONS
            )
            raise ValueError(f"unknown observation {name!r}; known: {', '.join(known)}")

    def set_assigned_partitions(self, count: int) -> None:
        """The number of partitions now assigned (the ``assigned-partitions`` gauge)."""
        if count < 0:
            raise ValueError(f"assigned partition count must be >= 0, got {count}")
        with self.registry.lock:
            self._assigned_partitions = count

    def set_missing_topics(self, count: int) -> None:
        """The number of topics this consumer needs that the cluster does not have (the
        ``missing-topics`` gauge; issue 35)."""
        if count < 0:
            raise ValueError(f"missing topic count must be >= 0, got {count}")
        with self.registry.lock:
            self._missing_topics = count

    def snapshot(self, now: float) -> MetricsSnapshot:
        """Every metric of the group at ``now``."""
        return self.registry.snapshot(now)


class FetchMetrics:
    """The ``consumer-fetch-manager-metrics`` group, in the part a librdkafka fetcher can
    feed without per-record work (Java's ``FetchMetricsManager`` names):

    * ``records-consumed-rate`` / ``records-consumed-total``: records returned by
      ``poll()``/``consume()``, recorded once per returned batch (Java records per fetch).
    * ``records-lag-max``: the largest lag (high watermark minus position) over the
      assigned partitions whose position and high watermark librdkafka knows from its
      last fetch, read when the snapshot is taken; NaN when none is known. Java keeps the
      windowed maximum of the lags seen at each fetch; a reading at snapshot time is what
      a fetcher that runs outside Python can offer, and it is exact at that instant.

    Per-partition lag (Java's ``records-lag`` tagged with topic and partition) is
    ``Consumer.records_lag()``. ``lags`` returns the known lags; it is called under the
    registry lock. Thread-safe.
    """

    def __init__(
        self, lags: Callable[[], Iterable[int]], registry: MetricsRegistry | None = None
    ) -> None:
        self.registry = (
            MetricsRegistry(group=FETCH_MANAGER_METRIC_GROUP) if registry is None else registry
        )
        self._lags = lags
        self._consumed = self.registry.sensor("records-consumed")
        self._consumed.add(
            "records-consumed-rate",
            "The average number of records consumed per second",
            Rate(WindowedSum()),
        )
        self._consumed.add(
            "records-consumed-total", "The total number of records consumed", CumulativeSum()
        )
        self.registry.add_gauge(
            "records-lag-max",
            "The largest lag in records of any assigned partition, as of librdkafka's last "
            "fetch (NaN when no lag is known)",
            self._lag_max,
        )

    def records_consumed(self, count: int, now: float) -> None:
        """``count`` records were handed to the application at ``now``."""
        self._consumed.record(float(count), now)

    def _lag_max(self, now: float) -> float:
        return float(max(self._lags(), default=math.nan))

    def snapshot(self, now: float) -> MetricsSnapshot:
        """Every metric of the group at ``now``."""
        return self.registry.snapshot(now)
