"""bench/accuracy.py's scoring of the fused orbits (issue 38, point 4): each against the truth, beside the
catalogue element set it started from, at the run's end and 24 h later.

Per regime, for objects whose newest fused orbit converged, split by how many passes the arc had (an
observation more than 20 minutes after the previous one starts a pass): the fused orbit predicted
(:func:`sda.orbit.estimation.predict`, with its covariance grown by drag-consider and process noise) and the
catalogue's element set (SGP4) at the run's end and +24 h; position error against the truth (median,
p90), the ratio of the medians, and the true error's Mahalanobis distance d^2 under the full position
covariance (median; the share inside the 95 % ellipsoid, d^2 <= 7.815). At most ``sample`` objects per
regime are scored (chosen with the seed): each needs a numerical prediction with its covariance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CHI2_3_95 = 7.815
PASS_GAP_S = 1200.0
LEADS_H = (0.0, 24.0)


def passes_by_object(observed: pd.DataFrame) -> dict[int, int]:
    out = {}
    t = (pd.to_datetime(observed["event_time"]) - pd.Timestamp(0)).dt.total_seconds()
    for norad, times in t.groupby(observed["norad_id"]):
        v = np.sort(times.to_numpy())
        out[int(norad)] = 1 + int(np.sum(np.diff(v) > PASS_GAP_S))
    return out


def _one(row: dict, line1: str, line2: str, eph, index: int, times: np.ndarray) -> dict:
    from sgp4.api import Satrec

    from sda.orbit import frames
    from sda.orbit.estimation import predict
    from sda.orbit.fusion.arcs import result_from_row

    result = result_from_row(row)
    pred = predict(result, np.maximum(times, result.epoch))
    _, r_true, _ = eph.at(times)
    _, r_cat, _ = frames.propagate([Satrec.twoline2rv(line1, line2)], times)
    out = {}
    for k, lead in enumerate(LEADS_H):
        err_m = (r_true[index, k] - pred.r_km[k]) * 1000.0
        cov = pred.covariance[k][:3, :3]
        out[f"{lead:g}h"] = (float(np.linalg.norm(err_m)), float(np.linalg.norm(r_true[index, k] - r_cat[0, k]) * 1e3),
                             float(err_m @ np.linalg.solve(cov, err_m)))
    return out


def _figures(values: list[tuple[float, float, float]]) -> dict:
    if not values:
        return {"objects": 0}
    fused, cat, d2 = (np.array(v) for v in zip(*values))
    return {"objects": len(values), "fused_median_m": round(float(np.median(fused)), 1),
            "fused_p90_m": round(float(np.percentile(fused, 90)), 1),
            "catalogue_median_m": round(float(np.median(cat)), 1),
            "ratio": round(float(np.median(fused) / max(np.median(cat), 1e-9)), 4),
            "d2_median": round(float(np.median(d2)), 2), "inside95": round(float(np.mean(d2 <= CHI2_3_95)), 3)}


def score_fused(eph, tables: dict, end_unix: float, sample: int, seed: int) -> dict:
    """Figures per regime and pass group (module docstring), plus the fused orbits' status counts."""
    fused = tables["fused_orbits"]
    status = fused.sort_values("window_start").groupby("norad_id").tail(1)["status"].value_counts().to_dict()
    usable = fused[(fused["status"] == "converged") & fused["line1"].notna()]
    newest = usable.sort_values("window_start").groupby("norad_id").tail(1)
    cat = tables["catalog"].set_index("norad_id")
    passes = passes_by_object(tables["observed_times"])
    present = {int(n) for n in eph.norad}
    times = end_unix + np.array(LEADS_H) * 3600.0
    rng = np.random.default_rng(seed)
    out: dict = {"status_newest": {k: int(v) for k, v in status.items()}, "regimes": {}}
    for regime, group in newest.groupby("regime"):
        rows = [r for r in group.to_dict("records")
                if int(r["norad_id"]) in present and int(r["norad_id"]) in cat.index]
        if len(rows) > sample:
            rows = [rows[i] for i in sorted(rng.choice(len(rows), sample, replace=False))]
        scored: dict[str, dict[str, list]] = {"2+ passes": {}, "1 pass": {}}
        for r in rows:
            n = int(r["norad_id"])
            one = _one(r, cat.at[n, "line1"], cat.at[n, "line2"], eph, int(eph.rows([n])[0]), times)
            group_name = "2+ passes" if passes.get(n, 0) >= 2 else "1 pass"
            for lead, value in one.items():
                scored[group_name].setdefault(lead, []).append(value)
        out["regimes"][regime] = {"fused": int(len(group)), "scored": len(rows),
                                  **{g: {lead: _figures(v) for lead, v in leads.items()}
                                     for g, leads in scored.items()}}
    return out
