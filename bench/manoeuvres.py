"""Manoeuvre detection against the simulator's burns (issue 39, point 4: the manoeuvre half).

    .venv/bin/python bench/manoeuvres.py [--objects 150] [--hours 24] [--manoeuvre-share 0.3]
                                         [--manoeuvre-rate 3] [--sky harsh] [--truth-labels] [--workers 2]
                                         [--seed 3] [--start 2026-11-20T00:00:00Z] [--work DIR] [--out FILE]

1. **Truth** (steps 1-3: bench/manoeuvres_run.py). The simulator writes ``--hours`` of radar, optical and ISL
   files over ``--objects`` generated objects whose element sets are 0.5-3 days old, under the sky ``--sky``
   (sda.sim.sky; the service's default, ``harsh``: sensor biases the detector is not told of), on numerical
   trajectories (sda.sim.dynamics) in which
   ``--manoeuvre-share`` of the bodies burn at ``--manoeuvre-rate`` per day (sda.sim.events: impulsive, 0.05-2
   m/s log-uniform; GEO ones keep station). The burns are the truth's ``*.events.json``.
2. **Association.** By default the pipeline's own (bench/manoeuvres_windows.py): arc window after arc window, the
   correlate stage's decision on the element sets, then the fuse stage's re-association against the fused orbits of the
   windows before (sda.orbit.correlation.reassociation.retest, the wider pass included); rows held for want of a
   catalogue object inside the gate that name a fitted object become its ``candidate`` rows (as the fuse stage
   reads them, sda.pipeline.manoeuvres.held_observations). With ``--truth-labels`` the truth's labels instead
   (perfect association: the figures isolate detection). ``association`` in the output says which, with the
   correlation's figures against the truth.
3. **Detection.** Per object, sda.orbit.fusion.arcs.fuse_object (6 h windows, the stage's ``lines_min_span_s``),
   ``--workers`` processes: window by window, as decided; with ``--truth-labels`` over all its observations at
   once (the result does not depend on the run split, so one call is the stage's steady state). A window whose
   prior is the catalogue (the first) is not tested. ``--work DIR`` keeps the simulation (named by the arguments)
   and a later run with the same arguments reuses it.
4. **Scoring** (:func:`score`). A burn is *testable* when it is after its object's first fitted window's
   epoch (its last observation: the catalogue-prior fit, not tested, has not absorbed it); the others are
   counted apart. A detection matches a burn of its object whose time is inside its
   bracket widened by :data:`SLACK_S` (each burn once, to the earliest detection; of several burns in one
   bracket, the one nearest the estimated burn time). Per true delta-v bin and per regime (the element
   set's): testable burns, detected, recall; precision = matched / all detections (per bin, the detections
   are binned by their *estimated* delta-v); delay (detected_at - burn, hours) and passes after the burn
   until detection (the object's passes -- one sensor's observations with gaps <= 600 s, cut every 1200 s,
   sda.orbit.manoeuvre.detection.pass_index -- starting after the burn and complete at detected_at, the end of
   the detection's last pass: another sensor's pass under way then is not counted); |dv| and
   burn-time errors; the share of matched burns inside the unwidened bracket. A detection matching nothing
   is a *duplicate* when its bracket holds an already matched burn; a *late bracket* / *after untested
   burn* when the object's newest burn before its bracket is a testable / untestable one nothing matched
   or explained yet (a real burn, mis-bracketed; counted apart, not as recall: :func:`classify`); else
   *false*. False detections per 1,000 object-days on objects that never burn, their days being their
   tested span (from their first fit's epoch to their last tested window's end, clipped to the run), with
   a one-sided 95 % Poisson upper bound. A missed burn that shares a detection's bracket with a detected one,
   no pass of the object starting between them, is one in the *same gap* (:func:`same_gap`): nothing
   observed the orbit between the two, so no estimator can tell them apart; the target's figure is given
   strictly and counting such a group once.
5. **Post-burn realism** (``post_burn_realism``, bench/manoeuvres_realism.py; issue 52, point 2, "no echoes"). Each
   converged window row holding a detection (its orbit: the re-fit after its last detection, the next window's
   prior) is predicted to the middle observation of each of its object's next three passes after its epoch, and
   ``d^2`` of the true position error under the predicted 3x3 position covariance is scored (bench/accuracy_stats.py:
   realistic is chi-square(3), 0.95 inside the 95 % ellipsoid; ``in_issue_band``: the next pass's share inside
   0.90-0.99, as the issue measured), overall and per regime; ``reference``: the same for at most 400 tested
   windows without a detection; ``at_epoch``: at the row's own epoch; ``without_true_burn_in_fit``: all again for
   the rows whose fit spans no true burn (one that absorbed a missed burn is the detector's failing, not the
   covariance's). A pass with a true burn of the object between the epoch and the pass's end is skipped
   (counted). ``echoes``: the detections matching no burn that are in a window whose prior is a post-burn re-fit,
   or that follow a detection of the object earlier in its window (``matched`` beside them: the same counts of the
   true ones). It leaves out: the pass's other times (one per pass), the velocity, and what the detector's pass
   test adds (the sensors' noise and geometry: it scores the orbit against the truth, not the test); the rows of
   one object are not independent, and GEO and MEO have few.

Targets (issue 52): of the LEO burns >= 0.5 m/s followed by at least two passes, >= 0.95 detected within two passes
(``leo_dv_ge_0.5_within_2_passes``; every regime's figures beside it); <= 1 false detection per 1,000 quiet
object-days, over at least 2,000 of them (``--manoeuvre-share 0``), the upper bound beside it.
Prints a line per detection, miss and false alarm and, last, one JSON line; the same JSON with every
burn and detection goes to ``--out`` (default ``bench/results/manoeuvres.json``).
"""

from __future__ import annotations

import argparse
import bisect
import math
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import seeds
from common import RESULTS, add_dedup_flag, dedup_of, log, ratio, short_utc, stats, write_result

from sda.sim.sky import SKIES

SLACK_S = 120.0
DEV_SEEDS = seeds.development_seeds()  # bench/seeds.py: the seeds the detector (or anything else) was developed on
BINS = ((0.05, 0.1), (0.1, 0.2), (0.2, 0.5), (0.5, 1.0), (1.0, 2.0))
TARGET_DV_MS, TARGET_PASSES, TARGET_FALSE_PER_1000 = 0.5, 2, 1.0
TARGET_LEO_SHARE = 0.95  # of LEO burns >= TARGET_DV_MS followed by two passes, detected within two passes
TARGET_QUIET_DAYS = 2000.0  # the false-detection rate's point estimate counts over at least this many
OUTCOMES = {"late_bracket": "late bracket", "after_untested_burn": "after untested burn", "duplicate": "duplicate",
            "false": "false"}  # the unmatched detections' outcomes (classify)
PASS_GAP_S, MAX_PASS_S = 600.0, 1200.0  # sda.orbit.manoeuvre.detection.ManoeuvreSettings' pass_gap_s, max_pass_s


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=150)
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--manoeuvre-share", type=float, default=0.3)
    p.add_argument("--manoeuvre-rate", type=float, default=3.0, help="burns per manoeuvring body and day")
    p.add_argument("--sky", choices=SKIES, default="harsh", help="the simulated sky (sda.sim.sky; default harsh)")
    p.add_argument("--truth-labels", action="store_true", help="associate by the truth's labels, not the pipeline")
    add_dedup_flag(p)
    p.add_argument("--correlate", action="store_true",
                   help="the pipeline's association: the default (accepted: commands recorded before it was)")
    p.add_argument("--workers", type=int, default=2)
    dev = ", ".join(map(str, DEV_SEEDS))
    p.add_argument("--seed", type=int, default=3, help=f"simulation seed; the detector was developed on {dev}: "
                   "report on others")
    p.add_argument("--start", default="2026-11-20T00:00:00Z")
    p.add_argument("--work", type=Path, default=None, help="simulation directory (default: a temporary one)")
    p.add_argument("--out", type=Path, default=RESULTS / "manoeuvres.json")
    return p


# --- scoring (pure: the unit tests' business) ---------------------------------------------------------------

def dv_bin(dv_ms: float) -> str:
    """The delta-v bin's label ('0.05-0.1' ... '1-2'; '<0.05', '>2' outside); the last bin holds 2 itself."""
    for k, (lo, hi) in enumerate(BINS):
        if lo <= dv_ms < hi or (k == len(BINS) - 1 and dv_ms == hi):
            return f"{lo:g}-{hi:g}"
    return f"<{BINS[0][0]:g}" if dv_ms < BINS[0][0] else f">{BINS[-1][1]:g}"


def pass_spans(t, sensor) -> list[tuple[float, float]]:
    """An object's passes (sda.orbit.manoeuvre.detection.pass_index's), (first time, last time), by first time."""
    from sda.orbit.manoeuvre.detection import pass_index

    t = np.asarray(t, float)
    if len(t) == 0:
        return []
    label = pass_index(t, np.asarray(sensor), PASS_GAP_S, MAX_PASS_S)
    return sorted((float(t[label == k].min()), float(t[label == k].max())) for k in range(int(label.max()) + 1))


def pass_starts(t, sensor) -> list[float]:
    """The sorted first times of an object's passes."""
    return [a for a, _ in pass_spans(t, sensor)]


def passes_between(starts: list[float], after: float, upto: float) -> int:
    """How many passes start after ``after`` and at or before ``upto``."""
    return max(0, bisect.bisect_right(starts, upto) - bisect.bisect_right(starts, after))


def passes_done(spans: list[tuple[float, float]], after: float, upto: float) -> int:
    """How many passes start after ``after`` and end at or before ``upto``: the ones complete at a detection
    (another sensor's pass still under way when it was decided is not one it used)."""
    return sum(a > after and b <= upto for a, b in spans)


def match(detections: list[dict], burns: list[dict]) -> dict[int, int]:
    """{detection index: burn index}: each burn to the earliest detection of its object whose bracket
    (widened by :data:`SLACK_S`) holds it; of several unmatched burns in a bracket, the nearest the estimate."""
    taken: set[int] = set()
    out: dict[int, int] = {}
    for i in sorted(range(len(detections)), key=lambda i: detections[i]["detected_at_unix"]):
        d = detections[i]
        inside = [j for j, b in enumerate(burns) if j not in taken and b["norad_id"] == d["norad_id"]
                  and _inside(b["t_unix"], d)]
        if inside:
            j = min(inside, key=lambda j: abs(burns[j]["t_unix"] - d["burn_time_unix"]))
            out[i] = j
            taken.add(j)
    return out


def score_burns(burns: list[dict], detections: list[dict], objects: dict[int, dict]) -> tuple[list, list]:
    """Each burn and each detection with its score (module docstring, 4). ``objects``: per norad_id its
    ``regime``, ``first_end`` (its first fitted window's epoch; None: never fitted), ``starts`` (pass starts) and
    ``windows`` ((start, end, status, prior_source) of its fitted windows: a burn's ``window_prior`` is the prior
    of the first one ending after it)."""
    pairs = match(detections, burns)
    by_burn = {j: i for i, j in pairs.items()}
    scored_burns = []
    for j, b in enumerate(burns):
        obj = objects.get(b["norad_id"], {})
        first_end, starts = obj.get("first_end"), obj.get("starts", [])
        row = {**b, "regime": obj.get("regime"), "bin": dv_bin(b["dv_ms"]),
               "testable": first_end is not None and b["t_unix"] > first_end,
               "untestable_why": None if first_end is not None else "never fitted",
               "passes_after": passes_between(starts, b["t_unix"], math.inf), "detected": j in by_burn,
               "window_prior": next((w[3] for w in obj.get("windows", []) if w[1] > b["t_unix"]), None)}
        if first_end is not None and not row["testable"]:
            row["untestable_why"] = "before the first fit's epoch"
        if j in by_burn:
            d = detections[by_burn[j]]
            est = np.array([d["dv_r_ms"], d["dv_t_ms"], d["dv_n_ms"]])
            row.update(delay_h=(d["detected_at_unix"] - b["t_unix"]) / 3600.0,
                       passes_to_detect=passes_done(obj.get("spans", [(a, a) for a in starts]), b["t_unix"],
                                                    d["detected_at_unix"]),
                       dv_est_ms=d["dv_ms"], dv_abs_err_ms=abs(d["dv_ms"] - b["dv_ms"]),
                       dv_vec_err_ms=float(np.linalg.norm(est - np.asarray(b["dv_rtn_ms"]))),
                       burn_time_err_s=abs(d["burn_time_unix"] - b["t_unix"]),
                       in_bracket=d["burn_after_unix"] <= b["t_unix"] <= d["burn_before_unix"])
        scored_burns.append(row)
    outcomes = classify(detections, burns, pairs, [b["testable"] for b in scored_burns])
    scored_dets = []
    for d, (what, j) in zip(detections, outcomes):
        if what == "late bracket":
            late_h = (d["detected_at_unix"] - burns[j]["t_unix"]) / 3600.0
            scored_burns[j].update(late_bracket=True, late_delay_h=late_h)
        scored_dets.append({**d, "regime": objects.get(d["norad_id"], {}).get("regime"), "bin": dv_bin(d["dv_ms"]),
                            "outcome": what, "burn_t_unix": None if j is None else burns[j]["t_unix"]})
    for b in scored_burns:  # why a testable burn was missed
        if b["testable"] and not b["detected"]:
            shared = any(d["norad_id"] == b["norad_id"] and _inside(b["t_unix"], d) for d in detections)
            b["missed_why"] = ("no pass after it" if not b["passes_after"] else "late bracket" if b.get("late_bracket")
                               else "shares a bracket" if shared else "not detected")
            if shared:
                starts = objects.get(b["norad_id"], {}).get("starts", [])
                b["same_gap_as"] = same_gap(b, scored_burns, detections, starts)
    return scored_burns, scored_dets


def same_gap(b: dict, burns: list[dict], detections: list[dict], starts: list[float]) -> int | None:
    """The index of a detected burn of ``b``'s object inside the same detection's bracket with no pass of the
    object starting between the two: nothing observed the orbit between them, so no estimator can tell them
    apart (the detection's delta-v is their sum); None if there is none."""
    for j, other in enumerate(burns):
        if other is b or other["norad_id"] != b["norad_id"] or not other["detected"]:
            continue
        lo, hi = sorted((b["t_unix"], other["t_unix"]))
        together = any(d["norad_id"] == b["norad_id"] and _inside(lo, d) and _inside(hi, d) for d in detections)
        if together and passes_between(starts, lo, hi) == 0:
            return j
    return None


def _inside(t: float, d: dict) -> bool:
    """``t`` inside the detection's bracket widened by :data:`SLACK_S`."""
    return d["burn_after_unix"] - SLACK_S <= t <= d["burn_before_unix"] + SLACK_S


def classify(detections: list[dict], burns: list[dict], pairs: dict[int, int], testable: list[bool]) -> list[tuple]:
    """Per detection (outcome, burn index or None): 'matched'; else 'duplicate' (its widened bracket holds a
    burn matched already); else, when the object's newest burn before the bracket is one no detection has
    matched or explained yet, 'late bracket' (a testable burn: real, but the bracket opens after it -- the
    first passes after a small burn were not yet suspicious) or 'after untested burn' (one in a window
    nothing tested, e.g. the first, whose fit absorbed it); else 'false'."""
    explained = set(pairs.values())
    out: list[tuple] = [("false", None)] * len(detections)
    for i in sorted(range(len(detections)), key=lambda i: detections[i]["detected_at_unix"]):
        d = detections[i]
        if i in pairs:
            out[i] = ("matched", pairs[i])
            continue
        own = [j for j, b in enumerate(burns) if b["norad_id"] == d["norad_id"]]
        if any(_inside(burns[j]["t_unix"], d) for j in own):
            out[i] = ("duplicate", None)
            continue
        lo = d["burn_after_unix"] - SLACK_S
        j = max((j for j in own if burns[j]["t_unix"] < lo), key=lambda j: burns[j]["t_unix"], default=None)
        if j is not None and j not in explained:
            explained.add(j)
            out[i] = ("late bracket" if testable[j] else "after untested burn", j)
    return out


def group_figures(burns: list[dict], detections: list[dict]) -> dict:
    """Recall, precision, delays, passes and errors of one group of scored burns and detections."""
    testable = [b for b in burns if b["testable"]]
    found = [b for b in testable if b["detected"]]
    matched = sum(d["outcome"] == "matched" for d in detections)
    return {"burns": len(burns), "testable": len(testable), "detected": len(found),
            "recall": ratio(len(found), len(testable)),
            "testable_with_2_passes_after": sum(b["passes_after"] >= 2 for b in testable),
            "detections": len(detections), "matched": matched, "precision": ratio(matched, len(detections)),
            **{key: sum(d["outcome"] == what for d in detections) for key, what in OUTCOMES.items()},
            "testable_late_bracket": sum(b.get("late_bracket", False) for b in testable),
            "testable_next_window_untested": sum(b["window_prior"] == "catalogue" for b in testable),
            "missed_why": dict(Counter(b["missed_why"] for b in testable if not b["detected"])),
            "delay_h": stats(b["delay_h"] for b in found),
            "passes_to_detect": stats(b["passes_to_detect"] for b in found),
            "dv_abs_err_ms": stats(b["dv_abs_err_ms"] for b in found),
            "dv_rel_err": stats(b["dv_abs_err_ms"] / b["dv_ms"] for b in found),
            "burn_time_err_h": stats(b["burn_time_err_s"] / 3600.0 for b in found),
            "in_bracket_share": ratio(sum(b["in_bracket"] for b in found), len(found))}


def false_rate(detections: list[dict], objects: dict[int, dict], burned: set[int]) -> dict:
    """False detections per 1,000 object-days over the objects that never burn (their tested span)."""
    from scipy import stats

    quiet = [n for n in objects if n not in burned]
    days = sum(objects[n].get("tested_s", 0.0) for n in quiet) / 86400.0
    k = sum(d["outcome"] == "false" and d["norad_id"] not in burned for d in detections)
    upper = float(stats.chi2.ppf(0.95, 2 * (k + 1)) / 2.0)  # one-sided 95 % Poisson bound on the count
    return {"objects": len(quiet), "objects_tested": sum(objects[n].get("tested_s", 0.0) > 0 for n in quiet),
            "object_days": round(days, 2), "false": k,
            "per_1000_object_days": round(1000.0 * k / days, 2) if days else None,
            "upper95_per_1000_object_days": round(1000.0 * upper / days, 2) if days else None,
            "false_on_burning_objects": sum(d["outcome"] == "false" and d["norad_id"] in burned for d in detections)}


def targets(burns: list[dict], rate: dict) -> dict:
    """The issue's two targets, and whether the run shows them met (honestly: 'not shown' when too few days)."""
    big = [b for b in burns if b["testable"] and b["dv_ms"] >= TARGET_DV_MS]
    fast = [b for b in big if b["detected"] and b["passes_to_detect"] <= TARGET_PASSES]
    seen = [b for b in big if b["passes_after"] >= TARGET_PASSES]
    share = ratio(len(fast), len(big))
    # a missed burn in the same unobserved gap as one detected in time counts with it (:func:`same_gap`)
    in_time = [b for b in big if b in fast or (b.get("same_gap_as") is not None and burns[b["same_gap_as"]]["detected"]
                                              and burns[b["same_gap_as"]]["passes_to_detect"] <= TARGET_PASSES)]
    grouped = len(in_time)
    per, upper = rate["per_1000_object_days"], rate["upper95_per_1000_object_days"]
    verdict = ("not met" if per is not None and per > TARGET_FALSE_PER_1000 else
               "met" if per is not None and rate["object_days"] >= TARGET_QUIET_DAYS else
               f"not shown (fewer than {TARGET_QUIET_DAYS:,.0f} quiet object-days)")
    leo = [b for b in seen if b["regime"] == "LEO"]
    leo_share = ratio(sum(b in fast for b in leo), len(leo))
    return {"dv_ge_0.5_within_2_passes": {"testable": len(big), "within": len(fast), "share": share, "met": (
                share == 1.0 if big else None), "of_those_with_2_passes_after": ratio(
                sum(b in fast for b in seen), len(seen)), "within_counting_one_per_gap": grouped,
                "share_counting_one_per_gap": ratio(grouped, len(big)),
                "of_those_with_2_passes_after_counting_one_per_gap": ratio(sum(b in in_time for b in seen),
                                                                            len(seen))},
            "leo_dv_ge_0.5_within_2_passes": {"burns_with_2_passes_after": len(leo),
                                              "within": sum(b in fast for b in leo),
                                              "share": leo_share, "target": TARGET_LEO_SHARE,
                                              "met": None if leo_share is None else leo_share >= TARGET_LEO_SHARE},
            "false_per_1000_object_days": {"value": per, "upper95": upper, "target": TARGET_FALSE_PER_1000,
                                           "object_days": rate["object_days"], "verdict": verdict}}


def score(burns: list[dict], detections: list[dict], objects: dict[int, dict]) -> dict:
    """Every figure of the bench from the truth's burns, the detections and the objects (module docstring, 4)."""
    sb, sd = score_burns(burns, detections, objects)
    burned = {b["norad_id"] for b in burns}
    labels = [f"{lo:g}-{hi:g}" for lo, hi in BINS]
    by = lambda key, v: group_figures([b for b in sb if b[key] == v], [d for d in sd if d[key] == v])  # noqa: E731
    by_bin = {label: by("bin", label) for label in labels + sorted({d["bin"] for d in sd} - set(labels))}
    by_regime = {r: by("regime", r) for r in sorted({o.get("regime") for o in objects.values()} - {None})}
    untestable = dict(Counter(b["untestable_why"] for b in sb if not b["testable"]))
    rate = false_rate(sd, objects, burned)
    return {"overall": group_figures(sb, sd), "by_dv_bin": by_bin, "by_regime": by_regime,
            "untestable": untestable, "false_detections": rate, "targets": targets(sb, rate),
            "scored_burns": sb, "scored_detections": sd}


def object_facts(rows: list[dict], seen, regime: str, run_end: float) -> dict:
    """What the scoring needs of one object: regime, first fitted window's epoch, tested span, and the starts of
    the passes in which the sensors saw it (``seen``: its observations by the truth's labels)."""
    from sda.orbit.times import unix_seconds

    facts = {"regime": regime, "first_end": rows[0]["epoch_unix"] if rows else None, "tested_s": 0.0,
             "spans": pass_spans(unix_seconds(seen["event_time"]), seen["sensor_id"].to_numpy()),
             "windows": [(r["window_start_unix"], r["window_end_unix"], r["status"], r["prior_source"]) for r in rows]}
    facts["starts"] = [a for a, _ in facts["spans"]]
    tested = [r for r in rows if r["prior_source"] != "catalogue"]
    if tested:
        facts["tested_s"] = max(0.0, min(run_end, tested[-1]["window_end_unix"]) - facts["first_end"])
    return facts


def report(figures: dict) -> None:
    """A line per detection, missed testable burn and false alarm."""
    def at(t: float) -> str:
        return short_utc(t, seconds=True)

    for d in figures["scored_detections"]:
        log(f"{d['outcome']:9s} {d['norad_id']} ({d['regime']}) detected {at(d['detected_at_unix'])}, bracket "
            f"{at(d['burn_after_unix'])}..{at(d['burn_before_unix'])}, est {d['dv_ms']:.3f} m/s at "
            f"{at(d['burn_time_unix'])}, log10 p {d['log10_p']:.1f}, {d['passes']} passes"
            + (f"; true burn {at(d['burn_t_unix'])}" if d["burn_t_unix"] else ""))
    for b in figures["scored_burns"]:
        if b["testable"] and not b["detected"]:
            log(f"missed    {b['norad_id']} ({b['regime']}) burn {at(b['t_unix'])} {b['dv_ms']:.3f} m/s "
                f"{b['dv_rtn_ms']} ({b['kind']}), {b['passes_after']} passes after it: {b['missed_why']}"
                + (" (same gap as a detected burn)" if b.get("same_gap_as") is not None else ""))


def main(argv=None) -> dict:
    args = parser().parse_args(argv)
    from manoeuvres_realism import post_burn_realism, truth_ephemeris
    from manoeuvres_run import detections_of, fuse_all, simulated
    from manoeuvres_windows import associate_and_fuse

    from sda.orbit.frames import perigee_apogee_km
    from sda.orbit.uncertainty import orbit_regime
    from sda.sim import scoring

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sda-bench-manoeuvres-") as tmp:
        obs, burns, run_end, sim_s, catalog = simulated(args, Path(tmp) if args.work is None else args.work)
        ids, sats = scoring.catalogue(catalog)
        lines = scoring.catalogue_lines(catalog)
        eph = truth_ephemeris(catalog, ids)
    regime_of = {n: orbit_regime(*perigee_apogee_km(s)) for n, s in zip(ids, sats)}
    log(f"{len(obs)} observations, {len(burns)} burns of {len({b['norad_id'] for b in burns})} objects")
    t = time.perf_counter()
    association = {"association": "truth labels"}
    if not args.truth_labels:  # the correlate stage's decision and the fuse stage's re-association, window after window
        fused, association = associate_and_fuse(obs, ids, sats, lines, args.workers)
        association["association"] = "the pipeline's correlation and re-association"
    else:
        assoc = obs[obs["true_id"].notna() & obs["true_id"].isin(ids)]
        groups = {int(n): g for n, g in assoc.assign(norad_id=assoc["true_id"].astype("int64"), candidate=False)
                  .groupby("norad_id") if int(n) in lines}
        fused = fuse_all(groups, lines, args.workers)
    fuse_s = time.perf_counter() - t
    seen = {int(n): g for n, g in obs[obs["true_id"].notna()].groupby("true_id")}
    objects = {n: object_facts(fused[n][0] if n in fused else [], seen.get(n, obs.iloc[:0]), regime_of[n], run_end)
               for n in ids}
    figures = score(burns, detections_of(fused), objects)
    report(figures)
    realism, samples = post_burn_realism(fused, seen, burns, eph, regime_of, figures["scored_detections"])
    seconds = [s for _, s in fused.values()]
    summary = {"bench": "manoeuvres", "objects": args.objects, "hours": args.hours, "sky": args.sky, "seed": args.seed,
               "dedup": dedup_of(args),
               "development_seed": args.seed in DEV_SEEDS, "manoeuvre_share": args.manoeuvre_share,
               "manoeuvre_rate": args.manoeuvre_rate,
               **association, "observations": len(obs), "objects_fused": len(fused), "burns": len(burns),
               **{k: v for k, v in figures.items() if not k.startswith("scored_")}, "post_burn_realism": realism,
               "timing_s": {"simulate": round(sim_s, 1), "fuse": round(fuse_s, 1), "workers": args.workers,
                            "fuse_per_object": stats(seconds), "total": round(time.perf_counter() - started, 1)}}
    detail = {**summary, "burn_list": figures["scored_burns"], "detection_list": figures["scored_detections"],
              "object_list": {n: {**{k: v for k, v in o.items() if k not in ("starts", "spans")},
                                  "passes": len(o["starts"])} for n, o in objects.items()},
              "realism_list": [{k: round(v, 4) if isinstance(v, float) else v for k, v in s.items()}
                               for s in samples if s["population"] == "post_burn"]}  # the reference's: too many
    write_result(args.out, detail, summary, indent=None, default=float)  # compact: every burn and detection listed
    return summary


if __name__ == "__main__":
    main()
