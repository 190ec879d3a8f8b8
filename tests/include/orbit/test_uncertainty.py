"""sda.orbit.uncertainty: the position-uncertainty model behind the Pc covariance, against hand-computed values."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from sda.orbit import uncertainty as U

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize("perigee, apogee, regime", [
    (400.0, 420.0, "LEO"),
    (1999.0, 2100.0, "LEO"),
    (2000.0, 2100.0, "MEO"),  # perigee at the LEO limit: no longer LEO
    (20180.0, 20200.0, "MEO"),  # GNSS
    (35780.0, 35795.0, "GEO"),
    (33800.0, 37700.0, "GEO"),  # inside +-2,000 km of 35,786
    (33700.0, 35800.0, "MEO"),  # perigee just outside the GEO band
    (250.0, 35786.0, "HEO"),  # GTO: e = 35536 / 48792 = 0.73
    (600.0, 39800.0, "HEO"),  # Molniya-like
    (600.0, 5200.0, "LEO"),  # e = 4600 / 18556.3 = 0.248 < 0.25, perigee low
    (600.0, 5400.0, "HEO"),  # e = 4800 / 18756.3 = 0.256
])
def test_orbit_regime(perigee, apogee, regime):
    assert U.orbit_regime(perigee, apogee) == regime


def test_tle_reference_growth_by_hand():
    ref = U.tle_reference(T0, 500.0, 520.0)  # LEO: (100, 500, 200) m, (50, 1000, 50) m/day, 100 m/day^2
    assert ref.source == "tle" and ref.label == "tle/LEO" and ref.t_ref == T0.timestamp()
    np.testing.assert_allclose(U.sigma_rtn_m(ref, T0), [100.0, 500.0, 200.0])
    # 1.5 days later: R 100 + 75, T 500 + 1500 + 100 * 2.25, N 200 + 75
    t = T0 + dt.timedelta(days=1.5)
    np.testing.assert_allclose(U.sigma_rtn_m(ref, t), [175.0, 2225.0, 275.0])
    # growth with |t - t_ref|: 1.5 days *before* the epoch gives the same
    np.testing.assert_allclose(U.sigma_rtn_m(ref, T0 - dt.timedelta(days=1.5)), [175.0, 2225.0, 275.0])
    np.testing.assert_allclose(U.position_covariance_rtn(ref, t), np.diag([175.0**2, 2225.0**2, 275.0**2]))
    # unix seconds work as well as datetimes
    np.testing.assert_allclose(U.sigma_rtn_m(ref, t.timestamp()), [175.0, 2225.0, 275.0])


def test_geo_growth_is_linear():
    ref = U.tle_reference(T0, 35780.0, 35790.0)  # GEO: (500, 2000, 1000), (50, 500, 50), no quadratic
    np.testing.assert_allclose(U.sigma_rtn_m(ref, T0 + dt.timedelta(days=2)), [600.0, 3000.0, 1100.0])


def test_observed_reference_spreads_rms_in_regime_proportions():
    # LEO shape (100, 500, 200), |shape| = sqrt(300000) = 547.7226; rms 300 m
    last = T0 - dt.timedelta(hours=6)
    ref = U.observed_reference(last, 300.0, 500.0, 520.0)
    k = 300.0 / math.sqrt(300000.0)
    np.testing.assert_allclose(ref.sigma0_m, [100 * k, 500 * k, 200 * k])  # 54.77, 273.86, 109.54
    np.testing.assert_allclose(np.linalg.norm(ref.sigma0_m), 300.0)  # the 3-D RMS is preserved
    assert ref.source == "observed" and ref.t_ref == last.timestamp()
    # 6 hours (0.25 day) later: + (12.5, 250 + 6.25, 12.5)
    np.testing.assert_allclose(U.sigma_rtn_m(ref, T0), [100 * k + 12.5, 500 * k + 256.25, 200 * k + 12.5])


def test_observed_sigma_is_floored():
    ref = U.observed_reference(T0, 5.0, 500.0, 520.0)  # 5 m RMS: every axis below 10 m
    np.testing.assert_allclose(ref.sigma0_m, [10.0, 10.0, 10.0])
    ref = U.observed_reference(T0, 20.0, 500.0, 520.0)  # (3.65, 18.26, 7.30) -> (10, 18.26, 10)
    np.testing.assert_allclose(ref.sigma0_m, [10.0, 20.0 * 500 / math.sqrt(300000.0), 10.0])


def test_choose_reference():
    epoch = T0 - dt.timedelta(days=1)
    # observed after the epoch: observed
    assert U.choose_reference(epoch, 500, 520, T0, 80.0).source == "observed"
    # observed before the epoch (an older element set was measured): TLE
    assert U.choose_reference(epoch, 500, 520, epoch - dt.timedelta(hours=1), 80.0).source == "tle"
    # never observed, or no residual: TLE
    assert U.choose_reference(epoch, 500, 520).source == "tle"
    assert U.choose_reference(epoch, 500, 520, T0, None).source == "tle"
    assert U.choose_reference(epoch, 500, 520, T0, float("nan")).source == "tle"
    # naive datetimes are UTC
    naive = U.choose_reference(epoch.replace(tzinfo=None), 500, 520, T0.replace(tzinfo=None), 80.0)
    assert naive.t_ref == T0.timestamp()


def test_six_by_six_velocity_block():
    ref = U.tle_reference(T0, 500.0, 520.0)
    r = np.array([7000e3, 0.0, 0.0])
    n = math.sqrt(3.986004418e14 / 7000e3**3)  # 1.0780e-3 rad/s
    assert U.orbital_rate(r) == pytest.approx(n, rel=1e-15)
    C = U.covariance_rtn6(ref, T0, r)
    np.testing.assert_allclose(np.diag(C), [1e4, 2.5e5, 4e4, n * n * 1e4, n * n * 2.5e5, n * n * 4e4])
    assert np.count_nonzero(C - np.diag(np.diag(C))) == 0  # no correlations
    np.testing.assert_allclose(U.sigmas6(ref, T0, r), [100, 500, 200, 100 * n, 500 * n, 200 * n])
    with pytest.raises(ValueError):
        U.orbital_rate([0.0, 0.0, 0.0])
