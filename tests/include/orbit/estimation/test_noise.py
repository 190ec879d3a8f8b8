"""The drag consider term and the landed space weather (sda.orbit.estimation.noise): quiet, it is the B error
it always was; a storm the pipeline has landed grows it; the density's share of a prediction is what a
change of the density does to the numerically propagated orbit."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from sda.orbit import frames
from sda.orbit.estimation import OdResult, predict
from sda.orbit.estimation.noise import ProcessNoise, SpaceWeather

H = 3600.0
T0 = 1_795_000_000.0 - 1_795_000_000.0 % (3 * H)  # a 3-hour boundary


def _weather(kps) -> SpaceWeather:
    start = T0 + 3 * H * np.arange(len(kps))
    return SpaceWeather(tuple(start), tuple(start + 3 * H), tuple(float(k) for k in kps))


def test_kp_max_over_the_intervals_a_prediction_crosses():
    w = _weather([2.0, 1.0, 7.0, 3.0])  # the storm in [T0 + 6 h, T0 + 9 h)
    got = w.kp_max(T0 + 1 * H, [T0 + 2 * H, T0 + 5 * H, T0 + 6 * H, T0 + 20 * H])
    assert got.tolist() == [2.0, 2.0, 7.0, 7.0]
    assert w.kp_max(T0 + 9.5 * H, [T0 + 10 * H]).tolist() == [3.0]  # after the storm
    assert np.isnan(SpaceWeather().kp_max(T0, [T0 + H])).all()


def test_a_storm_observed_persists_over_a_quiet_forecast_for_a_day():
    # observed 2, 6 (the newest observed), then a forecast of 1 for two days
    kps = [2.0, 6.0] + [1.0] * 16
    start = T0 + 3 * H * np.arange(len(kps))
    w = SpaceWeather(tuple(start), tuple(start + 3 * H), tuple(kps), (True, True) + (False,) * 16)
    got = w.effective_kp()
    assert got[:2].tolist() == [2.0, 6.0]
    assert got[2:10].tolist() == [6.0] * 8  # the 24 hours after the newest observed interval
    assert got[10:].tolist() == [1.0] * 8
    assert w.kp_max(T0 + 7 * H, [T0 + 8 * H]).tolist() == [6.0]  # the forecast hour says 1, persistence 6
    assert w.kp_max(T0 + 31 * H, [T0 + 40 * H]).tolist() == [1.0]  # a day on, the forecast again


def test_from_frame_reads_the_landed_intervals():
    frame = pd.DataFrame({"interval_start": pd.to_datetime([T0, T0 + 3 * H], unit="s", utc=True),
                          "interval_end": pd.to_datetime([T0 + 3 * H, T0 + 6 * H], unit="s", utc=True),
                          "kp": [2.333, 5.667]})
    w = SpaceWeather.from_frame(frame)
    assert w.start == (T0, T0 + 3 * H) and w.end == (T0 + 3 * H, T0 + 6 * H) and w.kp == (2.333, 5.667)
    assert SpaceWeather.from_frame(frame.iloc[:0]) is None


def test_quiet_consider_is_the_b_error_and_a_storm_grows_the_density_share():
    sens = np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1e4, 2e5, 0.0, 1.0, 20.0, 0.0]])
    quiet = ProcessNoise()
    b = 0.02  # under the floor: 0.05 applies
    expected = (0.4 * 0.05) ** 2 * np.outer(sens[1], sens[1])
    assert quiet.consider(b, sens, T0, [T0, T0 + H])[1] == pytest.approx(expected, rel=1e-12)
    # Kp 5 landed: the density's share goes from 0.2 to 0.2 + 0.3 * (5 - 3) = 0.8
    stormy = dataclasses.replace(quiet, weather=_weather([5.0, 5.0]))
    rho = stormy.density_sigma(T0 + 4 * H, [T0 + 5 * H])
    assert rho.tolist() == pytest.approx([0.8])
    got = stormy.consider(0.1, sens[1:], T0 + 4 * H, [T0 + 5 * H])[0]
    assert got == pytest.approx((0.4**2 - 0.2**2 + 0.8**2) * 0.1**2 * np.outer(sens[1], sens[1]), rel=1e-12)
    # no drag error at all: nothing, storm or not
    assert not dataclasses.replace(stormy, drag_fraction=0.0).consider(0.1, sens, T0, [T0, T0 + H]).any()


def _leo() -> OdResult:
    r = (frames.R_EARTH_KM + 400.0) * 1000.0
    speed = math.sqrt(3.986004418e14 / r)
    state = np.array([r, 0.0, 0.0, 0.0, speed * 0.6, speed * 0.8])
    cov = np.diag([25.0, 100.0, 25.0, 1e-4, 1e-4, 1e-4, 1e-6])
    return OdResult(T0, state, cov, 0.08, T0 - 6 * H, T0, {"radar": 100}, {"radar": 100}, 0, 1.0, 4, "converged")


def test_density_sensitivity_is_what_a_denser_atmosphere_does_to_the_orbit():
    result = _leo()
    t = [T0 + 12 * H]
    pred = predict(result, t)
    denser = predict(dataclasses.replace(result, b=result.b * 1.01), t)  # 1 % more drag
    moved = np.r_[denser.r_km[0] - pred.r_km[0], denser.v_kms[0] - pred.v_kms[0]] * 1000.0
    assert np.linalg.norm(moved[:3]) > 5.0  # metres: a real effect
    assert pred.density_sensitivity[0] * 0.01 == pytest.approx(moved, rel=0.02, abs=1e-3)
    assert pred.density_sigma.tolist() == [0.2]
