"""Conjunction screening maths: the filter chain behind ``jobs/conjunction.py``, in numpy.

The chain, from all pairs of a catalogue to close approaches under a threshold ``D`` over
``[start, end)``:

(a) **altitude bands** -- two objects whose radial bands [perigee, apogee] (mean elements, padded by
    ``D`` and :data:`ALTITUDE_MARGIN_KM` for short-periodic terms) do not overlap can never meet;
(b) **spatial grid** -- positions at the time grid ``t_k = start + k h`` are hashed to cubic cells
    of size ``C``; only objects in the same or adjacent cells at the same step are compared;
(b') **linearised motion** -- a (pair, step) survives only if the straight-line relative motion
    around ``t_k`` comes within ``D`` plus a curvature bound during the half step either side;
(c) **refinement** -- for the surviving pairs, the time of closest approach (TCA) is a root of the
    range-rate ``(r1 - r2) . (v1 - v2)``, found with ``brentq`` on SGP4 itself, then miss distance,
    relative speed and the secondary's position in the primary's RTN frame.

Why no pair under ``D`` is lost (the argument the cell size and the pads rest on):

* every instant ``t*`` of ``[start, end]`` is within ``h/2`` of a grid time ``t_k`` (the grid runs
  from ``start`` to the first ``t_k >= end``);
* the relative speed of two objects never exceeds ``V1 + V2 <= 2 Vmax`` where ``Vmax`` is the
  largest perigee speed in the catalogue (vis-viva, padded by :data:`SPEED_MARGIN`); so if
  ``|r1 - r2| < D`` at ``t*`` then ``|r1 - r2| < D + Vmax h`` at ``t_k``: with cells of that size
  ``C``, the two are in the same or adjacent cells (each axis differs by less than ``C``);
* with relative acceleration at most ``A = A1 + A2`` (central gravity at the perigee radius,
  padded for J2 and drag), Taylor's remainder bounds the departure of the true relative position
  from ``dr + dv tau`` by ``A tau^2 / 2``; so such a pair also has a straight-line minimum over
  ``|tau| <= h/2`` below ``D + A h^2 / 8``, which is filter (b');
* a surviving (pair, step) opens the window ``[t_k - h/2, t_k + h/2]``; windows of consecutive
  steps merge, so ``t*`` lies inside a window, where the range-rate changes sign from - to + and the
  sign change is bracketed by sub-samples (minima of one pair are tens of minutes apart, windows
  are at most a few minutes long).

Times are unix seconds (UTC); positions km, velocities km/s, as in :mod:`sda.frames`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import itertools
import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from sgp4.api import WGS72, Satrec

from sda.frames import MU_KM3_S2, R_EARTH_KM, propagate, unix_to_jd

# SGP4's mean elements are not osculating: short-periodic J2 terms move the radius by < ~10 km and
# drag lowers a LEO orbit by a few km a day; 30 km covers both for the altitude-band filter.
ALTITUDE_MARGIN_KM = 30.0
# Osculating speed can exceed the mean-element vis-viva speed by J2 terms (~0.1 %); 2 % is ample.
SPEED_MARGIN = 1.02
# Gravity beyond the point mass (J2 ~ 0.16 % at LEO) and drag (1e-6 of g); 5 % is ample.
ACCEL_MARGIN = 1.05
# Sub-samples per step inside refinement windows to bracket range-rate sign changes.
REFINE_SUBSAMPLES = 6
# Cells of the grid (27 neighbours): only half of them are probed (lexicographically positive
# offsets plus the cell itself) so that every unordered pair is met exactly once.
HALF_NEIGHBOURS: tuple[tuple[int, int, int], ...] = tuple(
    o for o in itertools.product((-1, 0, 1), repeat=3) if o > (0, 0, 0) or o == (0, 0, 0)
)


# --- bounds -----------------------------------------------------------------------------------------

def perigee_speed_km_s(satrec: Satrec) -> float:
    """The largest speed on the orbit (at perigee, vis-viva on the mean elements)."""
    a = satrec.a * satrec.radiusearthkm
    e = min(max(satrec.ecco, 0.0), 0.999)
    return math.sqrt(MU_KM3_S2 * (1.0 + e) / (a * (1.0 - e)))


def accel_bound_km_s2(perigee_km: np.ndarray | float) -> np.ndarray:
    """Upper bound on an object's acceleration: point-mass gravity at its lowest radius, padded."""
    r_min = np.maximum(R_EARTH_KM + np.asarray(perigee_km, float) - ALTITUDE_MARGIN_KM, R_EARTH_KM - 50.0)
    return ACCEL_MARGIN * MU_KM3_S2 / r_min**2


def cell_size_km(threshold_km: float, step_s: float, vmax_km_s: float) -> float:
    """Grid cell edge: the threshold plus the largest relative motion in half a step (2 Vmax h/2)."""
    return float(threshold_km + SPEED_MARGIN * vmax_km_s * step_s)


def curvature_pad_km(accel_sum_km_s2, step_s: float):
    """Departure from straight-line relative motion within half a step: A (h/2)^2 / 2."""
    return 0.5 * accel_sum_km_s2 * (step_s / 2.0) ** 2


def time_grid(start_unix: float, end_unix: float, step_s: float) -> np.ndarray:
    """``start + k h`` up to the first grid time at or after ``end`` (so every instant is within h/2)."""
    n = int(math.ceil((end_unix - start_unix) / step_s - 1e-9))
    return start_unix + step_s * np.arange(n + 1, dtype=float)


# --- (a) altitude bands -----------------------------------------------------------------------------

def altitude_band_pairs(perigee_km: np.ndarray, apogee_km: np.ndarray, threshold_km: float) -> tuple[np.ndarray, np.ndarray]:
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


# --- (b) positions on the grid ----------------------------------------------------------------------

def satrecs_from_lines(line1: Iterable[str], line2: Iterable[str]) -> list[Satrec]:
    return [Satrec.twoline2rv(l1, l2, WGS72) for l1, l2 in zip(line1, line2)]


def grid_positions(norad_ids: Sequence[int], satrecs: Sequence[Satrec], times: np.ndarray) -> pd.DataFrame:
    """Positions and velocities of every object at every grid time, one row per (object, step) that
    SGP4 could evaluate (error codes are dropped: a decayed object cannot collide)."""
    if len(satrecs) == 0:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in GRID_COLUMNS.items()})
    err, r, v = propagate(satrecs, times)
    n, m = err.shape
    ok = (err == 0).ravel()
    out = pd.DataFrame(
        {
            "step": np.tile(np.arange(m, dtype=np.int64), n),
            "norad_id": np.repeat(np.asarray(norad_ids, dtype=np.int64), m),
            "x": r[..., 0].ravel(), "y": r[..., 1].ravel(), "z": r[..., 2].ravel(),
            "vx": v[..., 0].ravel(), "vy": v[..., 1].ravel(), "vz": v[..., 2].ravel(),
        }
    )
    return out[ok].reset_index(drop=True)


GRID_COLUMNS = {"step": "int64", "norad_id": "int64", "x": "float64", "y": "float64", "z": "float64",
                "vx": "float64", "vy": "float64", "vz": "float64"}


def linear_min_distance(dr: np.ndarray, dv: np.ndarray, half_step_s: float) -> np.ndarray:
    """min over |tau| <= h/2 of |dr + dv tau| (rows of 3-vectors)."""
    dv2 = np.sum(dv * dv, axis=-1)
    tau = np.where(dv2 > 0, -np.sum(dr * dv, axis=-1) / np.where(dv2 > 0, dv2, 1.0), 0.0)
    tau = np.clip(tau, -half_step_s, half_step_s)
    return np.linalg.norm(dr + dv * tau[..., None], axis=-1)


def grid_candidates(pos: pd.DataFrame, objects: pd.DataFrame, threshold_km: float, step_s: float,
                    cell_km: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Numpy/pandas version of the Spark keyed join (the reference the job mirrors).

    ``pos`` from :func:`grid_positions`; ``objects`` has norad_id, perigee_km, apogee_km. Returns
    (grid pairs: primary_id, secondary_id, step passing (a)+(b), the subset also passing (b')).
    """
    pos = pos.merge(objects[["norad_id", "perigee_km", "apogee_km"]], on="norad_id", how="inner")
    for axis in "xyz":
        pos["c" + axis] = np.floor(pos[axis] / cell_km).astype(np.int64)
    probes = []
    for dx, dy, dz in HALF_NEIGHBOURS:
        probe = pos.copy()
        probe["cx"] += dx
        probe["cy"] += dy
        probe["cz"] += dz
        probe["same_cell"] = (dx, dy, dz) == (0, 0, 0)
        probes.append(probe)
    probe = pd.concat(probes, ignore_index=True)
    joined = probe.merge(pos, on=["step", "cx", "cy", "cz"], how="inner", suffixes=("_a", "_b"))
    keep = (joined["norad_id_a"] != joined["norad_id_b"]) & (
        ~joined["same_cell"] | (joined["norad_id_a"] < joined["norad_id_b"])
    )
    joined = joined[keep]
    dr = joined[["x_a", "y_a", "z_a"]].to_numpy() - joined[["x_b", "y_b", "z_b"]].to_numpy()
    dv = joined[["vx_a", "vy_a", "vz_a"]].to_numpy() - joined[["vx_b", "vy_b", "vz_b"]].to_numpy()
    near = (np.linalg.norm(dr, axis=1) < cell_km) & bands_overlap(
        joined["perigee_km_a"].to_numpy(), joined["apogee_km_a"].to_numpy(),
        joined["perigee_km_b"].to_numpy(), joined["apogee_km_b"].to_numpy(), threshold_km,
    )
    grid = pd.DataFrame(
        {
            "primary_id": np.minimum(joined["norad_id_a"], joined["norad_id_b"]).to_numpy(),
            "secondary_id": np.maximum(joined["norad_id_a"], joined["norad_id_b"]).to_numpy(),
            "step": joined["step"].to_numpy(),
        }
    )[near]
    accel = accel_bound_km_s2(joined["perigee_km_a"].to_numpy()) + accel_bound_km_s2(joined["perigee_km_b"].to_numpy())
    lin = linear_min_distance(dr, dv, step_s / 2.0) < threshold_km + curvature_pad_km(accel, step_s)
    return grid.reset_index(drop=True), grid[lin[near]].reset_index(drop=True)


# --- (c) refinement ---------------------------------------------------------------------------------

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


def rtn_components(r_primary: np.ndarray, v_primary: np.ndarray, r_secondary: np.ndarray) -> np.ndarray:
    """The secondary's position relative to the primary in the primary's RTN frame:
    R = r/|r|, N = r x v/|r x v|, T = N x R (over the last axis)."""
    r_p, v_p = np.asarray(r_primary, float), np.asarray(v_primary, float)
    radial = r_p / np.linalg.norm(r_p, axis=-1, keepdims=True)
    h = np.cross(r_p, v_p)
    normal = h / np.linalg.norm(h, axis=-1, keepdims=True)
    transverse = np.cross(normal, radial)
    rel = np.asarray(r_secondary, float) - r_p
    return np.stack([np.sum(rel * radial, axis=-1), np.sum(rel * transverse, axis=-1), np.sum(rel * normal, axis=-1)], axis=-1)


def _state(sat: Satrec, t: float) -> tuple[np.ndarray, np.ndarray] | None:
    jd, fr = unix_to_jd(t)
    err, r, v = sat.sgp4(float(jd), float(fr))
    if err != 0:
        return None
    return np.asarray(r), np.asarray(v)


class _PropagationError(Exception):
    pass


def _range_rate(sat1: Satrec, sat2: Satrec, t: float) -> float:
    s1, s2 = _state(sat1, t), _state(sat2, t)
    if s1 is None or s2 is None:
        raise _PropagationError(t)
    return float(np.dot(s1[0] - s2[0], s1[1] - s2[1]))


def refine_window(primary_id: int, secondary_id: int, sat1: Satrec, sat2: Satrec,
                  t_lo: float, t_hi: float, subsamples: int) -> list[Approach]:
    """Closest approaches (range-rate roots going - to +) of two objects inside [t_lo, t_hi]."""
    from scipy.optimize import brentq

    ts = np.linspace(t_lo, t_hi, max(subsamples, 1) + 1)
    try:
        f = np.array([_range_rate(sat1, sat2, t) for t in ts])
    except _PropagationError:
        return []
    out = []
    for a, b, fa, fb in zip(ts[:-1], ts[1:], f[:-1], f[1:]):
        if not (fa < 0.0 <= fb):
            continue
        try:
            tca = b if fb == 0.0 else brentq(lambda t: _range_rate(sat1, sat2, t), a, b, xtol=1e-5, rtol=1e-15)
        except _PropagationError:
            continue
        (r1, v1), (r2, v2) = _state(sat1, tca), _state(sat2, tca)
        rtn = rtn_components(r1, v1, r2)
        out.append(Approach(int(primary_id), int(secondary_id), float(tca), float(np.linalg.norm(r1 - r2)),
                            float(np.linalg.norm(v1 - v2)), float(rtn[0]), float(rtn[1]), float(rtn[2])))
    return out


def step_windows(steps: Iterable[int], grid_start: float, step_s: float, start: float, end: float) -> list[tuple[float, float]]:
    """Merge candidate steps into windows [t_k - h/2, t_k + h/2] (consecutive steps joined), clipped
    to the screening interval."""
    windows: list[list[int]] = []
    for k in sorted(set(int(s) for s in steps)):
        if windows and k == windows[-1][1] + 1:
            windows[-1][1] = k
        else:
            windows.append([k, k])
    out = []
    for k0, k1 in windows:
        lo = max(grid_start + (k0 - 0.5) * step_s, start)
        hi = min(grid_start + (k1 + 0.5) * step_s, end)
        if hi > lo:
            out.append((lo, hi))
    return out


def refine_pairs(pairs: pd.DataFrame, satrecs: dict[int, Satrec], grid_start: float, step_s: float,
                 start: float, end: float, threshold_km: float) -> pd.DataFrame:
    """``pairs`` has primary_id, secondary_id, steps (list of candidate steps). Returns the closest
    approaches with miss < threshold and TCA in [start, end), columns of :data:`APPROACH_COLUMNS`."""
    rows: list[Approach] = []
    for p, s, steps in zip(pairs["primary_id"], pairs["secondary_id"], pairs["steps"]):
        sat1, sat2 = satrecs.get(int(p)), satrecs.get(int(s))
        if sat1 is None or sat2 is None:
            continue
        for lo, hi in step_windows(steps, grid_start, step_s, start, end):
            n_sub = max(2, int(math.ceil((hi - lo) / step_s * REFINE_SUBSAMPLES)))
            rows.extend(a for a in refine_window(p, s, sat1, sat2, lo, hi, n_sub)
                        if a.miss_km < threshold_km and start <= a.tca_unix < end)
    frame = pd.DataFrame([dataclasses.asdict(a) for a in rows], columns=list(APPROACH_COLUMNS))
    return frame.astype(APPROACH_COLUMNS)


APPROACH_COLUMNS = {"primary_id": "int64", "secondary_id": "int64", "tca_unix": "float64", "miss_km": "float64",
                    "rel_speed_km_s": "float64", "r_km": "float64", "t_km": "float64", "n_km": "float64"}


def event_id(primary_id: int, secondary_id: int, tca_unix: float) -> str:
    """Deterministic id: sha256 of the pair and the TCA rounded to the minute."""
    minute = dt.datetime.fromtimestamp(round(tca_unix / 60.0) * 60.0, tz=dt.timezone.utc)
    text = f"{int(primary_id)}|{int(secondary_id)}|{minute:%Y-%m-%dT%H:%MZ}"
    return hashlib.sha256(text.encode()).hexdigest()


# --- the whole chain without Spark ------------------------------------------------------------------

def screen(norad_ids: Sequence[int], satrecs: Sequence[Satrec], start: float, end: float,
           threshold_km: float, step_s: float) -> tuple[pd.DataFrame, dict[str, int]]:
    """Screen a (small) catalogue with the same chain as the Spark job, in one process."""
    ids = np.asarray(norad_ids, dtype=np.int64)
    perigee = np.array([s.a * s.radiusearthkm * (1 - s.ecco) - s.radiusearthkm for s in satrecs])
    apogee = np.array([s.a * s.radiusearthkm * (1 + s.ecco) - s.radiusearthkm for s in satrecs])
    objects = pd.DataFrame({"norad_id": ids, "perigee_km": perigee, "apogee_km": apogee})
    vmax = max((perigee_speed_km_s(s) for s in satrecs), default=0.0)
    cell = cell_size_km(threshold_km, step_s, vmax)
    times = time_grid(start, end, step_s)
    pos = grid_positions(ids, satrecs, times)
    grid, linear = grid_candidates(pos, objects, threshold_km, step_s, cell)
    pairs = linear.groupby(["primary_id", "secondary_id"], as_index=False)["step"].agg(list).rename(columns={"step": "steps"})
    events = refine_pairs(pairs, dict(zip(ids.tolist(), satrecs)), start, step_s, start, end, threshold_km)
    metrics = {
        "objects": len(ids),
        "pairs_all": len(ids) * (len(ids) - 1) // 2,
        "pairs_altitude": altitude_band_pair_count(perigee, apogee, threshold_km),
        "pair_steps_grid": len(grid),
        "pairs_grid": int(grid[["primary_id", "secondary_id"]].drop_duplicates().shape[0]),
        "pair_steps_linear": len(linear),
        "pairs_linear": len(pairs),
        "events": len(events),
    }
    return events, metrics


# --- synthetic element sets (tests, benchmarks) -----------------------------------------------------

def tle_from_elements(norad_id: int, epoch: dt.datetime, altitude_km: float, ecc: float, inc_deg: float,
                      raan_deg: float, argp_deg: float, mean_anomaly_deg: float, bstar: float = 0.0) -> tuple[str, str]:
    """TLE lines for mean elements (semi-major axis given as ``altitude_km`` above the equatorial
    radius), through ``sgp4init`` and ``sgp4.exporter`` -- what the catalogue stores."""
    from sgp4 import exporter

    a_km = R_EARTH_KM + altitude_km
    n_rad_min = math.sqrt(MU_KM3_S2 / a_km**3) * 60.0
    epoch_days = (epoch - dt.datetime(1949, 12, 31, tzinfo=dt.timezone.utc)).total_seconds() / 86400.0
    sat = Satrec()
    def wrap(deg: float) -> float:  # the TLE format wants angles in [0, 360)
        return math.radians(deg % 360.0)

    sat.sgp4init(WGS72, "i", int(norad_id), epoch_days, bstar, 0.0, 0.0, ecc, wrap(argp_deg),
                 math.radians(inc_deg), wrap(mean_anomaly_deg), n_rad_min, wrap(raan_deg))
    return exporter.export_tle(sat)
