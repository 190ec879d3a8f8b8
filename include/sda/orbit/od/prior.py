"""Priors for the fit: the catalogue element set's state with the catalogue's modelled covariance.

:func:`prior_from_tle` evaluates an element set with SGP4 at a time (TEME) and gives it the covariance
of :mod:`sda.orbit.uncertainty` (the regime's literature sigmas grown with the element set's age,
diagonal in R, T, N), the covariance the pipeline screens with today. The ballistic coefficient's prior
is uninformative (:data:`B_PRIOR`, :data:`SIGMA_B_PRIOR`): a TLE's B* is a fitting parameter of SGP4's
own atmosphere, not a ballistic coefficient of another model.
"""

from __future__ import annotations

import numpy as np

from sda.orbit import frames, uncertainty
from sda.orbit.od.estimator import Prior

#: A priori ballistic coefficient Cd A/m (m^2/kg) and its sigma: a Cd of 2.2 and an area-to-mass
#: ratio of 0.02 m^2/kg, give or take everything from dense payloads to light debris.
B_PRIOR, SIGMA_B_PRIOR = 0.05, 0.3


def rtn_to_teme6(r: np.ndarray, v: np.ndarray) -> np.ndarray:
    """6x6 block rotation taking an R, T, N position/velocity covariance to the frame of ``r``/``v``."""
    radial = r / np.linalg.norm(r)
    cross = np.cross(r, v)
    cross = cross / np.linalg.norm(cross)
    basis = np.stack([radial, np.cross(cross, radial), cross], axis=1)
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
    cov = big @ uncertainty.covariance_rtn6(ref, unix_s, r) @ big.T
    return Prior(float(unix_s), np.concatenate([r, v]), cov, b, sigma_b, "catalogue")
