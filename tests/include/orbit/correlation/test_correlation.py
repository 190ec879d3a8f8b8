"""Correlation residuals on hand-made observations generated from known TLEs with sda.orbit.frames.

These cases run the gate with the isotropic override (``prediction_sigma_m``), whose statistic has
the closed forms of the module docstring; the default gate (the uncertainty model's covariance) is
tested in test_correlation_gate.py."""

from __future__ import annotations

import calendar
import datetime as dt
import math

import numpy as np
import pandas as pd
import pytest
from sgp4.api import WGS72, Satrec

from sda.orbit import correlation as C
from sda.orbit import screening as S
from sda.orbit.correlation import gate
from sda.orbit.frames import propagate, radec, razel, site_teme, teme_to_ecef
from sda.orbit.sensors import observation_sigmas, sensor_sigmas
from sda.orbit.times import unix_seconds

EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
T_OBS = EPOCH + dt.timedelta(minutes=37, seconds=12.25)
EGLIN = (30.57222, -86.21444, 34.0)
SOCORRO = (33.81694, -106.66000, 1510.0)
ELEMENTS = {
    11: (700.0, 0.0010, 98.0, 10.0, 0.0, 0.0),
    12: (700.0, 0.0010, 98.0, 10.0, 0.0, 20.0),  # same orbit, 20 deg behind
    13: (550.0, 0.0002, 53.0, 100.0, 0.0, 200.0),
    14: (1200.0, 0.0100, 87.0, 30.0, 80.0, 300.0),
    15: (35786.0, 0.0002, 0.05, 0.0, 0.0, 120.0),
}
GATE_KM = 50.0


def catalogue(ids=tuple(ELEMENTS), extra=None):
    sats = S.satrecs_from_lines(*zip(*[S.tle_from_elements(n, EPOCH, *ELEMENTS[n]) for n in ids]))
    ids, sats = list(ids), list(sats)
    if extra is not None:
        ids.append(extra[0])
        sats.append(extra[1])
    return ids, sats


def state(norad_id, when=T_OBS):
    _, [sat] = catalogue([norad_id])
    _, r, v = propagate([sat], np.array([when.timestamp()]))
    return r[0, 0], v[0, 0]


def obs_row(obs_id, kind, when=T_OBS, **values):
    row = {name: np.nan for name in ("range_m", "az_rad", "el_rad", "range_rate_ms", "ra_rad", "dec_rad", "x_m", "y_m",
                                     "z_m", "vx_ms", "vy_ms", "vz_ms", "site_lat_deg", "site_lon_deg", "site_alt_m")}
    row.update(obs_id=obs_id, sensor_kind=kind, event_time=pd.Timestamp(when).tz_convert(None))
    row.update(values)
    return row


def radar_obs(obs_id, norad_id, site=EGLIN, range_offset_m=0.0):
    r, v = state(norad_id)
    r_ecef, v_ecef = teme_to_ecef(r, v, T_OBS.timestamp())
    rng, az, el, rr = razel(r_ecef, v_ecef, *site)
    return obs_row(obs_id, "radar", range_m=float(rng) * 1000 + range_offset_m, az_rad=float(az), el_rad=float(el),
                   range_rate_ms=float(rr) * 1000, site_lat_deg=site[0], site_lon_deg=site[1], site_alt_m=site[2])


def run(rows, ids, sats):
    return C.correlate_frame(pd.DataFrame(rows), ids, sats, GATE_KM,
                             prediction_sigma_m=C.PREDICTION_SIGMA_M).set_index("obs_id")


def test_radar_observation_from_a_tle_associates_to_it_with_near_zero_residual():
    ids, sats = catalogue()
    out = run([radar_obs("a", 13), radar_obs("b", 14), radar_obs("c", 11)], ids, sats)
    assert out.loc["a", "status"] == "correlated" and out.loc["a", "norad_id"] == 13
    assert out.loc["b", "norad_id"] == 14 and out.loc["c", "norad_id"] == 11
    assert (out["residual_m"] < 1e-3).all()  # metres: the observation *is* the prediction
    assert (out["candidates"] == 1).all() and not out["ambiguous"].any()


def test_radar_range_offset_shows_as_residual():
    ids, sats = catalogue()
    out = run([radar_obs("a", 13, range_offset_m=1234.0)], ids, sats)
    assert out.loc["a", "norad_id"] == 13
    assert out.loc["a", "residual_m"] == pytest.approx(1234.0, abs=1e-3)  # along the line of sight


def test_missing_object_is_uncorrelated_with_the_nearest_reported():
    ids, sats = catalogue([11, 12, 14, 15])
    r13 = state(13)[0]
    # every other object is far from 13 at that time (so no near miss to name)
    assert min(np.linalg.norm(state(n)[0] - r13) for n in (11, 12, 14, 15)) > C.REPORT_GATES * GATE_KM
    r11 = state(11)[0]
    away = r11 + np.array([0.0, 0.0, 80.0])  # an ISL fix 80 km from 11: outside the gate, a near miss
    rows = [radar_obs("a", 13), obs_row("b", "isl", x_m=away[0] * 1000, y_m=away[1] * 1000, z_m=away[2] * 1000)]
    out = run(rows, ids, sats)
    assert (out["status"] == "uncorrelated").all() and (out["reason"] == C.REASON_NO_CANDIDATE).all()
    assert out["norad_id"].isna().all()
    assert pd.isna(out.loc["a", "nearest_norad_id"])
    assert out.loc["b", "nearest_norad_id"] == 11
    assert out.loc["b", "nearest_residual_m"] == pytest.approx(80_000.0, abs=1e-3)


def test_prefilter_keeps_candidates_across_a_bucket():
    # observations spread over a whole 60 s bucket (reference time in the middle): every one still
    # finds its object with zero residual although the objects move ~230 km from t_ref
    ids, sats = catalogue()
    rows = []
    for k, dt_s in enumerate((-30.0, -12.5, 0.0, 17.0, 29.9)):
        when = T_OBS + dt.timedelta(seconds=dt_s)
        r, _ = state(11, when)
        rows.append(obs_row(f"i{k}", "isl", when, x_m=r[0] * 1000, y_m=r[1] * 1000, z_m=r[2] * 1000))
        r15 = state(15, when)[0]
        ra, dec = radec(r15, *SOCORRO, when.timestamp())
        rows.append(obs_row(f"o{k}", "optical", when, ra_rad=float(ra), dec_rad=float(dec), site_lat_deg=SOCORRO[0],
                            site_lon_deg=SOCORRO[1], site_alt_m=SOCORRO[2]))
    out = run(rows, ids, sats)
    assert (out["status"] == "correlated").all()
    assert out.filter(like="i", axis=0)["norad_id"].eq(11).all()
    assert out.filter(like="o", axis=0)["norad_id"].eq(15).all()
    assert (out["residual_m"] < 1.0).all()


def test_isl_residual_and_ambiguity_between_two_close_objects():
    # object 16 trails 11 by ~10 km; an ISL fix 40 % of the way from 11 to 16 is inside the gate
    # for both, 4 km vs 6 km: ambiguous, associated to 11
    elements = dict(ELEMENTS)
    elements[16] = (700.0, 0.0010, 98.0, 10.0, 0.0, -0.08)
    sats = S.satrecs_from_lines(*zip(*[S.tle_from_elements(n, EPOCH, *elements[n]) for n in sorted(elements)]))
    ids = sorted(elements)
    _, r, _ = propagate(sats, np.array([T_OBS.timestamp()]))
    r11, r16 = r[ids.index(11), 0], r[ids.index(16), 0]
    d = np.linalg.norm(r16 - r11)
    assert 5.0 < d < 15.0
    fix = (r11 + 0.4 * (r16 - r11)) * 1000.0
    out = run([obs_row("i", "isl", x_m=fix[0], y_m=fix[1], z_m=fix[2])], ids, sats)
    assert out.loc["i", "norad_id"] == 11
    assert out.loc["i", "residual_m"] == pytest.approx(0.4 * d * 1000.0, rel=1e-9)
    assert out.loc["i", "candidates"] == 2
    assert out.loc["i", "ambiguous"]


def test_a_docked_stack_is_one_body_under_its_lowest_number():
    # 13's element set published under two more numbers, 21 and 8 (a docked stack): they predict the
    # same measurement everywhere, so an observation of the stack goes to its lowest number, 8, as a
    # sure association -- not a three-way tie held as a cross-tag
    ids, sats = catalogue()
    for n in (21, 8):
        ids.append(n)
        sats.extend(S.satrecs_from_lines(*zip(S.tle_from_elements(n, EPOCH, *ELEMENTS[13]))))
    assert C.association.distinct_bodies(np.array(ids), sats).tolist() == [True, True, False, True, True, False, True]
    r, _ = state(13)
    rows = [radar_obs("r", 13), obs_row("i", "isl", x_m=r[0] * 1000, y_m=r[1] * 1000, z_m=r[2] * 1000)]
    for out in (run(rows, ids, sats), C.correlate_frame(pd.DataFrame(rows), ids, sats, GATE_KM).set_index("obs_id")):
        assert (out["status"] == "correlated").all() and out["norad_id"].eq(8).all()
        assert out["candidates"].eq(1).all() and not out["ambiguous"].any()
    # without the stack's host, the next lowest number is the body
    out = run(rows, ids[:-1], sats[:-1])
    assert out["norad_id"].eq(13).all() and out["candidates"].eq(1).all()


def test_optical_angles_only_associates_and_gates_by_angle():
    ids, sats = catalogue()
    r15 = state(15)[0]
    ra, dec = radec(r15, *SOCORRO, T_OBS.timestamp())
    good = obs_row("o", "optical", ra_rad=float(ra), dec_rad=float(dec), site_lat_deg=SOCORRO[0],
                   site_lon_deg=SOCORRO[1], site_alt_m=SOCORRO[2])
    off = dict(good, obs_id="p", dec_rad=float(dec) + np.deg2rad(0.1))  # twice the angular gate away
    out = run([good, off], ids, sats)
    assert out.loc["o", "norad_id"] == 15 and out.loc["o", "residual_m"] < 1.0
    assert out.loc["p", "status"] == "uncorrelated" and out.loc["p", "nearest_norad_id"] == 15
    # 0.1 deg at GEO slant range (~37,000 km from Socorro) is ~65 km
    assert 55_000 < out.loc["p", "nearest_residual_m"] < 75_000


def test_sgp4_failures_are_skipped_and_incomplete_rows_reported():
    bad = Satrec.twoline2rv("1 00099U 98067A   20194.88612269 -.00002218  00000-0 -31515-4 0  9992",
                            "2 00099  51.6461 221.2784 000XX13  89.1723 280.4612 15.49507896236008", WGS72)
    ids, sats = catalogue(extra=(99, bad))
    rows = [radar_obs("a", 12), obs_row("z", "radar", range_m=1e6), obs_row("k", "sonar")]
    out = run(rows, ids, sats)
    assert out.loc["a", "norad_id"] == 12
    assert out.loc["z", "reason"] == C.REASON_INCOMPLETE
    assert out.loc["k", "reason"] == C.REASON_UNKNOWN_KIND
    only_bad = run([radar_obs("a", 12)], [99], [bad])
    assert only_bad.loc["a", "reason"] == C.REASON_NOT_PROPAGATED


# --- per-measurement residuals and the noise-normalised gate (hand-computed) -------------------------

SIGMA_P2 = C.PREDICTION_SIGMA_M**2


def test_chi_square_gate_thresholds():
    # closed forms: P(chi2_2 > x) = exp(-x/2); P(chi2_4 > x) = exp(-x/2) (1 + x/2)
    assert C.GATE_D2[2] == pytest.approx(-2.0 * np.log(C.GATE_TAIL), rel=1e-12)
    x = C.GATE_D2[4]
    assert np.exp(-x / 2) * (1 + x / 2) == pytest.approx(C.GATE_TAIL, rel=1e-9)
    assert C.chi2_tail(C.GATE_D2[3], 3) == pytest.approx(C.GATE_TAIL, rel=1e-9)
    assert gate.wrap_angle(np.array([0.25 - 2 * np.pi, 2 * np.pi - 0.25, 3.0])) == pytest.approx(
        [0.25, -0.25, 3.0])


def test_signed_residuals_per_measurement_are_observed_minus_predicted():
    ids, sats = catalogue()
    sigmas = sensor_sigmas(None)  # the embedded registry: EGLIN 30 m / 0.0154 deg / 2 m/s, SOCORRO 1", ISL-01 50 m
    # radar (EGLIN) of 13: +150 m range, +0.4 mrad azimuth (written 2 pi low: the residual wraps),
    # -0.3 mrad elevation, +3 m/s range-rate
    r, v = state(13)
    rng, az, el, rr = razel(*teme_to_ecef(r, v, T_OBS.timestamp()), *EGLIN)
    radar = obs_row("r", "radar", sensor_id="EGLIN", range_m=float(rng) * 1000 + 150.0,
                    az_rad=float(az) + 4e-4 - 2 * np.pi, el_rad=float(el) - 3e-4, range_rate_ms=float(rr) * 1000 + 3.0,
                    site_lat_deg=EGLIN[0], site_lon_deg=EGLIN[1], site_alt_m=EGLIN[2])
    # optical (SOCORRO) of the GEO object 15: +20 urad right ascension (written 2 pi high), -10 urad declination
    r15 = state(15)[0]
    ra, dec = radec(r15, *SOCORRO, T_OBS.timestamp())
    optical = obs_row("o", "optical", sensor_id="SOCORRO", ra_rad=float(ra) + 2e-5 + 2 * np.pi,
                      dec_rad=float(dec) - 1e-5,
                      site_lat_deg=SOCORRO[0], site_lon_deg=SOCORRO[1], site_alt_m=SOCORRO[2])
    # ISL (ISL-01) of 11: 30 m radial, -120 m along-track, 45 m cross-track of the predicted orbit
    r11, v11 = state(11)
    radial = r11 / np.linalg.norm(r11)
    cross = np.cross(r11, v11) / np.linalg.norm(np.cross(r11, v11))
    along = np.cross(cross, radial)
    fix = r11 * 1000.0 + 30.0 * radial - 120.0 * along + 45.0 * cross
    isl = obs_row("i", "isl", sensor_id="ISL-01", x_m=fix[0], y_m=fix[1], z_m=fix[2])
    out = C.correlate_frame(pd.DataFrame([radar, optical, isl]), ids, sats, GATE_KM, sigmas,
                            prediction_sigma_m=C.PREDICTION_SIGMA_M).set_index("obs_id")
    assert (out["status"] == "correlated").all() and list(out["norad_id"]) == [13, 15, 11]
    assert not out["ambiguous"].any()

    r_ = out.loc["r"]
    assert r_["residual_range_m"] == pytest.approx(150.0, abs=1e-3)
    assert r_["residual_az_rad"] == pytest.approx(4e-4, abs=1e-10)
    assert r_["residual_el_rad"] == pytest.approx(-3e-4, abs=1e-10)
    assert r_["residual_range_rate_ms"] == pytest.approx(3.0, abs=1e-6)
    rho_m, sa = float(rng) * 1000.0, np.deg2rad(0.0154)
    expected = (150.0**2 / (30.0**2 + SIGMA_P2)
                + (4e-4) ** 2 / (sa**2 + SIGMA_P2 / (rho_m * np.cos(float(el))) ** 2)
                + (3e-4) ** 2 / (sa**2 + SIGMA_P2 / rho_m**2)
                + 3.0**2 / (2.0**2 + C.PREDICTION_SIGMA_RANGE_RATE_MS**2))
    assert r_["gate_d2"] == pytest.approx(expected, rel=1e-6)

    o = out.loc["o"]
    assert o["residual_ra_rad"] == pytest.approx(2e-5, abs=1e-11)
    assert o["residual_dec_rad"] == pytest.approx(-1e-5, abs=1e-11)
    rho_m = np.linalg.norm(r15 - site_teme(*SOCORRO, T_OBS.timestamp())) * 1000.0
    so = np.deg2rad(0.00028)
    assert o["gate_d2"] == pytest.approx(((2e-5 * np.cos(float(dec))) ** 2 + 1e-5**2) / (so**2 + SIGMA_P2 / rho_m**2),
                                         rel=1e-5)

    i = out.loc["i"]
    assert (i["residual_radial_m"], i["residual_along_m"], i["residual_cross_m"]) == pytest.approx((30.0, -120.0, 45.0),
                                                                                                   abs=1e-5)
    miss2 = 30.0**2 + 120.0**2 + 45.0**2
    assert i["residual_m"] == pytest.approx(np.sqrt(miss2), abs=1e-5)
    assert i["gate_d2"] == pytest.approx(miss2 / (50.0**2 + SIGMA_P2), rel=1e-6)

    # each kind fills only its own residuals
    for obs_id, kind in (("r", "radar"), ("o", "optical"), ("i", "isl")):
        others = [c for k, cols in C.RESIDUALS.items() if k != kind for c in cols]
        assert out.loc[obs_id, others].isna().all()
        assert out.loc[obs_id, list(C.RESIDUALS[kind])].notna().all()


def test_gate_is_the_sensor_noise_plus_the_prediction_uncertainty():
    # 12 km along the line of sight: inside the 50 km position cap, but with EGLIN's 30 m range noise
    # and the 2 km prediction term d2 = 12000^2 / (30^2 + 2000^2) = 36.0 > chi2_4(1 - 1e-6) = 33.4
    ids, sats = catalogue()
    row = dict(radar_obs("a", 13, range_offset_m=12_000.0), sensor_id="EGLIN")
    out = C.correlate_frame(pd.DataFrame([row]), ids, sats, GATE_KM,
                            prediction_sigma_m=C.PREDICTION_SIGMA_M).set_index("obs_id")
    expected = 12_000.0**2 / (30.0**2 + SIGMA_P2)
    assert out.loc["a", "status"] == "uncorrelated" and out.loc["a", "reason"] == C.REASON_NO_CANDIDATE
    assert out.loc["a", "nearest_norad_id"] == 13
    assert out.loc["a", "nearest_gate_d2"] == pytest.approx(expected, rel=1e-6)
    assert out.loc["a", "nearest_residual_m"] == pytest.approx(12_000.0, abs=1e-3)
    # a noisier sensor (5 km range sigma) or a less certain catalogue (3 km) lets it in
    noisy = {"EGLIN": {**sensor_sigmas(None)["EGLIN"], "sigma_range_m": 5000.0}}
    out = C.correlate_frame(pd.DataFrame([row]), ids, sats, GATE_KM, noisy,
                            prediction_sigma_m=C.PREDICTION_SIGMA_M).set_index("obs_id")
    assert out.loc["a", "norad_id"] == 13
    assert out.loc["a", "gate_d2"] == pytest.approx(12_000.0**2 / (5000.0**2 + SIGMA_P2), rel=1e-6)
    out = C.correlate_frame(pd.DataFrame([row]), ids, sats, GATE_KM, prediction_sigma_m=3000.0).set_index("obs_id")
    assert out.loc["a", "norad_id"] == 13
    assert out.loc["a", "residual_range_m"] == pytest.approx(12_000.0, abs=1e-3)
    # whatever the uncertainties, nothing beyond gate_km correlates
    out = C.correlate_frame(pd.DataFrame([row]), ids, sats, 10.0, noisy,
                            prediction_sigma_m=C.PREDICTION_SIGMA_M).set_index("obs_id")
    assert out.loc["a", "status"] == "uncorrelated"


# --- one object per radar frame (sda.orbit.correlation.association.one_object_per_frame), hand-made -2 ln L tables

INF = np.inf


@pytest.mark.parametrize("gated, frames, best, expected", [
    # both detections of frame 7 chose object 1; object 0 fits the first only: 0 + 1 (cost 5 + 1 = 6)
    ([[5.0, 4.0], [INF, 1.0]], [7, 7], [1, 1], [0, 1]),
    # the same clash, three objects: distinct ones of least total (3 + 2 = 5 beats 1 + 9 and 3 + 9)
    ([[3.0, 1.0, INF], [INF, 2.0, 9.0]], [7, 7], [1, 1], [0, 1]),
    # fewer in-gate objects than detections: each keeps its own choice
    ([[1.0, INF], [2.0, INF]], [7, 7], [0, 0], [0, 0]),
    # two frames (or observations of no frame: negative codes) never constrain each other
    ([[5.0, 4.0], [INF, 1.0]], [7, 8], [1, 1], [1, 1]),
    ([[5.0, 4.0], [INF, 1.0]], [-1, -2], [1, 1], [1, 1]),
])
def test_detections_of_one_radar_frame_go_to_distinct_objects(gated, frames, best, expected):
    from sda.orbit.correlation.association import one_object_per_frame

    gated = np.array(gated)
    hit = np.isfinite(gated).any(axis=1)
    got = one_object_per_frame(np.array(best), hit, gated, np.array(frames, dtype=np.int64))
    assert got.tolist() == expected


def test_event_times_in_any_form_a_batch_may_carry_are_unix_seconds():
    # a pandas UDF hands over naive UTC timestamps; other callers aware ones, datetimes or text
    t0 = float(calendar.timegm((2026, 11, 21, 6, 0, 0)))
    naive = pd.Series([pd.Timestamp("2026-11-21 06:00:00"), pd.Timestamp("2026-11-21 06:00:01.25"), pd.NaT])
    expected = np.array([t0, t0 + 1.25, np.nan])
    for times in (naive, naive.astype("datetime64[us]"), naive.dt.tz_localize("UTC"),
                  naive.dt.tz_localize("UTC").dt.tz_convert("Asia/Tokyo")):  # an aware time is converted
        np.testing.assert_allclose(unix_seconds(times), expected, rtol=0, atol=1e-6)
    as_objects = pd.Series([dt.datetime(2026, 11, 21, 15, 0, tzinfo=dt.timezone(dt.timedelta(hours=9)))], dtype=object)
    np.testing.assert_array_equal(unix_seconds(as_objects), [t0])
    np.testing.assert_array_equal(unix_seconds(pd.Series(["2026-11-21T06:00:00Z"])), [t0])


def test_each_observation_gets_its_sensors_sigma_or_its_kinds_default():
    obs = pd.DataFrame({"sensor_id": ["EGLIN", "NEW-RADAR", "EGLIN", None, "SOCORRO"],
                        "sensor_kind": ["radar", "radar", "radar", "isl", "telepathy"]})
    sigmas = {"EGLIN": {"sigma_range_m": 7.0, "sigma_angle_rad": 1e-4}, "SOCORRO": {"sigma_angle_rad": 5e-6}}
    got = observation_sigmas(obs, sigmas)
    np.testing.assert_array_equal(got["sigma_range_m"], [7.0, 30.0, 7.0, np.nan, np.nan])
    np.testing.assert_array_equal(got["sigma_angle_rad"], [1e-4, math.radians(0.0154), 1e-4, np.nan, 5e-6])
    # EGLIN has no range-rate sigma of its own: its kind's
    np.testing.assert_array_equal(got["sigma_range_rate_ms"], [2.0, 2.0, 2.0, np.nan, np.nan])
    np.testing.assert_array_equal(got["sigma_pos_m"], [np.nan, np.nan, np.nan, 50.0, np.nan])
    without_ids = observation_sigmas(obs.drop(columns="sensor_id"), sigmas)
    np.testing.assert_array_equal(without_ids["sigma_range_m"], [30.0, 30.0, 30.0, np.nan, np.nan])
