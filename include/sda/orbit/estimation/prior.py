"""Priors for the fit: the catalogue element set's state with the catalogue's modelled covariance.

:func:`prior_from_tle` evaluates an element set with SGP4 at a time (TEME) and gives it the covariance
of :mod:`sda.orbit.uncertainty` (the regime's literature sigmas grown with the element set's age,
diagonal in R, T, N), the covariance the pipeline screens with today. The ballistic coefficient's prior
is uninformative (:data:`B_PRIOR`, :data:`SIGMA_B_PRIOR`): a TLE's B* is a fitting parameter of SGP4's
own atmosphere, not a ballistic coefficient of another model.

The model's velocity block (``n sigma`` per axis, uncorrelated) leaves out what dominates an element
set's velocity error: an along-track error is mostly a time shift, which carries a radial velocity error
``-n dT`` (n the orbital rate). Without it a prior kilometres off along track is tens of sigmas off in
radial velocity, and a sparse arc (two passes of one radar) converged to a wrong minimum in the bench.
So the prior adds that coupling and is widened by :data:`PRIOR_INFLATION` (in sigma): a prior too
tight misleads the fit, one too wide only gives up a little of what the observations determine anyway.
"""

from __future__ import annotations

import numpy as np

from sda.orbit import frames, uncertainty
from sda.orbit.estimation.estimator import Prior
from sda.orbit.estimation.measurements import rtn_axes

#: A priori ballistic coefficient Cd A/m (m^2/kg) and its sigma: a Cd of 2.2 and an area-to-mass
#: ratio of 0.02 m^2/kg, give or take everything from dense payloads to light debris.
B_PRIOR, SIGMA_B_PRIOR = 0.05, 0.15
PRIOR_INFLATION = 2.0


def rtn_to_teme6(r: np.ndarray, v: np.ndarray) -> np.ndarray:
    """6x6 block rotation taking an R, T, N position/velocity covariance to the frame of ``r``/``v``."""
    basis = rtn_axes(np.asarray(r, float)[None], np.asarray(v, float)[None])[0].T  # columns R, T, N
    big = np.zeros((6, 6))
    big[:3, :3] = big[3:, 3:] = basis
    return big


def prior_from_tle(satrec, unix_s: float, b: float = B_PRIOR, sigma_b: float = SIGMA_B_PRIOR) -> Prior:
    """The element set at ``unix_s`` (TEME, m and m/s) with the catalogue's modelled covariance there."""
    jd, fr = frames.unix_to_jd(unix_s)
    err, r, v = satrec.sgp4(float(jd), float(fr))
    if err != 0:
        raise ValueError(f"SGP4 error {err} at {unix_s}")
    r, v = np.asarray(r) * 1000.0, np.asarray(v) * 1000.0
    hp, ha = frames.perigee_apogee_km(satrec)
    epoch = (satrec.jdsatepoch + satrec.jdsatepochF - frames.UNIX_EPOCH_JD) * 86400.0
    ref = uncertainty.tle_reference(epoch, hp, ha)
    big = rtn_to_teme6(r, v)
    cov_rtn = uncertainty.covariance_rtn6(ref, unix_s, r)
    n = uncertainty.orbital_rate(r)
    var_t = cov_rtn[1, 1]
    cov_rtn[3, 3] += n * n * var_t  # radial velocity of an along-track time shift
    cov_rtn[1, 3] = cov_rtn[3, 1] = -n * var_t
    cov = big @ (cov_rtn * PRIOR_INFLATION**2) @ big.T
    return Prior(float(unix_s), np.concatenate([r, v]), cov, b, sigma_b, "catalogue")
