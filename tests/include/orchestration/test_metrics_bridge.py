"""sda.orchestration.metrics_bridge and otlp_metrics: Airflow's OTLP metrics as Prometheus series, beside the
pipeline's textfiles, on one internal scrape target. The producer is OpenTelemetry's own SDK and OTLP/HTTP exporter
(what Airflow's ``otel_on`` uses), posting to a bridge on a free loopback port; the expected values are the counts
the test adds, and the exposition is read back with the format parser of tests/include/pipeline/test_exposition.py."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from sda.orchestration import metrics_bridge, otlp_metrics
from sda.pipeline import exposition
from tests.include.pipeline.test_exposition import parse


@pytest.fixture
def bridge(tmp_path):
    settings = SimpleNamespace(lakehouse=tmp_path / "lakehouse")
    clock = [0.0]
    store = otlp_metrics.OtlpStore(clock=lambda: clock[0])
    server = metrics_bridge.serve("127.0.0.1", 0, lambda: exposition.metrics_root(settings), store)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    yield SimpleNamespace(url=url, settings=settings, clock=clock, store=store)
    server.shutdown()
    server.server_close()


@pytest.fixture
def processes():
    """Sending processes: meter providers exporting to the bridge, as Airflow components' (shut down after)."""
    made: list[MeterProvider] = []
    yield lambda url, instance: _process(url, instance, made)
    for provider in made:
        provider.shutdown(timeout_millis=2000)


def _process(url: str, instance: str, made: list) -> tuple[MeterProvider, object]:
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{url}/v1/metrics"),
                                           export_interval_millis=3_600_000)
    provider = MeterProvider(resource=Resource.create({"service.name": "airflow", "service.instance.id": instance}),
                             metric_readers=[reader], shutdown_on_exit=False)
    made.append(provider)
    return provider, provider.get_meter("airflow")


def _scrape(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse(r.read().decode())


def test_counters_of_every_process_add_up_and_gauges_and_timers_are_exposed(bridge, processes):
    first, meter = processes(bridge.url, "scheduler")
    started = meter.create_counter("ti.start", description="Tasks started")
    started.add(3, {"dag_id": "sda_pipeline"})
    started.add(2, {"dag_id": "sda_pipeline"})
    meter.create_up_down_counter("executor.open_slots").add(7)
    timer = meter.create_histogram("dag_processing.last_duration", unit="ms")
    for ms in (120.0, 80.0):
        timer.record(ms)
    first.force_flush()
    # a second process of the same component (a forked task runner), its counter from zero
    second, meter2 = processes(bridge.url, "scheduler")
    meter2.create_counter("ti.start").add(4, {"dag_id": "sda_pipeline"})
    second.force_flush()
    got = _scrape(bridge.url)
    labels = frozenset({("dag_id", "sda_pipeline"), ("component", "scheduler")})
    assert got["ti_start_total"] == {"type": "counter", "samples": {labels: 9.0}}
    assert got["executor_open_slots"]["samples"] == {frozenset({("component", "scheduler")}): 7.0}
    timers = got["dag_processing_last_duration"]
    assert timers["type"] == "summary"
    scheduler = {("component", "scheduler")}
    assert timers["samples"] == {frozenset(scheduler | {("__name__", "dag_processing_last_duration_sum")}): 200.0,
                                 frozenset(scheduler | {("__name__", "dag_processing_last_duration_count")}): 2.0}
    # a later export of the first process replaces its cumulative value, it does not add to it
    started.add(1, {"dag_id": "sda_pipeline"})
    first.force_flush()
    assert _scrape(bridge.url)["ti_start_total"]["samples"][labels] == 10.0
    # a process gone quiet is folded into the total and forgotten: the sum stays
    bridge.clock[0] += otlp_metrics.RETIRE_AFTER_S + 1
    second.force_flush()  # the second is heard again (nothing new); the first is retired
    assert _scrape(bridge.url)["ti_start_total"]["samples"][labels] == 10.0
    assert len(bridge.store._series["ti_start_total"].live[tuple(sorted(labels))]) == 1


def test_the_pipelines_textfiles_are_served_beside_them(bridge):
    exposition.record_stage_run(bridge.settings, "dedup", {"records_in": 4, "records_out": 4}, ok=True, now=5.0)
    got = _scrape(bridge.url)
    assert got["sda_stage_runs_total"]["samples"][frozenset({("stage", "dedup"), ("outcome", "ok")})] == 1.0


def test_what_is_not_an_otlp_export_is_refused_and_nothing_else_is_served(bridge):
    def status(path: str, body: bytes | None = None) -> int:
        try:
            with urllib.request.urlopen(urllib.request.Request(f"{bridge.url}{path}", data=body), timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as exc:
            return exc.code
    assert status("/v1/metrics", b"\xff\xff\xff not protobuf") == 400
    assert status("/v1/traces", b"x") == 404
    assert status("/") == 404 and status("/healthz") == 200
    assert otlp_metrics.prometheus_name("airflow.dag.sda-pipeline.duration") == "airflow_dag_sda_pipeline_duration"
    assert otlp_metrics.prometheus_name("9lives") == "_9lives"
