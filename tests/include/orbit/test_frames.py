"""sda.orbit.frames against independent values: published GMST, sgp4's own gstime, Vallado's TEME->ECEF
example, and hand-worked topocentric geometry."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from sgp4.propagation import gstime

from sda.orbit import frames

J2000_UNIX = (2451545.0 - 2440587.5) * 86400.0  # 2000-01-01 12:00 UT


def test_gmst_at_j2000():
    assert np.rad2deg(frames.gmst(J2000_UNIX)) == pytest.approx(280.46061837, abs=1e-8)


@pytest.mark.parametrize("unix_s", [0.0, 9.5e8, 1.2e9, 1.7e9, 1.795e9 + 0.123])
def test_gmst_agrees_with_sgp4_gstime(unix_s):
    jd = unix_s / 86400.0 + 2440587.5
    assert float(frames.gmst(unix_s)) == pytest.approx(gstime(jd), abs=1e-9)


def test_vallado_teme_to_ecef():
    # Vallado, "Revisiting Spacetrack Report #3" (AIAA 2006-6753), TEME -> ITRF example.
    t = dt.datetime(2004, 4, 6, 7, 51, 28, 386009, tzinfo=dt.timezone.utc).timestamp()
    dut1 = -0.4399619
    r_teme = np.array([5094.18016210, 6127.64465950, 6380.34453270])
    v_teme = np.array([-4.746131487, 0.785818041, 5.531931288])
    r, v = frames.teme_to_ecef(r_teme, v_teme, t + dut1)
    expected_r = np.array([-1033.4793830, 7901.2952754, 6380.3565958])
    expected_v = np.array([-3.225636520, -2.872451450, 5.531924446])
    assert np.linalg.norm(r - expected_r) < 0.020  # km: polar motion (~10 m) is neglected
    assert np.linalg.norm(v - expected_v) < 2e-5  # km/s
    # and back
    r2, v2 = frames.ecef_to_teme(r, v, t + dut1)
    assert np.allclose(r2, r_teme, atol=1e-9) and np.allclose(v2, v_teme, atol=1e-12)


def test_geodetic_equator_and_pole():
    assert np.allclose(frames.geodetic_to_ecef(0.0, 0.0, 0.0), [6378.137, 0.0, 0.0], atol=1e-9)
    # polar radius b = a (1 - f) = 6356.752314245 km
    assert np.allclose(frames.geodetic_to_ecef(90.0, 0.0, 0.0), [0.0, 0.0, 6356.752314245], atol=1e-6)
    assert np.allclose(frames.geodetic_to_ecef(0.0, 90.0, 1000.0), [0.0, 6379.137, 0.0], atol=1e-9)


def test_razel_overhead():
    lat, lon = 35.0, -106.0
    site = frames.geodetic_to_ecef(lat, lon, 0.0)
    up = np.array([np.cos(np.radians(lat)) * np.cos(np.radians(lon)),
                   np.cos(np.radians(lat)) * np.sin(np.radians(lon)), np.sin(np.radians(lat))])
    rng, az, el, rr = frames.razel(site + 500.0 * up, 1.5 * up, lat, lon, 0.0)
    assert float(rng) == pytest.approx(500.0, abs=1e-9)
    assert np.rad2deg(float(el)) == pytest.approx(90.0, abs=1e-6)
    assert float(rr) == pytest.approx(1.5, abs=1e-12)  # moving straight up, receding


def test_razel_due_north_on_the_horizon():
    # from the equator at longitude 0, a point displaced along +z (local north) is at az 0, el 0
    site = frames.geodetic_to_ecef(0.0, 0.0, 0.0)
    rng, az, el, _ = frames.razel(site + np.array([0.0, 0.0, 1000.0]), np.zeros(3), 0.0, 0.0, 0.0)
    assert float(rng) == pytest.approx(1000.0)
    assert np.rad2deg(float(el)) == pytest.approx(0.0, abs=1e-9)
    assert min(np.rad2deg(float(az)), 360.0 - np.rad2deg(float(az))) == pytest.approx(0.0, abs=1e-9)
    # due east on the horizon: +y at longitude 0
    _, az, el, _ = frames.razel(site + np.array([0.0, 1000.0, 0.0]), np.zeros(3), 0.0, 0.0, 0.0)
    assert np.rad2deg(float(az)) == pytest.approx(90.0, abs=1e-9)
    assert np.rad2deg(float(el)) == pytest.approx(0.0, abs=1e-9)


def test_razel_inverse_round_trip():
    r = frames.razel_to_ecef(1234.5, np.radians(123.0), np.radians(34.0), 52.0, 174.0, 70.0)
    rng, az, el, _ = frames.razel(r, np.zeros(3), 52.0, 174.0, 70.0)
    assert (float(rng), np.rad2deg(float(az)), np.rad2deg(float(el))) == pytest.approx((1234.5, 123.0, 34.0))


def test_radec_of_a_far_point_along_x():
    ra, dec = frames.radec(np.array([1.0e12, 0.0, 0.0]), 40.0, -70.0, 0.0, 1.7e9)
    assert min(float(ra), 2 * np.pi - float(ra)) == pytest.approx(0.0, abs=1e-8)
    assert float(dec) == pytest.approx(0.0, abs=1e-8)
    _, dec = frames.radec(np.array([0.0, 0.0, 1.0e12]), 40.0, -70.0, 0.0, 1.7e9)
    assert np.rad2deg(float(dec)) == pytest.approx(90.0, abs=1e-6)


def test_sun_direction_at_equinox_and_solstice():
    # March equinox 2024-03-20 03:06 UTC: Sun at RA ~0, dec ~0; June solstice 2024-06-20 20:51 UTC: dec +23.44
    eq = dt.datetime(2024, 3, 20, 3, 6, tzinfo=dt.timezone.utc).timestamp()
    s = frames.sun_direction(eq)
    assert np.rad2deg(np.arcsin(s[2])) == pytest.approx(0.0, abs=0.02)
    assert s[0] > 0.999
    sol = dt.datetime(2024, 6, 20, 20, 51, tzinfo=dt.timezone.utc).timestamp()
    assert np.rad2deg(np.arcsin(frames.sun_direction(sol)[2])) == pytest.approx(23.44, abs=0.02)


def test_earth_shadow():
    t = 1.7e9
    s = frames.sun_direction(t)
    assert bool(frames.in_earth_shadow(-7000.0 * s, t))  # behind the Earth
    assert not bool(frames.in_earth_shadow(7000.0 * s, t))  # sunward
    side = np.cross(s, [0.0, 0.0, 1.0])
    side /= np.linalg.norm(side)
    assert not bool(frames.in_earth_shadow(-7000.0 * s + 7000.0 * side, t))  # off to the side, outside the cylinder


def test_propagate_pairs_evaluates_each_satellite_at_its_own_times():
    """Each pair against sgp4's own scalar ``Satrec.sgp4`` (the oracle), in any order of pairs, and
    NaN where SGP4 fails (an orbit that has decayed by then)."""
    from sgp4.api import Satrec, jday

    from sda.orbit.screening import satrecs_from_lines, tle_from_elements

    epoch = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
    lines = [tle_from_elements(1, epoch, 700.0, 0.001, 98.0, 10.0, 0.0, 0.0),
             tle_from_elements(2, epoch, 35786.0, 0.0002, 0.05, 0.0, 0.0, 120.0),
             tle_from_elements(3, epoch, 200.0, 0.0001, 51.6, 0.0, 0.0, 0.0, bstar=0.05)]  # decays within days
    sats = satrecs_from_lines(*zip(*lines))
    index = np.array([2, 0, 1, 0, 2, 1, 0])
    t = epoch.timestamp() + np.array([60.0, 5.5, 3600.0, -120.25, 30 * 86400.0, 7200.0, 0.0])
    r, v = frames.propagate_pairs(sats, index, t)
    for p, (k, when) in enumerate(zip(index, t)):
        moment = dt.datetime.fromtimestamp(when, dt.timezone.utc)
        jd, fr = jday(*moment.timetuple()[:5], moment.second + moment.microsecond / 1e6)
        err, r_ref, v_ref = Satrec.twoline2rv(*lines[k]).sgp4(jd, fr)
        if err:
            assert np.isnan(r[p]).all() and np.isnan(v[p]).all()
        else:
            np.testing.assert_allclose(r[p], r_ref, atol=1e-6)  # km: the same C++ code, times split differently
            np.testing.assert_allclose(v[p], v_ref, atol=1e-9)
    assert np.isnan(r[4]).all() and np.isfinite(r[0]).all()  # the low orbit: fine after a minute, gone in 30 days
