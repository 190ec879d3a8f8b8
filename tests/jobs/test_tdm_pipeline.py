"""CCSDS TDM input end to end on Spark (issue 40): one simulated scenario written twice -- radar and
optical in the project's own formats, and as TDM (``SimConfig.format = "tdm"``, :mod:`sda.sim.tdm`) --
each into a fresh lakehouse and through catalog, ingest, normalize, dedup, correlate and conjunction.
The native run is the oracle: the TDM run gives the same silver observations (what they measure:
sensor, kind, event time, values, site), the same correlations and the same alerts.

The scenario: 30 objects for 15 minutes on the numerical truth (whose brahe set-up runs in this process
before the TDM writer: the rotation of the optical angles must not depend on it), the injected
conjunction with its TCA one hour after the start, screened over 3 hours. Disorder: re-deliveries,
re-processed near-duplicates, late files, unknown sensors and reordering at the simulator's
default rates; no malformed lines (broken bytes have no TDM form: the writer leaves them out) and no
physically impossible values (a declination beyond 90 deg has no RADEC form: written as a direction
it reads back as a valid one), so both runs carry the same measurements.

Tolerances: radar values and event times are compared exactly (the TDM carries the JSON's numbers as
written, and the writer's light time is taken off to the nanosecond); optical angles to 1e-9 deg (the
CSV's values rotated to EME2000 and back), ISL beacons are the same files in both. Alerts: the same
pairs, levels and TCAs; miss distances to a millimetre (the catalogue, not the observations, decides
them), probabilities of collision to 1e-9 relative (the objects' tracking state, from correlate, enters
them). Plus a landing that is not all good: one file ccsds-ndm refuses (quarantined by ingest with its
file and line) and one whose only measurement normalize refuses (RADEC in TOD: file and line), while
the batch's other files land.
"""

from __future__ import annotations

import datetime as dt
import math
import shutil

import pytest

from sda.lake.tables import TABLES
from sda.sim.simulate import SimConfig, simulate
from tests import chain

SIM_START = dt.datetime(2026, 11, 21, 6, 0, tzinfo=chain.UTC)
SIM_END = SIM_START + dt.timedelta(minutes=15)
SCREEN = ["--screen-start", chain.iso(SIM_END), "--horizon-h", "3"]
STAGES = ("ingest", "normalize", "dedup", "correlate")
ANGLE_TOL_RAD = math.radians(1e-9)
MEASURED = ("range_m", "az_rad", "el_rad", "range_rate_ms", "ra_rad", "dec_rad", "x_m", "y_m", "z_m", "vx_ms",
            "vy_ms", "vz_ms", "site_lat_deg", "site_lon_deg", "site_alt_m")

# ccsds-ndm refuses it: a data line's value is not a number (line 12, 1-based)
BROKEN = """CCSDS_TDM_VERS = 2.0
CREATION_DATE = 2026-11-21T06:20:00
ORIGINATOR = TEST
META_START
TIME_SYSTEM = UTC
PARTICIPANT_1 = EGLIN
PARTICIPANT_2 = 25544
PATH = 1,2,1
ANGLE_TYPE = AZEL
META_STOP
DATA_START
RANGE = 2026-11-21T06:05:00.000 not-a-number
DATA_STOP
"""
# valid TDM, but normalize has no TOD rotation: its one measurement (lines 12-13) is refused
IN_TOD = """CCSDS_TDM_VERS = 2.0
CREATION_DATE = 2026-11-21T06:20:00
ORIGINATOR = TEST
META_START
TIME_SYSTEM = UTC
PARTICIPANT_1 = SOCORRO
PARTICIPANT_2 = 25544
PATH = 2,1
ANGLE_TYPE = RADEC
REFERENCE_FRAME = TOD
META_STOP
DATA_START
ANGLE_1 = 2026-11-21T06:05:00.000 120.5
ANGLE_2 = 2026-11-21T06:05:00.000 -20.25
DATA_STOP
"""


def _simulate(settings, fmt: str) -> None:
    """The scenario in ``fmt``, straight into the landing zone (as ``sda simulate`` does)."""
    simulate(SimConfig(start=SIM_START, end=SIM_END, landing=settings.landing, catalog_out=settings.catalog_file,
                       objects=30, seed=5, inject_conjunction=True, tca=SIM_START + dt.timedelta(hours=1),
                       malformed_rate=0.0, impossible_rate=0.0, format=fmt))
    if fmt == "tdm":
        (settings.landing / "tdm" / "broken.kvn").write_text(BROKEN)
        (settings.landing / "tdm" / "in_tod.kvn").write_text(IN_TOD)


@pytest.fixture(scope="module")
def runs(module_spark, make_settings):
    """{format: (settings, the stages' metrics)}: the stages run as Airflow runs them. The catalogue
    (the same file from both simulations) is loaded once, by the catalog stage, and the lakehouse
    copied for the second run (Delta tables hold relative paths)."""
    both = {fmt: make_settings(f"tdm-pipeline-{fmt}") for fmt in ("native", "tdm")}
    for fmt, settings in both.items():
        _simulate(settings, fmt)
    assert both["native"].catalog_file.read_bytes() == both["tdm"].catalog_file.read_bytes()
    chain.run_stage(module_spark, both["native"], "catalog", "catalog-1", ["--file", str(both["native"].catalog_file)])
    shutil.copytree(both["native"].lakehouse, both["tdm"].lakehouse, dirs_exist_ok=True)
    out = {}
    for fmt, settings in both.items():
        metrics = chain.run_flow(module_spark, settings, "run-1", STAGES)
        metrics["conjunction"] = chain.run_stage(module_spark, settings, "conjunction", "run-1", SCREEN)
        out[fmt] = (settings, metrics)
    return out


def _rows(spark, settings, table: str, columns) -> list[dict]:
    return [r.asDict() for r in TABLES[table].read(spark, settings).select(*columns).collect()]


def _by_measurement(rows: list[dict]) -> dict[tuple, dict]:
    out = {(r["sensor_id"], r["sensor_kind"], r["event_time"]): r for r in rows}
    assert len(out) == len(rows), "two observations of one sensor at one instant"
    return out


def test_the_tdm_landing_went_through_tdm(runs):
    native, tdm = runs["native"][1], runs["tdm"][1]
    # a refused TDM measurement has no envelope kind: "tdm"
    assert native["normalize"]["by_kind"].keys() == tdm["normalize"]["by_kind"].keys() - {"tdm"} == {
        "radar", "optical", "isl"}

    def fed(metrics):  # the bronze tables normalize consumed a version of
        return {table for table, version in metrics["normalize"]["consumed"].items() if version}

    assert fed(native) == {"radar_frames", "optical_tracks", "isl_beacons"}
    assert fed(tdm) == {"tdm_messages", "isl_beacons"}
    assert native["normalize"]["records_out"] > 300


def test_tdm_gives_the_native_silver_observations(spark, runs):
    columns = ("sensor_id", "sensor_kind", "event_time", *MEASURED)
    native = _by_measurement(_rows(spark, runs["native"][0], "observations", columns))
    tdm = _by_measurement(_rows(spark, runs["tdm"][0], "observations", columns))
    assert set(tdm) == set(native)
    assert {k[1] for k in native} == {"radar", "optical", "isl"}
    for key, want in native.items():
        got = tdm[key]
        if key[1] == "optical":
            assert got["ra_rad"] == pytest.approx(want["ra_rad"], abs=ANGLE_TOL_RAD), key
            assert got["dec_rad"] == pytest.approx(want["dec_rad"], abs=ANGLE_TOL_RAD), key
            got, want = ({**r, "ra_rad": None, "dec_rad": None} for r in (got, want))
        assert got == want, key


def test_tdm_gives_the_native_correlations(spark, runs):
    def assigned(settings):
        rows = _rows(spark, settings, "correlated", ("sensor_id", "event_time", "norad_id"))
        return sorted((r["sensor_id"], r["event_time"], r["norad_id"]) for r in rows)

    native = assigned(runs["native"][0])
    assert len(native) > 300
    assert assigned(runs["tdm"][0]) == native


def test_tdm_gives_the_native_alerts(spark, runs):
    def alerts(settings):
        columns = ("primary_id", "secondary_id", "level", "status", "tca", "miss_m", "pc")
        return sorted(_rows(spark, settings, "alerts", columns), key=lambda r: (r["primary_id"], r["secondary_id"],
                                                                                  r["tca"]))

    native, tdm = alerts(runs["native"][0]), alerts(runs["tdm"][0])
    assert {(a["primary_id"], a["secondary_id"]) for a in native} >= {(99901, 99902)}  # the injected pair
    assert [{**a, "miss_m": None, "pc": None} for a in tdm] == [{**a, "miss_m": None, "pc": None} for a in native]
    for got, want in zip(tdm, native):
        assert got["miss_m"] == pytest.approx(want["miss_m"], abs=1e-3)
        assert got["pc"] == pytest.approx(want["pc"], rel=1e-9)


def test_a_bad_tdm_file_is_quarantined_with_its_line_and_the_batch_lands(spark, runs):
    settings, metrics = runs["tdm"]
    rows = {r["source_file"]: r for r in _rows(spark, settings, "quarantine",
                                                 ("stage", "source_file", "record_no", "reason", "bronze_id"))}
    broken = rows["tdm/broken.kvn"]
    assert (broken["stage"], broken["record_no"], broken["bronze_id"]) == ("ingest", 11, None)
    assert broken["reason"].startswith("TDM line 12: TDM refused by ccsds-ndm: "), broken["reason"]
    in_tod = rows["tdm/in_tod.kvn"]
    assert (in_tod["stage"], in_tod["record_no"]) == ("normalize", 12)
    assert in_tod["reason"] == ("TDM line 13: RADEC in REFERENCE_FRAME TOD: supported are EME2000, ICRF, GCRF "
                                "and TEME")
    # the same batch: every other landed file reached bronze
    landed = {f"{kind}/{p.name}" for kind in ("tdm", "isl") for p in (settings.landing / kind).iterdir()}
    in_bronze = {r["source_file"] for table in ("tdm_messages", "isl_beacons")
                 for r in _rows(spark, settings, table, ("source_file", "ingest_batch"))}
    assert metrics["ingest"]["batches"] == [1] and metrics["ingest"]["files_new"] == len(landed)
    assert in_bronze == landed - {"tdm/broken.kvn"}
    # normalize refused what it refused in the native run (the unknown sensors' copies), and the TOD one
    native = runs["native"][1]
    assert (native["ingest"]["quarantined"], metrics["ingest"]["quarantined"]) == (0, 1)
    assert metrics["normalize"]["quarantined"] == native["normalize"]["quarantined"] + 1
