"""Three parts of observation-to-object association (:mod:`sda.orbit.correlation`) that stand on their own.

:func:`distinct_bodies` -- one candidate per element set: catalogue numbers published with the
very same element set (a docked stack: the ISS and the vehicles at it) predict the same measurement
for every observation, so no sensor can tell them apart and they are one body. Left as separate
candidates they tie exactly, and every observation of the stack would be held as a cross-tag
between its own numbers. The body is a candidate under its lowest number (the stack's host, as the
simulator observes it: :func:`sda.sim.objects.bodies`); its other numbers are not candidates.

:func:`prefilter` -- the spatial prefilter's geometry: which (observation, object) pairs can be
candidates at all, from the catalogue propagated once to the batch's reference time. Distances are
compared squared, from dot products: one matrix product per batch, not an [observations, objects, 3]
array per step.

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

import numpy as np
import pandas as pd

from sda.orbit.frames import ecef_to_teme, razel_to_ecef, site_teme, unit_vector_radec

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


def prefilter(kind: str, obs: pd.DataFrame, t: np.ndarray, r_ref: np.ndarray, reach_km: np.ndarray,
              radius_km: float | np.ndarray) -> np.ndarray:
    """[observations, objects]: could the object, at the observation time, be within ``radius_km``
    of the observation (the measured point; for optical, the line of sight)? False for objects SGP4
    could not evaluate at the reference time. Distances are compared squared, from dot products
    (one matrix product per batch, not an [observations, objects, 3] array per step)."""
    col = lambda name: obs[name].to_numpy(dtype=float)  # noqa: E731
    limit2 = np.square(radius_km + reach_km)
    with np.errstate(invalid="ignore"):
        if kind == "optical":
            los = unit_vector_radec(col("ra_rad"), col("dec_rad"))
            site = site_teme(col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"), t)
            rho2 = _squared_distances(site, r_ref)  # |object - site|^2
            ahead = los @ r_ref.T - np.sum(site * los, axis=-1)[:, None]  # along the line of sight
            # squared distance from the object to the ray (to the site when it is behind the sensor);
            # the optical miss (angle x range) is never below it
            dist2 = np.where(ahead > 0, np.maximum(rho2 - ahead * ahead, 0.0), rho2)
            return dist2 < limit2
        if kind == "radar":
            site = (col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"))
            ecef = razel_to_ecef(col("range_m") / 1000.0, col("az_rad"), col("el_rad"), *site)
            point, _ = ecef_to_teme(ecef, np.zeros_like(ecef), t)
        else:
            point = np.stack([col("x_m"), col("y_m"), col("z_m")], axis=-1) / 1000.0
        return _squared_distances(point, r_ref) < limit2


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
