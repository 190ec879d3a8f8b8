"""bench/manoeuvres.py's simulation and detection (its docstring, 1 and 3): the truth written by the simulator,
kept for reuse (``--work``), and the fuse stage's per-object fit in worker processes."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import multiprocessing
import pickle
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from common import dedup_of, log

from sda.config.settings import Settings

LINES_MIN_SPAN_S = Settings.fusion_min_span_s  # the fuse stage's (settings.fusion_min_span_s, its default)


def simulate(args, work: Path):
    from sda.sim.common import parse_time
    from sda.sim.simulate import SimConfig
    from sda.sim.simulate import simulate as run

    start = parse_time(args.start)
    cfg = SimConfig(start=start, end=start + dt.timedelta(hours=args.hours), landing=work / "landing",
                    catalog_out=work / "catalog.tle", objects=args.objects, seed=args.seed, tle_age_days=(0.5, 3.0),
                    truth="numerical", manoeuvre_share=args.manoeuvre_share, manoeuvre_rate=args.manoeuvre_rate,
                    sky=args.sky)
    t = time.perf_counter()
    result = run(cfg)
    log(f"simulated {args.hours:g} h of {args.objects} objects in {time.perf_counter() - t:.0f} s")
    events = result.truth_file.with_suffix(".events.json")
    if not events.is_file():  # the simulator writes none without events (--manoeuvre-share 0: no burn)
        events = next(result.truth_file.parent.glob("*.events.json"), None)
    burns = json.loads(events.read_text())["manoeuvres"] if events is not None else []
    return cfg, result, sorted(burns, key=lambda b: (b["t_unix"], b["norad_id"]))


def simulated(args, work: Path) -> tuple:
    """(observations reaching correlation, burns, the run's end, simulation seconds, the catalogue file): simulated
    into a subdirectory of ``work`` named by the arguments, or read back from there when an earlier run with the
    same arguments left it (``--work``: the pipeline-associated and ``--truth-labels`` runs share one simulation)."""
    from sda.orbit.sensors import load_sensors
    from sda.sim import scoring

    name = (f"objects{args.objects}-{args.hours:g}h-share{args.manoeuvre_share:g}-rate{args.manoeuvre_rate:g}-"
            f"{args.sky}-{dedup_of(args)}-dedup-seed{args.seed}-{args.start.replace(':', '')}")
    root = work / name
    kept = root / "simulation.pkl"
    if kept.is_file():
        log(f"reusing the simulation in {root}")
        return (*pickle.loads(kept.read_bytes()), root / "catalog.tle")
    root.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    cfg, result, burns = simulate(args, root)
    landed = scoring.landed_observations(result, load_sensors(), dedup=dedup_of(args))
    value = (landed, burns, cfg.end.timestamp(), time.perf_counter() - t)
    kept.write_bytes(pickle.dumps(value))
    return (*value, root / "catalog.tle")


#: what the scoring keeps of a fused row: the windows, the detections, and the orbit (bench/manoeuvres_realism.py)
ROW_KEYS = ("window_start_unix", "window_end_unix", "epoch_unix", "fit_start_unix", "status", "prior_source",
            "observations", "manoeuvres", "reassociated_ids", "x_km", "y_km", "z_km", "vx_kms", "vy_kms", "vz_kms",
            "b_m2_kg", "covariance", "rms", "iterations")


def _fuse_one(job: tuple) -> tuple[int, list[dict], float]:
    from sda.orbit.fusion.arcs import ArcSettings, fuse_object

    norad, obs, line1, line2, sigmas = job
    t = time.perf_counter()
    rows = fuse_object(norad, obs, None, line1, line2, sigmas, ArcSettings(lines_min_span_s=LINES_MIN_SPAN_S))
    return norad, [{k: r[k] for k in ROW_KEYS} for r in rows], time.perf_counter() - t


def fuse_all(groups: dict, lines: dict, workers: int) -> dict[int, tuple[list[dict], float]]:
    """norad -> (its fused rows, seconds), every object fused over all its observations at once."""
    from sda.orbit.estimation import registry_sigmas
    from sda.orbit.estimation.measurements import FIT_COLUMNS
    from sda.orbit.sensors import load_sensors

    sigmas = registry_sigmas(load_sensors())
    jobs = [(n, g[list(FIT_COLUMNS) + ["candidate"]].reset_index(drop=True), *lines[n], sigmas)
            for n, g in groups.items()]
    jobs.sort(key=lambda j: -len(j[1]))  # the longest first: the pool's tail stays short
    out = {}
    spawn = multiprocessing.get_context("spawn")  # not forked (bench/correlation_tracking.py: held locks)
    with ProcessPoolExecutor(workers, mp_context=spawn) if workers > 1 else contextlib.nullcontext() as pool:
        for k, (norad, rows, seconds) in enumerate((pool.map if pool else map)(_fuse_one, jobs), 1):
            out[norad] = (rows, seconds)
            if k % 25 == 0 or k == len(jobs):
                log(f"fused {k}/{len(jobs)} objects")
    return out


def detections_of(fused: dict) -> list[dict]:
    keep = ("burn_after_unix", "burn_before_unix", "burn_time_unix", "detected_at_unix", "dv_r_ms", "dv_t_ms",
            "dv_n_ms", "dv_ms", "dv_sigma_ms", "log10_p", "passes", "observations_after", "reassociated")
    return sorted(({"norad_id": n, "window_start_unix": r["window_start_unix"], **{k: m[k] for k in keep}}
                   for n, (rows, _) in fused.items() for r in rows for m in r["manoeuvres"]),
                  key=lambda d: (d["detected_at_unix"], d["norad_id"]))
