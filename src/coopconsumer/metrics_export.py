"""Export a consumer's metrics to Prometheus or OpenTelemetry.

Both adapters read a *source*: any callable returning the current metrics as a mapping
of Java metric names to values, such as ``consumer.metrics`` (a
``consumer-coordinator-metrics`` snapshot). They read it when the monitoring system
collects, so nothing runs in between.

The client libraries are optional extras, imported only when an adapter is created:
``pip install coopconsumer[prometheus]`` for ``prometheus_client`` and
``pip install coopconsumer[otel]`` for ``opentelemetry-api``.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

from ._errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

__all__ = [
    "MetricsSource",
    "OpenTelemetryExporter",
    "PrometheusExporter",
    "register_opentelemetry",
    "register_prometheus",
]

#: Anything returning ``{metric name: value}``, e.g. a bound ``Consumer.metrics``.
MetricsSource = Callable[[], Mapping[str, float]]

_DESCRIPTIONS = {
    "-avg": "average over the sampled window",
    "-max": "maximum over the sampled window",
    "-rate": "per second over the sampled window",
    "-rate-per-hour": "per hour over the sampled window",
    "-total": "total since the consumer started",
    "-seconds-ago": "seconds since the event, -1 before the first",
}


def _describe(name: str, source_value: Mapping[str, float]) -> str:
    describe = getattr(source_value, "description", None)
    if callable(describe):
        try:
            return str(describe(name))
        except KeyError:
            pass
    for suffix, text in sorted(_DESCRIPTIONS.items(), key=lambda item: -len(item[0])):
        if name.endswith(suffix):
            return f"Kafka consumer metric {name}: {text}"
    return f"Kafka consumer metric {name}"


def _import_extra(module: str, extra: str, what: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{what} needs the {module.split('.')[0]!r} package: "
            f"pip install 'coopconsumer[{extra}]'"
        ) from exc


# --------------------------------------------------------------------------- Prometheus

_PROM_INVALID = re.compile(r"[^a-zA-Z0-9_]")


class PrometheusExporter:
    """A ``prometheus_client`` collector reading a metrics source at scrape time.

    Each metric ``name`` becomes ``<namespace>_<name with '-' as '_'>``. Names ending in
    ``-total`` are exported as counters (Prometheus appends ``_total`` itself, so
    ``rebalance-total`` is still ``..._rebalance_total``); the others are gauges.
    ``labels`` (e.g. ``{"client_id": "c1", "group_id": "orders"}``) go on every sample.
    NaN (a windowed stat with nothing in its window) is exported as NaN, as Java's JMX.

    Raises ``ImportError`` naming the ``coopconsumer[prometheus]`` extra when
    ``prometheus_client`` is missing, and ``ConfigurationError`` for an invalid
    namespace or label name.
    """

    def __init__(
        self,
        source: MetricsSource,
        *,
        namespace: str = "kafka_consumer_coordinator",
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self._core = _import_extra(
            "prometheus_client.metrics_core", "prometheus", "PrometheusExporter"
        )
        if not namespace or _PROM_INVALID.search(namespace) or namespace[0].isdigit():
            raise ConfigurationError(
                f"invalid Prometheus namespace {namespace!r}: use letters, digits and '_'"
            )
        label_items = dict(labels or {})
        for label in label_items:
            if not label or _PROM_INVALID.search(label) or label[0].isdigit():
                raise ConfigurationError(f"invalid Prometheus label name {label!r}")
        self._source = source
        self._namespace = namespace
        self._label_names = list(label_items)
        self._label_values = [str(value) for value in label_items.values()]

    def prometheus_name(self, name: str) -> str:
        """The exported family name for metric ``name`` (before a counter's ``_total``)."""
        base = name[: -len("-total")] if name.endswith("-total") else name
        return f"{self._namespace}_{_PROM_INVALID.sub('_', base)}"

    def collect(self) -> Iterator[Metric]:
        """Read the source once and yield one metric family per metric."""
        values = self._source()
        for name, value in values.items():
            family_name = self.prometheus_name(name)
            documentation = _describe(name, values)
            if name.endswith("-total"):
                family = self._core.CounterMetricFamily(
                    family_name, documentation, labels=self._label_names
                )
            else:
                family = self._core.GaugeMetricFamily(
                    family_name, documentation, labels=self._label_names
                )
            family.add_metric(self._label_values, float(value))
            yield family

    def describe(self) -> Iterator[Metric]:
        """Same families as :meth:`collect`, so registries can detect name clashes."""
        return self.collect()


def register_prometheus(
    consumer_metrics_source: MetricsSource,
    registry: CollectorRegistry | None = None,
    *,
    namespace: str = "kafka_consumer_coordinator",
    labels: Mapping[str, str] | None = None,
) -> PrometheusExporter:
    """Register a :class:`PrometheusExporter` in ``registry`` (default: the global one).

    Unregister it with ``registry.unregister(exporter)`` when the consumer is closed.
    Two consumers in one registry need distinct ``namespace`` values or, better, a
    ``client_id`` label each in separate registries, as Prometheus refuses duplicate
    names in one registry.
    """
    exporter = PrometheusExporter(consumer_metrics_source, namespace=namespace, labels=labels)
    target: Any = registry
    if target is None:
        target = _import_extra("prometheus_client", "prometheus", "register_prometheus").REGISTRY
    # Duck-typed collector: prometheus_client only calls collect() and describe().
    target.register(cast(Any, exporter))
    return exporter


# ------------------------------------------------------------------------ OpenTelemetry


def _otel_unit(name: str) -> str:
    if name.endswith("-rate-per-hour"):
        return "1/h"
    if name.endswith("-rate"):
        return "1/s"
    if name.endswith("-seconds-ago"):
        return "s"
    if "latency" in name or "-time-" in name:
        return "ms"
    return "1"


class OpenTelemetryExporter:
    """Observable instruments on an OpenTelemetry ``Meter``, one per metric.

    Created from the names the source returns at construction. Names ending in
    ``-total`` become observable counters, the rest observable gauges, named
    ``<prefix>.<name>`` (e.g. ``kafka.consumer.coordinator.rebalance-latency-avg``) with
    units ``ms``, ``1/s``, ``1/h``, ``s`` or ``1``. Every observation carries
    ``attributes``. NaN values (nothing in a stat's window) are not reported. One
    collection reads the source once, so all instruments report the same instant.

    Raises ``ImportError`` naming the ``coopconsumer[otel]`` extra when
    ``opentelemetry-api`` is missing.
    """

    def __init__(
        self,
        source: MetricsSource,
        meter: Meter | None = None,
        *,
        prefix: str = "kafka.consumer.coordinator",
        attributes: Mapping[str, str] | None = None,
    ) -> None:
        api = _import_extra("opentelemetry.metrics", "otel", "OpenTelemetryExporter")
        self._api = api
        self._source = source
        self._attributes = dict(attributes or {})
        self._lock = threading.Lock()
        self._values: Mapping[str, float] = {}
        self._served: set[str] = set()
        self.meter: Meter = api.get_meter("coopconsumer") if meter is None else meter
        first = source()
        names = list(first)
        self.instrument_names: tuple[str, ...] = tuple(f"{prefix}.{name}" for name in names)
        self._instruments = []
        for name, full_name in zip(names, self.instrument_names, strict=True):
            create = (
                self.meter.create_observable_counter
                if name.endswith("-total")
                else self.meter.create_observable_gauge
            )
            self._instruments.append(
                create(
                    full_name,
                    callbacks=[self._callback(name)],
                    unit=_otel_unit(name),
                    description=_describe(name, first),
                )
            )

    def _callback(self, name: str) -> Callable[[CallbackOptions], Iterator[Observation]]:
        def observe(options: CallbackOptions) -> Iterator[Observation]:
            value = self._read(name)
            if value is not None and not math.isnan(value):
                yield self._api.Observation(float(value), self._attributes)

        return observe

    def _read(self, name: str) -> float | None:
        # A collection calls every instrument's callback once. A name asked for again
        # means a new collection has begun: read the source then, once, instead of
        # once per instrument (31 snapshots per collection otherwise).
        with self._lock:
            if name in self._served or not self._served:
                self._values = self._source()
                self._served.clear()
            self._served.add(name)
            return self._values.get(name)


def register_opentelemetry(
    consumer_metrics_source: MetricsSource,
    meter: Meter | None = None,
    *,
    prefix: str = "kafka.consumer.coordinator",
    attributes: Mapping[str, str] | None = None,
) -> OpenTelemetryExporter:
    """Create observable instruments for every metric of ``consumer_metrics_source``.

    ``meter`` defaults to ``opentelemetry.metrics.get_meter("coopconsumer")`` from the
    global meter provider.
    """
    return OpenTelemetryExporter(
        consumer_metrics_source, meter, prefix=prefix, attributes=attributes
    )
