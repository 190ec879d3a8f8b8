"""Traces of the pipeline's runs: a span per stage run, in OpenTelemetry's OTLP JSON, a line per span.

A DAG run is one trace: every stage of it runs with the run's id (``--run-id``), and the trace id is derived
from that id (:func:`trace_id`), so the stages -- separate task processes, possibly on separate machines --
join one trace with nothing propagated between them, and ``sda trace`` names an alert's trace from the run
that screened it. A stage run is a span: its start and end, ``OK`` or ``ERROR`` (with the error's first line),
and attributes ``sda.run_id``, ``sda.stage``, ``sda.mode``, the records in/out/quarantined and, for ingest,
``sda.landed_files`` (the new files it took). A retried stage is a second span of the same trace.

The spans go to ``<lakehouse parent>/traces/spans.jsonl`` (:func:`export`): each line an OTLP/JSON
``ExportTraceServiceRequest`` with one span (hex ids, times in unix nanoseconds as strings), which an
OpenTelemetry collector's ``filelog``/``otlpjsonfile`` receiver reads as it is. A run's spans have no common
parent span: the trace is the run.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from pathlib import Path
from typing import Any

from sda.config.settings import Settings

SERVICE = "sda-fusion"
STATUS_OK, STATUS_ERROR = 1, 2  # OTLP's Status.code
SPAN_KIND_INTERNAL = 1
ATTRIBUTES = {"records_in": "sda.records_in", "records_out": "sda.records_out", "quarantined": "sda.quarantined",
              "files_new": "sda.landed_files"}


def traces_root(settings: Settings) -> Path:
    return settings.lakehouse.parent / "traces"


def trace_id(run_id: str) -> str:
    """The 128-bit trace id (32 hex digits) of the DAG run ``run_id``: the same in every stage's process."""
    return hashlib.sha256(f"sda-run:{run_id}".encode()).hexdigest()[:32]


def span_id(run_id: str, stage: str, start_ns: int) -> str:
    """A 64-bit span id (16 hex digits): one per stage attempt."""
    return hashlib.sha256(f"sda-span:{run_id}:{stage}:{start_ns}".encode()).hexdigest()[:16]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # OTLP/JSON writes 64-bit integers as strings
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def span(stage: str, run_id: str, start_ns: int, end_ns: int, metrics: dict[str, Any],
         error: str | None = None) -> dict[str, Any]:
    """One stage run as an OTLP/JSON ``ExportTraceServiceRequest`` holding its span."""
    attributes = {"sda.run_id": run_id, "sda.stage": stage, "sda.mode": metrics.get("mode", "incremental")}
    attributes |= {name: metrics[key] for key, name in ATTRIBUTES.items() if metrics.get(key) is not None}
    status = {"code": STATUS_ERROR, "message": error} if error is not None else {"code": STATUS_OK}
    record = {
        "traceId": trace_id(run_id), "spanId": span_id(run_id, stage, start_ns), "name": f"stage {stage}",
        "kind": SPAN_KIND_INTERNAL, "startTimeUnixNano": str(start_ns), "endTimeUnixNano": str(end_ns),
        "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()], "status": status,
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": SERVICE}}]}
    return {"resourceSpans": [{"resource": resource,
                               "scopeSpans": [{"scope": {"name": "sda.pipeline.runtime"}, "spans": [record]}]}]}


def export(settings: Settings, request: dict[str, Any]) -> Path:
    """Append ``request`` (:func:`span`) as one line of the spans file, under a lock (stages end at once)."""
    root = traces_root(settings)
    root.mkdir(parents=True, exist_ok=True)
    path = root / "spans.jsonl"
    with open(path, "a") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        out.write(json.dumps(request, separators=(",", ":")) + "\n")
    return path


def spans(path: Path, run_id: str | None = None) -> list[dict[str, Any]]:
    """The spans of the file (of the run ``run_id``'s trace only, when given)."""
    out = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                out += [s for s in ss["spans"] if run_id is None or s["traceId"] == trace_id(run_id)]
    return out
