"""sda.alerts.publish.publish on Spark + Delta: the lifecycle across runs (new -> unchanged rerun -> updated ->
closed after TCA), exactly one CDM + JSON per change, crash between the outbox and the MERGEs, CDMs
that parse back to the tables' values, and Pc equal to a direct Foster computation."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pandas as pd
import pytest

from sda.alerts import cdm as cdm_mod
from sda.alerts.assessment import STATE_COLS
from sda.alerts.outbox import row_from_json
from sda.alerts.plan import CLOSE_TCA_PASSED
from sda.alerts.publish import publish
from sda.lake import schemas
from sda.lake.tables import TABLES, ensure_tables
from sda.orbit import frames, inertial, screening
from sda.orbit.pc import pc2d_foster, rtn_basis
from sda.pipeline import faults
from tests.seed import append_rows, catalog_row

UTC = dt.timezone.utc
EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
ELEMENTS = {  # 101/102 cross at the node at EPOCH ~150 m apart (tests/jobs/test_conjunction.py)
    101: (700.0, 0.0001, 98.0, 0.0, 0.0, 0.0),
    102: (702.0, 0.0001, 53.0, -0.01, 0.0, -0.02),
}
SCREEN_START = EPOCH - dt.timedelta(hours=1)
SCREEN_END = EPOCH + dt.timedelta(hours=2)
OBSERVED = EPOCH + dt.timedelta(hours=2)  # 101's newest object_state window: observed after its epoch
RMS_M = 80.0
TABLE_NAMES = ["catalog", "object_state", "conjunctions", "alerts", "alert_events"]


def _lines(norad_id):
    return screening.tle_from_elements(norad_id, EPOCH, *ELEMENTS[101 if norad_id == 901 else norad_id])


def write_inputs(spark, settings, ids=(101, 102)):
    ensure_tables(spark, settings, TABLE_NAMES)
    append_rows(spark, settings, "catalog", [catalog_row(n, EPOCH, _lines(n), 690.0, 712.0) for n in ids])
    # 101's newest object_state window (an older one with a larger residual must not be used)
    defaults = {"long": 0, "double": 0.0, "boolean": False, "string": "", "timestamp": EPOCH}
    states = []
    for start, rms in ((OBSERVED - dt.timedelta(hours=1), RMS_M), (EPOCH - dt.timedelta(hours=3), 900.0)):
        known = {"norad_id": 101, "window_start": start, "window_end": start + dt.timedelta(hours=1),
                 "observations": 12, "residual_mean_m": rms / 2, "residual_rms_m": rms,
                 "last_observed": start + dt.timedelta(minutes=59), "final": True, "run_id": "test"}
        states.append(tuple(known.get(f.name, None if f.nullable else defaults.get(f.dataType.typeName()))
                            for f in schemas.OBJECT_STATE.fields))
    append_rows(spark, settings, "object_state", states)


@pytest.fixture(scope="module")
def events():
    ids = sorted(ELEMENTS)
    sats = screening.satrecs_from_lines(*zip(*[_lines(n) for n in ids]))
    ev, _ = screening.screen(ids, sats, SCREEN_START.timestamp(), SCREEN_END.timestamp(), 5.0, 60.0)
    assert len(ev) == 2 and (ev["miss_km"] < 1.0).sum() == 1  # one close approach, one at ~3.8 km
    return ev


def moved(events, seconds=5.0, miss_km=0.03):
    """The same approaches as a new element set would give them: TCA and miss moved a little."""
    out = events.copy()
    out["tca_unix"] += seconds
    out["miss_km"] += miss_km
    return out


def table(spark, settings, name):
    rows = [r.asDict() for r in TABLES[name].read(spark, settings).collect()]
    return sorted(rows, key=lambda r: (r.get("alert_id") or r.get("event_id"), r.get("version") or 0))


def outbox(settings):
    return sorted(p.name for p in settings.outbox.iterdir()) if settings.outbox.exists() else []


def aware(t):
    return t.replace(tzinfo=UTC)


def check_cdm(settings, row):
    """The CDM file of an alert_events row parses back to the row's values."""
    cdm = cdm_mod.parse_cdm((settings.outbox / row["cdm_file"]).read_text())
    assert cdm.message_id == f"SDA-FUSION-{row['alert_id']}-V{row['version']}"
    assert cdm.creation_date == aware(row["cdm_created"])
    assert cdm.tca == aware(row["tca"])
    assert cdm.miss_distance_m == row["miss_m"] and cdm.relative_speed_ms == row["rel_speed_ms"]
    np.testing.assert_array_equal(cdm.relative_position_rtn_m, [row["r_m"], row["t_m"], row["n_m"]])
    assert cdm.collision_probability == row["pc"]
    assert f"status {row['status'].upper()}" in " ".join(cdm.header.comments + cdm.relative.comments)
    to_eme2000 = inertial.eme2000_to_teme(int(round(aware(row["tca"]).timestamp() * 1e6)) * 1000).T
    for n, o in ((1, "p"), (2, "s")):
        teme = np.array([row[f"{o}_{c}"] for c in ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms")]) / 1000.0
        assert cdm.object(n).ref_frame == "EME2000"
        np.testing.assert_allclose(cdm.object(n).state_km, np.r_[to_eme2000 @ teme[:3], to_eme2000 @ teme[3:]],
                                   rtol=1e-14, atol=1e-12)
        sig = np.array([row[f"{o}_sigma_{c}"] for c in ("r_m", "t_m", "n_m", "rdot_ms", "tdot_ms", "ndot_ms")])
        np.testing.assert_allclose(cdm.object(n).cov_rtn, np.diag(sig ** 2), rtol=0, atol=1e-12 * np.max(sig ** 2))
    assert cdm_mod.pc_from_cdm(cdm).pc == pytest.approx(row["pc"], rel=1e-9)
    body = row_from_json((settings.outbox / row["json_file"]).read_text())
    assert {k: body[k] for k in ("alert_id", "version", "status", "miss_m", "pc", "content_hash")} == {
        k: row[k] for k in ("alert_id", "version", "status", "miss_m", "pc", "content_hash")}


def test_lifecycle_across_runs(spark, settings, events):
    write_inputs(spark, settings)

    # run 1: one red alert, new, one CDM + JSON
    m1 = publish(spark, settings, events, SCREEN_START, "run-1", screen_end=SCREEN_END)
    rules = {k: m1.pop(k) for k in list(m1) if k.startswith("rule_")}
    assert m1 == {"events": 2, "alerts_new": 1, "alerts_updated": 0, "alerts_closed": 0, "alerts_unchanged": 0,
                  "alerts_recovered": 0, "emitted_files": 2, "red": 1, "yellow": 0, "pc_invalid": 0,
                  "open_alerts_red": 1, "open_alerts_yellow": 0, "open_alerts_none": 0}
    # the red event's Pc rule, and the predicted-miss rule for each event under the 1 km alert distance
    assert rules["rule_pc"] == 1 and rules["rule_miss_distance"] == int((events["miss_km"] < 1.0).sum())
    conj = {r["event_id"]: r for r in table(spark, settings, "conjunctions")}
    assert sorted(r["level"] for r in conj.values()) == ["none", "red"]
    assert all(r["pc_valid"] and r["pc"] is not None and r["pc_flag"] is None for r in conj.values())
    [a1] = table(spark, settings, "alerts")
    assert ((a1["status"], a1["version"], a1["level"], a1["first_run_id"], a1["run_id"])
            == ("new", 1, "red", "run-1", "run-1"))
    assert a1["alert_id"] == a1["event_id"] and a1["alert_id"] in conj
    assert (a1["p_cov_source"], a1["s_cov_source"]) == ("observed/LEO", "tle/LEO")
    assert conj[a1["event_id"]]["pc"] == a1["pc"]
    files1 = outbox(settings)
    assert files1 == [f"CDM-{a1['alert_id']}-v1.cdm", f"CDM-{a1['alert_id']}-v1.json"]

    # the Pc equals a direct Foster computation on the states and covariances built by hand
    ev = events[events["miss_km"] < 1.0].iloc[0]
    t = float(ev.tca_unix)
    r1 = np.array([ev.p_x, ev.p_y, ev.p_z]) * 1e3
    v1 = np.array([ev.p_vx, ev.p_vy, ev.p_vz]) * 1e3
    r2 = np.array([ev.s_x, ev.s_y, ev.s_z]) * 1e3
    v2 = np.array([ev.s_vx, ev.s_vy, ev.s_vz]) * 1e3
    last = OBSERVED - dt.timedelta(minutes=1)  # last_observed of 101's newest window
    d1, d2 = abs(t - last.timestamp()) / 86400.0, abs(t - EPOCH.timestamp()) / 86400.0
    k = RMS_M / math.sqrt(100.0**2 + 500.0**2 + 200.0**2)  # observed RMS spread in LEO proportions
    s1 = np.array([max(100 * k, 10.0) + 50 * d1, 500 * k + 1000 * d1 + 100 * d1**2, 200 * k + 50 * d1])
    s2 = np.array([100 + 50 * d2, 500 + 1000 * d2 + 100 * d2**2, 200 + 50 * d2])
    M1, M2 = rtn_basis(r1, v1), rtn_basis(r2, v2)
    direct = pc2d_foster(r1, v1, M1 @ np.diag(s1**2) @ M1.T, r2, v2, M2 @ np.diag(s2**2) @ M2.T,
                         settings.hard_body_radius_m)
    assert a1["pc"] == pytest.approx(direct.pc, rel=1e-12) and a1["pc"] >= settings.pc_red
    np.testing.assert_allclose([a1["p_sigma_r_m"], a1["p_sigma_t_m"], a1["p_sigma_n_m"]], s1, rtol=1e-12)

    # run 2 (a new run id, same results): nothing emitted, nothing rewritten
    before = {n: table(spark, settings, n) for n in ("alerts", "alert_events")}
    mtimes = {p.name: p.stat().st_mtime_ns for p in settings.outbox.iterdir()}
    m2 = publish(spark, settings, events, SCREEN_START, "run-2", screen_end=SCREEN_END)
    assert (m2["emitted_files"], m2["alerts_new"], m2["alerts_updated"], m2["alerts_unchanged"]) == (0, 0, 0, 1)
    assert m2["open_alerts_red"] == 1  # unchanged, still open
    assert {n: table(spark, settings, n) for n in ("alerts", "alert_events")} == before
    assert {p.name: p.stat().st_mtime_ns for p in settings.outbox.iterdir()} == mtimes

    # run 3: a new element set moves the TCA by 5 s and the miss by 30 m -> updated, version 2
    start3 = SCREEN_START + dt.timedelta(minutes=15)
    m3 = publish(spark, settings, moved(events), start3, "run-3", screen_end=SCREEN_END)
    assert (m3["alerts_updated"], m3["emitted_files"]) == (1, 2)
    [a2] = table(spark, settings, "alerts")
    assert (a2["alert_id"], a2["status"], a2["version"], a2["run_id"], a2["first_run_id"]) == (
        a1["alert_id"], "updated", 2, "run-3", "run-1")
    assert a2["miss_m"] == pytest.approx(a1["miss_m"] + 30.0)
    assert abs(aware(a2["tca"]) - aware(a1["tca"]) - dt.timedelta(seconds=5)) <= dt.timedelta(microseconds=1)

    # run 4: the screening starts after TCA -> closed, version 3, once
    start4 = aware(a2["tca"]) + dt.timedelta(minutes=30)
    empty = events.iloc[0:0]
    m4 = publish(spark, settings, empty, start4, "run-4")
    assert (m4["events"], m4["alerts_closed"], m4["emitted_files"]) == (0, 1, 2)
    assert (m4["open_alerts_red"], m4["open_alerts_yellow"], m4["open_alerts_none"]) == (0, 0, 0)  # closed, still red
    m4b = publish(spark, settings, empty, start4, "run-4")  # a retry of the finished run
    assert (m4b["alerts_closed"], m4b["emitted_files"]) == (0, 0)
    [a3] = table(spark, settings, "alerts")
    assert (a3["status"], a3["version"], a3["close_reason"], a3["level"]) == ("closed", 3, CLOSE_TCA_PASSED, "red")

    # exactly one CDM + JSON per change, the history in alert_events, each CDM parsing back to it
    history = table(spark, settings, "alert_events")
    assert [(h["version"], h["status"]) for h in history] == [(1, "new"), (2, "updated"), (3, "closed")]
    assert outbox(settings) == sorted(f"CDM-{a1['alert_id']}-v{v}.{ext}" for v in (1, 2, 3) for ext in ("cdm", "json"))
    for h in history:
        check_cdm(settings, h)
    assert aware(history[2]["cdm_created"]) == start4 and aware(history[1]["cdm_created"]) == start3


def test_crash_between_outbox_and_merge(spark, settings, events, monkeypatch):
    write_inputs(spark, settings)

    def crash_at(point, evs, run_id, start=SCREEN_START):
        monkeypatch.setattr(faults, "KILL_AT", {point})
        with pytest.raises(faults.SimulatedCrash, match=point):
            publish(spark, settings, evs, start, run_id, screen_end=SCREEN_END)
        monkeypatch.setattr(faults, "KILL_AT", set())

    # killed after the files, before the MERGEs; the retry (same run) records them, writes nothing
    crash_at("conjunction:after-outbox", events, "run-1")
    assert (len(outbox(settings)) == 2
            and table(spark, settings, "alerts") == [] == table(spark, settings, "alert_events"))
    m = publish(spark, settings, events, SCREEN_START, "run-1", screen_end=SCREEN_END)
    assert (m["alerts_recovered"], m["alerts_new"], m["emitted_files"]) == (1, 0, 0)
    [a1] = table(spark, settings, "alerts")
    assert (a1["version"], a1["status"], a1["run_id"]) == (1, "new", "run-1")
    assert len(table(spark, settings, "alert_events")) == 1 and len(outbox(settings)) == 2

    # killed after emitting v2; the retry sees *different* results (yet another element set): v2 stands
    # as emitted (adopted from its JSON twin) and the new results become v3
    crash_at("conjunction:after-outbox", moved(events), "run-2")
    assert len(outbox(settings)) == 4
    m = publish(spark, settings, moved(events, miss_km=0.06), SCREEN_START, "run-2", screen_end=SCREEN_END)
    assert (m["alerts_recovered"], m["alerts_updated"], m["emitted_files"]) == (1, 1, 2)
    history = table(spark, settings, "alert_events")
    assert [(h["version"], h["status"]) for h in history] == [(1, "new"), (2, "updated"), (3, "updated")]
    assert history[1]["miss_m"] == pytest.approx(a1["miss_m"] + 30.0)
    assert history[2]["miss_m"] == pytest.approx(a1["miss_m"] + 60.0)
    assert len(outbox(settings)) == 6
    for h in history:
        check_cdm(settings, h)

    # killed between alert_events and alerts: the retry completes the alerts row, no file twice
    crash_at("conjunction:after-alert-events", moved(events, miss_km=0.2), "run-3")
    assert len(outbox(settings)) == 8 and len(table(spark, settings, "alert_events")) == 4
    assert table(spark, settings, "alerts")[0]["version"] == 3
    m = publish(spark, settings, moved(events, miss_km=0.2), SCREEN_START, "run-3", screen_end=SCREEN_END)
    assert (m["alerts_recovered"], m["emitted_files"]) == (1, 0)
    [a4] = table(spark, settings, "alerts")
    assert (a4["version"], a4["miss_m"]) == (4, pytest.approx(a1["miss_m"] + 200.0))
    assert len(table(spark, settings, "alert_events")) == 4 and len(outbox(settings)) == 8
    assert not [p for p in settings.outbox.iterdir() if p.name.startswith(".")]  # no temp files left


def test_invalid_geometry_is_flagged_not_given_a_pc(spark, settings):
    """901 co-orbits 101, 300 m above it, drifting at 5 cm/s: the 2-D method does not apply."""
    write_inputs(spark, settings, ids=(101, 901))
    [sat] = screening.satrecs_from_lines(*[[x] for x in _lines(101)])
    jd, fr = frames.unix_to_jd(EPOCH.timestamp())
    _, r, v = sat.sgp4(float(jd), float(fr))
    r, v = np.array(r), np.array(v)
    M = rtn_basis(r, v)
    r2, v2 = r + 0.3 * M[:, 0], v + 0.05e-3 * M[:, 1]
    rtn = screening.rtn_components(r, v, r2)
    ev = pd.DataFrame([{"primary_id": 101, "secondary_id": 901, "tca_unix": EPOCH.timestamp(),
                        "miss_km": float(np.linalg.norm(r2 - r)), "rel_speed_km_s": float(np.linalg.norm(v2 - v)),
                        "r_km": rtn[0], "t_km": rtn[1], "n_km": rtn[2],
                        **{f"p_{c}": x for c, x in zip(STATE_COLS, np.r_[r, v])},
                        **{f"s_{c}": x for c, x in zip(STATE_COLS, np.r_[r2, v2])}}])
    m = publish(spark, settings, ev, SCREEN_START, "run-1", screen_end=SCREEN_END)
    assert (m["pc_invalid"], m["yellow"], m["alerts_new"]) == (1, 1, 1)
    [c] = table(spark, settings, "conjunctions")
    assert c["pc"] is None and c["pc_valid"] is False and c["pc_flag"] == "long encounter (low relative velocity)"
    [a] = table(spark, settings, "alerts")
    assert a["pc"] is None and a["level"] == "yellow" and a["reason"].startswith("Pc not computed")
    cdm = cdm_mod.parse_cdm((settings.outbox / a["cdm_file"]).read_text())
    assert cdm.collision_probability is None and cdm.miss_distance_m == pytest.approx(300.0, abs=1e-6)
