"""Probability of collision (Pc) for a conjunction: NASA CARA's 2-D (conjunction-plane) method.

Pure numpy/scipy. Units: metres, m/s, m^2 (m^2/s, m^2/s^2 for 6x6 covariances).

The definitions follow NASA CARA's Analysis Tools (github.com/nasa/CARA_Analysis_Tools,
``DistributedMatlab/ProbabilityOfCollision``):

* ``PcCircle.m`` / ``Pc2D_Foster.m``: combined position covariance ``C1 + C2``; relative state
  ``r = r1 - r2``, ``v = v1 - v2``; encounter frame ``y = v/|v|``, ``z = r x v/|r x v|``,
  ``x = y x z``; the covariance projected onto the x-z (conjunction) plane; its eigenvalues
  clipped from below at ``(1e-4 * HBR)^2``; the miss vector is ``|r|`` along x (CARA uses the
  full 3-D ``|r|``, not its in-plane component); the 2-D Gaussian integrated over the
  hard-body-radius circle. Here the integral is done with erf/erfc analytically along the minor
  principal axis and adaptively (``scipy.integrate.quad``, relative tolerance 1e-10) along the
  major axis, in a form that neither loses precision for very small Pc nor underflows
  until Pc itself does (~1e-308).
* ``UsageViolationPc2D.m`` (its rectilinear part) for the validity check, see
  :func:`pc2d_validity`.
* ``RIC2ECI.m``: covariances given in each object's RTN frame (as CDMs and the uncertainty model of
  :mod:`sda.orbit.uncertainty` give them) rotated to inertial with that object's own state, see
  :func:`pc2d_foster_rtn`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import integrate, special

__all__ = [
    "GM_EARTH",
    "Pc2DResult",
    "Pc2DValidity",
    "rtn_basis",
    "rtn_to_inertial",
    "inertial_to_rtn",
    "encounter_frame",
    "pc_circle_2d",
    "pc2d_validity",
    "pc2d_foster",
    "pc2d_foster_rtn",
    "orbit_period",
]

#: Earth's gravitational parameter [m^3/s^2] (CARA's ``orbit_period.m`` value).
GM_EARTH = 3.986004418e14

#: Eigenvalue clipping factor of the conjunction-plane covariance (CARA: Fclip = 1e-4).
FCLIP = 1e-4
#: CARA's ConjDurationGamma (precision factor of the conjunction time bounds).
CONJ_DURATION_GAMMA = 1e-16
#: Cutoffs on CARA's rectilinear "extended" and "offset" indicators (see :func:`pc2d_validity`).
#: CARA's PcMultiStep defaults (Pc2DExtendedCutoff 0.02, Pc2DOffsetCutoff 0.01) are meant for
#: the indicators after CARA's curvilinear (equinoctial) refinement, which is not done here;
#: applied to the rectilinear indicators they reject Alfano's linear-motion cases 6 and 7
#: (0.039 and 0.104). These defaults are 10x CARA's, keeping CARA's 2:1 ratio.
EXTENDED_CUTOFF = 0.2
OFFSET_CUTOFF = 0.1


# --------------------------------------------------------------------------- frames
def _vec3(a) -> np.ndarray:
    a = np.asarray(a, dtype=float).reshape(-1)
    if a.shape != (3,):
        raise ValueError(f"expected a 3-vector, got shape {a.shape}")
    return a


def rtn_basis(r, v) -> np.ndarray:
    """3x3 matrix whose columns are the R, T, N unit vectors expressed in the inertial frame.

    R = r/|r|, N = r x v/|r x v|, T = N x R (CARA's RIC frame: same axes). So
    ``x_inertial = M @ x_rtn`` and ``x_rtn = M.T @ x_inertial``.
    """
    r = _vec3(r)
    v = _vec3(v)
    h = np.cross(r, v)
    rn, hn = np.linalg.norm(r), np.linalg.norm(h)
    if rn == 0.0 or hn == 0.0:
        raise ValueError("RTN frame undefined: zero position or r parallel to v")
    R = r / rn
    N = h / hn
    T = np.cross(N, R)
    return np.column_stack([R, T, N])


def _block_rotation(M: np.ndarray, n: int) -> np.ndarray:
    if n == 3:
        return M
    if n == 6:
        Z = np.zeros((3, 3))
        return np.block([[M, Z], [Z, M]])
    if n > 6:  # extra (e.g. drag/SRP) rows are left untouched, as CARA's RIC2ECI does
        out = np.eye(n)
        out[:3, :3] = M
        out[3:6, 3:6] = M
        return out
    raise ValueError(f"covariance must be 3x3, 6x6 or larger, got {n}x{n}")


def _sym(C: np.ndarray) -> np.ndarray:
    return 0.5 * (C + C.T)


def rtn_to_inertial(cov_rtn, r, v) -> np.ndarray:
    """Rotate a 3x3 / 6x6 (or larger) covariance from the object's RTN frame to inertial.

    The velocity block is rotated with the same instantaneous rotation (no frame-rotation
    rate term), exactly as CARA's ``RIC2ECI.m`` does for CDM covariances.
    """
    C = np.asarray(cov_rtn, dtype=float)
    if C.ndim != 2 or C.shape[0] != C.shape[1]:
        raise ValueError("covariance must be a square matrix")
    Q = _block_rotation(rtn_basis(r, v), C.shape[0])
    return _sym(Q @ C @ Q.T)


def inertial_to_rtn(cov_inertial, r, v) -> np.ndarray:
    """Inverse of :func:`rtn_to_inertial`."""
    C = np.asarray(cov_inertial, dtype=float)
    if C.ndim != 2 or C.shape[0] != C.shape[1]:
        raise ValueError("covariance must be a square matrix")
    Q = _block_rotation(rtn_basis(r, v), C.shape[0])
    return _sym(Q.T @ C @ Q)


def encounter_frame(r_rel, v_rel) -> np.ndarray:
    """Rows x, y, z of CARA's relative encounter frame (y along v, z along r x v, x = y x z)."""
    r = _vec3(r_rel)
    v = _vec3(v_rel)
    vn = np.linalg.norm(v)
    if vn == 0.0:
        raise ValueError("encounter frame undefined for zero relative velocity")
    y = v / vn
    h = np.cross(r, v)
    hn = np.linalg.norm(h)
    if hn <= 1e-12 * max(np.linalg.norm(r), 1.0) * vn:
        # r (anti)parallel to v or zero: any normal of v will do
        trial = np.eye(3)[int(np.argmin(np.abs(y)))]
        h = np.cross(trial, y)
        hn = np.linalg.norm(h)
    z = h / hn
    x = np.cross(y, z)
    return np.vstack([x, y, z])


def orbit_period(r, v, gm: float = GM_EARTH) -> float:
    """Two-body period [s]; ``inf`` for parabolic/hyperbolic states (CARA ``orbit_period.m``)."""
    r = _vec3(r)
    v = _vec3(v)
    beta = 2.0 * gm / np.linalg.norm(r) - float(v @ v)
    if beta <= 0.0:
        return float("inf")
    return float(2.0 * np.pi * gm * beta ** -1.5)


# --------------------------------------------------------------------------- integral
def _log_erf_diff(a: float, b: float) -> tuple[float, float]:
    """erf(a) - erf(b) (a >= b) as (log-scale exponent e, mantissa m): value = exp(e) * m.

    Uses erfcx for the tails so that neither cancellation nor underflow spoils tiny values.
    """
    if b >= 0.0:  # both non-negative: erfc(b) - erfc(a)
        return -b * b, special.erfcx(b) - special.erfcx(a) * np.exp(b * b - a * a)
    if a <= 0.0:  # both non-positive: erfc(-a) - erfc(-b)
        return -a * a, special.erfcx(-a) - special.erfcx(-b) * np.exp(a * a - b * b)
    return 0.0, special.erf(a) - special.erf(b)


def pc_circle_2d(xm: float, zm: float, sx: float, sz: float, hbr: float,
                 rel_tol: float = 1e-10) -> float:
    """Integral of the zero-mean 2-D Gaussian with principal sigmas (sx, sz) over the circle of
    radius ``hbr`` centred at (xm, zm), the axes being the Gaussian's principal axes.

    Pc = 1/(sqrt(2 pi) sx) * Int_{xm-R}^{xm+R} exp(-x^2/2sx^2) * [erf((zm+Rx)/(sqrt2 sz))
         - erf((zm-Rx)/(sqrt2 sz))]/2 dx,   Rx = sqrt(R^2 - (x-xm)^2),
    with x = xm + R cos(theta) so that the integrand is smooth at the circle's ends.
    """
    if not (sx > 0.0 and sz > 0.0):
        raise ValueError("sigmas must be positive")
    if hbr <= 0.0:
        return 0.0
    if np.isinf(hbr):
        return 1.0
    R = float(hbr)
    xm, zm = abs(float(xm)), abs(float(zm))
    rt2 = np.sqrt(2.0)
    xlo, xhi = xm - R, xm + R
    # Drop the part of the x-range where the Gaussian factor is < e^-40 of its maximum there.
    xstar = min(max(0.0, xlo), xhi)
    xcut = np.sqrt(xstar * xstar + 80.0 * sx * sx)
    a_x, b_x = max(xlo, -xcut), min(xhi, xcut)
    th_lo = float(np.arccos(np.clip((b_x - xm) / R, -1.0, 1.0)))
    th_hi = float(np.arccos(np.clip((a_x - xm) / R, -1.0, 1.0)))
    if not th_hi > th_lo:
        return 0.0

    def log_parts(th: float) -> tuple[float, float]:
        x = xm + R * np.cos(th)
        rx = R * np.sin(th)
        e, m = _log_erf_diff((zm + rx) / (rt2 * sz), (zm - rx) / (rt2 * sz))
        return -0.5 * (x / sx) ** 2 + e, rx * m

    # Scale out the largest exponent to avoid underflow for extremely small Pc.
    grid = np.linspace(th_lo, th_hi, 257)
    e0 = max(log_parts(t)[0] for t in grid[1:-1]) if len(grid) > 2 else log_parts(grid[0])[0]

    def f(th: float) -> float:
        e, m = log_parts(th)
        return float(np.exp(min(e - e0, 700.0)) * m)

    pts = []
    if 0.0 < xm < R:  # x = 0 (Gaussian peak) inside the circle's x-range
        pts.append(float(np.arccos(-xm / R)))
    if zm < R:  # the chord half-length equals zm: erf-difference transition
        s = float(np.arcsin(zm / R))
        pts += [s, np.pi - s]
    pts = sorted(p for p in pts if th_lo < p < th_hi)
    val, _err = integrate.quad(f, th_lo, th_hi, points=pts or None, limit=500,
                               epsabs=0.0, epsrel=rel_tol)
    pc = val * np.exp(e0) / (2.0 * np.sqrt(2.0 * np.pi) * sx)
    return float(min(max(pc, 0.0), 1.0))


# --------------------------------------------------------------------------- validity
@dataclass(frozen=True)
class Pc2DValidity:
    """Rectilinear part of CARA's ``UsageViolationPc2D.m``.

    sigma_t_s: 1-sigma time width of the encounter, 1/sqrt(v' A^-1 v) (A = combined position
    covariance): the time the relative motion takes to cross one sigma of the combined
    position uncertainty along the relative-velocity direction.
    duration_s: conjunction duration 2*dtau, dtau = sigma_t * sqrt(2)*erfcinv(1e-16) (~8.3 sigma).
    t_mid_s: time of the Mahalanobis-distance minimum relative to the given epoch.
    extended = min(1, duration/Pmin); offset = min(1, max|t_mid -+ dtau| / Pmin), Pmin the
    shorter two-body period. Invalid when extended > ``extended_cutoff`` (default 0.2: the
    +-8.3 sigma_t window, i.e. essentially all of the Pc accumulation, spans more than 1/5 of
    an orbit, 72 deg of arc; +-3 sigma_t then spans > 26 deg) or offset > ``offset_cutoff``
    (default 0.1: the window reaches more than 36 deg of arc away from the given TCA), or the
    relative velocity is zero, or the covariance is unusable. Pass 0.02 / 0.01 for CARA's
    PcMultiStep cutoffs (stricter than intended for this rectilinear-only indicator).

    Calibration (reference data): Alfano 2009 linear cases 3/5/6/7 have extended =
    1.7e-5 / 1.6e-3 / 0.039 / 0.104 (valid); case 12 (identical orbits) has zero relative
    velocity; the TerraSAR-X/TanDEM-X formation CDMs have extended 0.65-1 and offset 0.32-1;
    CARA's 53 real CDMs have extended <= 0.01 except the 48901/48903 formation pair of
    2021-12-19T18:23 (0.11, offset 0.51: the Mahalanobis minimum lies ~43 min from TCA).
    """

    valid: bool
    reason: str
    sigma_t_s: float
    duration_s: float
    t_mid_s: float
    period_min_s: float
    extended: float
    offset: float


def pc2d_validity(r1, v1, C1, r2, v2, C2, hbr: float,
                  extended_cutoff: float = EXTENDED_CUTOFF,
                  offset_cutoff: float = OFFSET_CUTOFF) -> Pc2DValidity:
    """Is the short-encounter (2-D, rectilinear) Pc method valid for this conjunction?"""
    r1, v1, r2, v2 = map(_vec3, (r1, v1, r2, v2))
    A = np.asarray(C1, float)[:3, :3] + np.asarray(C2, float)[:3, :3]
    r = r2 - r1
    v = v2 - v1
    pmin = min(orbit_period(r1, v1), orbit_period(r2, v2))
    nan = float("nan")
    if not np.all(np.isfinite(A)) or not np.all(np.isfinite(np.r_[r, v])):
        return Pc2DValidity(False, "non-finite state or covariance", nan, nan, nan, pmin, nan, nan)
    lam, vec = np.linalg.eigh(_sym(A))
    lclip = (FCLIP * hbr) ** 2 if np.isfinite(hbr) else 0.0
    lam = np.maximum(lam, lclip)
    if np.any(lam <= 0.0):
        return Pc2DValidity(False, "combined position covariance is not positive definite",
                            nan, nan, nan, pmin, nan, nan)
    Ainv = (vec / lam) @ vec.T
    vAv = float(v @ Ainv @ v)
    if not vAv > 0.0:
        return Pc2DValidity(False, "zero relative velocity: encounter never ends",
                            float("inf"), float("inf"), nan, pmin, 1.0, 1.0)
    sigma_t = 1.0 / np.sqrt(vAv)
    t_mid = -float(r @ Ainv @ v) / vAv
    dtau = sigma_t * np.sqrt(2.0) * special.erfcinv(CONJ_DURATION_GAMMA)
    extended = min(1.0, 2.0 * dtau / pmin)
    offset = min(1.0, max(abs(t_mid - dtau), abs(t_mid + dtau)) / pmin)
    reasons = []
    if extended > extended_cutoff:
        reasons.append(f"extended encounter: duration {2 * dtau:.4g} s is {extended:.3g} of the "
                       f"orbital period (cutoff {extended_cutoff}); relative speed "
                       f"{np.linalg.norm(v):.4g} m/s too low for the covariance size")
    if offset > offset_cutoff:
        reasons.append(f"encounter offset from TCA: {offset:.3g} of the orbital period "
                       f"(cutoff {offset_cutoff})")
    ok = not reasons
    return Pc2DValidity(ok, "; ".join(reasons) if reasons else "ok", float(sigma_t),
                        float(2 * dtau), float(t_mid), float(pmin), float(extended), float(offset))


# --------------------------------------------------------------------------- Pc2D
@dataclass(frozen=True)
class Pc2DResult:
    """Result of :func:`pc2d_foster`.

    pc: the 2-D Pc, NaN when the method is not valid for the conjunction (see ``reason``).
    pc_2d: the conjunction-plane integral whatever the validity verdict (NaN only when it
      cannot be computed, e.g. zero relative velocity); a diagnostic, not a risk number.
    miss_m: |r1 - r2| at the given epoch; rel_speed_ms: |v1 - v2|.
    sigma_x, sigma_y: principal 1-sigma extents of the combined covariance in the conjunction
      plane (sigma_x >= sigma_y), after CARA's eigenvalue clipping; x_m, y_m the miss vector's
      components along those axes. cov_plane: the 2x2 covariance in the encounter-frame (x, z)
      axes before clipping; frame: rows x, y, z of the encounter frame (inertial components).
    """

    pc: float
    valid: bool
    reason: str
    pc_2d: float
    miss_m: float
    rel_speed_ms: float
    sigma_x: float
    sigma_y: float
    x_m: float
    y_m: float
    hbr_m: float
    remediated: bool
    cov_plane: np.ndarray = field(repr=False, compare=False)
    frame: np.ndarray = field(repr=False, compare=False)
    validity: Pc2DValidity | None = None


def pc2d_foster(r1, v1, C1, r2, v2, C2, hbr: float, *, check_validity: bool = True,
                rel_tol: float = 1e-10, extended_cutoff: float = EXTENDED_CUTOFF,
                offset_cutoff: float = OFFSET_CUTOFF) -> Pc2DResult:
    """NASA CARA 2-D Pc (Foster's conjunction-plane method, as in ``PcCircle.m``).

    r1, v1, r2, v2: inertial positions [m] and velocities [m/s] at TCA; C1, C2: inertial
    3x3 or 6x6 covariances [m^2 ...] (only the position block is used); hbr: combined
    hard-body radius [m]. With ``check_validity`` (default) the result's ``pc`` is NaN and
    ``valid`` False when CARA's usage-violation criteria say the 2-D method does not apply.
    """
    r1, v1, r2, v2 = map(_vec3, (r1, v1, r2, v2))
    hbr = float(hbr)
    if hbr < 0.0 or np.isnan(hbr):
        raise ValueError("hbr must be a non-negative number")
    C1 = np.asarray(C1, float)
    C2 = np.asarray(C2, float)
    A = _sym(C1[:3, :3] + C2[:3, :3])
    r = r1 - r2
    v = v1 - v2
    rm = float(np.linalg.norm(r))
    vm = float(np.linalg.norm(v))
    nan = float("nan")
    empty2 = np.full((2, 2), nan)

    def fail(reason, validity=None, frame=np.full((3, 3), nan), cov=empty2):
        return Pc2DResult(nan, False, reason, nan, rm, vm, nan, nan, nan, nan, hbr, False,
                          cov, frame, validity)

    validity = (pc2d_validity(r1, v1, C1, r2, v2, C2, hbr, extended_cutoff, offset_cutoff)
                if check_validity else None)
    if vm == 0.0:
        return fail("zero relative velocity: 2-D Pc undefined", validity)
    if not np.all(np.isfinite(A)):
        return fail("non-finite covariance", validity)

    # CARA: perturb an (almost) zero miss vector perpendicular to v (Alfano 2009 cases).
    reps = max(10.0 * np.spacing(rm), 1e-6 * hbr if np.isfinite(hbr) else 0.0)
    if rm < reps:
        rsum = r1 + r2
        r = r + reps * np.cross(rsum, v) / np.linalg.norm(rsum) / vm
        rm = float(np.linalg.norm(r))

    F = encounter_frame(r, v)
    Cxyz = F @ A @ F.T
    cov_plane = _sym(Cxyz[np.ix_([0, 2], [0, 2])])
    lam, vec = np.linalg.eigh(cov_plane)  # ascending
    L2, L1 = float(lam[0]), float(lam[1])
    V1 = vec[:, 1]
    if L1 <= 0.0:
        return fail("conjunction-plane covariance has no positive eigenvalue", validity, F,
                    cov_plane)
    lclip = (FCLIP * hbr) ** 2 if np.isfinite(hbr) else 0.0
    remediated = bool(L1 < lclip or L2 < lclip)
    L1, L2 = max(L1, lclip), max(L2, lclip)
    if L2 <= 0.0:
        return fail("conjunction-plane covariance is singular (and HBR is zero)", validity, F,
                    cov_plane)
    sx, sz = np.sqrt(L1), np.sqrt(L2)
    xm, zm = rm * abs(V1[0]), rm * abs(V1[1])
    pc = pc_circle_2d(xm, zm, sx, sz, hbr, rel_tol=rel_tol)

    valid = True
    reason = "ok"
    if validity is not None and not validity.valid:
        valid, reason = False, validity.reason
    if remediated and valid:
        reason = "ok (conjunction-plane covariance eigenvalues clipped at (1e-4*HBR)^2)"
    return Pc2DResult(pc if valid else nan, valid, reason, pc, rm, vm, float(sx), float(sz),
                      float(xm), float(zm), hbr, remediated, cov_plane, F, validity)


def pc2d_foster_rtn(r1, v1, cov1_rtn, r2, v2, cov2_rtn, hbr: float, **kwargs) -> Pc2DResult:
    """:func:`pc2d_foster` (with CARA's validity test unless ``check_validity=False``) from inertial
    states [m, m/s] and each object's covariance in its own RTN frame (3x3, 6x6 or larger, m-units),
    rotated to inertial with that object's own state (:func:`rtn_to_inertial`, CARA ``RIC2ECI.m``).
    ``kwargs``: those of :func:`pc2d_foster`."""
    C1 = rtn_to_inertial(cov1_rtn, r1, v1)
    C2 = rtn_to_inertial(cov2_rtn, r2, v2)
    return pc2d_foster(r1, v1, C1, r2, v2, C2, hbr, **kwargs)
