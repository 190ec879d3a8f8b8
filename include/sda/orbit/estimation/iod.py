"""Initial orbit determination: a first state from a handful of observations, with no prior at all.

What the new-object search (:mod:`sda.orbit.acquisition.search`) starts an uncatalogued object's fit from:

* **three positions** (radar, converted to TEME): :func:`gibbs` when they span more than
  :data:`GIBBS_MIN_ANGLE_RAD` of arc (Vallado, *Fundamentals of Astrodynamics*, 4th ed., algorithm 54),
  else :func:`herrick_gibbs` (algorithm 55), which is built for the few degrees one radar pass spans;
* **three lines of sight** (optical, angles only): :func:`gauss` (Curtis, *Orbital Mechanics for
  Engineering Students*, algorithm 5.5: the eighth-degree polynomial in the middle range, then the f
  and g series), good enough for a start the least-squares fit then refines;
* **moving a state** between times: :func:`propagate_j2`, two-body plus J2 integrated (DOP853), either
  direction: enough to carry a first guess over a pass or to gate a candidate orbit hours ahead, not for
  prediction (the estimator's numerical model is, :mod:`sda.orbit.estimation.dynamics`).

Units: metres, seconds, TEME (J2's axis is the TEME z axis, which is what the true-of-date pole is to
within the nutation the J2 term cannot feel). Every function raises :class:`IodError` on geometry that
gives no orbit (coplanarity violated, no positive root, a hyperbolic or sub-surface answer).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.integrate import solve_ivp

MU = 3.986004418e14  # m^3/s^2
RE = 6378137.0  # m
J2 = 1.0826267e-3
GIBBS_MIN_ANGLE_RAD = math.radians(3.0)
#: Gibbs needs the three positions in one plane: the unit normal of r2 x r3 may tilt from r1 by this much
#: before the geometry is refused (noisy radar positions are never exactly coplanar)
COPLANAR_MAX_RAD = math.radians(3.0)


class IodError(ValueError):
    """The observations determine no (plausible) orbit."""


def _accel(r: np.ndarray) -> np.ndarray:
    rn = np.linalg.norm(r)
    z2 = (r[2] / rn) ** 2
    k = 1.5 * J2 * (RE / rn) ** 2
    f = np.array([1.0 + k * (1.0 - 5.0 * z2), 1.0 + k * (1.0 - 5.0 * z2), 1.0 + k * (3.0 - 5.0 * z2)])
    return -MU * r / rn**3 * f


def propagate_j2(t0: float, state: np.ndarray, times) -> np.ndarray:
    """The state [6] (m, m/s) at ``t0`` carried to each of ``times`` (either side of ``t0``): [m, 6]."""
    times = np.atleast_1d(np.asarray(times, float))
    out = np.empty((len(times), 6))
    state = np.asarray(state, float)
    for sign in (1.0, -1.0):
        mask = (times >= t0) if sign > 0 else (times < t0)
        if not mask.any():
            continue
        targets, back = np.unique(times[mask], return_inverse=True)  # solve_ivp wants them strictly ordered
        targets = targets[::-1] if sign < 0 else targets
        back = len(targets) - 1 - back if sign < 0 else back
        if targets[-1] == t0:
            out[mask] = state
            continue
        sol = solve_ivp(lambda _t, x: np.concatenate([x[3:], _accel(x[:3])]), (t0, float(targets[-1])), state,
                        method="DOP853", t_eval=targets, rtol=1e-10, atol=1e-4)
        if not sol.success:
            raise IodError(f"two-body + J2 propagation failed: {sol.message}")
        out[mask] = sol.y.T[back]
    return out


def _check(r: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not (np.isfinite(r).all() and np.isfinite(v).all()):
        raise IodError("no finite state")
    rn = float(np.linalg.norm(r))
    energy = v @ v / 2.0 - MU / rn
    if energy >= 0.0:
        raise IodError(f"not a bound orbit (speed {np.linalg.norm(v):.0f} m/s at {rn / 1e3:.0f} km)")
    a = -MU / (2.0 * energy)
    e = np.linalg.norm(np.cross(v, np.cross(r, v)) / MU - r / rn)
    if a * (1.0 - e) < RE:
        raise IodError(f"perigee below the surface (a {a / 1e3:.0f} km, e {e:.3f})")
    return r, v


def herrick_gibbs(r1, r2, r3, t1: float, t2: float, t3: float) -> np.ndarray:
    """The velocity at ``r2`` from three close positions (Vallado algorithm 55)."""
    r1, r2, r3 = (np.asarray(x, float) for x in (r1, r2, r3))
    d31, d32, d21 = t3 - t1, t3 - t2, t2 - t1
    if min(d32, d21) <= 0.0:
        raise IodError("Herrick-Gibbs needs three increasing times")
    n1, n2, n3 = (np.linalg.norm(x) for x in (r1, r2, r3))
    c1 = -d32 * (1.0 / (d21 * d31) + MU / (12.0 * n1**3))
    c2 = (d32 - d21) * (1.0 / (d21 * d32) + MU / (12.0 * n2**3))
    c3 = d21 * (1.0 / (d32 * d31) + MU / (12.0 * n3**3))
    return _check(r2, c1 * r1 + c2 * r2 + c3 * r3)[1]


def gibbs(r1, r2, r3) -> np.ndarray:
    """The velocity at ``r2`` from three coplanar positions well apart (Vallado algorithm 54)."""
    r1, r2, r3 = (np.asarray(x, float) for x in (r1, r2, r3))
    n1, n2, n3 = (np.linalg.norm(x) for x in (r1, r2, r3))
    z12, z23, z31 = np.cross(r1, r2), np.cross(r2, r3), np.cross(r3, r1)
    tilt = abs(math.asin(np.clip(r1 @ z23 / (n1 * np.linalg.norm(z23)), -1.0, 1.0)))
    if tilt > COPLANAR_MAX_RAD:
        raise IodError(f"positions not coplanar ({math.degrees(tilt):.2f} deg)")
    n = n1 * z23 + n2 * z31 + n3 * z12
    d = z12 + z23 + z31
    s = (n2 - n3) * r1 + (n3 - n1) * r2 + (n1 - n2) * r3
    nn, dn = np.linalg.norm(n), np.linalg.norm(d)
    if nn * dn == 0.0 or n @ d <= 0.0:
        raise IodError("Gibbs: degenerate geometry")
    b = np.cross(d, r2)
    lg = math.sqrt(MU / (nn * dn))
    return _check(r2, lg / n2 * b + lg * s)[1]


def positions_velocity(r1, r2, r3, t1: float, t2: float, t3: float) -> np.ndarray:
    """The velocity at ``r2``: Gibbs when the arc is long enough for it, else Herrick-Gibbs."""
    cos = np.dot(r1, r3) / (np.linalg.norm(r1) * np.linalg.norm(r3))
    if math.acos(float(np.clip(cos, -1.0, 1.0))) > GIBBS_MIN_ANGLE_RAD:
        try:
            return gibbs(r1, r2, r3)
        except IodError:
            pass
    return herrick_gibbs(r1, r2, r3, t1, t2, t3)


def gauss(los, sites, times) -> tuple[np.ndarray, np.ndarray]:
    """Position and velocity (TEME, m and m/s) at the middle of three angles-only observations: ``los``
    [3, 3] unit lines of sight, ``sites`` [3, 3] observer positions (m), ``times`` [3] (Curtis 5.5).

    Of the polynomial's positive roots, the one giving the most plausible orbit (bound, above the
    surface; the smallest positive slant ranges) is taken."""
    rho, R = np.asarray(los, float), np.asarray(sites, float)
    t1, t3 = times[0] - times[1], times[2] - times[1]
    tau = t3 - t1
    p1, p2, p3 = np.cross(rho[1], rho[2]), np.cross(rho[0], rho[2]), np.cross(rho[0], rho[1])
    d0 = rho[0] @ p1
    if abs(d0) < 1e-14:
        raise IodError("Gauss: lines of sight coplanar")
    dm = np.array([[R[i] @ p for p in (p1, p2, p3)] for i in range(3)])
    a = (-dm[0, 1] * t3 / tau + dm[1, 1] + dm[2, 1] * t1 / tau) / d0
    b = (dm[0, 1] * (t3**2 - tau**2) * t3 / tau + dm[2, 1] * (tau**2 - t1**2) * t1 / tau) / (6.0 * d0)
    e = R[1] @ rho[1]
    r2sq = R[1] @ R[1]
    coeff = [1.0, 0.0, -(a * a + 2.0 * a * e + r2sq), 0.0, 0.0, -2.0 * MU * b * (a + e), 0.0, 0.0, -(MU * b) ** 2]
    roots = [float(x.real) for x in np.roots(coeff) if abs(x.imag) < 1e-6 * abs(x) and x.real > RE * 0.99]
    errors = []
    for x in sorted(roots):
        try:
            with np.errstate(all="ignore"):  # degenerate geometry: inf or nan, refused by _check
                return _improve(*_gauss_state(x, rho, R, dm, d0, t1, t3, tau), rho, R, dm, d0, t1, t3)
        except (IodError, ArithmeticError) as exc:
            errors.append(str(exc))
    raise IodError("Gauss: no plausible root" + (f" ({'; '.join(errors)})" if errors else ""))


def _stumpff(z: float) -> tuple[float, float]:
    if z > 1e-8:
        s = math.sqrt(z)
        return (s - math.sin(s)) / s**3, (1.0 - math.cos(s)) / z
    if z < -1e-8:
        s = math.sqrt(-z)
        if s > 600.0:
            raise IodError("universal-variable iteration diverged")
        return (math.sinh(s) - s) / s**3, (math.cosh(s) - 1.0) / -z
    return 1.0 / 6.0, 0.5


def lagrange_fg(r: np.ndarray, v: np.ndarray, dt: float) -> tuple[float, float]:
    """The exact two-body Lagrange coefficients f, g over ``dt`` from (r, v): universal variables (Curtis 3.3)."""
    rn, vr = float(np.linalg.norm(r)), float(r @ v / np.linalg.norm(r))
    alpha = 2.0 / rn - v @ v / MU
    sq = math.sqrt(MU)
    x = sq * abs(alpha) * dt
    for _ in range(60):
        z = alpha * x * x
        s, c = _stumpff(z)
        fx = rn * vr / sq * x * x * c + (1.0 - alpha * rn) * x**3 * s + rn * x - sq * dt
        dfx = rn * vr / sq * x * (1.0 - alpha * x * x * s) + (1.0 - alpha * rn) * x * x * c + rn
        step = fx / dfx
        x -= step
        if abs(step) < 1e-10 * max(1.0, abs(x)):
            break
    z = alpha * x * x
    s, c = _stumpff(z)
    return 1.0 - x * x / rn * c, dt - x**3 / sq * s


def _improve(r2, v2, rho, R, dm, d0, t1, t3, iterations: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Curtis algorithm 5.6: the Gauss estimate refined with exact f and g until the ranges settle."""
    ranges = np.zeros(3)
    for _ in range(iterations):
        f1, g1 = lagrange_fg(r2, v2, t1)
        f3, g3 = lagrange_fg(r2, v2, t3)
        den = f1 * g3 - f3 * g1
        c1, c3 = g3 / den, -g1 / den
        new = np.array([(-dm[0, 0] + dm[1, 0] / c1 - c3 / c1 * dm[2, 0]) / d0,
                        (-c1 * dm[0, 1] + dm[1, 1] - c3 * dm[2, 1]) / d0,
                        (-c1 / c3 * dm[0, 2] + dm[1, 2] / c3 - dm[2, 2]) / d0])
        if not np.isfinite(new).all() or new.min() <= 0.0:
            raise IodError("Gauss refinement: negative slant range")
        r1, r2, r3 = (R[i] + new[i] * rho[i] for i in range(3))
        v2 = (-f3 * r1 + f1 * r3) / den
        if np.abs(new - ranges).max() < 1e-3:
            break
        ranges = new
    return _check(r2, v2)


def _gauss_state(x: float, rho, R, dm, d0, t1, t3, tau) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):  # degenerate geometry gives inf or nan, which _check refuses
        return _gauss_terms(x, rho, R, dm, d0, t1, t3, tau)


def _gauss_terms(x: float, rho, R, dm, d0, t1, t3, tau) -> tuple[np.ndarray, np.ndarray]:
    mu3 = MU / x**3
    rho1 = ((6.0 * (dm[2, 0] * t1 / t3 + dm[1, 0] * tau / t3) * x**3 + MU * dm[2, 0] * (tau**2 - t1**2) * t1 / t3)
            / (6.0 * x**3 + MU * (tau**2 - t3**2)) - dm[0, 0]) / d0
    rho2 = (-dm[0, 1] * t3 / tau + dm[1, 1] + dm[2, 1] * t1 / tau) / d0 + MU * (
        dm[0, 1] * (t3**2 - tau**2) * t3 / tau + dm[2, 1] * (tau**2 - t1**2) * t1 / tau) / (6.0 * d0 * x**3)
    rho3 = ((6.0 * (dm[0, 2] * t3 / t1 - dm[1, 2] * tau / t1) * x**3 + MU * dm[0, 2] * (tau**2 - t3**2) * t3 / t1)
            / (6.0 * x**3 + MU * (tau**2 - t1**2)) - dm[2, 2]) / d0
    if not min(rho1, rho2, rho3) > 0.0:
        raise IodError("negative slant range")
    r1, r2, r3 = R[0] + rho1 * rho[0], R[1] + rho2 * rho[1], R[2] + rho3 * rho[2]
    f1, f3 = 1.0 - 0.5 * mu3 * t1**2, 1.0 - 0.5 * mu3 * t3**2
    g1, g3 = t1 - mu3 * t1**3 / 6.0, t3 - mu3 * t3**3 / 6.0
    v2 = (-f3 * r1 + f1 * r3) / (f1 * g3 - f3 * g1)
    return _check(r2, v2)
