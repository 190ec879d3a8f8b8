"""Measurement models of the orbit determination (sda.orbit.estimation.measurements): hand-computed geometry,
wrapped residuals, analytic Jacobians against central differences of the predictions."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pandas as pd
import pytest

from sda.orbit import frames
from sda.orbit.estimation.measurements import MODELS, MeasurementModel, registry_sigmas
from sda.orbit.sensors import load_sensors

T0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc).timestamp()
R_E = frames.R_EARTH_KM


def _site_rows(n: int, lat: float = 0.0, lon: float = 0.0, alt: float = 0.0, **cols) -> pd.DataFrame:
    return pd.DataFrame({"sensor_id": ["X"] * n, "site_lat_deg": [lat] * n, "site_lon_deg": [lon] * n,
                         "site_alt_m": [alt] * n, **cols})


def _teme_from_ecef(r_ecef_km, v_ecef_kms, t) -> np.ndarray:
    r, v = frames.ecef_to_teme(np.atleast_2d(r_ecef_km), np.atleast_2d(v_ecef_kms), np.atleast_1d(t))
    return np.concatenate([r, v], axis=1) * 1000.0


def test_radar_hand_computed_geometry():
    # site on the equator at Greenwich (sea level); the object 1000 km due east of it, in the horizon
    # plane, receding at 1 km/s along the line of sight: range 1000 km, az 90 deg, el 0, range-rate 1 km/s
    # (ECEF x of the site is R_E: WGS-84 equatorial radius)
    x = _teme_from_ecef([R_E, 1000.0, 0.0], [0.0, 1.0, 0.0], T0)
    pred = MODELS["radar"].predict(x, np.array([T0]), _site_rows(1))[0]
    assert pred[0] == pytest.approx(1.0e6, abs=1e-3)
    assert math.degrees(pred[1]) == pytest.approx(90.0, abs=1e-9)
    assert math.degrees(pred[2]) == pytest.approx(0.0, abs=1e-9)
    assert pred[3] == pytest.approx(1000.0, abs=1e-6)
    # straight up from a site at 45 N, 10 E: elevation 90 deg, range the height above it
    up = frames.geodetic_to_ecef(45.0, 10.0, 0.0)
    x = _teme_from_ecef(up * (1.0 + 500.0 / np.linalg.norm(up)), [0.0, 0.0, 0.0], T0)
    pred = MODELS["radar"].predict(x, np.array([T0]), _site_rows(1, 45.0, 10.0))[0]
    assert math.degrees(pred[2]) == pytest.approx(90.0, abs=0.2)  # geodetic, not geocentric, vertical
    assert pred[0] == pytest.approx(500.0e3, rel=1e-3)


def test_optical_hand_computed_direction():
    # 1000 km from the site along RA 45 deg, Dec 30 deg (TEME): the model must give those back
    site = frames.site_teme(20.0, -150.0, 3000.0, T0)
    los = np.array([math.cos(math.radians(30)) * math.cos(math.radians(45)),
                    math.cos(math.radians(30)) * math.sin(math.radians(45)), math.sin(math.radians(30))])
    x = np.concatenate([(site + 1000.0 * los) * 1000.0, [0.0, 7000.0, 0.0]])[None, :]
    pred = MODELS["optical"].predict(x, np.array([T0]), _site_rows(1, 20.0, -150.0, 3000.0))[0]
    assert np.degrees(pred) == pytest.approx([45.0, 30.0], abs=1e-9)


def test_residuals_wrap_angles_only():
    radar = MODELS["radar"]
    res = radar.residual(np.array([[1000.0, math.radians(359.9), 0.1, 5.0]]),
                         np.array([[990.0, math.radians(0.1), 0.1, 2.0]]))[0]
    assert res[0] == pytest.approx(10.0)
    assert math.degrees(res[1]) == pytest.approx(-0.2)
    assert res[3] == pytest.approx(3.0)
    ra = MODELS["optical"].residual(np.array([[math.radians(0.05), 0.0]]), np.array([[math.radians(359.95), 0.0]]))
    assert math.degrees(ra[0, 0]) == pytest.approx(0.1)


def _leo_rows(kind: str) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """Three LEO states seen from a site at 40 N, 20 E (above its horizon, away from the zenith)."""
    site = frames.geodetic_to_ecef(40.0, 20.0, 100.0)
    t = T0 + np.array([0.0, 30.0, 60.0])
    east, north, up = frames.enu_basis(40.0, 20.0)
    rho = np.array([800.0 * east + 600.0 * north + 700.0 * up, -500.0 * east + 900.0 * north + 400.0 * up,
                    300.0 * east - 800.0 * north + 900.0 * up])
    v_e = np.array([[3.0, -6.0, 2.5], [-5.0, 4.0, 3.0], [6.5, 1.0, -2.0]])
    x = np.concatenate([_teme_from_ecef(site + rho[i], v_e[i], t[i]) for i in range(3)])
    return x, t, _site_rows(3, 40.0, 20.0, 100.0)


@pytest.mark.parametrize("kind", ["radar", "optical", "isl"])
def test_analytic_jacobian_matches_central_differences(kind):
    model = MODELS[kind]
    x, t, obs = _leo_rows(kind)
    analytic = model.jacobian(x, t, obs)
    numeric = MeasurementModel.jacobian(model, x, t, obs)
    scale = np.max(np.abs(numeric), axis=2, keepdims=True)
    assert np.max(np.abs(analytic - numeric) / scale) < 1e-5


def test_sigmas_from_the_registry():
    sensors = load_sensors()
    sigmas = registry_sigmas(sensors)
    obs = pd.DataFrame({"sensor_id": ["EGLIN", "NOT-A-SENSOR"], "dec_rad": [0.0, math.radians(60.0)]})
    radar = MODELS["radar"].sigma(obs, sigmas)
    assert radar[0] == pytest.approx([30.0, math.radians(0.0154), math.radians(0.0154), 2.0])
    assert np.isfinite(radar[1]).all()  # an unknown sensor gets its kind's default
    optical = MODELS["optical"].sigma(pd.DataFrame({"sensor_id": ["MAUI"], "dec_rad": [math.radians(60.0)]}), sigmas)
    assert optical[0] == pytest.approx([math.radians(0.00028) / 0.5, math.radians(0.00028)])
    isl = MODELS["isl"].sigma(pd.DataFrame({"sensor_id": ["ISL-01"]}), sigmas)
    assert isl[0] == pytest.approx([50.0] * 3 + [0.05] * 3)
