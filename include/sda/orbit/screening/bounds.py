"""The bounds the filter chain's argument rests on (see :mod:`sda.orbit.screening`): the margins on
SGP4's mean elements, each object's speed and acceleration bounds, the curvature pad of filter (b'),
and filter (a), the altitude bands."""

from __future__ import annotations

import math

import numpy as np
from sgp4.api import Satrec

from sda.orbit.frames import MU_KM3_S2, R_EARTH_KM

# SGP4's mean elements are not osculating: short-periodic J2 terms move the radius by < ~10 km and
# drag lowers a LEO orbit by a few km a day; 30 km covers both for the altitude-band filter.
ALTITUDE_MARGIN_KM = 30.0
# Osculating speed can exceed the mean-element vis-viva speed by J2 terms (~0.1 %); 2 % is ample.
SPEED_MARGIN = 1.02
# Gravity beyond the point mass (J2 ~ 0.16 % at LEO) and drag (1e-6 of g); 5 % is ample.
ACCEL_MARGIN = 1.05


def perigee_speed_km_s(satrec: Satrec) -> float:
    """The largest speed on the orbit (at perigee, vis-viva on the mean elements)."""
    a = satrec.a * satrec.radiusearthkm
    e = min(max(satrec.ecco, 0.0), 0.999)
    return math.sqrt(MU_KM3_S2 * (1.0 + e) / (a * (1.0 - e)))


def accel_bound_km_s2(perigee_km: np.ndarray | float) -> np.ndarray:
    """Upper bound on an object's acceleration: point-mass gravity at its lowest radius, padded."""
    r_min = np.maximum(R_EARTH_KM + np.asarray(perigee_km, float) - ALTITUDE_MARGIN_KM, R_EARTH_KM - 50.0)
    return ACCEL_MARGIN * MU_KM3_S2 / r_min**2


def curvature_pad_km(accel_sum_km_s2, step_s: float):
    """Departure from straight-line relative motion within half a step: A (h/2)^2 / 2."""
    return 0.5 * accel_sum_km_s2 * (step_s / 2.0) ** 2


# --- (a) altitude bands -----------------------------------------------------------------------------

def altitude_band_pairs(perigee_km: np.ndarray, apogee_km: np.ndarray,
                        threshold_km: float) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j in the sorted sense, returned as original indices) whose padded bands overlap.

    Sort by perigee; object i can only meet objects whose perigee lies below its padded apogee,
    found with one ``searchsorted`` per object (no all-pairs matrix).
    """
    lo = np.asarray(perigee_km, float) - threshold_km - ALTITUDE_MARGIN_KM
    hi = np.asarray(apogee_km, float) + threshold_km + ALTITUDE_MARGIN_KM
    order = np.argsort(lo, kind="stable")
    lo_s, hi_s = lo[order], hi[order]
    ends = np.searchsorted(lo_s, hi_s, side="right")  # j with lo_j <= hi_i (and j > i: lo_j >= lo_i)
    counts = np.maximum(ends - np.arange(len(lo_s)) - 1, 0)
    first = np.repeat(np.arange(len(lo_s)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    second = first + 1 + offsets
    return order[first], order[second]


def altitude_band_pair_count(perigee_km: np.ndarray, apogee_km: np.ndarray, threshold_km: float) -> int:
    lo = np.asarray(perigee_km, float) - threshold_km - ALTITUDE_MARGIN_KM
    hi = np.asarray(apogee_km, float) + threshold_km + ALTITUDE_MARGIN_KM
    lo_s = np.sort(lo)
    hi_s = hi[np.argsort(lo, kind="stable")]
    ends = np.searchsorted(lo_s, hi_s, side="right")
    return int(np.maximum(ends - np.arange(len(lo_s)) - 1, 0).sum())


def bands_overlap(p1, a1, p2, a2, threshold_km: float):
    """Element-wise: do two padded altitude bands overlap? (works on numpy arrays and Spark columns)"""
    pad = threshold_km + ALTITUDE_MARGIN_KM
    return (p1 - pad <= a2 + pad) & (p2 - pad <= a1 + pad)
