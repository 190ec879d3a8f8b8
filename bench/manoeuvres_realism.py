"""bench/manoeuvres.py's ``post_burn_realism`` (issue 52, point 2, "no echoes"): is the orbit re-fitted after a
detection as uncertain as its covariance says, and do the detections that match no burn follow an earlier one?

1. **Post-burn rows**: every converged fused window row holding a detection. Its orbit is the re-fit after its
   last detection (sda.orbit.manoeuvre.segments) and the next window's prior. It is predicted
   (sda.orbit.estimation.predict, with the fit's process noise) to the middle observation of each of the object's
   next :data:`NEXT_PASSES` passes starting after its epoch (bench/manoeuvres.py's passes, by the truth's labels).
   The 3-D position error against the truth's ephemeris (sda.sim.truth.load_ephemeris, TEME km as the prediction)
   gives ``d^2`` under the prediction's 3x3 position covariance (bench/accuracy_stats.py: realistic means
   chi-square(3), 95 % of ``d^2`` inside 7.815). A pass is skipped, and counted, when the object has a true burn
   between the row's epoch and the pass's end: no orbit could know about it.
2. **Reference**: the same for converged tested windows (prior not the catalogue) with no detection, at most
   :data:`REFERENCE_CAP` of them, evenly spread in (object, window) order.
3. **At the epoch**: the position error and ``d^2`` at the row's own epoch, the frames' check (a converged fit
   is within a few hundred metres of the truth there).
4. **Fits without a true burn**: the figures again for the rows whose fit spans no true burn
   (``without_true_burn_in_fit``): a fit that absorbed an undetected burn is the detector's miss, not the
   covariance's.
5. **Echoes** (:func:`echoes`): of the detections matching no burn, those in a window whose prior (the object's
   newest converged row of an earlier window) is itself a post-burn re-fit (an echo across a window boundary),
   and those after an earlier detection of the object in the same window.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from accuracy_stats import d2_figures, mahalanobis_d2
from common import log, stats

NEXT_PASSES = 3  # the next pass after the epoch, and the two after it
REFERENCE_CAP = 400  # tested windows without a detection predicted at most
ISSUE_BAND = (0.90, 0.99)  # issue 52: the share of the next pass's errors inside the 95 % ellipsoid after a detection


# --- pure: the unit tests' business ---------------------------------------------------------------------------

def position_d2(r_pred_km, covariance_m, r_true_km) -> float:
    """``d^2`` of the position error (prediction - truth, km) under the 3x3 position block of a TEME covariance in
    metres (6x6 or 3x3): the error is taken to metres first."""
    error_m = (np.asarray(r_pred_km, float) - np.asarray(r_true_km, float)) * 1000.0
    return float(mahalanobis_d2(error_m, np.asarray(covariance_m, float)[:3, :3]))


def pass_middles(t, sensor) -> list[tuple[float, float, float]]:
    """An object's passes (bench/manoeuvres.py's pass_spans) as (first, middle, last) observation times, by first
    time; the middle is the pass's ``(n - 1) // 2``-th observation in time order."""
    from sda.orbit.manoeuvre.detection import ManoeuvreSettings, pass_index

    t = np.asarray(t, float)
    if not len(t):
        return []
    ms = ManoeuvreSettings()
    label = pass_index(t, np.asarray(sensor), ms.pass_gap_s, ms.max_pass_s)
    out = []
    for k in range(int(label.max()) + 1):
        own = np.sort(t[label == k])
        out.append((float(own[0]), float(own[(len(own) - 1) // 2]), float(own[-1])))
    return sorted(out)


def pass_targets(epoch: float, passes: list[tuple], burn_times, count: int = NEXT_PASSES) -> list[float | None]:
    """The middle times of the first ``count`` passes starting after ``epoch`` (fewer if the object has fewer); None
    for a pass with a true burn after ``epoch`` and at or before the pass's end."""
    after = [p for p in passes if p[0] > epoch][:count]
    return [None if any(epoch < b <= last for b in burn_times) else middle for _, middle, last in after]


def post_burn_rows(fused: dict) -> list[tuple[int, dict]]:
    """(norad, row) of the converged rows holding a detection, in (object, window) order."""
    return [(n, r) for n in sorted(fused) for r in fused[n][0] if r["status"] == "converged" and r["manoeuvres"]]


def reference_rows(fused: dict, cap: int = REFERENCE_CAP) -> tuple[list[tuple[int, dict]], int]:
    """((norad, row) of the converged tested rows with no detection, at most ``cap`` of them evenly spread in
    (object, window) order, the first and the last kept), how many there are in all."""
    rows = [(n, r) for n in sorted(fused) for r in fused[n][0]
            if r["status"] == "converged" and r["prior_source"] != "catalogue" and not r["manoeuvres"]]
    if len(rows) <= cap:
        return rows, len(rows)
    pick = sorted(set(np.linspace(0, len(rows) - 1, cap).round().astype(int).tolist()))
    return [rows[i] for i in pick], len(rows)


def window_prior(rows: list[dict], window_start: float) -> dict | None:
    """The object's newest converged row of a window before ``window_start`` (the window's fused prior)."""
    earlier = [r for r in rows if r["window_start_unix"] < window_start and r["status"] == "converged"]
    return max(earlier, key=lambda r: r["window_start_unix"]) if earlier else None


def is_post_burn(row: dict | None) -> bool:
    """Whether a row's orbit is a post-burn re-fit: it holds a detection (or was carried on from one)."""
    return row is not None and (bool(row["manoeuvres"]) or row["prior_source"] == "manoeuvre")


def echoes(detections: list[dict], fused: dict) -> dict:
    """Of the scored detections (``outcome``, ``window_start_unix``), per outcome and for the unmatched ones: how
    many are in a window whose prior is a post-burn re-fit (an echo across the window boundary), how many follow
    an earlier detection of the object in the same window, either, neither."""
    order = sorted(range(len(detections)), key=lambda i: (detections[i]["detected_at_unix"],
                                                          detections[i]["burn_after_unix"]))
    seen: set[tuple] = set()
    counts: dict[str, Counter] = defaultdict(Counter)
    for i in order:
        d = detections[i]
        key = (d["norad_id"], d["window_start_unix"])
        across = is_post_burn(window_prior(fused.get(d["norad_id"], ([], 0.0))[0], d["window_start_unix"]))
        within = key in seen
        seen.add(key)
        for group in (d["outcome"], "unmatched" if d["outcome"] != "matched" else None):
            if group is not None:
                counts[group].update(detections=1, after_post_burn_prior=across,
                                     after_earlier_detection_same_window=within, either=across or within)
    out = {g: {k: int(c[k]) for k in ("detections", "after_post_burn_prior", "after_earlier_detection_same_window",
                                      "either")} for g, c in counts.items()}
    for c in out.values():
        c["neither"] = c["detections"] - c["either"]
    empty = dict.fromkeys(("detections", "after_post_burn_prior", "after_earlier_detection_same_window", "either",
                           "neither"), 0)
    return {"unmatched": out.pop("unmatched", empty), "matched": out.pop("matched", empty),
            "by_outcome": dict(sorted(out.items()))}


def summarise(samples: list[dict], band: bool) -> dict:
    """The figures of one population's samples (dicts of ``k``: 0 at the epoch -- one per row --, 1.. the next
    passes; ``d2``, ``regime``, ``skipped``, ``error_m``, ``lead_h``, ``burn_in_fit``), and in
    ``without_true_burn_in_fit`` those of the rows whose fit spans no true burn (a re-fit that absorbed an
    undetected burn cannot be realistic: the detector's miss, not the covariance's)."""
    out = _figures(samples, band, detail=True)
    out["skipped_burn_before_next_pass"] = out["next_pass"]["skipped_burn_before_pass"]
    out["without_true_burn_in_fit"] = _figures([s for s in samples if not s["burn_in_fit"]], band, detail=False)
    return out


def _figures(samples: list[dict], band: bool, detail: bool) -> dict:
    at = [s for s in samples if s["k"] == 0]
    rows = len(at)
    out = {"rows": rows, "at_epoch": d2_figures([s["d2"] for s in at])}
    if detail:
        out["at_epoch"]["error_m"] = stats(s["error_m"] for s in at)
    for k in range(1, NEXT_PASSES + 1):
        own = [s for s in samples if s["k"] == k]
        kept = [s for s in own if not s["skipped"]]
        entry = {**d2_figures([s["d2"] for s in kept]), "skipped_burn_before_pass": len(own) - len(kept),
                 "no_such_pass": rows - len(own),
                 "by_regime": {r: d2_figures([s["d2"] for s in kept if s["regime"] == r])
                               for r in sorted({s["regime"] for s in kept} - {None})}}
        if detail:
            entry.update(lead_h=stats(s["lead_h"] for s in kept), error_m=stats(s["error_m"] for s in kept))
        if band and k == 1:
            share = entry["inside95"]
            entry["in_issue_band"] = None if share is None else bool(ISSUE_BAND[0] <= share <= ISSUE_BAND[1])
        out["next_pass" if k == 1 else f"pass_{k}"] = entry
    return out


# --- the truth, the fits and the predictions ------------------------------------------------------------------

def truth_ephemeris(catalog: Path, norad_ids):
    """The simulation's true ephemeris (its ``landing/_truth/*.summary.json`` beside ``catalog``)."""
    from sda.sim.truth import load_ephemeris

    summary = next((catalog.parent / "landing" / "_truth").glob("*.summary.json"))
    return load_ephemeris(summary, None, norad_ids)


def row_samples(norad: int, row: dict, passes: list[tuple], burn_times, eph, regime: str | None) -> list[dict]:
    """The row's samples (:func:`summarise`): its epoch and its next passes, the skipped ones without ``d2``."""
    from sda.orbit.estimation.predict import predict
    from sda.orbit.fusion.arcs import ArcSettings, result_from_row

    epoch = float(row["epoch_unix"])
    targets = pass_targets(epoch, passes, burn_times)
    times = [epoch] + [t for t in targets if t is not None]
    pred = predict(result_from_row(row), times, ArcSettings().config.noise)
    r_true, _ = eph.at_pairs(eph.rows([norad] * len(times)), np.asarray(times))
    start = float(row["fit_start_unix"])
    base = {"norad_id": norad, "window_start_unix": row["window_start_unix"], "epoch_unix": epoch, "regime": regime,
            "fit_span_h": (epoch - start) / 3600.0, "burn_in_fit": any(start < b <= epoch for b in burn_times)}
    out, j = [], 0
    for k, t in enumerate([epoch] + targets):
        if t is None:
            out.append({**base, "k": k, "skipped": True, "d2": None, "error_m": None, "lead_h": None})
            continue
        error = float(np.linalg.norm(pred.r_km[j] - r_true[j]) * 1000.0)
        out.append({**base, "k": k, "skipped": False, "d2": position_d2(pred.r_km[j], pred.covariance[j], r_true[j]),
                    "error_m": error, "lead_h": (t - epoch) / 3600.0})
        j += 1
    return out


def post_burn_realism(fused: dict, seen: dict, burns: list[dict], eph, regime_of: dict,
                      detections: list[dict]) -> tuple[dict, list[dict]]:
    """(the ``post_burn_realism`` figures, every sample) of one run (module docstring). ``seen``: per object its
    observations by the truth's labels; ``detections``: the scored ones."""
    from sda.orbit.times import unix_seconds

    t0 = time.perf_counter()
    burn_times = defaultdict(list)
    for b in burns:
        burn_times[b["norad_id"]].append(b["t_unix"])
    passes = {n: pass_middles(unix_seconds(g["event_time"]), g["sensor_id"].to_numpy()) for n, g in seen.items()}
    after, (reference, total) = post_burn_rows(fused), reference_rows(fused)
    done = [row_samples(n, r, passes.get(n, []), burn_times[n], eph, regime_of.get(n)) for n, r in after + reference]
    samples = [dict(s, population="post_burn" if i < len(after) else "reference") for i, rows in enumerate(done)
               for s in rows]
    figures = {"post_burn": summarise([s for s in samples if s["population"] == "post_burn"], True),
               "reference": {**summarise([s for s in samples if s["population"] == "reference"], False),
                             "rows_in_all": total},
               "echoes": echoes(detections, fused), "seconds": round(time.perf_counter() - t0, 1)}
    post = figures["post_burn"]["next_pass"]
    log(f"post-burn realism: {post['count']} next passes, inside95 {post['inside95']}, median d2 "
        f"{post['median_d2']}; reference inside95 {figures['reference']['next_pass']['inside95']}")
    return figures, samples
