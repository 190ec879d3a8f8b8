"""Event time end to end on hand-made data: the late-data gate (dedup), provisional -> final windows
(object_state), session windows (passes) that merge when a bridging observation arrives.

Every expected value below is worked out by hand from the rules in sda.pipeline.watermarks' docstring."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest

from sda.config.settings import load_settings
from sda.lake import schemas
from sda.lake.tables import BRONZE_BY_KIND, TABLES, ensure_tables
from tests import chain
from tests.jobs.test_correlate import EPOCH, catalog_row, observation
from tests.seed import append_rows

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)  # on an hour: state windows [T0, T0 + 1 h), ...


@pytest.fixture
def event_settings(tmp_path):
    return load_settings(env={}, lakehouse=tmp_path / "lakehouse", landing=tmp_path / "landing",
                         outbox=tmp_path / "outbox", shuffle_partitions=2, allowed_lateness_s=600,
                         dedup_window_s=10, state_window_s=3600, pass_gap_s=600)


def beacon(src: str, seconds: float) -> str:
    t_ms = int((T0 + dt.timedelta(seconds=seconds)).timestamp() * 1000)
    return f"BCN|src={src}|seq=1|t_ms={t_ms}|x_m=7000000|y_m=0|z_m=0|vx_ms=0|vy_ms=7500|vz_ms=0"


def land_batch(spark, settings, batch: int, payloads: list[str]) -> None:
    """Bronze rows as ingest batch ``batch`` would append them."""
    ingest = T0 + dt.timedelta(hours=2, minutes=batch)
    name = f"isl/batch{batch}.bcn"
    rows = [(hashlib.sha256(f"{name}:{i}".encode()).hexdigest(), "isl", name, i, p, ingest, ingest.date(), "ingest",
             batch, "1.0", None) for i, p in enumerate(payloads)]
    append_rows(spark, settings, BRONZE_BY_KIND["isl"], rows)


def isl_rows(batch: int, items) -> list[tuple]:
    """observations_dedup rows of ingest batch ``batch``: exact ISL fixes of (obs_id, norad_id, seconds
    after EPOCH)."""
    rows = []
    for obs_id, norad, seconds in items:
        measured = observation(obs_id, "isl", norad, EPOCH + dt.timedelta(seconds=seconds))
        row = dict(zip(schemas.DEDUPED.fieldNames(), measured))
        rows.append(tuple({**row, "ingest_batch": batch}[f] for f in schemas.DEDUPED.fieldNames()))
    return rows


def utc(t: dt.datetime) -> dt.datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def test_late_gate_routes_data_behind_the_watermark_and_counts_it(spark, event_settings):
    s = event_settings
    ensure_tables(spark, s)
    land_batch(spark, s, 1, [beacon("ISL-01", 0), beacon("ISL-01", 3000)])
    for stage in ("normalize", "dedup"):
        chain.run_stage(spark, s, stage, "run-1")
    # ISL-01 has seen T0+3000 s: its watermark is T0+2400 s (allowed lateness 600 s)
    land_batch(spark, s, 2, [
        beacon("ISL-01", 100),  # window [100, 110) ended long before the watermark: late by 2900 s
        beacon("ISL-01", 2395),  # window [2390, 2400) ends exactly at the watermark: final, so late (605 s)
        beacon("ISL-01", 2400),  # window [2400, 2410) is still open: on time
        beacon("ISL-02", 100),  # another sensor, nothing seen before: only the 1 h state window applies,
    ])                          # and [T0, T0+1 h) is open while the pipeline watermark is T0+2400 s
    chain.run_stage(spark, s, "normalize", "run-2")
    metrics = chain.run_stage(spark, s, "dedup", "run-2")
    assert (metrics["records_in"], metrics["records_out"], metrics["duplicates"], metrics["late"]) == (4, 2, 0, 2)
    # the pipeline watermark once batch 2 is in, as the run reports it: the least of the active sensors'
    # (ISL-02 has seen only T0+100 s: T0-500 s; ISL-01 T0+2400 s)
    assert dt.datetime.fromisoformat(metrics["watermark"]) == T0 - dt.timedelta(seconds=500)

    late = {round((utc(r["event_time"]) - T0).total_seconds()): r for r in TABLES["late_data"].read(spark, s).collect()}
    assert sorted(late) == [100, 2395]
    assert late[100]["lateness_s"] == pytest.approx(2900.0) and late[2395]["lateness_s"] == pytest.approx(605.0)
    assert utc(late[100]["window_end"]) == T0 + dt.timedelta(seconds=110)
    assert utc(late[2395]["window_end"]) == T0 + dt.timedelta(seconds=2400)
    assert {utc(r["watermark"]) for r in late.values()} == {T0 + dt.timedelta(seconds=2400)}
    assert all(r["late_stage"] == "dedup" and r["sensor_id"] == "ISL-01" for r in late.values())

    kept = {(r["sensor_id"], round((utc(r["event_time"]) - T0).total_seconds()))
            for r in TABLES["observations_dedup"].read(spark, s).collect()}
    assert kept == {("ISL-01", 0), ("ISL-01", 3000), ("ISL-01", 2400), ("ISL-02", 100)}
    [row] = TABLES["run_metrics"].read(spark, s).where("stage = 'dedup' AND run_id = 'run-2'").collect()
    assert (row["records_in"], row["records_out"], row["late"], row["conserved"]) == (4, 2, 2, True)


def _seconds(t) -> int:
    return round((utc(t) - EPOCH).total_seconds())


def test_windows_provisional_then_final_and_passes_merge(spark, event_settings):
    s = event_settings
    ensure_tables(spark, s)
    append_rows(spark, s, "catalog", [catalog_row(11, EPOCH), catalog_row(12, EPOCH)])

    def deliver(batch, items):
        append_rows(spark, s, "observations_dedup", isl_rows(batch, items))
        newest = EPOCH + dt.timedelta(seconds=max(sec for _, _, sec in items))
        oldest = EPOCH + dt.timedelta(seconds=min(sec for _, _, sec in items))
        append_rows(spark, s, "watermarks", [("ISL-01", "isl", batch, newest, oldest, len(items), "test")])
        return chain.run_stage(spark, s, "correlate", f"run-{batch}")

    def state():
        passes = {(r["norad_id"], _seconds(r["pass_start"]), _seconds(r["pass_end"])): (r["observations"], r["final"])
                  for r in TABLES["passes"].read(spark, s).collect()}
        windows = {(r["norad_id"], _seconds(r["window_start"])): (r["observations"], r["final"])
                   for r in TABLES["object_state"].read(spark, s).collect()}
        return passes, windows

    # batch 1: ISL-01 sees 11 at 0, 60, 120 and 900 s. Seen T+900 -> watermark T+300.
    first = deliver(1, [("a", 11, 0), ("b", 11, 60), ("c", 11, 120), ("d", 11, 900)])
    assert first["correlated"] == 4
    passes, windows = state()
    # 120 -> 900 is a 780 s gap (> 600): two passes, both open (a pass closes at end + 600 + 10 <= watermark)
    assert passes == {(11, 0, 120): (3, False), (11, 900, 900): (1, False)}
    assert windows == {(11, 0): (4, False)}  # [T, T+3600) ends after the watermark: provisional

    # batch 2: 500 s bridges the two passes (380 s and 400 s gaps); 5000 s opens the next window.
    # Seen T+5000 -> watermark T+4400: [T, T+3600) is final; the merged pass ends 900 + 610 <= 4400: final.
    second = deliver(2, [("e", 11, 500), ("f", 11, 5000)])
    assert second["state_windows_refired"] == 1
    passes, windows = state()
    assert passes == {(11, 0, 900): (5, True), (11, 5000, 5000): (1, False)}
    assert windows == {(11, 0): (5, True), (11, 3600): (1, False)}

    # batch 3: only object 12, far later (seen T+9000 -> watermark T+8400). Object 11's second window
    # and pass receive nothing, yet turn final as the watermark passes them.
    third = deliver(3, [("g", 12, 9000)])
    assert third["state_windows_finalized"] == 1 and third["passes_finalized"] == 1
    passes, windows = state()
    assert passes == {(11, 0, 900): (5, True), (11, 5000, 5000): (1, True), (12, 9000, 9000): (1, False)}
    assert windows == {(11, 0): (5, True), (11, 3600): (1, True), (12, 7200): (1, False)}


def test_observations_dedup_withdraws_are_undone_downstream(spark, event_settings):
    """dedup replaces a representative when an earlier copy arrives later (a delete + an insert in
    its change feed): correlate must drop the old one from gold and recompute its windows and passes."""
    s = event_settings
    ensure_tables(spark, s)
    append_rows(spark, s, "catalog", [catalog_row(11, EPOCH)])

    def add(batch, items):
        rows = isl_rows(batch, [(obs_id, 11, seconds) for obs_id, seconds in items])
        if rows:
            append_rows(spark, s, "observations_dedup", rows)
        append_rows(spark, s, "watermarks", [("ISL-01", "isl", batch, EPOCH + dt.timedelta(seconds=60), EPOCH, 1, "t")])

    def withdraw(obs_id):
        spark.sql(f"DELETE FROM delta.`{TABLES['observations_dedup'].path(s)}` WHERE obs_id = '{obs_id}'").collect()

    def gold():
        correlated = sorted(r["obs_id"] for r in TABLES["correlated"].read(spark, s).collect())
        passes = {(_seconds(r["pass_start"]), _seconds(r["pass_end"])): r["observations"]
                  for r in TABLES["passes"].read(spark, s).collect()}
        windows = {_seconds(r["window_start"]): r["observations"]
                   for r in TABLES["object_state"].read(spark, s).collect()}
        return correlated, passes, windows

    add(1, [("a", 0), ("b", 60)])
    chain.run_stage(spark, s, "correlate", "run-1")
    assert gold() == (["a", "b"], {(0, 60): 2}, {0: 2})

    withdraw("a")  # an earlier copy of "a" arrived: it becomes a2 at 1 s
    add(2, [("a2", 1)])
    second = chain.run_stage(spark, s, "correlate", "run-2")
    assert second["retracted"] == 1 and second["records_in"] == 1
    assert gold() == (["a2", "b"], {(1, 60): 2}, {0: 2})

    withdraw("b")  # withdrawn with no replacement
    add(3, [])
    third = chain.run_stage(spark, s, "correlate", "run-3")
    assert third["retracted"] == 1 and third["records_in"] == 0
    assert gold() == (["a2"], {(1, 1): 1}, {0: 1})
