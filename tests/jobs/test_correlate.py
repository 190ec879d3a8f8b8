"""jobs/correlate.py end to end on a few hand-made observations (generated from the catalogue's own
TLEs with sda.orbit.frames): association, uncorrelated reasons, the object_state fold, idempotent replay."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
from types import SimpleNamespace

import numpy as np
import pytest

from jobs import correlate as job
from sda.lake import schemas
from sda.lake.tables import TABLES, ensure_tables
from sda.orbit import screening
from sda.orbit.frames import propagate, radec, razel, site_teme, teme_to_ecef
from sda.pipeline import changefeed
from sda.transforms import folds
from tests import seed
from tests.seed import append_rows

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


C_KM_S = 299_792.458


def retarded_state(norad_id, when, site):
    """The object's TEME state one light time before ``when`` as seen from ``site`` (lat, lon, alt) at ``when``:
    where a radar's pulse met it, or where the light a telescope records left it. Solved here by fixed-point
    steps on SGP4 itself (not the pipeline's two-body step back)."""
    at = site_teme(*site, when.timestamp())
    tau = 0.0
    for _ in range(5):
        r, v = teme_state(norad_id, when - dt.timedelta(seconds=tau))
        tau = float(np.linalg.norm(r - at)) / C_KM_S
    return r, v


def observation(obs_id, kind, norad_id, when, **offsets):
    """A DEDUPED row measuring ``norad_id`` exactly as a sensor reports it (a radar's and a telescope's with light
    time), plus ``offsets`` added to named measurements."""
    values = dict.fromkeys(f.name for f in schemas.DEDUPED.fields)
    r, v = teme_state(norad_id, when)
    if kind in ("radar", "optical"):
        r, _ = retarded_state(norad_id, when, EGLIN if kind == "radar" else SOCORRO)
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
    row = (values[f.name] for f in schemas.DEDUPED.fields)
    return tuple(float(x) if isinstance(x, np.floating) else x for x in row)


def catalog_row(norad_id, epoch, elements=None):
    return seed.catalog_row(norad_id, epoch, tle(norad_id, epoch, elements), 500.0, 700.0)


def table(spark, settings, name):
    return {r["obs_id"] if "obs_id" in r else (r["norad_id"], r["window_start"]): r.asDict()
            for r in TABLES[name].read(spark, settings).collect()}


T1 = EPOCH + dt.timedelta(minutes=10, seconds=1.5)
T2 = EPOCH + dt.timedelta(minutes=25, seconds=30.25)  # another bucket, same hour
T3 = EPOCH + dt.timedelta(hours=1, minutes=5)  # next hour window
HOUR0, HOUR1 = dt.datetime(2026, 11, 21, 6), dt.datetime(2026, 11, 21, 7)


@pytest.fixture(scope="module")
def replayed(module_spark, make_settings):
    """The end-to-end scenario, run once for the tests below, each checking one step of it: run-1
    correlates six observations, run-2 finds nothing new, run-3 replays everything after a lost progress
    commit, run-4 takes a late observation. Each step's metrics and the tables it left."""
    spark, settings = module_spark, make_settings("correlate-replayed")
    ensure_tables(spark, settings)
    catalog = [catalog_row(n, EPOCH) for n in (11, 12, 13, 15)]
    # an older element set of 13 on a very different orbit: only the newest epoch may be used
    catalog.append(catalog_row(13, EPOCH - dt.timedelta(days=2), (550.0, 0.0002, 53.0, 190.0, 0.0, 20.0)))
    append_rows(spark, settings, "catalog", catalog)
    obs = [
        observation("r13", "radar", 13, T1),
        observation("r11", "radar", 11, T1),
        observation("i11", "isl", 11, T2),
        observation("o15", "optical", 15, T2),
        observation("r99", "radar", 99, T1),
        observation("i12", "isl", 12, T3),
    ]
    append_rows(spark, settings, "observations_dedup", obs)

    out = SimpleNamespace(first=run_job(job, spark, settings, "run-1"))
    out.correlated = table(spark, settings, "correlated")
    out.uncorrelated = table(spark, settings, "uncorrelated")
    out.state = table(spark, settings, "object_state")
    # nothing new: a second run reads nothing and changes nothing
    out.rerun = run_job(job, spark, settings, "run-2")
    # a crash before the progress commit means a full replay: same tables, nothing doubled
    changefeed.commit_progress(spark, "correlate", {"observations_dedup": -1}, "reset", settings)
    out.replay = run_job(job, spark, settings, "run-3")
    out.replay_counts = {name: TABLES[name].read(spark, settings).count() for name in ("correlated", "uncorrelated")}
    out.replay_state = table(spark, settings, "object_state")
    # a late observation of 11 in the first hour refolds that window from the whole table
    append_rows(spark, settings, "observations_dedup",
                [observation("late11", "isl", 11, EPOCH + dt.timedelta(minutes=50))])
    out.late = run_job(job, spark, settings, "run-4")
    out.late_state = table(spark, settings, "object_state")
    return out


def test_first_run_counts(replayed):
    metrics = replayed.first
    assert metrics["observations"] == 6 and metrics["correlated"] == 5 and metrics["uncorrelated"] == 1


def test_each_observation_is_associated_with_its_object(replayed):
    correlated = replayed.correlated
    assert {k: v["norad_id"] for k, v in correlated.items()} == {"r13": 13, "r11": 11, "i11": 11, "o15": 15, "i12": 12}
    assert all(v["residual_m"] < 1.0 and v["candidates"] == 1 and not v["ambiguous"] for v in correlated.values())
    assert all(v["correlate_run_id"] == "run-1" for v in correlated.values())
    assert correlated["o15"]["sensor_id"] == "SOCORRO" and correlated["o15"]["ra_rad"] is not None


def test_an_object_outside_the_catalogue_is_uncorrelated_with_its_reason(replayed):
    [(obs_id, unc)] = replayed.uncorrelated.items()
    assert obs_id == "r99" and unc["reason"] == "no catalogue object inside the gate"
    # a near miss (within a few gates) would be named; nothing of the catalogue is that close to 99
    assert unc["nearest_norad_id"] is None or unc["nearest_residual_m"] > 50_000


def test_object_state_folds_each_object_per_hour(replayed):
    state = replayed.state
    assert set(state) == {(11, HOUR0), (13, HOUR0), (15, HOUR0), (12, HOUR1)}
    s11 = state[(11, HOUR0)]
    assert s11["observations"] == 2 and s11["last_observed"] == T2.replace(tzinfo=None)
    assert s11["residual_rms_m"] >= abs(s11["residual_mean_m"]) and s11["residual_rms_m"] < 1.0


def test_a_rerun_with_nothing_new_reads_nothing(replayed):
    assert replayed.rerun["observations"] == 0


def test_a_replay_after_a_lost_progress_commit_doubles_nothing(replayed):
    assert replayed.replay["observations"] == 6
    assert replayed.replay_counts["correlated"] == 5
    assert replayed.replay_counts["uncorrelated"] == 1
    again = replayed.replay_state
    assert {k: v["observations"] for k, v in again.items()} == {k: v["observations"] for k, v in replayed.state.items()}


def test_a_late_observation_refolds_its_window(replayed):
    assert replayed.late["correlated"] == 1
    state = replayed.late_state
    assert state[(11, HOUR0)]["observations"] == 3 and state[(11, HOUR0)]["run_id"] == "run-4"
    assert state[(13, HOUR0)]["observations"] == 1


def test_empty_catalogue_is_an_error_and_consumes_nothing(spark, settings):
    ensure_tables(spark, settings)
    append_rows(spark, settings, "observations_dedup", [observation("x", "radar", 11, EPOCH)])
    with pytest.raises(RuntimeError, match="catalog is empty"):
        run_job(job, spark, settings, "run-1")
    assert changefeed.last_consumed(spark, "correlate", "observations_dedup", settings) == -1


RESIDUALS_T0 = EPOCH + dt.timedelta(minutes=10, seconds=0.5)


def sec(seconds):
    return RESIDUALS_T0 + dt.timedelta(seconds=seconds)


@pytest.fixture(scope="module")
def residuals(module_spark, make_settings):
    """Signed residuals per measurement type in ``correlated`` and their per-window count, mean and
    sample variance in ``object_state``, run once for the tests below (checked against values computed
    by hand); then a late observation refolds. The gate runs with the fixed 2 km sigma override: the
    offsets (up to 600 m, 30 urad at GEO) are then far inside it (d2 < 1); the default model, ten
    minutes after epoch, is tighter than that."""
    spark = module_spark
    settings = dataclasses.replace(make_settings("correlate-residuals"), correlation_prediction_sigma_m=2000.0)
    ensure_tables(spark, settings)
    append_rows(spark, settings, "catalog", [catalog_row(n, EPOCH) for n in (11, 13, 15)])
    obs = [
        # radar range offsets +100, +200, +600 m: mean 300,
        # sample variance (200^2 + 100^2 + 300^2) / 2 = 70,000 m^2
        observation("ra", "radar", 13, sec(0), range_m=100.0),
        observation("rb", "radar", 13, sec(10), range_m=200.0),
        observation("rc", "radar", 13, sec(20), range_m=600.0),
        # optical declination offsets +10, +30 urad: mean 20 urad,
        # sample variance 2 x (10 urad)^2 / 1 = 2e-10 rad^2
        observation("oa", "optical", 15, sec(0), dec_rad=1e-5),
        observation("ob", "optical", 15, sec(30), dec_rad=3e-5),
        # one exact ISL fix: count 1, mean 0, variance undefined (null)
        observation("ia", "isl", 11, sec(5)),
    ]
    append_rows(spark, settings, "observations_dedup", obs)
    out = SimpleNamespace(first=run_job(job, spark, settings, "run-1"))
    out.correlated = table(spark, settings, "correlated")
    out.state = table(spark, settings, "object_state")
    # a late radar observation (+300 m) refolds the window from the whole table
    append_rows(spark, settings, "observations_dedup", [observation("rd", "radar", 13, sec(40), range_m=300.0)])
    out.late = run_job(job, spark, settings, "run-2")
    out.late_state = table(spark, settings, "object_state")
    return out


def test_residual_run_correlates_every_observation(residuals):
    assert residuals.first["correlated"] == 6


def test_signed_residuals_per_measurement_in_correlated(residuals):
    correlated = residuals.correlated
    assert correlated["ra"]["residual_range_m"] == pytest.approx(100.0, abs=1e-3)
    assert correlated["ra"]["residual_az_rad"] == pytest.approx(0.0, abs=1e-9)
    # the oracle's retarded state is SGP4's own, the pipeline's a two-body step back: a few 1e-6 m/s apart
    assert correlated["ra"]["residual_range_rate_ms"] == pytest.approx(0.0, abs=1e-5)
    assert correlated["ra"]["residual_ra_rad"] is None and correlated["ra"]["residual_radial_m"] is None
    # at GEO the two light-time solutions (SGP4's own, the pipeline's step back) differ by ~4e-11 rad (1.5 mm)
    assert correlated["ob"]["residual_dec_rad"] == pytest.approx(3e-5, abs=1e-10)
    assert correlated["ob"]["residual_range_m"] is None
    assert correlated["ia"]["residual_along_m"] == pytest.approx(0.0, abs=1e-3)
    assert all(0.0 <= v["gate_d2"] < 1.0 for v in correlated.values())


def test_radar_residual_statistics_in_object_state(residuals):
    s13 = residuals.state[(13, HOUR0)]
    assert s13["observations"] == 3 and s13["ambiguous_observations"] == 0
    assert s13["last_observed"] == sec(20).replace(tzinfo=None)
    assert (s13["residual_range_count"], s13["residual_az_count"], s13["residual_range_rate_count"]) == (3, 3, 3)
    assert s13["residual_range_mean_m"] == pytest.approx(300.0, abs=1e-3)
    assert s13["residual_range_var_m2"] == pytest.approx(70_000.0, abs=0.1)
    assert s13["residual_el_mean_rad"] == pytest.approx(0.0, abs=1e-9)
    assert s13["residual_ra_count"] == 0 and s13["residual_ra_mean_rad"] is None and s13["residual_ra_var_rad2"] is None
    assert s13["residual_radial_count"] == 0 and s13["residual_radial_var_m2"] is None


def test_optical_residual_statistics_in_object_state(residuals):
    s15 = residuals.state[(15, HOUR0)]
    assert s15["residual_dec_count"] == 2 and s15["residual_range_count"] == 0
    assert s15["residual_dec_mean_rad"] == pytest.approx(2e-5, abs=1e-10)  # as in the per-row test above
    assert s15["residual_dec_var_rad2"] == pytest.approx(2e-10, rel=1e-4)
    assert s15["residual_ra_mean_rad"] == pytest.approx(0.0, abs=1e-9)  # 2e-10 rad apart (7 mm at GEO)


def test_a_single_isl_fix_has_no_variance(residuals):
    s11 = residuals.state[(11, HOUR0)]
    assert s11["residual_radial_count"] == 1 and s11["residual_radial_var_m2"] is None
    assert s11["residual_cross_mean_m"] == pytest.approx(0.0, abs=1e-3)


def test_a_late_observation_refolds_the_residual_statistics(residuals):
    # 100, 200, 600, 300 -> mean 300, sample variance (200^2 + 100^2 + 300^2 + 0) / 3
    assert residuals.late["correlated"] == 1
    s13 = residuals.late_state[(13, HOUR0)]
    assert s13["observations"] == 4 and s13["residual_range_count"] == 4
    assert s13["residual_range_mean_m"] == pytest.approx(300.0, abs=1e-3)
    assert s13["residual_range_var_m2"] == pytest.approx(140_000.0 / 3.0, abs=0.1)


def test_a_pass_ends_after_a_gap_without_an_observation(spark):
    # gap 600 s: 0, 100 | 700.5 (600.5 s after 100: a new pass), 1299 | object 12 and another sensor apart;
    # a gap of exactly 600 s does not end a pass (as Spark's session windows); one instant twice is one pass
    at = lambda s: EPOCH + dt.timedelta(seconds=s)  # noqa: E731
    rows = [("S1", 11, at(0), 3.0), ("S1", 11, at(100), 4.0), ("S1", 11, at(700.5), 1.0), ("S1", 11, at(1299), 1.0),
            ("S1", 11, at(1299), 2.0), ("S1", 12, at(50), 6.0), ("S2", 11, at(10), 8.0), ("S2", 11, at(610), 6.0)]
    df = spark.createDataFrame(rows, "sensor_id string, norad_id long, event_time timestamp, residual_m double")
    seconds = lambda t: (t.replace(tzinfo=UTC) - EPOCH).total_seconds()  # noqa: E731 - collected naive UTC
    got = sorted((r["sensor_id"], r["norad_id"], seconds(r["pass_start"]), seconds(r["pass_end"]), r["observations"],
                  round(r["residual_rms_m"], 9)) for r in folds.sessions(df, 600.0).collect())
    assert got == [("S1", 11, 0.0, 100.0, 2, 3.535533906),  # sqrt((9 + 16) / 2)
                   ("S1", 11, 700.5, 1299.0, 3, 1.414213562),  # sqrt((1 + 1 + 4) / 3)
                   ("S1", 12, 50.0, 50.0, 1, 6.0),
                   ("S2", 11, 10.0, 610.0, 2, 7.071067812)]  # sqrt((64 + 36) / 2)
