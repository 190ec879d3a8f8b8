"""The correlation gate's predicted covariance, against Monte-Carlo oracles and hand-computed cases.

The oracles never use the gate's Jacobians: an along-track error is drawn as a time shift along the
SGP4 orbit (``t + tau``, the state a late or early element set puts there, velocity included), radial
and cross-track errors as position offsets; the measurements are then formed by :mod:`sda.orbit.frames`
(exactly, non-linearly) plus the sensor's noise. If the gate's covariance is the measurement's,
its ``d2`` over the draws is chi-square: mean = number of components, 5 % above the 95 % quantile.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from sda.orbit import correlation as C
from sda.orbit import screening as S
from sda.orbit.frames import propagate, radec, razel, teme_to_ecef
from sda.orbit.sensors import DEFAULT_SIGMAS
from sda.orbit.uncertainty import CatalogueModel

EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
T_OBS = EPOCH + dt.timedelta(minutes=37, seconds=12.25)
SOCORRO = (33.81694, -106.66000, 1510.0)
ELEMENTS = {
    11: (700.0, 0.0010, 98.0, 10.0, 0.0, 0.0),
    13: (550.0, 0.0002, 53.0, 100.0, 0.0, 200.0),
    15: (35786.0, 0.0002, 0.05, 0.0, 0.0, 120.0),
}
GATE_KM = 50.0
DRAWS = 4000
# 95 % quantiles of chi-square with 2, 3, 4 degrees of freedom (tables)
CHI2_95 = {2: 5.991, 3: 7.815, 4: 9.488}


def catalogue():
    ids = sorted(ELEMENTS)
    return ids, S.satrecs_from_lines(*zip(*[S.tle_from_elements(n, EPOCH, *ELEMENTS[n]) for n in ids]))


def model(ids, sigma_rtn):
    """Every object with the same constant RTN sigmas (the gate's input, not its arithmetic)."""
    n = len(ids)
    return CatalogueModel(np.zeros(n), np.tile(np.asarray(sigma_rtn, float), (n, 1)), np.zeros((n, 3)), np.zeros(n),
                          np.full(n, "test", dtype=object))


def drawn_states(sat, sigma_rtn, rng):
    """DRAWS true states at T_OBS for an element set whose errors have ``sigma_rtn`` (m): along-track as
    a time shift along the orbit, radial and cross-track as offsets of the position."""
    t0 = T_OBS.timestamp()
    _, r0, v0 = propagate([sat], np.array([t0]))
    r0, v0 = r0[0, 0], v0[0, 0]
    tau = rng.standard_normal(DRAWS) * sigma_rtn[1] / (np.linalg.norm(v0) * 1000.0)
    _, r, v = propagate([sat], t0 + tau)
    r, v = r[0], v[0]
    radial = r0 / np.linalg.norm(r0)
    cross = np.cross(r0, v0) / np.linalg.norm(np.cross(r0, v0))
    r = r + (rng.standard_normal(DRAWS)[:, None] * sigma_rtn[0] * radial
             + rng.standard_normal(DRAWS)[:, None] * sigma_rtn[2] * cross) / 1000.0
    return r, v


def site_under(sat, offset_deg=4.0):
    """A ground site (lat, lon, alt) a few degrees from the object's sub-satellite point at T_OBS: it
    sees the object high in the sky (the sensor's noise is EGLIN's whatever the site)."""
    _, r, v = propagate([sat], np.array([T_OBS.timestamp()]))
    r_e, _ = teme_to_ecef(r[0, 0], v[0, 0], T_OBS.timestamp())
    lat = np.degrees(np.arcsin(r_e[2] / np.linalg.norm(r_e)))
    lon = np.degrees(np.arctan2(r_e[1], r_e[0]))
    return float(lat + offset_deg), float(lon + offset_deg), 100.0


def frame(rows):
    obs = pd.DataFrame(rows)
    obs["event_time"] = pd.Timestamp(T_OBS).tz_convert(None)
    obs["obs_id"] = [f"o{k}" for k in range(len(obs))]
    return obs


def check_chi_square(out, dof, true_id):
    assert (out["status"] == "correlated").all() and (out["norad_id"] == true_id).all()
    d2 = out["gate_d2"].to_numpy()
    # mean of chi2_k over DRAWS draws: sd sqrt(2k / DRAWS) (0.045 for k = 4): 5 sd allowed
    assert d2.mean() == pytest.approx(dof, abs=5 * np.sqrt(2 * dof / DRAWS))
    tail = (d2 > CHI2_95[dof]).mean()
    assert 0.05 - 0.018 < tail < 0.05 + 0.018  # binomial sd 0.0034: 5 sd


def test_radar_gate_is_chi_square_with_an_along_track_dominated_error():
    """Range, azimuth, elevation and range-rate of a LEO object whose element set is 4 km off along
    track (a time shift: the range-rate moves too) and 300 m / 500 m radially / cross-track."""
    ids, sats = catalogue()
    sigma_rtn = (300.0, 4000.0, 500.0)
    rng = np.random.default_rng(7)
    r, v = drawn_states(sats[ids.index(13)], sigma_rtn, rng)
    site = site_under(sats[ids.index(13)])
    rng_km, az, el, rr = razel(*teme_to_ecef(r, v, T_OBS.timestamp()), *site)
    s_r, s_a, s_rr = 30.0, np.deg2rad(0.0154), 2.0  # EGLIN in the embedded registry
    noise = rng.standard_normal((4, DRAWS))
    obs = frame({"sensor_kind": "radar", "sensor_id": "EGLIN", "range_m": rng_km * 1000.0 + s_r * noise[0],
                 "az_rad": az + s_a * noise[1], "el_rad": el + s_a * noise[2],
                 "range_rate_ms": rr * 1000.0 + s_rr * noise[3],
                 "site_lat_deg": site[0], "site_lon_deg": site[1], "site_alt_m": site[2]})
    assert 20.0 < np.degrees(el).min() and np.degrees(el).max() < 80.0
    out = C.correlate_frame(obs, ids, sats, GATE_KM, model=model(ids, sigma_rtn))
    check_chi_square(out, 4, 13)
    # the per-component gate the module used to have (each residual over its own variance, the
    # along-track error spread isotropically) is not chi-square here: it misses the correlations
    fixed = C.correlate_frame(obs, ids, sats, GATE_KM, prediction_sigma_m=float(np.linalg.norm(sigma_rtn) / np.sqrt(3)))
    d2_fixed = fixed["gate_d2"].to_numpy()
    assert abs(np.nanmean(d2_fixed) - 4.0) > 1.0 or (fixed["status"] != "correlated").any()


def test_radar_without_range_rate_has_three_components():
    ids, sats = catalogue()
    sigma_rtn = (200.0, 2500.0, 300.0)
    rng = np.random.default_rng(8)
    r, v = drawn_states(sats[ids.index(13)], sigma_rtn, rng)
    site = site_under(sats[ids.index(13)], offset_deg=-6.0)
    rng_km, az, el, _ = razel(*teme_to_ecef(r, v, T_OBS.timestamp()), *site)
    noise = rng.standard_normal((3, DRAWS))
    obs = frame({"sensor_kind": "radar", "sensor_id": "EGLIN", "range_m": rng_km * 1000.0 + 30.0 * noise[0],
                 "az_rad": az + np.deg2rad(0.0154) * noise[1], "el_rad": el + np.deg2rad(0.0154) * noise[2],
                 "range_rate_ms": np.nan, "site_lat_deg": site[0], "site_lon_deg": site[1], "site_alt_m": site[2]})
    assert 10.0 < np.degrees(el).min()
    out = C.correlate_frame(obs, ids, sats, GATE_KM, model=model(ids, sigma_rtn))
    check_chi_square(out, 3, 13)
    assert out["residual_range_rate_ms"].isna().all()


def test_optical_gate_is_chi_square_at_geo():
    ids, sats = catalogue()
    sigma_rtn = (500.0, 3000.0, 1000.0)
    rng = np.random.default_rng(9)
    r, _ = drawn_states(sats[ids.index(15)], sigma_rtn, rng)
    ra, dec = radec(r, *SOCORRO, T_OBS.timestamp())
    s_a = np.deg2rad(0.00028)
    noise = rng.standard_normal((2, DRAWS))
    obs = frame({"sensor_kind": "optical", "sensor_id": "SOCORRO", "ra_rad": ra + s_a * noise[0] / np.cos(dec),
                 "dec_rad": dec + s_a * noise[1], "site_lat_deg": SOCORRO[0], "site_lon_deg": SOCORRO[1],
                 "site_alt_m": SOCORRO[2]})
    out = C.correlate_frame(obs, ids, sats, GATE_KM, model=model(ids, sigma_rtn))
    check_chi_square(out, 2, 15)


def test_isl_gate_is_chi_square():
    ids, sats = catalogue()
    sigma_rtn = (100.0, 1500.0, 200.0)
    rng = np.random.default_rng(10)
    r, _ = drawn_states(sats[ids.index(11)], sigma_rtn, rng)
    pos = r * 1000.0 + 50.0 * rng.standard_normal((DRAWS, 3))  # ISL-01: 50 m
    obs = frame({"sensor_kind": "isl", "sensor_id": "ISL-01", "x_m": pos[:, 0], "y_m": pos[:, 1], "z_m": pos[:, 2]})
    out = C.correlate_frame(obs, ids, sats, GATE_KM, model=model(ids, sigma_rtn))
    check_chi_square(out, 3, 11)


def test_isl_d2_by_hand_with_the_default_model():
    """With no model given, the sigmas are the uncertainty model's for the element set's regime and
    age (LEO, 37.2 min after epoch): sR = 100 + 50 d, sT = 500 + 1000 d + 100 d^2, sN = 200 + 50 d."""
    ids, sats = catalogue()
    _, r, v = propagate([sats[ids.index(11)]], np.array([T_OBS.timestamp()]))
    r, v = r[0, 0], v[0, 0]
    radial = r / np.linalg.norm(r)
    cross = np.cross(r, v) / np.linalg.norm(np.cross(r, v))
    along = np.cross(cross, radial)
    fix = r * 1000.0 + 30.0 * radial - 1200.0 * along + 45.0 * cross
    obs = frame({"sensor_kind": ["isl"], "sensor_id": ["ISL-01"], "x_m": [fix[0]], "y_m": [fix[1]], "z_m": [fix[2]]})
    out = C.correlate_frame(obs, ids, sats, GATE_KM).iloc[0]
    d = (37 * 60 + 12.25) / 86400.0
    s_r, s_t, s_n = 100 + 50 * d, 500 + 1000 * d + 100 * d * d, 200 + 50 * d
    expected = 30.0**2 / (s_r**2 + 50.0**2) + 1200.0**2 / (s_t**2 + 50.0**2) + 45.0**2 / (s_n**2 + 50.0**2)
    assert out["norad_id"] == 11 and out["gate_d2"] == pytest.approx(expected, rel=1e-6)
    # three days older, the same miss is well inside the gate: sT = 500 + 3000 + 900 m
    late = C.prediction_model(sats)
    late = CatalogueModel(late.t_ref - 3 * 86400.0, late.sigma0_m, late.rate_m_day, late.accel_t_m_day2, late.regime)
    old = C.correlate_frame(obs, ids, sats, GATE_KM, model=late).iloc[0]
    d += 3.0
    s_r, s_t, s_n = 100 + 50 * d, 500 + 1000 * d + 100 * d * d, 200 + 50 * d
    expected = 30.0**2 / (s_r**2 + 50.0**2) + 1200.0**2 / (s_t**2 + 50.0**2) + 45.0**2 / (s_n**2 + 50.0**2)
    assert old["gate_d2"] == pytest.approx(expected, rel=1e-6)


def test_an_along_track_miss_the_model_expects_correlates_where_the_fixed_sigma_refused_it():
    """12 km along track, an element set 4 days old (sT = 500 + 4000 + 1600 m): inside the model's gate
    (d2 ~ 3.9), far outside the former fixed 2 km one (d2 = 36)."""
    ids, sats = catalogue()
    _, r, v = propagate([sats[ids.index(11)]], np.array([T_OBS.timestamp()]))
    r, v = r[0, 0], v[0, 0]
    along = np.cross(np.cross(r, v), r)
    along /= np.linalg.norm(along)
    fix = r * 1000.0 + 12_000.0 * along
    obs = frame({"sensor_kind": ["isl"], "sensor_id": ["ISL-01"], "x_m": [fix[0]], "y_m": [fix[1]], "z_m": [fix[2]]})
    base = C.prediction_model(sats)
    aged = CatalogueModel(base.t_ref - 4 * 86400.0, base.sigma0_m, base.rate_m_day, base.accel_t_m_day2, base.regime)
    assert C.correlate_frame(obs, ids, sats, GATE_KM, model=aged).iloc[0]["norad_id"] == 11
    fixed = C.correlate_frame(obs, ids, sats, GATE_KM, prediction_sigma_m=C.PREDICTION_SIGMA_M).iloc[0]
    assert fixed["status"] == "uncorrelated"
    assert fixed["nearest_gate_d2"] == pytest.approx(12_000.0**2 / (2000.0**2 + 50.0**2), rel=1e-6)


def test_ambiguity_weighs_the_covariance_determinant():
    """Two candidates at the same d2 but one far less certain: the likelier (smaller covariance) wins,
    and with a 100x likelihood ratio between them the association is not ambiguous."""
    ids, sats = catalogue()
    _, r, v = propagate([sats[ids.index(11)]], np.array([T_OBS.timestamp()]))
    fix = r[0, 0] * 1000.0
    # object 99: the same orbit as 11 (same predicted position), sigmas 30x larger in every axis
    dup = S.satrecs_from_lines(*zip(S.tle_from_elements(99, EPOCH, *ELEMENTS[11])))
    ids2, sats2 = ids + [99], list(sats) + list(dup)
    sig = np.array([[100.0, 500.0, 200.0]] * len(ids) + [[3000.0, 15000.0, 6000.0]])
    m = CatalogueModel(np.zeros(len(ids2)), sig, np.zeros((len(ids2), 3)), np.zeros(len(ids2)),
                       np.full(len(ids2), "t", dtype=object))
    obs = frame({"sensor_kind": ["isl"], "sensor_id": ["ISL-01"], "x_m": [fix[0]], "y_m": [fix[1]], "z_m": [fix[2]]})
    # one element set under two numbers would be one body (test_correlation.py); here both are candidates
    both = np.ones(len(ids2), dtype=bool)
    out = C.correlate_frame(obs, ids2, sats2, GATE_KM, model=m, bodies=both).iloc[0]
    # both d2 = 0; -2 ln L differ by sum ln(var ratios) = ln(~900^3) >> 2 ln 100
    assert out["norad_id"] == 11 and out["candidates"] == 2 and not out["ambiguous"]
    # equal sigmas: a coin toss (likelihood ratio 1 < 10), flagged and held as a cross-tag, not associated
    m_equal = CatalogueModel(m.t_ref, np.tile(sig[0], (len(ids2), 1)), m.rate_m_day, m.accel_t_m_day2, m.regime)
    toss = C.correlate_frame(obs, ids2, sats2, GATE_KM, model=m_equal, bodies=both).iloc[0]
    assert toss["ambiguous"] and toss["status"] == "uncorrelated" and pd.isna(toss["norad_id"])
    assert toss["reason"] == C.REASON_UNDECIDED and toss["nearest_norad_id"] in (11, 99)
    assert toss["candidates"] == 2


@pytest.mark.parametrize("gap, held", [(3.0, True), (4.5, True), (4.7, False), (6.0, False)])
def test_a_runner_up_within_ten_times_is_a_held_cross_tag(gap, held):
    """Two candidates with the same isotropic covariance and an ISL fix on the line between them: the
    gap in d2 is -2 ln of the likelihood ratio, here d^2 (1 - 2f) / s^2 for the fix a fraction f of
    the distance d from the first. Hand-computed: a ratio of 10 is a gap of 2 ln 10 = 4.605, so gaps
    of 3 and 4.5 are held (uncorrelated, reason cross-tag, flagged) and 4.7 and 6 are associated with
    the nearer object, flagged ambiguous (under 2 ln 100 = 9.21)."""
    elements = {**ELEMENTS, 16: (700.0, 0.0010, 98.0, 10.0, 0.0, -0.08)}  # trails 11 by ~10 km
    ids = sorted(elements)
    sats = S.satrecs_from_lines(*zip(*[S.tle_from_elements(n, EPOCH, *elements[n]) for n in ids]))
    _, r, _ = propagate(sats, np.array([T_OBS.timestamp()]))
    r11, r16 = r[ids.index(11), 0] * 1000.0, r[ids.index(16), 0] * 1000.0
    d = float(np.linalg.norm(r16 - r11))
    s_tot = d / np.sqrt(12.0)  # d^2 / s^2 = 12: both stay inside the 3-dof gate
    sigma_p = np.sqrt(s_tot**2 - DEFAULT_SIGMAS["isl"]["sigma_pos_m"] ** 2)  # ISL-01's noise: the default
    f = 0.5 - gap / 24.0
    fix = r11 + f * (r16 - r11)
    obs = frame({"sensor_kind": ["isl"], "sensor_id": ["ISL-NOT-IN-REGISTRY"], "x_m": [fix[0]], "y_m": [fix[1]],
                 "z_m": [fix[2]]})
    out = C.correlate_frame(obs, ids, sats, GATE_KM, model=model(ids, [sigma_p] * 3)).iloc[0]
    assert out["candidates"] == 2 and out["ambiguous"]
    if held:
        assert out["status"] == "uncorrelated" and pd.isna(out["norad_id"]) and out["reason"] == C.REASON_UNDECIDED
        assert out["nearest_norad_id"] == 11
    else:
        assert out["status"] == "correlated" and out["norad_id"] == 11
        assert out["gate_d2"] == pytest.approx(12.0 * f * f, rel=1e-6)
