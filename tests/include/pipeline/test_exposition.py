"""sda.pipeline.exposition: the stages' KPIs as Prometheus textfiles. Expected texts are written out by hand,
and every exposition is also read back by a parser of the format's grammar written here (not the module's)."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from types import SimpleNamespace

from sda.pipeline import exposition

# the text format's sample line: name, optional {label="value",...}, value (Prometheus exposition 0.0.4)
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> dict[str, dict]:
    """{family: {"type": ..., "samples": {frozenset(labels): value}}}; fails on a line out of the grammar, a
    sample before its TYPE line, or a family's lines not in one group."""
    families: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in families, f"{name} has two groups"
            families[name], current = {"type": kind, "samples": {}}, name
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name = m.group(1)
        kind = families[current]["type"] if current is not None else None
        parts = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}.get(kind, ())
        assert name == current or name in {current + s for s in parts}, f"{name} outside its group"
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        if name != current:  # a histogram's or summary's series: its sample name is part of the key
            labels |= {("__name__", name)}
        families[current]["samples"][labels] = float(m.group(4))
    return families


def _settings(tmp_path: Path):
    return SimpleNamespace(lakehouse=tmp_path / "lakehouse")


RUN = {"seconds": 6.5, "records_in": 40, "records_out": 30, "quarantined": 8, "duplicates": 2, "late": 0,
       "lag_versions": 3, "lag_seconds": 41.25, "watermark": "2026-11-21T06:00:00+00:00"}


def test_one_ok_run_written_out():
    state = exposition.updated_state({}, RUN, ok=True, now=1_795_000_000.5)
    assert exposition.render(exposition.samples("dedup", state)) == """\
# HELP sda_stage_runs_total Stage runs ended, by outcome (ok, failed).
# TYPE sda_stage_runs_total counter
sda_stage_runs_total{stage="dedup",outcome="failed"} 0
sda_stage_runs_total{stage="dedup",outcome="ok"} 1
# HELP sda_stage_records_total Records through the stage's ok runs, by disposition.
# TYPE sda_stage_records_total counter
sda_stage_records_total{stage="dedup",disposition="in"} 40
sda_stage_records_total{stage="dedup",disposition="out"} 30
sda_stage_records_total{stage="dedup",disposition="quarantined"} 8
sda_stage_records_total{stage="dedup",disposition="duplicates"} 2
sda_stage_records_total{stage="dedup",disposition="late"} 0
# HELP sda_stage_last_run_seconds Wall seconds of the stage's last run.
# TYPE sda_stage_last_run_seconds gauge
sda_stage_last_run_seconds{stage="dedup"} 6.5
# HELP sda_stage_last_run_timestamp_seconds When the stage's last run ended (unix seconds).
# TYPE sda_stage_last_run_timestamp_seconds gauge
sda_stage_last_run_timestamp_seconds{stage="dedup"} 1795000000.5
# HELP sda_stage_last_success_timestamp_seconds When the stage's last ok run ended (unix seconds).
# TYPE sda_stage_last_success_timestamp_seconds gauge
sda_stage_last_success_timestamp_seconds{stage="dedup"} 1795000000.5
# HELP sda_stage_quarantine_ratio Quarantined over records in, of the stage's last run with records.
# TYPE sda_stage_quarantine_ratio gauge
sda_stage_quarantine_ratio{stage="dedup"} 0.2
# HELP sda_consumer_lag_versions Delta versions of its inputs the stage's last run started behind.
# TYPE sda_consumer_lag_versions gauge
sda_consumer_lag_versions{stage="dedup"} 3
# HELP sda_consumer_lag_seconds Age of the oldest input commit the stage's last run had not consumed.
# TYPE sda_consumer_lag_seconds gauge
sda_consumer_lag_seconds{stage="dedup"} 41.25
# HELP sda_stage_watermark_timestamp_seconds The stage's event-time watermark (unix seconds).
# TYPE sda_stage_watermark_timestamp_seconds gauge
sda_stage_watermark_timestamp_seconds{stage="dedup"} 1795240800
"""  # 2026-11-21T06:00:00Z is unix 1795240800 (20,778 days and 6 hours)


def test_counters_add_up_over_runs_and_a_failed_run_counts_as_failed_only(tmp_path):
    settings = _settings(tmp_path)
    exposition.record_stage_run(settings, "normalize", RUN, ok=True, now=100.0)
    exposition.record_stage_run(settings, "normalize", {**RUN, "records_in": 10, "quarantined": 1,
                                                        "records_out": 9, "duplicates": 0}, ok=True, now=200.0)
    path = exposition.record_stage_run(settings, "normalize", {"seconds": 1.0}, ok=False, now=300.0)
    got = parse(path.read_text())
    stage = ("stage", "normalize")
    runs = got["sda_stage_runs_total"]["samples"]
    assert runs == {frozenset({stage, ("outcome", "ok")}): 2.0, frozenset({stage, ("outcome", "failed")}): 1.0}
    records = {dict(k)["disposition"]: v for k, v in got["sda_stage_records_total"]["samples"].items()}
    assert records == {"in": 50, "out": 39, "quarantined": 9, "duplicates": 2, "late": 0}
    gauge = {name: next(iter(f["samples"].values())) for name, f in got.items() if f["type"] == "gauge"}
    assert gauge["sda_stage_last_run_timestamp_seconds"] == 300.0  # the failed run
    assert gauge["sda_stage_last_success_timestamp_seconds"] == 200.0
    assert gauge["sda_stage_quarantine_ratio"] == 0.1  # the last ok run's 1 of 10
    assert gauge["sda_stage_last_run_seconds"] == 1.0


def test_the_stages_files_served_as_one_exposition_each_family_once(tmp_path):
    settings = _settings(tmp_path)
    for stage in ("ingest", "normalize", "conjunction"):
        exposition.record_stage_run(settings, stage, RUN, ok=True, now=1.0)
    text = exposition.exposition(exposition.metrics_root(settings))
    got = parse(text)  # a second TYPE line of a family would fail here
    assert {dict(k)["stage"] for k in got["sda_stage_last_run_seconds"]["samples"]} == {
        "ingest", "normalize", "conjunction"}
    assert text.count("# TYPE sda_stage_runs_total counter") == 1
    assert exposition.exposition(tmp_path / "none") == ""  # before any run


def test_runs_ending_at_once_all_count(tmp_path):
    settings = _settings(tmp_path)
    threads = [threading.Thread(target=exposition.record_stage_run, args=(settings, "dedup", RUN, True))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = parse((exposition.metrics_root(settings) / "dedup.prom").read_text())
    assert got["sda_stage_runs_total"]["samples"][frozenset({("stage", "dedup"), ("outcome", "ok")})] == 8
    assert not list(exposition.metrics_root(settings).glob(".*.tmp"))


def test_label_values_and_numbers_as_the_format_writes_them():
    assert exposition.escape('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert [exposition.number(v) for v in (3.0, 0.25, float("nan"), float("inf"), -float("inf"))] == [
        "3", "0.25", "NaN", "+Inf", "-Inf"]


def test_a_sensors_watermark_is_the_newest_event_time_seen_and_never_moves_back():
    first = {"sensor_newest": {"EGLIN": {"kind": "radar", "newest_unix_s": 1000.0},
                               "ISL-01": {"kind": "isl", "newest_unix_s": 900.5}}}
    late = {"sensor_newest": {"EGLIN": {"kind": "radar", "newest_unix_s": 400.0}}}  # a late file of EGLIN's
    state = exposition.updated_state(exposition.updated_state({}, first, True, 1.0), late, True, 2.0)
    got = parse(exposition.render(exposition.samples("normalize", state)))
    assert got["sda_sensor_newest_event_timestamp_seconds"]["samples"] == {
        frozenset({("sensor", "EGLIN"), ("kind", "radar")}): 1000.0,
        frozenset({("sensor", "ISL-01"), ("kind", "isl")}): 900.5}


def test_open_alerts_are_the_last_screening_runs_and_propagation_errors_add_up():
    run1 = {"sgp4_errors": 2, "open_alerts_red": 1, "open_alerts_yellow": 3, "open_alerts_none": 0}
    run2 = {"sgp4_errors": 1, "open_alerts_red": 0, "open_alerts_yellow": 2, "open_alerts_none": 1}
    state = exposition.updated_state({}, run1, True, 1.0)
    state = exposition.updated_state(state, run2, True, 2.0)
    state = exposition.updated_state(state, {"sgp4_errors": 5}, False, 3.0)  # a failed run's figures are not counted
    got = parse(exposition.render(exposition.samples("conjunction", state)))
    stage = ("stage", "conjunction")
    assert got["sda_open_alerts"]["type"] == "gauge"
    assert got["sda_open_alerts"]["samples"] == {frozenset({stage, ("level", "red")}): 0.0,
                                                 frozenset({stage, ("level", "yellow")}): 2.0,
                                                 frozenset({stage, ("level", "none")}): 1.0}
    assert got["sda_propagation_errors_total"] == {"type": "counter", "samples": {frozenset({stage}): 3.0}}
    assert "sda_open_alerts" not in parse(exposition.render(exposition.samples(
        "dedup", exposition.updated_state({}, {"records_in": 1}, True, 1.0))))  # a stage that does not screen


def test_landing_to_alert_is_a_histogram_summed_over_the_ok_runs():
    """Two screening runs' histograms (sda.pipeline.latency) add up bucket by bucket, cumulative, with +Inf the
    count; a failed run's is not counted, and a run that measured nothing leaves the carried one."""
    bounds = ("5.0", "10.0", "15.0", "30.0", "45.0", "60.0", "90.0", "120.0", "300.0", "600.0", "900.0", "1800.0",
              "3600.0")
    # run 1: files 12 s, 50 s and 70 s from landing; run 2: one file, 3 s; run 3 (failed): 4000 s
    run1 = {"count": 3, "sum": 132.0, "max": 70.0,
            "buckets": dict(zip(bounds, [0, 0, 1, 1, 1, 2, 3, 3, 3, 3, 3, 3, 3]))}
    run2 = {"count": 1, "sum": 3.0, "max": 3.0, "buckets": dict(zip(bounds, [1] * 13))}
    state = exposition.updated_state({}, {"landing_to_alert": run1}, True, 1.0)
    state = exposition.updated_state(state, {"landing_to_alert": run2}, True, 2.0)
    state = exposition.updated_state(state, {"landing_to_alert": {**run2, "sum": 4000.0}}, False, 3.0)
    state = exposition.updated_state(state, {"landing_to_alert": {"count": 0, "sum": 0, "buckets": {}}}, True, 4.0)
    text = exposition.render(exposition.samples("conjunction", state))
    assert """\
# TYPE sda_landing_to_alert_seconds histogram
sda_landing_to_alert_seconds_bucket{stage="conjunction",le="5"} 1
sda_landing_to_alert_seconds_bucket{stage="conjunction",le="10"} 1
sda_landing_to_alert_seconds_bucket{stage="conjunction",le="15"} 2
sda_landing_to_alert_seconds_bucket{stage="conjunction",le="30"} 2
sda_landing_to_alert_seconds_bucket{stage="conjunction",le="45"} 2
sda_landing_to_alert_seconds_bucket{stage="conjunction",le="60"} 3
sda_landing_to_alert_seconds_bucket{stage="conjunction",le="90"} 4
""" in text, text
    assert text.endswith("""\
sda_landing_to_alert_seconds_bucket{stage="conjunction",le="3600"} 4
sda_landing_to_alert_seconds_bucket{stage="conjunction",le="+Inf"} 4
sda_landing_to_alert_seconds_sum{stage="conjunction"} 135
sda_landing_to_alert_seconds_count{stage="conjunction"} 4
"""), text
    got = parse(text)["sda_landing_to_alert_seconds"]
    assert got["type"] == "histogram"
    assert len(got["samples"]) == len(bounds) + 3  # the buckets, +Inf, sum and count, in one group
