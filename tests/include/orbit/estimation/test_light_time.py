"""Light time in the measurement models (sda.orbit.frames.light_time_position, sda.orbit.estimation.measurements):
checked against the light-time equation solved here by bisection on an exact trajectory, and a fit to
light-time-delayed radar measurements."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sda.config.settings import SettingsError, load_settings
from sda.orbit import frames
from sda.orbit.estimation import OdConfig, Prior, fit, measurements
from tests.include.orbit.estimation.test_estimator import B_TRUE, NO_NOISE, SIGMAS, T0, _true_orbit

C_KM_S = 299_792.458
SITE = (28.0, -80.0, 10.0)  # lat, lon (deg), height (m)


def _circle(radius_km: float, period_s: float, incl_deg: float):
    """An exact circular trajectory in TEME: position (km) at any time, and the state (km, km/s) at ``t``."""
    n = 2.0 * math.pi / period_s
    i = math.radians(incl_deg)

    def position(t):
        u = n * (np.asarray(t, float) - T0) + 0.7
        return radius_km * np.stack([np.cos(u), np.sin(u) * math.cos(i), np.sin(u) * math.sin(i)], axis=-1)

    def state(t):
        u = n * (t - T0) + 0.7
        v = radius_km * n * np.array([-math.sin(u), math.cos(u) * math.cos(i), math.cos(u) * math.sin(i)])
        return position(t), v
    return position, state


def _retarded(position, t: float, site_km: np.ndarray) -> np.ndarray:
    """The position at ``t - tau`` with ``|position(t - tau) - site| = c tau``, by bisection."""
    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.linalg.norm(position(t - mid) - site_km) > C_KM_S * mid else (lo, mid)
    return position(t - 0.5 * (lo + hi))


@pytest.mark.parametrize("radius_km, period_s", [(6828.0, 5614.0), (42164.0, 86164.0)])
def test_the_light_time_equation_solved(radius_km, period_s):
    mu = (2.0 * math.pi / period_s) ** 2 * radius_km**3  # the circle's own gravitational parameter
    position, state = _circle(radius_km, period_s, 51.6)
    for t in T0 + np.array([0.0, 1234.5, 4000.0]):
        site = frames.site_teme(*SITE, t)
        r, v = state(t)
        got = frames.light_time_position(r, v, site, mu)
        assert np.linalg.norm(got - _retarded(position, t, site)) < 1e-6  # km: a millimetre
        assert np.linalg.norm(got - r) > 0.005  # and it moved (tens of metres in LEO, hundreds in GEO)


def _obs(t: float) -> pd.DataFrame:
    return pd.DataFrame({"site_lat_deg": [SITE[0]], "site_lon_deg": [SITE[1]], "site_alt_m": [SITE[2]],
                         "event_time": [pd.Timestamp(t, unit="s")]})


def test_radar_and_optical_see_where_the_object_was():
    position, state = _circle(6828.0, 5614.0, 51.6)
    t = T0 + 4000.0
    r, v = state(t)
    x = np.concatenate([r, v])[None, :] * 1000.0
    site = frames.site_teme(*SITE, t)
    seen = _retarded(position, t, site)
    expected_range_m = np.linalg.norm(seen - site) * 1000.0
    with_lt, without = measurements.models(True), measurements.models(False)
    assert with_lt["radar"].predict(x, np.array([t]), _obs(t))[0, 0] == pytest.approx(expected_range_m, abs=1e-3)
    rho = seen - site  # optical: right ascension and declination towards it
    ra, dec = with_lt["optical"].predict(x, np.array([t]), _obs(t))[0]
    assert ra == pytest.approx(math.atan2(rho[1], rho[0]) % (2 * math.pi), abs=1e-10)
    assert dec == pytest.approx(math.asin(rho[2] / np.linalg.norm(rho)), abs=1e-10)
    geometric = without["radar"].predict(x, np.array([t]), _obs(t))[0, 0]
    assert abs(geometric - np.linalg.norm(r - site) * 1000.0) < 1e-6 and abs(geometric - expected_range_m) > 1.0


def test_a_fit_to_light_time_delayed_radar_needs_the_light_time_model():
    """Noise-free radar (range, angles, range-rate) of a numerically integrated orbit, each measured at the
    position one light time before reception (solved by propagating to t - tau three times): fitted with the
    light-time model the orbit comes back to a decimetre or so; without it, metres off."""
    times = T0 + np.arange(60.0, 6000.0, 90.0)
    states, at_t0 = _true_orbit(times)
    rows = []
    for t, x in zip(times, states):
        r_now, _ = frames.teme_to_ecef(x[:3] / 1000.0, x[3:] / 1000.0, t)  # a site 3 deg south, 2 east of under it
        site_geo = (math.degrees(math.asin(r_now[2] / np.linalg.norm(r_now))) - 3.0,
                    math.degrees(math.atan2(r_now[1], r_now[0])) + 2.0, 0.0)
        site = frames.site_teme(*site_geo, t)
        tau = np.linalg.norm(x[:3] / 1000.0 - site) / C_KM_S
        for _ in range(3):
            back, _ = _true_orbit(np.array([t - tau]))
            tau = np.linalg.norm(back[0, :3] / 1000.0 - site) / C_KM_S
        r_e, v_e = frames.teme_to_ecef(back[0, :3] / 1000.0, x[3:] / 1000.0, t)
        rng_km, az, el, rr = frames.razel(r_e, v_e, *site_geo)
        rows.append(dict(sensor_id="EGLIN", sensor_kind="radar", event_time=pd.Timestamp(t, unit="s"),
                         site_lat_deg=site_geo[0], site_lon_deg=site_geo[1], site_alt_m=0.0, range_m=rng_km * 1000.0,
                         az_rad=az, el_rad=el, range_rate_ms=rr * 1000.0))
    obs = pd.DataFrame(rows)
    prior = Prior(T0, at_t0 + np.array([300.0, -200.0, 100.0, 0.2, -0.1, 0.1]), np.diag([1e6] * 3 + [1.0] * 3),
                  B_TRUE, 1e-6)
    truth_end = _true_orbit(np.array([obs["event_time"].max().timestamp()]))[0][0]
    errors = {}
    for light_time in (True, False):
        result = fit(obs, prior, SIGMAS, OdConfig(noise=NO_NOISE.noise, light_time=light_time))
        assert result.converged, result.reason
        errors[light_time] = float(np.linalg.norm(result.state[:3] - truth_end[:3]))
    assert errors[True] < 0.5 and errors[False] > 2.0, errors


def test_the_setting_reads_true_or_false_and_refuses_the_rest():
    assert load_settings(env={"SDA_LIGHT_TIME": "true"}).light_time is True
    assert load_settings(env={"SDA_LIGHT_TIME": "0"}).light_time is False
    assert load_settings(env={}).light_time is True  # real sensors and the default (harsher) sky carry light time
    with pytest.raises(SettingsError, match="SDA_LIGHT_TIME='maybe': expected true or false"):
        load_settings(env={"SDA_LIGHT_TIME": "maybe"})
