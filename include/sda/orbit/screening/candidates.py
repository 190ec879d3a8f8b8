"""The coarse filters over a block of grid steps: (a) as a pair predicate, (b) the spatial grid and
(b') the straight-line + curvature bound, for all objects against all (:func:`block_candidates`) or
only the pairs with an object of a focus set (:func:`focus_block_candidates`, with the second-order
bound (b'')). What passes are candidate (pair, step)s for the refinement (:mod:`.refinement`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from sda.orbit.frames import MU_KM3_S2, R_EARTH_KM
from sda.orbit.screening.bounds import ALTITUDE_MARGIN_KM, bands_overlap, curvature_pad_km
from sda.orbit.screening.cells import all_neighbours, cell_keys, half_neighbour_pairs, sorted_keys
from sda.orbit.screening.propagation import Grids, ScreeningObjects, propagated_steps

#: SGP4's motion departs from point-mass gravity by J2-J4 (~0.2 % of g in LEO), drag and, in deep
#: space, lunisolar terms: 1 % of g at the lowest radius bounds it with margin (filter b'')
PERTURBATION_FRACTION = 0.01


@dataclasses.dataclass
class BlockResult:
    """Candidates of a block of grid steps: (primary_id, secondary_id, step) passing (a)+(b)+(b'),
    the number of (pair, step)s that passed (a)+(b) only, and SGP4's failures (first step, code)."""

    primary_id: np.ndarray
    secondary_id: np.ndarray
    step: np.ndarray
    pair_steps_grid: int
    errors: dict[int, tuple[int, int]]  # norad_id -> (first failing step, SGP4 error code)


# --- minimum distance of the relative motion over half a step ----------------------------------------

def linear_min_distance(dr: np.ndarray, dv: np.ndarray, half_step_s: float) -> np.ndarray:
    """min over |tau| <= h/2 of |dr + dv tau| (rows of 3-vectors)."""
    dv2 = np.sum(dv * dv, axis=-1)
    tau = np.where(dv2 > 0, -np.sum(dr * dv, axis=-1) / np.where(dv2 > 0, dv2, 1.0), 0.0)
    tau = np.clip(tau, -half_step_s, half_step_s)
    return np.linalg.norm(dr + dv * tau[..., None], axis=-1)


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
            sub = np.minimum(sub, np.linalg.norm(dr[idx] + dv[idx] * tau[:, None]
                                                 + 0.5 * da[idx] * (tau * tau)[:, None], axis=1))
        best[cubic] = sub
    flat = ~cubic  # no relative acceleration: the straight line
    if flat.any():
        best[flat] = linear_min_distance(dr[flat], dv[flat], h)
    return best


def gravity_km_s2(pos: np.ndarray) -> np.ndarray:
    r = np.linalg.norm(pos, axis=1)
    return -MU_KM3_S2 * pos / (r * r * r)[:, None]


def jerk_bound_km_s3(objects: ScreeningObjects) -> np.ndarray:
    """Bound on the rate of change of each object's point-mass gravity: |d/dt (mu r / r^3)| <=
    mu |v| (1 + 3 |r.v| / (r v)) / r^3 <= mu V (1 + 3 e') / r_min^3, with V the speed bound, r_min the
    padded perigee radius and e' = min(1, 2 e + 0.02) bounding |r.v| / (r v)
    (= e sin E / sqrt(1 - e^2 cos^2 E))."""
    r_min = np.maximum(R_EARTH_KM + objects.perigee_km - ALTITUDE_MARGIN_KM, R_EARTH_KM - 50.0)
    a = R_EARTH_KM + (objects.perigee_km + objects.apogee_km) / 2.0
    ecc = np.clip((objects.apogee_km - objects.perigee_km) / (2.0 * a), 0.0, 1.0)
    return MU_KM3_S2 * objects.speed_km_s * (1.0 + 3.0 * np.minimum(1.0, 2.0 * ecc + 0.02)) / r_min ** 3


# --- the filters of one step -------------------------------------------------------------------------

def _block_result(ids: np.ndarray, found: list[tuple[np.ndarray, np.ndarray, int]], grid_count: int,
                  errors: dict[int, tuple[int, int]]) -> BlockResult:
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
    # the bands first: scalar gathers, and they drop about half of a step's neighbours in LEO
    keep = (per[i] - pad_km <= apo[j] + pad_km) & (per[j] - pad_km <= apo[i] + pad_km)
    return _within_reach(i[keep], j[keep], pos, speed, threshold_km, step_s)


def _near_on_axes(p: np.ndarray, q: np.ndarray, a: np.ndarray, b: np.ndarray, reach_km: float | None) -> np.ndarray:
    """Mask of the candidate pairs (rows a of p, rows b of q) closer than ``reach_km`` on x and on y."""
    if reach_km is None:
        return np.ones(len(a), dtype=bool)
    keep = np.abs(p[a, 0] - q[b, 0]) < reach_km
    keep[keep] = np.abs(p[a[keep], 1] - q[b[keep], 1]) < reach_km
    return keep


def _step_pairs(pos: np.ndarray, slow: np.ndarray, fast: np.ndarray, ok: np.ndarray, grids: Grids,
                reach_km: float | None = None, slow_reach_km: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Row pairs of one step to test: slow-slow in neighbouring fine cells, and fast-anything in
    neighbouring coarse cells (fast-fast once), never an object with itself. With ``reach_km``, only
    pairs closer than it on the x and y axes (checked on the positions in cell order, where
    neighbours are close in memory too); slow-slow pairs against ``slow_reach_km`` when given (the
    largest reach of two slow objects, well under the fast ones')."""
    rows = np.flatnonzero(slow)
    order, ks = sorted_keys(pos[rows], grids.slow_cell_km)
    a, b = half_neighbour_pairs(ks)
    sorted_pos = pos[rows[order]]
    keep = _near_on_axes(sorted_pos, sorted_pos, a, b, slow_reach_km if slow_reach_km is not None else reach_km)
    a, b = a[keep], b[keep]
    pairs_i, pairs_j = [rows[order[a]]], [rows[order[b]]]
    fast_rows = np.flatnonzero(fast)
    if len(fast_rows):
        every = np.flatnonzero(ok)
        order, ks = sorted_keys(pos[every], grids.fast_cell_km)
        q, b = all_neighbours(ks, cell_keys(pos[fast_rows], grids.fast_cell_km))
        keep = _near_on_axes(pos[fast_rows], pos[every[order]], q, b, reach_km)
        q, b = q[keep], b[keep]
        i, j = fast_rows[q], every[order[b]]
        # drop self-pairs, and keep a fast-fast pair once (from its lower row)
        keep = (i != j) & (~fast[j] | (i < j))
        pairs_i.append(i[keep])
        pairs_j.append(j[keep])
    return np.concatenate(pairs_i), np.concatenate(pairs_j)


#: the largest focus-objects x objects matrix of :func:`_focus_partners` (bytes): 13,000 objects with
#: 25 % of them renewed (a full screening beyond that) need 42 MB
FOCUS_PARTNERS_MAX_BYTES = 64 * 2**20


def _focus_partners(focus: np.ndarray, per: np.ndarray, apo: np.ndarray, threshold_km: float) -> np.ndarray | None:
    """Per focus object (rows of the matrix, in row order), the objects it is to be tested with:
    padded altitude bands overlapping (filter (a)), never itself, a focus-focus pair from its lower
    row only. Flat, so that a step looks a candidate up with one gather; None when larger than
    :data:`FOCUS_PARTNERS_MAX_BYTES` (then each step tests the bands of its candidates)."""
    rows = np.flatnonzero(focus)
    n = len(per)
    if len(rows) * n > FOCUS_PARTNERS_MAX_BYTES:
        return None
    partners = bands_overlap(per[rows, None], apo[rows, None], per[None, :], apo[None, :], threshold_km)
    partners &= ~(focus[None, :] & (np.arange(n)[None, :] <= rows[:, None]))
    return partners.ravel()


def _focus_step_pairs(pos: np.ndarray, ok: np.ndarray, focus: np.ndarray, local: np.ndarray,
                      partners: np.ndarray | None, cell_km: float, band: tuple[np.ndarray, np.ndarray, float]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Row pairs of one step with a focus object: each focus object probes the 27 cells around its own
    in the sorted keys of every object; only its partners (:func:`_focus_partners`, ``local`` the
    focus objects' rows in it) are kept -- without the matrix: those whose ``band`` (perigees,
    apogees, threshold) overlap, never an object with itself, a focus-focus pair once."""
    every, fr_rows = np.flatnonzero(ok), np.flatnonzero(ok & focus)
    order, ks = sorted_keys(pos[every], cell_km)
    q, b = all_neighbours(ks, cell_keys(pos[fr_rows], cell_km))
    i, j = fr_rows[q], every[order[b]]
    if partners is not None:
        keep = partners[local[i] * len(ok) + j]
    else:
        per, apo, threshold_km = band
        keep = (i != j) & (~focus[j] | (i < j)) & bands_overlap(per[i], apo[i], per[j], apo[j], threshold_km)
    return i[keep], j[keep]


def _within_reach(i: np.ndarray, j: np.ndarray, pos: np.ndarray, speed: np.ndarray, threshold_km: float,
                  step_s: float):
    """The pairs (i, j) that can come within ``threshold`` in the half step either side
    (``|dr| < threshold + (V_i + V_j) h / 2``), with their separations ``dr``."""
    dr = pos[i] - pos[j]
    reach = threshold_km + (speed[i] + speed[j]) * (step_s / 2.0)
    keep = np.einsum("ij,ij->i", dr, dr) < reach * reach
    return i[keep], j[keep], dr[keep]


def _second_order_keep(i: np.ndarray, j: np.ndarray, pos: np.ndarray, dr: np.ndarray, dv: np.ndarray,
                       acc: np.ndarray, jerk: np.ndarray, threshold_km: float, step_s: float) -> np.ndarray:
    """(b'') mask: the pair's motion to second order -- point-mass gravity computed from the positions
    -- comes within ``threshold`` plus the third-order remainder and the rest of SGP4's forces during
    the half step either side."""
    tau = step_s / 2.0
    pad2 = (jerk[i] + jerk[j]) * tau ** 3 / 6.0 + PERTURBATION_FRACTION * (acc[i] + acc[j]) * tau * tau / 2.0
    da = gravity_km_s2(pos[i]) - gravity_km_s2(pos[j])
    return quadratic_min_distance(dr, dv, da, tau) < threshold_km + pad2


# --- blocks of grid steps ----------------------------------------------------------------------------

def block_candidates(objects: ScreeningObjects, times: np.ndarray, first_step: int, threshold_km: float,
                     step_s: float, satrec_array=None, ephemeris=None) -> BlockResult:
    """Filters (a), (b) and (b') over the grid steps ``first_step + k`` at ``times[k]``.

    Propagates every object with one ``SatrecArray`` per chunk of steps, then per step: a sort-merge
    join on the cell key (slow objects among themselves on the fine grid, fast ones against all on
    the coarse grid, see :class:`Grids`), the pair's own distance bound ``threshold + (V1 + V2) h / 2``,
    the altitude-band predicate, and the straight-line + curvature bound (b'). With ``ephemeris`` (an
    :class:`.ephemeris.Ephemeris`), the states at its grid times are stored for later focus parts."""
    from sgp4.api import SatrecArray

    arr = satrec_array if satrec_array is not None else SatrecArray(objects.satrecs)
    grids = objects.grids(threshold_km, step_s)
    ids, per, apo = objects.norad_ids, objects.perigee_km, objects.apogee_km
    acc, speed = objects.accel_km_s2, objects.speed_km_s
    pad = threshold_km + ALTITUDE_MARGIN_KM
    reach_max = threshold_km + float(speed.max()) * step_s if len(speed) else 0.0
    slow_reach = threshold_km + float(speed[grids.slow].max()) * step_s if grids.slow.any() else None
    found: list[tuple[np.ndarray, np.ndarray, int]] = []  # (rows i, rows j, grid step)
    grid_count = 0
    errors: dict[int, tuple[int, int]] = {}
    for step, ok, pos, vel in propagated_steps(arr, times, ids, first_step, errors, ephemeris):
        # the largest reach on two axes first (most candidates of the neighbouring cells fail on
        # one), then each pair's own reach on the few left
        i, j = _step_pairs(pos, ok & grids.slow, ok & ~grids.slow, ok, grids, reach_max, slow_reach)
        i, j, dr = _within_reach_and_band(i, j, pos, speed, per, apo, threshold_km, step_s, pad)
        grid_count += len(i)
        dv = vel[i] - vel[j]
        bound = threshold_km + curvature_pad_km(acc[i] + acc[j], step_s)
        keep = linear_min_distance(dr, dv, step_s / 2.0) < bound
        i, j = i[keep], j[keep]
        found.append((i, j, step))
    return _block_result(ids, found, grid_count, errors)


def focus_block_candidates(objects: ScreeningObjects, times: np.ndarray, first_step: int, threshold_km: float,
                           step_s: float, focus: np.ndarray, satrec_array=None,
                           second_order: bool = True, ephemeris=None) -> BlockResult:
    """Filters (a), (b) and (b') as :func:`block_candidates`, but only for pairs with at least one
    object of ``focus`` (a boolean mask over ``objects``): the objects whose element set changed,
    screened against everything. Per step, positions are keyed by cubic cells of edge
    ``threshold + (V_focus + V_max) h / 2`` (the largest reach) and each focus object probes the 27
    cells around its own in the sorted keys of every object; each pair then meets its own reach, the
    band predicate and the straight-line bound, as in the grid (the argument of :mod:`sda.orbit.screening`
    holds for any step ``h``, so a coarser one may be used). With ``second_order``, (b''): the pair's
    motion around ``t_k`` to second order -- point-mass gravity computed from the positions -- must
    come within ``threshold`` plus a third-order remainder bound during the half step either side:
    ``J tau^3 / 6`` (``J``, :func:`jerk_bound_km_s3`) and ``P tau^2 / 2`` for the rest of SGP4's
    forces (``P`` = :data:`PERTURBATION_FRACTION` of gravity at the perigee). At a coarse step the
    straight-line pad ``A h^2 / 8`` lets through tens of times more pairs than it does on the fine
    grid; the second-order bound brings them back to about as many. With ``ephemeris`` (an
    :class:`.ephemeris.Ephemeris` of this grid), the states it holds are read, not propagated: only
    renewed element sets go through SGP4."""
    from sgp4.api import SatrecArray

    arr = satrec_array if satrec_array is not None else SatrecArray(objects.satrecs)
    ids, per, apo = objects.norad_ids, objects.perigee_km, objects.apogee_km
    acc, speed, jerk = objects.accel_km_s2, objects.speed_km_s, jerk_bound_km_s3(objects)
    focus = np.asarray(focus, dtype=bool)
    if not focus.any():
        return BlockResult(*(np.empty(0, dtype=np.int64),) * 3, 0, {})
    cell_km = threshold_km + (float(speed[focus].max()) + float(speed.max())) * step_s / 2.0
    partners = _focus_partners(focus, per, apo, threshold_km)  # (a), once for the block
    local = np.cumsum(focus) - 1  # a focus object's row in partners
    found: list[tuple[np.ndarray, np.ndarray, int]] = []  # (rows i, rows j, grid step)
    grid_count = 0
    errors: dict[int, tuple[int, int]] = {}
    for step, ok, pos, vel in propagated_steps(arr, times, ids, first_step, errors, ephemeris, reuse=True):
        if not (ok & focus).any():
            continue
        i, j = _focus_step_pairs(pos, ok, focus, local, partners, cell_km, (per, apo, threshold_km))
        i, j, dr = _within_reach(i, j, pos, speed, threshold_km, step_s)
        grid_count += len(i)
        bound = threshold_km + curvature_pad_km(acc[i] + acc[j], step_s)
        dv = vel[i] - vel[j]
        keep = linear_min_distance(dr, dv, step_s / 2.0) < bound
        i, j, dr, dv = i[keep], j[keep], dr[keep], dv[keep]
        # (b'') second order: point-mass gravity from the positions, the rest bounded -- a coarse
        # focus grid keeps its refinement as small as the fine grid's
        if second_order:
            keep = _second_order_keep(i, j, pos, dr, dv, acc, jerk, threshold_km, step_s)
            i, j = i[keep], j[keep]
        found.append((i, j, step))
    return _block_result(ids, found, grid_count, errors)
