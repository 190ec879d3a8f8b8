"""OpenTelemetry metrics (OTLP) as Prometheus series: what Airflow's components push (``[metrics] otel_on``) made
scrapeable, the part of an OpenTelemetry collector's ``prometheus`` exporter this deployment needs (Debian ships no
collector, and its Prometheus 2.42 has no OTLP receiver).

:class:`OtlpStore` takes ``ExportMetricsServiceRequest`` bodies (OTLP/HTTP protobuf, as the Python SDK's
``OTLPMetricExporter`` posts them to ``/v1/metrics``) and renders the Prometheus text format (0.0.4):

* a name becomes Prometheus's (``airflow.dag_processing.total_parse_time`` ->
  ``airflow_dag_processing_total_parse_time``: every character outside ``[a-zA-Z0-9_:]`` an underscore); a monotonic
  sum is a ``counter`` with ``_total``, a gauge or a non-monotonic sum a ``gauge``, a histogram (Airflow's timers:
  exponential) a ``summary`` of ``_sum`` and ``_count``;
* labels are the point's attributes plus ``component``, the sender's ``service.instance.id`` resource attribute
  (docker-compose.yaml sets one per Airflow component: ``OTEL_RESOURCE_ATTRIBUTES``), else its ``service.name``
  (not ``instance``, which Prometheus gives the scrape target);
* cumulative points only (the SDK's default for OTLP). Every process of a component (the scheduler forks one per
  task) starts its counters from zero: a series is kept per process (its points' ``start_time_unix_nano``) and a
  counter's sample is the sum over the processes, so a process that ends keeps its count in the total. A process
  not heard from for :data:`RETIRE_AFTER_S` is folded into its series' retired total and forgotten (the store stays
  bounded); a gauge is the newest point of any process.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sda.pipeline.exposition import sample_line

RETIRE_AFTER_S = 600.0
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


def prometheus_name(name: str) -> str:
    out = _INVALID.sub("_", name)
    return f"_{out}" if out[:1].isdigit() else out


def _label_name(key: str) -> str:
    out = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    return f"_{out}" if out[:1].isdigit() or out.startswith("__") else out


def _value(any_value) -> str:
    kind = any_value.WhichOneof("value")
    return "" if kind is None else str(getattr(any_value, kind))


@dataclass
class _Series:
    kind: str  # counter | gauge | summary
    help_text: str
    # labels -> process start (ns) -> (value or (sum, count), last heard, point time)
    live: dict[tuple, dict[int, tuple[Any, float, int]]] = field(default_factory=dict)
    retired: dict[tuple, Any] = field(default_factory=dict)


def _add(a: Any, b: Any) -> Any:
    return (a[0] + b[0], a[1] + b[1]) if isinstance(a, tuple) else a + b


class OtlpStore:
    """The newest cumulative values pushed, by metric, labels and sending process; thread-safe."""

    def __init__(self, clock=time.monotonic):
        self._series: dict[str, _Series] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def add(self, body: bytes) -> int:
        """Take one ``ExportMetricsServiceRequest`` (protobuf bytes); returns the points taken. Raises
        ``ValueError`` for a body that is not one."""
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

        request = ExportMetricsServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            raise ValueError(f"not an OTLP ExportMetricsServiceRequest: {exc}") from None
        taken = 0
        now = self._clock()
        with self._lock:
            for resource_metrics in request.resource_metrics:
                resource = {a.key: _value(a.value) for a in resource_metrics.resource.attributes}
                instance = resource.get("service.instance.id") or resource.get("service.name") or "unknown"
                for scope in resource_metrics.scope_metrics:
                    for metric in scope.metrics:
                        taken += self._take(metric, instance, now)
            self._retire(now)
        return taken

    def _take(self, metric, instance: str, now: float) -> int:
        kind_of = metric.WhichOneof("data")
        if kind_of in ("sum", "gauge"):
            data = getattr(metric, kind_of)
            kind = "counter" if kind_of == "sum" and data.is_monotonic else "gauge"
            points = [(p, p.as_double if p.WhichOneof("value") == "as_double" else p.as_int) for p in data.data_points]
        elif kind_of in ("histogram", "exponential_histogram"):
            kind = "summary"
            points = [(p, (p.sum, p.count)) for p in getattr(metric, kind_of).data_points]
        else:  # a summary pushed by a client: not produced by Airflow
            return 0
        name = prometheus_name(metric.name) + ("_total" if kind == "counter" else "")
        series = self._series.setdefault(name, _Series(kind, metric.description or metric.name))
        for point, value in points:
            labels = tuple(sorted({**{_label_name(a.key): _value(a.value) for a in point.attributes},
                                   "component": instance}.items()))
            per_process = series.live.setdefault(labels, {})
            known = per_process.get(point.start_time_unix_nano)
            if known is None or point.time_unix_nano >= known[2]:
                per_process[point.start_time_unix_nano] = (value, now, point.time_unix_nano)
        return len(points)

    def _retire(self, now: float) -> None:
        for series in self._series.values():
            for labels, per_process in series.live.items():
                for start in [s for s, (_, heard, _) in per_process.items() if now - heard > RETIRE_AFTER_S]:
                    value = per_process.pop(start)[0]
                    if series.kind != "gauge":
                        old = series.retired.get(labels)
                        series.retired[labels] = value if old is None else _add(old, value)

    def samples(self) -> dict[str, tuple[str, str, list[tuple[str, dict[str, str], float]]]]:
        """``{family: (type, help, [(sample name, labels, value)])}``, families and labels sorted."""
        out = {}
        with self._lock:
            for name, series in sorted(self._series.items()):
                rows = []
                for labels in sorted(set(series.live) | set(series.retired)):
                    value = self._merged(series, labels)
                    if value is None:
                        continue
                    if series.kind == "summary":
                        rows += [(f"{name}_sum", dict(labels), value[0]), (f"{name}_count", dict(labels), value[1])]
                    else:
                        rows.append((name, dict(labels), value))
                if rows:
                    out[name] = (series.kind, series.help_text, rows)
        return out

    @staticmethod
    def _merged(series: _Series, labels: tuple) -> Any:
        points = series.live.get(labels, {})
        if series.kind == "gauge":
            return max(points.values(), key=lambda p: p[2])[0] if points else None
        total = series.retired.get(labels)
        for value, _, _ in points.values():
            total = value if total is None else _add(total, value)
        return total

    def exposition(self) -> str:
        lines: list[str] = []
        for name, (kind, help_text, rows) in self.samples().items():
            lines += [f"# HELP {name} {help_text.replace(chr(10), ' ')}", f"# TYPE {name} {kind}"]
            lines += [sample_line(sample, labels, value) for sample, labels, value in rows]
        return "\n".join(lines) + "\n" if lines else ""
