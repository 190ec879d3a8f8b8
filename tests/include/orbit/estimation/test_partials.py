"""The transition matrix from two-body + J2 partials (sda.orbit.estimation.partials): the gravity gradient against
the point mass's closed form and the field's symmetry and zero trace (Laplace), and the chained RK4 steps against
central differences of an independent integration of the same two-body + J2 model (scipy's DOP853 in
sda.orbit.estimation.iod)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sda.orbit.estimation import iod, partials

MU = 3.986004418e14
T0 = 1.7956e9


def _positions() -> np.ndarray:
    return np.array([[6878e3, 0.0, 0.0], [3000e3, -4000e3, 4500e3], [-26560e3, 1000e3, 300e3], [0.0, 0.0, 7200e3]])


def test_without_j2_the_gradient_is_the_point_mass_closed_form(monkeypatch):
    monkeypatch.setattr(partials, "J2", 0.0)
    for r in _positions():
        rn = np.linalg.norm(r)
        u = r / rn
        expected = -MU / rn**3 * (np.eye(3) - 3.0 * np.outer(u, u))
        assert np.allclose(partials.gravity_gradient(r[None])[0], expected, rtol=1e-7, atol=1e-16)


def test_the_j2_gradient_is_symmetric_and_traceless():
    """A gravity field is the gradient of a potential (a symmetric Hessian) that solves Laplace's equation outside
    the Earth (zero trace); J2 moves the gradient by about 1e-3 of the point mass's."""
    grads = partials.gravity_gradient(_positions())
    scale = np.abs(grads).max(axis=(1, 2))
    assert np.all(np.abs(grads - grads.transpose(0, 2, 1)).max(axis=(1, 2)) < 1e-8 * scale)
    assert np.all(np.abs(np.trace(grads, axis1=1, axis2=2)) < 1e-8 * scale)
    point = -MU / np.linalg.norm(_positions()[0]) ** 3
    assert 1e-4 < abs(grads[0][2, 2] - point) / abs(point) < 1e-2


@pytest.mark.parametrize("radius_km, hours", [(6878.0, 6.0), (26560.0, 24.0)])
def test_chained_steps_match_differences_of_an_independent_integration(radius_km, hours):
    r = radius_km * 1e3
    i = math.radians(53.0)
    speed = math.sqrt(MU / r) * 1.01  # a little eccentric
    x0 = np.array([r, 0.0, 0.0, 0.0, speed * math.cos(i), speed * math.sin(i)])
    step = 60.0 if radius_km < 10000 else 300.0
    n = int(hours * 3600 / step)
    grid = T0 + step * np.arange(n + 1)
    nodes = iod.propagate_j2(T0, x0, grid)
    mids = iod.propagate_j2(T0, x0, grid[:-1] + step / 2)
    phi = partials.transition_matrices(nodes[:, :3], mids[:, :3], step)[-1]
    fd = np.empty((6, 6))
    for j in range(6):
        dx = np.zeros(6)
        dx[j] = 1.0 if j < 3 else 1e-3
        plus, minus = iod.propagate_j2(T0, x0 + dx, grid[-1:])[0], iod.propagate_j2(T0, x0 - dx, grid[-1:])[0]
        fd[:, j] = (plus - minus) / (2 * dx[j])
    for j in range(6):
        assert np.linalg.norm(phi[:, j] - fd[:, j]) < 2e-3 * np.linalg.norm(fd[:, j]), j
    assert np.abs(fd - np.eye(6)).max() > 10.0  # the orbit did move the matrix far from the identity


def test_the_first_matrix_is_the_identity_and_steps_compose():
    r = _positions()[:1] + np.array([[0.0, 1.0, 0.0]]) * np.arange(5)[:, None] * 1e5
    phis = partials.transition_matrices(r, 0.5 * (r[:-1] + r[1:]), 10.0)
    steps = partials.step_matrices(r, 0.5 * (r[:-1] + r[1:]), 10.0)
    assert np.array_equal(phis[0], np.eye(6))
    assert np.allclose(phis[3], steps[2] @ steps[1] @ steps[0], rtol=1e-14, atol=1e-14)


def test_a_parameters_forcing_gives_its_sensitivity():
    """A constant parameter's forcing ``g`` (d accel / d p) over 30 s, short against the orbit: the sensitivity is
    ``(g t^2 / 2, g t)`` to within the gravity gradient's share, ``G t^2 ~ 2e-3`` (hand-computed); the state's
    own block is the 6 x 6 matrix without forcing, and the seventh row stays the parameter's identity."""
    r = _positions()[:1] + np.array([[0.0, 1.0, 0.0]]) * np.arange(4)[:, None] * 7.6e4  # 3 steps of 10 s at 7.6 km/s
    mids = 0.5 * (r[:-1] + r[1:])
    g = np.array([2e-6, -1e-6, 5e-7])
    forcing = (np.repeat(g[None], len(r), axis=0), np.repeat(g[None], len(mids), axis=0))
    aug = partials.transition_matrices(r, mids, 10.0, forcing=forcing)
    plain = partials.transition_matrices(r, mids, 10.0)
    assert aug.shape == (4, 7, 7) and np.allclose(aug[:, :6, :6], plain, rtol=1e-14, atol=1e-14)
    assert np.array_equal(aug[-1, 6], np.eye(7)[6])
    t = 30.0
    assert np.linalg.norm(aug[-1, :3, 6] - 0.5 * g * t**2) < 1e-2 * np.linalg.norm(0.5 * g * t**2)
    assert np.linalg.norm(aug[-1, 3:6, 6] - g * t) < 1e-2 * np.linalg.norm(g * t)
