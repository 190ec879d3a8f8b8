"""Formats that evolve, through ingest and normalize on Spark (issue 75, point 3): a lakehouse made before the
wire formats had versions takes files of a newer minor version (its bronze tables gain the version columns by
Delta's schema evolution, its old rows reading null), keeps their added fields in bronze, carries their
measurements to silver as version 1.0's; a file of another major version is quarantined whole; a silver table
made before an envelope column gains it on the next write.

Oracles: the files below, written by hand, and the values worked out from them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import pytest
from pyspark.sql import types as T

from jobs import ingest, normalize
from sda.lake import schemas
from sda.lake.tables import BRONZE_BY_KIND, TABLES, create_statement, ensure_tables
from tests.seed import append_rows

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
OLD = dt.datetime(2026, 11, 21, 6, 1, tzinfo=UTC)
V1_COLUMNS = 9  # bronze's columns before format_version and extra_fields
DET = '{"t": "2026-11-21T06:00:01.250Z", "range_km": 1234.5, "az_deg": 180.0, "el_deg": 30.0, "rr_km_s": -2.5'
RADAR_V11 = ('{"version": "1.1", "sensor": "EGLIN", "frame": 1, "sent": "2026-11-21T06:00:05.000Z", "beam": 3, '
             '"dets": [' + DET + ', "rcs_dbsm": -3.5}]}')
OPTICAL_V11 = ("#version=1.1\nstation,timestamp_utc,ra_hours,dec_deg,vmag,exposure_s,mag_err,filter\n"
               "SOCORRO,2026-11-21T06:00:02.000000Z,6.0,-45.0,11.2,2.0,0.1,V\n")
ISL_V11 = "BCN|version=1.1|src=ISL-01|seq=1|t_ms=1795240803000|x_m=7000000|y_m=0|z_m=0|vx_ms=0|vy_ms=7500|vz_ms=0|snr=9"
RADAR_V2 = ('{"version": "2.0", "sensor": "EGLIN", "frame": 2, "dets": [{"t": "2026-11-21T06:00:04Z", '
            '"slant": [1, 2]}]}\n')
LEGACY_OPTICAL = "SOCORRO,2026-11-21T06:00:00.500000Z,7.0,-40.0,11.0,2.0"


def _old_table(spark, settings, name: str, schema) -> None:
    """``name`` as a lakehouse of an earlier release made it: ``schema``, one of its columns fewer."""
    spark.sql(create_statement(dataclasses.replace(TABLES[name], schema=schema), settings)).collect()


@pytest.fixture(scope="module")
def lakehouse(module_spark, make_settings):
    settings = make_settings("format-evolution")
    return settings, _evolve(module_spark, settings)


@pytest.fixture
def settings(lakehouse):
    return lakehouse[0]


@pytest.fixture
def evolved(lakehouse):
    return lakehouse[1]


def _evolve(spark, settings):
    """A lakehouse with pre-version bronze tables holding one optical row, and a silver table without
    ``site_alt_m`` holding one observation; then the versioned files landed, ingested and normalized."""
    old_bronze = T.StructType(schemas.BRONZE.fields[:V1_COLUMNS])
    for spec in BRONZE_BY_KIND.values():
        _old_table(spark, settings, spec.name, old_bronze)
    old_silver = T.StructType([f for f in schemas.OBSERVATION.fields if f.name != "site_alt_m"])
    _old_table(spark, settings, "observations", old_silver)
    ensure_tables(spark, settings)
    append_rows(spark, settings, dataclasses.replace(BRONZE_BY_KIND["optical"], schema=old_bronze),
                [("legacy-0", "optical", "optical/legacy.csv", 1, LEGACY_OPTICAL, OLD, OLD.date(), "old", 1)])
    seeded = {"obs_id": "seeded", "sensor_id": "SOCORRO", "sensor_kind": "optical", "event_time": OLD,
              "event_date": OLD.date(), "ingest_time": OLD, "ingest_batch": 1, "ra_rad": 1.0, "dec_rad": 0.5,
              "site_lat_deg": 33.8, "site_lon_deg": -106.7, "bronze_id": "b-seeded",
              "source_file": "optical/seeded.csv", "run_id": "old"}
    append_rows(spark, settings, dataclasses.replace(TABLES["observations"], schema=old_silver),
                [tuple(seeded.get(f.name) for f in old_silver.fields)])
    for rel, text in (("radar/v11.jsonl", RADAR_V11 + "\n"), ("optical/v11.csv", OPTICAL_V11),
                      ("isl/v11.bcn", ISL_V11 + "\n"), ("radar/v2.jsonl", RADAR_V2)):
        path = settings.landing / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    ingest.main(["--start", "2026-11-21T06:00:00Z", "--end", "2099-01-01T00:00:00Z", "--run-id", "ing-1"],
                settings=settings, spark=spark)
    metrics = normalize.main(["--start", "2026-11-21T06:00:00Z", "--end", "2026-11-21T06:15:00Z",
                              "--run-id", "norm-1"], settings=settings, spark=spark)
    return metrics


def _bronze(spark, settings, kind):
    return {r["source_file"]: r.asDict() for r in BRONZE_BY_KIND[kind].read(spark, settings).collect()}


def test_bronze_gains_the_version_columns_and_keeps_the_added_fields(spark, settings, evolved):
    optical = _bronze(spark, settings, "optical")
    assert optical["optical/legacy.csv"]["format_version"] is None  # written before the column existed
    assert optical["optical/legacy.csv"]["extra_fields"] is None
    assert (optical["optical/v11.csv"]["record_no"], optical["optical/v11.csv"]["format_version"]) == (2, "1.1")
    assert optical["optical/v11.csv"]["extra_fields"] == {"mag_err": "0.1", "filter": "V"}
    radar = _bronze(spark, settings, "radar")
    assert set(radar) == {"radar/v11.jsonl"}  # the version-2 file reached no bronze table
    assert radar["radar/v11.jsonl"]["extra_fields"] == {"beam": "3", "dets.0.rcs_dbsm": "-3.5"}
    assert radar["radar/v11.jsonl"]["payload"] == RADAR_V11  # the record as landed
    isl = _bronze(spark, settings, "isl")
    assert (isl["isl/v11.bcn"]["format_version"], isl["isl/v11.bcn"]["extra_fields"]) == ("1.1", {"snr": "9"})


def test_a_file_of_another_major_version_is_quarantined_whole_naming_it(spark, settings, evolved):
    rows = TABLES["quarantine"].read(spark, settings).where("source_file = 'radar/v2.jsonl'").collect()
    assert [(r["record_no"], bytes(r["raw"]).decode()) for r in rows] == [(0, RADAR_V2)]
    assert rows[0]["reason"] == ("radar format version 2.0 is not read here (this reader reads version 1.x): "
                                 "the whole file is quarantined")
    ledger = {r["file_path"]: (r["records"], r["quarantined"])
              for r in TABLES["ingested_files"].read(spark, settings).collect()}
    assert ledger["radar/v2.jsonl"] == (0, 1)


def test_the_newer_minor_versions_measurements_reach_silver_as_version_1s(spark, settings, evolved):
    assert (evolved["records_in"], evolved["records_out"], evolved["quarantined"]) == (4, 4, 0)  # legacy row too
    silver = {r["source_file"]: r.asDict() for r in TABLES["observations"].read(spark, settings).collect()}
    assert set(silver) == {"optical/seeded.csv", "optical/legacy.csv", "radar/v11.jsonl", "optical/v11.csv",
                           "isl/v11.bcn"}
    assert silver["optical/legacy.csv"]["ra_rad"] == pytest.approx(7 * math.pi / 12, rel=1e-12)  # a pre-version row
    socorro = silver["optical/v11.csv"]
    assert socorro["ra_rad"] == pytest.approx(math.pi / 2, rel=1e-12)  # 6 h, not a column shifted by the added ones
    assert socorro["dec_rad"] == pytest.approx(-math.pi / 4, rel=1e-12)
    assert silver["radar/v11.jsonl"]["range_m"] == 1234500.0
    assert (silver["isl/v11.bcn"]["x_m"], silver["isl/v11.bcn"]["vy_ms"]) == (7e6, 7500.0)


def test_a_silver_table_made_before_an_envelope_column_gains_it(spark, settings, evolved):
    silver = {r["source_file"]: r.asDict() for r in TABLES["observations"].read(spark, settings).collect()}
    assert silver["optical/seeded.csv"]["site_alt_m"] is None  # written before the table had the column
    assert silver["optical/v11.csv"]["site_alt_m"] == 1510.0  # the registry's SOCORRO
    assert sorted(TABLES["observations"].read(spark, settings).columns) == sorted(schemas.OBSERVATION.fieldNames())


def test_the_stage_runs_are_in_their_prometheus_textfiles(settings, evolved):
    """Every stage run adds itself to its textfile (sda.pipeline.exposition): here normalize's one run."""
    from sda.pipeline.exposition import metrics_root
    from tests.include.pipeline.test_exposition import parse

    got = parse((metrics_root(settings) / "normalize.prom").read_text())
    records = {dict(k)["disposition"]: v for k, v in got["sda_stage_records_total"]["samples"].items()}
    assert records["in"] == evolved["records_in"] == 4 and records["quarantined"] == 0
    assert list(got["sda_stage_runs_total"]["samples"].values()) == [0.0, 1.0]  # failed 0, ok 1
    assert (metrics_root(settings) / "ingest.prom").is_file()
    # per sensor, the newest event time landed: EGLIN's radar frame at 06:00:01.25 (RADAR_V11)
    eglin = got["sda_sensor_newest_event_timestamp_seconds"]["samples"][frozenset({("sensor", "EGLIN"),
                                                                                    ("kind", "radar")})]
    assert eglin == dt.datetime(2026, 11, 21, 6, 0, 1, 250000, tzinfo=UTC).timestamp()


def test_the_stage_runs_are_spans_of_their_runs_traces(settings, evolved):
    """Every stage run is a span of its run's trace (sda.pipeline.tracing), carrying its run id."""
    from sda.pipeline import tracing

    path = tracing.traces_root(settings) / "spans.jsonl"
    [span] = tracing.spans(path, "norm-1")
    attributes = {a["key"]: a["value"] for a in span["attributes"]}
    assert attributes["sda.run_id"] == {"stringValue": "norm-1"}
    assert attributes["sda.stage"] == {"stringValue": "normalize"}
    assert attributes["sda.records_in"] == {"intValue": "4"} and span["status"] == {"code": 1}
    assert [s["name"] for s in tracing.spans(path, "ing-1")] == ["stage ingest"]
