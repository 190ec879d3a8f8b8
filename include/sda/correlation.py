"""Observation-to-object association (numpy): predict each observation from the catalogue and keep
the nearest object inside a gate.

A batch of observations (in the job: one event-time bucket) is handled at once, as array
arithmetic in blocks that bound the memory (observations x objects x 3 doubles):

1. the whole catalogue is propagated once (``SatrecArray``) at the batch's reference time;
2. spatial prefilter: an (observation, object) pair is kept only if the object, at the reference
   time, is within :data:`REPORT_GATES` gates of the observation plus the distance the object can
   cover in ``|t - t_ref|`` (its speed plus a gravity bound) -- for optical tracks, the angle that
   distance can subtend from the site;
3. only the kept objects are propagated (vectorised) to the exact observation times and the
   residuals computed; the nearest decides.

Residuals, per sensor kind:

* radar -- the observed point ``razel_to_ecef(range, az, el, site)`` against the predicted ECEF
  position: a distance in metres, gated at ``gate_km``;
* ISL -- the reported TEME position against the predicted TEME position, gated at ``gate_km``;
* optical (angles only) -- the angle between the observed line of sight and the predicted one from
  the site, gated at ``optical_gate_rad``; reported in metres as that angle times the predicted
  range (the cross-track miss at the object).

Ambiguity: when the runner-up is also inside the gate and its gate-normalised residual is below
twice the best one, the association is flagged ambiguous (it still goes to the best). Objects that
SGP4 cannot evaluate at a time (non-zero error code) are simply not candidates there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from sgp4.api import Satrec

from sda.frames import (
    angle_between,
    ecef_to_teme,
    propagate,
    razel_to_ecef,
    site_teme,
    teme_to_ecef,
    unit_vector_radec,
)

# Angular gate for optical tracks: far above the 1 arcsec (0.00028 deg) GEODSS noise, and at GEO
# range (36,000 km) it is ~31 km, comparable with the radar/ISL position gate.
OPTICAL_GATE_DEG = 0.05
AMBIGUITY_RATIO = 2.0
BUCKET_S = 60  # event-time bucket: one catalogue propagation serves all observations in a bucket
BLOCK_ELEMENTS = 2_000_000  # observations x objects per block (x3 doubles: ~48 MB)
# Uncorrelated observations name their nearest object when it lies within this many gates.
REPORT_GATES = 3.0
# Bound on any object's acceleration (gravity at the surface, padded): how far it can stray from a
# straight line in the time between the reference propagation and the observation.
MAX_ACCEL_KM_S2 = 1.05 * 398600.4418 / 6378.137**2

REASON_NO_CANDIDATE = "no catalogue object inside the gate"
REASON_NOT_PROPAGATED = "no catalogue object could be propagated to the observation time"
REASON_INCOMPLETE = "measurement incomplete for its sensor kind"
REASON_UNKNOWN_KIND = "unknown sensor kind"

_REQUIRED = {
    "radar": ("range_m", "az_rad", "el_rad", "site_lat_deg", "site_lon_deg", "site_alt_m"),
    "optical": ("ra_rad", "dec_rad", "site_lat_deg", "site_lon_deg", "site_alt_m"),
    "isl": ("x_m", "y_m", "z_m"),
}

RESULT_COLUMNS = {
    "obs_id": "object",
    "status": "object",  # correlated | uncorrelated
    "norad_id": "Int64",
    "residual_m": "float64",
    "candidates": "int32",
    "ambiguous": "bool",
    "reason": "object",
    "nearest_norad_id": "Int64",
    "nearest_residual_m": "float64",
}


def to_unix_seconds(times: pd.Series) -> np.ndarray:
    """Timestamps (naive = UTC, or aware) -> float unix seconds."""
    ts = pd.to_datetime(times, utc=True)
    return ((ts - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)).to_numpy(dtype=float)


def _residuals(kind: str, obs: pd.DataFrame, t: np.ndarray, r: np.ndarray, v: np.ndarray,
               gate_km: float, optical_gate_rad: float) -> tuple[np.ndarray, np.ndarray]:
    """(gate-normalised score, residual in metres), each [observations, objects]; NaN where the
    object could not be propagated. ``r``/``v`` are [observations, objects, 3] TEME km, km/s."""
    col = lambda name: obs[name].to_numpy(dtype=float)  # noqa: E731
    if kind == "radar":
        site = (col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"))
        observed = razel_to_ecef(col("range_m") / 1000.0, col("az_rad"), col("el_rad"), *site)
        predicted, _ = teme_to_ecef(r, v, t[:, None])
        miss_km = np.linalg.norm(predicted - observed[:, None, :], axis=-1)
        return miss_km / gate_km, miss_km * 1000.0
    if kind == "isl":
        observed = np.stack([col("x_m"), col("y_m"), col("z_m")], axis=-1) / 1000.0
        miss_km = np.linalg.norm(r - observed[:, None, :], axis=-1)
        return miss_km / gate_km, miss_km * 1000.0
    if kind == "optical":
        los = unit_vector_radec(col("ra_rad"), col("dec_rad"))
        site = site_teme(col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"), t)
        rho = r - site[:, None, :]
        angle = angle_between(np.broadcast_to(los[:, None, :], rho.shape), rho)
        return angle / optical_gate_rad, angle * np.linalg.norm(rho, axis=-1) * 1000.0
    raise ValueError(kind)


def correlate_frame(obs: pd.DataFrame, norad_ids: Sequence[int], satrecs: Sequence[Satrec], gate_km: float,
                    optical_gate_rad: float = np.deg2rad(OPTICAL_GATE_DEG)) -> pd.DataFrame:
    """Associate each observation of ``obs`` (OBSERVATION envelope columns; ``event_time`` as
    timestamps) with the catalogue ``(norad_ids, satrecs)``. Returns one row per observation with
    the columns of :data:`RESULT_COLUMNS`."""
    n = len(obs)
    out = pd.DataFrame(
        {
            "obs_id": obs["obs_id"].to_numpy(dtype=object),
            "status": np.full(n, "uncorrelated", dtype=object),
            "norad_id": pd.array([pd.NA] * n, dtype="Int64"),
            "residual_m": np.full(n, np.nan),
            "candidates": np.zeros(n, dtype=np.int32),
            "ambiguous": np.zeros(n, dtype=bool),
            "reason": np.full(n, REASON_UNKNOWN_KIND, dtype=object),
            "nearest_norad_id": pd.array([pd.NA] * n, dtype="Int64"),
            "nearest_residual_m": np.full(n, np.nan),
        }
    )
    if n == 0:
        return out.astype(RESULT_COLUMNS)
    ids = np.asarray(norad_ids, dtype=np.int64)
    t_all = to_unix_seconds(obs["event_time"])
    kinds = obs["sensor_kind"].to_numpy(dtype=object)
    complete = np.zeros(n, dtype=bool)
    for kind, needed in _REQUIRED.items():
        is_kind = kinds == kind
        present = np.ones(n, dtype=bool)
        for name in needed:
            present &= obs[name].notna().to_numpy() if name in obs else False
        out.loc[is_kind & ~present, "reason"] = REASON_INCOMPLETE
        complete |= is_kind & present
    if not complete.any():
        return out.astype(RESULT_COLUMNS)
    if len(ids) == 0:
        out.loc[complete, "reason"] = REASON_NOT_PROPAGATED
        return out.astype(RESULT_COLUMNS)

    # Spatial prefilter: the whole catalogue is propagated once, at the batch's reference time; an
    # object can only be a candidate of an observation if, at that time, it is within the report
    # radius plus how far it can move in |t - t_ref| (speed at t_ref plus a gravity bound). Only
    # those (observation, object) pairs are propagated to the exact observation times.
    t_ref = 0.5 * (t_all[complete].min() + t_all[complete].max())
    _, r_ref, v_ref = propagate(satrecs, np.array([t_ref]))
    r_ref, speed_ref = r_ref[:, 0, :], np.linalg.norm(v_ref[:, 0, :], axis=-1)
    if not np.isfinite(r_ref).any():
        out.loc[complete, "reason"] = REASON_NOT_PROPAGATED
        return out.astype(RESULT_COLUMNS)
    rows = np.flatnonzero(complete)
    block = max(1, BLOCK_ELEMENTS // max(len(ids), 1))
    for kind in _REQUIRED:
        kind_rows = rows[kinds[rows] == kind]
        for lo in range(0, len(kind_rows), block):
            sel = kind_rows[lo:lo + block]
            block_obs, t = obs.iloc[sel], t_all[sel]
            reach = speed_ref[None, :] * np.abs(t - t_ref)[:, None] + 0.5 * MAX_ACCEL_KM_S2 * ((t - t_ref) ** 2)[:, None]
            near = _prefilter(kind, block_obs, t, r_ref, reach, gate_km, optical_gate_rad)
            obs_i, obj_j = np.nonzero(near)
            score = np.full((len(sel), len(ids)), np.inf)
            residual = np.full((len(sel), len(ids)), np.nan)
            if len(obs_i):
                objects, obj_pos = np.unique(obj_j, return_inverse=True)
                times, time_pos = np.unique(t[obs_i], return_inverse=True)
                _, r, v = propagate([satrecs[k] for k in objects], times)  # [candidates, times, 3]
                s, res = _residuals(kind, block_obs.iloc[obs_i], t[obs_i], r[obj_pos, time_pos][:, None, :],
                                    v[obj_pos, time_pos][:, None, :], gate_km, optical_gate_rad)
                score[obs_i, obj_j], residual[obs_i, obj_j] = s[:, 0], res[:, 0]
            _decide(out, sel, ids, score, residual)
    return out.astype(RESULT_COLUMNS)


def _prefilter(kind: str, obs: pd.DataFrame, t: np.ndarray, r_ref: np.ndarray, reach_km: np.ndarray,
               gate_km: float, optical_gate_rad: float) -> np.ndarray:
    """[observations, objects]: could the object be within REPORT_GATES gates of the observation?
    False for objects SGP4 could not evaluate at the reference time."""
    col = lambda name: obs[name].to_numpy(dtype=float)  # noqa: E731
    with np.errstate(invalid="ignore"):
        if kind == "optical":
            los = unit_vector_radec(col("ra_rad"), col("dec_rad"))
            rho = r_ref[None, :, :] - site_teme(col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"), t)[:, None, :]
            dist = np.linalg.norm(rho, axis=-1)
            angle = angle_between(np.broadcast_to(los[:, None, :], rho.shape), rho)
            # the direction to an object that moves by `reach` turns by at most asin(reach / (range - reach))
            turn = np.where(dist > reach_km, np.arcsin(np.clip(reach_km / np.maximum(dist - reach_km, 1e-9), 0, 1)), np.pi)
            return angle < REPORT_GATES * optical_gate_rad + turn
        if kind == "radar":
            site = (col("site_lat_deg"), col("site_lon_deg"), col("site_alt_m"))
            ecef = razel_to_ecef(col("range_m") / 1000.0, col("az_rad"), col("el_rad"), *site)
            point, _ = ecef_to_teme(ecef, np.zeros_like(ecef), t)
        else:
            point = np.stack([col("x_m"), col("y_m"), col("z_m")], axis=-1) / 1000.0
        return np.linalg.norm(r_ref[None, :, :] - point[:, None, :], axis=-1) < REPORT_GATES * gate_km + reach_km


def _decide(out: pd.DataFrame, sel: np.ndarray, ids: np.ndarray, score: np.ndarray, residual: np.ndarray) -> None:
    score = np.where(np.isfinite(score), score, np.inf)
    inside = score < 1.0
    candidates = inside.sum(axis=1)
    if score.shape[1] >= 2:
        two = np.argpartition(score, 1, axis=1)[:, :2]
        s2 = np.take_along_axis(score, two, axis=1)
        swap = s2[:, 1] < s2[:, 0]
        best = np.where(swap, two[:, 1], two[:, 0])
        s_best, s_second = np.where(swap, s2[:, 1], s2[:, 0]), np.where(swap, s2[:, 0], s2[:, 1])
    else:
        best = np.zeros(len(sel), dtype=int)
        s_best, s_second = score[:, 0], np.full(len(sel), np.inf)
    best_residual = residual[np.arange(len(sel)), best]
    hit = s_best < 1.0
    near = np.isfinite(s_best)
    ambiguous = hit & (s_second < 1.0) & (s_second < AMBIGUITY_RATIO * s_best)
    out.loc[sel, "candidates"] = candidates.astype(np.int32)
    out.loc[sel[hit], "status"] = "correlated"
    out.loc[sel[hit], "reason"] = None
    out.loc[sel[hit], "norad_id"] = ids[best[hit]]
    out.loc[sel[hit], "residual_m"] = best_residual[hit]
    out.loc[sel, "ambiguous"] = ambiguous
    out.loc[sel[~hit], "reason"] = REASON_NO_CANDIDATE
    miss = ~hit & near  # a near miss (within REPORT_GATES gates): name it
    out.loc[sel[miss], "nearest_norad_id"] = ids[best[miss]]
    out.loc[sel[miss], "nearest_residual_m"] = best_residual[miss]
