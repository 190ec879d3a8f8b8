"""The sensors' biases as consider parameters (sda.orbit.estimation.bias_consider): over a Monte Carlo of
biased radars, the fit's errors are inside the covariance that considers the biases, and far outside the one of
the noise alone.

The observations are made with the frames functions (as the simulator makes them), not with the models under
test: per trial, each radar draws its range, azimuth and elevation biases and its time tag from the nominal
sigmas (the sensor measures at ``t + bias`` and reports ``t``), and white noise at the registry's sigmas."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sda.orbit import frames
from sda.orbit.estimation import Prior, fit
from sda.orbit.estimation.bias_consider import NOMINAL
from tests.include.orbit.estimation.test_estimator import B_TRUE, NO_NOISE, SIGMAS, T0, _true_orbit

SITES = {"EGLIN": (30.57, -86.21), "BEALE": (39.14, -121.35)}


def _radar_rows(times, rng) -> pd.DataFrame:
    """Two passes' worth of radar looks from two biased radars (each its own biases, drawn per trial)."""
    rows = []
    for sid, (lat0, lon0) in SITES.items():
        bias = {q: NOMINAL["radar"][q] * rng.standard_normal() for q in ("range_m", "az_deg", "el_deg", "time_ms")}
        measured, _ = _true_orbit(times + bias["time_ms"] / 1000.0)
        for t, x in zip(times, measured):
            r_e, v_e = frames.teme_to_ecef(x[:3] / 1000.0, x[3:] / 1000.0, t)
            # a site under the track (the test is of statistics, not of visibility)
            lat = math.degrees(math.asin(r_e[2] / np.linalg.norm(r_e))) + (lat0 - 35.0) / 5.0
            lon = math.degrees(math.atan2(r_e[1], r_e[0])) + (lon0 + 100.0) / 10.0
            rng_km, az, el, rr = frames.razel(r_e, v_e, lat, lon, 0.0)
            sig_a = math.radians(0.0154)
            rows.append(dict(sensor_id=sid, sensor_kind="radar", event_time=t, site_lat_deg=lat, site_lon_deg=lon,
                             site_alt_m=0.0,
                             range_m=float(rng_km) * 1000.0 + bias["range_m"] + 30.0 * rng.standard_normal(),
                             az_rad=float(az) + math.radians(bias["az_deg"]) + sig_a * rng.standard_normal(),
                             el_rad=float(el) + math.radians(bias["el_deg"]) + sig_a * rng.standard_normal(),
                             range_rate_ms=float(rr) * 1000.0 + 2.0 * rng.standard_normal()))
    obs = pd.DataFrame(rows)
    obs["event_time"] = pd.to_datetime(obs["event_time"], unit="s")
    return obs


@pytest.fixture(scope="module")
def trials():
    """Per trial: the truth at the fit's epoch and the fits with and without the biases considered."""
    times = T0 + np.arange(60.0, 6000.0, 60.0)
    states, at_t0 = _true_orbit(times)
    out = []
    for seed in range(8):
        rng = np.random.default_rng(100 + seed)
        obs = _radar_rows(times, rng)
        cov = np.diag([1000.0**2] * 3 + [1.0] * 3)
        prior = Prior(T0, at_t0 + rng.multivariate_normal(np.zeros(6), cov), cov, 0.05, 0.15)
        fits = [fit(obs, prior, SIGMAS, dataclasses.replace(NO_NOISE, bias_scale=s)) for s in (0.0, 1.0)]
        out.append((states[-1], fits))
    return out


def _d2(result, truth) -> float:
    err = np.append(result.state - truth, result.b - B_TRUE)
    return float(err @ np.linalg.solve(result.covariance, err))


def test_errors_inside_the_covariance_that_considers_the_biases(trials):
    for _, fits in trials:
        assert all(f.converged for f in fits), [f.reason for f in fits]
    plain = [_d2(fits[0], truth) for truth, fits in trials]
    considered = [_d2(fits[1], truth) for truth, fits in trials]
    dof = 7 * len(trials)
    low, high = stats.chi2.ppf([0.001, 0.999], dof)
    assert low < sum(considered) < high, considered
    assert sum(plain) > 3.0 * high, plain  # the noise alone claims far too little
    # the considered covariance is the wider one, and only by the biases' share
    for _, (a, b) in trials:
        assert np.trace(b.covariance[:3, :3]) > np.trace(a.covariance[:3, :3])
        assert a.state == pytest.approx(b.state)
