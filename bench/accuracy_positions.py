"""bench/accuracy.py's scoring of positions and covariances against the truth: the orbits the pipeline
screens with, and the fused orbits beside the catalogue element sets they started from.

``position`` (:func:`score_positions`), per regime of the catalogue's element set, at the run's end and 6 h and
24 h later: the error of the newest element set per object in gold ``catalog`` (radial / along-track /
cross-track / total, median and p90, m) and the Mahalanobis distance of each true error under the covariance
the pipeline publishes for it (sda.orbit.uncertainty, with the object's newest gold ``object_state`` as the
alerts use it): mean and median d^2 (3 for a realistic covariance), the share inside the 95 % ellipsoid.

``fused`` (:func:`score_fused`), per regime, for objects whose newest fused orbit converged, split by how many
passes the arc had (an observation more than 20 minutes after the previous one starts a pass): the fused orbit
predicted (:func:`sda.orbit.estimation.predict`, its covariance grown by drag-consider and process noise) and
the catalogue's element set (SGP4) at the run's end and +24 h; position error against the truth (median, p90),
the ratio of the medians, and the true error's d^2 under the full position covariance (median; the share inside
the 95 % ellipsoid). At most ``sample`` objects per regime are scored (chosen with the seed): each needs a
numerical prediction with its covariance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from common import CHI2_3_95

from sda.orbit.times import as_utc, unix_seconds

LEADS_H = (0.0, 6.0, 24.0)  # the screened orbits
FUSED_LEADS_H = (0.0, 24.0)
PASS_GAP_S = 1200.0


def _aware(value) -> object:
    """A naive UTC timestamp from a table (NaT/None: None) -> an aware datetime."""
    return None if value is None or pd.isna(value) else as_utc(pd.Timestamp(value).to_pydatetime())


def score_positions(eph, tables: dict, end_unix: float, min_sigma_m: float) -> dict:
    """Position error and covariance realism per regime and lead time (module docstring)."""
    from sgp4.api import Satrec

    from sda.orbit import frames, uncertainty
    from sda.sim import accuracy

    cat = tables["catalog"].set_index("norad_id")
    states = tables["object_state"].set_index("norad_id")
    ids = [int(n) for n in eph.norad if int(n) in cat.index]
    sats = [Satrec.twoline2rv(cat.at[n, "line1"], cat.at[n, "line2"]) for n in ids]
    regimes = np.array([accuracy.regime_of(s) for s in sats])
    refs = []
    for n in ids:
        last = states.at[n, "last_observed"] if n in states.index else None
        rms = states.at[n, "residual_rms_m"] if n in states.index else None
        refs.append(uncertainty.choose_reference(
            _aware(cat.at[n, "epoch"]), cat.at[n, "perigee_km"], cat.at[n, "apogee_km"], _aware(last),
            None if rms is None or pd.isna(rms) else float(rms), min_sigma_m))
    rows = eph.rows(ids)
    out: dict = {}
    for lead in LEADS_H:
        t = end_unix + lead * 3600.0
        _, r_true, _ = eph.at([t])
        _, r_pred, v_pred = frames.propagate(sats, np.array([t]))
        sig = np.array([uncertainty.sigma_rtn_m(ref, t) for ref in refs])
        errors = accuracy.position_errors(r_true[rows, 0], r_pred[:, 0], v_pred[:, 0], sig)
        errors["regime"] = regimes
        errors = errors[np.isfinite(errors["total_m"])]
        out[f"{lead:g}h"] = {regime: {"objects": int(len(g)), **accuracy.error_figures(g)}
                             for regime, g in errors.groupby("regime")}
    return out


def passes_by_object(observed: pd.DataFrame) -> dict[int, int]:
    out = {}
    t = pd.Series(unix_seconds(observed["event_time"]), index=observed.index)
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
    for k, lead in enumerate(FUSED_LEADS_H):
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
    times = end_unix + np.array(FUSED_LEADS_H) * 3600.0
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
