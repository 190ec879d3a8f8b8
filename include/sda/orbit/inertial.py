"""EME2000 (J2000 mean equator and equinox) <-> TEME of date, with no process-wide state.

The rotation of CCSDS TDM right ascension and declination (:mod:`sda.transforms.tdm` reads EME2000
angles into the pipeline's TEME, :mod:`sda.sim.tdm` writes them). TEME is the frame of
:mod:`sda.orbit.frames`: its x axis is GMST (IAU 1982, at UT1 = UTC as with ``eop=None`` there) east of
the Earth-fixed x axis, so with the CIO-based chain

    r_TEME = R3(ERA - GMST82) . C(t) . B^T . r_EME2000

B the frame bias (GCRS -> J2000 mean, IAU 2006: constant), C the bias-precession-nutation matrix
GCRS -> CIRS (IAU 2006/2000A: X, Y, s from the series), ERA the Earth rotation angle. Each factor is an
ERFA (SOFA) routine of its arguments alone (``bp06``, ``xys06a``, ``c2ixys``, ``era00``, ``gmst82``).
brahe's ``rotation_gcrf_to_teme`` is the same chain, but it reads brahe's process-wide EOP provider
(the celestial-pole offsets dX, dY) and precession-nutation model, which the simulator's numerical truth
sets (``sda.orbit.estimation.brahe_setup``) and which nothing sets in a Spark worker: with it, what a file said
depended on what had run before in the process that wrote or read it (~1e-7 deg).

Left out, and why it is harmless here: dX, dY (the IERS corrections to the IAU 2006/2000A pole,
< 1 mas, 5e-9 rad) and UT1-UTC (ERA and GMST82 turn at rates 7e-12 rad/s apart, so a second of UT1-UTC
moves the result by 7e-12 rad) -- both far below the arcsecond noise of the optical sensors. The TT
of the precession-nutation comes from ERFA's leap-second table (a second of TT moves C by ~1e-11 rad).
Agrees with brahe's chain under zero EOP to ~1e-11 rad (tests/include/sim/test_sim_tdm.py).
"""

from __future__ import annotations

import functools
import math

import numpy as np

UNIX_EPOCH_JD = 2440587.5
NS_PER_DAY = 86_400 * 10**9


@functools.cache
def _bias() -> np.ndarray:
    import erfa

    return np.asarray(erfa.bp06(2451545.0, 0.0)[0])  # the frame bias matrix: the same at any date


def eme2000_to_teme(unix_ns) -> np.ndarray:
    """The rotation matrix EME2000 -> TEME of date at UTC unix nanoseconds (an int or an integer array):
    shape (3, 3), or (n, 3, 3) for n times. Its transpose is TEME of date -> EME2000."""
    import erfa

    if np.ndim(unix_ns) == 0:  # Python's integers: a date outside numpy's int64 nanoseconds (1678-2262) too
        days, rest = divmod(int(unix_ns), NS_PER_DAY)
        utc1, utc2 = UNIX_EPOCH_JD + float(days), rest / NS_PER_DAY
    else:
        days, rest = np.divmod(np.asarray(unix_ns, dtype=np.int64), NS_PER_DAY)
        utc1, utc2 = UNIX_EPOCH_JD + days.astype(float), rest.astype(float) / NS_PER_DAY
    tt1, tt2 = erfa.taitt(*erfa.utctai(utc1, utc2))
    cirs = erfa.c2ixys(*erfa.xys06a(tt1, tt2))  # GCRS -> CIRS
    angle = erfa.era00(utc1, utc2) - erfa.gmst82(utc1, utc2)  # UT1 = UTC
    cos, sin = np.cos(angle), np.sin(angle)
    zero, one = np.zeros_like(angle), np.ones_like(angle)
    r3 = np.stack([np.stack([cos, sin, zero], -1), np.stack([-sin, cos, zero], -1),
                   np.stack([zero, zero, one], -1)], -2)
    return r3 @ cirs @ _bias().T


def rotate_radec(ra_deg: float, dec_deg: float, unix_ns: int, inverse: bool = False) -> tuple[float, float]:
    """EME2000 right ascension and declination (deg) -> TEME of date (deg) at UTC unix ns ``unix_ns``
    (``inverse``: TEME of date -> EME2000); right ascension in [0, 360)."""
    rotation = eme2000_to_teme(unix_ns)
    ra, dec = math.radians(ra_deg), math.radians(dec_deg)
    u = np.array([math.cos(dec) * math.cos(ra), math.cos(dec) * math.sin(ra), math.sin(dec)])
    x, y, z = (rotation.T if inverse else rotation) @ u
    return math.degrees(math.atan2(y, x)) % 360.0, math.degrees(math.atan2(z, math.hypot(x, y)))
