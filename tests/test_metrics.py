"""Metrics registry and CoordinatorMetrics: Java's names and semantics, explicit ``now``."""

from __future__ import annotations

import enum
import math
import re
import threading
from typing import Any, cast

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coopconsumer._listener import ListenerInvoker, ListenerKind, RebalanceListener
from coopconsumer._metrics import (
    COORDINATOR_METRIC_GROUP,
    Avg,
    CoordinatorMetrics,
    CumulativeCount,
    CumulativeSum,
    FetchMetrics,
    Max,
    MetricConfig,
    MetricsRegistry,
    MetricsSnapshot,
    Min,
    Rate,
    WindowedCount,
    WindowedSum,
    max_reading,
)
from coopconsumer._types import TopicPartition

CODE_NAMES = {
    "heartbeat-response-time-max",
    "heartbeat-rate",
    "heartbeat-total",
    "join-time-avg",
    "join-time-max",
    "join-rate",
    "join-total",
    "sync-time-avg",
    "sync-time-max",
    "sync-rate",
    "sync-total",
    "rebalance-latency-avg",
    "rebalance-latency-max",
    "rebalance-latency-total",
    "rebalance-total",
    "rebalance-rate-per-hour",
    "failed-rebalance-total",
    "failed-rebalance-rate-per-hour",
    "last-rebalance-seconds-ago",
    "last-heartbeat-seconds-ago",
    "commit-latency-avg",
    "commit-latency-max",
    "commit-rate",
    "commit-total",
    "partition-revoked-latency-avg",
    "partition-revoked-latency-max",
    "partition-assigned-latency-avg",
    "partition-assigned-latency-max",
    "partition-lost-latency-avg",
    "partition-lost-latency-max",
    "assigned-partitions",
    "missing-topics",
}

KIP_NAMES = {
    "partitions-revoked-latency-avg": "partition-revoked-latency-avg",
    "partitions-revoked-latency-max": "partition-revoked-latency-max",
    "partitions-assigned-latency-avg": "partition-assigned-latency-avg",
    "partitions-assigned-latency-max": "partition-assigned-latency-max",
    "partitions-lost-latency-avg": "partition-lost-latency-avg",
    "partitions-lost-latency-max": "partition-lost-latency-max",
}


def test_snapshot_lists_exactly_the_code_names() -> None:
    snap = CoordinatorMetrics().snapshot(0.0)
    assert set(snap) == CODE_NAMES
    assert len(snap) == len(CODE_NAMES)
    assert snap.group == COORDINATOR_METRIC_GROUP == "consumer-coordinator-metrics"
    assert snap.taken_at == 0.0
    assert all(isinstance(value, float) for value in snap.values())


def test_kip_documented_names_are_aliases() -> None:
    metrics = CoordinatorMetrics()
    metrics.listener_latency(ListenerKind.REVOKED, 0.004, 1.0)
    metrics.listener_latency(ListenerKind.ASSIGNED, 0.002, 1.0)
    metrics.listener_latency(ListenerKind.LOST, 0.008, 1.0)
    snap = metrics.snapshot(1.0)
    for alias, name in KIP_NAMES.items():
        assert alias in snap
        assert alias not in list(snap)
        assert snap[alias] == snap[name]
        assert metrics.registry.resolve(alias) == name
        assert metrics.registry.measure(alias, 1.0) == snap[name]
        assert snap.description(alias) == snap.description(name)
    assert dict(snap.aliases) == KIP_NAMES
    assert snap["partitions-revoked-latency-max"] == pytest.approx(4.0)
    assert snap["partitions-assigned-latency-avg"] == pytest.approx(2.0)
    assert snap["partition-lost-latency-avg"] == pytest.approx(8.0)


def test_unknown_name_is_a_key_error() -> None:
    metrics = CoordinatorMetrics()
    with pytest.raises(KeyError, match="unknown metric 'rebalance-latency'"):
        metrics.registry.resolve("rebalance-latency")
    snap = metrics.snapshot(0.0)
    assert "nope" not in snap
    not_a_name: object = 3
    assert not_a_name not in snap
    with pytest.raises(KeyError):
        snap["nope"]


def test_initial_values_match_java() -> None:
    snap = CoordinatorMetrics().snapshot(123.0)
    assert snap["last-rebalance-seconds-ago"] == -1.0
    assert snap["last-heartbeat-seconds-ago"] == -1.0
    assert snap["rebalance-total"] == 0.0
    assert snap["rebalance-latency-total"] == 0.0
    assert snap["failed-rebalance-total"] == 0.0
    assert snap["rebalance-rate-per-hour"] == 0.0
    assert snap["commit-rate"] == 0.0
    assert snap["assigned-partitions"] == 0.0
    # Windowed avg/max read NaN with nothing in the window, as Java's Avg/Max.
    assert math.isnan(snap["rebalance-latency-avg"])
    assert math.isnan(snap["rebalance-latency-max"])
    assert math.isnan(snap["heartbeat-response-time-max"])


def test_commit_metrics_as_java_consumer_coordinator_test() -> None:
    # ConsumerCoordinatorTest.testMetrics: 1, 6, 2 ms at one instant -> avg 3, max 6,
    # rate 3 / 30 s = 0.1 per second, total 3.
    metrics = CoordinatorMetrics()
    for latency_ms in (1.0, 6.0, 2.0):
        metrics.commit_completed(latency_ms / 1000.0, 50.0)
    snap = metrics.snapshot(50.0)
    assert snap["commit-latency-avg"] == pytest.approx(3.0)
    assert snap["commit-latency-max"] == pytest.approx(6.0)
    assert snap["commit-rate"] == pytest.approx(0.1)
    assert snap["commit-total"] == 3.0


def test_rebalance_lifecycle_latency_counts_and_rates() -> None:
    metrics = CoordinatorMetrics()
    metrics.rebalance_started(10.0)
    assert metrics.rebalance_in_progress
    metrics.rebalance_failed(11.0)
    metrics.rebalance_started(12.0)  # the retry keeps the first start time
    metrics.rebalance_completed(13.5)
    assert not metrics.rebalance_in_progress
    snap = metrics.snapshot(13.5)
    assert snap["rebalance-latency-avg"] == pytest.approx(3500.0)
    assert snap["rebalance-latency-max"] == pytest.approx(3500.0)
    assert snap["rebalance-latency-total"] == pytest.approx(3500.0)
    assert snap["rebalance-total"] == 1.0
    assert snap["failed-rebalance-total"] == 1.0
    # One success recorded and read at 13.5: 1 per 30 s window = 120 per hour.
    assert snap["rebalance-rate-per-hour"] == pytest.approx(120.0)
    # One failure at 11.0 read at 13.5: 1 per (2.5 s + one empty 30 s window).
    assert snap["failed-rebalance-rate-per-hour"] == pytest.approx(3600.0 / 32.5)
    assert snap["last-rebalance-seconds-ago"] == 0.0
    # Whole seconds, truncated as Java's TimeUnit.SECONDS.convert.
    assert metrics.snapshot(15.99)["last-rebalance-seconds-ago"] == 2.0

    metrics.rebalance_started(20.0)
    metrics.rebalance_completed(20.5)
    snap = metrics.snapshot(20.5)
    assert snap["rebalance-total"] == 2.0
    assert snap["rebalance-latency-avg"] == pytest.approx(2000.0)
    assert snap["rebalance-latency-max"] == pytest.approx(3500.0)
    assert snap["rebalance-latency-total"] == pytest.approx(4000.0)
    assert snap["last-rebalance-seconds-ago"] == 0.0
    assert metrics.snapshot(30.0)["last-rebalance-seconds-ago"] == 9.0


def test_failure_outside_a_rebalance_is_not_counted() -> None:
    metrics = CoordinatorMetrics()
    metrics.rebalance_failed(1.0)
    metrics.rebalance_started(2.0)
    metrics.rebalance_completed(3.0)
    metrics.rebalance_failed(4.0)
    assert metrics.snapshot(5.0)["failed-rebalance-total"] == 0.0


def test_completed_without_start_is_a_caller_bug() -> None:
    metrics = CoordinatorMetrics()
    # ValueError, which the driver logs and drops: a metrics mismatch must never stop
    # the group member.
    with pytest.raises(ValueError, match="without rebalance_started"):
        metrics.rebalance_completed(1.0)
    assert metrics.snapshot(1.0)["rebalance-total"] == 0.0


def test_join_sync_heartbeat_meters() -> None:
    metrics = CoordinatorMetrics()
    metrics.join_completed(0.5, 0.0)
    metrics.join_completed(1.5, 1.0)
    metrics.sync_completed(0.25, 2.0)
    metrics.heartbeat_sent(2.5)
    metrics.heartbeat_completed(0.01, 3.0)
    metrics.heartbeat_completed(0.03, 6.0)
    snap = metrics.snapshot(6.0)
    assert snap["join-time-avg"] == pytest.approx(1000.0)
    assert snap["join-time-max"] == pytest.approx(1500.0)
    assert snap["join-total"] == 2.0
    assert snap["join-rate"] == pytest.approx(2 / 36.0)
    assert snap["sync-time-avg"] == pytest.approx(250.0)
    assert snap["sync-time-max"] == pytest.approx(250.0)
    assert snap["sync-total"] == 1.0
    assert snap["sync-rate"] == pytest.approx(1 / 34.0)
    assert snap["heartbeat-response-time-max"] == pytest.approx(30.0)
    assert snap["heartbeat-total"] == 2.0
    assert snap["heartbeat-rate"] == pytest.approx(2 / 33.0)
    assert snap["last-heartbeat-seconds-ago"] == 3.0


def test_avg_and_max_age_out_of_the_window() -> None:
    metrics = CoordinatorMetrics()
    metrics.join_completed(0.2, 0.0)
    assert metrics.snapshot(59.9)["join-time-avg"] == pytest.approx(200.0)
    snap = metrics.snapshot(60.0)  # samples * window since the last event
    assert math.isnan(snap["join-time-avg"])
    assert math.isnan(snap["join-time-max"])
    assert snap["join-total"] == 1.0  # cumulative stats never age


def test_windowed_rate_follows_java_sampling() -> None:
    registry = MetricsRegistry(MetricConfig(samples=2, time_window_s=30.0))
    sensor = registry.sensor("s").add("r", "rate", Rate(WindowedCount()))
    for t in (0.0, 10.0, 20.0):
        sensor.record(7.0, t)
    # All in the first sample; one missing prior window of 30 s is assumed.
    assert registry.measure("r", 20.0) == pytest.approx(3 / 50.0)
    sensor.record(7.0, 35.0)  # first sample complete: a second one starts at 35
    assert registry.measure("r", 35.0) == pytest.approx(4 / 35.0)
    sensor.record(7.0, 70.0)  # a third sample (one extra is kept) starts at 70
    assert registry.measure("r", 70.0) == pytest.approx(5 / 70.0)
    # At 81 the first sample's last event (20) is 61 s old: purged.
    assert registry.measure("r", 81.0) == pytest.approx(2 / 46.0)
    sensor.record(7.0, 101.0)  # recycles the oldest slot; sample from 35 is purged
    assert registry.measure("r", 101.0) == pytest.approx(2 / 31.0)
    # Long idle: everything purged, the rate reads zero.
    assert registry.measure("r", 1000.0) == 0.0


def test_rate_window_has_javas_one_millisecond_floor() -> None:
    # With one sample there is no assumed empty window: read at the instant the sample
    # starts, Java divides by its 1 ms floor instead of by zero.
    registry = MetricsRegistry(MetricConfig(samples=1, time_window_s=30.0))
    sensor = registry.sensor("s").add("r", "rate", Rate(WindowedCount()))
    sensor.record(1.0, 5.0)
    assert registry.measure("r", 5.0) == pytest.approx(1 / 0.001)
    assert registry.measure("r", 7.0) == pytest.approx(1 / 2.0)


def test_windowed_sum_rate_and_hour_unit() -> None:
    registry = MetricsRegistry()
    sensor = registry.sensor("bytes")
    sensor.add("bytes-rate", "sum per second", Rate())
    sensor.add("bytes-per-hour", "sum per hour", Rate(WindowedSum(), unit_s=3600.0))
    sensor.record(300.0, 0.0)
    sensor.record(600.0, 0.0)
    assert registry.measure("bytes-rate", 0.0) == pytest.approx(900.0 / 30.0)
    assert registry.measure("bytes-per-hour", 0.0) == pytest.approx(900.0 * 120.0)


def test_min_stat_and_cumulative_stats() -> None:
    registry = MetricsRegistry()
    sensor = (
        registry.sensor("x")
        .add("x-min", "min", Min())
        .add("x-sum", "sum", CumulativeSum())
        .add("x-count", "count", CumulativeCount())
        .add("x-windowed-sum", "windowed", WindowedSum())
    )
    assert math.isnan(registry.measure("x-min", 0.0))
    for value, t in ((5.0, 0.0), (-2.0, 1.0), (9.0, 2.0)):
        sensor.record(value, t)
    assert registry.measure("x-min", 2.0) == -2.0
    assert registry.measure("x-sum", 2.0) == 12.0
    assert registry.measure("x-count", 2.0) == 3.0
    assert registry.measure("x-windowed-sum", 2.0) == 12.0
    assert registry.measure("x-windowed-sum", 500.0) == 0.0
    assert registry.measure("x-sum", 500.0) == 12.0


def test_registry_rejects_duplicates_and_bad_aliases() -> None:
    registry = MetricsRegistry()
    registry.sensor("a").add("a-avg", "avg", Avg())
    with pytest.raises(ValueError, match="already registered"):
        registry.sensor("b").add("a-avg", "again", Max())
    with pytest.raises(KeyError, match="no metric"):
        registry.add_alias("alias", "missing")
    registry.add_alias("alias", "a-avg")
    with pytest.raises(ValueError, match="already a metric name or alias"):
        registry.add_alias("alias", "a-avg")
    with pytest.raises(ValueError, match="already registered"):
        registry.add_gauge("alias", "clash", lambda now: 0.0)
    assert registry.sensor("a") is registry.sensor("a")
    assert registry.names() == ("a-avg",)


def test_gauge_reads_now_and_cannot_be_recorded() -> None:
    registry = MetricsRegistry()
    registry.add_gauge("uptime", "seconds", lambda now: now * 2)
    assert registry.measure("uptime", 4.0) == 8.0
    gauge = registry._metrics["uptime"].stat
    with pytest.raises(TypeError, match="gauge"):
        gauge.record(registry.config, 1.0, 0.0)


def test_metric_config_validation() -> None:
    with pytest.raises(ValueError, match="samples"):
        MetricConfig(samples=0)
    with pytest.raises(ValueError, match="time_window_s"):
        MetricConfig(time_window_s=0.0)
    assert attrs.asdict(MetricConfig()) == {"samples": 2, "time_window_s": 30.0}


def test_assigned_partitions_gauge() -> None:
    metrics = CoordinatorMetrics()
    metrics.set_assigned_partitions(7)
    assert metrics.snapshot(0.0)["assigned-partitions"] == 7.0
    with pytest.raises(ValueError, match=">= 0"):
        metrics.set_assigned_partitions(-1)


@pytest.mark.parametrize("bad", [-0.001, math.nan])
def test_bad_latencies_are_rejected(bad: float) -> None:
    metrics = CoordinatorMetrics()
    with pytest.raises(ValueError, match="non-negative"):
        metrics.commit_completed(bad, 0.0)
    with pytest.raises(ValueError, match="non-negative"):
        metrics.listener_latency(ListenerKind.LOST, bad, 0.0)


def test_snapshot_is_frozen_and_detached() -> None:
    metrics = CoordinatorMetrics()
    metrics.commit_completed(0.001, 0.0)
    snap = metrics.snapshot(0.0)
    metrics.commit_completed(0.001, 0.0)
    assert snap["commit-total"] == 1.0
    assert metrics.snapshot(0.0)["commit-total"] == 2.0
    with pytest.raises(TypeError):
        snap["commit-total"] = 5.0  # type: ignore[index]
    assert "commit-total" in repr(snap)


def test_listener_invoker_feeds_callback_latency_metrics() -> None:
    class Slow(RebalanceListener):
        pass

    ticks = iter([1.0, 1.25, 2.0, 2.5])
    metrics = CoordinatorMetrics()
    invoker = ListenerInvoker(Slow(), metrics, now_fn=lambda: next(ticks))
    invoker.invoke(ListenerKind.REVOKED, [TopicPartition("t", 0)])
    invoker.invoke(ListenerKind.ASSIGNED, [])
    snap = metrics.snapshot(2.5)
    assert snap["partitions-revoked-latency-avg"] == pytest.approx(250.0)
    assert snap["partition-assigned-latency-max"] == pytest.approx(500.0)
    assert math.isnan(snap["partition-lost-latency-avg"])


def test_concurrent_recording_loses_nothing() -> None:
    metrics = CoordinatorMetrics()

    def work(offset: float) -> None:
        for i in range(500):
            metrics.heartbeat_completed(0.001, offset + i * 0.01)
            metrics.commit_completed(0.002, offset + i * 0.01)
            metrics.snapshot(offset)

    threads = [threading.Thread(target=work, args=(float(n),)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    snap = metrics.snapshot(10.0)
    assert snap["heartbeat-total"] == 2000.0
    assert snap["commit-total"] == 2000.0


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 10.0, allow_nan=False),
            st.floats(0.0, 29.0, allow_nan=False),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_property_stats_within_one_window(events: list[tuple[float, float]]) -> None:
    """Inside one window avg/max/min/total/count are the plain statistics."""
    events.sort(key=lambda event: event[1])
    registry = MetricsRegistry()
    sensor = (
        registry.sensor("v")
        .add("avg", "", Avg())
        .add("max", "", Max())
        .add("min", "", Min())
        .add("sum", "", CumulativeSum())
        .add("count", "", CumulativeCount())
        .add("rate", "", Rate(WindowedCount()))
    )
    for value, t in events:
        sensor.record(value, t)
    now = events[-1][1]
    values = [value for value, _ in events]
    first = events[0][1]
    assert registry.measure("avg", now) == pytest.approx(sum(values) / len(values))
    assert registry.measure("max", now) == max(values)
    assert registry.measure("min", now) == min(values)
    assert registry.measure("sum", now) == pytest.approx(sum(values))
    assert registry.measure("count", now) == len(values)
    # One sample, so one empty prior window of 30 s is assumed.
    assert registry.measure("rate", now) == pytest.approx(len(values) / (now - first + 30.0))


# -- exporters ------------------------------------------------------------------------


def _recorded_metrics() -> CoordinatorMetrics:
    metrics = CoordinatorMetrics()
    metrics.rebalance_started(10.0)
    metrics.rebalance_completed(13.5)
    metrics.commit_completed(0.002, 13.5)
    metrics.set_assigned_partitions(4)
    return metrics


def test_prometheus_text_output_has_every_metric() -> None:
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry, generate_latest

    from coopconsumer.metrics_export import register_prometheus

    metrics = _recorded_metrics()
    registry = CollectorRegistry()
    exporter = register_prometheus(
        lambda: metrics.snapshot(20.0), registry, labels={"client_id": "c1"}
    )
    text = generate_latest(registry).decode()
    assert 'kafka_consumer_coordinator_rebalance_latency_avg{client_id="c1"} 3500.0' in text
    # The TYPE line names the family with or without _total depending on the version.
    assert re.search(r"# TYPE kafka_consumer_coordinator_rebalance(_total)? counter\n", text)
    assert 'kafka_consumer_coordinator_rebalance_total{client_id="c1"} 1.0' in text
    assert 'kafka_consumer_coordinator_assigned_partitions{client_id="c1"} 4.0' in text
    assert 'kafka_consumer_coordinator_last_rebalance_seconds_ago{client_id="c1"} 6.0' in text
    assert 'kafka_consumer_coordinator_join_time_avg{client_id="c1"} NaN' in text
    # HELP text comes from the registry's descriptions.
    assert "# HELP kafka_consumer_coordinator_rebalance_latency_max Longest successful" in text
    for name in CODE_NAMES:
        family = exporter.prometheus_name(name)
        assert f"\n{family}" in text or text.startswith(family), name
    # Scrapes read the source again: new recordings show up.
    metrics.commit_completed(0.002, 21.0)
    assert 'kafka_consumer_coordinator_commit_total{client_id="c1"} 2.0' in (
        generate_latest(registry).decode()
    )


def test_prometheus_duplicate_registration_is_refused() -> None:
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry

    from coopconsumer.metrics_export import register_prometheus

    metrics = CoordinatorMetrics()
    registry = CollectorRegistry()
    register_prometheus(lambda: metrics.snapshot(0.0), registry)
    with pytest.raises(ValueError, match="Duplicated"):
        register_prometheus(lambda: metrics.snapshot(0.0), registry)
    register_prometheus(lambda: metrics.snapshot(0.0), registry, namespace="second")


def test_prometheus_bad_names() -> None:
    pytest.importorskip("prometheus_client")
    from coopconsumer._errors import ConfigurationError
    from coopconsumer.metrics_export import PrometheusExporter

    with pytest.raises(ConfigurationError, match="namespace"):
        PrometheusExporter(dict, namespace="kafka-consumer")
    with pytest.raises(ConfigurationError, match="label name"):
        PrometheusExporter(dict, labels={"client-id": "x"})


def test_missing_extras_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from coopconsumer.metrics_export import OpenTelemetryExporter, PrometheusExporter

    for module in ("prometheus_client", "prometheus_client.metrics_core"):
        monkeypatch.setitem(sys.modules, module, None)
    for module in ("opentelemetry", "opentelemetry.metrics"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=r"pip install 'coopconsumer\[prometheus\]'"):
        PrometheusExporter(dict)
    with pytest.raises(ImportError, match=r"pip install 'coopconsumer\[otel\]'"):
        OpenTelemetryExporter(dict)


def test_opentelemetry_observable_instruments() -> None:
    pytest.importorskip("opentelemetry.sdk.metrics")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from coopconsumer.metrics_export import register_opentelemetry

    metrics = _recorded_metrics()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    reads: list[float] = []

    def source() -> MetricsSnapshot:
        reads.append(20.0)
        return metrics.snapshot(20.0)

    exporter = register_opentelemetry(
        source, provider.get_meter("test"), attributes={"client.id": "c1"}
    )
    reads.clear()  # the exporter reads the names once when it is created
    prefix = "kafka.consumer.coordinator."
    assert set(exporter.instrument_names) == {prefix + name for name in CODE_NAMES}

    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, tuple[float, dict[str, object], str]] = {}
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                for point in metric.data.data_points:
                    # Gauge and sum points both have .value; histogram points do not.
                    value = float(cast(Any, point).value)
                    points[metric.name] = (value, dict(point.attributes or {}), metric.unit or "")
    assert points[prefix + "rebalance-total"][0] == 1.0
    assert points[prefix + "rebalance-latency-avg"] == (3500.0, {"client.id": "c1"}, "ms")
    assert points[prefix + "rebalance-rate-per-hour"][2] == "1/h"
    assert points[prefix + "commit-rate"][2] == "1/s"
    assert points[prefix + "last-rebalance-seconds-ago"][:2] == (6.0, {"client.id": "c1"})
    assert points[prefix + "assigned-partitions"][0] == 4.0
    # NaN (nothing in the window) is not reported.
    assert prefix + "join-time-avg" not in points
    # One source read per collection, not one per instrument; a second collection
    # reads again and sees new recordings.
    assert len(reads) == 1
    metrics.commit_completed(0.002, 20.0)
    second = reader.get_metrics_data()
    assert second is not None
    assert len(reads) == 2
    totals = [
        float(cast(Any, point).value)
        for resource_metrics in second.resource_metrics
        for scope_metrics in resource_metrics.scope_metrics
        for metric in scope_metrics.metrics
        if metric.name == prefix + "commit-total"
        for point in metric.data.data_points
    ]
    assert totals == [2.0]
    provider.shutdown()


class ForeignObservation(enum.Enum):
    """Stands in for the coordinator's Observation enum (values are method names)."""

    REBALANCE_STARTED = "rebalance_started"
    REBALANCE_COMPLETED = "rebalance_completed"
    JOIN_COMPLETED = "join_completed"
    HEARTBEAT_SENT = "heartbeat_sent"
    SOMETHING_ELSE = "something_else"


def test_observe_dispatches_by_name() -> None:
    metrics = CoordinatorMetrics()
    metrics.observe(ForeignObservation.REBALANCE_STARTED, 1.0)
    metrics.observe(ForeignObservation.JOIN_COMPLETED, 1.5, 0.5)
    metrics.observe("sync_completed", 1.75, 0.25)
    metrics.observe("rebalance_failed", 1.8)
    metrics.observe(ForeignObservation.REBALANCE_COMPLETED, 2.0)
    metrics.observe(ForeignObservation.HEARTBEAT_SENT, 2.0)
    metrics.observe("heartbeat_completed", 2.0, 0.004)
    metrics.observe("commit_completed", 2.0, 0.003)
    snap = metrics.snapshot(4.5)
    assert snap["rebalance-latency-max"] == pytest.approx(1000.0)
    assert snap["failed-rebalance-total"] == 1.0
    assert snap["join-time-max"] == pytest.approx(500.0)
    assert snap["sync-time-max"] == pytest.approx(250.0)
    assert snap["heartbeat-response-time-max"] == pytest.approx(4.0)
    assert snap["commit-latency-max"] == pytest.approx(3.0)
    assert snap["last-heartbeat-seconds-ago"] == 2.0


def test_rebalance_completed_takes_the_callers_latency() -> None:
    metrics = CoordinatorMetrics()
    metrics.rebalance_started(0.0)
    # The caller (the group member) timed this rebalance itself: 1.5 s, not 10 s.
    metrics.observe("rebalance_completed", 10.0, 1.5)
    snap = metrics.snapshot(10.0)
    assert snap["rebalance-latency-max"] == pytest.approx(1500.0)
    assert snap["rebalance-total"] == 1.0
    assert not metrics.rebalance_in_progress
    # Without a start, a measured latency is still a completed rebalance.
    metrics.rebalance_completed(20.0, 0.25)
    assert metrics.snapshot(20.0)["rebalance-latency-total"] == pytest.approx(1750.0)
    with pytest.raises(ValueError, match="non-negative"):
        metrics.rebalance_completed(21.0, -1.0)
    assert metrics.snapshot(21.0)["rebalance-total"] == 2.0


def test_observe_rejects_unknown_names_and_latency_mismatches() -> None:
    metrics = CoordinatorMetrics()
    with pytest.raises(ValueError, match="unknown observation 'something_else'"):
        metrics.observe(ForeignObservation.SOMETHING_ELSE, 0.0)
    with pytest.raises(ValueError, match="needs latency_s"):
        metrics.observe("join_completed", 0.0)
    with pytest.raises(ValueError, match="takes no latency"):
        metrics.observe("heartbeat_sent", 0.0, 0.1)


def test_listener_latency_accepts_foreign_kinds() -> None:
    class Kind(enum.Enum):
        LOST = "lost"

    metrics = CoordinatorMetrics()
    metrics.listener_latency(Kind.LOST, 0.002, 0.0)
    assert metrics.snapshot(0.0)["partitions-lost-latency-max"] == pytest.approx(2.0)


def test_metrics_dict_resolves_aliases_but_lists_code_names_once() -> None:
    metrics = CoordinatorMetrics()
    metrics.listener_latency(ListenerKind.REVOKED, 0.004, 1.0)
    d = metrics.snapshot(1.0).to_dict()
    assert isinstance(d, dict)
    assert d["partitions-revoked-latency-max"] == d["partition-revoked-latency-max"] == 4.0
    assert "partitions-revoked-latency-avg" in d
    assert d.get("partitions-revoked-latency-avg") == 4.0
    assert d.get("no-such-metric") is None
    assert d.get("no-such-metric", -1.0) == -1.0
    assert "no-such-metric" not in d
    assert not any(name.startswith("partitions-") for name in d)
    assert len(d) == len(list(d))
    with pytest.raises(KeyError):
        d["no-such-metric"]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(1.0, 2.0, 2.0), (3.0, 2.0, 3.0), (math.nan, 2.0, 2.0), (2.0, math.nan, 2.0)],
)
def test_max_reading_treats_nan_as_no_sample(a: float, b: float, expected: float) -> None:
    assert max_reading(a, b) == expected


def test_max_reading_of_two_empty_readings_is_nan() -> None:
    assert math.isnan(max_reading(math.nan, math.nan))


def test_fetch_metrics_sum_records_and_take_the_largest_known_lag() -> None:
    lags: list[int] = []
    fetch = FetchMetrics(lambda: lags)
    assert fetch.registry.group == "consumer-fetch-manager-metrics"
    empty = fetch.snapshot(0.0)
    assert empty["records-consumed-total"] == 0
    assert math.isnan(empty["records-lag-max"])
    fetch.records_consumed(100, 1.0)
    fetch.records_consumed(50, 2.0)
    lags.extend([3, 0, 12])
    snap = fetch.snapshot(2.0)
    assert snap["records-consumed-total"] == 150
    assert snap["records-consumed-rate"] > 0
    assert snap["records-lag-max"] == 12


def test_missing_topics_is_a_registered_gauge_the_exporters_show() -> None:
    """Issue 35: ``missing-topics`` lives in the registry, with a description, so an
    exporter reading a snapshot (not only ``Consumer.metrics()``) shows it."""
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry, generate_latest

    from coopconsumer.metrics_export import register_prometheus

    metrics = CoordinatorMetrics()
    assert "missing-topics" in metrics.registry.names()
    assert metrics.snapshot(0.0)["missing-topics"] == 0.0
    metrics.set_missing_topics(2)
    snap = metrics.snapshot(1.0)
    assert snap["missing-topics"] == 2.0
    assert "not found in the cluster" in snap.description("missing-topics")
    registry = CollectorRegistry()
    register_prometheus(lambda: metrics.snapshot(1.0), registry, labels={"client_id": "c1"})
    text = generate_latest(registry).decode()
    assert 'kafka_consumer_coordinator_missing_topics{client_id="c1"} 2.0' in text
    assert "# TYPE kafka_consumer_coordinator_missing_topics gauge" in text
    with pytest.raises(ValueError, match="missing topic count"):
        metrics.set_missing_topics(-1)


def test_missing_topics_reaches_opentelemetry() -> None:
    pytest.importorskip("opentelemetry.metrics")
    from coopconsumer.metrics_export import OpenTelemetryExporter

    metrics = CoordinatorMetrics()
    metrics.set_missing_topics(1)
    exporter = OpenTelemetryExporter(lambda: metrics.snapshot(0.0))
    assert "kafka.consumer.coordinator.missing-topics" in exporter.instrument_names
