"""dedup: silver observations -> observations_dedup (exact and near duplicates folded, order-independent)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from pathlib import Path

from pyspark.sql import types as T

from jobs import dedup
from sda.lake import schemas
from sda.lake.tables import TABLES, ensure_tables
from sda.pipeline import sinks

PROJECT_ROOT = Path(__file__).resolve().parents[2]
UTC = dt.timezone.utc
BASE = dt.datetime(2026, 11, 21, 6, 0, 0, tzinfo=UTC)  # a 10 s window boundary (dedup_window_s = 10)
ARCSEC = math.radians(1 / 3600)


def obs(obs_id, sensor_id, kind, dt_s, batch=1, **values):
    row = {f.name: None for f in schemas.OBSERVATION.fields}
    event_time = BASE + dt.timedelta(seconds=dt_s)
    row.update(obs_id=obs_id, sensor_id=sensor_id, sensor_kind=kind, event_time=event_time,
               event_date=event_time.date(), ingest_time=BASE + dt.timedelta(minutes=1), ingest_batch=batch,
               bronze_id=f"bronze-{obs_id}", source_file="f", run_id="norm-1", **values)
    return row


def radar(obs_id, dt_s, range_m=1_000_000.0, az=1.0, el=0.5, sensor="EGLIN"):
    return obs(obs_id, sensor, "radar", dt_s, range_m=range_m, az_rad=az, el_rad=el, range_rate_ms=0.0)


ROWS = {
    r["obs_id"]: r
    for r in [
        radar("a", 0.000),
        radar("b", 0.050, range_m=1_000_050.0, az=1.0005),  # 50 m, 0.029 deg from a, 50 ms later: a's copy
        radar("c", 5.000),  # a genuine later detection of the same object: kept
        radar("d", 0.020, range_m=1_000_500.0),  # 500 m off: another object
        radar("x1", 9.980, range_m=2_000_000.0, az=2.0, el=0.3),  # window 0 ...
        radar("x2", 10.030, range_m=2_000_020.0, az=2.0, el=0.3),  # ... and its copy in window 1
        radar("e", 0.000, sensor="COBRADANE"),  # another sensor: an independent measurement
        radar("m2", 0.000, sensor="THULE"),
        radar("m1", 0.000, sensor="THULE"),  # same time and values as m2: the smaller id represents
        obs("f", "SOCORRO", "optical", 0.000, ra_rad=1.0, dec_rad=0.2),
        obs("g", "SOCORRO", "optical", 0.080, ra_rad=1.0, dec_rad=0.2 + 3 * ARCSEC),  # 3" from f
        obs("h", "SOCORRO", "optical", 0.080, ra_rad=1.0, dec_rad=0.2 + 10 * ARCSEC),  # 10" from f, 7" from g
        obs("i", "ISL-01", "isl", 0.000, x_m=7_000_000.0, y_m=0.0, z_m=0.0),
        obs("j", "ISL-01", "isl", 0.010, x_m=7_000_300.0, y_m=0.0, z_m=0.0),  # 300 m from i
        obs("k", "ISL-01", "isl", 0.010, x_m=7_001_000.0, y_m=0.0, z_m=0.0),  # 1000 m from i, 700 m from j
    ]
}
EXPECTED = sorted([("a", 2), ("c", 1), ("d", 1), ("x1", 2), ("e", 1), ("m1", 2), ("f", 2), ("h", 1), ("i", 2),
                   ("k", 1)])


def add_silver(spark, settings, ids):
    ensure_tables(spark, settings)
    rows = [tuple(ROWS[i][f.name] for f in schemas.OBSERVATION.fields) for i in ids]
    sinks.merge_new(spark, spark.createDataFrame(rows, schemas.OBSERVATION), "observations", settings)


def run_dedup(spark, settings, run_id):
    return dedup.main(["--start", "2026-11-21T06:00:00Z", "--end", "2026-11-21T06:15:00Z", "--run-id", run_id],
                      settings=settings, spark=spark)


def result(spark, settings):
    return sorted((r["obs_id"], r["copies"]) for r in TABLES["observations_dedup"].read(spark, settings).collect())


def test_exact_and_near_duplicates_collapse_and_sensors_stay_apart(spark, settings):
    add_silver(spark, settings, list(ROWS))
    metrics = run_dedup(spark, settings, "dedup-1")

    assert result(spark, settings) == EXPECTED
    assert (metrics["records_in"], metrics["records_out"], metrics["quarantined"],
            metrics["duplicates"]) == (15, 10, 0, 5)
    assert metrics["clusters_written"] == 10  # one representative per cluster of EXPECTED
    assert metrics["records_in"] == metrics["records_out"] + metrics["quarantined"] + metrics["duplicates"]
    kept = {r["obs_id"]: r for r in TABLES["observations_dedup"].read(spark, settings).collect()}
    # the representative is the silver row itself, with its lineage
    assert (kept["a"]["range_m"], kept["a"]["bronze_id"], kept["a"]["run_id"]) == (1_000_000.0, "bronze-a", "norm-1")

    # replaying the same silver rows (exact duplicates by obs_id) changes nothing
    add_silver(spark, settings, list(ROWS))
    again = run_dedup(spark, settings, "dedup-2")
    assert again["records_in"] == 0 and result(spark, settings) == EXPECTED


def test_result_does_not_depend_on_arrival_order(spark, settings):
    # the copies arrive first, their originals (earlier event times) one run later
    add_silver(spark, settings, ["b", "x2", "g", "j", "m2", "k", "d"])
    first = run_dedup(spark, settings, "dedup-1")
    assert result(spark, settings) == sorted([("b", 1), ("x2", 1), ("g", 1), ("j", 1), ("m2", 1), ("k", 1), ("d", 1)])
    assert (first["records_in"], first["records_out"], first["duplicates"]) == (7, 7, 0)

    add_silver(spark, settings, ["a", "c", "x1", "e", "f", "h", "i", "m1"])
    second = run_dedup(spark, settings, "dedup-2")
    assert result(spark, settings) == EXPECTED  # b, x2 (across a window boundary), g, j, m2 replaced
    assert (second["records_in"], second["records_out"], second["duplicates"]) == (8, 8, 0)
    assert second["rows_deleted"] == 5

    # the other order, all in one run, in a fresh lakehouse: same table
    other = dataclasses.replace(settings, lakehouse=settings.lakehouse.parent / "lakehouse-2")
    add_silver(spark, other, ["m1", "k", "h", "c", "a"])
    add_silver(spark, other, ["x2", "x1", "j", "i", "g", "f", "e", "d", "b", "m2"])
    run_dedup(spark, other, "dedup-1")
    assert result(spark, other) == EXPECTED


def test_a_replay_clusters_its_range_with_the_rows_just_outside_it(spark, settings):
    add_silver(spark, settings, list(ROWS))
    run_dedup(spark, settings, "dedup-1")
    files = data_files(spark, settings)
    # the range cuts clusters: b (0.050 s) is a's copy (0.000 s, before the range), x1 (9.980 s) has its
    # copy x2 (10.030 s) after it; b, c, g, h and x1 are in the range
    metrics = dedup.main(["--start", "2026-11-21T06:00:00.030Z", "--end", "2026-11-21T06:00:10Z",
                          "--run-id", "replay-1", "--replay"], settings=settings, spark=spark)

    assert result(spark, settings) == EXPECTED  # not b (nor x1 with one copy) as a representative of its own
    assert (metrics["records_in"], metrics["records_out"], metrics["near_duplicates"]) == (5, 3, 2)  # c, h, x1
    # the clusters with a member in the touched windows (window 0 of EGLIN and of SOCORRO), older
    # members included: a+b, c, d, x1+x2; f+g, h
    assert metrics["clusters_written"] == 6
    assert (metrics["rows_inserted"], metrics["rows_updated"], metrics["rows_deleted"]) == (0, 0, 0)
    assert data_files(spark, settings) == files  # and no file was rewritten with the same rows


def data_files(spark, settings):
    table = TABLES["observations_dedup"].read(spark, settings)
    return sorted(r[0] for r in table.select("_metadata.file_path").distinct().collect())


class _RecordingSession:
    """The shared session, noting Delta's source-materialization setting as each MERGE starts."""

    def __init__(self, spark):
        self._spark, self.seen = spark, []

    def __getattr__(self, name):
        return getattr(self._spark, name)

    def sql(self, statement, *args, **kwargs):
        if statement.startswith("MERGE"):
            self.seen.append(self._spark.conf.get(sinks.MATERIALIZE_SOURCE, None))
        return self._spark.sql(statement, *args, **kwargs)


def test_a_merge_reads_its_own_snapshot_of_the_source_and_restores_the_session(spark, settings):
    # dedup's MERGE deletes, updates and inserts, so Delta would copy its source a second time on top
    # of the snapshot sinks.merge already took; the copy is switched off for that MERGE only
    ensure_tables(spark, settings, ["observations_dedup"])
    fields = [f.name for f in schemas.DEDUPED.fields]
    members = lambda copies: spark.createDataFrame(  # noqa: E731
        [tuple({**ROWS[i], "copies": n}[f] for f in fields) + (True,) for i, n in copies],
        T.StructType(schemas.DEDUPED.fields + [T.StructField("is_rep", T.BooleanType())]))
    source = members((("a", 2), ("c", 1)))
    recording = _RecordingSession(spark)
    span = (BASE - dt.timedelta(minutes=1), BASE + dt.timedelta(minutes=1))  # the rows' event times and more
    spark.conf.set(sinks.MATERIALIZE_SOURCE, "all")
    try:
        counts = dedup.write_clusters(recording, source, settings, *span)
        assert spark.conf.get(sinks.MATERIALIZE_SOURCE) == "all"  # the user's setting, back after the MERGE
    finally:
        spark.conf.unset(sinks.MATERIALIZE_SOURCE)
    # unset before: unset after (a's copies change, so this MERGE runs: one with nothing to change is not)
    assert dedup.write_clusters(recording, members((("a", 3),)), settings, *span)["rows_updated"] == 1
    assert spark.conf.get(sinks.MATERIALIZE_SOURCE, None) is None
    assert recording.seen == ["none", "none"]
    assert counts == {"rows_inserted": 2, "rows_updated": 0, "rows_deleted": 0}
    assert result(spark, settings) == [("a", 3), ("c", 1)]


def test_copies_across_an_hour_boundary_are_one_group_seen_from_both_hours(spark, settings):
    # BASE is on the hour: a sensor's rows are clustered an hour at a time (envelope.CLUSTER_CHUNK_S),
    # each hour with a minute of its neighbours. A chain of copies 40 to 50 ms apart across the
    # boundary is one group whichever hour a member is in: its earliest member represents all four.
    rows = [radar("y4", -0.080, range_m=3_000_000.0, az=3.0, el=0.2),
            radar("y1", -0.030, range_m=3_000_040.0, az=3.0, el=0.2),
            radar("y2", 0.020, range_m=3_000_080.0, az=3.0, el=0.2),
            radar("y3", 0.060, range_m=3_000_120.0, az=3.0, el=0.2),  # 120 m from y4: a copy only by the chain
            radar("z", 0.030, range_m=3_000_700.0, az=3.0, el=0.2),  # 580 m from the nearest: another object
            radar("w", 3_599.990, range_m=4_000_000.0, az=1.0, el=0.4),  # the other end of the hour ...
            radar("w2", 3_600.040, range_m=4_000_010.0, az=1.0, el=0.4)]  # ... and its copy in the next one
    ensure_tables(spark, settings)
    sinks.merge_new(spark, spark.createDataFrame([tuple(r[f.name] for f in schemas.OBSERVATION.fields) for r in rows],
                                                 schemas.OBSERVATION), "observations", settings)
    metrics = dedup.main(["--start", "2026-11-21T05:00:00Z", "--end", "2026-11-21T08:00:00Z", "--run-id", "d-1"],
                         settings=settings, spark=spark)
    assert result(spark, settings) == [("w", 2), ("y4", 4), ("z", 1)]
    assert (metrics["records_in"], metrics["records_out"], metrics["near_duplicates"]) == (7, 3, 4)
