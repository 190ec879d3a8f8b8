"""Measurement models of the orbit determination: what each sensor kind measures of a TEME state.

One model per sensor kind, each behind the same small interface (:class:`MeasurementModel`), so a new
sensor type is one new model and the estimator does not change:

* ``observed(obs)`` [m, k]: the measured values of the silver envelope's rows (NaN: not measured);
* ``sigma(obs, sigmas)`` [m, k]: their noise (1-sigma; the covariance is diagonal), from the sensor
  registry (:func:`sda.orbit.sensors.sensor_sigmas`) by ``sensor_id``, else the kind's default;
* ``predict(x, t, obs)`` [m, k]: the predicted values for TEME states ``x`` [m, 6] (m, m/s) at unix
  times ``t`` seen from each row's site;
* ``residual(observed, predicted)``: observed - predicted, angles wrapped to [-pi, pi);
* ``jacobian(x, t, obs)`` [m, k, 6]: d(predicted) / d(x). The base class differentiates
  :meth:`MeasurementModel.predict` numerically (central differences); the models here are analytic and
  tests/include/orbit/estimation/test_measurements.py checks them against those differences.

The correlation gate (:mod:`sda.orbit.correlation.gate`) predicts with the same models and resolves their
Jacobians on the predicted orbit's R, T, N axes (:func:`rtn_axes`). Conventions are the pipeline's
(:mod:`sda.orbit.frames`): radar range (m), azimuth and elevation (rad) and range-rate (m/s) are topocentric in
the site's east-north-up frame, computed in ECEF = R3(GMST) TEME; optical right ascension and
declination are topocentric in TEME; ISL reports the TEME position (m) and velocity (m/s). Units are SI
throughout.

**Light time.** A radar's range and angles are those of where the object was when the pulse met it, one light
time before reception (the event time); a telescope's astrometric angles point where it was one light time
before the exposure (:func:`sda.orbit.frames.light_time_position`; up to ~25 m of range in LEO, ~2 arcsec in
GEO). :func:`models` with ``light_time=True`` (as real sensors and the simulator's harsher skies report) predict
that; with False (the default, ``settings.light_time``'s, as the default kinder sky reports) the instantaneous
geometry.
The Jacobians leave out light time's own sensitivity (a relative effect of v/c, ~3e-5). No refraction or
aberration (astrometric angles are measured against a star catalogue that has the aberration too).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from sda.orbit import frames
from sda.orbit.sensors import DEFAULT_SIGMAS, sensor_sigmas

#: the envelope columns a fit reads of each observation (ids, time, every kind's measurements, the site):
#: what the fuse stage selects and the benchmarks pass to :func:`sda.orbit.fusion.arcs.fuse_object`
FIT_COLUMNS = ("obs_id", "norad_id", "sensor_id", "sensor_kind", "event_time", "range_m", "az_rad", "el_rad",
               "range_rate_ms", "ra_rad", "dec_rad", "x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms",
               "site_lat_deg", "site_lon_deg", "site_alt_m")

#: ISL velocity noise when the registry has none (m/s).
DEFAULT_SIGMA_VEL_MS = 0.05


def wrap_angle(angle: np.ndarray) -> np.ndarray:
    """Radians -> [-pi, pi)."""
    return np.mod(np.asarray(angle, float) + np.pi, 2.0 * np.pi) - np.pi


def rtn_axes(r: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[m, 3, 3]: the orbit's R, T, N unit vectors (rows), in the frame of ``r``/``v``."""
    radial = r / np.linalg.norm(r, axis=-1, keepdims=True)
    h = np.cross(r, v)
    cross = h / np.linalg.norm(h, axis=-1, keepdims=True)
    return np.stack([radial, np.cross(cross, radial), cross], axis=1)


def rtn_covariance(r_km: np.ndarray, v_kms: np.ndarray, cov_teme: np.ndarray) -> np.ndarray:
    """[m, 6, 6] TEME position / velocity covariances (m units) resolved on each state's R, T, N axes."""
    axes = rtn_axes(r_km, v_kms)  # [m, 3, 3], rows R, T, N
    big = np.zeros((len(axes), 6, 6))
    big[:, :3, :3] = big[:, 3:, 3:] = axes
    return big @ cov_teme @ np.swapaxes(big, 1, 2)


def _col(obs: pd.DataFrame, name: str) -> np.ndarray:
    return obs[name].to_numpy(dtype=float) if name in obs else np.full(len(obs), np.nan)


def _site(obs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return _col(obs, "site_lat_deg"), _col(obs, "site_lon_deg"), _col(obs, "site_alt_m")


def _sigma_of(obs: pd.DataFrame, sigmas: Mapping[str, Mapping[str, float]], kind: str, name: str,
              default: float | None = None) -> np.ndarray:
    """Per row, the registry's ``name`` sigma of its sensor, else the kind's default."""
    fallback = DEFAULT_SIGMAS.get(kind, {}).get(name, default)
    ids = obs["sensor_id"] if "sensor_id" in obs else pd.Series([None] * len(obs), index=obs.index)
    return np.array([sigmas.get(s, {}).get(name, fallback) for s in ids], dtype=float)


def _rot3(theta: np.ndarray) -> np.ndarray:
    """[m, 3, 3] R3(theta): ECEF = R3(GMST) TEME (frames._rot_z as matrices)."""
    c, s = np.cos(theta), np.sin(theta)
    out = np.zeros(np.shape(theta) + (3, 3))
    out[..., 0, 0], out[..., 0, 1], out[..., 1, 0], out[..., 1, 1], out[..., 2, 2] = c, s, -s, c, 1.0
    return out


class MeasurementModel:
    """The interface (module docstring); subclasses set ``kind`` and ``components``."""

    kind: str = ""
    components: tuple[str, ...] = ()
    angles: tuple[bool, ...] = ()  # which components are angles on a circle (wrapped residuals)

    def __init__(self, light_time: bool = False):
        self.light_time = light_time

    def seen(self, x: np.ndarray, t: np.ndarray, obs: pd.DataFrame) -> np.ndarray:
        """The TEME position (km) the sensor sees of states ``x`` (m, m/s) at ``t``: one light time back when
        :attr:`light_time`, else where the object is."""
        r, v = x[:, :3] / 1000.0, x[:, 3:] / 1000.0
        if not self.light_time:
            return r
        return frames.light_time_position(r, v, frames.site_teme(*_site(obs), t))

    def observed(self, obs: pd.DataFrame) -> np.ndarray:
        return np.stack([_col(obs, c) for c in self.components], axis=1)

    def sigma(self, obs: pd.DataFrame, sigmas: Mapping[str, Mapping[str, float]]) -> np.ndarray:
        raise NotImplementedError

    def predict(self, x: np.ndarray, t: np.ndarray, obs: pd.DataFrame) -> np.ndarray:
        raise NotImplementedError

    def residual(self, observed: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        res = observed - predicted
        wrap = np.asarray(self.angles, dtype=bool)
        res[:, wrap] = wrap_angle(res[:, wrap])
        return res

    def jacobian(self, x: np.ndarray, t: np.ndarray, obs: pd.DataFrame) -> np.ndarray:
        """Central differences of :meth:`predict` (steps 1 m, 1 mm/s)."""
        x = np.asarray(x, float)
        out = np.empty((len(x), len(self.components), 6))
        for j, h in enumerate((1.0, 1.0, 1.0, 1e-3, 1e-3, 1e-3)):
            dx = np.zeros(6)
            dx[j] = h
            out[:, :, j] = self.residual(self.predict(x + dx, t, obs), self.predict(x - dx, t, obs)) / (2.0 * h)
        return out


class Radar(MeasurementModel):
    """Range, azimuth, elevation and (where reported) range-rate from a WGS-84 site."""

    kind = "radar"
    components = ("range_m", "az_rad", "el_rad", "range_rate_ms")
    angles = (False, True, False, False)

    def sigma(self, obs, sigmas):
        angle = _sigma_of(obs, sigmas, "radar", "sigma_angle_rad")
        return np.stack([_sigma_of(obs, sigmas, "radar", "sigma_range_m"), angle, angle,
                         _sigma_of(obs, sigmas, "radar", "sigma_range_rate_ms")], axis=1)

    def predict(self, x, t, obs):
        r_e, v_e = frames.teme_to_ecef(self.seen(x, t, obs), x[:, 3:] / 1000.0, t)
        rng, az, el, rr = frames.razel(r_e, v_e, *_site(obs))
        return np.stack([rng * 1000.0, az, el, rr * 1000.0], axis=1)

    def jacobian(self, x, t, obs):
        lat, lon, alt = _site(obs)
        rot = _rot3(frames.gmst(t))
        r_e = np.einsum("mij,mj->mi", rot, x[:, :3])
        v_e = np.einsum("mij,mj->mi", rot, x[:, 3:]) - np.cross([0.0, 0.0, frames.OMEGA_EARTH], r_e)
        rho = r_e - frames.geodetic_to_ecef(lat, lon, alt) * 1000.0
        east, north, up = frames.enu_basis(lat, lon)
        pe, pn, pu = (np.sum(rho * b, axis=-1) for b in (east, north, up))
        rn = np.linalg.norm(rho, axis=-1)
        u = rho / rn[:, None]
        h2 = np.maximum(pe**2 + pn**2, (1e-3 * rn) ** 2)  # bounded at the zenith, where azimuth is undefined
        g_r = np.stack([u, (pn[:, None] * east - pe[:, None] * north) / h2[:, None],
                        (up - (pu / rn)[:, None] * u) / np.sqrt(h2)[:, None],
                        (v_e - u * np.sum(u * v_e, axis=-1, keepdims=True)) / rn[:, None]], axis=1)
        g_v = np.zeros_like(g_r)
        g_v[:, 3] = u
        omega = np.array([[0.0, -frames.OMEGA_EARTH, 0.0], [frames.OMEGA_EARTH, 0.0, 0.0], [0.0, 0.0, 0.0]])
        # r_e = R r, v_e = R v - Omega R r (R3 commutes with Omega, a rotation about the same axis)
        d_r = g_r @ rot - g_v @ (omega @ rot)
        return np.concatenate([d_r, g_v @ rot], axis=2)


class Optical(MeasurementModel):
    """Topocentric right ascension and declination (TEME) from a WGS-84 site."""

    kind = "optical"
    components = ("ra_rad", "dec_rad")
    angles = (True, False)

    def sigma(self, obs, sigmas):
        angle = _sigma_of(obs, sigmas, "optical", "sigma_angle_rad")
        # the sensor's sigma is on the sky: right ascension's is that over cos(dec)
        cos_dec = np.maximum(np.cos(_col(obs, "dec_rad")), 1e-3)
        return np.stack([angle / cos_dec, angle], axis=1)

    def predict(self, x, t, obs):
        ra, dec = frames.radec(self.seen(x, t, obs), *_site(obs), t)
        return np.stack([ra, dec], axis=1)

    def jacobian(self, x, t, obs):
        rho = x[:, :3] - frames.site_teme(*_site(obs), t) * 1000.0
        rn = np.linalg.norm(rho, axis=-1)
        hor2 = rho[:, 0] ** 2 + rho[:, 1] ** 2
        zeros = np.zeros(len(x))
        d_ra = np.stack([-rho[:, 1], rho[:, 0], zeros], axis=-1) / hor2[:, None]
        zhat = np.broadcast_to([0.0, 0.0, 1.0], rho.shape)
        d_dec = (zhat - (rho[:, 2] / rn)[:, None] * rho / rn[:, None]) / np.sqrt(hor2)[:, None]
        out = np.zeros((len(x), 2, 6))
        out[:, 0, :3], out[:, 1, :3] = d_ra, d_dec
        return out


class Isl(MeasurementModel):
    """The reported TEME position and velocity (a relay's navigation solution)."""

    kind = "isl"
    components = ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms")
    angles = (False,) * 6

    def sigma(self, obs, sigmas):
        pos = _sigma_of(obs, sigmas, "isl", "sigma_pos_m")
        vel = _sigma_of(obs, sigmas, "isl", "sigma_vel_ms", DEFAULT_SIGMA_VEL_MS)
        return np.stack([pos, pos, pos, vel, vel, vel], axis=1)

    def predict(self, x, t, obs):
        return np.array(x, float)

    def jacobian(self, x, t, obs):
        return np.broadcast_to(np.eye(6), (len(x), 6, 6)).copy()


def models(light_time: bool = False) -> dict[str, MeasurementModel]:
    """One model per sensor kind, light time as real sensors report it or not (module docstring)."""
    return _MODELS[bool(light_time)]


_MODELS = {lt: {m.kind: m for m in (Radar(lt), Optical(lt), Isl(lt))} for lt in (True, False)}
MODELS: dict[str, MeasurementModel] = models(False)


def registry_sigmas(sensors) -> dict[str, dict[str, float]]:
    """``{sensor_id: {sigma name: value}}`` (SI) of a sensor registry, ISL velocity noise included."""
    out = {k: dict(v) for k, v in sensor_sigmas(sensors).items()}
    for sid, s in (sensors or {}).items():
        if getattr(s, "sigma_vel_ms", None) is not None:
            out.setdefault(sid, {})["sigma_vel_ms"] = float(s.sigma_vel_ms)
    return out


__all__ = ["MeasurementModel", "Radar", "Optical", "Isl", "MODELS", "registry_sigmas", "DEFAULT_SIGMA_VEL_MS",
           "wrap_angle", "rtn_axes"]
