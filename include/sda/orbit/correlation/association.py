"""Three parts of observation-to-object association (:mod:`sda.orbit.correlation`) that stand on their own.

:func:`distinct_bodies` -- one candidate per element set: catalogue numbers published with the
very same element set (a docked stack: the ISS and the vehicles at it) predict the same measurement
for every observation, so no sensor can tell them apart and they are one body. Left as separate
candidates they tie exactly, and every observation of the stack would be held as a cross-tag
between its own numbers. The body is a candidate under its lowest number (the stack's host, as the
simulator observes it: :func:`sda.sim.objects.bodies`); its other numbers are not candidates.

:func:`candidate_pairs` -- the spatial prefilter: which (observation, object) pairs can be candidates
at all, from the catalogue propagated once to the batch's reference time (:func:`reference`). An
object is kept if, at the observation time, it can be within its radius of the observation: its
distance at the reference time is under ``radius + speed |dt| + a_max dt^2 / 2``. For a measured
point (radar, ISL) a k-d tree over the catalogue's reference positions gives the objects within the
largest such bound, and the exact bound is then checked per pair: the work grows with the pairs, not
with observations x catalogue. Objects with a radius over :data:`WIDE_RADIUS_KM` (element sets so old
their error is hundreds of km) stay out of the tree and are checked against every observation; so
is every object for an optical line of sight (the distance to a ray), as squared distances from dot
products: one matrix product per batch.

One object per radar frame: the detections of one radar frame (one bronze record, ``bronze_id``)
are of distinct objects. Where two or more of a frame's detections chose the same object, the
frame's detections are assigned jointly instead -- the assignment of distinct in-gate candidates
with the least total ``d2 + ln det S`` (global nearest neighbour, ``scipy.optimize.linear_sum_assignment``)
-- when one exists; otherwise each keeps its own choice. Two objects deployed together a few km apart,
each element set off by a few km, are then told apart when both are in the frame: the detection
that lies between them goes to the one the other detection does not fit. The ambiguity flag stays
each detection's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from sda.orbit.frames import ecef_to_teme, razel_to_ecef, site_teme, unit_vector_radec

if TYPE_CHECKING:
    from scipy.spatial import cKDTree

# What makes two Satrecs predict the same state at every time: epoch and every element SGP4 uses.
_ELEMENT_SET = ("jdsatepoch", "jdsatepochF", "inclo", "nodeo", "ecco", "argpo", "mo", "no_kozai", "bstar",
                "ndot", "nddot")


def distinct_bodies(norad_ids: np.ndarray, satrecs) -> np.ndarray:
    """[objects] bool: True for the catalogue rows that are candidates, one per element set (its
    lowest catalogue number); False for the other numbers published with an identical element set."""
    order = np.argsort(np.asarray(norad_ids, dtype=np.int64), kind="stable")
    seen: set[tuple] = set()
    keep = np.zeros(len(order), dtype=bool)
    for row in order:
        key = tuple(getattr(satrecs[row], name) for name in _ELEMENT_SET)
        if key not in seen:
            seen.add(key)
            keep[row] = True
    return keep


# Bound on any object's acceleration (gravity at the surface, padded): how far it can stray from a
# straight line in the time between the reference propagation and the observation.
MAX_ACCEL_KM_S2 = 1.05 * 398600.4418 / 6378.137**2
# Objects whose prefilter radius is larger are checked against every observation, not via the k-d tree.
WIDE_RADIUS_KM = 1000.0


class Reference(NamedTuple):
    """The catalogue at a batch's reference time, for the prefilter (:func:`reference`)."""

    t: float  # unix seconds
    r: np.ndarray  # [objects, 3] TEME positions (km); NaN: not a candidate
    speed: np.ndarray  # [objects] km/s
    radius_km: np.ndarray  # [objects] the prefilter's radius around each observation
    tree: cKDTree | None  # over the positions of the ``narrow`` rows
    narrow: np.ndarray  # candidate rows with a radius up to WIDE_RADIUS_KM, in the tree
    wide: np.ndarray  # the other candidate rows


def reference(t: float, r: np.ndarray, speed: np.ndarray, radius_km: np.ndarray) -> Reference:
    """The prefilter's view of the catalogue at ``t``: positions ``r`` (NaN rows are no candidates),
    speeds and radii, with the k-d tree over the rows of a radius up to :data:`WIDE_RADIUS_KM`."""
    from scipy.spatial import cKDTree

    ok = np.isfinite(r).all(axis=1) & np.isfinite(speed) & np.isfinite(radius_km)
    narrow = np.flatnonzero(ok & (radius_km <= WIDE_RADIUS_KM))
    wide = np.flatnonzero(ok & (radius_km > WIDE_RADIUS_KM))
    return Reference(t, r, speed, radius_km, cKDTree(r[narrow]) if len(narrow) else None, narrow, wide)


def candidate_pairs(kind: str, obs: pd.DataFrame, t: np.ndarray, ref: Reference) -> tuple[np.ndarray, np.ndarray]:
    """(observation rows, catalogue rows) of the pairs that pass the prefilter (module docstring),
    sorted by observation, then catalogue row."""
    col = lambda name: obs[name].to_numpy(dtype=float)  # noqa: E731
    dt_abs = np.abs(t - ref.t)
    drift = 0.5 * MAX_ACCEL_KM_S2 * dt_abs**2
    if kind == "optical":
        rows = np.concatenate([ref.narrow, ref.wide])
        limit2 = np.square(ref.radius_km[rows] + ref.speed[rows] * dt_abs[:, None] + drift[:, None])
        los = unit_vector_radec(col("ra_rad"), col("dec_rad"))
        site = site_teme(col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"), t)
        with np.errstate(invalid="ignore"):
            rho2 = _squared_distances(site, ref.r[rows])  # |object - site|^2
            ahead = los @ ref.r[rows].T - np.sum(site * los, axis=-1)[:, None]  # along the line of sight
            # squared distance from the object to the ray (to the site when it is behind the sensor);
            # the optical miss (angle x range) is never below it
            near = np.where(ahead > 0, np.maximum(rho2 - ahead * ahead, 0.0), rho2) < limit2
        obs_i, k = np.nonzero(near)
        obj_j = rows[k]
    else:
        if kind == "radar":
            site = (col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"))
            ecef = razel_to_ecef(col("range_m") / 1000.0, col("az_rad"), col("el_rad"), *site)
            point, _ = ecef_to_teme(ecef, np.zeros_like(ecef), t)
        else:
            point = np.stack([col("x_m"), col("y_m"), col("z_m")], axis=-1) / 1000.0
        obs_i, obj_j = _near_points(point, dt_abs, drift, ref)
        with np.errstate(invalid="ignore"):
            d2 = np.sum(np.square(point[obs_i] - ref.r[obj_j]), axis=-1)
            keep = d2 < np.square(ref.radius_km[obj_j] + ref.speed[obj_j] * dt_abs[obs_i] + drift[obs_i])
        obs_i, obj_j = obs_i[keep], obj_j[keep]
    order = np.lexsort((obj_j, obs_i))
    return obs_i[order].astype(np.int64), obj_j[order].astype(np.int64)


def _near_points(point: np.ndarray, dt_abs: np.ndarray, drift: np.ndarray, ref: Reference) -> tuple[np.ndarray, ...]:
    """Pairs to check exactly: the tree's objects within the largest bound of each observation
    (the largest radius and speed of the tree's objects), and every wide object."""
    n = len(point)
    parts = [(np.repeat(np.arange(n), len(ref.wide)), np.tile(ref.wide, n))]
    finite = np.flatnonzero(np.isfinite(point).all(axis=1))
    if ref.tree is not None and len(finite):
        narrow = ref.narrow
        bound = ref.radius_km[narrow].max() + ref.speed[narrow].max() * dt_abs[finite] + drift[finite]
        found = ref.tree.query_ball_point(point[finite], bound, return_sorted=False)
        counts = np.fromiter((len(f) for f in found), dtype=np.int64, count=len(found))
        if counts.sum():
            parts.append((np.repeat(finite, counts), narrow[np.concatenate(found).astype(np.int64)]))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _squared_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[len(a), len(b)] squared distances between rows of 3-vectors (km: Earth-orbit magnitudes lose
    under 1e-6 km^2 to the cancellation); a NaN row of ``b`` (an object SGP4 could not evaluate)
    gives NaN, which compares False."""
    d2 = np.sum(a * a, axis=-1)[:, None] + np.sum(b * b, axis=-1)[None, :] - 2.0 * (a @ b.T)
    return np.maximum(d2, 0.0)


def frame_codes(obs: pd.DataFrame, kinds: np.ndarray) -> np.ndarray | None:
    """A code per observation: radar detections of one frame (one ``bronze_id``) share theirs, every
    other observation has one of its own (-1 - row); None without a ``bronze_id`` column."""
    if "bronze_id" not in obs:
        return None
    codes = pd.factorize(obs["bronze_id"].to_numpy(dtype=object))[0].astype(np.int64)
    radar = (kinds == "radar") & (codes >= 0)
    return np.where(radar, codes, -1 - np.arange(len(obs), dtype=np.int64))


def one_object_per_frame(best: np.ndarray, hit: np.ndarray, gated: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """``best`` with the frames where detections share a best object re-assigned jointly (module
    docstring): per such frame, distinct in-gate candidates of least total cost, if there are enough."""
    from scipy.optimize import linear_sum_assignment

    rows = np.flatnonzero(hit & (frames >= 0))
    if len(rows) < 2:
        return best
    key = frames[rows] * np.int64(gated.shape[1]) + best[rows]
    _, first, counts = np.unique(key, return_index=True, return_counts=True)
    clashing = np.unique(frames[rows[first[counts > 1]]])
    best = best.copy()
    for frame in clashing:
        members = rows[frames[rows] == frame]
        cols = np.flatnonzero(np.isfinite(gated[members]).any(axis=0))
        if len(cols) < len(members):
            continue  # fewer in-gate objects than detections: no assignment of distinct objects
        cost = gated[np.ix_(members, cols)]
        big = 1e6 + float(np.nanmax(np.where(np.isfinite(cost), cost, np.nan)))
        r, c = linear_sum_assignment(np.where(np.isfinite(cost), cost, big))
        if np.isfinite(cost[r, c]).all():
            best[members[r]] = cols[c]
    return best
