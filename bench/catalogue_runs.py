"""Does the service keep up with the catalogue? The steady state of every stage, run after run, on slices of
the real catalogue of three sizes or more, and the whole catalogue's 15-minute batch extrapolated from them
(issue 50, point 4).

    .venv/bin/python bench/catalogue_runs.py [--sizes 500,1000,2000] [--warm-hours 6] [--runs 8]
                                             [--seed 13] [--reuse] [--work DIR] [--out FILE]

Per size N: ``bench/fusion_runs.py --catalogue reference --objects N``: the whole catalogue
(../shared/data/catalog, 13,286 usable element sets, 0.5-3 days old) is loaded and screened, and the simulated
network (the kind sky's; numerical truth) observes a random N-object slice of it, so the screening's cost is
the whole catalogue's and the stages that follow the observations grow with N:
the first run takes ``--warm-hours`` of sensors at once, then ``--runs`` 15-minute micro-batches follow, each
running every stage of the DAG in sequence up to the conjunction screening and its alerts (Airflow and the
quality gates not in the loop), on a Spark Connect server of its own (fresh per size, so its memory peak is
that size's). Per size: the medians over the runs after the first of each stage's seconds and their sum,
objects refitted and renewed per run, alerts, and the memory peaks.

The extrapolation: per stage, a power law ``t = c * N^p`` (least squares in log-log; ``p`` near 0 is a fixed
cost, 1 linear, above 1 growing faster than the slice) and a straight line ``t = a + b * N`` (a fixed cost and
one per object) through the sizes' median seconds, each evaluated at the whole catalogue's 13,407 objects all
observed, and the larger of the two taken; their sum against the target of 600 s (the batch must finish well
inside its 15 minutes). ``extrapolated`` takes the medians over the eight runs, most of them in the first
90 minutes of a fit window (the runs' fits still shorter than the screening's 90-minute rule: no screening
element set propagated); ``extrapolated_late`` the mean of the last two (13:45 and 14:00, once the fits pass it):
the dearer half of a window. ``per_object_ms``: a size's median seconds of the observation stages (ingest to
acquire) per observed object (it falls as the fixed costs spread); flat: the power law of those stages' seconds
grows no faster than N^1.1. What it leaves out: the quality gates and Airflow's task overheads
(``bench/latency.py``), the sky's disorder (no late, duplicate or malformed files), harsher skies, and a
catalogue whose observed objects are all fused (the slices' first window is their only one).

Prints a line per run and, last, one JSON line; the same JSON goes to ``--out`` (default
``bench/results/catalogue_runs.json``). Exits with status 2 when ../shared/data is absent.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import fusion_runs
import numpy as np
from common import CATALOG_DIR, REFERENCE_FILES, RESULTS, WORK, log, write_result

CATALOGUE_OBJECTS = 13_407  # ../shared/data/catalog, both files
TARGET_S = 600.0
LATE_RUNS = 2  # of the 8 after the warm-up: 13:45 and 14:00, once the 12:00 window's fits pass 90 minutes


def sizes(text: str) -> list[int]:
    try:
        out = sorted({int(x) for x in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated object counts, e.g. 500,1000,2000")
    if len(out) < 3 or out[0] < 50 or out[-1] > CATALOGUE_OBJECTS:
        raise argparse.ArgumentTypeError(f"{text!r}: at least three different sizes, each in [50, {CATALOGUE_OBJECTS}]")
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=sizes, default=sizes("500,1000,2000"))
    p.add_argument("--warm-hours", type=float, default=6.0)
    p.add_argument("--runs", type=int, default=8, help="15-minute micro-batches after the warm-up (at least 8)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--reuse", action="store_true",
                   help="take a size's results from an earlier run in --work (<work>/<N>.json, same seed, warm-up "
                        "and runs) instead of running it again")
    p.add_argument("--work", type=Path, default=WORK / "catalogue_runs")
    p.add_argument("--out", type=Path, default=RESULTS / "catalogue_runs.json")
    return p


def power_law(ns: list[int], seconds: list[float], at: int) -> dict:
    """``t = c * N^p`` through the points (least squares in log-log), and its value at ``at``."""
    t = np.maximum(np.asarray(seconds, float), 1e-3)
    p, log_c = np.polyfit(np.log(np.asarray(ns, float)), np.log(t), 1)
    return {"exponent": round(float(p), 3), "at_catalogue_s": round(float(np.exp(log_c) * at ** p), 1)}


def summary(result: dict) -> dict:
    """One size's figures: the medians over the runs after the first."""
    keep = ("objects", "simulate_s", "median_fuse_objects", "median_renewed", "median_fuse_share",
            "fuse_s_per_object", "median_fuse_conjunction_s_per_object", "runs_measured")
    out = {k: result[k] for k in keep}
    later = result["runs"][1:]
    stages = [k[:-2] for k in later[0] if k.endswith("_s") and k != "total_s"]
    out["median_stage_s"] = {stage: round(float(np.median([r[f"{stage}_s"] for r in later])), 2) for stage in stages}
    out["median_total_s"] = round(float(np.median([r["total_s"] for r in later])), 2)
    out["alerts"] = {k: sum(r[k] for r in later) for k in fusion_runs.ALERT_KEYS}
    out["memory"] = result["runs"][-1]["memory"]
    # the runs whose window's fits span 90 minutes or more (each refit then also propagates its screening
    # element set, and renewals bring focus screenings): the last LATE_RUNS, 1 h 45 min into the window
    late = later[-LATE_RUNS:]
    out["late_stage_s"] = {stage: round(float(np.mean([r[f"{stage}_s"] for r in late])), 2) for stage in stages}
    out["late_total_s"] = round(float(np.mean([r["total_s"] for r in late])), 2)
    out["late_renewed"] = round(float(np.mean([r["renewed"] for r in late])), 1)
    observing = sum(s for stage, s in out["median_stage_s"].items() if stage != "conjunction")
    out["per_object_ms"] = round(1000 * observing / result["objects"], 2)
    out["runs"] = [{k: r[k] for k in ("run", "total_s", "fuse_objects", "renewed", "events", "catalogue")}
                   for r in result["runs"]]
    return out


def linear(ns: list[int], seconds: list[float], at: int) -> dict:
    """``t = a + b * N`` through the points (least squares): a fixed cost and one per object, and its value at
    ``at``."""
    b, a = np.polyfit(np.asarray(ns, float), np.asarray(seconds, float), 1)
    return {"fixed_s": round(float(a), 1), "per_object_ms": round(1000 * float(b), 2),
            "at_catalogue_s": round(float(a + b * at), 1)}


def extrapolate(per_size: list[dict], at: int = CATALOGUE_OBJECTS, key: str = "median_stage_s") -> dict:
    """Per stage the larger of the two models at ``at`` (a power law through fixed-cost-dominated small sizes
    under-reads a linear growth, a straight line under-reads a faster one); their sum against the target."""
    ns = [s["objects"] for s in per_size]
    stages = {}
    for stage in per_size[0][key]:
        seconds = [s[key][stage] for s in per_size]
        power, line = power_law(ns, seconds, at), linear(ns, seconds, at)
        stages[stage] = {"power_law": power, "linear": line,
                         "at_catalogue_s": max(power["at_catalogue_s"], line["at_catalogue_s"])}
    total = round(sum(v["at_catalogue_s"] for v in stages.values()), 1)
    observing = power_law(ns, [s["per_object_ms"] * s["objects"] / 1000 for s in per_size], at)
    return {"objects": at, "stages": stages, "total_s": total, "target_s": TARGET_S, "met": total <= TARGET_S,
            "per_object_ms": [s["per_object_ms"] for s in per_size],
            "observing_exponent": observing["exponent"], "per_object_flat": observing["exponent"] <= 1.1}


def earlier(path: Path, seed: int, warm_hours: float, hours: float) -> dict | None:
    """A size's results from an earlier run of the same seed, warm-up and span, or None."""
    try:
        one = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    same = (one.get("catalogue"), one.get("seed"), one.get("warm_hours"), one.get("hours"))
    return one if same == ("reference", seed, warm_hours, hours) else None


def main(argv=None) -> dict:
    args = parser().parse_args(argv)
    if args.runs < 8:
        sys.exit("--runs: at least 8 micro-batches after the warm-up (issue 50, point 4)")
    missing = [f for f in REFERENCE_FILES if not (CATALOG_DIR / f).exists()]
    if missing:
        print(f"bench/catalogue_runs.py: the reference catalogue is absent ({CATALOG_DIR}: {', '.join(missing)})",
              file=sys.stderr)
        sys.exit(2)
    hours = args.warm_hours + args.runs * 0.25
    per_size = []
    for n in args.sizes:
        one = earlier(Path(f"{args.work}/{n}.json"), args.seed, args.warm_hours, hours) if args.reuse else None
        log(f"--- {n} objects{': the results of an earlier run' if one else ''} ---")
        if one is None:
            one = fusion_runs.main(["--catalogue", "reference", "--objects", str(n), "--warm-hours",
                                    str(args.warm_hours), "--hours", str(hours), "--seed", str(args.seed),
                                    "--work", f"{args.work}/{n}", "--out", f"{args.work}/{n}.json"])
        per_size.append(summary(one))
    result = {"catalogue": [f"../shared/data/catalog/{f}" for f in REFERENCE_FILES], "seed": args.seed,
              "warm_hours": args.warm_hours, "runs_after_warm_up": args.runs, "cadence_minutes": 15,
              "airflow_in_loop": False, "quality_gates_in_loop": False, "sky": "kind",
              "sizes": per_size, "extrapolated": extrapolate(per_size),
              "extrapolated_late": extrapolate(per_size, key="late_stage_s")}
    write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
