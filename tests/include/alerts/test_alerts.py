"""sda.alerts without Spark: levels, Pc wiring and validity (assessment), content (content), the alert lifecycle
(plan), CDM/JSON emission (outbox)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math

import numpy as np
import pandas as pd
import pytest

from sda.alerts import cdm as cdm_mod
from sda.alerts.assessment import STATE_COLS, alert_level, assess, dedup_events, intl_designator, pc_flag
from sda.alerts.content import content_changed, content_hash, persistent_changed
from sda.alerts.outbox import (
    ALERT_FIELDS,
    cdm_text,
    emit,
    file_names,
    json_text,
    outbox_lookup,
    row_from_json,
    teme_states_from_cdm,
    write_if_absent,
)
from sda.alerts.plan import CLOSE_NOT_FOUND, CLOSE_RISK_DROPPED, CLOSE_TCA_PASSED, plan_alerts
from sda.config.settings import load_settings
from sda.orbit import frames, screening
from sda.orbit.pc import inertial_to_rtn, pc2d_foster, pc2d_foster_rtn, rtn_basis

UTC = dt.timezone.utc
EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
ELEMENTS = {  # as tests/jobs/test_conjunction.py: 101/102 cross at the node at EPOCH ~150 m apart
    101: (700.0, 0.0001, 98.0, 0.0, 0.0, 0.0),
    102: (702.0, 0.0001, 53.0, -0.01, 0.0, -0.02),
}
SCREEN_START = EPOCH - dt.timedelta(hours=1)
SCREEN_END = EPOCH + dt.timedelta(hours=2)


@pytest.fixture(scope="module")
def settings():
    return load_settings(env={})


@pytest.fixture(scope="module")
def lines():
    return {n: screening.tle_from_elements(n, EPOCH, *e) for n, e in ELEMENTS.items()}


@pytest.fixture(scope="module")
def catalog(lines):
    return pd.DataFrame([{"norad_id": n, "epoch": EPOCH, "perigee_km": 690.0, "apogee_km": 712.0,
                          "name": f"OBJ {n}", "line1": l1, "line2": l2} for n, (l1, l2) in lines.items()])


@pytest.fixture(scope="module")
def events(lines):
    sats = screening.satrecs_from_lines(*zip(*lines.values()))
    ev, _ = screening.screen(list(lines), sats, SCREEN_START.timestamp(), SCREEN_END.timestamp(), 5.0, 60.0)
    close = ev[ev["miss_km"] < 1.0].reset_index(drop=True)
    assert len(close) == 1
    return close


@pytest.fixture(scope="module")
def assessed(events, catalog, settings):
    return assess(events, None, catalog, settings)


# --------------------------------------------------------------------------- levels

@pytest.mark.parametrize("pc, miss_m, level", [
    (2e-4, 4000.0, "red"),
    (1e-4, 4000.0, "red"),  # at the red threshold
    (9.99e-5, 4000.0, "yellow"),
    (1e-7, 4000.0, "yellow"),  # at the yellow threshold
    (9.99e-8, 4000.0, "none"),
    (1e-9, 999.0, "yellow"),  # under the 1 km alert distance
    (1e-9, 1000.0, "none"),  # at the alert distance: not under it
    (0.0, 10.0, "yellow"),
    (None, 500.0, "yellow"),  # no valid Pc: the miss distance decides
    (None, 2000.0, "none"),
    (float("nan"), 500.0, "yellow"),
])
def test_alert_level_defaults(settings, pc, miss_m, level):
    got, reason = alert_level(pc, miss_m, settings, "long encounter (low relative velocity)" if pc is None else None)
    assert got == level
    if pc is None or (isinstance(pc, float) and math.isnan(pc)):
        assert reason.startswith("Pc not computed") and "miss distance" in reason
    elif level == "red":
        assert "red threshold" in reason


def test_alert_level_follows_settings(settings):
    strict = load_settings(env={}, pc_red=1e-3, pc_yellow=1e-5, alert_distance_km=0.5)
    assert alert_level(5e-4, 4000.0, strict)[0] == "yellow"
    assert alert_level(5e-6, 4000.0, strict)[0] == "none"
    assert alert_level(5e-6, 499.0, strict)[0] == "yellow"
    assert alert_level(5e-6, 700.0, settings)[0] == "yellow"
    assert alert_level(5e-6, 700.0, strict)[0] == "none"


# --------------------------------------------------------------------------- Pc

def test_foster_pc_on_cara_omitron_case(shared_data):
    """The RTN-covariance path of assess() on CARA's Omitron 01 vector (ECI covariances turned into
    each object's RTN covariance and back): CARA's Pc."""
    cases = {c["id"]: c for c in json.loads((shared_data / "pc" / "cara_unit_test_vectors.json").read_text())["cases"]}
    c = cases["omitron_01_circle"]
    r1, v1, r2, v2 = (np.array(c[k]) * 1000.0 for k in ("r1", "v1", "r2", "v2"))
    C1, C2 = np.array(c["cov1"]) * 1e6, np.array(c["cov2"]) * 1e6
    res = pc2d_foster_rtn(r1, v1, inertial_to_rtn(C1, r1, v1), r2, v2, inertial_to_rtn(C2, r2, v2), c["hbr"] * 1000.0)
    assert res.valid and pc_flag(res) is None
    assert res.pc == pytest.approx(c["expected_Pc"], rel=1e-9)


def test_assess_pc_equals_direct_foster(events, catalog, settings):
    """assess() against a Foster computation from the same states and covariances built by hand:
    101 observed 6 h after its epoch (residual RMS 300 m), 102 never observed (TLE epoch)."""
    last = EPOCH + dt.timedelta(hours=6)  # after TCA: growth is with |TCA - t_ref|
    states = pd.DataFrame([{"norad_id": 101, "last_observed": last, "residual_rms_m": 300.0, "observations": 12}])
    out = assess(events, states, catalog, settings).iloc[0]
    ev = events.iloc[0]
    t = float(ev.tca_unix)
    r1 = np.array([ev.p_x, ev.p_y, ev.p_z]) * 1000.0
    v1 = np.array([ev.p_vx, ev.p_vy, ev.p_vz]) * 1000.0
    r2 = np.array([ev.s_x, ev.s_y, ev.s_z]) * 1000.0
    v2 = np.array([ev.s_vx, ev.s_vy, ev.s_vz]) * 1000.0
    # by hand: LEO shape (100, 500, 200) / sqrt(300000) * 300 m, growth (50, 1000, 50) m/day + 100 m/day^2
    d1 = abs(t - last.timestamp()) / 86400.0
    k = 300.0 / math.sqrt(300000.0)
    s1 = np.array([100 * k + 50 * d1, 500 * k + 1000 * d1 + 100 * d1 * d1, 200 * k + 50 * d1])
    d2 = abs(t - EPOCH.timestamp()) / 86400.0
    s2 = np.array([100 + 50 * d2, 500 + 1000 * d2 + 100 * d2 * d2, 200 + 50 * d2])
    M1, M2 = rtn_basis(r1, v1), rtn_basis(r2, v2)
    C1, C2 = M1 @ np.diag(s1 ** 2) @ M1.T, M2 @ np.diag(s2 ** 2) @ M2.T
    direct = pc2d_foster(r1, v1, C1, r2, v2, C2, 20.0)
    assert direct.valid and out["pc_valid"]
    assert out["pc"] == pytest.approx(direct.pc, rel=1e-12)
    np.testing.assert_allclose([out["p_sigma_r_m"], out["p_sigma_t_m"], out["p_sigma_n_m"]], s1, rtol=1e-12)
    np.testing.assert_allclose([out["s_sigma_r_m"], out["s_sigma_t_m"], out["s_sigma_n_m"]], s2, rtol=1e-12)
    n1 = math.sqrt(3.986004418e14 / np.linalg.norm(r1) ** 3)
    np.testing.assert_allclose([out["p_sigma_rdot_ms"], out["p_sigma_tdot_ms"], out["p_sigma_ndot_ms"]], n1 * s1,
                               rtol=1e-12)
    assert (out["p_cov_source"], out["s_cov_source"]) == ("observed/LEO", "tle/LEO")
    assert out["miss_m"] == pytest.approx(ev.miss_km * 1000.0) and out["hbr_m"] == 20.0
    assert out["event_id"] == screening.event_id(101, 102, t)


def test_assess_propagates_when_the_events_carry_no_states(events, catalog, settings, assessed):
    bare = events[["primary_id", "secondary_id", "tca_unix", "miss_km", "rel_speed_km_s", "r_km", "t_km", "n_km"]]
    out = assess(bare, None, catalog, settings)
    for c in ("p_x_m", "s_vz_ms"):
        assert out[c].iloc[0] == pytest.approx(assessed[c].iloc[0], rel=1e-12)
    assert out["pc"].iloc[0] == pytest.approx(assessed["pc"].iloc[0], rel=1e-9)


def _co_orbiting(dv_ms: float, dr_m: float = 300.0) -> pd.DataFrame:
    """A hand-built event: 901 sits dr_m radially above 101 and drifts at dv_ms along track."""
    l1, l2 = screening.tle_from_elements(101, EPOCH, *ELEMENTS[101])
    [sat] = screening.satrecs_from_lines([l1], [l2])
    jd, fr = frames.unix_to_jd(EPOCH.timestamp())
    _, r, v = sat.sgp4(float(jd), float(fr))
    r, v = np.array(r), np.array(v)
    M = rtn_basis(r, v)
    r2 = r + M[:, 0] * dr_m / 1000.0
    v2 = v + M[:, 1] * dv_ms / 1000.0
    rtn = screening.rtn_components(r, v, r2)
    row = {"primary_id": 101, "secondary_id": 901, "tca_unix": EPOCH.timestamp(),
           "miss_km": float(np.linalg.norm(r2 - r)), "rel_speed_km_s": float(np.linalg.norm(v2 - v)),
           "r_km": rtn[0], "t_km": rtn[1], "n_km": rtn[2],
           **{f"p_{c}": x for c, x in zip(STATE_COLS, np.r_[r, v])},
           **{f"s_{c}": x for c, x in zip(STATE_COLS, np.r_[r2, v2])}}
    return pd.DataFrame([row])


@pytest.fixture(scope="module")
def catalog_901(catalog, lines):
    extra = catalog[catalog.norad_id == 101].assign(norad_id=901, name="OBJ 901")
    return pd.concat([catalog, extra], ignore_index=True)


def test_invalid_geometry_gets_no_pc_and_a_flag(catalog_901, settings):
    out = assess(_co_orbiting(0.05), None, catalog_901, settings).iloc[0]
    assert not out["pc_valid"] and pd.isna(out["pc"])
    assert out["pc_flag"] == "long encounter (low relative velocity)"
    assert "extended encounter" in out["pc_reason"]
    # 300 m: under the alert distance, so yellow on the miss alone, and the reason says so
    assert out["level"] == "yellow" and out["reason"].startswith("Pc not computed") and "300 m" in out["reason"]
    zero = assess(_co_orbiting(0.0), None, catalog_901, settings).iloc[0]
    assert not zero["pc_valid"] and pd.isna(zero["pc"]) and zero["pc_flag"] == "low relative velocity"
    # the same geometry at a normal crossing speed is valid
    fast = assess(_co_orbiting(3000.0), None, catalog_901, settings).iloc[0]
    assert fast["pc_valid"] and fast["pc"] > 0 and fast["pc_flag"] is None


def test_intl_designator_and_dedup():
    assert intl_designator("1 25544U 98067A   16113.11058294  .00003951  00000-0  66475-4 0  9992") == "1998-067A"
    assert intl_designator("1 58001U 24001AB  24001.50000000  .00000000  00000-0  00000-0 0  9990") == "2024-001AB"
    assert intl_designator("1 00101U          26325.25000000  .00000000  00000-0  00000-0 0  9990") == "UNKNOWN"
    assert intl_designator(None) == "UNKNOWN"
    t = EPOCH.timestamp()
    ev = pd.DataFrame({"primary_id": [1, 1, 1], "secondary_id": [2, 2, 2], "tca_unix": [t + 10, t + 20, t + 4000],
                       "miss_km": [0.5, 0.4, 0.9]})
    out = dedup_events(ev)  # the first two share a TCA minute: the closer one stays
    assert out["miss_km"].tolist() == [0.4, 0.9]


# --------------------------------------------------------------------------- content

def test_content_hash_rounding_and_change_rule(assessed):
    a = {**assessed.iloc[0].to_dict(), "level": "red"}
    assert content_hash(a) == content_hash(dict(a, miss_m=a["miss_m"] + 0.01, p_x_m=0.0))
    assert content_changed(a, dict(a, miss_m=a["miss_m"] + 30.0))
    assert content_changed(a, dict(a, tca=a["tca"] + dt.timedelta(seconds=5)))
    assert content_changed(a, dict(a, level="yellow"))
    assert content_changed(a, dict(a, pc=a["pc"] * 1.01))
    assert content_changed(a, dict(a, pc=None, pc_valid=False, pc_flag="low relative velocity"))
    assert not content_changed(a, dict(a, pc=a["pc"] * (1 + 1e-6)))
    # a value hovering at a rounding boundary: the rounded content differs, the value hardly moved
    b = dict(a, miss_m=100.4999)
    assert content_hash(b) != content_hash(dict(b, miss_m=100.5001))
    assert not content_changed(b, dict(b, miss_m=100.5001))


def test_maneuverable_flags_are_content_and_old_hashes_stand(assessed):
    a = {**assessed.iloc[0].to_dict(), "level": "red"}
    assert (a["p_maneuverable"], a["s_maneuverable"]) == (False, False)
    before = {k: v for k, v in a.items() if k not in ("p_maneuverable", "s_maneuverable")}  # a row from before them
    assert content_hash(before) == content_hash(a) == content_hash(dict(a, p_maneuverable=None))
    assert content_hash(dict(a, s_maneuverable=True)) != content_hash(a)
    assert content_changed(a, dict(a, s_maneuverable=True)) and content_changed(before, dict(a, p_maneuverable=True))
    assert persistent_changed(a, dict(a, p_maneuverable=True))
    assert not content_changed(before, dict(a, p_maneuverable=False, s_maneuverable=None))


# --------------------------------------------------------------------------- lifecycle

def _plan(assessed, current, settings, start=SCREEN_START, end=SCREEN_END, run_id="r", emitted=None):
    return plan_alerts(assessed, current, start, end, run_id, settings, emitted)


def _shifted(assessed, seconds=0.0, miss=0.0, **values):
    out = assessed.copy()
    out["tca"] = out["tca"] + pd.Timedelta(seconds=seconds)
    out["tca_unix"] = out["tca_unix"] + seconds
    out["miss_m"] = out["miss_m"] + miss
    for k, v in values.items():
        out[k] = v
    return out


def test_lifecycle_new_unchanged_updated_closed(assessed, settings):
    p1 = _plan(assessed, [], settings, run_id="run-1")
    [new] = p1.changes
    assert (new["status"], new["version"], new["level"]) == ("new", 1, "red")
    assert new["alert_id"] == assessed["event_id"].iloc[0] and new["first_run_id"] == "run-1"
    assert (new["cdm_file"], new["json_file"]) == file_names(new["alert_id"], 1)
    assert new["cdm_file"] == f"CDM-{new['alert_id']}-v1.cdm" and new["cdm_created"] == SCREEN_START
    assert new["close_reason"] is None and set(new) == set(ALERT_FIELDS)

    p2 = _plan(assessed, [new], settings, run_id="run-2")  # same results: nothing to emit
    assert p2.changes == [] and p2.unchanged == 1 and p2.adopted == []

    moved = _shifted(assessed, seconds=5.0, miss=30.0)  # a new element set: TCA +5 s, miss +30 m
    start3 = SCREEN_START + dt.timedelta(minutes=15)
    [upd] = _plan(moved, [new], settings, start=start3, end=SCREEN_END, run_id="run-3").changes
    assert (upd["status"], upd["version"], upd["alert_id"]) == ("updated", 2, new["alert_id"])
    assert upd["miss_m"] == pytest.approx(new["miss_m"] + 30.0) and upd["first_run_id"] == "run-1"
    assert upd["screen_start"] == start3 and upd["cdm_created"] == start3 and upd["run_id"] == "run-3"

    after = upd["tca"] + dt.timedelta(minutes=30)  # the next screening starts after TCA: closed
    [closed] = _plan(assessed.iloc[0:0], [upd], settings, start=after, end=after + dt.timedelta(hours=3),
                     run_id="run-4").changes
    assert (closed["status"], closed["version"], closed["close_reason"]) == ("closed", 3, CLOSE_TCA_PASSED)
    assert closed["level"] == "red" and closed["miss_m"] == upd["miss_m"] and closed["screen_start"] == start3
    assert closed["cdm_created"] == after and "passed" in closed["reason"]
    # closed after TCA: never again, even if an event of the pair came within the tolerance
    again = _plan(_shifted(assessed, seconds=(after - EPOCH).total_seconds() + 30.0), [closed], settings,
                  start=after, end=after + dt.timedelta(hours=3), run_id="run-5")
    assert [c["status"] for c in again.changes] == ["new"] and again.changes[0]["alert_id"] != closed["alert_id"]


def test_risk_dropped_closes_and_reopens(assessed, settings):
    [new] = _plan(assessed, [], settings).changes
    low = _shifted(assessed, miss=2000.0, pc=1e-9, level="none", reason="Pc 1e-09 below ...")
    [closed] = _plan(low, [new], settings).changes
    assert (closed["status"], closed["level"], closed["close_reason"]) == ("closed", "none", CLOSE_RISK_DROPPED)
    assert closed["version"] == 2 and closed["miss_m"] == pytest.approx(new["miss_m"] + 2000.0)
    assert _plan(low, [closed], settings).changes == []  # still low: nothing
    [reopened] = _plan(assessed, [closed], settings).changes  # risk back before TCA: reopened
    assert (reopened["status"], reopened["version"], reopened["level"]) == ("updated", 3, "red")
    assert reopened["reason"].startswith("reopened") and reopened["close_reason"] is None


def test_not_found_in_a_covering_rescreen(assessed, settings):
    [new] = _plan(assessed, [], settings).changes
    empty = assessed.iloc[0:0]
    [closed] = _plan(empty, [new], settings).changes
    assert (closed["status"], closed["level"], closed["close_reason"]) == ("closed", "none", CLOSE_NOT_FOUND)
    assert closed["miss_m"] == new["miss_m"]  # the values of its last version
    # a screening that did not cover the TCA (or only within the tolerance of an edge) leaves it open
    tca = new["tca"]
    assert _plan(empty, [new], settings, start=tca + dt.timedelta(minutes=5) - dt.timedelta(hours=3),
                 end=tca + dt.timedelta(minutes=1)).changes == []
    assert _plan(empty, [new], settings, start=tca - dt.timedelta(seconds=60), end=SCREEN_END).changes == []
    assert _plan(empty, [new], settings, start=tca - dt.timedelta(hours=5),
                 end=tca - dt.timedelta(hours=1)).changes == []


def test_tca_tolerance(assessed, settings):
    [new] = _plan(assessed, [], settings).changes
    near = _shifted(assessed, seconds=110.0)  # within 120 s: the same alert
    assert [c["status"] for c in _plan(near, [new], settings).changes] == ["updated"]
    far = _shifted(assessed, seconds=150.0)  # beyond: a new alert, and the old one is not found any more
    changes = _plan(far, [new], settings).changes
    assert sorted(c["status"] for c in changes) == ["closed", "new"]
    wider = dataclasses.replace(settings, alert_tca_tolerance_s=200.0)
    assert [c["status"] for c in _plan(far, [new], wider).changes] == ["updated"]


def test_adoption_of_emitted_but_unrecorded_versions(assessed, settings):
    [v1] = _plan(assessed, [], settings, run_id="crashed").changes
    outbox = {(v1["alert_id"], 1): row_from_json(json_text(v1))}
    lookup = lambda aid, v: outbox.get((aid, v))  # noqa: E731
    # the retry, same results: v1 is adopted (recorded), nothing new emitted
    p = _plan(assessed, [], settings, run_id="crashed", emitted=lookup)
    assert p.changes == [] and [a["version"] for a in p.adopted] == [1] and p.unchanged == 1
    assert p.adopted[0] == v1
    # the retry after the inputs changed: v1 stands as emitted, the change is v2
    p = _plan(_shifted(assessed, miss=40.0), [], settings, run_id="retry", emitted=lookup)
    assert [a["version"] for a in p.adopted] == [1]
    [v2] = p.changes
    assert (v2["status"], v2["version"], v2["first_run_id"]) == ("updated", 2, "crashed")
    # an existing alert whose next version is in the outbox
    p = _plan(assessed, [v1], settings,
              emitted=lambda aid, v: dict(v1, version=2, status="updated") if v == 2 else None)
    assert [a["version"] for a in p.adopted] == [2] and p.changes == []


def test_a_manoeuvre_makes_a_new_version(assessed, events, catalog, settings):
    flagged = assess(events, None, catalog, settings, manoeuvred={101, 999})
    assert flagged["p_maneuverable"].tolist() == [True] and flagged["s_maneuverable"].tolist() == [False]
    [v1] = _plan(assessed, [], settings).changes
    [v2] = _plan(flagged, [v1], settings).changes
    assert (v2["status"], v2["version"], v2["p_maneuverable"], v2["s_maneuverable"]) == ("updated", 2, True, False)
    assert _plan(flagged, [v2], settings).changes == []  # still manoeuvred: nothing new
    # an alert stored before the flags (null), its objects not manoeuvred: unchanged, nothing emitted
    assert _plan(assessed, [dict(v1, p_maneuverable=None, s_maneuverable=None)], settings).changes == []


# --------------------------------------------------------------------------- emission

def _row(assessed, settings, **changes):
    [row] = _plan(_shifted(assessed, **changes) if changes else assessed, [], settings).changes
    return row


def test_cdm_of_a_real_name_with_brackets(assessed, settings):
    """Real catalogue names carry brackets (CelesTrak: 'STARLINK-11353 [DTC]'), which a KVN value
    cannot: the CDM writes them as parentheses instead of failing the run."""
    row = dict(_row(assessed, settings), primary_name="STARLINK-11353 [DTC]")
    cdm = cdm_mod.parse_cdm(cdm_text(row))
    assert cdm.objects[0]["OBJECT_NAME"] == "STARLINK-11353 (DTC)"


def _astropy_eme2000(teme_km: np.ndarray, when: dt.datetime) -> np.ndarray:
    """An independent TEME -> EME2000: astropy's TEME -> GCRS (bundled IERS data, nothing downloaded), then
    the IAU 2006 frame bias GCRS -> J2000 mean (a constant matrix)."""
    import erfa
    from astropy import units as u
    from astropy.coordinates import GCRS, TEME, CartesianDifferential, CartesianRepresentation
    from astropy.time import Time
    from astropy.utils import iers

    with iers.conf.set_temp("auto_download", False), iers.conf.set_temp("auto_max_age", None):
        t = Time(when.replace(tzinfo=None), scale="utc")
        rep = CartesianRepresentation(teme_km[:3] * u.km, differentials=CartesianDifferential(teme_km[3:] * u.km / u.s))
        g = TEME(rep, obstime=t).transform_to(GCRS(obstime=t)).cartesian
        r, v = g.xyz.to(u.km).value, g.differentials["s"].d_xyz.to(u.km / u.s).value
    bias = np.asarray(erfa.bp06(2451545.0, 0.0)[0])
    return np.r_[bias @ r, bias @ v]


def test_cdm_parses_back_to_the_row(assessed, settings):
    """The CDM is in one frame: EME2000 states (checked against astropy's TEME -> GCRS and the frame bias),
    covariances on the R/T/N axes of those states, the alert row's relative position (the same in both
    inertial frames: checked against the written states), and the row's Pc recomputed from the message."""
    row = _row(assessed, settings)
    text = cdm_text(row)
    assert cdm_text(row) == text  # deterministic bytes
    cdm = cdm_mod.parse_cdm(text)
    assert cdm_mod.write_cdm(cdm) == text
    assert cdm.version == "1.0" and cdm.originator == "SDA-FUSION"
    assert cdm.message_id == f"SDA-FUSION-{row['alert_id']}-V1" and cdm.creation_date == SCREEN_START
    assert cdm.tca == row["tca"]  # microseconds
    assert cdm.miss_distance_m == row["miss_m"] and cdm.relative_speed_ms == row["rel_speed_ms"]
    np.testing.assert_array_equal(cdm.relative_position_rtn_m, [row["r_m"], row["t_m"], row["n_m"]])
    assert cdm.collision_probability == row["pc"] and cdm.relative.get("COLLISION_PROBABILITY_METHOD") == "FOSTER-1992"
    assert cdm.hbr_m == 20.0
    for n, o, norad in ((1, "p", 101), (2, "s", 102)):
        obj = cdm.object(n)
        assert obj.designator == f"{norad:05d}" and obj.object_name == f"OBJ {norad}" and obj.ref_frame == "EME2000"
        assert obj.get("COVARIANCE_METHOD") == "DEFAULT"
        teme = np.array([row[f"{o}_{c}"] for c in ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms")]) / 1000.0
        expected = _astropy_eme2000(teme, row["tca"])
        np.testing.assert_allclose(obj.state_km[:3], expected[:3], rtol=0, atol=1e-5)  # 1 cm
        np.testing.assert_allclose(obj.state_km[3:], expected[3:], rtol=0, atol=1e-6)  # 1 mm/s
        sig = np.array([row[f"{o}_sigma_{c}"] for c in ("r_m", "t_m", "n_m", "rdot_ms", "tdot_ms", "ndot_ms")])
        # R/T/N components do not change between inertial frames: the modelled diagonal, to rounding
        np.testing.assert_allclose(obj.cov_rtn, np.diag(sig ** 2), rtol=0, atol=1e-12 * np.max(sig ** 2))
    # relative velocity in the primary's (inertial) RTN frame
    p = np.array([row[f"p_{c}"] for c in ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms")])
    s = np.array([row[f"s_{c}"] for c in ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms")])
    np.testing.assert_allclose(cdm.relative_velocity_rtn_ms, rtn_basis(p[:3], p[3:]).T @ (s[3:] - p[3:]), atol=1e-6)
    o1, o2 = cdm.objects
    dr = o2.position_m - o1.position_m
    np.testing.assert_allclose(rtn_basis(o1.position_m, o1.velocity_ms).T @ dr, cdm.relative_position_rtn_m, atol=1e-6)
    assert np.linalg.norm(dr) == pytest.approx(cdm.miss_distance_m, abs=1e-6)
    # and the Pc recomputed from the message as written, in EME2000 and back in TEME
    assert cdm_mod.pc_from_cdm(cdm).pc == pytest.approx(row["pc"], rel=1e-8)
    p2, s2 = teme_states_from_cdm(cdm)
    np.testing.assert_allclose(p2, p, rtol=1e-12, atol=1e-6)
    res = pc2d_foster_rtn(p2[:3], p2[3:], cdm.object1.cov_rtn, s2[:3], s2[3:], cdm.object2.cov_rtn, cdm.hbr_m)
    assert res.pc == pytest.approx(row["pc"], rel=1e-8)


def test_cdm_maneuverable_yes_for_a_flagged_object(assessed, events, catalog, settings):
    [row] = _plan(assess(events, None, catalog, settings, manoeuvred={102}), [], settings).changes
    cdm = cdm_mod.parse_cdm(cdm_text(row))
    assert (cdm.object1["MANEUVERABLE"], cdm.object2["MANEUVERABLE"]) == ("N/A", "YES")
    assert any("MANEUVERABLE = YES" in c for c in cdm.object2.comments)
    assert not any("MANEUVERABLE" in c for c in cdm.object1.comments)
    plain = cdm_mod.parse_cdm(cdm_text(_row(assessed, settings)))
    assert (plain.object1["MANEUVERABLE"], plain.object2["MANEUVERABLE"]) == ("N/A", "N/A")
    legacy = cdm_mod.parse_cdm(cdm_text(dict(_row(assessed, settings), p_maneuverable=None, s_maneuverable=None)))
    assert (legacy.object1["MANEUVERABLE"], legacy.object2["MANEUVERABLE"]) == ("N/A", "N/A")


def test_invalid_pc_cdm_has_no_probability(catalog_901, settings):
    assessed = assess(_co_orbiting(0.05), None, catalog_901, settings)
    [row] = _plan(assessed, [], settings).changes
    assert row["pc"] is None and not row["pc_valid"] and row["level"] == "yellow"
    cdm = cdm_mod.parse_cdm(cdm_text(row))
    assert "COLLISION_PROBABILITY" not in cdm.relative and cdm.collision_probability is None
    text = " ".join(c for sec in (cdm.header, cdm.relative) for c in sec.comments)
    assert "COLLISION_PROBABILITY not given" in text and "low relative velocity" in text


def test_json_twin_round_trip(assessed, settings):
    row = _row(assessed, settings)
    text = json_text(row)
    assert json_text(row) == text
    body = json.loads(text)
    assert body["format"] == "sda-alert/1" and body["tca"].endswith("Z") and body["version"] == 1
    assert row_from_json(text) == row


def test_write_if_absent(tmp_path):
    path = tmp_path / "box" / "a.cdm"
    assert write_if_absent(path, "x\n") is True
    assert write_if_absent(path, "y\n") is False  # an emitted file is never rewritten
    assert path.read_text() == "x\n" and [p.name for p in path.parent.iterdir()] == ["a.cdm"]


def test_emit_writes_each_file_once(assessed, settings, tmp_path):
    row = _row(assessed, settings)
    assert emit(row, tmp_path) == 2
    assert emit(row, tmp_path) == 0
    (tmp_path / row["cdm_file"]).unlink()  # a crash between the JSON twin and the CDM
    assert emit(row, tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([row["cdm_file"], row["json_file"]])
    assert outbox_lookup(tmp_path)(row["alert_id"], 1) == row
    assert outbox_lookup(tmp_path)(row["alert_id"], 2) is None
