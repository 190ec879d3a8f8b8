"""A fused orbit predicted to any time: TEME states with covariances that grow as the model errs.

:func:`predict` propagates an :class:`~sda.orbit.estimation.estimator.OdResult` with the estimator's force
model (:mod:`sda.orbit.estimation.dynamics`) to any times at or after its epoch; :func:`ephemeris` does it on a
regular grid (what screening, Pc and correlation read: position and covariance at arbitrary times, one
numerical propagation per object, interpolated exactly enough between nodes). The covariance is::

    C(t) = J(t) P J(t)^T  +  sigma_c^2 s(t) s(t)^T  +  Q(t)

* ``J(t)`` = d(state(t), B) / d(state, B at the epoch) (transition matrix and drag sensitivity), ``P`` the
  fit's 7x7 covariance: the uncertainty the observations left;
* ``sigma_c^2 s(t) s(t)^T``: the drag the fit cannot know ahead, a *consider* error of ``B``
  (``s`` the state's sensitivity to it since the epoch; ``sigma_c`` the body's share and the density forecast's,
  which the landed space weather grows in a storm: :meth:`~sda.orbit.estimation.noise.ProcessNoise.consider`),
  and ``Q(t)``, white acceleration noise mapped through the dynamics on an internal grid of at most
  :data:`NOISE_STEP_S`: the model error of
  :mod:`sda.orbit.estimation.noise`, whose constants (:class:`~sda.orbit.estimation.noise.ProcessNoise`) say how big.

Units: states TEME km and km/s (the pipeline's), covariances TEME in metres (m^2, m^2/s, m^2/s^2).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sda.orbit.estimation import dynamics
from sda.orbit.estimation.estimator import OdResult, Prior, _teme7
from sda.orbit.estimation.noise import ProcessNoise, accumulated

NOISE_STEP_S = 600.0


@dataclasses.dataclass
class Prediction:
    """Times [m] (unix s), TEME positions [m, 3] (km), velocities [m, 3] (km/s), covariances [m, 6, 6] (TEME, m);
    the density forecast's relative 1-sigma error [m] and the state's sensitivity to it [m, 6] (TEME, m and m/s
    per unit relative density error): the part of the covariance objects at one place and time share,
    ``density_sigma^2 G G^T`` (CARA's DCP values)."""

    t: np.ndarray
    r_km: np.ndarray
    v_kms: np.ndarray
    covariance: np.ndarray
    density_sigma: np.ndarray | None = None
    density_sensitivity: np.ndarray | None = None


def predict(result: OdResult, times, noise: ProcessNoise = ProcessNoise()) -> Prediction:
    """``result`` at ``times`` (unix s, each at or after its epoch), with the module docstring's covariance."""
    times = np.atleast_1d(np.asarray(times, float))
    t0 = float(result.epoch)
    rot0 = dynamics.teme_rotation([t0])[0]
    to_gcrf = _teme7(rot0).T
    x0 = to_gcrf @ np.append(result.state, result.b)
    p0 = to_gcrf @ result.covariance @ to_gcrf.T
    grid = np.arange(t0, max(times.max(), t0) + NOISE_STEP_S, NOISE_STEP_S)
    every = np.unique(np.concatenate([[t0], grid[grid < times.max()], times]))
    traj = dynamics.propagate(t0, x0[:6], x0[6], every)
    big = np.zeros((len(every), 6, 7))
    rots = dynamics.teme_rotation(every)
    big[:, :3, :3] = rots
    big[:, 3:, 3:6] = rots
    jac = traj.jac7  # [m, 6, 7]
    cov = jac @ p0 @ np.swapaxes(jac, 1, 2)
    cov += noise.consider(x0[6], traj.sens, t0, every)
    cov += accumulated(traj.phi, every, noise.psd(x0[:3]))
    rot6 = big[:, :, :6]
    cov_teme = rot6 @ cov @ np.swapaxes(rot6, 1, 2)
    r = np.einsum("mij,mj->mi", rots, traj.x[:, :3]) / 1000.0
    v = np.einsum("mij,mj->mi", rots, traj.x[:, 3:]) / 1000.0
    g = noise.density_scale(x0[6]) * np.einsum("mij,mj->mi", rot6, traj.sens)
    pick = np.searchsorted(every, times)
    return Prediction(times, r[pick], v[pick], cov_teme[pick], noise.density_sigma(t0, times), g[pick])


def ephemeris(result: OdResult, start: float, end: float, step_s: float = 60.0,
              noise: ProcessNoise = ProcessNoise()) -> Prediction:
    """:func:`predict` on the grid ``start, start + step_s, ... <= end`` (``start`` at or after the epoch)."""
    count = int(np.floor((float(end) - float(start)) / float(step_s) + 1e-9))
    return predict(result, float(start) + float(step_s) * np.arange(count + 1), noise)


def prior_from_result(result: OdResult, unix_s: float, noise: ProcessNoise = ProcessNoise()) -> Prior:
    """The previous fused estimate as the next arc's prior at ``unix_s`` (its covariance grown to then)."""
    return prior_from_prediction(result, predict(result, [unix_s], noise), 0)


def prior_from_prediction(result: OdResult, pred: Prediction, k: int) -> Prior:
    """:func:`prior_from_result` at ``pred.t[k]`` from a prediction of ``result`` already made (one
    propagation of the prior orbit serves the prior and the window's pass tests alike)."""
    state = np.concatenate([pred.r_km[k], pred.v_kms[k]]) * 1000.0
    return Prior(float(pred.t[k]), state, pred.covariance[k], result.b, result.sigma_b, "fused")
