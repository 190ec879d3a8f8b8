"""Predicting a fused orbit (sda.orbit.estimation.predict): the epoch's covariance comes back unchanged, it
grows afterwards, mostly along track, and a result becomes the next arc's prior."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from sda.orbit import frames
from sda.orbit.estimation import OdResult, ProcessNoise, ephemeris, predict, prior_from_result
from sda.orbit.estimation.prior import rtn_to_teme6

T0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc).timestamp()


def _result() -> OdResult:
    r = (frames.R_EARTH_KM + 500.0) * 1000.0
    speed = math.sqrt(3.986004418e14 / r)
    state = np.array([r, 0.0, 0.0, 0.0, speed * 0.6, speed * 0.8])
    cov = np.diag([25.0, 100.0, 25.0, 1e-4, 1e-4, 1e-4, 1e-6])
    return OdResult(T0, state, cov, 0.03, T0 - 6 * 3600.0, T0, {"radar": 100}, {"radar": 100}, 0, 1.0, 4,
                    "converged")


def test_epoch_covariance_unchanged_then_growing_along_track():
    result = _result()
    pred = predict(result, [T0, T0 + 3600.0, T0 + 86400.0])
    assert pred.covariance[0] == pytest.approx(result.covariance[:6, :6], rel=1e-6, abs=1e-9)
    assert pred.r_km[0] == pytest.approx(result.state[:3] / 1000.0, abs=1e-9)
    sig = [np.sqrt(np.trace(c[:3, :3])) for c in pred.covariance]
    assert sig[0] < sig[1] < sig[2]
    last = pred.covariance[2]
    rtn = rtn_to_teme6(pred.r_km[2], pred.v_kms[2]).T @ last @ rtn_to_teme6(pred.r_km[2], pred.v_kms[2])
    assert rtn[1, 1] > rtn[0, 0] and rtn[1, 1] > rtn[2, 2]  # along track dominates a day out
    # without process noise a day's growth is only the fit's own uncertainty mapped
    quiet = predict(result, [T0 + 86400.0], ProcessNoise(drag_fraction=0.0, accel_psd=0.0))
    assert np.trace(quiet.covariance[0][:3, :3]) < np.trace(last[:3, :3])


def test_ephemeris_grid_and_prior_from_result():
    result = _result()
    eph = ephemeris(result, T0, T0 + 1800.0, 600.0)
    assert eph.t.tolist() == [T0, T0 + 600.0, T0 + 1200.0, T0 + 1800.0]
    assert np.all(np.linalg.norm(eph.r_km, axis=1) > frames.R_EARTH_KM)
    prior = prior_from_result(result, T0 + 1200.0)
    assert prior.state[:3] / 1000.0 == pytest.approx(eph.r_km[2], abs=1e-6)
    assert prior.source == "fused" and prior.b == result.b
