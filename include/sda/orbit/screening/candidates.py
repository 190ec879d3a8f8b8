"""Conjunction screening maths: the filter chain behind ``jobs/conjunction.py``, in numpy.

The chain, from all pairs of a catalogue to close approaches under a threshold ``D`` over
``[start, end)``:

(a) **altitude bands** -- two objects whose radial bands [perigee, apogee] (mean elements, padded by
    ``D`` and :data:`ALTITUDE_MARGIN_KM` for short-periodic terms) do not overlap can never meet;
(b) **spatial grid** -- positions at the time grid ``t_k = start + k h`` are keyed by cubic cell and
    joined by sorting the keys; only objects in the same or adjacent cells at the same step are
    compared, and a pair only if it lies within its own reach ``D + (V1 + V2) h / 2``. Objects no
    faster than :data:`SLOW_SPEED_KM_S` share a fine grid (cell ``D + V_slow h``); the few faster ones
    (GTO, Molniya) are compared with everything on a coarse one (cell ``D + V_max h``);
(b') **linearised motion** -- a (pair, step) survives only if the straight-line relative motion
    around ``t_k`` comes within ``D`` plus a curvature bound during the half step either side;
(c) **refinement** -- for the surviving pairs, the time of closest approach (TCA) is a root of the
    range-rate ``(r1 - r2) . (v1 - v2)``, found with ``brentq`` on SGP4 itself, then miss distance,
    relative speed and the secondary's position in the primary's RTN frame.

Why no pair under ``D`` is lost (the argument the cell size and the pads rest on):

* every instant ``t*`` of ``[start, end]`` is within ``h/2`` of a grid time ``t_k`` (the grid runs
  from ``start`` to the first ``t_k >= end``);
* the relative speed of two objects never exceeds ``V1 + V2`` where ``Vi`` is object i's perigee
  speed (vis-viva, padded by :data:`SPEED_MARGIN`); so if ``|r1 - r2| < D`` at ``t*`` then
  ``|r1 - r2| < D + (V1 + V2) h / 2`` at ``t_k``; that reach is at most the cell edge of the grid the
  pair is met on (``D + V_slow h`` when both are slow, ``D + V_max h`` otherwise), so the two are in
  the same or adjacent cells (each axis differs by less than one edge);
* with relative acceleration at most ``A = A1 + A2`` (central gravity at the perigee radius,
  padded for J2 and drag), Taylor's remainder bounds the departure of the true relative position
  from ``dr + dv tau`` by ``A tau^2 / 2``; so such a pair also has a straight-line minimum over
  ``|tau| <= h/2`` below ``D + A h^2 / 8``, which is filter (b');
* a surviving (pair, step) opens the window ``[t_k - h/2, t_k + h/2]``; windows of consecutive
  steps merge, so ``t*`` lies inside a window, where the range-rate changes sign from - to + and the
  sign change is bracketed by sub-samples (minima of one pair are tens of minutes apart, windows
  are at most a few minutes long).

Beyond the chain:

* **persistent proximity** -- a pair within ``D`` for a whole step at an edge of the window has no
  range-rate root there; it is worked out on its own (:func:`pair_events`) and reported once, at its
  smallest distance, flagged (:data:`PERSISTENT_FLAGS`);
* **incremental screening** -- :func:`plan_increment` turns the recorded state of the last screening
  into the parts a new one must screen (the new slice of the horizon; the objects whose element set
  changed, on a coarser grid with the second-order bound (b'') of :func:`focus_block_candidates`),
  the events it keeps and the pairs it rechecks; :func:`combine` makes the open events of the lot.

Times are unix seconds (UTC); positions km, velocities km/s, as in :mod:`sda.orbit.frames`.
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

from sda.orbit.frames import MU_KM3_S2, R_EARTH_KM, unix_to_jd

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


# Cells are keyed by one int64: (cx, cy, cz) offset into [0, 2^21) each, z fastest, so the three
# cells of a column (cz - 1, cz, cz + 1) are one contiguous run of keys in sorted order.
_CELL_BITS = 21
_CELL_SPAN = 1 << _CELL_BITS
_CELL_OFFSET = _CELL_SPAN // 2
# The columns probed besides the object's own: lexicographically positive (dx, dy), so that with the
# own column's (0, 0, +1) and the cell itself every unordered pair of neighbouring cells is met once
# -- the 14 cells of HALF_NEIGHBOURS, probed with 9 binary searches instead of 28.
COLUMN_OFFSETS: tuple[tuple[int, int], ...] = ((0, 1), (1, -1), (1, 0), (1, 1))


def cell_keys(pos_km: np.ndarray, cell_km: float) -> np.ndarray:
    cells = np.floor(np.asarray(pos_km, float) / cell_km).astype(np.int64) + _CELL_OFFSET
    if cells.size and (cells.min() < 1 or cells.max() >= _CELL_SPAN - 1):
        raise ValueError(f"positions beyond the cell grid ({_CELL_SPAN} cells of {cell_km} km per axis)")
    return (cells[:, 0] * _CELL_SPAN + cells[:, 1]) * _CELL_SPAN + cells[:, 2]


def _expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each i, the indices j in [lo_i, hi_i): returned as flat (i, j) arrays."""
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    first = np.repeat(np.arange(len(lo)), counts)
    second = np.arange(total) - np.repeat(np.cumsum(counts) - counts - lo, counts)
    return first, second


def _sorted_keys(pos_km: np.ndarray, cell_km: float) -> tuple[np.ndarray, np.ndarray]:
    key = cell_keys(pos_km, cell_km)
    order = np.argsort(key, kind="stable")
    return order, key[order]


def _half_neighbour_pairs(ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of positions (in sorted order) of sorted cell keys ``ks`` in the same or adjacent cells,
    each unordered pair once."""
    n = len(ks)
    firsts, seconds = [], []
    # own column: later rows of the same cell, then the cell above (key + 1)
    a, b = _expand(np.arange(1, n + 1), np.searchsorted(ks, ks + 1, side="right"))
    firsts.append(a)
    seconds.append(b)
    for dx, dy in COLUMN_OFFSETS:
        base = ks + (dx * _CELL_SPAN + dy) * _CELL_SPAN
        a, b = _expand(np.searchsorted(ks, base - 1, side="left"), np.searchsorted(ks, base + 1, side="right"))
        firsts.append(a)
        seconds.append(b)
    return np.concatenate(firsts), np.concatenate(seconds)


def _all_neighbours(ks: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each key of ``query``, the positions in sorted ``ks`` of keys in the 27 surrounding cells:
    (query index, position) pairs."""
    firsts, seconds = [], []
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            base = query + (dx * _CELL_SPAN + dy) * _CELL_SPAN
            a, b = _expand(np.searchsorted(ks, base - 1, side="left"), np.searchsorted(ks, base + 1, side="right"))
            firsts.append(a)
            seconds.append(b)
    return np.concatenate(firsts), np.concatenate(seconds)


def neighbour_pairs(pos_km: np.ndarray, cell_km: float) -> tuple[np.ndarray, np.ndarray]:
    """Every unordered pair of rows of ``pos_km`` lying in the same or adjacent cubic cells of edge
    ``cell_km``, each once: a sort-merge join on the cell key (sort, then binary searches for the
    neighbouring columns), so the work grows with the pairs found, not with n^2."""
    order, ks = _sorted_keys(pos_km, cell_km)
    first, second = _half_neighbour_pairs(ks)
    return order[first], order[second]


def linear_min_distance(dr: np.ndarray, dv: np.ndarray, half_step_s: float) -> np.ndarray:
    """min over |tau| <= h/2 of |dr + dv tau| (rows of 3-vectors)."""
    dv2 = np.sum(dv * dv, axis=-1)
    tau = np.where(dv2 > 0, -np.sum(dr * dv, axis=-1) / np.where(dv2 > 0, dv2, 1.0), 0.0)
    tau = np.clip(tau, -half_step_s, half_step_s)
    return np.linalg.norm(dr + dv * tau[..., None], axis=-1)


@dataclasses.dataclass(frozen=True)
class ScreeningObjects:
    """The catalogue as the grid needs it: ids, SatrecArray, padded bands and acceleration bounds."""

    norad_ids: np.ndarray
    satrecs: list
    perigee_km: np.ndarray
    apogee_km: np.ndarray
    accel_km_s2: np.ndarray
    speed_km_s: np.ndarray  # bound on each object's speed: perigee speed x SPEED_MARGIN

    @classmethod
    def from_satrecs(cls, norad_ids: Sequence[int], satrecs: Sequence[Satrec]) -> "ScreeningObjects":
        perigee = np.array([s.a * s.radiusearthkm * (1 - s.ecco) - s.radiusearthkm for s in satrecs], dtype=float)
        apogee = np.array([s.a * s.radiusearthkm * (1 + s.ecco) - s.radiusearthkm for s in satrecs], dtype=float)
        speed = np.array([SPEED_MARGIN * perigee_speed_km_s(s) for s in satrecs], dtype=float)
        return cls(np.asarray(norad_ids, dtype=np.int64), list(satrecs), perigee, apogee, accel_bound_km_s2(perigee), speed)

    @property
    def vmax_km_s(self) -> float:
        return max((perigee_speed_km_s(s) for s in self.satrecs), default=0.0)

    def grids(self, threshold_km: float, step_s: float) -> "Grids":
        slow = self.speed_km_s <= SLOW_SPEED_KM_S
        v_slow = float(self.speed_km_s[slow].max()) if slow.any() else 0.0
        v_all = float(self.speed_km_s.max()) if len(self.speed_km_s) else 0.0
        return Grids(slow, float(threshold_km + v_slow * step_s), float(threshold_km + v_all * step_s))


# Objects no faster than this (every near-circular orbit, all of LEO but its eccentric members) share
# a grid whose cells are sized to their own speed; the few faster ones (GTO, Molniya, HEO perigees at
# up to ~11 km/s) are compared with everything on a second, coarser grid. One grid sized to the
# fastest object would hold ~2x the candidate pairs in the crowded LEO shells.
SLOW_SPEED_KM_S = 8.2


@dataclasses.dataclass(frozen=True)
class Grids:
    """Cell edges: a pair's relative motion in half a step is at most (V1 + V2) h / 2, so two objects
    within ``threshold`` at some instant are within ``threshold + Vmax h`` at the nearest grid time."""

    slow: np.ndarray  # mask of the objects on the fine grid
    slow_cell_km: float  # threshold + V_slow h: slow-slow pairs
    fast_cell_km: float  # threshold + V_max h: pairs with a fast object


@dataclasses.dataclass(frozen=True)
class CatalogueLines:
    """What travels to the executors: the element sets as text (picklable, ~150 bytes an object)."""

    norad_ids: tuple[int, ...]
    line1: tuple[str, ...]
    line2: tuple[str, ...]

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for n, l1, l2 in zip(self.norad_ids, self.line1, self.line2):
            h.update(f"{n}|{l1}|{l2}\n".encode())
        return h.hexdigest()


_WORKER_OBJECTS: dict[str, tuple[ScreeningObjects, object]] = {}


def worker_objects(catalogue: CatalogueLines) -> tuple[ScreeningObjects, object]:
    """The catalogue's Satrecs and SatrecArray, built once per Python process (Spark reuses its
    Python workers across tasks, so a run parses each element set once per worker, not per task)."""
    from sgp4.api import SatrecArray

    key = catalogue.digest
    if key not in _WORKER_OBJECTS:
        _WORKER_OBJECTS.clear()  # one catalogue at a time: a new run's replaces the last
        objects = ScreeningObjects.from_satrecs(catalogue.norad_ids, satrecs_from_lines(catalogue.line1, catalogue.line2))
        _WORKER_OBJECTS[key] = (objects, SatrecArray(objects.satrecs) if objects.satrecs else None)
    return _WORKER_OBJECTS[key]


@dataclasses.dataclass
class BlockResult:
    """Candidates of a block of grid steps: (primary_id, secondary_id, step) passing (a)+(b)+(b'),
    the number of (pair, step)s that passed (a)+(b) only, and SGP4's failures (first step, code)."""

    primary_id: np.ndarray
    secondary_id: np.ndarray
    step: np.ndarray
    pair_steps_grid: int
    errors: dict[int, tuple[int, int]]  # norad_id -> (first failing step, SGP4 error code)


PROPAGATION_CHUNK_STEPS = 32  # steps propagated at once: n x 32 x 6 doubles (~20 MB for 13k objects)


def _propagated_steps(arr, times: np.ndarray, ids: np.ndarray, first_step: int,
                      errors: dict[int, tuple[int, int]]):
    """Propagate with ``arr`` (a ``SatrecArray``) a chunk of steps at a time and yield, per step,
    (grid step ``first_step + k``, rows SGP4 propagated, positions, velocities); an object's first
    SGP4 error goes to ``errors`` (norad id -> (step, error code))."""
    times = np.asarray(times, dtype=float)
    for c0 in range(0, len(times), PROPAGATION_CHUNK_STEPS):
        jd, fr = unix_to_jd(times[c0:c0 + PROPAGATION_CHUNK_STEPS])
        err, r, v = arr.sgp4(jd, fr)
        for row in np.flatnonzero((err != 0).any(axis=1)):
            k = int(np.argmax(err[row] != 0))
            errors.setdefault(int(ids[row]), (first_step + c0 + k, int(err[row, k])))
        for k in range(err.shape[1]):
            yield first_step + c0 + k, err[:, k] == 0, np.ascontiguousarray(r[:, k, :]), v[:, k, :]


def _block_result(ids: np.ndarray, found: list[tuple[np.ndarray, np.ndarray, int]], grid_count: int,
                  errors: dict[int, tuple[int, int]]) -> "BlockResult":
    """The (primary < secondary) norad ids and grid step of each candidate (rows i, rows j, step)."""
    def cat(parts):
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    return BlockResult(cat([np.minimum(ids[i], ids[j]) for i, j, _ in found]),
                       cat([np.maximum(ids[i], ids[j]) for i, j, _ in found]),
                       cat([np.full(len(i), step, dtype=np.int64) for i, _, step in found]), grid_count, errors)


def _within_reach_and_band(i: np.ndarray, j: np.ndarray, pos: np.ndarray, speed: np.ndarray, per: np.ndarray,
                           apo: np.ndarray, threshold_km: float, step_s: float, pad_km: float):
    """Candidate pairs (i, j) that can come within ``threshold`` in the half step either side
    (``|dr| < threshold + (V_i + V_j) h / 2``) and whose altitude bands, padded, overlap; returns
    them with their separations ``dr``."""
    dr = pos[i] - pos[j]
    reach = threshold_km + (speed[i] + speed[j]) * (step_s / 2.0)
    keep = np.einsum("ij,ij->i", dr, dr) < reach * reach
    i, j, dr = i[keep], j[keep], dr[keep]
    keep = (per[i] - pad_km <= apo[j] + pad_km) & (per[j] - pad_km <= apo[i] + pad_km)
    return i[keep], j[keep], dr[keep]


def block_candidates(objects: ScreeningObjects, times: np.ndarray, first_step: int, threshold_km: float,
                     step_s: float, satrec_array=None) -> BlockResult:
    """Filters (a), (b) and (b') over the grid steps ``first_step + k`` at ``times[k]``.

    Propagates every object with one ``SatrecArray`` per chunk of steps, then per step: a sort-merge
    join on the cell key (slow objects among themselves on the fine grid, fast ones against all on
    the coarse grid, see :class:`Grids`), the pair's own distance bound ``threshold + (V1 + V2) h / 2``,
    the altitude-band predicate, and the straight-line + curvature bound (b')."""
    from sgp4.api import SatrecArray

    arr = satrec_array if satrec_array is not None else SatrecArray(objects.satrecs)
    grids = objects.grids(threshold_km, step_s)
    ids, per, apo = objects.norad_ids, objects.perigee_km, objects.apogee_km
    acc, speed = objects.accel_km_s2, objects.speed_km_s
    pad = threshold_km + ALTITUDE_MARGIN_KM
    reach_max = threshold_km + float(speed.max()) * step_s if len(speed) else 0.0
    found: list[tuple[np.ndarray, np.ndarray, int]] = []  # (rows i, rows j, grid step)
    grid_count = 0
    errors: dict[int, tuple[int, int]] = {}
    for step, ok, pos, vel in _propagated_steps(arr, times, ids, first_step, errors):
        # the largest reach on two axes first (most candidates of the neighbouring cells fail on
        # one), then each pair's own reach on the few left
        i, j = _step_pairs(pos, ok & grids.slow, ok & ~grids.slow, ok, grids, reach_max)
        i, j, dr = _within_reach_and_band(i, j, pos, speed, per, apo, threshold_km, step_s, pad)
        grid_count += len(i)
        dv = vel[i] - vel[j]
        bound = threshold_km + curvature_pad_km(acc[i] + acc[j], step_s)
        keep = linear_min_distance(dr, dv, step_s / 2.0) < bound
        i, j = i[keep], j[keep]
        found.append((i, j, step))
    return _block_result(ids, found, grid_count, errors)


#: SGP4's motion departs from point-mass gravity by J2-J4 (~0.2 % of g in LEO), drag and, in deep
#: space, lunisolar terms: 1 % of g at the lowest radius bounds it with margin (filter b'')
PERTURBATION_FRACTION = 0.01


def quadratic_min_distance(dr: np.ndarray, dv: np.ndarray, da: np.ndarray, half_step_s: float) -> np.ndarray:
    """min over |tau| <= h/2 of |dr + dv tau + da tau^2 / 2| (rows of 3-vectors): the ends and the
    real roots in between of the derivative of its square, a cubic (companion-matrix eigenvalues)."""
    c3 = 0.5 * np.einsum("ij,ij->i", da, da)
    c2 = 1.5 * np.einsum("ij,ij->i", dv, da)
    c1 = np.einsum("ij,ij->i", dv, dv) + np.einsum("ij,ij->i", dr, da)
    c0 = np.einsum("ij,ij->i", dr, dv)

    def dist(tau):
        return np.linalg.norm(dr + dv * tau[:, None] + 0.5 * da * (tau * tau)[:, None], axis=1)

    h = float(half_step_s)
    best = np.minimum(dist(np.full(len(dr), -h)), dist(np.full(len(dr), h)))
    cubic = c3 > 1e-30
    if cubic.any():
        a = np.stack([-c2[cubic] / c3[cubic], -c1[cubic] / c3[cubic], -c0[cubic] / c3[cubic]], axis=1)
        comp = np.zeros((int(cubic.sum()), 3, 3))
        comp[:, 0, :] = a
        comp[:, 1, 0] = 1.0
        comp[:, 2, 1] = 1.0
        roots = np.linalg.eigvals(comp)
        sub = best[cubic]
        idx = np.flatnonzero(cubic)
        for k in range(3):
            tau = np.clip(roots[:, k].real, -h, h)  # a complex pair's real part is no minimum, but harmless
            sub = np.minimum(sub, np.linalg.norm(dr[idx] + dv[idx] * tau[:, None] + 0.5 * da[idx] * (tau * tau)[:, None], axis=1))
        best[cubic] = sub
    flat = ~cubic  # no relative acceleration: the straight line
    if flat.any():
        best[flat] = linear_min_distance(dr[flat], dv[flat], h)
    return best


def gravity_km_s2(pos: np.ndarray) -> np.ndarray:
    r = np.linalg.norm(pos, axis=1)
    return -MU_KM3_S2 * pos / (r * r * r)[:, None]


def focus_block_candidates(objects: ScreeningObjects, times: np.ndarray, first_step: int, threshold_km: float,
                           step_s: float, focus: np.ndarray, satrec_array=None, second_order: bool = True) -> BlockResult:
    """Filters (a), (b) and (b') as :func:`block_candidates`, but only for pairs with at least one
    object of ``focus`` (a boolean mask over ``objects``): the objects whose element set changed,
    screened against everything. Per step, positions are keyed by cubic cells of edge
    ``threshold + (V_focus + V_max) h / 2`` (the largest reach) and each focus object probes the 27
    cells around its own in the sorted keys of every object; each pair then meets its own reach, the
    band predicate and the straight-line bound, as in the grid (the argument of the module docstring
    holds for any step ``h``, so a coarser one may be used). With ``second_order``, (b''): the pair's
    motion around ``t_k`` to second order -- point-mass gravity computed from the positions -- must
    come within ``threshold`` plus a third-order remainder bound during the half step either side:
    ``J tau^3 / 6`` (``J``, :func:`jerk_bound_km_s3`) and ``P tau^2 / 2`` for the rest of SGP4's
    forces (``P`` = :data:`PERTURBATION_FRACTION` of gravity at the perigee). At a coarse step the
    straight-line pad ``A h^2 / 8`` lets through tens of times more pairs than it does on the fine
    grid; the second-order bound brings them back to about as many."""
    from sgp4.api import SatrecArray

    arr = satrec_array if satrec_array is not None else SatrecArray(objects.satrecs)
    ids, per, apo = objects.norad_ids, objects.perigee_km, objects.apogee_km
    acc, speed, jerk = objects.accel_km_s2, objects.speed_km_s, jerk_bound_km_s3(objects)
    focus = np.asarray(focus, dtype=bool)
    pad = threshold_km + ALTITUDE_MARGIN_KM
    if not focus.any():
        return BlockResult(*(np.empty(0, dtype=np.int64),) * 3, 0, {})
    cell_km = threshold_km + (float(speed[focus].max()) + float(speed.max())) * step_s / 2.0
    found: list[tuple[np.ndarray, np.ndarray, int]] = []  # (rows i, rows j, grid step)
    grid_count = 0
    errors: dict[int, tuple[int, int]] = {}
    for step, ok, pos, vel in _propagated_steps(arr, times, ids, first_step, errors):
        every, fr_rows = np.flatnonzero(ok), np.flatnonzero(ok & focus)
        if not len(fr_rows):
            continue
        order, ks = _sorted_keys(pos[every], cell_km)
        q, b = _all_neighbours(ks, cell_keys(pos[fr_rows], cell_km))
        i, j = fr_rows[q], every[order[b]]
        keep = (i != j) & (~focus[j] | (i < j))  # a focus-focus pair once
        i, j, dr = _within_reach_and_band(i[keep], j[keep], pos, speed, per, apo, threshold_km, step_s, pad)
        grid_count += len(i)
        bound = threshold_km + curvature_pad_km(acc[i] + acc[j], step_s)
        dv = vel[i] - vel[j]
        keep = linear_min_distance(dr, dv, step_s / 2.0) < bound
        i, j, dr, dv = i[keep], j[keep], dr[keep], dv[keep]
        # (b'') second order: point-mass gravity from the positions, the rest bounded -- a coarse
        # focus grid keeps its refinement as small as the fine grid's
        if second_order:
            tau = step_s / 2.0
            pad2 = (jerk[i] + jerk[j]) * tau ** 3 / 6.0 + PERTURBATION_FRACTION * (acc[i] + acc[j]) * tau * tau / 2.0
            da = gravity_km_s2(pos[i]) - gravity_km_s2(pos[j])
            keep = quadratic_min_distance(dr, dv, da, tau) < threshold_km + pad2
            i, j = i[keep], j[keep]
        found.append((i, j, step))
    return _block_result(ids, found, grid_count, errors)


def jerk_bound_km_s3(objects: "ScreeningObjects") -> np.ndarray:
    """Bound on the rate of change of each object's point-mass gravity: |d/dt (mu r / r^3)| <=
    mu |v| (1 + 3 |r.v| / (r v)) / r^3 <= mu V (1 + 3 e') / r_min^3, with V the speed bound, r_min the
    padded perigee radius and e' = min(1, 2 e + 0.02) bounding |r.v| / (r v) (= e sin E / sqrt(1 - e^2 cos^2 E))."""
    r_min = np.maximum(R_EARTH_KM + objects.perigee_km - ALTITUDE_MARGIN_KM, R_EARTH_KM - 50.0)
    a = R_EARTH_KM + (objects.perigee_km + objects.apogee_km) / 2.0
    ecc = np.clip((objects.apogee_km - objects.perigee_km) / (2.0 * a), 0.0, 1.0)
    return MU_KM3_S2 * objects.speed_km_s * (1.0 + 3.0 * np.minimum(1.0, 2.0 * ecc + 0.02)) / r_min ** 3


def _near_on_axes(p: np.ndarray, q: np.ndarray, a: np.ndarray, b: np.ndarray, reach_km: float | None) -> np.ndarray:
    """Mask of the candidate pairs (rows a of p, rows b of q) closer than ``reach_km`` on x and on y."""
    if reach_km is None:
        return np.ones(len(a), dtype=bool)
    keep = np.abs(p[a, 0] - q[b, 0]) < reach_km
    keep[keep] = np.abs(p[a[keep], 1] - q[b[keep], 1]) < reach_km
    return keep


def _step_pairs(pos: np.ndarray, slow: np.ndarray, fast: np.ndarray, ok: np.ndarray, grids: Grids,
                reach_km: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Row pairs of one step to test: slow-slow in neighbouring fine cells, and fast-anything in
    neighbouring coarse cells (fast-fast once), never an object with itself. With ``reach_km``, only
    pairs closer than it on the x and y axes (checked on the positions in cell order, where
    neighbours are close in memory too)."""
    rows = np.flatnonzero(slow)
    order, ks = _sorted_keys(pos[rows], grids.slow_cell_km)
    a, b = _half_neighbour_pairs(ks)
    sorted_pos = pos[rows[order]]
    keep = _near_on_axes(sorted_pos, sorted_pos, a, b, reach_km)
    a, b = a[keep], b[keep]
    pairs_i, pairs_j = [rows[order[a]]], [rows[order[b]]]
    fast_rows = np.flatnonzero(fast)
    if len(fast_rows):
        every = np.flatnonzero(ok)
        order, ks = _sorted_keys(pos[every], grids.fast_cell_km)
        q, b = _all_neighbours(ks, cell_keys(pos[fast_rows], grids.fast_cell_km))
        keep = _near_on_axes(pos[fast_rows], pos[every[order]], q, b, reach_km)
        q, b = q[keep], b[keep]
        i, j = fast_rows[q], every[order[b]]
        # drop self-pairs, and keep a fast-fast pair once (from its lower row)
        keep = (i != j) & (~fast[j] | (i < j))
        pairs_i.append(i[keep])
        pairs_j.append(j[keep])
    return np.concatenate(pairs_i), np.concatenate(pairs_j)


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


def _states(sat: Satrec, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(error codes, r km, v km/s) of one object at many times: one vectorised SGP4 call."""
    jd, fr = unix_to_jd(np.asarray(times, dtype=float))
    err, r, v = sat.sgp4_array(np.atleast_1d(jd), np.atleast_1d(fr))
    return err, r, v


def _range_rates(sat1: Satrec, sat2: Satrec, times: np.ndarray) -> np.ndarray | None:
    """(r1 - r2) . (v1 - v2) at ``times``; None if SGP4 refuses either object at any of them."""
    e1, r1, v1 = _states(sat1, times)
    e2, r2, v2 = _states(sat2, times)
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


def refine_window(primary_id: int, secondary_id: int, sat1: Satrec, sat2: Satrec,
                  t_lo: float, t_hi: float, subsamples: int) -> list[Approach]:
    """Closest approaches (range-rate roots going - to +) of two objects inside [t_lo, t_hi]."""
    ts = np.linspace(t_lo, t_hi, max(subsamples, 1) + 1)
    return _roots_of(primary_id, secondary_id, sat1, sat2, ts, _range_rates(sat1, sat2, ts))


def _roots_of(primary_id: int, secondary_id: int, sat1: Satrec, sat2: Satrec, ts: np.ndarray,
              f: np.ndarray | None) -> list["Approach"]:
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
        e1, r1, v1 = _states(sat1, np.array([tca]))
        e2, r2, v2 = _states(sat2, np.array([tca]))
        if e1[0] or e2[0]:
            continue
        r1, v1, r2, v2 = r1[0], v1[0], r2[0], v2[0]
        rtn = rtn_components(r1, v1, r2)
        out.append(Approach(int(primary_id), int(secondary_id), float(tca), float(np.linalg.norm(r1 - r2)),
                            float(np.linalg.norm(v1 - v2)), float(rtn[0]), float(rtn[1]), float(rtn[2]),
                            *map(float, r1), *map(float, v1), *map(float, r2), *map(float, v2)))
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


# A candidate of an incremental screening names its part (one grid of its own) and its step in one
# int64: part << PART_SHIFT | step.
PART_SHIFT = 32


@dataclasses.dataclass(frozen=True)
class Part:
    """One piece of a screening: the grid ``start + k step_s`` over [start, end), all objects against
    all (``focus`` None) or only pairs with at least one object of ``focus`` (norad ids)."""

    start: float
    end: float
    step_s: float
    focus: tuple[int, ...] | None = None


def part_windows(codes: Iterable[int], parts: Sequence[Part]) -> list[tuple[float, float]]:
    """The refinement windows of one pair from its candidate (part, step) codes: each part's windows
    (:func:`step_windows`, clipped to the part), then merged across parts -- a window that runs over
    the border of two parts is one window, so a range-rate root at that border is still bracketed."""
    by_part: dict[int, list[int]] = {}
    for c in codes:
        by_part.setdefault(int(c) >> PART_SHIFT, []).append(int(c) & ((1 << PART_SHIFT) - 1))
    spans = sorted(w for k, steps in by_part.items()
                   for w in step_windows(steps, parts[k].start, parts[k].step_s, parts[k].start, parts[k].end))
    merged: list[list[float]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def refine_pairs(pairs: pd.DataFrame, satrecs: dict[int, Satrec], grid_start: float, step_s: float,
                 start: float, end: float, threshold_km: float, parts: Sequence[Part] | None = None) -> pd.DataFrame:
    """``pairs`` has primary_id, secondary_id, steps (list of candidate steps; with ``parts``, codes
    part << PART_SHIFT | step). Returns the closest approaches with miss < threshold and TCA in
    [start, end), columns of :data:`APPROACH_COLUMNS`, plus ``flag`` (None: a range-rate root; else
    persistent proximity, :func:`pair_events`) and ``exact`` (the pair's events over the whole of
    [start, end) were worked out by :func:`pair_events`: they replace any other of the pair's).

    A pair whose windows touch ``start`` or ``end`` may be a persistent proximity (closest at the
    edge, or within the threshold throughout): when it is within the threshold there for a whole
    step (two grid times), its events are those of :func:`pair_events` over the whole interval."""
    parts = list(parts) if parts is not None else [Part(grid_start, end, step_s)]
    rows: list[Approach] = []
    flags: list[str | None] = []
    exact: list[bool] = []
    cache: dict = {}
    for p, s, steps in zip(pairs["primary_id"], pairs["secondary_id"], pairs["steps"]):
        sat1, sat2 = satrecs.get(int(p)), satrecs.get(int(s))
        if sat1 is None or sat2 is None:
            continue
        windows = part_windows(steps, parts)
        if windows and (windows[0][0] <= start or windows[-1][1] >= end) and \
                edge_within(sat1, sat2, start, end, threshold_km, step_s):
            found = pair_events(int(p), int(s), sat1, sat2, start, end, threshold_km, step_s, cache)
            rows.extend(a for a, _ in found)
            flags.extend(f for _, f in found)
            exact.extend([True] * len(found))
            if not found:  # remember that the pair was worked out whole: no event is also an answer
                rows.append(_no_event(int(p), int(s)))
                flags.append(NO_EVENT)
                exact.append(True)
            continue
        for lo, hi in windows:
            n_sub = max(2, int(math.ceil((hi - lo) / step_s * REFINE_SUBSAMPLES)))
            for a in refine_window(p, s, sat1, sat2, lo, hi, n_sub):
                if a.miss_km < threshold_km and start <= a.tca_unix < end:
                    rows.append(a)
                    flags.append(None)
                    exact.append(False)
    return approach_frame(rows, flags, exact)


def approach_frame(rows: Sequence["Approach"], flags: Sequence[str | None] | None = None,
                   exact: Sequence[bool] | None = None) -> pd.DataFrame:
    frame = pd.DataFrame([dataclasses.asdict(a) for a in rows], columns=list(APPROACH_COLUMNS)).astype(APPROACH_COLUMNS)
    frame["flag"] = pd.Series(list(flags) if flags is not None else [None] * len(rows), dtype=object)
    frame["exact"] = pd.Series(list(exact) if exact is not None else [False] * len(rows), dtype=bool)
    return frame


# --- persistent proximity ---------------------------------------------------------------------------
#
# Two objects that stay close (formation flyers, docked or co-located objects, a deployment) may have
# no range-rate root in the window -- closest at one of its edges -- or be within the threshold all
# along. They are reported once per pair, at their smallest distance in the window, with a flag:

PERSISTENT_WHOLE = "persistent: within the threshold for the whole window"
PERSISTENT_START = "persistent: closest at the window start, no approach inside"
PERSISTENT_END = "persistent: closest at the window end, no approach inside"
NO_EVENT = "none"  # a pair worked out whole (exact) without any event: a marker row, dropped later
PERSISTENT_FLAGS = (PERSISTENT_WHOLE, PERSISTENT_START, PERSISTENT_END)


def is_persistent(flag) -> bool:
    return isinstance(flag, str) and flag.startswith("persistent")


def persistent_event_id(primary_id: int, secondary_id: int) -> str:
    """A persistent proximity is one event per pair, whatever its time: sha256 of the pair."""
    return hashlib.sha256(f"{int(primary_id)}|{int(secondary_id)}|persistent".encode()).hexdigest()


def _no_event(p: int, s: int) -> "Approach":
    return Approach(p, s, *([float("nan")] * (len(dataclasses.fields(Approach)) - 2)))


def _distances(sat1: Satrec, sat2: Satrec, times: np.ndarray) -> np.ndarray | None:
    e1, r1, _ = _states(sat1, times)
    e2, r2, _ = _states(sat2, times)
    if e1.any() or e2.any():
        return None
    return np.linalg.norm(r1 - r2, axis=-1)


def edge_samples(start: float, end: float, step_s: float) -> np.ndarray:
    """The times a window's proximity is judged at: ``start + k h`` inside [start, end), and the end
    (1 ms before it: TCAs are in [start, end))."""
    ts = start + step_s * np.arange(int(math.ceil((end - start) / step_s - 1e-9)), dtype=float)
    return np.append(ts, end - 1e-3)


def edge_within(sat1: Satrec, sat2: Satrec, start: float, end: float, threshold_km: float, step_s: float) -> bool:
    """Within the threshold for a whole step at an edge of [start, end): at its first two or last two
    judging times (:func:`edge_samples`). A fast pair crossing the threshold at an edge is not."""
    ts = edge_samples(start, end, step_s)
    if len(ts) < 2:
        return False
    d = _distances(sat1, sat2, np.array([ts[0], ts[1], ts[-2], ts[-1]]))
    if d is None:
        return False
    return bool((d[0] < threshold_km and d[1] < threshold_km) or (d[2] < threshold_km and d[3] < threshold_km))


def _approach_at(p: int, s: int, sat1: Satrec, sat2: Satrec, t: float) -> "Approach | None":
    e1, r1, v1 = _states(sat1, np.array([t]))
    e2, r2, v2 = _states(sat2, np.array([t]))
    if e1[0] or e2[0]:
        return None
    r1, v1, r2, v2 = r1[0], v1[0], r2[0], v2[0]
    rtn = rtn_components(r1, v1, r2)
    return Approach(int(p), int(s), float(t), float(np.linalg.norm(r1 - r2)), float(np.linalg.norm(v1 - v2)),
                    float(rtn[0]), float(rtn[1]), float(rtn[2]), *map(float, r1), *map(float, v1),
                    *map(float, r2), *map(float, v2))


def pair_events(p: int, s: int, sat1: Satrec, sat2: Satrec, start: float, end: float, threshold_km: float,
                step_s: float, cache: dict | None = None) -> list[tuple["Approach", str | None]]:
    """Every event of one pair over [start, end), worked out on the pair alone: the range-rate roots
    with miss < threshold (brackets from samples one step apart over the whole interval: the pairs
    worked out whole move slowly relative to each other, their roots are a large part of an orbit
    apart), and persistent proximity judged at :func:`edge_samples`. ``cache`` (a dict) keeps each
    object's samples for the next pair of the same call (:func:`recheck_pairs`):

    * within the threshold at every judging time -> one event, flag :data:`PERSISTENT_WHOLE`, at the
      smallest distance (a root or an edge); its roots are not reported apart;
    * else within it at the first two judging times with no root under the threshold before the
      distance first reaches it -> :data:`PERSISTENT_START` at the start (the same at the end); one
      event per pair, the closer edge if both; the roots elsewhere are reported as usual.
    """
    ts = edge_samples(start, end, step_s)
    cache = {} if cache is None else cache

    def sampled(n: int, sat: Satrec):
        key = (n, start, end, step_s)
        if key not in cache:
            cache[key] = _states(sat, ts)
        return cache[key]

    (e1, r1, v1), (e2, r2, v2) = sampled(p, sat1), sampled(s, sat2)
    ok = not (e1.any() or e2.any())
    d = np.linalg.norm(r1 - r2, axis=-1) if ok else None
    f = np.einsum("ij,ij->i", r1 - r2, v1 - v2) if ok else None
    roots = [a for a in _roots_of(p, s, sat1, sat2, ts, f) if a.miss_km < threshold_km and start <= a.tca_unix < end]
    if d is None or len(ts) < 2:
        return [(a, None) for a in roots]
    inside = d < threshold_km
    if inside.all():
        candidates = roots + [a for a in (_approach_at(p, s, sat1, sat2, ts[0]), _approach_at(p, s, sat1, sat2, ts[-1])) if a]
        best = min(candidates, key=lambda a: a.miss_km)
        return [(best, PERSISTENT_WHOLE)]
    edges = []
    if inside[0] and inside[1]:
        first_out = ts[int(np.argmin(inside))]
        if not any(a.tca_unix <= first_out for a in roots):
            edges.append((ts[0], PERSISTENT_START))
    if inside[-1] and inside[-2]:
        last_out = ts[len(ts) - 1 - int(np.argmin(inside[::-1]))]
        if not any(a.tca_unix >= last_out for a in roots):
            edges.append((ts[-1], PERSISTENT_END))
    out: list[tuple[Approach, str | None]] = [(a, None) for a in roots]
    found = [(a, flag) for t, flag in edges if (a := _approach_at(p, s, sat1, sat2, t)) is not None]
    if found:
        out.append(min(found, key=lambda x: x[0].miss_km))
    return out


APPROACH_COLUMNS = {"primary_id": "int64", "secondary_id": "int64",
                    **{f.name: "float64" for f in dataclasses.fields(Approach)[2:]}}


def event_id(primary_id: int, secondary_id: int, tca_unix: float) -> str:
    """Deterministic id: sha256 of the pair and the TCA rounded to the minute."""
    minute = dt.datetime.fromtimestamp(round(tca_unix / 60.0) * 60.0, tz=dt.timezone.utc)
    text = f"{int(primary_id)}|{int(secondary_id)}|{minute:%Y-%m-%dT%H:%MZ}"
    return hashlib.sha256(text.encode()).hexdigest()


# --- incremental screening: what to screen, what to keep ---------------------------------------------
#
# A screening records its state (sda.lake.tables ``screening_state``, ``screening_events``): the horizon it
# covered, the element-set epoch it screened per object, threshold, step and code version, and its
# open events. The next screening of [start, end) then screens only what changed:
#
# * the newly opened slice [previous end, end): every object against every object;
# * [start, previous end) for the objects whose element set changed (a new epoch, or new in the
#   catalogue) against every object (:func:`focus_block_candidates`; the slice already holds the rest
#   of their horizon);
# * the pairs whose events ended before ``start`` (dropped: their TCA passed) and the persistent pairs
#   are worked out whole (:func:`pair_events`): a pair closest at the new start edge shows there.
#
# Events of pairs of unchanged objects with TCA in [start, previous end) are kept as they are. A
# change of threshold, step or code version, a start before the recorded one, a horizon not reaching
# past the recorded one, or a request, make it a full screening: one part, all against all.

#: the focus part (changed objects against all) uses a grid this many times coarser than the
#: screening step: its cost is the propagation of the whole catalogue over the horizon, which the
#: coarser grid divides; the bounds still hold (their pads grow with h), and the second-order bound
#: (b'') keeps the pairs to refine as few as on the fine grid
FOCUS_STEP_FACTOR = 6
#: above this fraction of changed element sets a full screening costs no more than the increment
FULL_IF_CHANGED_FRACTION = 0.25


def code_version() -> str:
    """Digest of this module's source: a new screening code makes the next screening a full one."""
    import inspect
    import sys

    try:
        text = inspect.getsource(sys.modules[__name__])
    except (OSError, TypeError):  # pragma: no cover - no source (a frozen build): the module's own name
        text = __name__
    return hashlib.sha256(text.encode()).hexdigest()[:16]


EVENT_COLUMNS = (*APPROACH_COLUMNS, "flag")


@dataclasses.dataclass
class ScreeningState:
    """What the last screening recorded: horizon [start, end), its parameters, the element-set epoch
    (unix seconds) it screened per object, and its open events (:data:`EVENT_COLUMNS`)."""

    start: float
    end: float
    threshold_km: float
    step_s: float
    code_version: str
    epochs: dict[int, float]
    events: pd.DataFrame


@dataclasses.dataclass
class IncrementPlan:
    full: bool
    reason: str
    parts: list[Part]
    changed: set[int]
    kept: pd.DataFrame  # open events kept as they are
    recheck: set[tuple[int, int]]  # pairs worked out whole (pair_events) on the driver
    dropped: int = 0  # open events whose TCA passed

    @property
    def focus_ids(self) -> set[int]:
        return {n for part in self.parts if part.focus for n in part.focus}


def empty_events() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype=t) for c, t in APPROACH_COLUMNS.items()})
    frame["flag"] = pd.Series(dtype=object)
    return frame


def plan_increment(previous: ScreeningState | None, epochs: dict[int, float], start: float, end: float,
                   threshold_km: float, step_s: float, version: str, full: bool = False) -> IncrementPlan:
    """What a screening of [start, end) has to do, given the recorded state (module comments above)."""
    def whole(reason: str) -> IncrementPlan:
        return IncrementPlan(True, reason, [Part(start, end, step_s)], set(epochs), empty_events(), set())

    if full:
        return whole("full screening requested")
    if previous is None:
        return whole("no screening recorded")
    for name, old, new in (("threshold_km", previous.threshold_km, threshold_km), ("step_s", previous.step_s, step_s)):
        if not math.isclose(old, new, rel_tol=0, abs_tol=1e-9):
            return whole(f"{name} changed ({old:g} -> {new:g})")
    if previous.code_version != version:
        return whole(f"screening code changed ({previous.code_version} -> {version})")
    if start < previous.start:
        return whole("screening start before the recorded one")
    if start >= previous.end or end < previous.end:
        return whole("horizon does not continue the recorded one")
    changed = {n for n, e in epochs.items() if n not in previous.epochs or previous.epochs[n] != e}
    if len(changed) > FULL_IF_CHANGED_FRACTION * max(len(epochs), 1):
        return whole(f"{len(changed)} of {len(epochs)} element sets changed")
    events = previous.events if previous.events is not None else empty_events()
    persistent = events["flag"].map(is_persistent).astype(bool) if len(events) else pd.Series(dtype=bool)
    passed = (events["tca_unix"] < start) & ~persistent if len(events) else pd.Series(dtype=bool)
    involved = (events["primary_id"].isin(changed) | events["secondary_id"].isin(changed)) if len(events) else passed
    kept = events[~persistent & ~passed & ~involved] if len(events) else empty_events()
    recheck = {(int(p), int(s)) for p, s in zip(events.loc[persistent | passed, "primary_id"],
                                               events.loc[persistent | passed, "secondary_id"])} if len(events) else set()
    gone = set(previous.epochs) - set(epochs)  # objects no longer in the catalogue: their events go
    if gone:
        kept = kept[~kept["primary_id"].isin(gone) & ~kept["secondary_id"].isin(gone)]
        recheck = {pair for pair in recheck if not (set(pair) & gone)}
    parts = []
    if end > previous.end:
        parts.append(Part(previous.end, end, step_s))
    if changed:
        parts.append(Part(start, previous.end, step_s * FOCUS_STEP_FACTOR, tuple(sorted(changed))))
    return IncrementPlan(False, "incremental", parts, changed, kept.reset_index(drop=True), recheck,
                         int(passed.sum()) if len(events) else 0)


def recheck_pairs(pairs: Iterable[tuple[int, int]], satrecs: dict[int, Satrec], start: float, end: float,
                  threshold_km: float, step_s: float) -> pd.DataFrame:
    """:func:`pair_events` of pairs the plan names (dropped or persistent ones) that are within the
    threshold for a step at an edge; the others are left as the chain finds them (exact False)."""
    rows, flags = [], []
    cache: dict = {}
    for p, s in sorted(pairs):
        sat1, sat2 = satrecs.get(int(p)), satrecs.get(int(s))
        if sat1 is None or sat2 is None or not edge_within(sat1, sat2, start, end, threshold_km, step_s):
            continue
        found = pair_events(int(p), int(s), sat1, sat2, start, end, threshold_km, step_s, cache)
        rows += [a for a, _ in found] or [_no_event(int(p), int(s))]
        flags += [f for _, f in found] or [NO_EVENT]
    return approach_frame(rows, flags, [True] * len(rows))


def event_key(primary_id: int, secondary_id: int, tca_unix: float, flag) -> str:
    """The event's id: a persistent proximity's is its pair's, any other's the pair and TCA minute."""
    if is_persistent(flag):
        return persistent_event_id(primary_id, secondary_id)
    return event_id(primary_id, secondary_id, tca_unix)


def combine(kept: pd.DataFrame, found: pd.DataFrame, rechecked: pd.DataFrame | None = None) -> pd.DataFrame:
    """The open events after a screening: kept ones and those found (:func:`refine_pairs` rows), where
    every pair worked out whole (``exact``; ``rechecked`` first) has exactly the events
    :func:`pair_events` gave it. One row per event id (the closest), columns :data:`EVENT_COLUMNS`."""
    frames = [f for f in (rechecked, found) if f is not None and len(f)]
    exact_parts, exact_pairs = [], set()
    for f in frames:  # the first answer per pair (rechecked before found: the same maths)
        rows = f[f["exact"]]
        pairs = pd.Series(list(zip(rows["primary_id"].astype(int), rows["secondary_id"].astype(int))), index=rows.index, dtype=object)
        exact_parts.append(rows[~pairs.isin(exact_pairs).to_numpy()])
        exact_pairs |= set(pairs)
    exact = pd.concat(exact_parts) if exact_parts else approach_frame([])
    plain = [f[~f["exact"]] for f in frames] + ([kept] if kept is not None and len(kept) else [])
    plain = pd.concat(plain) if plain else empty_events()
    if len(plain) and exact_pairs:
        mine = pd.Series(list(zip(plain["primary_id"].astype(int), plain["secondary_id"].astype(int))),
                         index=plain.index).isin(exact_pairs)
        plain = plain[~mine.to_numpy()]
    whole = exact[exact["flag"] != NO_EVENT] if len(exact) else exact
    out = pd.concat([x[list(EVENT_COLUMNS)] for x in (plain, whole) if len(x)]) if (len(plain) or len(whole)) else empty_events()
    if not len(out):
        return empty_events()
    out = out.assign(_id=[event_key(p, s, t, f) for p, s, t, f in
                          zip(out["primary_id"], out["secondary_id"], out["tca_unix"], out["flag"])])
    out = out.sort_values(["miss_km", "primary_id", "secondary_id", "tca_unix"], kind="stable").drop_duplicates("_id")
    out = out.sort_values(["tca_unix", "primary_id", "secondary_id"], kind="stable").drop(columns="_id")
    return out.reset_index(drop=True).astype(APPROACH_COLUMNS)


# --- the whole chain without Spark ------------------------------------------------------------------

def screen_parts(objects: ScreeningObjects, parts: Sequence[Part], start: float, end: float, threshold_km: float,
                 step_s: float) -> tuple[pd.DataFrame, dict[str, int]]:
    """(a)-(c) of every part in one process: the refine_pairs rows (flag, exact) and filter counts."""
    by_id = dict(zip(objects.norad_ids.tolist(), objects.satrecs))
    codes_p, codes_s, codes = [], [], []
    grid = 0
    errors: dict[int, float] = {}
    for k, part in enumerate(parts):
        times = time_grid(part.start, part.end, part.step_s)
        if part.focus is None:
            block = block_candidates(objects, times, 0, threshold_km, part.step_s)
        else:
            mask = np.isin(objects.norad_ids, np.asarray(part.focus, dtype=np.int64))
            block = focus_block_candidates(objects, times, 0, threshold_km, part.step_s, mask)
        grid += block.pair_steps_grid
        fail = {n: part.start + st * part.step_s for n, (st, _) in block.errors.items()}
        t = part.start + block.step * part.step_s
        ok = np.array([t_ < min(fail.get(int(a), np.inf), fail.get(int(b), np.inf))
                       for a, b, t_ in zip(block.primary_id, block.secondary_id, t)], dtype=bool)
        for n, t_fail in fail.items():
            errors[n] = min(errors.get(n, np.inf), t_fail)
        codes_p.append(block.primary_id[ok])
        codes_s.append(block.secondary_id[ok])
        codes.append((np.int64(k) << PART_SHIFT) | block.step[ok])
    cat = lambda xs: np.concatenate(xs) if xs else np.empty(0, dtype=np.int64)  # noqa: E731
    linear = pd.DataFrame({"primary_id": cat(codes_p), "secondary_id": cat(codes_s), "step": cat(codes)})
    if len(linear):
        pairs = linear.groupby(["primary_id", "secondary_id"], as_index=False)["step"].agg(list).rename(columns={"step": "steps"})
    else:
        pairs = pd.DataFrame({"primary_id": [], "secondary_id": [], "steps": []})
    found = refine_pairs(pairs, by_id, start, step_s, start, end, threshold_km, parts)
    return found, {"pair_steps_grid": grid, "pair_steps_linear": len(linear), "pairs_linear": len(pairs),
                   "sgp4_errors": len(errors)}


def screen(norad_ids: Sequence[int], satrecs: Sequence[Satrec], start: float, end: float,
           threshold_km: float, step_s: float) -> tuple[pd.DataFrame, dict[str, int]]:
    """Screen a catalogue with the same chain as the Spark job, in one process (tests, benchmarks):
    the open events (:data:`EVENT_COLUMNS`, persistent proximities flagged) and the filter counts."""
    objects = ScreeningObjects.from_satrecs(norad_ids, satrecs)
    grids = objects.grids(threshold_km, step_s)
    found, counts = screen_parts(objects, [Part(start, end, step_s)], start, end, threshold_km, step_s)
    events = combine(empty_events(), found)
    n = len(objects.norad_ids)
    metrics = {
        "objects": n,
        "steps": len(time_grid(start, end, step_s)),
        "cell_km": grids.slow_cell_km,
        "cell_fast_km": grids.fast_cell_km,
        "fast_objects": int((~grids.slow).sum()),
        "pairs_all": n * (n - 1) // 2,
        "pairs_altitude": altitude_band_pair_count(objects.perigee_km, objects.apogee_km, threshold_km),
        **counts,
        "events": len(events),
        "persistent": int(events["flag"].map(is_persistent).sum()) if len(events) else 0,
    }
    return events, metrics


def screen_increment(norad_ids: Sequence[int], satrecs: Sequence[Satrec], epochs: dict[int, float],
                     previous: ScreeningState | None, start: float, end: float, threshold_km: float, step_s: float,
                     version: str | None = None, full: bool = False) -> tuple[pd.DataFrame, IncrementPlan, dict[str, int]]:
    """One screening in one process, incremental on ``previous`` where it can be (tests, benchmarks):
    the open events, the plan it followed and the filter counts. ``jobs/conjunction.py`` runs the same
    plan with the parts on Spark."""
    plan = plan_increment(previous, epochs, start, end, threshold_km, step_s, version or code_version(), full)
    objects = ScreeningObjects.from_satrecs(norad_ids, satrecs)
    found, counts = screen_parts(objects, plan.parts, start, end, threshold_km, step_s)
    by_id = dict(zip(objects.norad_ids.tolist(), objects.satrecs))
    rechecked = recheck_pairs(plan.recheck, by_id, start, end, threshold_km, step_s)
    return combine(plan.kept, found, rechecked), plan, counts


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
