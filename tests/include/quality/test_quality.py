"""sda.quality.gates on hand-made frames with known bad rows: exactly those checks fail with those counts,
quarantine rows leave the frame and land in ops/quarantine, a fail check closes the gate, a rerun adds
no data_quality rows, and the run's Data Docs page exists."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from sda.config.settings import load_settings
from sda.lake import schemas
from sda.lake.tables import TABLES
from sda.quality import gates as quality
from sda.quality.suites import suite_checks

T0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
RUN = "manual__2026-11-21T06:00:00+00:00"


def observation(obs_id, sensor_id="EGLIN", kind="radar", event_s=0.0, ingest_s=60.0, **values):
    row = {f.name: None for f in schemas.OBSERVATION.fields}
    event = T0 + dt.timedelta(seconds=event_s)
    row.update(obs_id=obs_id, sensor_id=sensor_id, sensor_kind=kind, event_time=event, event_date=event.date(),
               ingest_time=T0 + dt.timedelta(seconds=ingest_s), ingest_batch=1, bronze_id=f"b-{obs_id}-{len(values)}",
               source_file=f"{kind}/f1", run_id="normalize-run")
    if kind == "radar":
        row.update(range_m=1.2e6, az_rad=3.1, el_rad=math.radians(30.0), range_rate_ms=-2500.0)
    elif kind == "optical":
        row.update(ra_rad=1.0, dec_rad=-0.2)
    else:
        row.update(x_m=7.0e6, y_m=1.0e5, z_m=-2.0e5, vx_ms=10.0, vy_ms=7500.0, vz_ms=0.0)
    row.update(values)
    return tuple(row[f.name] for f in schemas.OBSERVATION.fields)


def silver_rows():
    return [
        observation("good-radar"),
        observation("good-radar-on-mask", el_rad=math.radians(1.0)),  # Eglin's mask exactly: passes
        observation("good-optical", sensor_id="SOCORRO", kind="optical"),
        observation("good-isl", sensor_id="ISL-01", kind="isl"),
        observation("good-late-within-skew", event_s=200.0, ingest_s=0.0),  # 200 s ahead < 300 s skew
        observation("bad-range", range_m=-5.0),
        # 2 deg is above Eglin's 1 deg mask but below Cape Cod's 3 deg: the site's own mask counts
        observation("bad-elevation", sensor_id="CAPECOD", el_rad=math.radians(2.0)),
        observation("bad-future", event_s=600.0, ingest_s=0.0),
        observation("good-radar", bronze_id="b-copy"),  # duplicate obs_id (fail)
    ]


@pytest.fixture(scope="module")
def q_settings(tmp_path_factory):
    base = tmp_path_factory.mktemp("quality")
    return load_settings(env={}, lakehouse=base / "lakehouse", landing=base / "landing", outbox=base / "outbox",
                         shuffle_partitions=2)


@pytest.fixture(scope="module")
def silver_result(spark, q_settings):
    df = spark.createDataFrame(silver_rows(), schemas.OBSERVATION)
    result = quality.validate(spark, q_settings, "silver", "observations", df, RUN)
    yield result, df
    result.release()


def test_exactly_the_bad_rows_fail(silver_result):
    result, _ = silver_result
    failed = {c.name: (c.severity, c.unexpected_count) for c in result.failed}
    assert failed == {
        "obs_id_unique": ("fail", 2),
        "range_m_positive": ("quarantine", 1),
        "el_above_site_mask": ("quarantine", 1),
        "event_time_not_future": ("quarantine", 1),
    }
    assert not result.gate_passed
    assert all(c.success for c in result.checks if c.name.endswith("_type") or c.name.endswith("_not_null"))
    assert result.check("range_m_positive").element_count == 9


def test_quarantine_rows_leave_the_frame_with_their_reason(spark, silver_result, q_settings):
    result, _ = silver_result
    assert result.quarantined_count == 3
    assert sorted(r["obs_id"] for r in result.passed.collect()) == sorted(
        ["good-radar", "good-radar", "good-radar-on-mask", "good-optical", "good-isl", "good-late-within-skew"])
    assert result.passed.columns == [f.name for f in schemas.OBSERVATION.fields]
    stored = TABLES["quarantine"].read(spark, q_settings).collect()
    reasons = sorted(r["reason"] for r in stored)
    assert reasons == ["silver.observations failed el_above_site_mask",
                       "silver.observations failed event_time_not_future",
                       "silver.observations failed range_m_positive"]
    assert {r["stage"] for r in stored} == {"quality"} and {r["run_id"] for r in stored} == {RUN}
    assert all(r["quarantine_id"] and r["raw"] and r["bronze_id"] for r in stored)


def test_data_quality_rows_and_data_docs(spark, silver_result, q_settings):
    result, _ = silver_result
    rows = TABLES["data_quality"].read(spark, q_settings).collect()
    assert len(rows) == len(result.checks) == len(suite_checks("observations", q_settings))
    by_name = {r["expectation"]: r for r in rows}
    dup = by_name["obs_id_unique"]
    assert (dup["severity"], dup["success"], dup["unexpected_count"], dup["element_count"]) == ("fail", False, 2, 9)
    assert by_name["range_m_positive"]["column"] == "range_m" and by_name["schema_columns_present"]["success"]
    assert {r["data_docs_url"] for r in rows} == {result.data_docs_url}
    assert result.data_docs_url.startswith("file://")
    page = result.data_docs_path
    assert page.is_file() and page.suffix == ".html"
    assert q_settings.lakehouse.parent / "reports" / "gx" in page.parents
    html = page.read_text()
    assert "sda.silver.observations" in html


def test_rerun_same_run_id_does_not_duplicate(spark, silver_result, q_settings):
    result, df = silver_result
    before_q = TABLES["quarantine"].read(spark, q_settings).count()
    again = quality.validate(spark, q_settings, "silver", "observations", df, RUN)
    again.release()
    assert TABLES["data_quality"].read(spark, q_settings).count() == len(result.checks)
    assert TABLES["quarantine"].read(spark, q_settings).count() == before_q
    assert {c.name for c in again.failed} == {c.name for c in result.failed}


def test_gold_alerts_and_bronze_severities(spark, settings):
    filler = {"string": "x", "double": 1.0, "long": 1, "integer": 1, "boolean": True,
              "timestamp": T0.replace(tzinfo=None)}
    alert = {f.name: None if f.nullable else filler[f.dataType.typeName()] for f in schemas.ALERT.fields}
    alert.update(event_id="e1", primary_id=1, secondary_id=2, screen_start=T0.replace(tzinfo=None),
                 tca=(T0 + dt.timedelta(hours=3)).replace(tzinfo=None), miss_m=500.0, rel_speed_ms=9000.0,
                 r_m=1.0, t_m=2.0, n_m=3.0, run_id="r", first_run_id="r", alert_id="a1", level="red", reason="miss",
                 status="new", version=1, content_hash="h", cdm_file="CDM-a1-v1.cdm", json_file="CDM-a1-v1.json",
                 pc=1e-5, pc_valid=True)
    rows = [
        dict(alert),
        dict(alert, event_id="e2", alert_id="a2", level="green", cdm_file="2", json_file="2"),  # unknown level
        dict(alert, event_id="e3", alert_id="a3", tca=(T0 + dt.timedelta(hours=30)).replace(tzinfo=None),
             cdm_file="3", json_file="3"),  # TCA beyond the 24 h horizon
        dict(alert, event_id="e4", alert_id="a4", pc=1.5, cdm_file="4", json_file="4"),  # not a probability
    ]
    schema = schemas.ALERT
    df = spark.createDataFrame([tuple(r[f.name] for f in schema.fields) for r in rows], schema)
    result = quality.validate(spark, settings, "gold", "alerts", df, "gold-run", write=False)
    try:
        failed = {c.name: c.unexpected_count for c in result.failed}
        assert {k: failed.get(k) for k in ("level_known", "tca_in_screening_window", "pc_is_probability")} == {
            "level_known": 1, "tca_in_screening_window": 1, "pc_is_probability": 1}, failed
        assert result.gate_passed  # quarantine only
        assert [r["alert_id"] for r in result.passed.collect()] == ["a1"]
    finally:
        result.release()


def test_unknown_table_and_wrong_layer(spark, settings):
    df = spark.createDataFrame([], schemas.OBSERVATION)
    with pytest.raises(ValueError, match="layer silver"):
        quality.validate(spark, settings, "gold", "observations", df, "r")
    with pytest.raises(KeyError, match="no data-quality suite"):
        suite_checks("object_state", settings)


def test_gx_objects_are_rewritten_only_when_the_code_changes(tmp_path):
    """The suite is written on first use and when its expectations change, and loaded otherwise."""
    from sda.quality.suites import Check

    root = tmp_path / "reports"
    context = quality._context(root)
    suite_file = root / "gx" / "expectations" / "sda" / "demo" / "t.json"  # GX splits the name at dots

    def checks(high):
        return [Check("ra_range", "warn", "ExpectColumnValuesToBeBetween",
                      {"column": "ra", "min_value": 0, "max_value": high}, "ra in range", "ra")]

    quality._checkpoint(context, root, "sda.demo.t", "t", checks(24))
    first = suite_file.read_text()
    assert '"max_value": 24' in first
    stamp = suite_file.stat().st_mtime_ns
    again = quality._checkpoint(context, root, "sda.demo.t", "t", checks(24))
    assert suite_file.stat().st_mtime_ns == stamp  # unchanged code: loaded, not written
    assert again.name == "sda.demo.t" and again.validation_definitions[0].suite.expectations[0].max_value == 24
    quality._checkpoint(context, root, "sda.demo.t", "t", checks(360))
    assert '"max_value": 360' in suite_file.read_text()  # changed code: rewritten


def space_weather_row(hour: int, kp: float, observed: bool, issued_hour: int = 9) -> tuple:
    start = T0.replace(hour=hour)
    row = {"interval_start": start, "interval_end": start + dt.timedelta(hours=3), "kp": kp,
           "kp_x10": round(kp * 10), "ap": 5, "ap_daily": 5, "f107_obs": 107.8, "f107_adj": 105.0,
           "f107_obs_ctr81": 113.5, "f107_adj_ctr81": 110.7, "f107_obs_lst81": 108.2, "f107_adj_lst81": 107.5,
           "observed": observed, "issued": T0.replace(hour=issued_hour),
           "section": "DAILY_PREDICTED", "source_file": "space_weather/SW-20261121T0900Z.txt", "source_sha256": "s",
           "record_no": 11, "bronze_id": f"b-{hour}", "ingest_time": T0, "ingest_batch": 1, "run_id": RUN}
    return tuple(row[f.name] for f in schemas.SPACE_WEATHER.fields)


def test_the_space_weather_suite(spark, settings):
    rows = [
        space_weather_row(0, 3.0, True),  # 00-03 ended by the 09:00 issue: observed
        space_weather_row(6, 22 / 3, True),  # 06-09 ends at 09:00 exactly: observed
        space_weather_row(9, 4 / 3, False),  # a forecast
        space_weather_row(12, 9.5, False),  # Kp above 9
        space_weather_row(15, 2.0, True),  # "observed" before it ended
        space_weather_row(18, 1.0, False),
        space_weather_row(18, 1.0, False),  # the key twice
    ]
    df = spark.createDataFrame(rows, schemas.SPACE_WEATHER)
    result = quality.validate(spark, settings, "silver", "space_weather", df, RUN, write=False)
    try:
        failed = {c.name: (c.severity, c.unexpected_count) for c in result.failed}
        assert failed == {"interval_start_unique": ("fail", 2), "kp_in_range": ("quarantine", 1),
                          "observed_as_issued": ("quarantine", 1)}
        assert not result.gate_passed and result.quarantined_count == 2
    finally:
        result.release()
