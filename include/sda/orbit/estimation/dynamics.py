"""The estimator's dynamics: a numerical propagator with its state-transition matrix, at any times.

**Force model** (brahe, integrated in GCRF), deliberately *not* the simulator's truth
(:mod:`sda.sim.dynamics`), so that every figure carries model error as it would against the real sky:

=========================  =====================================  ==========================================
term                       estimator (this module)                simulator's truth
=========================  =====================================  ==========================================
Earth gravity              JGM-3, degree and order 16             EGM2008, degree and order 20
atmosphere                 Harris-Priester (static, mean solar)   NRLMSISE-00 with the space-weather record
drag coefficient x area    one ballistic coefficient ``B`` =      each body's own Cd (2.0-2.6) and area-to-
                           Cd A/m (m^2/kg), *estimated*           mass ratio, unknown to the estimator
solar radiation pressure   cannonball, Cr 1.4, area/mass          each body's own Cr (1.0-1.8) and area/mass,
                           ``B / 2.3``, cylindrical shadow        conical shadow
Sun, Moon                  point masses, analytic ephemerides     the same (both brahe's low-precision ones)
integrator                 RKF7(8), relative tolerance 1e-12      RKF7(8), relative tolerance 1e-11
=========================  =====================================  ==========================================

**The state-transition matrix at any time, cheaply.** A batch fit needs the state, its transition matrix
``Phi = dx(t)/dx(t0)`` and its sensitivity ``s = dx(t)/dB`` at every observation (hundreds per arc,
seconds apart in a radar pass). Stopping the integrator at each would cost a step each; instead
:func:`propagate` stops only at the nodes of a fixed grid (:data:`NODE_STEP_S`) and interpolates between them:
the state by quintic Hermite interpolation from the nodes' positions, velocities and (two-body + J2)
accelerations -- below a centimetre and 1e-5 m/s in LEO over 120 s (the dropped accelerations are ~1e-5 of
gravity) -- and ``Phi`` and ``s`` linearly (their relative error ~(n h)^2 / 8, 0.2 % in LEO: enough for a
Jacobian, which needs no more).

At the nodes, the force model above gives the states alone (no variational equations: brahe differentiates
its whole force model by central differences at every stage, 9-13 times the state's cost), one integration on
its own steps read from its quintic Hermite interpolant (:func:`_states`; stopped at every node, RKF78 took
the 120 s nodes as its steps and stayed 1.2 m from a 1e-13 integration over 30 h whatever its tolerance).
``Phi`` comes from the partials of two-body + J2 integrated along those states (:mod:`sda.orbit.estimation.partials`,
:data:`STM_SUBSTEPS` RK4 steps per node interval), ``s`` from the same linear system forced by ``d accel / d B``
(drag and SRP are linear in ``B``: :func:`b_forcing`, brahe's own drag and SRP functions at the interpolated
states). Against brahe's variational equations
(:func:`brahe_variational`; tests/include/orbit/estimation/test_dynamics.py) in LEO: the large columns of
``Phi`` within 0.08 % over 6 h and 0.24 % over 30 h (medians of ``bench/propagation.py``; 5.4 % for its worst
object over 30 h), ``s`` within 0.1 % (median; 0.55 % worst); the whole costs 1.2-1.5 times the state.

**Frames.** The pipeline's states are TEME (:mod:`sda.orbit.frames`); brahe integrates in GCRF. As the
simulator does, brahe's ITRF is taken to be the pipeline's ECEF, so TEME = R3(-GMST) R_gcrf->itrf GCRF,
the same rotation for position and velocity (the Earth-rotation terms of the two legs cancel):
:func:`teme_rotation`.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from sda.orbit import frames
from sda.orbit.estimation import partials
from sda.orbit.estimation.brahe_setup import brahe as _brahe

GRAVITY_DEGREE = 16
DRAG_PERIGEE_KM = 2000.0  # no drag term above this perigee (as the truth)
SRP_CR = 1.4
SRP_AREA_PER_B = 1.0 / 2.3  # the SRP area-to-mass ratio taken from B with a nominal Cd of 2.3
#: the states' integration: within 1 m of a 1e-13 integration over 30 h in LEO (bench/propagation.py), its steps
#: its own (free of the nodes); brahe's variational equations, a reference only, keep the looser VARIATIONAL_TOL
REL_TOL, ABS_TOL_M = 1.0e-12, 1.0e-7
VARIATIONAL_TOL = (1.0e-10, 1.0e-4)
NODE_STEP_S = 120.0
MU_M3_S2, RE_M = partials.MU_M3_S2, partials.RE_M
MODEL = (f"brahe numerical: JGM-3 {GRAVITY_DEGREE}x{GRAVITY_DEGREE}, Harris-Priester drag with an estimated "
         f"ballistic coefficient, SRP (Cr {SRP_CR}, cylindrical shadow), Sun and Moon (analytic); "
         f"RKF78, rel {REL_TOL:g}")


@functools.cache
def _force(drag: bool):
    bh = _brahe()
    index = bh.ParameterSource.parameter_index
    gravity = bh.GravityConfiguration.spherical_harmonic(degree=GRAVITY_DEGREE, order=GRAVITY_DEGREE,
                                                         model_type=bh.GravityModelType.JGM3)
    atmosphere = bh.DragConfiguration(model=bh.AtmosphericModel.HARRIS_PRIESTER, area=index(1), cd=index(2))
    return bh.ForceModelConfig(
        gravity=gravity,
        drag=atmosphere if drag else None,
        srp=bh.SolarRadiationPressureConfiguration(area=index(3), cr=index(4),
                                                   eclipse_model=bh.EclipseModel.CYLINDRICAL),
        third_body=[bh.ThirdBodyConfiguration(bh.ThirdBody.SUN, bh.EphemerisSource.LowPrecision),
                    bh.ThirdBodyConfiguration(bh.ThirdBody.MOON, bh.EphemerisSource.LowPrecision)],
        mass=index(0))


@functools.cache
def _config(variational: bool):
    bh = _brahe()
    rel, abs_m = VARIATIONAL_TOL if variational else (REL_TOL, ABS_TOL_M)
    config = bh.NumericalPropagationConfig.with_method(bh.IntegrationMethod.RKF78).with_rel_tol(rel).with_abs_tol(abs_m)
    if variational:
        return config.with_stm().with_sensitivity()
    return config.with_store_accelerations(True).with_interpolation_method(bh.InterpolationMethod.HERMITE_QUINTIC)


def params(b: float) -> np.ndarray:
    """brahe's parameter vector [mass, drag area, Cd, SRP area, Cr] for a 1 kg body of ballistic
    coefficient ``b`` = Cd A/m (m^2/kg): the drag coefficient slot carries ``b`` (index 2, the one
    the sensitivity column :data:`B_INDEX` refers to), the SRP area is ``b / 2.3``, sign kept: a model
    smooth in ``b`` (with ``|b|`` a B fitted near zero flipped sign from one iteration to the next)."""
    return np.array([1.0, 1.0, float(b), float(b) * SRP_AREA_PER_B, SRP_CR])


B_INDEX = 2


def _b_sensitivity(sens: np.ndarray, b: float) -> np.ndarray:
    """d state / d B from brahe's [6, 5] parameter sensitivities: through Cd and the SRP area alike."""
    return sens[:, B_INDEX] + SRP_AREA_PER_B * sens[:, 3]


def brahe_variational(t0: float, x0: np.ndarray, b: float, times) -> Trajectory:
    """The orbit at ``times`` with brahe's own variational equations (the whole force model differentiated by
    central differences at every stage: 9-13 times the state's cost), stopped at each time: the reference the
    cheaper partials of :func:`propagate` are measured against (tests, ``bench/propagation.py``)."""
    bh = _brahe()
    drag = perigee_km(x0) < DRAG_PERIGEE_KM
    prop = bh.NumericalOrbitPropagator(epoch(t0), np.asarray(x0, float), _config(True), _force(drag), params(b))
    prop.set_trajectory_mode(bh.TrajectoryMode.DISABLED)
    times = np.sort(np.asarray(times, float))
    xs, phis, sens = np.empty((len(times), 6)), np.empty((len(times), 6, 6)), np.empty((len(times), 6))
    for i, t in enumerate(times):
        if t > t0:
            prop.propagate_to(epoch(t0) + float(t - t0))
            xs[i], phis[i], sens[i] = prop.current_state(), prop.stm(), _b_sensitivity(prop.sensitivity(), b)
        else:
            xs[i], phis[i], sens[i] = x0, np.eye(6), 0.0
    return Trajectory(times, xs, phis, sens)


def epoch(unix_s: float):
    return _brahe().Epoch.from_unix_timestamp(float(unix_s))


def teme_rotation(unix_s) -> np.ndarray:
    """[m, 3, 3] rotations A(t) with x_TEME = A x_GCRF for position and velocity alike (module docstring)."""
    bh = _brahe()
    t = np.atleast_1d(np.asarray(unix_s, float))
    rot = np.asarray(bh.rotation_gcrf_to_itrf([bh.Epoch.from_unix_timestamp(float(x)) for x in t])).reshape(-1, 3, 3)
    theta = frames.gmst(t)
    c, s = np.cos(theta), np.sin(theta)
    rz = np.zeros((len(t), 3, 3))  # R3(-theta): TEME from ECEF
    rz[:, 0, 0], rz[:, 0, 1], rz[:, 1, 0], rz[:, 1, 1], rz[:, 2, 2] = c, -s, s, c, 1.0
    return rz @ rot


def perigee_km(state_m: np.ndarray) -> float:
    """Osculating perigee height (km) of an inertial state (m, m/s)."""
    r, v = np.asarray(state_m[:3], float), np.asarray(state_m[3:6], float)
    rn = np.linalg.norm(r)
    a = 1.0 / (2.0 / rn - v @ v / MU_M3_S2)
    e = np.linalg.norm(np.cross(v, np.cross(r, v)) / MU_M3_S2 - r / rn)
    return (a * (1.0 - e) - RE_M) / 1000.0


@dataclasses.dataclass
class Trajectory:
    """The estimator's orbit at times ``t`` [m]: GCRF states [m, 6] (m, m/s), transition matrices
    ``phi`` [m, 6, 6] from the initial state and sensitivities ``sens`` [m, 6] to ``B`` (m^2/kg)."""

    t: np.ndarray
    x: np.ndarray
    phi: np.ndarray
    sens: np.ndarray

    @property
    def jac7(self) -> np.ndarray:
        """[m, 6, 7]: d state(t) / d (initial state, B)."""
        return np.concatenate([self.phi, self.sens[:, :, None]], axis=2)


class PropagationError(RuntimeError):
    """The integrator could not carry the orbit to a requested time (re-entry, divergence)."""


def propagate(t0: float, x0: np.ndarray, b: float, times, step: float = NODE_STEP_S,
              variational: bool = True) -> Trajectory:
    """The orbit from GCRF state ``x0`` (m, m/s) at unix time ``t0`` with ballistic coefficient ``b``,
    at ``times`` (any order, all >= t0), with its transition matrix and sensitivity (module docstring);
    ``variational=False``: the states alone (``phi`` the identity, ``sens`` zero), several times cheaper."""
    times = np.asarray(times, float)
    if np.any(times < t0 - 1e-6):
        raise ValueError("propagate: times before the initial epoch")
    u = np.maximum(times - t0, 0.0) / step
    lo = np.floor(u).astype(np.int64)
    nodes = np.unique(np.concatenate([lo, lo + 1]))
    key = (float(t0), np.asarray(x0, float).tobytes(), float(b), float(step), bool(variational), nodes.tobytes())
    last = _LAST[0]
    if last is not None and last[0] == key:  # the same orbit to the same nodes: the same node states
        xs, phis, sens = last[1]
    else:
        xs, phis, sens = _nodes(t0, np.asarray(x0, float), b, step, nodes, variational)
        _LAST[0] = (key, (xs, phis, sens))
    pos = {int(k): i for i, k in enumerate(nodes)}
    i0 = np.array([pos[int(k)] for k in lo])
    return _interpolate(times, t0, step, lo, xs, phis, sens, i0)


#: the last propagation's (key, node states): a window's pass tests and its fit's first iteration carry
#: the same prior to the same times (:func:`sda.orbit.manoeuvre.detection.pass_tests`), integrated once
_LAST: list = [None]


def _states(t0: float, x0: np.ndarray, b: float, step: float, nodes: np.ndarray) -> np.ndarray:
    """[len(nodes), 6] the full force model's states (no variational equations) at the nodes ``t0 + k step``
    (ascending): one integration to the last node, its own steps, the nodes read from its quintic Hermite
    interpolant (the steps' states, velocities and accelerations)."""
    bh = _brahe()
    drag = perigee_km(x0) < DRAG_PERIGEE_KM
    prop = bh.NumericalOrbitPropagator(epoch(t0), x0, _config(False), _force(drag), params(b))
    prop.set_trajectory_mode(bh.TrajectoryMode.ALL_STEPS)
    start = epoch(t0)
    xs = np.empty((len(nodes), 6))
    last = int(nodes.max())
    if last > 0:
        try:
            prop.propagate_to(start + float(last * step))
            for i, k in enumerate(nodes):
                xs[i] = prop.state_gcrf(start + float(k * step)) if 0 < k < last else x0
        except Exception as exc:  # brahe raises its own error types
            raise PropagationError(f"propagation to t0 + {last * step:.0f} s failed: {exc}") from exc
        xs[nodes == last] = prop.current_state()
    else:
        xs[:] = x0
    if not np.isfinite(xs).all() or np.min(np.linalg.norm(xs[:, :3], axis=1)) < RE_M + 80e3:
        raise PropagationError("the orbit re-entered or diverged")
    return xs


#: RK4 steps of the transition matrix per node interval: on the test orbit of tests/include/orbit/estimation/
#: test_dynamics.py, one step is 3e-2 from brahe's variational equations over 30 h, two 6e-3; on the objects of
#: bench/propagation.py more than two change nothing measurable
STM_SUBSTEPS = 2


def earth_axis(unix_s: float) -> np.ndarray:
    """The rotation GCRF -> ITRF at ``unix_s``: its third row is the Earth's axis, about which J2 is symmetric (the
    pole moves by less than 0.01 arcsecond over the 30 h of a prediction, so one epoch serves a propagation)."""
    return np.asarray(_brahe().rotation_gcrf_to_itrf(epoch(unix_s)), float).reshape(3, 3)


def _transition_matrices(xs: np.ndarray, step: float, pole: np.ndarray | None = None,
                         forcing_at=None) -> np.ndarray:
    """``Phi`` at every node of states ``xs`` [n, 6] (spacing ``step``), by :data:`STM_SUBSTEPS` RK4 steps per
    interval of :mod:`sda.orbit.estimation.partials`, the states between nodes by Hermite interpolation.
    ``forcing_at(fractions of the grid, states)``: a parameter's forcing there (:func:`b_forcing`); then [n, 7, 7],
    its sensitivity in the last column."""
    if len(xs) == 1:
        return np.eye(6 if forcing_at is None else 7)[None]
    fine = 2 * STM_SUBSTEPS  # the RK4 steps' ends and midpoints
    frac = np.tile(np.arange(fine) / fine, len(xs) - 1)
    i0 = np.repeat(np.arange(len(xs) - 1), fine)
    x = np.concatenate([_hermite(frac, xs, i0, step, pole), xs[-1:]])
    forcing = None
    if forcing_at is not None:
        f = forcing_at(np.r_[i0 + frac, len(xs) - 1.0], x)
        forcing = (f[0::2], f[1::2])
    phis = partials.transition_matrices(x[0::2, :3], x[1::2, :3], step / STM_SUBSTEPS, pole, forcing)
    return phis[::STM_SUBSTEPS]


def b_forcing(t0: float, step: float, drag: bool, pole: np.ndarray):
    """``forcing_at`` of :func:`_transition_matrices` for the ballistic coefficient: ``d accel / d B`` of the force
    model's two terms linear in ``B`` (:func:`params`), at grid fractions ``u`` (time ``t0 + u step``) and GCRF
    states [m, 6]: Harris-Priester drag with Cd A/m = 1 (below :data:`DRAG_PERIGEE_KM`) and cannonball SRP with
    Cr :data:`SRP_CR`, area/mass :data:`SRP_AREA_PER_B`, cylindrical shadow -- brahe's own functions, the Sun its
    low-precision ephemeris, the Earth-fixed frame the one of :func:`earth_axis` at ``t0`` (the density and the
    wind depend on the Earth's axis, not on its rotation angle)."""
    bh = _brahe()
    start = epoch(t0)

    def at(u: np.ndarray, x: np.ndarray) -> np.ndarray:
        out = np.empty((len(u), 3))
        for i, (ui, xi) in enumerate(zip(u, x)):
            sun = bh.sun_position(start + float(ui * step))
            out[i] = (bh.accel_solar_radiation_pressure(xi[:3], sun, 1.0, SRP_CR, SRP_AREA_PER_B, bh.P_SUN)
                      * bh.eclipse_cylindrical(xi[:3], sun))
            if drag:
                rho = bh.density_harris_priester(pole @ xi[:3], pole @ sun)
                out[i] += bh.accel_drag(xi, rho, 1.0, 1.0, 1.0, pole)
        return out

    return at


def _nodes(t0: float, x0: np.ndarray, b: float, step: float, nodes: np.ndarray, variational: bool):
    """States, transition matrices and sensitivities at the grid nodes ``t0 + k step``, ``k`` in ``nodes``
    (module docstring: the states by the full force model at every node up to the last, ``Phi`` from the
    partials of :mod:`sda.orbit.estimation.partials` along them, ``s`` by the same system forced by drag and SRP)."""
    if not variational:
        eye = np.repeat(np.eye(6)[None], len(nodes), axis=0)
        return _states(t0, x0, b, step, nodes), eye, np.zeros((len(nodes), 6))
    every = np.arange(int(nodes.max()) + 1)
    xs = _states(t0, x0, b, step, every)
    pole = earth_axis(t0)
    aug = _transition_matrices(xs, step, pole, b_forcing(t0, step, perigee_km(x0) < DRAG_PERIGEE_KM, pole))[nodes]
    return xs[nodes], aug[:, :6, :6], aug[:, :6, 6]


def _hermite(s: np.ndarray, xs: np.ndarray, i0: np.ndarray, step: float, pole: np.ndarray | None = None) -> np.ndarray:
    """[m, 6] states at fractions ``s`` of the intervals from node ``i0`` to ``i0 + 1``, by quintic Hermite
    interpolation of the nodes' positions, velocities and two-body + J2 accelerations (J2 about ``pole``)."""
    acc = partials.accel_j2(xs[:, :3], pole)
    p0, v0, a0 = xs[i0, :3], xs[i0, 3:] * step, acc[i0] * step**2
    p1, v1, a1 = xs[i0 + 1, :3], xs[i0 + 1, 3:] * step, acc[i0 + 1] * step**2
    s2, s3, s4, s5 = s**2, s**3, s**4, s**5
    h = [1 - 10 * s3 + 15 * s4 - 6 * s5, s - 6 * s3 + 8 * s4 - 3 * s5, 0.5 * s2 - 1.5 * s3 + 1.5 * s4 - 0.5 * s5,
         10 * s3 - 15 * s4 + 6 * s5, -4 * s3 + 7 * s4 - 3 * s5, 0.5 * s3 - s4 + 0.5 * s5]
    dh = [-30 * s2 + 60 * s3 - 30 * s4, 1 - 18 * s2 + 32 * s3 - 15 * s4, s - 4.5 * s2 + 6 * s3 - 2.5 * s4,
          30 * s2 - 60 * s3 + 30 * s4, -12 * s2 + 28 * s3 - 15 * s4, 1.5 * s2 - 4 * s3 + 2.5 * s4]
    terms = (p0, v0, a0, p1, v1, a1)
    pos = sum(hk[:, None] * tk for hk, tk in zip(h, terms))
    vel = sum(dk[:, None] * tk for dk, tk in zip(dh, terms)) / step
    return np.concatenate([pos, vel], axis=1)


def _interpolate(times, t0, step, lo, xs, phis, sens, i0) -> Trajectory:
    """States by quintic Hermite, Phi and sensitivity linearly, between nodes ``i0`` and ``i0 + 1``."""
    s = (times - t0) / step - lo
    w = s[:, None, None]
    phi = (1 - w) * phis[i0] + w * phis[i0 + 1]
    sen = (1 - s[:, None]) * sens[i0] + s[:, None] * sens[i0 + 1]
    return Trajectory(times, _hermite(s, xs, i0, step), phi, sen)
