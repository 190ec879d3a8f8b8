"""bench/accuracy.py's scoring of positions and covariances against the truth: the catalogue element sets the
pipeline screens with, and the fused orbits beside the catalogue element sets they started from.

``position`` (:func:`score_positions`), per regime of the catalogue's element set, at the run's end and 6 h and
24 h later: the error of the newest element set per object in gold ``catalog`` (radial / along-track /
cross-track / total, median and p90, m). Beside it, under ``circular_model_check``, the d^2 of each error under
the covariance the pipeline models for that object (sda.orbit.uncertainty, with the object's newest gold
``object_state`` as the alerts use it). That is **not** a test of the covariance's realism: the simulator draws
the catalogue's errors from the same model (sda.sim.tle_error), so those figures check the simulator against
its own model (:data:`CIRCULAR_NOTE`).

``fused`` (:func:`score_fused`), per regime, for objects whose newest fused orbit converged, split by how many
passes the arc had (an observation more than 20 minutes after the previous one starts a pass): the fused orbit
predicted (:func:`sda.orbit.estimation.predict`, its covariance grown by drag-consider and process noise, the
density's error from the landed space weather as the alerts' predictions take it; one prediction per object for all
the hours) and the catalogue's element set (SGP4) every hour from the run's end to 24 h later. At the run's end, +6
h and +24 h: the position error against the truth (median, p90), the catalogue's for the same objects and the ratio
of the medians, and the d^2 of the true error under the fused orbit's full position covariance (mean, median, share
inside the 95 % ellipsoid: bench/accuracy_stats.py). Over the 25 hourly times: the CARA-style test
(:func:`accuracy_stats.hourly_test`; groups of at least 20 objects). At most ``sample`` objects per regime are
scored (chosen with the seed): each needs a numerical prediction with its covariance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from accuracy_stats import d2_figures, hourly_test, mahalanobis_d2

from sda.orbit.times import as_utc, unix_seconds

LEADS_H = (0.0, 6.0, 24.0)  # the screened orbits
FUSED_LEADS_H = (0, 6, 24)  # hours after the run's end, among HOURS
HOURS = np.arange(25)  # the CARA-style test's times: every hour from the run's end to 24 h later
PASS_GAP_S = 1200.0
CIRCULAR_NOTE = ("circular: the simulator draws the catalogue's errors from sda.orbit.uncertainty's model "
                 "(sda.sim.tle_error), the model that gives this covariance; these d^2 check the simulator against "
                 "its own model, not the covariance against the sky")


def _aware(value) -> object:
    """A naive UTC timestamp from a table (NaT/None: None) -> an aware datetime."""
    return None if value is None or pd.isna(value) else as_utc(pd.Timestamp(value).to_pydatetime())


def _circular(figures: dict) -> dict:
    """:func:`sda.sim.accuracy.error_figures` with its d^2 figures moved under ``circular_model_check``."""
    check = {k: figures.pop(k) for k in ("mean_d2", "median_d2", "inside95") if k in figures}
    return {**figures, "circular_model_check": check}


def score_positions(eph, tables: dict, end_unix: float, min_sigma_m: float) -> dict:
    """Position error per regime and lead time, and the circular model check (module docstring)."""
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
    by_lead: dict = {}
    for lead in LEADS_H:
        t = end_unix + lead * 3600.0
        _, r_true, _ = eph.at([t])
        _, r_pred, v_pred = frames.propagate(sats, np.array([t]))
        sig = np.array([uncertainty.sigma_rtn_m(ref, t) for ref in refs])
        errors = accuracy.position_errors(r_true[rows, 0], r_pred[:, 0], v_pred[:, 0], sig)
        errors["regime"] = regimes
        errors = errors[np.isfinite(errors["total_m"])]
        by_lead[f"{lead:g}h"] = {regime: {"objects": int(len(g)), **_circular(accuracy.error_figures(g))}
                                 for regime, g in errors.groupby("regime")}
    return {"orbits": "the newest catalogue element set per object (SGP4)", "circular_model_check": CIRCULAR_NOTE,
            "by_lead": by_lead}


def passes_by_object(observed: pd.DataFrame) -> dict[int, int]:
    out = {}
    t = pd.Series(unix_seconds(observed["event_time"]), index=observed.index)
    for norad, times in t.groupby(observed["norad_id"]):
        v = np.sort(times.to_numpy())
        out[int(norad)] = 1 + int(np.sum(np.diff(v) > PASS_GAP_S))
    return out


def score_one(row: dict, line1: str, line2: str, eph, index: int, times: np.ndarray, noise=None) -> np.ndarray:
    """[3, times]: the fused orbit's position error (m), the catalogue element set's (m) and the fused error's d^2
    under the fused position covariance, at ``times``: one numerical prediction of the fused orbit, its model error
    ``noise`` (:class:`sda.orbit.estimation.noise.ProcessNoise`, the landed space weather's; None: quiet)."""
    from sgp4.api import Satrec

    from sda.orbit import frames
    from sda.orbit.estimation import predict
    from sda.orbit.fusion.arcs import result_from_row

    result = result_from_row(row)
    pred = predict(result, np.maximum(times, result.epoch), *([noise] if noise is not None else []))
    r_true, _ = eph.at_pairs(np.full(len(times), index), times)
    _, r_cat, _ = frames.propagate([Satrec.twoline2rv(line1, line2)], times)
    err_m = (r_true - pred.r_km) * 1000.0
    d2 = mahalanobis_d2(err_m, pred.covariance[:, :3, :3])
    return np.stack([np.linalg.norm(err_m, axis=1), np.linalg.norm(r_true - r_cat[0], axis=1) * 1000.0, d2])


def _lead_figures(fused: np.ndarray, cat: np.ndarray, d2: np.ndarray) -> dict:
    ok = np.isfinite(fused) & np.isfinite(cat) & np.isfinite(d2)
    fused, cat, d2 = fused[ok], cat[ok], d2[ok]
    if not ok.any():
        return {"objects": 0}
    realism = d2_figures(d2)
    return {"objects": int(ok.sum()), "fused_median_m": round(float(np.median(fused)), 1),
            "fused_p90_m": round(float(np.percentile(fused, 90)), 1),
            "catalogue_median_m": round(float(np.median(cat)), 1),
            "ratio": round(float(np.median(fused) / max(np.median(cat), 1e-9)), 4),
            "mean_d2": realism["mean_d2"], "median_d2": realism["median_d2"], "inside95": realism["inside95"]}


def group_figures(scored: list[np.ndarray]) -> dict:
    """The figures of one regime and pass group from its objects' :func:`score_one` arrays (times = HOURS)."""
    if not scored:
        return {"objects": 0}
    fused, cat, d2 = np.stack(scored, axis=1)  # each [objects, hours]
    return {"objects": len(scored),
            "leads": {f"{h}h": _lead_figures(fused[:, h], cat[:, h], d2[:, h]) for h in FUSED_LEADS_H},
            "hourly_test": hourly_test(d2)}


def score_fused(eph, tables: dict, end_unix: float, sample: int, seed: int) -> dict:
    """Figures per regime and pass group (module docstring), plus the fused orbits' status counts."""
    fused = tables["fused_orbits"]
    noise = tables.get("process_noise")  # the landed space weather's model error (a storm grows it)
    status = fused.sort_values("window_start").groupby("norad_id").tail(1)["status"].value_counts().to_dict()
    usable = fused[(fused["status"] == "converged") & fused["line1"].notna()]
    newest = usable.sort_values("window_start").groupby("norad_id").tail(1)
    cat = tables["catalog"].set_index("norad_id")
    passes = passes_by_object(tables["observed_times"])
    present = {int(n) for n in eph.norad}
    times = end_unix + HOURS * 3600.0
    rng = np.random.default_rng(seed)
    out: dict = {"status_newest": {k: int(v) for k, v in status.items()}, "hours": HOURS.tolist(), "regimes": {}}
    for regime, group in newest.groupby("regime"):
        # by NORAD id: the sample must not depend on the order the table's rows were read in
        rows = sorted((r for r in group.to_dict("records")
                       if int(r["norad_id"]) in present and int(r["norad_id"]) in cat.index),
                      key=lambda r: int(r["norad_id"]))
        if len(rows) > sample:
            rows = [rows[i] for i in sorted(rng.choice(len(rows), sample, replace=False))]
        scored: dict[str, list] = {"2+ passes": [], "1 pass": []}
        for r in rows:
            n = int(r["norad_id"])
            one = score_one(r, cat.at[n, "line1"], cat.at[n, "line2"], eph, int(eph.rows([n])[0]), times, noise)
            scored["2+ passes" if passes.get(n, 0) >= 2 else "1 pass"].append(one)
        out["regimes"][regime] = {"fused": int(len(group)), "scored": len(rows),
                                  **{g: group_figures(v) for g, v in scored.items()}}
    return out
