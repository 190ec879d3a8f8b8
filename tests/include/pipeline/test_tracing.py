"""sda.pipeline.tracing: a stage run as an OTLP/JSON span, its trace named by the DAG run. The expected shapes
are OTLP/JSON's (opentelemetry-proto's JSON encoding: lowerCamelCase fields, hex ids, 64-bit integers as
strings) and the ids are worked out here from their definition."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from types import SimpleNamespace

from sda.pipeline import tracing

RUN = "scheduled__2026-11-21T06:15:00+00:00"
METRICS = {"mode": "incremental", "records_in": 12, "records_out": 10, "quarantined": 2, "files_new": 3,
           "seconds": 4.5}


def _span(request: dict) -> dict:
    [rs] = request["resourceSpans"]
    assert rs["resource"]["attributes"] == [{"key": "service.name", "value": {"stringValue": "sda-fusion"}}]
    [ss] = rs["scopeSpans"]
    [span] = ss["spans"]
    return span


def test_a_stage_run_is_a_span_of_its_runs_trace():
    span = _span(tracing.span("ingest", RUN, 1_000_000_000, 5_500_000_000, METRICS))
    assert span["traceId"] == hashlib.sha256(f"sda-run:{RUN}".encode()).hexdigest()[:32]
    assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"]) and re.fullmatch(r"[0-9a-f]{16}", span["spanId"])
    assert (span["name"], span["kind"], span["startTimeUnixNano"], span["endTimeUnixNano"]) == (
        "stage ingest", 1, "1000000000", "5500000000")
    assert span["attributes"] == [
        {"key": "sda.run_id", "value": {"stringValue": RUN}},
        {"key": "sda.stage", "value": {"stringValue": "ingest"}},
        {"key": "sda.mode", "value": {"stringValue": "incremental"}},
        {"key": "sda.records_in", "value": {"intValue": "12"}},
        {"key": "sda.records_out", "value": {"intValue": "10"}},
        {"key": "sda.quarantined", "value": {"intValue": "2"}},
        {"key": "sda.landed_files", "value": {"intValue": "3"}},
    ]
    assert span["status"] == {"code": 1}


def test_every_stage_of_a_run_joins_one_trace_and_a_failure_is_an_error_span():
    ingest = _span(tracing.span("ingest", RUN, 1, 2, METRICS))
    fuse = _span(tracing.span("fuse", RUN, 3, 4, {}, error="the server stopped answering"))
    other = _span(tracing.span("ingest", RUN + "x", 1, 2, METRICS))
    assert ingest["traceId"] == fuse["traceId"] != other["traceId"]
    assert len({ingest["spanId"], fuse["spanId"], other["spanId"]}) == 3
    assert fuse["status"] == {"code": 2, "message": "the server stopped answering"}
    retry = _span(tracing.span("fuse", RUN, 5, 6, {}))
    assert retry["traceId"] == fuse["traceId"] and retry["spanId"] != fuse["spanId"]  # a retry: a second span


def test_spans_are_exported_a_line_each_and_read_back_by_run(tmp_path):
    settings = SimpleNamespace(lakehouse=tmp_path / "lakehouse")
    threads = [threading.Thread(target=tracing.export, args=(settings, tracing.span(f"s{i}", RUN, i, i + 1, METRICS)))
               for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tracing.export(settings, tracing.span("ingest", "another run", 1, 2, METRICS))
    path = tmp_path / "traces" / "spans.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == 11 and all(json.loads(line)["resourceSpans"] for line in lines)  # no line torn
    assert sorted(s["name"] for s in tracing.spans(path, RUN)) == sorted(f"stage s{i}" for i in range(10))
    assert len(tracing.spans(path)) == 11 and tracing.spans(tmp_path / "none.jsonl") == []
