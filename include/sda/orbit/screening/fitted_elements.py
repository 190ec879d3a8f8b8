"""An SGP4 element set fitted to a fused orbit's predicted trajectory: what the screening propagates.

The screening (:mod:`sda.orbit.screening`) and correlation propagate thousands of objects at every grid
step with ``SatrecArray``; a numerical propagation per object there would cost seconds per object. So a
fused orbit is also given an element set fitted to its own prediction over the screening horizon: the
screening finds candidates on it, and the events of fused objects are then refined on the numerical
prediction itself (:mod:`sda.orbit.screening.fused_refinement`).

:func:`fit_to_trajectory` is a differential correction: the seven SGP4 elements (mean motion,
eccentricity, inclination, node, argument of perigee, mean anomaly, B*) at the fused epoch, by
Gauss-Newton on the TEME position residuals at the sample times, Jacobian by finite differences (the
eight element sets propagated together with ``SatrecArray``). It starts from the catalogue's element
set carried to the epoch (SGP4's own mean elements there), which is close: three or four iterations.
What it cannot follow (SGP4's theory against a numerical force model: some 10-100 m in LEO over a day)
is returned as the fit's RMS and largest error, the screening's padding.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from sgp4.api import WGS72, Satrec, SatrecArray
from sgp4.exporter import export_tle

from sda.orbit import frames
from sda.orbit.frames import SGP4_EPOCH_JD

#: finite-difference steps of the seven elements (rad/min, -, rad, rad, rad, rad, 1/earth radii)
_STEPS = np.array([1e-9, 1e-7, 1e-7, 1e-7, 1e-7, 1e-7, 1e-6])


@dataclasses.dataclass(frozen=True)
class FittedSet:
    """The fitted element set (its TLE lines), its RMS and largest position error (m) over the samples."""

    line1: str
    line2: str
    rms_m: float
    max_m: float
    iterations: int


def _elements(sat: Satrec) -> np.ndarray:
    return np.array([sat.no_kozai, sat.ecco, sat.inclo, sat.nodeo, sat.argpo, sat.mo, sat.bstar])


def _satrec(template: Satrec, epoch_jd: float, el: np.ndarray) -> Satrec:
    sat = Satrec()
    sat.sgp4init(WGS72, "i", template.satnum, epoch_jd - SGP4_EPOCH_JD, float(el[6]), 0.0, 0.0,
                 float(min(max(el[1], 1e-7), 0.999)), float(el[4] % (2 * math.pi)), float(el[2]),
                 float(el[5] % (2 * math.pi)), float(el[0]), float(el[3] % (2 * math.pi)))
    sat.classification = getattr(template, "classification", "U") or "U"
    sat.intldesg = getattr(template, "intldesg", "") or ""
    return sat


def _start(reference: Satrec, epoch_unix: float) -> np.ndarray:
    """The reference element set's mean elements at ``epoch_unix`` (SGP4's own, after propagating there)."""
    jd, fr = frames.unix_to_jd(epoch_unix)
    reference.sgp4(float(jd), float(fr))
    no_kozai = reference.nm if hasattr(reference, "nm") and reference.nm > 0 else reference.no_kozai
    return np.array([no_kozai, reference.em, reference.im, reference.Om, reference.om, reference.mm, reference.bstar])


def _positions(sats: list[Satrec], jd: np.ndarray, fr: np.ndarray) -> np.ndarray:
    err, r, _ = SatrecArray(sats).sgp4(jd, fr)
    r = np.where((err != 0)[..., None], np.nan, r)
    return r  # [n, m, 3] km


def fit_to_trajectory(reference: Satrec, epoch_unix: float, times: np.ndarray, r_km: np.ndarray,
                      max_iterations: int = 8) -> FittedSet:
    """An element set with epoch ``epoch_unix`` whose SGP4 positions follow ``r_km`` [m, 3] (TEME km) at
    ``times`` (unix s); ``reference`` (the catalogue's element set) gives the start and the identity."""
    epoch_jd = frames.UNIX_EPOCH_JD + float(epoch_unix) / 86400.0
    jd, fr = frames.unix_to_jd(np.asarray(times, float))
    target = np.asarray(r_km, float)
    el = _start(reference, epoch_unix)
    best: tuple[float, np.ndarray] | None = None
    iteration, previous = 0, math.inf
    for iteration in range(1, max_iterations + 1):
        sats = [_satrec(reference, epoch_jd, el)] + [_satrec(reference, epoch_jd, el + np.eye(7)[k] * _STEPS[k])
                                                     for k in range(7)]
        r = _positions(sats, jd, fr)
        res = (target - r[0]).ravel()
        if not np.isfinite(res).all():
            break
        cost = float(res @ res)
        if best is None or cost < best[0]:
            best = (cost, el.copy())
        jac = np.stack([((r[k + 1] - r[0]) / _STEPS[k]).ravel() for k in range(7)], axis=1)
        scale = np.linalg.norm(jac, axis=0)
        scale[scale == 0] = 1.0
        dx = np.linalg.lstsq(jac / scale, res, rcond=None)[0] / scale
        el = el + dx
        if previous - cost < 1e-6 * cost:  # no longer improving (near-circular orbits leave argp + M free)
            break
        previous = cost
    if best is None:
        raise ValueError(f"object {reference.satnum}: SGP4 cannot follow the trajectory from its element set")
    return _exported(reference, epoch_jd, best[1], jd, fr, target, iteration)


def _exported(reference: Satrec, epoch_jd: float, el: np.ndarray, jd, fr, target, iterations: int) -> FittedSet:
    """The lines as the catalogue holds them (rounded by the TLE format), scored as read back."""
    line1, line2 = export_tle(_satrec(reference, epoch_jd, el))
    sat = Satrec.twoline2rv(line1, line2, WGS72)
    err = np.linalg.norm(_positions([sat], jd, fr)[0] - target, axis=1) * 1000.0
    if not np.isfinite(err).all():
        raise ValueError(f"object {reference.satnum}: the fitted element set fails to propagate")
    return FittedSet(line1, line2, float(np.sqrt(np.mean(err**2))), float(err.max()), iterations)
