"""What a sensor would measure of a predicted orbit state, the signed residuals of what it did
measure, and how unlikely they are under the prediction's uncertainty (the gate statistic).

For one (observation, candidate object) pair per row, :func:`measure` forms, by sensor kind, the
predicted measurement, the residuals observed - predicted (named as in
:data:`sda.orbit.correlation.columns.RESIDUALS`), the position-space miss, and :func:`gate_statistic`'s
Mahalanobis distance ``d2`` with the log determinant of the residuals' covariance ``S = J C J^T +
diag(sigma_sensor^2)``, ``J`` the Jacobian of the measurements with respect to the state error on
the predicted orbit's radial / along-track / cross-track axes. The predictions and Jacobians are the
estimator's measurement models (:data:`sda.orbit.estimation.measurements.MODELS`), resolved on those
axes: one family of models serves the gate and the fit. The model of the prediction's error -- which
terms, why -- is described in :mod:`sda.orbit.correlation.correlate`, which associates observations
with objects from these numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from sda.orbit.estimation.measurements import MODELS, models, rtn_axes, wrap_angle
from sda.orbit.frames import (
    angle_between,
    light_time_position,
    razel_to_ecef,
    site_teme,
    teme_to_ecef,
    unit_vector_radec,
)

# Probability that a correct association falls outside the gate (under the Gaussian model of
# :mod:`sda.orbit.correlation.correlate`).
GATE_TAIL = 1e-6


def chi2_tail(x: float, k: int) -> float:
    """P(X > x) for a chi-square variable with ``k`` (whole) degrees of freedom."""
    h = x / 2.0
    if h <= 0:
        return 1.0
    if k % 2 == 0:
        return math.exp(-h) * sum(h**i / math.factorial(i) for i in range(k // 2))
    return math.erfc(math.sqrt(h)) + math.exp(-h) * sum(
        math.exp((i + 0.5) * math.log(h) - math.lgamma(i + 1.5)) for i in range((k - 1) // 2))


def chi2_quantile(tail: float, k: int) -> float:
    """The ``x`` with ``P(X > x) = tail`` for a chi-square variable with ``k`` degrees of freedom."""
    lo, hi = 0.0, 1.0
    while chi2_tail(hi, k) > tail:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if chi2_tail(mid, k) > tail else (lo, mid)
    return 0.5 * (lo + hi)


GATE_D2 = {k: chi2_quantile(GATE_TAIL, k) for k in (1, 2, 3, 4)}


Measured = tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], np.ndarray, np.ndarray]


def _rtn(jac6: np.ndarray, axes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A model's Jacobian [m, k, 6] (per metre, per m/s of the TEME state) -> d(measurement)/d(position
    error along R, T, N) and d(measurement)/d(velocity error along R, T, N), [m, k, 3] each."""
    return np.einsum("mkx,max->mka", jac6[:, :, :3], axes), np.einsum("mkx,max->mka", jac6[:, :, 3:], axes)


def gate_statistic(y: np.ndarray, jac: np.ndarray, sigma_rtn_m: np.ndarray | None, sensor_var: np.ndarray,
                   jac_vel: np.ndarray | None = None, rate: np.ndarray | None = None,
                   cov_rtn6: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mahalanobis distance of residuals ``y`` [m, k] and log det of their covariance [m].

    ``jac`` [m, k, 3] is d(measurement)/d(position error along R, T, N), ``sigma_rtn_m`` [m, 3] the
    prediction's sigmas there, ``sensor_var`` [m, k] the sensor's noise variance. With ``jac_vel``
    (d(measurement)/d(velocity error along R, T, N)) and ``rate`` (the orbital rate n [1/s]) the
    velocity error of the module docstring enters too. ``cov_rtn6`` [m, 6, 6], when given, replaces that
    model by a full covariance of the position and velocity errors along R, T, N (m, m/s; e.g. a fused
    orbit's prediction, :mod:`sda.orbit.correlation.tracks`): ``S = H C H^T + diag(sensor_var)`` with ``H = [jac,
    jac_vel]`` (``jac_vel`` zero when None). Rows that are not finite get NaN."""
    if cov_rtn6 is not None:
        h = np.concatenate([jac, np.zeros_like(jac) if jac_vel is None else jac_vel], axis=-1)
        return _cholesky_statistic(y, np.einsum("mka,mab,mlb->mkl", h, cov_rtn6, h), sensor_var)
    var = sigma_rtn_m**2
    if jac_vel is not None:
        jac = jac.copy()
        jac[:, :, 1] -= rate[:, None] * jac_vel[:, :, 0]  # an along-track error is a time shift: dv = -n dT R
        q = np.stack([var[:, 0], 4.0 * var[:, 0], var[:, 2]], axis=-1) * (rate**2)[:, None]
        cov = np.einsum("mka,ma,mla->mkl", jac, var, jac) + np.einsum("mka,ma,mla->mkl", jac_vel, q, jac_vel)
    else:
        cov = np.einsum("mka,ma,mla->mkl", jac, var, jac)
    return _cholesky_statistic(y, cov, sensor_var)


def _cholesky_statistic(y: np.ndarray, cov: np.ndarray, sensor_var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``y^T S^-1 y`` and ``ln det S`` per row, ``S = cov + diag(sensor_var)`` (NaN where not finite)."""
    k = y.shape[1]
    cov[:, np.arange(k), np.arange(k)] += sensor_var
    ok = np.isfinite(cov).all(axis=(1, 2)) & np.isfinite(y).all(axis=1)
    cov[~ok] = np.eye(k)
    y = np.where(ok[:, None], y, 0.0)
    chol = np.linalg.cholesky(cov)
    z = np.linalg.solve(chol, y[..., None])[..., 0]
    d2 = np.sum(z * z, axis=-1)
    logdet = 2.0 * np.sum(np.log(np.diagonal(chol, axis1=1, axis2=2)), axis=-1)
    return np.where(ok, d2, np.nan), np.where(ok, logdet, np.nan)


def measure(kind: str, obs: pd.DataFrame, t: np.ndarray, r: np.ndarray, v: np.ndarray, sig: Mapping[str, np.ndarray],
            sigma_rtn_m: np.ndarray, fixed_rr_ms: float | None = None, cov_rtn6: np.ndarray | None = None,
            light_time: bool = False) -> Measured:
    """Observation ``p`` of ``obs`` against the predicted TEME state ``r[p]``/``v[p]`` (km, km/s) at
    ``t[p]`` whose position error has sigmas ``sigma_rtn_m[p]`` (R, T, N; m): (gate statistic d2,
    position-space miss in metres, signed residuals by :data:`sda.orbit.correlation.RESIDUALS` column,
    number of components in d2, log det of the residuals' covariance). NaN d2/miss where SGP4 failed.
    ``fixed_rr_ms`` is the isotropic override's range-rate sigma (no position term in range-rate).
    ``cov_rtn6`` [p, 6, 6]: the prediction's full position / velocity covariance along R, T, N instead
    of ``sigma_rtn_m`` (:func:`gate_statistic`; not with ``fixed_rr_ms``). ``light_time``: the measurement models
    with or without it (:func:`sda.orbit.estimation.measurements.models`)."""
    kinds = models(light_time)
    with np.errstate(invalid="ignore", divide="ignore"):
        if kind == "radar":
            return _radar(obs, t, r, v, sig, sigma_rtn_m, fixed_rr_ms, cov_rtn6, kinds["radar"], light_time)
        if kind == "optical":
            return _optical(obs, t, r, v, sig, sigma_rtn_m, cov_rtn6, kinds["optical"], light_time)
        if kind == "isl":
            return _isl(obs, r, v, sig, sigma_rtn_m, cov_rtn6)
    raise ValueError(kind)


def _seen(r: np.ndarray, v: np.ndarray, site_km: np.ndarray, light_time: bool) -> np.ndarray:
    """Where the sensor at ``site_km`` (TEME, km) saw the predicted object: one light time earlier when the
    measurements carry it (the position-space miss then compares like with like), else where it is."""
    return light_time_position(r, v, site_km) if light_time else r


def _reader(obs: pd.DataFrame) -> Callable[[str], np.ndarray]:
    """``col(name)``: that column of ``obs`` as floats (NaN throughout when ``obs`` lacks it)."""
    return lambda name: obs[name].to_numpy(dtype=float) if name in obs else np.full(len(obs), np.nan)


def _radar(obs: pd.DataFrame, t: np.ndarray, r: np.ndarray, v: np.ndarray, sig: Mapping[str, np.ndarray],
           sigma_rtn_m: np.ndarray, fixed_rr_ms: float | None, cov_rtn6: np.ndarray | None = None,
           model=MODELS["radar"], light_time: bool = False) -> Measured:
    """Range, azimuth, elevation and (when reported) range-rate at the radar's site."""
    col = _reader(obs)
    site = (col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"))
    x = np.concatenate([r, v], axis=1) * 1000.0
    predicted = model.predict(x, t, obs)
    r_e, _ = teme_to_ecef(_seen(r, v, site_teme(*site, t), light_time), v, t)
    observed = razel_to_ecef(col("range_m") / 1000.0, col("az_rad"), col("el_rad"), *site)
    miss_m = np.linalg.norm(r_e - observed, axis=-1) * 1000.0
    res = {
        "residual_range_m": col("range_m") - predicted[:, 0],
        "residual_az_rad": wrap_angle(col("az_rad") - predicted[:, 1]),
        "residual_el_rad": col("el_rad") - predicted[:, 2],
        "residual_range_rate_ms": col("range_rate_ms") - predicted[:, 3],
    }
    has_rr = np.isfinite(res["residual_range_rate_ms"])
    jac, jac_vel = _rtn(model.jacobian(x, t, obs), rtn_axes(r, v))
    sensor_var = np.stack([sig["sigma_range_m"] ** 2, sig["sigma_angle_rad"] ** 2, sig["sigma_angle_rad"] ** 2,
                           sig["sigma_range_rate_ms"] ** 2], axis=-1)
    y = np.stack([res["residual_range_m"], res["residual_az_rad"], res["residual_el_rad"],
                  np.where(has_rr, res["residual_range_rate_ms"], 0.0)], axis=-1)
    if fixed_rr_ms is not None:
        jac[:, 3, :] = 0.0
        jac_vel = None
        sensor_var[:, 3] += fixed_rr_ms**2
    # without a range-rate, its row contributes nothing (unit variance, zero residual)
    jac[~has_rr, 3, :] = 0.0
    if jac_vel is not None:
        jac_vel[~has_rr] = 0.0
    sensor_var[~has_rr, 3] = 1.0
    rate = np.linalg.norm(v, axis=-1) / np.linalg.norm(r, axis=-1)
    d2, logdet = gate_statistic(y, jac, sigma_rtn_m, sensor_var, jac_vel, rate, cov_rtn6)
    return d2, miss_m, res, np.where(has_rr, 4, 3), logdet


def _optical(obs: pd.DataFrame, t: np.ndarray, r: np.ndarray, v: np.ndarray, sig: Mapping[str, np.ndarray],
             sigma_rtn_m: np.ndarray, cov_rtn6: np.ndarray | None = None, model=MODELS["optical"],
             light_time: bool = False) -> Measured:
    """Topocentric right ascension and declination at the telescope's site."""
    col = _reader(obs)
    m = len(obs)
    site = (col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"))
    x = np.concatenate([r, v], axis=1) * 1000.0
    ra, dec = model.predict(x, t, obs).T
    at = site_teme(*site, t)
    rho = _seen(r, v, at, light_time) - at
    los = unit_vector_radec(col("ra_rad"), col("dec_rad"))
    miss_m = angle_between(los, rho) * np.linalg.norm(rho, axis=-1) * 1000.0
    res = {"residual_ra_rad": wrap_angle(col("ra_rad") - ra), "residual_dec_rad": col("dec_rad") - dec}
    # right ascension times cos(dec) and declination: two orthogonal angles on the sky
    jac, _ = _rtn(model.jacobian(x, t, obs), rtn_axes(r, v))
    jac[:, 0, :] *= np.cos(dec)[:, None]
    y = np.stack([res["residual_ra_rad"] * np.cos(dec), res["residual_dec_rad"]], axis=-1)
    sensor_var = np.repeat((sig["sigma_angle_rad"] ** 2)[:, None], 2, axis=1)
    d2, logdet = gate_statistic(y, jac, sigma_rtn_m, sensor_var, cov_rtn6=cov_rtn6)
    return d2, miss_m, res, np.full(m, 2), logdet


def _isl(obs: pd.DataFrame, r: np.ndarray, v: np.ndarray, sig: Mapping[str, np.ndarray],
         sigma_rtn_m: np.ndarray, cov_rtn6: np.ndarray | None = None) -> Measured:
    """The reported position, resolved on the predicted orbit's R, T, N axes."""
    col = _reader(obs)
    m = len(obs)
    delta_m = np.stack([col("x_m"), col("y_m"), col("z_m")], axis=-1) - r * 1000.0
    axes = rtn_axes(r, v)
    res = {
        "residual_radial_m": np.sum(delta_m * axes[:, 0], axis=-1),
        "residual_along_m": np.sum(delta_m * axes[:, 1], axis=-1),
        "residual_cross_m": np.sum(delta_m * axes[:, 2], axis=-1),
    }
    miss_m = np.linalg.norm(delta_m, axis=-1)
    y = np.stack([res["residual_radial_m"], res["residual_along_m"], res["residual_cross_m"]], axis=-1)
    if cov_rtn6 is not None:  # the residual is on R, T, N already: H = [I, 0]
        sensor_var = np.repeat((sig["sigma_pos_m"] ** 2)[:, None], 3, axis=1)
        d2, logdet = _cholesky_statistic(y, cov_rtn6[:, :3, :3].copy(), sensor_var)
        return d2, miss_m, res, np.full(m, 3), logdet
    total = sigma_rtn_m**2 + (sig["sigma_pos_m"] ** 2)[:, None]  # diagonal in RTN: no matrix needed
    d2 = np.sum(y * y / total, axis=-1)
    return d2, miss_m, res, np.full(m, 3), np.sum(np.log(total), axis=-1)
