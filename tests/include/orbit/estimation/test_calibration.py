"""Sensor bias calibration (sda.orbit.estimation.calibration): corrections applied as hand-computed, the
estimate of a known bias and time tag from synthetic residuals, and from a real fit of ISL and a biased radar
(observations made with the frames functions at the true times plus the time bias, as the simulator makes them)."""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pandas as pd
import pytest

from sda.orbit import frames
from sda.orbit.estimation import OdConfig, Prior, ProcessNoise, calibration, dynamics, fit, registry_sigmas
from sda.orbit.sensors import load_sensors

ARC = 6 * 3600.0
T0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc).timestamp()  # window k = T0 / ARC


def _obs(kind: str, t: float, **values) -> dict:
    return {"obs_id": f"{kind}{t}", "sensor_id": "EGLIN" if kind == "radar" else "MAUI", "sensor_kind": kind,
            "event_time": pd.Timestamp(t, unit="s"), **values}


def test_apply_corrects_with_the_newest_earlier_window():
    k = int(T0 // ARC)
    obs = pd.DataFrame([_obs("radar", T0 + 60.0, range_m=1_000_000.0, az_rad=1.0, el_rad=0.5),
                        _obs("optical", T0 + 60.0, ra_rad=2.0, dec_rad=math.radians(60.0))])
    table = {"EGLIN": [(k - 2, {"range_m": 99.0}), (k - 1, {"range_m": 12.0, "az_deg": 0.01, "time_ms": 2.0}),
                       (k, {"range_m": 50.0})],  # the window's own estimate is not applied to it
             "MAUI": [(k - 1, {"ra_arcsec": 1.0, "dec_arcsec": -2.0})]}
    out = calibration.apply(obs, table, ARC)
    assert out.loc[0, "range_m"] == pytest.approx(1_000_000.0 - 12.0)
    assert out.loc[0, "az_rad"] == pytest.approx(1.0 - math.radians(0.01))
    assert out.loc[0, "el_rad"] == pytest.approx(0.5)
    assert out.loc[0, "event_time"] == pd.Timestamp(T0 + 60.0, unit="s") + pd.Timedelta(milliseconds=2)
    dec = math.radians(60.0) + 2.0 / 3600.0 * math.pi / 180.0
    assert out.loc[1, "dec_rad"] == pytest.approx(dec, abs=1e-15)
    # one arcsec on the sky at declination 60 deg is two arcsec of right ascension
    assert out.loc[1, "ra_rad"] == pytest.approx(2.0 - 1.0 / 3600.0 * math.pi / 180.0 / math.cos(dec), abs=1e-15)
    assert out.loc[1, "event_time"] == obs.loc[1, "event_time"]
    assert list(out["cal_range_m"]) == [12.0, 0.0] and list(out["cal_time_ms"]) == [2.0, 0.0]


def test_apply_ignores_old_calibrations_and_keeps_the_window():
    k = int(T0 // ARC)
    obs = pd.DataFrame([_obs("radar", T0 + ARC - 0.001, range_m=1000.0, az_rad=1.0, el_rad=0.5)])
    old = calibration.apply(obs, {"EGLIN": [(k - 1 - calibration.MAX_AGE_WINDOWS, {"range_m": 5.0})]}, ARC)
    assert old.loc[0, "range_m"] == 1000.0
    late = calibration.apply(obs, {"EGLIN": [(k - 1, {"time_ms": 5.0})]}, ARC)
    assert late.loc[0, "event_time"] < pd.Timestamp(T0 + ARC, unit="s")  # moved, but not into the next window


def _table(sensor: str, bias: float, time_ms: float, rates: np.ndarray, rng, sigma: float = 20.0) -> pd.DataFrame:
    r = bias + time_ms * rates + sigma * rng.standard_normal(len(rates))
    return pd.DataFrame({"sensor_id": sensor, "kind": "radar", "quantity": "range_m", "r": r, "rate": rates,
                         "sigma": sigma})


def _angles(p: pd.DataFrame, quantity: str, bias: float, rng) -> pd.DataFrame:
    """Angle residuals beside range ones: the same time tag at angular rates up to 1 mdeg/ms (LEO)."""
    rate = rng.uniform(-1e-3, 1e-3, len(p))
    return p.assign(quantity=quantity, rate=rate, sigma=0.015, r=bias + 1.5 * rate + rng.normal(0, 0.015, len(p)))


def test_solve_recovers_a_bias_and_a_time_tag():
    rng = np.random.default_rng(4)
    # two objects' residuals: range bias 12 m, time tag 1.5 ms, range-rates -6..6 km/s (m per ms: -6..6)
    parts = [_table("EGLIN", 12.0, 1.5, rng.uniform(-6.0, 6.0, 400), rng) for _ in range(2)]
    texts = [json.dumps(calibration.normal_equations(p)) for p in parts]
    got = {e["quantity"]: e for e in calibration.solve(texts)}
    # az and el have no rows: the system is singular there and nothing is reported for the sensor
    assert got == {}
    full = [pd.concat([p] + [_angles(p, q, b, rng) for q, b in (("az_deg", 0.002), ("el_deg", -0.001))])
            for p in parts]
    got = {e["quantity"]: e for e in calibration.solve([json.dumps(calibration.normal_equations(p)) for p in full])}
    assert got["range_m"]["bias"] == pytest.approx(12.0, abs=4 * got["range_m"]["sigma"])
    assert got["time_ms"]["bias"] == pytest.approx(1.5, abs=4 * got["time_ms"]["sigma"])
    # the larger of the formal sigma (20 / sqrt(800)) and the two objects' jackknife spread (one degree of freedom)
    assert 0.8 * 20.0 / math.sqrt(800) <= got["range_m"]["sigma"] <= 3.0 * 20.0 / math.sqrt(800)
    assert got["az_deg"]["bias"] == pytest.approx(0.002, abs=0.0025)
    assert got["range_m"]["n_obs"] == 800 and got["range_m"]["n_objects"] == 2


def test_a_dominating_sensor_does_not_calibrate_without_isl():
    rng = np.random.default_rng(5)
    table = pd.concat([_table("EGLIN", 10.0, 0.0, rng.uniform(-6, 6, 30), rng),
                       _table("BEALE", 0.0, 0.0, rng.uniform(-6, 6, 10), rng)])
    assert set(json.loads(calibration.contribution(table, {"radar": 40}))) == {"BEALE"}
    assert set(json.loads(calibration.contribution(table, {"radar": 40, "isl": 5}))) == {"EGLIN", "BEALE"}
    assert not calibration.well_determined(True, 0, 5000.0) and not calibration.well_determined(False, 0, 10.0)
    assert calibration.well_determined(True, 0, 100.0) and not calibration.well_determined(True, 1, 100.0)


MU = 3.986004418e14
RANGE_BIAS_M, TIME_BIAS_MS = 40.0, 20.0


def _truth(times: np.ndarray) -> np.ndarray:
    """TEME states [m, 6] of a 450 km, 51.6 deg circular orbit at ``times`` (the estimator's force model)."""
    r = (frames.R_EARTH_KM + 450.0) * 1000.0
    i, o, speed = math.radians(51.6), math.radians(40.0), math.sqrt(MU / r)
    x0 = np.array([r * math.cos(o), r * math.sin(o), 0.0, -speed * math.sin(o) * math.cos(i),
                   speed * math.cos(o) * math.cos(i), speed * math.sin(i)])
    traj = dynamics.propagate(T0, x0, 0.04, times)
    rot = dynamics.teme_rotation(times)
    return np.concatenate([np.einsum("mij,mj->mi", rot, traj.x[:, :3]), np.einsum("mij,mj->mi", rot, traj.x[:, 3:])],
                          axis=1)


def test_a_fit_with_isl_recovers_a_radars_bias_and_time_tag():
    rng = np.random.default_rng(7)
    times = T0 + np.arange(30.0, 6000.0, 30.0)
    true, shifted = _truth(times), _truth(times + TIME_BIAS_MS / 1000.0)
    rows = []
    for k, (t, x, xs) in enumerate(zip(times, true, shifted)):
        r_e = frames.teme_to_ecef(x[:3] / 1000.0, x[3:] / 1000.0, t)[0]
        # sites around the sub-satellite point, up to 9 deg away: range-rates of both signs
        lat = math.degrees(math.asin(r_e[2] / np.linalg.norm(r_e))) + 3.0 * (k % 7 - 3)
        lon = math.degrees(math.atan2(r_e[1], r_e[0])) + 3.0 * ((k // 7) % 5 - 2)
        if k % 4 == 1:  # the radar measures at t + bias (its state and Earth's rotation then) and reports t
            rng_km, az, el, _ = frames.razel(*frames.teme_to_ecef(xs[:3] / 1000.0, xs[3:] / 1000.0,
                                                                  t + TIME_BIAS_MS / 1000.0), lat, lon, 0.0)
            rows.append(_obs("radar", t, site_lat_deg=lat, site_lon_deg=lon, site_alt_m=0.0,
                             range_m=float(rng_km) * 1000.0 + RANGE_BIAS_M + 30.0 * rng.standard_normal(),
                             az_rad=float(az) + math.radians(0.0154) * rng.standard_normal(),
                             el_rad=float(el) + math.radians(0.0154) * rng.standard_normal()))
        else:
            noisy = x + np.concatenate([50.0 * rng.standard_normal(3), 0.05 * rng.standard_normal(3)])
            rows.append({**_obs("isl", t), "sensor_id": "ISL-01",
                         **dict(zip(("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms"), noisy))})
    prior = Prior(T0, true[0] + np.r_[300.0, -200.0, 100.0, 0.2, -0.1, 0.1], np.diag([1e6] * 3 + [1.0] * 3))
    config = OdConfig(noise=ProcessNoise(drag_fraction=0.0, accel_psd=0.0), residuals=True)
    result = fit(pd.DataFrame(rows), prior, registry_sigmas(load_sensors()), config)
    assert result.converged, result.reason
    text = calibration.contribution(result.residuals, result.used)
    got = {e["quantity"]: e for e in calibration.solve([text, text])}  # one object counted twice: MIN_OBJECTS
    assert got["range_m"]["bias"] == pytest.approx(RANGE_BIAS_M, rel=0.3)
    assert got["time_ms"]["bias"] == pytest.approx(TIME_BIAS_MS, rel=0.3)
    assert abs(got["az_deg"]["bias"]) < 4 * got["az_deg"]["sigma"] and abs(got["el_deg"]["bias"]) < 0.01


def test_the_jackknife_by_hand():
    """One parameter, three objects of one residual each (1, 2, 6): the solutions without each are 4, 3.5 and 1.5
    (mean 3), so sqrt(2/3 x (1 + 0.25 + 2.25)) = 1.5275; one object alone gives no jackknife."""
    each = [(np.array([1.0]), np.array([v])) for v in (1.0, 2.0, 6.0)]
    got = calibration.jackknife_sigma(np.array([[3.0]]), np.array([9.0]), each)
    assert got == pytest.approx([math.sqrt(2 / 3 * 3.5)])
    assert calibration.jackknife_sigma(np.array([[1.0]]), np.array([1.0]), each[:1]) is None


def test_a_bias_sigma_covers_the_spread_between_objects():
    """Each object's orbit error moves all of its residuals alike (a per-object offset of 5 m on 400 residuals of
    20 m noise): the formal sigma (20 / sqrt(3,200) = 0.35 m) would put the error at several sigmas, but the error
    is the offsets' mean over 8 objects (5 / sqrt(8) = 1.8 m). Over 40 trials the reported sigma is honest: the
    median |error| / sigma near 0.67, the median of |N(0, 1)|."""
    rng = np.random.default_rng(11)
    z, formal = [], []
    for _ in range(40):
        parts = []
        for _ in range(8):
            rates = rng.uniform(-6.0, 6.0, 400)
            p = _table("EGLIN", 12.0 + rng.normal(0.0, 5.0), 1.5, rates, rng)
            parts.append(pd.concat([p] + [_angles(p, q, b, rng) for q, b in (("az_deg", 0.002), ("el_deg", -0.001))]))
        got = {e["quantity"]: e for e in calibration.solve([json.dumps(calibration.normal_equations(p))
                                                               for p in parts])}["range_m"]
        z.append(abs(got["bias"] - 12.0) / got["sigma"])
        formal.append(abs(got["bias"] - 12.0) / (20.0 / math.sqrt(3200)))
    assert 0.4 < float(np.median(z)) < 1.1
    assert float(np.median(formal)) > 2.5  # what the formal sigma alone claimed
