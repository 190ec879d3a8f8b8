"""The estimator's transition matrix from the partials of two-body + J2 gravity, integrated along its trajectory.

A batch fit, a manoeuvre test and a covariance prediction need ``Phi(t) = dx(t)/dx(t0)`` at many times. brahe's
variational equations differentiate its whole force model by central differences at every integrator stage: 9-13
times the cost of the state alone (``bench/propagation.py``). A Jacobian needs far less accuracy than a
trajectory, so the estimator takes its partials from the force that dominates them: two-body + J2
(:func:`accel_j2`), along the trajectory the full force model integrates (:mod:`sda.orbit.estimation.dynamics`).
J2 is taken about the Earth's axis (``pole``): about GCRF's z axis, 0.15 deg away in 2026, the transition matrix
of a LEO orbit strays by up to 4 % over 30 hours. What the partials leave out, relative to the full model's: the
higher harmonics (1e-6 of gravity's gradient), drag's dependence on the state (its gradient is some 1e-5 of
gravity's at 400 km) and the Sun and Moon (tidal gradients 1e-7 of gravity's). The error of the whole scheme
against brahe's full variational equations is tested (``tests/include/orbit/estimation``) and measured by
``bench/propagation.py``.

A constant parameter ``p`` of the force (the ballistic coefficient) joins the state: ``d s/dt = A s + d accel/d p``
for ``s = dx/dp``, the same linear system with the parameter's forcing in a seventh column (:func:`_system`).

The linear system ``dPhi/dt = A(t) Phi``, ``A = [[0, I], [G(r), 0]]`` with ``G = d accel / d r``, is integrated by
one classical Runge-Kutta step per node interval, every interval at once (the intervals are independent), and
the products chained: ``Phi(t_k+1) = M_k Phi(t_k)``. RK4's error per 120 s step in LEO is about ``(n h)^5 / 120``,
4e-7: some 1e-4 over a day of steps.
"""

from __future__ import annotations

import numpy as np

from sda.orbit import frames

J2 = 1.0826267e-3
MU_M3_S2 = frames.MU_KM3_S2 * 1e9
RE_M = frames.R_EARTH_KM * 1e3
#: the position offset (m) of the central differences of :func:`accel_j2` (an analytic, vectorised function:
#: its truncation error (h / r)^2 is 1e-14, its rounding some 1e-9 of the gradient)
GRADIENT_STEP_M = 1.0


def accel_j2(r: np.ndarray, pole: np.ndarray | None = None) -> np.ndarray:
    """[m, 3] two-body + J2 acceleration (m/s^2) at positions ``r`` [m, 3] (m, an Earth-centred inertial frame).
    ``pole``: the rotation [3, 3] from that frame to one whose z axis is the Earth's (GCRF to ITRF at the epoch:
    the J2 term is symmetric about the Earth's axis, which is 0.15 deg from GCRF's z in 2026); none: that
    frame's own z axis."""
    if pole is not None:
        return accel_j2(np.asarray(r, float) @ pole.T) @ pole
    rn = np.linalg.norm(r, axis=1)
    z2 = (r[:, 2] / rn) ** 2
    k = 1.5 * J2 * (RE_M / rn) ** 2
    f = np.stack([1.0 + k * (1.0 - 5.0 * z2), 1.0 + k * (1.0 - 5.0 * z2), 1.0 + k * (3.0 - 5.0 * z2)], axis=1)
    return -MU_M3_S2 * r / rn[:, None] ** 3 * f


def gravity_gradient(r: np.ndarray, pole: np.ndarray | None = None) -> np.ndarray:
    """[m, 3, 3] ``d accel_j2 / d r`` at positions ``r`` [m, 3]: column ``j`` by a central difference along axis
    ``j``."""
    r = np.asarray(r, float)
    out = np.empty((len(r), 3, 3))
    for j in range(3):
        dr = np.zeros(3)
        dr[j] = GRADIENT_STEP_M
        out[:, :, j] = (accel_j2(r + dr, pole) - accel_j2(r - dr, pole)) / (2.0 * GRADIENT_STEP_M)
    return out


def _system(r: np.ndarray, pole: np.ndarray | None, forcing: np.ndarray | None = None) -> np.ndarray:
    """[m, 6, 6] ``A = [[0, I], [G(r), 0]]``; with ``forcing`` [m, 3] (``d accel / d p`` of a constant parameter
    ``p``), [m, 7, 7] the system of the state augmented by ``p``: its last column holds the forcing."""
    n = 6 if forcing is None else 7
    a = np.zeros((len(r), n, n))
    a[:, :3, 3:6] = np.eye(3)
    a[:, 3:6, :3] = gravity_gradient(r, pole)
    if forcing is not None:
        a[:, 3:6, 6] = forcing
    return a


def step_matrices(r_nodes: np.ndarray, r_mid: np.ndarray, step: float, pole: np.ndarray | None = None,
                  forcing: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """[n, 6, 6] each interval's transition ``Phi(t_k+1, t_k)`` by one RK4 step, from the positions at the ``n + 1``
    nodes ``r_nodes`` and at the ``n`` midpoints between them ``r_mid`` (``pole``: :func:`accel_j2`'s). ``forcing``:
    (at the nodes [n + 1, 3], at the midpoints [n, 3]) a parameter's forcing (:func:`_system`): [n, 7, 7]."""
    f_nodes, f_mid = (None, None) if forcing is None else forcing
    a0 = _system(r_nodes[:-1], pole, None if f_nodes is None else f_nodes[:-1])
    am = _system(r_mid, pole, f_mid)
    a1 = _system(r_nodes[1:], pole, None if f_nodes is None else f_nodes[1:])
    eye = np.eye(a0.shape[1])
    k1 = a0
    k2 = am @ (eye + 0.5 * step * k1)
    k3 = am @ (eye + 0.5 * step * k2)
    k4 = a1 @ (eye + step * k3)
    return eye + step / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def transition_matrices(r_nodes: np.ndarray, r_mid: np.ndarray, step: float,
                        pole: np.ndarray | None = None,
                        forcing: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """[n + 1, 6, 6] ``Phi(t_k, t_0)`` at every node of a grid of spacing ``step`` (s), ``Phi(t_0, t_0) = I``: the
    chained products of :func:`step_matrices`. With ``forcing`` (:func:`step_matrices`), [n + 1, 7, 7]: the
    parameter's sensitivity ``d x(t_k) / d p`` is ``[:6, 6]``."""
    steps = step_matrices(np.asarray(r_nodes, float), np.asarray(r_mid, float), float(step), pole, forcing)
    phis = np.empty((len(steps) + 1, *steps.shape[1:]))
    phis[0] = np.eye(steps.shape[1])
    for k, m in enumerate(steps):
        phis[k + 1] = m @ phis[k]
    return phis
