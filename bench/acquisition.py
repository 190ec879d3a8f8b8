"""New-object acquisition against the simulator's hidden bodies (issue 39, point 4: the new-object half).

    .venv/bin/python bench/acquisition.py [--objects 150] [--hours 24] [--step-h 1] [--uncatalogued-share 0.05]
                                          [--seed 3] [--start 2026-11-20T00:00:00Z] [--work DIR] [--out FILE]

1. **Truth.** ``--hours`` of sensor files over ``--objects`` generated objects (element sets 0.5-3 days old,
   numerical trajectories); ``--uncatalogued-share`` of them and a launch (99911-99916, a few km apart) are in
   no catalogue: the *hidden bodies* (``*.events.json``), each of the regime of its true element set.
2. **The stages, emulated in event time** (:func:`emulate`, no Spark). At each step end T (every ``--step-h``)
   the rows with event time in (T - step, T] are correlated (sda.sim.scoring.correlate, 50 km gate,
   sda.orbit.sensors.sensor_sigmas(None)) against the catalogue plus the active provisional element sets; the
   rows held for want
   of an object inside the gate join the pool. The pool over ``acquire_lookback_h`` up to T, less the rows
   acquired already, goes to sda.orbit.acquisition.search.acquire; each new object gets its number
   (sda.pipeline.provisional.number_for) and element set (acquire.element_set), which correlation uses from the
   next step on; its rows leave the pool. Then (the stage's upkeep) the active objects not created at T are
   retired (unseen for ``acquire_retire_h``) or merged (another object, not seen beside it, follows it within
   ``acquire_merge_km``). The fuse stage's refit (bench/acquisition_stages.py; ``--no-refit``: none): an object
   seen for 3 h since its last fit is refitted to its rows of the last 6 h and its element set renewed. Left
   out: arrival order, and correlation by the fused orbit's covariance (the element set's model is used).
3. **Scoring** (:func:`score`). A provisional object is *of* the body holding at least half of its acquired
   rows (:func:`owner`; that share is its purity). Per hidden body: regime, first observation, passes (one
   sensor's rows with gaps <= 600 s, cut every 1200 s: manoeuvre.pass_index), when acquired (the step end T of
   its first object), delay from the first observation (h), the error of that object's fitted position and of
   its element set at the orbit's epoch against the true ephemeris (sda.sim.truth.load_ephemeris), whether the
   object was merged into another body's (``merged_wrongly``: its body is lost) and where its rows went. Overall,
   per regime and for LEO bodies seen in >= 3 passes: the share acquired within 6 h and 24 h of the first
   observation, over every observed body (one not acquired is missed even when the run ended before its window
   did: ``censored``); median and p90 delay and error. *False objects* (:func:`classify`): of no body (purity
   < 50 %), of a catalogued body, or a second object of a body acquired already (duplicate); each one's
   :func:`fate` 24 h after its creation: retired or merged before, survived, or undecided (the run ended first).

Targets: >= 90 % of the uncatalogued LEO bodies seen in >= 3 passes acquired within 24 h; no false object
surviving 24 h. Prints a line per body and false object, then one JSON line (also to ``--out``, with details).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
from common import RESULTS, add_dedup_flag, dedup_of, log, ratio, short_utc, stats, write_result

WITHIN_H = (6.0, 24.0)
SURVIVAL_H = 24.0
TARGET_SHARE, TARGET_PASSES, TARGET_REGIME = 0.9, 3, "LEO"
PASS_GAP_S, MAX_PASS_S = 600.0, 1200.0  # sda.orbit.manoeuvre.detection.ManoeuvreSettings' pass_gap_s, max_pass_s
STAGE_SETTINGS = ("acquire_lookback_h", "acquire_retire_h", "acquire_merge_km")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=150), p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--step-h", type=float, default=1.0, help="event time between two emulated stage runs")
    p.add_argument("--uncatalogued-share", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=3), p.add_argument("--start", default="2026-11-20T00:00:00Z")
    p.add_argument("--work", type=Path, default=None, help="simulation directory (default: a temporary one)")
    p.add_argument("--no-refit", action="store_true", help="never refit a provisional object (no fuse stage)")
    add_dedup_flag(p)
    p.add_argument("--out", type=Path, default=RESULTS / "acquisition.json")
    return p

# --- scoring (pure: the unit tests' business) ---------------------------------------------------------------

def owner(true_ids) -> tuple[int | None, float]:
    """(the body holding at least half of the observations, its share); (None, the largest share) when none
    does, (None, 0.0) for no observation. Unlabelled rows (None) count in the denominator only."""
    true_ids = list(true_ids)
    labels = [int(x) for x in true_ids if x is not None]
    if not labels:
        return None, 0.0
    body, k = min(Counter(labels).items(), key=lambda kv: (-kv[1], kv[0]))
    share = k / len(true_ids)
    return (body if share >= 0.5 else None), share


def classify(objects: list[dict], hidden: set[int]) -> list[str]:
    """Per provisional object (``body``, ``created``, ``founder``) its outcome, in creation order (then
    founder): 'impure' (no body holds half of it), 'catalogued body', 'duplicate' (its body has an object
    already), else 'acquired'. All but 'acquired' are false objects."""
    out = [""] * len(objects)
    seen: set[int] = set()
    for i in sorted(range(len(objects)), key=lambda i: (objects[i]["created"], objects[i]["founder"])):
        body = objects[i]["body"]
        out[i] = ("impure" if body is None else "catalogued body" if body not in hidden else
                  "duplicate" if body in seen else "acquired")
        seen.add(body)
    return out


def fate(obj: dict, run_end: float, horizon_h: float = SURVIVAL_H) -> str:
    """What became of an object ``horizon_h`` after its creation: 'retired' / 'merged' (its ``status``, ended
    at ``ended`` by then), 'survived' (still active then), or 'undecided' (active when the run ended first)."""
    limit = obj["created"] + horizon_h * 3600.0
    if obj.get("ended") is not None and obj["ended"] <= limit:
        return obj["status"]
    return "survived" if limit <= run_end else "undecided"


def score_bodies(bodies: dict[int, dict], objects: list[dict], run_end: float) -> list[dict]:
    """Per hidden body (``regime``, ``first_obs`` -- None: never observed -- and ``passes``): whether, when
    and how well it was acquired (module docstring, 3). ``objects`` carry their ``outcome``."""
    first = {o["body"]: o for o in objects if o["outcome"] == "acquired"}
    rows = []
    for n in sorted(bodies):
        b = bodies[n]
        row = {"norad_id": n, **b, "observed": b["first_obs"] is not None, "acquired": n in first,
               "duplicates": sum(o["outcome"] == "duplicate" and o["body"] == n for o in objects)}
        if (o := first.get(n)) is not None:
            row.update(provisional_id=o["norad_id"], acquired_at=o["created"],
                       delay_h=(o["created"] - b["first_obs"]) / 3600.0, pos_err_km=o.get("pos_err_km"),
                       lines_err_km=o.get("lines_err_km"), purity=o["purity"], object_passes=o["passes"],
                       status=o["status"], merged_wrongly=o.get("merged_wrongly", False))
        for h in WITHIN_H:
            row[f"within_{h:g}h"] = n in first and row["delay_h"] <= h
            row[f"censored_{h:g}h"] = (row["observed"] and not row[f"within_{h:g}h"]
                                       and b["first_obs"] + h * 3600.0 > run_end)
        rows.append(row)
    return rows


def group_figures(rows: list[dict]) -> dict:
    """Shares acquired within 6 h and 24 h (over the observed bodies: a body not acquired is missed), the
    windows the run cut short, delays and position errors of one group of scored bodies."""
    seen = [r for r in rows if r["observed"]]
    got = [r for r in seen if r["acquired"]]
    out = {"bodies": len(rows), "observed": len(seen), "acquired": len(got), "share": ratio(len(got), len(seen)),
           "merged_wrongly": sum(r.get("merged_wrongly", False) for r in got)}
    for h in WITHIN_H:
        k = f"{h:g}h"
        within, censored = sum(r[f"within_{k}"] for r in seen), sum(r[f"censored_{k}"] for r in seen)
        out[f"within_{k}"] = {"acquired": within, "share": ratio(within, len(seen)), "censored": censored,
                              "share_uncensored": ratio(within, len(seen) - censored)}
    return {**out, "delay_h": stats((r["delay_h"] for r in got), count=True),
            "pos_err_km": stats((r["pos_err_km"] for r in got), count=True),
            "lines_err_km": stats((r["lines_err_km"] for r in got), count=True)}


def targets(target_group: dict, fates: dict) -> dict:
    """The issue's two targets and whether the run shows them met ('not shown' / 'undecided' when too short)."""
    share, clean = target_group["within_24h"]["share"], target_group["within_24h"]["share_uncensored"]
    verdict = (None if share is None else "met" if share >= TARGET_SHARE else
               "not shown (the run cut windows short)" if clean is not None and clean >= TARGET_SHARE else "not met")
    survive = ("not met" if fates["survived"] else "met" if not fates["undecided"] else
               f"undecided ({fates['undecided']} false objects younger than 24 h at the run's end)")
    return {"leo_3_passes_within_24h": {"bodies": target_group["observed"], "share": share,
                                        "share_uncensored": clean, "target": TARGET_SHARE, "verdict": verdict},
            "no_false_object_surviving_24h": {"surviving": fates["survived"], "undecided": fates["undecided"],
                                              "verdict": survive}}


def score(bodies: dict[int, dict], objects: list[dict], run_end: float) -> dict:
    """Every figure of the bench (module docstring, 3); ``objects`` gain their ``outcome``, ``fate_24h`` and
    ``merged_wrongly`` (merged into an object of another body: a catalogued object is its own body)."""
    body_of = {o["norad_id"]: o["body"] for o in objects}
    for o, what in zip(objects, classify(objects, set(bodies))):
        o["outcome"], o["fate_24h"] = what, fate(o, run_end)
        into = o.get("merged_into")
        o["merged_wrongly"] = o["status"] == "merged" and body_of.get(into, into) != o["body"]
    rows = score_bodies(bodies, objects, run_end)
    target = group_figures([r for r in rows if r["regime"] == TARGET_REGIME and r["passes"] >= TARGET_PASSES])
    false = [o for o in objects if o["outcome"] != "acquired"]
    fates = {k: sum(o["fate_24h"] == k for o in false) for k in ("retired", "merged", "survived", "undecided")}
    return {"overall": group_figures(rows),
            "by_regime": {g: group_figures([r for r in rows if r["regime"] == g])
                          for g in sorted({r["regime"] for r in rows} - {None})},
            "leo_seen_3_passes": target, "targets": targets(target, fates),
            "false_objects": {"objects": len(objects), "false": len(false), "fate_24h": fates,
                              "by_outcome": dict(Counter(o["outcome"] for o in false))},
            "scored_bodies": rows}


# --- simulation and the emulated stages ---------------------------------------------------------------------

def simulate(args, work: Path):
    from sda.sim import simulate as sim
    from sda.sim.common import parse_time

    start = parse_time(args.start)
    cfg = sim.SimConfig(start=start, end=start + dt.timedelta(hours=args.hours), landing=work / "landing",
                        catalog_out=work / "catalog.tle", objects=args.objects, seed=args.seed, tle_age_days=(0.5, 3.0),
                        truth="numerical", uncatalogued_share=args.uncatalogued_share, launch=True)
    result = sim.simulate(cfg)
    events = next(result.truth_file.parent.glob("*.events.json"))
    return cfg, result, sorted(int(n) for n in json.loads(events.read_text())["uncatalogued"])


def truth_regimes(result, cfg, hidden: list[int]) -> dict[int, str]:
    """Each hidden body's regime from its true element set (module docstring, 1)."""
    from sgp4.api import WGS72, Satrec

    from sda.orbit.frames import perigee_apogee_km
    from sda.orbit.uncertainty import orbit_regime
    from sda.sim.events import launch_entries

    lines = {int(Satrec.twoline2rv(a, b).satnum): (a, b) for _, a, b in launch_entries(cfg.start, cfg.seed)}
    orbits = result.summary_file.parent.parent / json.loads(result.summary_file.read_text())["tle_error"]["orbits_file"]
    for row in map(json.loads, orbits.read_text().splitlines()):
        lines[int(row["norad_id"])] = tuple(row["true"])
    return {n: orbit_regime(*perigee_apogee_km(Satrec.twoline2rv(*lines[n], WGS72))) if n in lines else None
            for n in hidden}


def object_truth(em, eph) -> None:
    """Each provisional object's body, purity and position errors at its epoch (module docstring, 3)."""
    from sda.orbit import frames

    true_id = em.obs["true_id"]
    label = {i: None if pd.isna(b) else int(b) for i, b in zip(em.obs["obs_id"], true_id)}
    for o in em.objects:
        o["body"], o["purity"] = owner(label[i] for i in o["obs_ids"])
        later = em.fate == f"correlated:{o['norad_id']}"
        o["correlated_purity"] = ratio(int((true_id[later] == o["body"]).fillna(False).sum()), int(later.sum()))
        o["pos_err_km"] = o["lines_err_km"] = None
        if o["body"] is not None and o["body"] in set(int(n) for n in eph.norad):
            r_true, _ = eph.at_pairs(eph.rows([o["body"]]), [o["epoch"]])
            _, r_lines, _ = frames.propagate([o["acquired_satrec"]], np.array([o["epoch"]]))
            o["pos_err_km"] = float(np.linalg.norm(np.asarray(o["state_m"][:3]) / 1000.0 - r_true[0]))
            o["lines_err_km"] = float(np.linalg.norm(r_lines[0, 0] - r_true[0]))


def hidden_bodies(em, hidden: list[int], regimes: dict[int, str]) -> dict[int, dict]:
    """Per hidden body: regime, first observation (unix s; None: never observed), passes in the run, and where
    its rows went (acquired / to a provisional or a catalogued object / held in the pool / held otherwise)."""
    from sda.orbit.manoeuvre.detection import pass_index
    from sda.pipeline.provisional import FIRST_NUMBER, NUMBERS

    def where(fate: str, acquired: bool) -> str:
        to = int(fate.split(":")[1]) if fate.startswith("correlated:") else None
        return ("acquired" if acquired else "pool" if fate == "held" else "held otherwise" if to is None else
                "provisional" if FIRST_NUMBER <= to < FIRST_NUMBER + NUMBERS else "catalogued")

    out = {}
    for n in hidden:
        mine = (em.obs["true_id"] == n).fillna(False).to_numpy(bool)
        t = em.t[mine]
        out[n] = {"regime": regimes.get(n), "observations": int(mine.sum()),
                  "first_obs": float(t.min()) if len(t) else None,
                  "passes": int(pass_index(t, em.obs["sensor_id"].to_numpy()[mine], PASS_GAP_S, MAX_PASS_S).max()) + 1
                  if len(t) else 0, "rows": dict(Counter(map(where, em.fate[mine], em.acquired[mine])))}
    return out


def report(figures: dict, objects: list[dict]) -> None:
    """A line per hidden body and per false object."""
    km = lambda x: "-" if x is None or not math.isfinite(x) else f"{x:.2f}"  # noqa: E731
    for b in figures["scored_bodies"]:
        what = ("never observed" if not b["observed"] else f"first {short_utc(b['first_obs'])}, " + (
            f"acquired {short_utc(b['acquired_at'])} as {b['provisional_id']} after {b['delay_h']:.1f} h, error "
            f"{km(b['pos_err_km'])} km (element set {km(b['lines_err_km'])}), purity {b['purity']:.2f}, {b['status']}"
            f"{' WRONGLY' if b['merged_wrongly'] else ''}, {b['duplicates']} duplicates" if b["acquired"] else
            "not acquired"))
        log(f"body {b['norad_id']} ({b['regime']}) {b['observations']} obs in {b['passes']} passes: {what}; rows "
            f"{b['rows']}")
    for o in (o for o in objects if o["outcome"] != "acquired"):
        log(f"false {o['outcome']:15s} {o['norad_id']} created {short_utc(o['created'])} of {o['body']} (purity "
            f"{o['purity']:.2f}, {o['observations']} obs, {o['passes']} passes): {o['status']} "
            f"{o['merged_into'] or ''}, 24 h: {o['fate_24h']}")


def main(argv=None) -> dict:
    args = parser().parse_args(argv)
    from acquisition_stages import Emulation, emulate

    from sda.config.settings import load_settings
    from sda.orbit.sensors import load_sensors
    from sda.sim import scoring
    from sda.sim.truth import load_ephemeris

    started = time.perf_counter()
    settings = load_settings()
    with tempfile.TemporaryDirectory(prefix="sda-bench-acquisition-") as tmp:
        work = args.work or Path(tmp)
        cfg, result, hidden = simulate(args, work)
        sim_s = time.perf_counter() - started
        log(f"simulated {args.hours:g} h of {args.objects} objects in {sim_s:.0f} s")
        obs = scoring.landed_observations(result, load_sensors(), dedup=dedup_of(args))
        ids, sats = scoring.catalogue(result.catalog_file)
        lines = scoring.catalogue_lines(result.catalog_file)
        regimes = truth_regimes(result, cfg, hidden)
        eph = load_ephemeris(result.summary_file)
    em = Emulation(obs, ids, sats, lines, settings, refit=not args.no_refit)
    log(f"{len(obs)} observations, {len(hidden)} hidden bodies ({int(obs['true_id'].isin(hidden).sum())} of them)")
    run_end = cfg.end.timestamp()
    emulate(em, cfg.start.timestamp(), run_end, args.step_h * 3600.0)
    object_truth(em, eph)
    figures = score(hidden_bodies(em, hidden, regimes), em.objects, run_end)
    report(figures, em.objects)
    summary = {"bench": "acquisition", "objects": args.objects, "hours": args.hours, "step_h": args.step_h,
               "refit": not args.no_refit, "dedup": dedup_of(args),
               "seed": args.seed, "uncatalogued_share": args.uncatalogued_share, "observations": len(obs),
               "hidden_bodies": len(hidden), "provisional_objects": len(em.objects),
               "stage_settings": {k: getattr(settings, k) for k in STAGE_SETTINGS},
               **{k: v for k, v in figures.items() if k != "scored_bodies"},
               "timing_s": {"simulate": round(sim_s, 1), **{k: round(v, 1) for k, v in em.timing.items()},
                            "acquire_per_step": stats((s["acquire_s"] for s in em.steps), count=True),
                            "pool_per_step": stats((s["pool"] for s in em.steps), count=True),
                            "total": round(time.perf_counter() - started, 1)}}
    detail = {**summary, "body_list": figures["scored_bodies"], "step_list": em.steps,
              "object_list": [{k: v for k, v in o.items() if k not in ("satrec", "acquired_satrec", "obs_ids")}
                              for o in em.objects]}
    write_result(args.out, detail, summary, indent=1, default=float)
    return summary


if __name__ == "__main__":
    main()
