"""Alerts judged against a simulation's truth: what the end of ``make run`` prints, and what
bench/accuracy.py scores.

The pipeline never reads the truth; this reads it after the run, beside the pipeline's alerts:

* :func:`judged`: each alert (or screened event) with the truth's own closest approach of its pair within
  10 minutes of the predicted TCA (:func:`sda.sim.accuracy.true_closest`), and the miss-distance and TCA
  errors;
* :func:`alert_figures`: the open alerts by the orbits they used (both fused, one, none: whether each object
  was screened on its fused orbit or the catalogue's element set, from the alert's ``*_cov_source``,
  :func:`sda.pipeline.lineage.orbit.orbit_kind`), the miss-distance error of each group against the truth
  (median and 90th percentile), and the injected pair's alert nearest its true TCA; ``by_rule``: per alert rule
  (the alerts' ``alert_rule``, sda.alerts.assessment.judge) the open alerts it fired for and, of them, the truly
  farther than 5 km.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from sda.orbit.times import unix
from sda.pipeline.lineage.orbit import orbit_kind
from sda.sim import accuracy

INJECTED_PAIR = (99901, 99902)  # sda.sim.conjunction's injected near-collision (simulate --inject-conjunction)
RULES = ("pc", "miss_distance", "miss_probability")  # sda.alerts.assessment.RULES
FAR_M = 5000.0


def judged(eph, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (``primary_id``, ``secondary_id``, ``tca``, ``miss_m``) with the truth's closest approach of
    each pair near its TCA (``true_tca_unix``, ``true_miss_m``; NaN where the truth has neither body) and
    the errors ``miss_error_m`` = |miss - true miss| and ``tca_error_s``."""
    frame = frame.copy()
    truth = [accuracy.true_closest(eph, p, s, unix(pd.Timestamp(t)))
             for p, s, t in zip(frame["primary_id"], frame["secondary_id"], frame["tca"])]
    frame["true_tca_unix"] = [t for t, _ in truth]
    frame["true_miss_m"] = [m for _, m in truth]
    frame["tca_unix"] = [unix(pd.Timestamp(t)) for t in frame["tca"]]
    frame["miss_error_m"] = (frame["miss_m"] - frame["true_miss_m"]).abs()
    frame["tca_error_s"] = (frame["tca_unix"] - frame["true_tca_unix"]).abs()
    return frame


def _group(frame: pd.DataFrame) -> dict:
    errors = accuracy.summary(frame["miss_error_m"])
    return {"alerts": int(len(frame)), "scored": errors["n"], "miss_error_median_m": errors["median"],
            "miss_error_p90_m": errors["p90"]}


def alert_figures(eph, alerts: pd.DataFrame, pair: Iterable[int] = INJECTED_PAIR,
                  pair_tca_unix: float | None = None) -> dict:
    """The open alerts of gold ``alerts`` (one row per alert: ``status``, ``primary_id``, ``secondary_id``,
    ``tca``, ``miss_m``, ``p_cov_source``, ``s_cov_source``; ``cdm_file`` optional) judged against the truth
    ``eph``: per group (``both_fused``, ``one_fused``, ``catalogue_only``) the count and miss-distance
    error; ``pair``: the injected pair's alert of its designed encounter -- the one nearest
    ``pair_tca_unix`` when given, else the one the truth puts closest -- (None when it has none; the pair
    also passes near each other once a revolution, and those approaches may be alerted too)."""
    open_alerts = alerts[alerts["status"] != "closed"]
    frame = judged(eph, open_alerts) if len(open_alerts) else open_alerts.assign(
        true_tca_unix=[], true_miss_m=[], tca_unix=[], miss_error_m=[], tca_error_s=[])
    fused = [(orbit_kind(p) == "fused") + (orbit_kind(s) == "fused")
             for p, s in zip(frame["p_cov_source"], frame["s_cov_source"])]
    frame = frame.assign(fused_objects=fused)
    out = {"open_alerts": int(len(frame)),
           "both_fused": _group(frame[frame["fused_objects"] == 2]),
           "one_fused": _group(frame[frame["fused_objects"] == 1]),
           "catalogue_only": _group(frame[frame["fused_objects"] == 0])}
    out["by_rule"] = _by_rule(frame)
    lo, hi = sorted(int(n) for n in pair)
    mine = frame[(frame["primary_id"] == lo) & (frame["secondary_id"] == hi)]
    out["pair"] = None
    if len(mine):
        if pair_tca_unix is not None:
            row = mine.loc[(mine["tca_unix"] - pair_tca_unix).abs().idxmin()]
        else:
            row = mine.loc[mine["true_miss_m"].fillna(math.inf).idxmin()]
        out["pair"] = {"primary_id": lo, "secondary_id": hi, "tca": str(row["tca"]),
                       "miss_m": float(row["miss_m"]), "true_miss_m": _finite(row["true_miss_m"]),
                       "miss_error_m": _finite(row["miss_error_m"]),
                       "primary_orbit": orbit_kind(row["p_cov_source"]),
                       "secondary_orbit": orbit_kind(row["s_cov_source"]),
                       "cdm_file": row.get("cdm_file")}
    return out


def _by_rule(frame: pd.DataFrame) -> dict:
    if "alert_rule" not in frame.columns:
        return {}
    fired = [r.split(",") if isinstance(r, str) else [] for r in frame["alert_rule"]]
    far = (frame["true_miss_m"] > FAR_M).to_numpy(bool)
    return {rule: {"alerts": sum(rule in f for f in fired),
                   "true_miss_over_5km": int(sum(rule in f and x for f, x in zip(fired, far)))} for rule in RULES}


def _finite(value) -> float | None:
    return float(value) if value is not None and math.isfinite(float(value)) else None
