"""What a sensor would measure of a predicted orbit state, the signed residuals of what it did
measure, and how unlikely they are under the prediction's uncertainty (the gate statistic).

For one (observation, candidate object) pair per row, :func:`measure` forms, by sensor kind, the
predicted measurement, the residuals observed - predicted (named as in
:data:`sda.orbit.correlation.RESIDUALS`), the position-space miss, and :func:`gate_statistic`'s
Mahalanobis distance ``d2`` with the log determinant of the residuals' covariance ``S = J C J^T +
diag(sigma_sensor^2)``, ``J`` the Jacobian of the measurements with respect to the state error on
the predicted orbit's radial / along-track / cross-track axes (:func:`_axes`). The model -- which
measurements, which error terms, why -- is described in :mod:`sda.orbit.correlation`, which
associates observations with objects from these numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from sda.orbit.frames import (
    OMEGA_EARTH,
    angle_between,
    enu_basis,
    geodetic_to_ecef,
    radec,
    razel,
    razel_to_ecef,
    site_teme,
    teme_to_ecef,
    unit_vector_radec,
)

Measured = tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], np.ndarray, np.ndarray]


def wrap_angle(angle: np.ndarray) -> np.ndarray:
    """Radians -> [-pi, pi)."""
    return np.mod(np.asarray(angle, float) + np.pi, 2.0 * np.pi) - np.pi


def _axes(r: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[m, 3, 3]: the predicted orbit's R, T, N unit vectors (rows), in the frame of ``r``/``v``."""
    radial = r / np.linalg.norm(r, axis=-1, keepdims=True)
    h = np.cross(r, v)
    cross = h / np.linalg.norm(h, axis=-1, keepdims=True)
    return np.stack([radial, np.cross(cross, radial), cross], axis=1)


def gate_statistic(y: np.ndarray, jac: np.ndarray, sigma_rtn_m: np.ndarray | None, sensor_var: np.ndarray,
                   jac_vel: np.ndarray | None = None, rate: np.ndarray | None = None,
                   cov_rtn6: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mahalanobis distance of residuals ``y`` [m, k] and log det of their covariance [m].

    ``jac`` [m, k, 3] is d(measurement)/d(position error along R, T, N), ``sigma_rtn_m`` [m, 3] the
    prediction's sigmas there, ``sensor_var`` [m, k] the sensor's noise variance. With ``jac_vel``
    (d(measurement)/d(velocity error along R, T, N)) and ``rate`` (the orbital rate n [1/s]) the
    velocity error of the module docstring enters too. ``cov_rtn6`` [m, 6, 6], when given, replaces that
    model by a full covariance of the position and velocity errors along R, T, N (m, m/s; e.g. a fused
    orbit's prediction, :mod:`sda.orbit.od.tracks`): ``S = H C H^T + diag(sensor_var)`` with ``H = [jac,
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
            sigma_rtn_m: np.ndarray, fixed_rr_ms: float | None = None, cov_rtn6: np.ndarray | None = None) -> Measured:
    """Observation ``p`` of ``obs`` against the predicted TEME state ``r[p]``/``v[p]`` (km, km/s) at
    ``t[p]`` whose position error has sigmas ``sigma_rtn_m[p]`` (R, T, N; m): (gate statistic d2,
    position-space miss in metres, signed residuals by :data:`sda.orbit.correlation.RESIDUALS` column,
    number of components in d2, log det of the residuals' covariance). NaN d2/miss where SGP4 failed.
    ``fixed_rr_ms`` is the isotropic override's range-rate sigma (no position term in range-rate).
    ``cov_rtn6`` [p, 6, 6]: the prediction's full position / velocity covariance along R, T, N instead
    of ``sigma_rtn_m`` (:func:`gate_statistic`; not with ``fixed_rr_ms``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if kind == "radar":
            return _radar(obs, t, r, v, sig, sigma_rtn_m, fixed_rr_ms, cov_rtn6)
        if kind == "optical":
            return _optical(obs, t, r, v, sig, sigma_rtn_m, cov_rtn6)
        if kind == "isl":
            return _isl(obs, r, v, sig, sigma_rtn_m, cov_rtn6)
    raise ValueError(kind)


def _reader(obs: pd.DataFrame) -> Callable[[str], np.ndarray]:
    """``col(name)``: that column of ``obs`` as floats (NaN throughout when ``obs`` lacks it)."""
    return lambda name: obs[name].to_numpy(dtype=float) if name in obs else np.full(len(obs), np.nan)


def _radar(obs: pd.DataFrame, t: np.ndarray, r: np.ndarray, v: np.ndarray, sig: Mapping[str, np.ndarray],
           sigma_rtn_m: np.ndarray, fixed_rr_ms: float | None, cov_rtn6: np.ndarray | None = None) -> Measured:
    """Range, azimuth, elevation and (when reported) range-rate at the radar's site."""
    col = _reader(obs)
    site = (col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"))
    r_e, v_e = teme_to_ecef(r, v, t)
    rng_km, az, el, rr_km_s = razel(r_e, v_e, *site)
    observed = razel_to_ecef(col("range_m") / 1000.0, col("az_rad"), col("el_rad"), *site)
    miss_m = np.linalg.norm(r_e - observed, axis=-1) * 1000.0
    res = {
        "residual_range_m": col("range_m") - rng_km * 1000.0,
        "residual_az_rad": wrap_angle(col("az_rad") - az),
        "residual_el_rad": col("el_rad") - el,
        "residual_range_rate_ms": col("range_rate_ms") - rr_km_s * 1000.0,
    }
    has_rr = np.isfinite(res["residual_range_rate_ms"])
    jac, jac_vel = _radar_jacobians(r, v, t, r_e, v_e, site)
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


def _radar_jacobians(r: np.ndarray, v: np.ndarray, t: np.ndarray, r_e: np.ndarray, v_e: np.ndarray,
                     site: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """[m, 4, 3] each: d(range, azimuth, elevation, range-rate)/d(position error along R, T, N) and
    d(the same)/d(velocity error along R, T, N) (only range-rate depends on the velocity), in metres."""
    m = len(r)
    # d(measurement)/d(position), d(range-rate)/d(velocity), in ECEF (metres)
    rho = (r_e - geodetic_to_ecef(*site)) * 1000.0
    east, north, up = enu_basis(site[0], site[1])
    pe, pn, pu = (np.sum(rho * b, axis=-1) for b in (east, north, up))
    rho_m = np.linalg.norm(rho, axis=-1)
    u = rho / rho_m[:, None]
    h2 = np.maximum(pe**2 + pn**2, (1e-3 * rho_m) ** 2)
    ve = v_e * 1000.0
    g = np.stack([u, (pn[:, None] * east - pe[:, None] * north) / h2[:, None],
                  (up - (pu / rho_m)[:, None] * u) / np.sqrt(h2)[:, None],
                  (ve - u * np.sum(u * ve, axis=-1, keepdims=True)) / rho_m[:, None]], axis=1)
    axes, _ = teme_to_ecef(_axes(r, v), np.zeros((m, 3, 3)), t[:, None])  # R, T, N in ECEF
    jac = np.einsum("mkx,max->mka", g, axes)
    omega_cross = np.stack([-OMEGA_EARTH * axes[..., 1], OMEGA_EARTH * axes[..., 0], np.zeros((m, 3))], axis=-1)
    jac[:, 3, :] -= np.einsum("mx,max->ma", u, omega_cross)  # v_ecef = R3 (v - omega x r)
    jac_vel = np.zeros_like(jac)
    jac_vel[:, 3, :] = np.einsum("mx,max->ma", u, axes)
    return jac, jac_vel


def _optical(obs: pd.DataFrame, t: np.ndarray, r: np.ndarray, v: np.ndarray, sig: Mapping[str, np.ndarray],
             sigma_rtn_m: np.ndarray, cov_rtn6: np.ndarray | None = None) -> Measured:
    """Topocentric right ascension and declination at the telescope's site."""
    col = _reader(obs)
    m = len(obs)
    site = (col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"))
    ra, dec = radec(r, *site, t)
    rho = r - site_teme(*site, t)
    rho_km = np.linalg.norm(rho, axis=-1)
    los = unit_vector_radec(col("ra_rad"), col("dec_rad"))
    miss_m = angle_between(los, rho) * rho_km * 1000.0
    res = {"residual_ra_rad": wrap_angle(col("ra_rad") - ra), "residual_dec_rad": col("dec_rad") - dec}
    # right ascension times cos(dec) and declination: two orthogonal angles on the sky
    rho_m, u = rho_km * 1000.0, rho / rho_km[:, None]
    hor = np.hypot(rho[:, 0], rho[:, 1]) * 1000.0
    zhat = np.broadcast_to([0.0, 0.0, 1.0], rho.shape)
    g = np.stack([np.stack([-rho[:, 1], rho[:, 0], np.zeros(m)], axis=-1) * 1000.0 / (hor * rho_m)[:, None],
                  (zhat - (rho[:, 2] / rho_km)[:, None] * u) / hor[:, None]], axis=1)
    jac = np.einsum("mkx,max->mka", g, _axes(r, v))
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
    axes = _axes(r, v)
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
