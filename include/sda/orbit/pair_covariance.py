"""The covariance of a pair's relative position when the two objects' errors share a cause, and the
probabilities taken from it (pure numpy; metres, m/s).

Two orbits predicted through the same atmospheric-density forecast err together: a forecast density too low
by a fraction ``e`` moves every body's prediction by ``e G``, ``G`` its sensitivity to the relative density
error (NASA CARA's "DCP": density forecast uncertainty ``sigma`` and sensitivity vector, Casali et al. 2018,
AAS 18-272). Each object's own covariance holds its ``sigma^2 G G^T``; the relative position's covariance is
not their sum but (CARA's ``Pc_CovXCorr.m``, C18 eq. 11)

    CovXC = P1 + P2 - sigma1 sigma2 (G1 G2^T + G2 G1^T)      (position blocks, one inertial frame),

with each ``G`` given on the R/T/N axes of its own object's state, as CDMs carry it, and turned to inertial
with that state (:func:`dcp_inertial`, CARA's ``cdmobj_DCPvalues.m``). The term applies only when both objects
carry DCP values (CARA neglects an incomplete pair). When both covariances hold their density terms, CovXC
is P1 + P2 less the shared part and stays positive semi-definite; for covariances that do not (an external
CDM), CovXC can lose definiteness: then the uncorrected sum is used and :class:`PairCovariance` says so.

:func:`pc2d_pair` is CARA's 2-D Pc on CovXC (the secondary's covariance zero), :func:`miss_probability` the
same integral over the disc of a given radius instead of the hard-body one: the probability that the miss
distance, projected on the encounter plane, is under that radius.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sda.orbit.pc import Pc2DResult, pc2d_foster, rtn_basis, rtn_to_inertial

__all__ = ["Dcp", "PairCovariance", "dcp_inertial", "pair_covariance", "pc2d_pair", "miss_probability"]

#: CovXC is used when its smallest eigenvalue is at least this fraction of minus its largest (rounding)
NPD_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Dcp:
    """One object's density-forecast terms: ``sigma`` the relative 1-sigma density forecast error
    (dimensionless) and ``rtn`` the state's sensitivity to it, 6 values on the R/T/N axes of the object's
    state (m, m/s per unit relative density error)."""

    sigma: float
    rtn: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "rtn", np.asarray(self.rtn, float).reshape(6))


@dataclass(frozen=True)
class PairCovariance:
    """The relative position's covariance (3x3, inertial, m^2) and whether the shared density term was
    subtracted (``corrected``; False: a DCP missing, or the result not positive semi-definite: ``reason``)."""

    cov: np.ndarray
    corrected: bool
    reason: str


def dcp_inertial(dcp: Dcp, r, v) -> np.ndarray:
    """The 6-vector sensitivity of ``dcp`` turned from the R/T/N axes of the state (r, v) to inertial."""
    m = rtn_basis(r, v)
    return np.r_[m @ dcp.rtn[:3], m @ dcp.rtn[3:]]


def pair_covariance(r1, v1, cov1_rtn, r2, v2, cov2_rtn, dcp1: Dcp | None = None,
                    dcp2: Dcp | None = None) -> PairCovariance:
    """CovXC of the module docstring from inertial states and each object's covariance on its own R/T/N axes."""
    total = rtn_to_inertial(cov1_rtn, r1, v1)[:3, :3] + rtn_to_inertial(cov2_rtn, r2, v2)[:3, :3]
    total = 0.5 * (total + total.T)
    if dcp1 is None or dcp2 is None:
        return PairCovariance(total, False, "no shared density term: DCP values of both objects needed")
    g1, g2 = dcp_inertial(dcp1, r1, v1)[:3], dcp_inertial(dcp2, r2, v2)[:3]
    shared = dcp1.sigma * dcp2.sigma * (np.outer(g1, g2) + np.outer(g2, g1))
    cov = total - shared
    cov = 0.5 * (cov + cov.T)
    lam = np.linalg.eigvalsh(cov)
    if not np.all(np.isfinite(lam)) or lam[0] < -NPD_TOLERANCE * max(abs(lam[-1]), 1e-300):
        return PairCovariance(total, False, f"shared density term left out: the corrected covariance is not "
                                            f"positive semi-definite (eigenvalue {lam[0]:.3g} m^2)")
    return PairCovariance(cov, True, "shared density term subtracted")


def pc2d_pair(r1, v1, cov1_rtn, r2, v2, cov2_rtn, hbr: float, dcp1: Dcp | None = None,
              dcp2: Dcp | None = None, **kwargs) -> Pc2DResult:
    """:func:`sda.orbit.pc.pc2d_foster` on the pair's covariance (:func:`pair_covariance`); without both DCPs
    the same numbers as :func:`sda.orbit.pc.pc2d_foster_rtn`. ``kwargs``: those of ``pc2d_foster``."""
    pair = pair_covariance(r1, v1, cov1_rtn, r2, v2, cov2_rtn, dcp1, dcp2)
    return pc2d_foster(r1, v1, pair.cov, r2, v2, np.zeros((3, 3)), hbr, **kwargs)


def miss_probability(r1, v1, cov1_rtn, r2, v2, cov2_rtn, radius_m: float, dcp1: Dcp | None = None,
                     dcp2: Dcp | None = None) -> float | None:
    """The probability that the miss is under ``radius_m``: the 2-D Gaussian of the relative position on the
    encounter plane (pair covariance) integrated over the disc of that radius about the origin -- the 2-D Pc
    integral with the radius for HBR, whatever CARA's validity verdict (a long encounter's projection is
    the nearest there is). None when it cannot be computed (zero relative velocity, unusable covariance)."""
    res = pc2d_pair(r1, v1, cov1_rtn, r2, v2, cov2_rtn, float(radius_m), dcp1, dcp2, check_validity=False)
    return float(res.pc_2d) if np.isfinite(res.pc_2d) else None
