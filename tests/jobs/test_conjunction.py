"""jobs/conjunction.py on a ten-object synthetic catalogue with a constructed close pair: the Spark
chain finds what the single-process chain (itself checked against brute force in
tests/include/orbit/screening/test_screening.py) finds; the close pair gets a red alert with its Pc and one CCSDS CDM +
JSON in the outbox (sda.alerts.plan); reruns give the same rows and emit no outbox file twice. The
incremental runs read the unchanged objects' states from the ephemeris cache the first one stored."""

from __future__ import annotations

import argparse
import datetime as dt
import json

import ccsds_ndm
import pytest

from jobs import conjunction as job
from sda.alerts.assessment import alert_level
from sda.alerts.cdm import parse_cdm
from sda.alerts.outbox import write_if_absent
from sda.alerts.plan import CLOSE_NOT_FOUND
from sda.alerts.publish import manoeuvred_objects, publish_manoeuvres
from sda.lake import schemas
from sda.lake.schemas import FUSED_ORBITS, MANOEUVRES
from sda.lake.tables import TABLES, ensure_tables
from sda.orbit import screening
from sda.pipeline import sinks
from tests.seed import append_rows, catalog_row

UTC = dt.timezone.utc
EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
ELEMENTS = {  # as tests/include/orbit/screening/test_screening.py: 101/102 cross at the node at EPOCH ~160 m apart
    101: (700.0, 0.0001, 98.0, 0.0, 0.0, 0.0),
    102: (702.0, 0.0001, 53.0, -0.01, 0.0, -0.02),
    201: (800.0, 0.0010, 60.0, 40.0, 0.0, 10.0),
    202: (800.0, 0.0012, 60.0, 40.0, 0.0, 10.01),
    301: (550.0, 0.0002, 53.0, 100.0, 0.0, 200.0),
    302: (560.0, 0.0003, 97.6, 250.0, 30.0, 40.0),
    303: (1200.0, 0.0100, 87.0, 10.0, 80.0, 300.0),
    401: (35786.0, 0.0002, 0.05, 0.0, 0.0, 120.0),
    402: (20000.0, 0.7000, 63.4, 270.0, 270.0, 0.0),
    403: (400.0, 0.0005, 51.6, 300.0, 0.0, 0.0),
}


def args(run_id):
    return argparse.Namespace(start=EPOCH - dt.timedelta(hours=4), end=EPOCH - dt.timedelta(hours=3), run_id=run_id,
                              screen_start=None, horizon_h=6.0)


def write_catalog(spark, settings):
    rows = []
    for norad_id, elements in ELEMENTS.items():
        l1, l2 = screening.tle_from_elements(norad_id, EPOCH, *elements)
        [sat] = screening.satrecs_from_lines([l1], [l2])
        a, e, re = sat.a * sat.radiusearthkm, sat.ecco, sat.radiusearthkm
        rows.append(catalog_row(norad_id, EPOCH, (l1, l2), a * (1 - e) - re, a * (1 + e) - re))
    # an older, far-away element set of 101: screening must use the newest epoch only
    older = EPOCH - dt.timedelta(days=3)
    lines = screening.tle_from_elements(101, older, 1500.0, 0.0001, 10.0, 0.0, 0.0, 0.0)
    rows.append(catalog_row(101, older, lines, 1500.0, 1500.0, load_time=EPOCH))
    append_rows(spark, settings, "catalog", rows)


def snapshot(spark, settings, table):
    return sorted(tuple(v for k, v in r.asDict().items() if k != "run_id")
                  for r in TABLES[table].read(spark, settings).collect())


def test_conjunction_job_matches_reference_and_reruns_emit_nothing_twice(spark, settings):
    ensure_tables(spark, settings)
    write_catalog(spark, settings)

    metrics = job.run(spark, settings, args("run-1"))
    assert metrics["objects"] == 10 and metrics["pairs_all"] == 45
    assert metrics["pairs_all"] >= metrics["pairs_altitude"] >= metrics["pairs_linear"] >= 2

    # the same chain in one process (checked against brute force in the include tests)
    ids = sorted(ELEMENTS)
    sats = screening.satrecs_from_lines(*zip(*[screening.tle_from_elements(n, EPOCH, *ELEMENTS[n]) for n in ids]))
    start = (EPOCH - dt.timedelta(hours=3)).timestamp()
    reference, ref_metrics = screening.screen(ids, sats, start, start + 6 * 3600, 5.0, settings.screening_step_s)
    for key in ("pairs_altitude", "pair_steps_grid", "pairs_linear", "pair_steps_linear"):
        assert metrics[key] == ref_metrics[key], key

    rows = {r["event_id"]: r for r in TABLES["conjunctions"].read(spark, settings).collect()}
    expected = {screening.event_key(e.primary_id, e.secondary_id, e.tca_unix, e.flag): e
                for e in reference.itertuples()}
    assert set(rows) == set(expected) and len(rows) == metrics["events"] >= 3
    # the slow pair 201/202 never leaves the threshold: one persistent row, not one per minimum
    [slow] = [r for r in rows.values() if r["primary_id"] == 201]
    assert slow["flag"] == screening.PERSISTENT_WHOLE and slow["event_id"] == screening.persistent_event_id(201, 202)
    for eid, row in rows.items():
        ref = expected[eid]
        assert (row["primary_id"], row["secondary_id"], row["flag"]) == (ref.primary_id, ref.secondary_id, ref.flag)
        assert row["tca"].replace(tzinfo=UTC).timestamp() == pytest.approx(ref.tca_unix, abs=1e-3)
        assert row["miss_m"] == pytest.approx(ref.miss_km * 1000, abs=1e-3)
        assert row["primary_id"] < row["secondary_id"] and row["miss_m"] < 5000
        assert row["screen_start"] == (EPOCH - dt.timedelta(hours=3)).replace(tzinfo=None)

    # every event carries its 2-D Pc, or none and a flag where the 2-D method is invalid
    for row in rows.values():
        assert row["level"] in ("red", "yellow", "none")
        if row["pc_valid"]:
            assert 0.0 <= row["pc"] <= 1.0 and row["pc_flag"] is None
        else:
            assert row["pc"] is None and row["pc_flag"]

    # two alerts: 101/102 at the node, ~150 m apart, Pc above the red threshold (sda.alerts.assessment), and the
    # slow pair 201/202, ~1.2 km apart all along with ~600 m along-track sigmas: no 2-D Pc, the miss over the 1 km
    # alert distance, but likely under it (the miss-probability rule)
    alerts = {(r["primary_id"], r["secondary_id"]): r for r in TABLES["alerts"].read(spark, settings).collect()}
    assert set(alerts) == {(101, 102), (201, 202)}
    alert, slow_alert = alerts[(101, 102)], alerts[(201, 202)]
    assert alert["level"] == "red" and alert["miss_m"] < 200 and "red threshold" in alert["reason"]
    assert alert["pc"] >= settings.pc_red and (alert["status"], alert["version"]) == ("new", 1)
    assert abs(alert["tca"].replace(tzinfo=UTC) - EPOCH) < dt.timedelta(seconds=30)
    assert (slow_alert["level"], slow_alert["alert_rule"], slow_alert["pc"]) == ("yellow", "miss_probability", None)
    assert slow_alert["miss_m"] > 1000.0 and slow_alert["miss_probability"] >= settings.alert_miss_probability
    files = [f for f in sorted(settings.outbox.iterdir()) if alert["alert_id"] in f.name]
    assert [f.name for f in files] == [f"CDM-{alert['alert_id']}-v1.cdm", f"CDM-{alert['alert_id']}-v1.json"]
    assert len(list(settings.outbox.iterdir())) == 4
    assert (alert["cdm_file"], alert["json_file"]) == (files[0].name, files[1].name)
    message = json.loads(files[1].read_text())
    assert message["alert_id"] == alert["alert_id"] and message["level"] == "red" and message["version"] == 1
    cdm = parse_cdm(files[0].read_text())
    assert cdm.collision_probability == alert["pc"] and cdm.miss_distance_m == alert["miss_m"]
    files = sorted(settings.outbox.iterdir())
    mtimes = [f.stat().st_mtime_ns for f in files]
    assert metrics["alerts_new"] == 2 and metrics["emitted_files"] == 4
    assert metrics["rule_miss_probability_only"] == 1
    assert [r["version"] for r in TABLES["alert_events"].read(spark, settings).collect()] == [1, 1]

    before = {t: snapshot(spark, settings, t) for t in ("conjunctions", "alerts", "alert_events")}
    again = job.run(spark, settings, args("run-2"))
    assert again["events"] == metrics["events"] and again["emitted_files"] == 0 and again["alerts_unchanged"] == 2
    assert (again["alerts_new"], again["alerts_updated"], again["alerts_closed"]) == (0, 0, 0)
    assert {t: snapshot(spark, settings, t) for t in ("conjunctions", "alerts", "alert_events")} == before
    assert sorted(settings.outbox.iterdir()) == files  # no temp files left, no second message
    assert [f.stat().st_mtime_ns for f in files] == mtimes


def _row_of(schema, **values) -> tuple:
    """A row of ``schema`` with ``values``, the other columns zero / a stand-in (what this test does not read)."""
    fill = {"long": 0, "double": 0.0, "string": "x", "timestamp": EPOCH, "boolean": False}
    return tuple(values[f.name] if f.name in values else fill.get(f.dataType.typeName())
                 for f in schema.fields)


def _seed_manoeuvres(spark, settings):
    """Burns of 101 (before the screening start, its fused orbit in gold), 102 (after the screening start)
    and 303 (its fused orbit not in gold); fused orbits without a screening element set (line1 null), so
    the screening is the catalogue's as in the test above."""
    h = dt.timedelta(hours=1)
    window = EPOCH - 6 * h
    cov = [0.0] * 49
    cov[0], cov[8] = 4.0, 9.0  # 4 m^2 along X, 9 m^2 along Y
    orbits = [_row_of(FUSED_ORBITS, norad_id=n, window_start=window, epoch=EPOCH - 3.2 * h, fit_start=window,
                      x_km=7000.0 + n, y_km=-12.5, z_km=0.25, vx_kms=0.001, vy_kms=7.5, vz_kms=-0.5, b_m2_kg=0.01,
                      covariance=cov, rms=1.0, status="converged", fused_id=f"fused-{n}", line1=None, line2=None)
              for n in (101, 102)]
    append_rows(spark, settings, "fused_orbits", orbits)
    burns = [(101, EPOCH - 3.5 * h), (102, EPOCH - 2 * h), (303, EPOCH - 4 * h)]
    append_rows(spark, settings, "manoeuvres", [
        _row_of(MANOEUVRES, norad_id=n, window_start=window, seq=0, manoeuvre_id=f"man-{n}", burn_after=t - h,
                burn_before=t + h / 2, burn_time=t, dv_r_ms=0.25, dv_t_ms=1.5, dv_n_ms=-0.125, dv_ms=1.53,
                dv_sigma_ms=0.05, detected_at=t + h / 2, fused_id=f"fused-{n}") for n, t in burns])


def test_manoeuvre_messages_once_and_maneuverable_cdms(spark, settings):
    """Every gold manoeuvres row with its fused orbit becomes one OPM + JSON in the outbox, once; the CDM
    says MANEUVERABLE = YES of the object that burnt before the screening start (101), N/A of the one that
    burnt after it (102)."""
    zero = {"manoeuvre_messages": 0, "manoeuvre_files": 0, "manoeuvre_messages_pending": 0,
            "manoeuvre_withdrawals": 0, "manoeuvre_withdrawals_pending": 0}
    assert publish_manoeuvres(None, settings) == zero  # no table yet: nothing to read, no Spark asked
    assert manoeuvred_objects(None, settings, [101], EPOCH) == set()
    ensure_tables(spark, settings)
    write_catalog(spark, settings)
    _seed_manoeuvres(spark, settings)

    metrics = job.run(spark, settings, args("run-1"))
    assert (metrics["manoeuvre_messages"], metrics["manoeuvre_files"], metrics["manoeuvre_messages_pending"]) == (
        2, 4, 1)
    [alert] = [a for a in TABLES["alerts"].read(spark, settings).collect() if a["primary_id"] == 101]
    assert (alert["primary_id"], alert["p_maneuverable"], alert["s_maneuverable"]) == (101, True, False)
    cdm = parse_cdm((settings.outbox / alert["cdm_file"]).read_text())
    assert (cdm.object1["MANEUVERABLE"], cdm.object2["MANEUVERABLE"]) == ("YES", "N/A")
    names = sorted(f.name for f in settings.outbox.iterdir())
    assert [n for n in names if n.startswith("OPM-")] == [
        "OPM-man-101.json", "OPM-man-101.opm", "OPM-man-102.json", "OPM-man-102.opm"]
    opm = ccsds_ndm.Opm.from_str((settings.outbox / "OPM-man-101.opm").read_text(), "kvn")
    sv, [man] = opm.segment.data.state_vector, opm.segment.data.maneuver_parameters
    assert opm.segment.metadata.object_name == "OBJ 101" and sv.epoch == "2026-11-21T02:48:00.000000"
    assert (sv.x, sv.y_dot) == (7101.0, 7.5) and opm.segment.data.covariance_matrix.cy_y == 9e-6
    assert man.man_epoch_ignition == "2026-11-21T02:30:00.000000" and man.man_dv_2 == 0.0015
    assert opm.header.creation_date == "2026-11-21T03:00:00.000000"  # detected_at, after the epoch

    mtimes = {f.name: f.stat().st_mtime_ns for f in settings.outbox.iterdir()}
    again = job.run(spark, settings, args("run-2"))
    assert (again["manoeuvre_messages"], again["manoeuvre_files"], again["manoeuvre_messages_pending"]) == (0, 0, 1)
    assert again["emitted_files"] == 0 and again["alerts_unchanged"] == 2  # and 201/202's (the test above)
    assert {f.name: f.stat().st_mtime_ns for f in settings.outbox.iterdir()} == mtimes


def _refit(n: int, manoeuvres: list[dict]) -> dict:
    """The fuse stage's written row of a re-fit of ``n``'s window (jobs/fuse.py), with its detections."""
    window = EPOCH - dt.timedelta(hours=6)
    return {"norad_id": n, "us": int(window.timestamp() * 1e6), "fused_id": f"refit-{n}", "regime": "LEO",
            "manoeuvres_json": json.dumps(manoeuvres) if manoeuvres else None}


def test_a_manoeuvre_a_refit_explains_away_is_withdrawn(spark, settings):
    """101's window re-fitted with later observations and no burn (the fuse stage's own write deletes its row):
    the next publication withdraws its OPM by a message naming the new fit, once. 102's re-fit still finds its
    burn (a new id, the bracket overlapping): a new OPM that revises it, no withdrawal."""
    from sda.pipeline.manoeuvres import write_manoeuvres

    ensure_tables(spark, settings)
    write_catalog(spark, settings)
    _seed_manoeuvres(spark, settings)
    first = publish_manoeuvres(spark, settings)
    assert (first["manoeuvre_messages"], first["manoeuvre_withdrawals"]) == (2, 0)
    h, window = 3600.0, EPOCH - dt.timedelta(hours=6)
    cov = [0.0] * 49
    refits = [_row_of(FUSED_ORBITS, norad_id=n, window_start=window, epoch=EPOCH - dt.timedelta(hours=2.5),
                      fit_start=window, x_km=7000.0, y_km=1.0, z_km=0.5, vx_kms=0.0, vy_kms=7.5, vz_kms=0.0,
                      b_m2_kg=0.01, covariance=cov, rms=1.1, status="converged", fused_id=f"refit-{n}",
                      line1=None, line2=None) for n in (101, 102)]
    sinks.upsert(spark, spark.createDataFrame(refits, FUSED_ORBITS), "fused_orbits", settings)
    t102 = (EPOCH - dt.timedelta(hours=2)).timestamp()
    burn = {"seq": 0, "manoeuvre_id": "man-102-revised", "burn_after_unix": t102 - 0.5 * h,
            "burn_before_unix": t102 + 0.25 * h, "burn_time_unix": t102, "detected_at_unix": t102 + h,
            "dv_r_ms": 0.25, "dv_t_ms": 1.5, "dv_n_ms": -0.125, "dv_ms": 1.53, "dv_sigma_ms": 0.05, "statistic": 99.0,
            "dof": 12, "log10_p": -15.0, "passes": 2, "observations_after": 30, "reassociated": 0,
            "prior_fused_id": "fused-prior"}
    assert write_manoeuvres(spark, settings, [_refit(101, []), _refit(102, [burn])], "run-refit") == {
        "manoeuvres": 1, "manoeuvres_withdrawn": 1}

    again = publish_manoeuvres(spark, settings)
    assert (again["manoeuvre_messages"], again["manoeuvre_withdrawals"], again["manoeuvre_withdrawals_pending"]) == (
        1, 1, 0)
    names = sorted(f.name for f in settings.outbox.iterdir() if f.name.startswith("OPM-"))
    assert names == ["OPM-man-101.json", "OPM-man-101.opm", "OPM-man-101.withdrawal.json", "OPM-man-102-revised.json",
                     "OPM-man-102-revised.opm", "OPM-man-102.json", "OPM-man-102.opm"]
    body = json.loads((settings.outbox / "OPM-man-101.withdrawal.json").read_text())
    assert body["withdraws"]["message_id"] == "SDA-FUSION-OPM-man-101" and body["orbit"]["fused_id"] == "refit-101"
    assert body["creation_date"] == "2026-11-21T03:30:00.000000Z"  # the re-fit's epoch, after detected_at 03:00
    mtimes = {f.name: f.stat().st_mtime_ns for f in settings.outbox.iterdir()}
    third = publish_manoeuvres(spark, settings)
    assert (third["manoeuvre_messages"], third["manoeuvre_withdrawals"]) == (0, 0)
    assert {f.name: f.stat().st_mtime_ns for f in settings.outbox.iterdir()} == mtimes


def test_filter_counts_survive_an_observation_the_server_did_not_deliver(spark, settings, monkeypatch):
    # Spark 4.1.3's Connect server sends an empty row for an observation whose listener is later than
    # 100 ms (SPARK-54279); a CI run lost the linear filter's counts that way and the stage failed
    from pyspark.sql.connect.observation import Observation as ConnectObservation

    class Undelivered(ConnectObservation):
        @property
        def get(self):
            return {}

    ids = sorted(ELEMENTS)
    lines = [screening.tle_from_elements(n, EPOCH, *ELEMENTS[n]) for n in ids]
    catalogue = screening.CatalogueLines(tuple(ids), *map(tuple, zip(*lines)))
    start, step_s = (EPOCH - dt.timedelta(hours=3)).timestamp(), settings.screening_step_s
    end = start + 6 * 3600
    _, reference = screening.screen(ids, screening.satrecs_from_lines(*zip(*lines)), start, end, 5.0, step_s)
    monkeypatch.setattr(job, "Observation", Undelivered)
    found, metrics, errors = job.screen_parts(spark, catalogue, [screening.Part(start, end, step_s, None)], start,
                                              end, 5.0, step_s, settings.shuffle_partitions)
    assert not errors and len(found) >= 3
    assert (metrics["pairs_linear"], metrics["pair_steps_linear"]) == (reference["pairs_linear"],
                                                                       reference["pair_steps_linear"])
    assert reference["pairs_linear"] >= 2


def test_alert_levels_and_atomic_outbox(tmp_path, settings):
    # levels and outbox writes: sda.alerts.assessment and sda.alerts.publish
    # (details: tests/include/alerts/test_alerts.py)
    assert alert_level(2e-4, 4000.0, settings)[0] == "red"
    assert alert_level(1e-9, 250.0, settings)[0] == "yellow"
    assert alert_level(1e-9, 1500.0, settings)[0] == "none"
    path = tmp_path / "box" / "a.cdm"
    assert write_if_absent(path, "x\n") is True
    assert write_if_absent(path, "y\n") is False and path.read_text() == "x\n"
    assert [p.name for p in path.parent.iterdir()] == ["a.cdm"]


def test_cli_arguments():
    ns = job.parser().parse_args(["--start", "2026-11-21T00:00Z", "--end", "2026-11-21T01:00Z", "--run-id", "r",
                                  "--screen-start", "2026-11-21T02:00:00Z", "--horizon-h", "6"])
    ns = job._validate(ns)
    assert ns.screen_start == dt.datetime(2026, 11, 21, 2, tzinfo=UTC) and ns.horizon_h == 6.0
    with pytest.raises(ValueError, match="--horizon-h"):
        job._validate(argparse.Namespace(screen_start=None, horizon_h=-1.0))
    with pytest.raises(ValueError, match="screen-start"):
        job._validate(argparse.Namespace(screen_start="yesterday", horizon_h=None))


@pytest.mark.slow  # five runs of the job (~60-90 s on 2 cores)
def test_incremental_runs_and_the_alert_lifecycle(spark, settings):
    """Three runs a minute apart: the first screens in full; the second (nothing renewed) screens only
    the new minute and keeps the alerts as they are; the third, after 102's element set was renewed
    (moved ~450 km along track), re-screens 102 against everything over the whole horizon and closes
    the alert as no longer found -- that screening covered both objects at its TCA. A co-located pair
    (403 and a copy of its element set, 404) is one persistent event and one alert, emitted once. The
    open events recorded after the third run are those of one full screening of the final catalogue."""
    ensure_tables(spark, settings)
    write_catalog(spark, settings)
    lines = screening.tle_from_elements(404, EPOCH, *ELEMENTS[403])
    append_rows(spark, settings, "catalog", [catalog_row(404, EPOCH, lines, 400.0, 400.0)])

    def at(run_id, minutes):
        a = args(run_id)
        a.screen_start = EPOCH - dt.timedelta(hours=3) + dt.timedelta(minutes=minutes)
        return a

    first = job.run(spark, settings, at("inc-1", 0))
    assert first["mode"] == "full" and first["alerts_new"] == 3 and first["ephemeris_states_read"] == 0
    by_pair = {(r["primary_id"], r["secondary_id"]): r for r in TABLES["alerts"].read(spark, settings).collect()}
    assert set(by_pair) == {(101, 102), (403, 404), (201, 202)}  # 201/202: the miss-probability rule
    assert by_pair[(403, 404)]["level"] == "yellow" and by_pair[(403, 404)]["miss_m"] == 0.0
    assert by_pair[(403, 404)]["alert_id"] == screening.persistent_event_id(403, 404)
    [persistent] = [r for r in TABLES["conjunctions"].read(spark, settings).collect() if r["primary_id"] == 403]
    assert persistent["flag"] == screening.PERSISTENT_WHOLE and persistent["pc"] is None and not persistent["pc_valid"]

    second = job.run(spark, settings, at("inc-2", 1))
    assert second["mode"] == "incremental" and second["changed_element_sets"] == 0
    assert second["parts"] == [{"start": first_end(1) - 60.0, "end": first_end(1), "step_s": 30.0, "focus": None}]
    assert (second["alerts_new"], second["alerts_updated"], second["alerts_closed"],
            second["emitted_files"]) == (0, 0, 0, 0)
    assert second["events"] == first["events"] and second["events_reassessed_state"] == 0

    # 101 observed since its epoch (a gold object_state window): the kept events of 101 get a new Pc
    # from its residuals, without a new screening -- the alert is updated with the new covariance
    state = {f.name: None for f in schemas.OBJECT_STATE.fields}
    state.update(norad_id=101, window_start=EPOCH, window_end=EPOCH + dt.timedelta(hours=1),  # after its epoch
                 observations=12, residual_rms_m=40.0, last_observed=EPOCH + dt.timedelta(minutes=10),
                 final=True, run_id="obs")
    append_rows(spark, settings, "object_state", [tuple(state[f] for f in schemas.OBJECT_STATE.fieldNames())])
    restated = job.run(spark, settings, at("inc-2b", 1))
    events_101 = sum(1 for r in TABLES["screening_events"].read(spark, settings).collect()
                     if 101 in (r["primary_id"], r["secondary_id"]))
    assert restated["mode"] == "incremental" and restated["events_reassessed_state"] == events_101 >= 1
    updated = {(r["primary_id"], r["secondary_id"]): r
               for r in TABLES["alerts"].read(spark, settings).collect()}[(101, 102)]
    assert updated["p_cov_source"].startswith("observed") and (updated["status"], updated["version"]) == ("updated", 2)

    renewed = EPOCH + dt.timedelta(minutes=1)
    lines = screening.tle_from_elements(102, renewed, *ELEMENTS[102])
    append_rows(spark, settings, "catalog", [catalog_row(102, renewed, lines, 702.0, 702.0)])
    third = job.run(spark, settings, at("inc-3", 2))
    assert third["mode"] == "incremental" and third["changed_element_sets"] == 1
    # the focus grid runs 03:00-09:03 every 3 min; the first screening stored 03:00-09:00 (121 times):
    # the 10 unchanged objects' states there are read from the ephemeris cache, not propagated
    assert third["parts"][1]["start"] == (EPOCH - dt.timedelta(hours=3)).timestamp()
    assert third["ephemeris_states_read"] == 10 * 121
    alerts_now = {(r["primary_id"], r["secondary_id"]): r for r in TABLES["alerts"].read(spark, settings).collect()}
    closed = alerts_now[(101, 102)]
    assert (closed["status"], closed["close_reason"], closed["version"]) == ("closed", CLOSE_NOT_FOUND, 3)
    # updated, not re-emitted
    assert (alerts_now[(403, 404)]["status"], alerts_now[(403, 404)]["version"]) == ("new", 1)
    [persistent] = [r for r in TABLES["conjunctions"].read(spark, settings).collect() if r["primary_id"] == 403]
    assert persistent["run_id"] == "inc-3"  # the row follows the latest screening

    # the recorded open events equal one full screening of the final catalogue
    final = {**ELEMENTS, 404: ELEMENTS[403]}
    ids = sorted(final)
    lines = [screening.tle_from_elements(n, renewed if n == 102 else EPOCH, *final[n]) for n in ids]
    sats = screening.satrecs_from_lines([a for a, _ in lines], [b for _, b in lines])
    start = (EPOCH - dt.timedelta(hours=3) + dt.timedelta(minutes=2)).timestamp()
    reference, _ = screening.screen(ids, sats, start, start + 6 * 3600, 5.0, settings.screening_step_s)
    recorded = TABLES["screening_events"].read(spark, settings).toPandas()
    assert len(recorded) == len(reference) == third["events"]
    for ref in reference.itertuples():
        match = recorded[(recorded.primary_id == ref.primary_id) & (recorded.secondary_id == ref.secondary_id)
                         & ((recorded.tca_unix - ref.tca_unix).abs() < 1.0)]
        assert len(match) == 1 and abs(match.miss_km.iloc[0] - ref.miss_km) < 0.010, ref
        assert match.flag.iloc[0] == ref.flag or (match.flag.iloc[0] is None and ref.flag is None)
    state = TABLES["screening_state"].read(spark, settings).collect()
    assert len(state) == 11 and {r["mode"] for r in state} == {"incremental"}
    assert {r["norad_id"]: r["epoch"] for r in state}[102] == renewed.replace(tzinfo=None)

    # a run whose interval ends 2 minutes before the recorded start (a scheduled run queued behind a
    # later manual one): the horizon does not move back -- nothing new to screen, nothing re-emitted
    behind = job.run(spark, settings, args("inc-4"))  # its --end, EPOCH - 3 h, is 2 min before the recorded start
    assert behind["mode"] == "incremental" and behind["parts"] == []
    assert behind["screen_start"] == (EPOCH - dt.timedelta(hours=3) + dt.timedelta(minutes=2)).isoformat()
    assert behind["events"] == third["events"] and behind["emitted_files"] == 0


def first_end(minutes: float) -> float:
    return (EPOCH - dt.timedelta(hours=3) + dt.timedelta(minutes=minutes)).timestamp() + 6 * 3600
