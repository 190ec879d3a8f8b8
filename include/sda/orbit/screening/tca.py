"""The time of closest approach of one pair (filter (c)'s maths): SGP4 states of an object at many
times, the range-rate ``(r1 - r2) . (v1 - v2)`` and its roots going - to +, and the approach at a
root -- miss distance, relative speed, the secondary in the primary's RTN frame and both TEME
states (:class:`Approach`, one row of :data:`APPROACH_COLUMNS`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd
from sgp4.api import Satrec

from sda.orbit.frames import unix_to_jd


@dataclasses.dataclass(frozen=True)
class Approach:
    primary_id: int
    secondary_id: int
    tca_unix: float
    miss_km: float
    rel_speed_km_s: float
    r_km: float
    t_km: float
    n_km: float
    # both objects' TEME states at TCA (km, km/s): what the covariance and Pc need
    p_x: float
    p_y: float
    p_z: float
    p_vx: float
    p_vy: float
    p_vz: float
    s_x: float
    s_y: float
    s_z: float
    s_vx: float
    s_vy: float
    s_vz: float


APPROACH_COLUMNS = {"primary_id": "int64", "secondary_id": "int64",
                    **{f.name: "float64" for f in dataclasses.fields(Approach)[2:]}}


def approach_frame(rows: Sequence[Approach], flags: Sequence[str | None] | None = None,
                   exact: Sequence[bool] | None = None) -> pd.DataFrame:
    frame = pd.DataFrame([dataclasses.asdict(a) for a in rows], columns=list(APPROACH_COLUMNS)).astype(APPROACH_COLUMNS)
    frame["flag"] = pd.Series(list(flags) if flags is not None else [None] * len(rows), dtype=object)
    frame["exact"] = pd.Series(list(exact) if exact is not None else [False] * len(rows), dtype=bool)
    return frame


def rtn_components(r_primary: np.ndarray, v_primary: np.ndarray, r_secondary: np.ndarray) -> np.ndarray:
    """The secondary's position relative to the primary in the primary's RTN frame:
    R = r/|r|, N = r x v/|r x v|, T = N x R (over the last axis)."""
    r_p, v_p = np.asarray(r_primary, float), np.asarray(v_primary, float)
    radial = r_p / np.linalg.norm(r_p, axis=-1, keepdims=True)
    h = np.cross(r_p, v_p)
    normal = h / np.linalg.norm(h, axis=-1, keepdims=True)
    transverse = np.cross(normal, radial)
    rel = np.asarray(r_secondary, float) - r_p
    return np.stack([np.sum(rel * radial, axis=-1), np.sum(rel * transverse, axis=-1),
                     np.sum(rel * normal, axis=-1)], axis=-1)


def states_at(sat: Satrec, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(error codes, r km, v km/s) of one object at many times: one vectorised SGP4 call."""
    jd, fr = unix_to_jd(np.asarray(times, dtype=float))
    err, r, v = sat.sgp4_array(np.atleast_1d(jd), np.atleast_1d(fr))
    return err, r, v


def _range_rates(sat1: Satrec, sat2: Satrec, times: np.ndarray) -> np.ndarray | None:
    """(r1 - r2) . (v1 - v2) at ``times``; None if SGP4 refuses either object at any of them."""
    e1, r1, v1 = states_at(sat1, times)
    e2, r2, v2 = states_at(sat2, times)
    if e1.any() or e2.any():
        return None
    return np.einsum("ij,ij->i", r1 - r2, v1 - v2)


REFINE_FINE_POINTS = 33  # samples across a bracket before interpolating the root


def _root(sat1: Satrec, sat2: Satrec, a: float, b: float) -> float | None:
    """The range-rate root inside [a, b] (f(a) < 0 <= f(b)): sample the bracket finely, interpolate
    linearly between the samples around the sign change, then once more between the root estimate
    and its neighbour on the other side. Range-rate is smooth (relative acceleration is small next
    to |dv|^2), so the error is far under a millisecond -- far under the 1 s the TCA needs."""
    ts = np.linspace(a, b, REFINE_FINE_POINTS)
    f = _range_rates(sat1, sat2, ts)
    if f is None:
        return None
    k = int(np.argmax(f >= 0.0))  # first sample at or past the root (f[-1] >= 0 by the bracket)
    if k == 0 or f[k] == 0.0:
        return float(ts[k])
    lo, hi, flo, fhi = ts[k - 1], ts[k], f[k - 1], f[k]
    t = lo - flo * (hi - lo) / (fhi - flo)
    ft = _range_rates(sat1, sat2, np.array([t]))
    if ft is None or ft[0] == 0.0:
        return float(t)
    if ft[0] < 0.0:
        lo, flo = t, ft[0]
    else:
        hi, fhi = t, ft[0]
    return float(lo - flo * (hi - lo) / (fhi - flo))


def approach_at(p: int, s: int, sat1: Satrec, sat2: Satrec, t: float) -> Approach | None:
    """The two objects' approach at time ``t`` (None if SGP4 refuses either there)."""
    e1, r1, v1 = states_at(sat1, np.array([t]))
    e2, r2, v2 = states_at(sat2, np.array([t]))
    if e1[0] or e2[0]:
        return None
    r1, v1, r2, v2 = r1[0], v1[0], r2[0], v2[0]
    rtn = rtn_components(r1, v1, r2)
    return Approach(int(p), int(s), float(t), float(np.linalg.norm(r1 - r2)), float(np.linalg.norm(v1 - v2)),
                    float(rtn[0]), float(rtn[1]), float(rtn[2]), *map(float, r1), *map(float, v1),
                    *map(float, r2), *map(float, v2))


def roots_of(primary_id: int, secondary_id: int, sat1: Satrec, sat2: Satrec, ts: np.ndarray,
             f: np.ndarray | None) -> list[Approach]:
    """The closest approaches bracketed by the range-rate samples ``f`` at ``ts`` (- to +)."""
    if f is None:
        return []
    out = []
    for a, b, fa, fb in zip(ts[:-1], ts[1:], f[:-1], f[1:]):
        if not (fa < 0.0 <= fb):
            continue
        tca = _root(sat1, sat2, float(a), float(b))
        if tca is None:
            continue
        approach = approach_at(primary_id, secondary_id, sat1, sat2, tca)
        if approach is not None:
            out.append(approach)
    return out


def refine_window(primary_id: int, secondary_id: int, sat1: Satrec, sat2: Satrec,
                  t_lo: float, t_hi: float, subsamples: int) -> list[Approach]:
    """Closest approaches (range-rate roots going - to +) of two objects inside [t_lo, t_hi]."""
    ts = np.linspace(t_lo, t_hi, max(subsamples, 1) + 1)
    return roots_of(primary_id, secondary_id, sat1, sat2, ts, _range_rates(sat1, sat2, ts))
