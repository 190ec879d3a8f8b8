"""jobs/correlate.py end to end on a few hand-made observations (generated from the catalogue's own
TLEs with sda.orbit.frames): association, uncorrelated reasons, the object_state fold, idempotent replay."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib

import numpy as np
import pytest

from sda.lake import schemas
from sda.lake.tables import TABLES, ensure_tables
from sda.orbit import screening
from sda.orbit.frames import propagate, radec, razel, teme_to_ecef
from sda.pipeline import runtime

UTC = dt.timezone.utc
EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
EGLIN = (30.57222, -86.21444, 34.0)
SOCORRO = (33.81694, -106.66000, 1510.0)
ELEMENTS = {
    11: (700.0, 0.0010, 98.0, 10.0, 0.0, 0.0),
    12: (700.0, 0.0010, 98.0, 10.0, 0.0, 20.0),
    13: (550.0, 0.0002, 53.0, 100.0, 0.0, 200.0),
    15: (35786.0, 0.0002, 0.05, 0.0, 0.0, 120.0),
    99: (900.0, 0.0010, 70.0, 200.0, 0.0, 50.0),  # observed, but not in the catalogue
}


def load_job():
    return importlib.import_module("jobs.correlate")  # jobs/ is a package on pytest's path


def args(run_id):
    return argparse.Namespace(start=EPOCH, end=EPOCH + dt.timedelta(hours=1), run_id=run_id)


def run_job(job, spark, settings, run_id):
    """The job as Airflow runs it (through runtime.run_stage: metrics, then the progress commit)."""
    a = args(run_id)
    return job.main(["--start", a.start.isoformat(), "--end", a.end.isoformat(), "--run-id", run_id],
                    settings=settings, spark=spark)


def tle(norad_id, epoch=EPOCH, elements=None):
    return screening.tle_from_elements(norad_id, epoch, *(elements or ELEMENTS[norad_id]))


def teme_state(norad_id, when):
    [sat] = screening.satrecs_from_lines(*zip(tle(norad_id)))
    _, r, v = propagate([sat], np.array([when.timestamp()]))
    return r[0, 0], v[0, 0]


def observation(obs_id, kind, norad_id, when, **offsets):
    """A DEDUPED row measuring ``norad_id`` exactly, plus ``offsets`` added to named measurements."""
    values = dict.fromkeys(f.name for f in schemas.DEDUPED.fields)
    r, v = teme_state(norad_id, when)
    if kind == "radar":
        rng, az, el, rr = razel(*teme_to_ecef(r, v, when.timestamp()), *EGLIN)
        values.update(sensor_id="EGLIN", range_m=float(rng) * 1000, az_rad=float(az), el_rad=float(el),
                      range_rate_ms=float(rr) * 1000, site_lat_deg=EGLIN[0], site_lon_deg=EGLIN[1], site_alt_m=EGLIN[2])
    elif kind == "optical":
        ra, dec = radec(r, *SOCORRO, when.timestamp())
        values.update(sensor_id="SOCORRO", ra_rad=float(ra), dec_rad=float(dec), site_lat_deg=SOCORRO[0],
                      site_lon_deg=SOCORRO[1], site_alt_m=SOCORRO[2])
    else:
        values.update(sensor_id="ISL-01", x_m=r[0] * 1000, y_m=r[1] * 1000, z_m=r[2] * 1000,
                      vx_ms=v[0] * 1000, vy_ms=v[1] * 1000, vz_ms=v[2] * 1000)
    values.update(obs_id=obs_id, sensor_kind=kind, event_time=when, event_date=when.date(), ingest_time=when,
                  ingest_batch=1, bronze_id="b-" + obs_id, source_file="test", run_id="test", copies=1)
    for name, offset in offsets.items():
        values[name] += offset
    return tuple(float(x) if isinstance(x, np.floating) else x for x in (values[f.name] for f in schemas.DEDUPED.fields))


def append(spark, settings, table, rows, schema):
    spark.createDataFrame(rows, schema).write.format("delta").mode("append").save(TABLES[table].path(settings))


def catalog_row(norad_id, epoch, elements=None):
    l1, l2 = tle(norad_id, epoch, elements)
    return (norad_id, f"OBJ {norad_id}", epoch, l1, l2, 500.0, 700.0, "test", epoch, "test")


def table(spark, settings, name):
    return {r["obs_id"] if "obs_id" in r else (r["norad_id"], r["window_start"]): r.asDict()
            for r in TABLES[name].read(spark, settings).collect()}


def test_correlate_end_to_end_and_replay(spark, settings):
    job = load_job()
    ensure_tables(spark, settings)
    catalog = [catalog_row(n, EPOCH) for n in (11, 12, 13, 15)]
    # an older element set of 13 on a very different orbit: only the newest epoch may be used
    catalog.append(catalog_row(13, EPOCH - dt.timedelta(days=2), (550.0, 0.0002, 53.0, 190.0, 0.0, 20.0)))
    append(spark, settings, "catalog", catalog, schemas.CATALOG)

    t1 = EPOCH + dt.timedelta(minutes=10, seconds=1.5)
    t2 = EPOCH + dt.timedelta(minutes=25, seconds=30.25)  # another bucket, same hour
    t3 = EPOCH + dt.timedelta(hours=1, minutes=5)  # next hour window
    obs = [
        observation("r13", "radar", 13, t1),
        observation("r11", "radar", 11, t1),
        observation("i11", "isl", 11, t2),
        observation("o15", "optical", 15, t2),
        observation("r99", "radar", 99, t1),
        observation("i12", "isl", 12, t3),
    ]
    append(spark, settings, "observations_dedup", obs, schemas.DEDUPED)

    metrics = run_job(job, spark, settings, "run-1")
    assert metrics["observations"] == 6 and metrics["correlated"] == 5 and metrics["uncorrelated"] == 1
    correlated = table(spark, settings, "correlated")
    assert {k: v["norad_id"] for k, v in correlated.items()} == {"r13": 13, "r11": 11, "i11": 11, "o15": 15, "i12": 12}
    assert all(v["residual_m"] < 1.0 and v["candidates"] == 1 and not v["ambiguous"] for v in correlated.values())
    assert all(v["correlate_run_id"] == "run-1" for v in correlated.values())
    assert correlated["o15"]["sensor_id"] == "SOCORRO" and correlated["o15"]["ra_rad"] is not None
    [(obs_id, unc)] = table(spark, settings, "uncorrelated").items()
    assert obs_id == "r99" and unc["reason"] == "no catalogue object inside the gate"
    # a near miss (within a few gates) would be named; nothing of the catalogue is that close to 99
    assert unc["nearest_norad_id"] is None or unc["nearest_residual_m"] > 50_000

    state = table(spark, settings, "object_state")
    hour0, hour1 = dt.datetime(2026, 11, 21, 6), dt.datetime(2026, 11, 21, 7)
    assert set(state) == {(11, hour0), (13, hour0), (15, hour0), (12, hour1)}
    s11 = state[(11, hour0)]
    assert s11["observations"] == 2 and s11["last_observed"] == t2.replace(tzinfo=None)
    assert s11["residual_rms_m"] >= abs(s11["residual_mean_m"]) and s11["residual_rms_m"] < 1.0

    # nothing new: a second run reads nothing and changes nothing
    assert run_job(job, spark, settings, "run-2")["observations"] == 0
    # a crash before the progress commit means a full replay: same tables, nothing doubled
    runtime.commit_progress(spark, "correlate", {"observations_dedup": -1}, "reset", settings)
    replay = run_job(job, spark, settings, "run-3")
    assert replay["observations"] == 6
    assert TABLES["correlated"].read(spark, settings).count() == 5
    assert TABLES["uncorrelated"].read(spark, settings).count() == 1
    again = table(spark, settings, "object_state")
    assert {k: v["observations"] for k, v in again.items()} == {k: v["observations"] for k, v in state.items()}

    # a late observation of 11 in the first hour refolds that window from the whole table
    append(spark, settings, "observations_dedup", [observation("late11", "isl", 11, EPOCH + dt.timedelta(minutes=50))],
           schemas.DEDUPED)
    assert run_job(job, spark, settings, "run-4")["correlated"] == 1
    state = table(spark, settings, "object_state")
    assert state[(11, hour0)]["observations"] == 3 and state[(11, hour0)]["run_id"] == "run-4"
    assert state[(13, hour0)]["observations"] == 1


def test_empty_catalogue_is_an_error_and_consumes_nothing(spark, settings):
    job = load_job()
    ensure_tables(spark, settings)
    append(spark, settings, "observations_dedup", [observation("x", "radar", 11, EPOCH)], schemas.DEDUPED)
    with pytest.raises(RuntimeError, match="catalog is empty"):
        run_job(job, spark, settings, "run-1")
    assert runtime.last_consumed(spark, "correlate", "observations_dedup", settings) == -1


def test_object_state_residual_statistics_per_measurement(spark, settings):
    """Signed residuals per measurement type in ``correlated`` and their per-window count, mean and
    sample variance in ``object_state``, against values computed by hand; a late observation refolds.
    The gate runs with the fixed 2 km sigma override: the offsets (up to 600 m, 30 urad at GEO) are
    then far inside it (d2 < 1); the default model, ten minutes after epoch, is tighter than that."""
    import dataclasses

    settings = dataclasses.replace(settings, correlation_prediction_sigma_m=2000.0)
    job = load_job()
    ensure_tables(spark, settings)
    append(spark, settings, "catalog", [catalog_row(n, EPOCH) for n in (11, 13, 15)], schemas.CATALOG)
    t0 = EPOCH + dt.timedelta(minutes=10, seconds=0.5)
    sec = lambda s: t0 + dt.timedelta(seconds=s)  # noqa: E731
    obs = [
        # radar range offsets +100, +200, +600 m: mean 300, sample variance (200^2 + 100^2 + 300^2) / 2 = 70,000 m^2
        observation("ra", "radar", 13, sec(0), range_m=100.0),
        observation("rb", "radar", 13, sec(10), range_m=200.0),
        observation("rc", "radar", 13, sec(20), range_m=600.0),
        # optical declination offsets +10, +30 urad: mean 20 urad, sample variance 2 x (10 urad)^2 / 1 = 2e-10 rad^2
        observation("oa", "optical", 15, sec(0), dec_rad=1e-5),
        observation("ob", "optical", 15, sec(30), dec_rad=3e-5),
        # one exact ISL fix: count 1, mean 0, variance undefined (null)
        observation("ia", "isl", 11, sec(5)),
    ]
    append(spark, settings, "observations_dedup", obs, schemas.DEDUPED)
    assert run_job(job, spark, settings, "run-1")["correlated"] == 6

    correlated = table(spark, settings, "correlated")
    assert correlated["ra"]["residual_range_m"] == pytest.approx(100.0, abs=1e-3)
    assert correlated["ra"]["residual_az_rad"] == pytest.approx(0.0, abs=1e-9)
    assert correlated["ra"]["residual_range_rate_ms"] == pytest.approx(0.0, abs=1e-6)
    assert correlated["ra"]["residual_ra_rad"] is None and correlated["ra"]["residual_radial_m"] is None
    assert correlated["ob"]["residual_dec_rad"] == pytest.approx(3e-5, abs=1e-11)
    assert correlated["ob"]["residual_range_m"] is None
    assert correlated["ia"]["residual_along_m"] == pytest.approx(0.0, abs=1e-3)
    assert all(0.0 <= v["gate_d2"] < 1.0 for v in correlated.values())

    hour0 = dt.datetime(2026, 11, 21, 6)
    state = table(spark, settings, "object_state")
    s13, s15, s11 = state[(13, hour0)], state[(15, hour0)], state[(11, hour0)]
    assert s13["observations"] == 3 and s13["ambiguous_observations"] == 0
    assert s13["last_observed"] == sec(20).replace(tzinfo=None)
    assert (s13["residual_range_count"], s13["residual_az_count"], s13["residual_range_rate_count"]) == (3, 3, 3)
    assert s13["residual_range_mean_m"] == pytest.approx(300.0, abs=1e-3)
    assert s13["residual_range_var_m2"] == pytest.approx(70_000.0, abs=0.1)
    assert s13["residual_el_mean_rad"] == pytest.approx(0.0, abs=1e-9)
    assert s13["residual_ra_count"] == 0 and s13["residual_ra_mean_rad"] is None and s13["residual_ra_var_rad2"] is None
    assert s13["residual_radial_count"] == 0 and s13["residual_radial_var_m2"] is None
    assert s15["residual_dec_count"] == 2 and s15["residual_range_count"] == 0
    assert s15["residual_dec_mean_rad"] == pytest.approx(2e-5, abs=1e-11)
    assert s15["residual_dec_var_rad2"] == pytest.approx(2e-10, rel=1e-4)
    assert s15["residual_ra_mean_rad"] == pytest.approx(0.0, abs=1e-10)
    assert s11["residual_radial_count"] == 1 and s11["residual_radial_var_m2"] is None
    assert s11["residual_cross_mean_m"] == pytest.approx(0.0, abs=1e-3)

    # a late radar observation (+300 m) refolds the window from the whole table:
    # 100, 200, 600, 300 -> mean 300, sample variance (200^2 + 100^2 + 300^2 + 0) / 3
    append(spark, settings, "observations_dedup", [observation("rd", "radar", 13, sec(40), range_m=300.0)], schemas.DEDUPED)
    assert run_job(job, spark, settings, "run-2")["correlated"] == 1
    s13 = table(spark, settings, "object_state")[(13, hour0)]
    assert s13["observations"] == 4 and s13["residual_range_count"] == 4
    assert s13["residual_range_mean_m"] == pytest.approx(300.0, abs=1e-3)
    assert s13["residual_range_var_m2"] == pytest.approx(140_000.0 / 3.0, abs=0.1)
