"""Scoring what the pipeline predicts against the simulator's numerical truth (bench/accuracy.py).

Pure functions over numpy / pandas: the truth is a :class:`sda.sim.dynamics.Ephemeris`, the pipeline's
orbits are SGP4 element sets (``Satrec``), its conjunctions and alerts plain frames.

* :func:`position_errors`: true minus predicted position on the predicted orbit's radial, along-track and
  cross-track axes, and the Mahalanobis distance of that error under a diagonal RTN covariance;
* :func:`true_approaches`: every approach closer than a threshold between bodies of the truth over a
  span, by brute force (all pairs near each other at a 10 s sample, then the closest point refined);
* :func:`true_closest`: the truth's own closest approach of one pair near a predicted TCA;
* :func:`summary`: median and 90th percentile.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sda.orbit import frames

CHI2_3DOF_95 = 7.814727903251178  # 95 % quantile of the chi-square distribution with 3 degrees of freedom


def summary(values) -> dict:
    """``{"n", "median", "p90"}`` of the finite values (None when there are none)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"n": 0, "median": None, "p90": None}
    return {"n": int(x.size), "median": round(float(np.median(x)), 3), "p90": round(float(np.percentile(x, 90)), 3)}


def rtn_axes(r: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[..., 3, 3] rows: radial, along-track, cross-track unit vectors of the orbit through (r, v)."""
    radial = r / np.linalg.norm(r, axis=-1, keepdims=True)
    h = np.cross(r, v)
    cross = h / np.linalg.norm(h, axis=-1, keepdims=True)
    return np.stack([radial, np.cross(cross, radial), cross], axis=-2)


def position_errors(r_true: np.ndarray, r_pred: np.ndarray, v_pred: np.ndarray,
                    sigma_rtn_m: np.ndarray | None = None) -> pd.DataFrame:
    """Per row: true - predicted position (km in) on the predicted orbit's R, T, N axes and its norm (m);
    with ``sigma_rtn_m`` [n, 3] the Mahalanobis distance squared ``d2`` under that diagonal covariance and
    ``inside95`` (d2 at most the 3-degree-of-freedom chi-square 95 % point)."""
    d = (np.asarray(r_true, float) - np.asarray(r_pred, float)) * 1000.0
    e = np.einsum("nij,nj->ni", rtn_axes(np.asarray(r_pred, float), np.asarray(v_pred, float)), d)
    out = pd.DataFrame({"radial_m": e[:, 0], "along_m": e[:, 1], "cross_m": e[:, 2],
                        "total_m": np.linalg.norm(e, axis=1)})
    if sigma_rtn_m is not None:
        out["d2"] = np.sum((e / np.asarray(sigma_rtn_m, float)) ** 2, axis=1)
        out["inside95"] = out["d2"] <= CHI2_3DOF_95
    return out


def error_figures(errors: pd.DataFrame) -> dict:
    """Median / p90 of |R|, |T|, |N| and total, and covariance realism when ``d2`` is there."""
    out = {axis: summary(np.abs(errors[f"{axis}_m"])) for axis in ("radial", "along", "cross", "total")}
    if "d2" in errors:
        d2 = errors["d2"].to_numpy(float)
        ok = np.isfinite(d2)
        out["mean_d2"] = round(float(d2[ok].mean()), 3) if ok.any() else None
        out["median_d2"] = round(float(np.median(d2[ok])), 3) if ok.any() else None
        out["inside95"] = round(float(errors["inside95"][ok].mean()), 4) if ok.any() else None
    return out


def _refine(eph, a: np.ndarray, b: np.ndarray, t: np.ndarray, iterations: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Closest approach of bodies (rows) ``a`` and ``b`` near times ``t``: Newton steps on the range rate
    (t <- t - (dr . dv) / |dv|^2, the relative motion taken as straight between steps)."""
    t = np.asarray(t, float).copy()
    for _ in range(iterations):
        ra, va = eph.at_pairs(a, t)
        rb, vb = eph.at_pairs(b, t)
        dr, dv = rb - ra, vb - va
        step = np.sum(dr * dv, axis=1) / np.maximum(np.sum(dv * dv, axis=1), 1e-12)
        t = np.clip(t - np.clip(step, -30.0, 30.0), eph.t0, eph.t_end)
    ra, _ = eph.at_pairs(a, t)
    rb, _ = eph.at_pairs(b, t)
    return t, np.linalg.norm(rb - ra, axis=1) * 1000.0


def true_approaches(eph, t_start: float, t_end: float, threshold_km: float, sample_s: float = 10.0,
                    rows: np.ndarray | None = None, chunk: int = 240) -> pd.DataFrame:
    """Every closest approach under ``threshold_km`` between the bodies of ``eph`` (its ``rows``, default
    all) with TCA in ``[t_start, t_end)``: primary_id < secondary_id, tca_unix, miss_m. Brute force: at
    each sample, the pairs closer than the threshold plus what 16 km/s of relative motion covers in half
    a sample (a k-d tree), each then refined; one approach per pair and minute."""
    from scipy.spatial import cKDTree

    rows = np.arange(len(eph.norad)) if rows is None else np.asarray(rows)
    reach = threshold_km + 16.0 * sample_s / 2.0 + 1.0
    times = np.arange(t_start, t_end, sample_s)
    cand_a, cand_b, cand_t = [], [], []
    for lo in range(0, len(times), chunk):
        ts = times[lo:lo + chunk]
        _, r, _ = eph.at(ts)
        r = r[rows]
        for k, t in enumerate(ts):
            pos = r[:, k]
            ok = np.flatnonzero(np.isfinite(pos).all(axis=1))
            if ok.size < 2:
                continue
            pairs = cKDTree(pos[ok]).query_pairs(reach, output_type="ndarray")
            if len(pairs):
                cand_a.append(rows[ok[pairs[:, 0]]])
                cand_b.append(rows[ok[pairs[:, 1]]])
                cand_t.append(np.full(len(pairs), t))
    if not cand_a:
        return pd.DataFrame(columns=["primary_id", "secondary_id", "tca_unix", "miss_m"])
    a, b, t = np.concatenate(cand_a), np.concatenate(cand_b), np.concatenate(cand_t)
    tca, miss = _refine(eph, a, b, t)
    ids_a, ids_b = eph.norad[a], eph.norad[b]
    found = pd.DataFrame({"primary_id": np.minimum(ids_a, ids_b), "secondary_id": np.maximum(ids_a, ids_b),
                          "tca_unix": tca, "miss_m": miss})
    found = found[(found["miss_m"] < threshold_km * 1000.0) & (found["tca_unix"] >= t_start)
                  & (found["tca_unix"] < t_end)]
    found["minute"] = np.round(found["tca_unix"] / 60.0).astype(np.int64)
    found = found.sort_values("miss_m").drop_duplicates(["primary_id", "secondary_id", "minute"])
    return found.drop(columns="minute").sort_values(["tca_unix", "primary_id"]).reset_index(drop=True)


def true_closest(eph, primary_id: int, secondary_id: int, tca_unix: float,
                 window_s: float = 600.0) -> tuple[float, float]:
    """The truth's closest approach of the pair within ``window_s`` of a predicted TCA: (tca_unix, miss_m);
    NaN when either body has no truth there."""
    index = {int(n): i for i, n in enumerate(eph.norad)}
    if int(primary_id) not in index or int(secondary_id) not in index:
        return math.nan, math.nan
    a, b = index[int(primary_id)], index[int(secondary_id)]
    ts = np.arange(tca_unix - window_s, tca_unix + window_s + 1e-9, 1.0)
    ts = ts[(ts >= eph.t0) & (ts <= eph.t_end)]
    if ts.size == 0:
        return math.nan, math.nan
    ra, _ = eph.at_pairs(np.full(ts.size, a), ts)
    rb, _ = eph.at_pairs(np.full(ts.size, b), ts)
    d = np.linalg.norm(rb - ra, axis=1)
    if not np.isfinite(d).any():
        return math.nan, math.nan
    k = int(np.nanargmin(d))
    t, miss = _refine(eph, np.array([a]), np.array([b]), ts[k:k + 1])
    return float(t[0]), float(miss[0])


def regime_of(satrec) -> str:
    """The catalogue's regime of an element set (sda.orbit.uncertainty.orbit_regime)."""
    from sda.orbit import uncertainty

    return uncertainty.orbit_regime(*frames.perigee_apogee_km(satrec))
