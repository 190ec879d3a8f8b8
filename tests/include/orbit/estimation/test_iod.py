"""Initial orbit determination (sda.orbit.estimation.iod) against closed-form Keplerian orbits.

The oracle is written here, independently of the code under test: Kepler's equation solved by Newton's
method and the perifocal-to-inertial rotation, for an orbit of chosen elements. Gibbs and Herrick-Gibbs
are exact two-body formulas (Herrick-Gibbs to the order of its Taylor series), Gauss is refined with exact
Lagrange coefficients, and two-body + J2 propagation with J2 set to zero must follow Kepler."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sda.orbit.estimation import iod

MU = 3.986004418e14


def kepler(a, e, inc, raan, argp, m0, t):
    """Position and velocity (m, m/s) on a Keplerian orbit ``t`` seconds after mean anomaly ``m0``."""
    n = math.sqrt(MU / a**3)
    m = m0 + n * t
    ecc_anom = m
    for _ in range(60):
        ecc_anom -= (ecc_anom - e * math.sin(ecc_anom) - m) / (1 - e * math.cos(ecc_anom))
    nu = 2 * math.atan2(math.sqrt(1 + e) * math.sin(ecc_anom / 2), math.sqrt(1 - e) * math.cos(ecc_anom / 2))
    p = a * (1 - e * e)
    r = p / (1 + e * math.cos(nu))
    r_pf = np.array([r * math.cos(nu), r * math.sin(nu), 0.0])
    v_pf = np.array([-math.sin(nu), e + math.cos(nu), 0.0]) * math.sqrt(MU / p)

    def rz(x):
        return np.array([[math.cos(x), -math.sin(x), 0], [math.sin(x), math.cos(x), 0], [0, 0, 1]])

    def rx(x):
        return np.array([[1, 0, 0], [0, math.cos(x), -math.sin(x)], [0, math.sin(x), math.cos(x)]])

    q = rz(raan) @ rx(inc) @ rz(argp)
    return q @ r_pf, q @ v_pf


LEO = (7000e3, 0.01, 0.9, 0.3, 0.5, 0.2)
MEO = (26560e3, 0.005, 0.96, 1.0, 0.2, 2.0)


@pytest.mark.parametrize("elements", [LEO, MEO])
def test_herrick_gibbs_on_a_radar_pass(elements):
    times = (0.0, 60.0, 120.0)
    r = [kepler(*elements, t)[0] for t in times]
    v = iod.herrick_gibbs(*r, *times)
    assert np.linalg.norm(v - kepler(*elements, 60.0)[1]) < 0.05  # m/s: Taylor series error


@pytest.mark.parametrize("elements", [LEO, MEO])
def test_gibbs_on_positions_well_apart(elements):
    times = (0.0, 900.0, 1800.0)
    r = [kepler(*elements, t)[0] for t in times]
    assert np.linalg.norm(iod.gibbs(*r) - kepler(*elements, 900.0)[1]) < 1e-6


def test_gibbs_refuses_positions_out_of_one_plane():
    r = [kepler(*LEO, t)[0] for t in (0.0, 900.0, 1800.0)]
    r[2] = r[2] + np.array([0.0, 0.0, 800e3])
    with pytest.raises(iod.IodError, match="coplanar"):
        iod.gibbs(*r)


@pytest.mark.parametrize("spacing", [20.0, 120.0, 240.0])
def test_gauss_recovers_the_middle_state(spacing):
    """Three lines of sight from a rotating site under the orbit: the state to a metre and mm/s."""
    times = np.array([0.0, spacing, 2 * spacing])
    up = kepler(*LEO, spacing)[0]
    up = up / np.linalg.norm(up) * 6378e3
    sites = [up + np.array([-7.29e-5 * t * up[1], 7.29e-5 * t * up[0], 0.0]) for t in times]
    pos = [kepler(*LEO, t)[0] for t in times]
    los = [(p - s) / np.linalg.norm(p - s) for p, s in zip(pos, sites)]
    r2, v2 = iod.gauss(los, sites, times)
    r_true, v_true = kepler(*LEO, spacing)
    assert np.linalg.norm(r2 - r_true) < 1.0 and np.linalg.norm(v2 - v_true) < 1e-3


def test_lagrange_coefficients_match_kepler():
    r0, v0 = kepler(*LEO, 0.0)
    f, g = iod.lagrange_fg(r0, v0, 1500.0)
    assert np.linalg.norm(f * r0 + g * v0 - kepler(*LEO, 1500.0)[0]) < 1e-3


def test_two_body_propagation_both_ways(monkeypatch):
    monkeypatch.setattr(iod, "J2", 0.0)
    r0, v0 = kepler(*LEO, 0.0)
    out = iod.propagate_j2(0.0, np.concatenate([r0, v0]), [-3000.0, 5000.0, 5000.0, 0.0])
    assert np.linalg.norm(out[0, :3] - kepler(*LEO, -3000.0)[0]) < 1e-2
    assert np.linalg.norm(out[1, :3] - kepler(*LEO, 5000.0)[0]) < 1e-2
    assert np.array_equal(out[1], out[2]) and np.array_equal(out[3], np.concatenate([r0, v0]))


def test_implausible_answers_are_refused():
    with pytest.raises(iod.IodError, match="bound"):
        iod._check(np.array([7000e3, 0, 0]), np.array([0, 12e3, 0]))
    with pytest.raises(iod.IodError, match="surface"):
        iod._check(np.array([6500e3, 0, 0]), np.array([0, 5e3, 0]))
