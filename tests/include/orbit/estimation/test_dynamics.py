"""The estimator's dynamics (sda.orbit.estimation.dynamics): interpolated states against an integration
stopped at each time, the transition matrix and drag sensitivity against central differences, its
TEME rotation against the simulator's own conversion, and its force model not being the truth's."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from sda.orbit import frames
from sda.orbit.estimation import dynamics
from sda.sim import dynamics as truth

T0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc).timestamp()
MU = 3.986004418e14


def _leo() -> np.ndarray:
    r = (frames.R_EARTH_KM + 500.0) * 1000.0
    i = math.radians(97.4)
    speed = math.sqrt(MU / r)
    return np.array([r, 0.0, 0.0, 0.0, speed * math.cos(i), speed * math.sin(i)])


def test_interpolated_states_match_a_stopped_integration():
    bh = dynamics._brahe()
    x0 = _leo()
    times = T0 + np.array([37.0, 1000.5, 4321.0, 7199.9])
    traj = dynamics.propagate(T0, x0, 0.03, times)
    prop = bh.NumericalOrbitPropagator(dynamics.epoch(T0), x0, dynamics._config(False), dynamics._force(True),
                                       dynamics.params(0.03))
    for k, t in enumerate(times):
        prop.propagate_to(dynamics.epoch(t))
        direct = prop.current_state()
        assert np.linalg.norm(traj.x[k, :3] - direct[:3]) < 0.5  # m
        assert np.linalg.norm(traj.x[k, 3:] - direct[3:]) < 2e-3  # m/s


def test_transition_matrix_and_sensitivity_match_central_differences():
    x0 = _leo()
    t = [T0 + 3 * 3600.0]
    traj = dynamics.propagate(T0, x0, 0.03, t)
    for j, h in ((0, 10.0), (4, 0.01)):
        dx = np.zeros(6)
        dx[j] = h
        fd = (dynamics.propagate(T0, x0 + dx, 0.03, t).x[0] - dynamics.propagate(T0, x0 - dx, 0.03, t).x[0]) / (2 * h)
        assert np.linalg.norm(traj.phi[0][:, j] - fd) < 0.02 * np.linalg.norm(fd)
    fd = (dynamics.propagate(T0, x0, 0.031, t).x[0] - dynamics.propagate(T0, x0, 0.029, t).x[0]) / 0.002
    assert np.linalg.norm(traj.sens[0] - fd) < 0.02 * np.linalg.norm(fd)


@pytest.mark.parametrize("hours, worst", [(1.5, 5e-3), (6.0, 1.5e-2), (30.0, 0.25)])
def test_transition_matrix_and_sensitivity_against_brahes_variational_equations(hours, worst):
    """The partials (two-body + J2, sda.orbit.estimation.partials) and the drag- and SRP-forced sensitivity to B
    against brahe's variational equations of the whole force model, at a node: each column of Phi within ``worst``
    of its norm (the radial-velocity column, whose secular terms cancel, is the worst over 30 h), the large columns
    within 1 % over 30 h, the sensitivity within 1 %."""
    x0, b = _leo(), 0.03
    t = [T0 + hours * 3600.0]
    dynamics._LAST[0] = None
    ours = dynamics.propagate(T0, x0, b, t)
    ref = dynamics.brahe_variational(T0, x0, b, t)
    err = [np.linalg.norm(ours.phi[0][:, j] - ref.phi[0][:, j]) / np.linalg.norm(ref.phi[0][:, j]) for j in range(6)]
    assert max(err) < worst, err
    assert max(err[0], err[4], err[5]) < 1e-2, err
    assert np.linalg.norm(ours.sens[0] - ref.sens[0]) < 1e-2 * np.linalg.norm(ref.sens[0])


def test_j2_is_taken_about_the_earths_axis():
    """Against brahe's own two-body + J2 (JGM-3 degree 2, order 0, evaluated in ITRF) and its variational equations,
    over 30 h, for 550 km, 53 deg orbits whose nodes are spread around the sky: the large columns of the scheme's
    Phi along that model's states (position, along- and cross-track velocity) agree within 2 % about the Earth's
    axis (1.2 % measured: what is left is not understood, docs/performance.md, "Propagation"), and stray by more
    than 10 % for some node about GCRF's z axis (0.15 deg away in 2026: 18 % measured)."""
    bh = dynamics._brahe()
    force = bh.ForceModelConfig(gravity=bh.GravityConfiguration.spherical_harmonic(
        degree=2, order=0, model_type=bh.GravityModelType.JGM3), drag=None, srp=None, third_body=[],
        mass=bh.ParameterSource.parameter_index(0))
    worst = {"earth": 0.0, "gcrf": 0.0}
    for node in np.radians([0.0, 90.0, 180.0, 270.0]):
        r, i = (frames.R_EARTH_KM + 550.0) * 1000.0, math.radians(53.0)  # a Starlink-like shell
        speed = math.sqrt(MU / r)
        x0 = np.array([r, 0.0, 0.0, 0.0, speed * math.cos(i), speed * math.sin(i)])
        rot = np.array([[math.cos(node), -math.sin(node), 0.0], [math.sin(node), math.cos(node), 0.0], [0, 0, 1.0]])
        x0 = np.concatenate([rot @ x0[:3], rot @ x0[3:]])
        prop = bh.NumericalOrbitPropagator(dynamics.epoch(T0), x0, dynamics._config(True), force, dynamics.params(0.0))
        states = bh.NumericalOrbitPropagator(dynamics.epoch(T0), x0, dynamics._config(False), force,
                                             dynamics.params(0.0))
        xs = [x0]
        for k in range(1, 901):
            states.propagate_to(dynamics.epoch(T0 + 120.0 * k))
            xs.append(states.current_state())
        prop.propagate_to(dynamics.epoch(T0 + 108_000.0))
        ref = prop.stm()
        for name, pole in (("earth", dynamics.earth_axis(T0)), ("gcrf", None)):
            phi = dynamics._transition_matrices(np.array(xs), 120.0, pole)[-1]
            err = max(np.linalg.norm(phi[:, j] - ref[:, j]) / np.linalg.norm(ref[:, j]) for j in (0, 4, 5))
            worst[name] = max(worst[name], err)
    assert worst["earth"] < 2e-2 and worst["gcrf"] > 1e-1 and worst["gcrf"] > 5 * worst["earth"], worst


def test_a_repeated_propagation_is_the_integration_it_repeats():
    """The last propagation's nodes are reused for the same orbit, step and nodes (a window's pass tests,
    then its fit's first iteration), and for nothing else: each answer is what an integration of its own
    gives, whatever was propagated just before."""
    x0, b = _leo(), 0.03
    times = T0 + np.array([60.0, 300.0, 3000.0])

    def fresh(x, bb, variational=True, at=times):
        dynamics._LAST[0] = None
        return dynamics.propagate(T0, x, bb, at, variational=variational)

    first = fresh(x0, b)
    again = dynamics.propagate(T0, x0, b, times[::-1])  # same nodes, other order: reused
    assert np.array_equal(again.x[::-1], first.x) and np.array_equal(again.phi[::-1], first.phi)
    moved = x0 + np.array([0.0, 0.0, 0.0, 0.0, 0.01, 0.0])  # 1 cm/s faster
    for other, expected in ((dynamics.propagate(T0, moved, b, times), fresh(moved, b)),
                            (dynamics.propagate(T0, x0, 0.06, times), fresh(x0, 0.06)),
                            (dynamics.propagate(T0, x0, b, times, variational=False), fresh(x0, b, False)),
                            (dynamics.propagate(T0, x0, b, times[:2]), fresh(x0, b, at=times[:2]))):
        assert np.array_equal(other.x, expected.x) and np.array_equal(other.phi, expected.phi)
    assert np.linalg.norm(fresh(moved, b).x[2, :3] - first.x[2, :3]) > 10.0  # the orbits do differ (m)


def test_teme_rotation_is_the_simulators_conversion():
    r_km, v_kms = np.array([[7000.0, 100.0, 300.0]]), np.array([[0.1, 7.5, 0.5]])
    gcrf = truth.teme_to_gcrf(r_km, v_kms, T0)[0]
    rot = dynamics.teme_rotation([T0])[0]
    assert rot @ gcrf[:3] / 1000.0 == pytest.approx(r_km[0], abs=1e-9)
    assert rot @ gcrf[3:] / 1000.0 == pytest.approx(v_kms[0], abs=1e-12)


def test_force_model_is_not_the_truths():
    assert dynamics.GRAVITY_DEGREE < truth.GRAVITY_DEGREE
    assert "Harris-Priester" in dynamics.MODEL and "NRLMSISE" in truth.MODEL
    with pytest.raises(dynamics.PropagationError):
        low = _leo() * np.array([0.91, 1, 1, 1, 1, 1])  # starts below the surface's 80 km
        dynamics.propagate(T0, low, 0.03, [T0 + 600.0])
