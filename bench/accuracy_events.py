"""bench/accuracy.py's scoring of conjunctions and alerts against the truth.

For every screened event and open alert: predicted against true miss distance and TCA (the truth's closest
approach of the pair within 10 minutes of the predicted TCA), and the alerts whose true miss is over 5 km; split
by whether both, one or neither object screened with a fused orbit. ``recall``: of the true approaches between
catalogued objects in the horizon (brute force over the truth), the share under 1 km and under the screening
threshold that the screening found (an event of the same pair within 2 minutes of the true TCA). ``alerts_by_rule``:
per alert rule (the alerts' ``alert_rule``, sda.alerts.assessment.judge) the open alerts it fired for, those it
alone fired for, and of them the truly closer than 1 km and truly farther than 5 km.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from common import log

from sda.sim.alert_truth import judged

FOUND_WITHIN_S = 120.0  # an event of the pair this close to a true TCA found it
CLOSE_M = 1000.0
FAR_M = 5000.0
RULES = ("pc", "miss_distance", "miss_probability")  # sda.alerts.assessment.RULES


def pairs_alerted(true: pd.DataFrame, alerts: pd.DataFrame) -> dict:
    """Pairs with a true approach under 1 km, and of them those with an open alert: a slow encounter has
    several true minima minutes apart and one alert, which a match by TCA within 120 s would count as missed."""
    close = {(min(p, s), max(p, s)) for p, s in zip(true[true["miss_m"] < CLOSE_M]["primary_id"],
                                                     true[true["miss_m"] < CLOSE_M]["secondary_id"])}
    alerted = {(min(p, s), max(p, s)) for p, s in zip(alerts["primary_id"], alerts["secondary_id"])}
    return {"pairs": len(close), "pairs_alerted": len(close & alerted),
            "pairs_not_alerted": sorted([list(map(int, x)) for x in close - alerted])}


def fused_ids(tables: dict) -> set[int]:
    f = tables["fused_orbits"]
    return set(int(n) for n in f[(f["status"] == "converged") & f["line1"].notna()]["norad_id"])


def true_approaches(eph, tables: dict, conj: pd.DataFrame, horizon: tuple[float, float], threshold_km: float):
    """The truth's approaches between catalogued objects in the horizon, each marked found or not."""
    from sda.sim import accuracy

    cat_ids = set(int(n) for n in tables["catalog"]["norad_id"])
    rows = np.array([i for i, n in enumerate(eph.norad) if int(n) in cat_ids])
    started = time.monotonic()
    true = accuracy.true_approaches(eph, horizon[0], horizon[1], threshold_km, rows=rows)
    log(f"true approaches under {threshold_km:g} km in the horizon: {len(true)} ({time.monotonic() - started:.0f} s)")
    found = []
    for p, s, t in zip(true["primary_id"], true["secondary_id"], true["tca_unix"]):
        same = conj[(conj["primary_id"] == min(p, s)) & (conj["secondary_id"] == max(p, s))]
        found.append(bool(((same["tca_unix"] - t).abs() <= FOUND_WITHIN_S).any()))
    true["found"] = found
    return true


def _figures(frame: pd.DataFrame) -> dict:
    from sda.sim import accuracy

    return {"count": int(len(frame)), "miss_error_m": accuracy.summary(frame["miss_error_m"]),
            "tca_error_s": accuracy.summary(frame["tca_error_s"]),
            "true_miss_over_5km": int((frame["true_miss_m"] > FAR_M).sum()),
            "share_true_miss_over_5km": None if frame.empty else round(float((frame["true_miss_m"] > FAR_M).mean()), 4),
            "truly_under_1km": int((frame["true_miss_m"] < CLOSE_M).sum())}


def by_rule(alerts: pd.DataFrame) -> dict:
    """Per alert rule: the alerts it fired for (``alerts``) and it alone (``only``), and of those the truly
    closer than 1 km and farther than 5 km (``alerts`` with ``alert_rule`` and ``true_miss_m``)."""
    if "alert_rule" not in alerts.columns:
        return {}
    fired = [[] if not isinstance(r, str) else r.split(",") for r in alerts["alert_rule"]]
    out = {}
    for rule in RULES:
        for key, mask in ((rule, [rule in f for f in fired]), (f"{rule}_only", [f == [rule] for f in fired])):
            sub = alerts[np.array(mask, bool)] if len(alerts) else alerts
            out[key] = {"alerts": int(len(sub)), "truly_under_1km": int((sub["true_miss_m"] < CLOSE_M).sum()),
                        "true_miss_over_5km": int((sub["true_miss_m"] > FAR_M).sum())}
    return out


def _recall(true: pd.DataFrame, limit_m: float) -> dict:
    sub = true[true["miss_m"] < limit_m]
    return {"true": int(len(sub)), "found": int(sub["found"].sum()),
            "recall": None if sub.empty else round(float(sub["found"].mean()), 4)}


def score_events(eph, tables: dict, horizon: tuple[float, float], threshold_km: float) -> dict:
    """Predicted against true conjunctions and alerts, and the recall of the true approaches."""
    conj = judged(eph, tables["conjunctions"])
    alerts = judged(eph, tables["alerts"][tables["alerts"]["status"] != "closed"])
    true = true_approaches(eph, tables, conj, horizon, threshold_km)
    missed = true[~true["found"] & (true["miss_m"] < CLOSE_M)]
    fused = fused_ids(tables)
    p_fused = alerts["p_cov_source"].str.startswith("fused/")
    s_fused = alerts["s_cov_source"].str.startswith("fused/")
    both = p_fused & s_fused
    true_fused = true[true["primary_id"].isin(fused) & true["secondary_id"].isin(fused)]
    fused_missed = true_fused[~true_fused["found"] & (true_fused["miss_m"] < CLOSE_M)]
    return {"conjunctions": _figures(conj), "alerts": _figures(alerts), "alerts_both_fused": _figures(alerts[both]),
            "alerts_one_fused": _figures(alerts[both ^ (p_fused | s_fused)]),
            "alerts_catalogue_only": _figures(alerts[~(p_fused | s_fused)]),
            "recall_under_1km_both_fused": {"true": int((true_fused["miss_m"] < CLOSE_M).sum()),
                                            "found": int(true_fused[true_fused["miss_m"] < CLOSE_M]["found"].sum()),
                                            **pairs_alerted(true_fused, alerts),
                                            "missed": fused_missed.head(20).round(1).to_dict("records")},
            "alerts_by_rule": by_rule(alerts),
            "recall_under_1km": _recall(true, CLOSE_M), "recall_under_threshold": _recall(true, threshold_km * 1000.0),
            "missed_under_1km": missed.head(20).round(1).to_dict("records"),
            "alerts_detail": alerts[["primary_id", "secondary_id", "level", "miss_m", "true_miss_m", "tca_error_s"]]
            .round(1).head(40).to_dict("records")}
