"""The batch least-squares fit (sda.orbit.estimation.estimator): a known orbit recovered from synthetic
observations with known noise -- errors inside the predicted covariance over a small Monte Carlo,
normalised residual RMS near 1 -- outliers edited, and the cases it must refuse.

The synthetic observations are made with the frames functions (as the simulator makes them), not with
the models under test; the true orbit is integrated with the estimator's own force model and a
ballistic coefficient the prior does not know, so that what is checked is the estimator's statistics
(model error is bench/od.py's subject)."""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pandas as pd
import pytest

from sda.orbit import frames
from sda.orbit.estimation import OdConfig, Prior, ProcessNoise, dynamics, fit, registry_sigmas
from sda.orbit.sensors import load_sensors

T0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc).timestamp()
MU = 3.986004418e14
B_TRUE = 0.04
NO_NOISE = OdConfig(noise=ProcessNoise(drag_fraction=0.0, accel_psd=0.0))
SIGMAS = registry_sigmas(load_sensors())


def _true_orbit(times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TEME states (m, m/s) [m, 6] at ``times`` of a 450 km, 51.6 deg circular orbit, and at T0."""
    r = (frames.R_EARTH_KM + 450.0) * 1000.0
    i, o = math.radians(51.6), math.radians(40.0)
    speed = math.sqrt(MU / r)
    x0 = np.array([r * math.cos(o), r * math.sin(o), 0.0, -speed * math.sin(o) * math.cos(i),
                   speed * math.cos(o) * math.cos(i), speed * math.sin(i)])
    traj = dynamics.propagate(T0, x0, B_TRUE, np.append(times, T0))
    rot = dynamics.teme_rotation(np.append(times, T0))
    teme = np.concatenate([np.einsum("mij,mj->mi", rot, traj.x[:, :3]),
                           np.einsum("mij,mj->mi", rot, traj.x[:, 3:])], axis=1)
    return teme[:-1], teme[-1]


@pytest.fixture(scope="module")
def scenario():
    """ISL fixes every 2 minutes over 100 minutes, and radar looks from a site under the orbit."""
    times = T0 + np.arange(60.0, 6000.0, 120.0)
    states, at_t0 = _true_orbit(times)
    return times, states, at_t0


def _observations(times, states, rng, outliers: int = 0) -> pd.DataFrame:
    """ISL rows (TEME position, velocity) with the registry's noise, every other one replaced by the
    range / azimuth / elevation / range-rate of a radar at the sub-satellite point's neighbour."""
    rows = []
    for k, (t, x) in enumerate(zip(times, states)):
        if k % 2:
            r_e, v_e = frames.teme_to_ecef(x[:3] / 1000.0, x[3:] / 1000.0, t)
            lat = math.degrees(math.asin(r_e[2] / np.linalg.norm(r_e))) - 3.0
            lon = math.degrees(math.atan2(r_e[1], r_e[0])) + 2.0
            rng_km, az, el, rr = frames.razel(r_e, v_e, lat, lon, 0.0)
            sig_a = math.radians(0.0154)
            rows.append(dict(sensor_id="EGLIN", sensor_kind="radar", event_time=t, site_lat_deg=lat, site_lon_deg=lon,
                             site_alt_m=0.0, range_m=float(rng_km) * 1000.0 + 30.0 * rng.standard_normal(),
                             az_rad=float(az) + sig_a * rng.standard_normal(),
                             el_rad=float(el) + sig_a * rng.standard_normal(),
                             range_rate_ms=float(rr) * 1000.0 + 2.0 * rng.standard_normal()))
        else:
            noisy = x + np.concatenate([50.0 * rng.standard_normal(3), 0.05 * rng.standard_normal(3)])
            rows.append(dict(sensor_id="ISL-01", sensor_kind="isl", event_time=t,
                             **dict(zip(("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms"), noisy))))
    obs = pd.DataFrame(rows)
    radar = np.flatnonzero(obs["sensor_kind"] == "radar")[:outliers]
    obs.loc[radar, "range_m"] += 5000.0  # gross errors, 170 sigma
    obs["event_time"] = pd.to_datetime(obs["event_time"], unit="s")
    return obs


def _prior(at_t0: np.ndarray, rng) -> Prior:
    """The truth moved by a draw from a wide prior covariance (1 km, 1 m/s), B 0.05 +- 0.15."""
    cov = np.diag([1000.0**2] * 3 + [1.0] * 3)
    return Prior(T0, at_t0 + rng.multivariate_normal(np.zeros(6), cov), cov, 0.05, 0.15)


def test_known_orbit_recovered_within_its_covariance(scenario):
    times, states, at_t0 = scenario
    d2, rms = [], []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        result = fit(_observations(times, states, rng), _prior(at_t0, rng), SIGMAS, NO_NOISE)
        assert result.converged, result.reason
        err = np.append(result.state - states[-1], result.b - B_TRUE)
        d2.append(float(err @ np.linalg.solve(result.covariance, err)))
        rms.append(result.rms)
        assert result.epoch == pytest.approx(times[-1])
    # sum of six chi-square(7) draws is chi-square(42): 99.9 % of it lies in [17.5, 77]
    assert 17.5 < sum(d2) < 77.0, d2
    assert 0.85 < np.mean(rms) < 1.15, rms


def test_outliers_edited(scenario):
    times, states, at_t0 = scenario
    rng = np.random.default_rng(42)
    result = fit(_observations(times, states, rng, outliers=3), _prior(at_t0, rng), SIGMAS, NO_NOISE)
    assert result.converged and result.outliers == 3
    assert result.used == {"radar": 22, "isl": 25}
    assert result.observations == {"radar": 25, "isl": 25}
    err = result.state[:3] - states[-1, :3]
    assert float(err @ np.linalg.solve(result.covariance[:3, :3], err)) < 16.27  # chi-square(3), 99.9 %
    assert result.rms < 1.3


def test_too_few_observations_keep_the_prior(scenario):
    times, states, at_t0 = scenario
    rng = np.random.default_rng(7)
    obs = _observations(times[:4], states[:4], rng)
    prior = _prior(at_t0, rng)
    result = fit(obs, prior, SIGMAS)
    assert result.status == "too_few" and "4 observations" in result.reason
    assert np.isfinite(result.state).all() and result.iterations == 0


def test_record_is_json(scenario):
    times, states, at_t0 = scenario
    rng = np.random.default_rng(3)
    obs, prior = _observations(times, states, rng), _prior(at_t0, rng)
    result = fit(obs, prior, SIGMAS)
    record = json.loads(json.dumps(result.to_record()))
    assert len(record["covariance_7x7"]) == 49 and record["converged"] and record["source"] == "fused"
    assert record["r_teme_km"] == pytest.approx((states[-1, :3] / 1000.0).tolist(), abs=0.2)
    # with process noise the covariance is wider than the formal one, never narrower
    formal = fit(obs, prior, SIGMAS, NO_NOISE)
    assert np.trace(result.covariance[:3, :3]) > np.trace(formal.covariance[:3, :3])
