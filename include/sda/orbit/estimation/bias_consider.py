"""What the sensors' biases leave in a fit: a consider covariance for each sensor's remaining bias.

A least-squares fit averages its observations' noise down as their number grows; a sensor's bias it does not:
every observation of that sensor carries the same offset, and the orbit moves by the estimate's response to it,
``dx = P H^T W 1 b`` (``P`` the fit's covariance, ``H`` the Jacobian of the sensor's rows, ``W`` their
weights). Radar angles off by 0.006 deg put an object 100 m off across track at 1,000 km, whatever the
number of observations; a formal covariance from the noise alone then claims metres. So each sensor's bias
on each quantity, and its time tag, is a *consider* parameter of 1-sigma ``sigma_b`` (not estimated by the
fit, its uncertainty carried): the fit's covariance gains ``sum g g^T`` over sensors and quantities, with
``g = P H^T W d sigma_b`` (``d`` the effect of a unit bias on each row: 1, ``1/cos(dec)`` for a right
ascension on the sky, the measurement's rate for a time tag).

``sigma_b`` (:data:`NOMINAL`): what a sensor's calibration is assumed to hold to without a calibration of
its own -- radar range 15 m, radar angles 0.006 deg, optical angles 1 arcsec, time tags 1 ms (radar),
5 ms (optical), 0.2 ms (ISL). These are the simulator's harsher sky's spreads of sensor biases
(:mod:`sda.sim.sky`): calibration on the simulator, not a measurement of real sensors. A quantity the
pipeline calibrated (:mod:`sda.orbit.estimation.calibration`, a nonzero applied ``cal_<quantity>``) keeps
:data:`CALIBRATED` of it: the calibration's residual error and the bias's drift since.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sda.orbit.estimation.calibration import ARCSEC, DEG, QUANTITIES, TIME, measurement_rates
from sda.orbit.estimation.measurements import models

#: per sensor kind, the 1-sigma of an uncalibrated bias, in the calibration's units (m, deg, arcsec, ms)
NOMINAL = {"radar": {"range_m": 15.0, "az_deg": 0.006, "el_deg": 0.006, TIME: 1.0},
           "optical": {"ra_arcsec": 1.0, "dec_arcsec": 1.0, TIME: 5.0},
           "isl": {TIME: 0.2}}
CALIBRATED = 0.3  # the share of the nominal sigma a calibrated quantity keeps
UNITS = {"range_m": 1.0, "az_deg": DEG, "el_deg": DEG, "ra_arcsec": ARCSEC, "dec_arcsec": ARCSEC}


def _calibrated(obs: pd.DataFrame, name: str) -> np.ndarray:
    col = f"cal_{name}"
    return (obs[col].fillna(0.0).to_numpy(float) != 0.0) if col in obs else np.zeros(len(obs), bool)


def _rates(kind: str, obs: pd.DataFrame, t: np.ndarray, x_teme: np.ndarray, light_time: bool) -> np.ndarray:
    """[m, k] d(measurement)/dt along the fitted two-body arc (units per second)."""
    return measurement_rates(models(light_time)[kind], x_teme, t, obs)


def _effects(kind: str, obs: pd.DataFrame, rates: np.ndarray, k: int):
    """(name, [m, k] effect of the bias on each measurement component, [m] whether calibrated) per quantity."""
    out = []
    for name, j, unit in QUANTITIES.get(kind, ()):
        d = np.zeros((len(obs), k))
        d[:, j] = unit
        if name == "ra_arcsec":  # on the sky: the right ascension moves 1/cos(dec) as much
            d[:, j] /= np.maximum(np.cos(obs["dec_rad"].to_numpy(float)), 1e-3)
        out.append((name, d, _calibrated(obs, name)))
    out.append((TIME, rates / 1000.0, _calibrated(obs, TIME)))  # per ms
    return out


def consider(blocks, lin, accepted, p: np.ndarray, x_teme: np.ndarray, light_time: bool,
             nominal=None) -> np.ndarray:
    """The 7x7 consider covariance (the fit's solve-for space) of the sensors' biases.

    ``blocks``, ``lin`` (whitened residuals and Jacobians per block), ``accepted`` (the rows outlier editing
    kept, per block): the estimator's; ``p``: the fit's 7x7 covariance (the inverse of its information);
    ``x_teme`` [times, 6]: the fitted TEME states (m, m/s) at the fit's times; ``nominal``: per kind and
    quantity, the 1-sigma of an uncalibrated bias (default :data:`NOMINAL`)."""
    nominal = NOMINAL if nominal is None else nominal
    total = np.zeros((7, 7))
    for block, (z, h), ok in zip(blocks, lin, accepted):
        sigmas = nominal.get(block.kind)
        if not sigmas or not np.any(ok):
            continue
        use = np.isfinite(z) & ok[:, None]
        x = x_teme[block.index]
        rates = _rates(block.kind, block.obs, block.t, x, light_time) if TIME in sigmas else np.zeros_like(z)
        sensors = block.obs["sensor_id"].astype(str).to_numpy()
        for name, d, calibrated in _effects(block.kind, block.obs, rates, z.shape[1]):
            if name not in sigmas:
                continue
            sig = sigmas[name] * np.where(calibrated, CALIBRATED, 1.0)
            dz = np.where(use, np.nan_to_num(d) * sig[:, None] / block.sigma, 0.0)  # whitened, per row
            for sid in np.unique(sensors[ok]):
                rows = sensors == sid
                g = p @ np.einsum("mkj,mk->j", h[rows], dz[rows])
                total += np.outer(g, g)
    return total
