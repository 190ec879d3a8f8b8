"""The catalogue prior (sda.orbit.estimation.prior): the element set's SGP4 state and the catalogue's modelled
sigmas, widened, with the radial velocity an along-track error carries."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sgp4.api import Satrec

from sda.orbit import frames
from sda.orbit.estimation.prior import PRIOR_INFLATION, prior_from_tle, rtn_to_teme6

# the ISS element set of python-sgp4's README
L1 = "1 25544U 98067A   19343.69339541  .00001764  00000-0  38792-4 0  9991"
L2 = "2 25544  51.6439 211.2001 0007417  17.6667  85.6398 15.50103472202482"


def test_catalogue_prior():
    sat = Satrec.twoline2rv(L1, L2)
    epoch = (sat.jdsatepoch + sat.jdsatepochF - frames.UNIX_EPOCH_JD) * 86400.0
    t = epoch + 2.0 * 86400.0
    prior = prior_from_tle(sat, t)
    jd, fr = frames.unix_to_jd(t)
    _, r, v = sat.sgp4(float(jd), float(fr))
    assert prior.state == pytest.approx(np.concatenate([r, v]) * 1000.0, abs=1e-6)
    big = rtn_to_teme6(prior.state[:3], prior.state[3:])
    rtn = big.T @ prior.covariance @ big
    # LEO after two days (sda.orbit.uncertainty.REGIMES): R 100 + 50 x 2, T 500 + 1000 x 2 + 100 x 4, N 200 + 50 x 2
    sig = np.sqrt(np.diag(rtn)[:3]) / PRIOR_INFLATION
    assert sig == pytest.approx([200.0, 2900.0, 300.0], rel=1e-9)
    n = math.sqrt(3.986004418e14 / np.linalg.norm(prior.state[:3]) ** 3)
    # an along-track error dT is a time shift: radial velocity -n dT, fully correlated with it
    assert rtn[1, 3] == pytest.approx(-n * 2900.0**2 * PRIOR_INFLATION**2, rel=1e-9)
    assert rtn[1, 3] / math.sqrt(rtn[1, 1] * rtn[3, 3]) < -0.99
