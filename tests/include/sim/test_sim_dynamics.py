"""The simulator's numerical truth (sda.sim.dynamics): a force model SGP4 does not share, sampled exactly."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from sda.orbit import frames
from sda.sim import dynamics

T0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc).timestamp()
MU = 3.986004418e14


def circular(alt_km: float, incl_deg: float, raan_deg: float = 30.0) -> np.ndarray:
    """A circular orbit's GCRF state (m, m/s), written by hand."""
    r = (frames.R_EARTH_KM + alt_km) * 1000.0
    i, o = math.radians(incl_deg), math.radians(raan_deg)
    pos = r * np.array([math.cos(o), math.sin(o), 0.0])
    speed = math.sqrt(MU / r)
    vel = speed * np.array([-math.sin(o) * math.cos(i), math.cos(o) * math.cos(i), math.sin(i)])
    return np.concatenate([pos, vel])


PARAMS = dynamics.BodyParams(cd=2.2, cr=1.3, area_to_mass=0.02)


@pytest.fixture(scope="module")
def leo():
    states = np.array([circular(450.0, 51.6), circular(800.0, 98.6, 120.0)])
    eph, last = dynamics.propagate([1, 2], states, T0, T0 + 3 * 3600.0, [PARAMS, PARAMS])
    return states, eph, last


def test_states_between_grid_times_are_exact(leo):
    """Interpolated against an integration that stops at the query time itself (same stops before it)."""
    states, eph, _ = leo
    k, extra = 40, 77.25
    at_k = dynamics.integrate(states, T0, k, [PARAMS, PARAMS])[:, k]
    direct = dynamics.integrate(at_k, T0 + k * dynamics.STEP_S, 1, [PARAMS, PARAMS], step=extra)[:, 1]
    when = T0 + k * dynamics.STEP_S + extra
    r_direct, v_direct = dynamics.gcrf_to_teme(direct[:, None, :], np.array([when]))
    err, r, v = eph.at([when])
    assert (err == 0).all()
    assert np.linalg.norm(r - r_direct, axis=-1).max() * 1000.0 < 0.05  # m: below 5 cm
    assert np.linalg.norm(v - v_direct, axis=-1).max() * 1000.0 < 1e-4  # m/s
    r_pairs, _ = eph.at_pairs([1, 0], [when, when])
    assert np.allclose(r_pairs, r[::-1, 0], atol=1e-9)


def test_frames_round_trip():
    state = circular(600.0, 97.0)
    r, v = dynamics.gcrf_to_teme(state[None, None, :], np.array([T0]))
    back = dynamics.teme_to_gcrf(r[:, 0], v[:, 0], T0)
    assert np.abs(back[0, :3] - state[:3]).max() < 1e-6 and np.abs(back[0, 3:] - state[3:]).max() < 1e-9
    # TEME and GCRF differ by precession since J2000 (~0.36 deg in 2026): km-sized at LEO radius
    assert 10.0 < np.linalg.norm(r[0, 0] * 1000.0 - state[:3]) / 1000.0 < 100.0


def test_outside_the_ephemeris_is_refused(leo):
    _, eph, _ = leo
    err, r, _ = eph.at([eph.t0 - 1.0, eph.t_end + 1.0])
    assert (err == 7).all() and np.isnan(r).all()


def test_drag_slows_a_light_body_more(leo):
    """Same start, ten times the area-to-mass: after three hours the light body has lost more energy
    (it ends lower, as drag does); the drag coefficient changes a LEO body's path and not a GEO one's."""
    states, _, _ = leo
    light = dynamics.BodyParams(cd=2.2, cr=1.3, area_to_mass=0.2)
    end = dynamics.integrate(np.array([states[0], states[0]]), T0, 90, [PARAMS, light])[:, -1]
    energy = [float(s[3:] @ s[3:] / 2.0 - MU / np.linalg.norm(s[:3])) for s in end]
    assert energy[1] < energy[0]
    geo = circular(35786.0, 0.05)
    low_cd, high_cd = dynamics.BodyParams(2.0, 1.3, 0.02), dynamics.BodyParams(2.6, 1.3, 0.02)
    far = dynamics.integrate(np.array([geo, geo]), T0, 30, [low_cd, high_cd])[:, -1]
    assert np.abs(far[0] - far[1]).max() == 0.0  # Cd only acts through drag
    near = dynamics.integrate(np.array([states[0], states[0]]), T0, 30, [low_cd, high_cd])[:, -1]
    assert np.linalg.norm(near[0, :3] - near[1, :3]) > 1.0


def test_the_truth_is_not_sgp4():
    """A body started on an element set's SGP4 state drifts away from that set's SGP4 trajectory."""
    from sgp4.api import WGS72, Satrec

    sat = Satrec.twoline2rv("1 25544U 98067A   26325.25000000  .00010000  00000-0  18000-3 0  9990",
                            "2 25544  51.6400 120.0000 0004000  80.0000 280.0000 15.50000000    07", WGS72)
    _, r, v = frames.propagate([sat], np.array([T0]))
    start = dynamics.teme_to_gcrf(r[:, 0], v[:, 0], T0)
    eph, _ = dynamics.propagate([25544], start, T0, T0 + 6 * 3600.0, [PARAMS])
    times = T0 + np.array([0.0, 6 * 3600.0])
    _, r_sgp4, _ = frames.propagate([sat], times)
    _, r_true, _ = eph.at(times)
    gap = np.linalg.norm(r_sgp4 - r_true, axis=-1)[0] * 1000.0
    assert gap[0] < 0.01 and gap[1] > 100.0


def test_extending_continues_the_same_trajectory(leo):
    states, eph, last = leo
    longer, _ = dynamics.propagate([1, 2], states, T0, T0 + 5 * 3600.0, [PARAMS, PARAMS])
    extended, _ = dynamics.extend(eph, last, [PARAMS, PARAMS], T0 + 5 * 3600.0)
    when = T0 + np.array([3.5, 4.9]) * 3600.0
    gap = np.linalg.norm(extended.at(when)[1] - longer.at(when)[1], axis=-1) * 1000.0
    assert gap.max() < 0.05


def test_each_body_draws_its_own_parameters():
    a = dynamics.draw_params([1, 2, 3], ["SAT A", "FENGYUN 1C DEB", "SL-16 R/B"], seed=1)
    b = dynamics.draw_params([3, 1], ["SL-16 R/B", "SAT A"], seed=1)
    assert b == [a[2], a[0]]  # the same body gets the same values whatever else is simulated
    assert dynamics.draw_params([1], ["SAT A"], seed=2) != a[:1]
    assert 0.02 <= a[1].area_to_mass <= 0.3 and 0.005 <= a[2].area_to_mass <= 0.015
    assert all(2.0 <= p.cd <= 2.6 and 1.0 <= p.cr <= 1.8 for p in a)
